"""Logs read by their structure (issue 45), the fourth set of classes seen in real public logs that were misread or
refused. Each on a small file written here (no real log), each rule on generated cases (hypothesis), and beside each a
file that is not the class and is not read as it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.ingested import FAST as _FAST
from tests.support.ingested import column, evals_at, imported, write
from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ingest.textlog.facts import _glog_stamp
from yieldgate.ingest.textlog.kv import read_counted
from yieldgate.ingest.textlog.prose import names_then_values
from yieldgate.ledger import Ledger

# -- 1. launches appended under a repeated banner; a count within the epoch on a cadence of the whole run -------------


@dataclass
class _Launch:
    """One launch of a pytorch-CycleGAN-like loop: `size` images an epoch, a line every `every` images of the run."""

    size: int
    epochs: int
    every: int = 100
    last: int | None = None  # the run's count of images at which it stops (its crash), else after its epochs


def _cyclegan(launches: list[_Launch], banner_first: bool = True) -> tuple[str, list[dict[int, float]]]:
    """pytorch-CycleGAN's loss_log.txt: a banner at each launch, then `(epoch: E, iters: I, ...) D_A: ...` where I is
    the images within the epoch and a line is printed where the run's count is a multiple of `every`; and, per launch,
    {step (the run's count of images): D_A}."""
    lines, truth = [], []
    for n, launch in enumerate(launches):
        lines.append(f"================ Training Loss (Fri Jun {11 + n} 1{n}:00:07 2021) ================")
        total, mine = 0, {}
        for epoch in range(1, launch.epochs + 1):
            for i in range(1, launch.size + 1):
                total += 1
                if launch.last is not None and total > launch.last:
                    break
                if total % launch.every == 0:
                    d_a = round(0.5 / (1 + total / 1000) + 0.05 * n, 3)  # launches apart (no second writer)
                    lines.append(
                        f"(epoch: {epoch}, iters: {i}, time: 0.857, data: 0.002) D_A: {d_a:.3f} G_A: 0.660 "
                        f"cycle_A: 1.700 idt_A: 0.559 D_B: 0.181 G_B: 0.271 cycle_B: 1.211 idt_B: 0.764 "
                    )
                    mine[total] = d_a
        truth.append(mine)
    if not banner_first:
        lines = lines[1:]
    return "\n".join(lines) + "\n", truth


def _with_extras(path):
    """(core steps, {extra key: {step: value}}, warnings) of `path` imported into a new in-memory ledger."""
    with Ledger(":memory:") as led:
        (res,) = import_run(led, "auto", [str(path)], ImportOptions(run="r"))
        long = led.extras("r")
        extras: dict[str, dict[int, float]] = {}
        for step, key, value in long[["step", "key", "value"]].itertuples(index=False):
            extras.setdefault(key, {})[int(step)] = float(value)
        return led.steps("r"), extras, res.warnings


def _restarts(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "recorded as a resume event" in w]


def test_cyclegan_s_loss_log_reads_each_launch_from_its_banner_with_its_components_as_extras(tmp_path):
    # launches as in the real loss_log.txt: one that logged 5 lines, one that logged once, two that ran on, the last
    # two epochs of a dataset whose size is not a multiple of the interval
    launches = [_Launch(2975, 1, last=500), _Launch(2975, 1, last=100), _Launch(2975, 2, last=4000), _Launch(9522, 2)]
    text, truth = _cyclegan(launches)
    steps, extras, warnings = _with_extras(write(tmp_path, "loss_log.txt", text))
    assert len(_restarts(warnings)) == 3  # the launch that logged at the step the one before stopped at included
    assert any("a new launch the log marks begins again at step 100" in w for w in warnings)
    stored = extras["imported/d_a"]
    assert {s: stored[s] for s in truth[-1]} == truth[-1]  # the last launch at the run's own count of images
    assert max(stored) == 19000  # epoch 2 of 9,522 images, its last line at the run's 19,000th
    assert steps["loss"].isna().all()  # no invented total of the components
    assert {"imported/g_a", "imported/cycle_b", "imported/idt_b"} <= set(extras)


@pytest.mark.slow
@_FAST
@given(
    sizes=st.lists(st.integers(150, 700).filter(lambda s: s % 25), min_size=1, max_size=3),
    epochs=st.integers(2, 4),
    every=st.sampled_from([25, 50]),
    data=st.data(),
)
def test_launches_under_a_banner_are_restarts_and_a_shifted_grid_gives_the_epoch(
    tmp_path_factory, sizes, epochs, every, data
):
    """Whatever the dataset's size (never a multiple of the interval: then no grid shifts, and an epoch's size cannot be
    told) and the launches, every launch after the first is
    a restart, and the last one's rows are at the run's count of images (the epochs' sizes told by the shifted grid)."""
    launches = [_Launch(size, epochs, every) for size in sizes[:-1]] + [_Launch(sizes[-1], epochs, every)]
    stops = data.draw(st.lists(st.booleans(), min_size=len(launches) - 1, max_size=len(launches) - 1))
    for launch, stop in zip(launches[:-1], stops, strict=True):
        launch.last = every if stop else None  # a launch that logged once, at the first logging step
    text, truth = _cyclegan(launches)
    _, extras, warnings = _with_extras(write(tmp_path_factory.mktemp("cg"), "loss_log.txt", text))
    assert len(_restarts(warnings)) == len(launches) - 1
    stored = extras["imported/d_a"]
    assert {s: stored[s] for s in truth[-1]} == truth[-1]


def test_a_banner_that_comes_again_while_the_step_runs_on_marks_no_restart(tmp_path):
    """Not the class: a banner printed again where the counters go on (a launch that continues the epochs, as
    `--continue_train --epoch_count 3` does) is no restart, and the rows stay in order."""
    first, _ = _cyclegan([_Launch(475, 2)])
    again = "\n".join(
        line.replace("(epoch: 1,", "(epoch: 3,").replace("(epoch: 2,", "(epoch: 4,") for line in first.splitlines()
    )
    steps, _, warnings = imported(write(tmp_path, "loss_log.txt", first + again.replace("Jun 11", "Jun 12") + "\n"))
    assert not _restarts(warnings)
    assert steps["step"].is_monotonic_increasing and len(steps) == len(set(steps["step"]))


def test_an_epoch_logged_on_its_own_grid_keeps_its_largest_count(tmp_path):
    """Not the class: a count logged every 100 within each epoch and at the epoch's last iteration (its own cadence,
    the grid the same in each epoch) is sized by its largest count, not by a shift."""
    lines = []
    for epoch in (1, 2, 3):
        for i in [*range(100, 476, 100), 475]:
            lines.append(f"(epoch: {epoch}, iters: {i}, time: 0.1, data: 0.0) loss: {1 / (epoch * 1000 + i):.6f}")
    steps, _, _ = imported(write(tmp_path, "train.log", "\n".join(lines) + "\n"))
    assert sorted(column(steps, "loss")) == [e * 475 + i for e in (0, 1, 2) for i in (100, 200, 300, 400, 475)]


# -- 2. counters that are never printed on one record do not nest -----------------------------------------------------


def _apart(epochs: int, size: int, every: int) -> str:
    """An epoch printed on a line of its own values (`epoch: 0, lr: 0.1`), the count within it on others
    (`[10/250] loss: 1.9`): the two never share a record (WS-DAN's `Start epoch 0 ...,lr=0.001` beside `[10/250]`)."""
    lines = []
    for e in range(epochs):
        lines.append(f"epoch: {e}, lr: {0.1 / (e + 1):.4f}")
        lines += [f"[{i}/{size}] loss: {2.0 / (1 + e + i / size):.4f}" for i in range(0, size, every)]
    return "\n".join(lines) + "\n"


def test_counters_never_on_one_record_are_refused_in_a_line_not_a_crash(tmp_path):
    """Before, the nesting of the two took the smallest count of no rows and raised a ValueError (exit 1, a
    traceback); the counts start again at each epoch line, which no reading can place: refused in one line."""
    with pytest.raises(InputError, match="implausible"):
        imported(write(tmp_path, "train.log", _apart(2, 20, 10)))


@_FAST
@given(epochs=st.integers(2, 5), size=st.integers(2, 60), every=st.integers(1, 10))
def test_counters_apart_are_read_or_refused_whatever_their_sizes(tmp_path_factory, epochs, size, every):
    try:
        steps, _, _ = imported(write(tmp_path_factory.mktemp("apart"), "train.log", _apart(epochs, size, every)))
    except InputError:
        return  # refused in a line: an error the CLI prints, not a crash
    assert steps["step"].is_monotonic_increasing


def test_a_count_within_an_epoch_on_the_epoch_s_record_still_nests(tmp_path):
    """Not the class: the epoch and the count on one record (`epoch: 1 [10/250] loss: ...`) nest as before."""
    lines = [f"epoch: {e} [{i}/50] loss: {1 / (e * 50 + i + 1):.5f}" for e in (1, 2) for i in (10, 20, 30, 40, 50)]
    steps, _, _ = imported(write(tmp_path, "train.log", "\n".join(lines) + "\n"))
    assert sorted(column(steps, "loss")) == [(e - 1) * 50 + i for e in (1, 2) for i in (10, 20, 30, 40, 50)]


# -- 3. a count and its total after a name is a progress pair, not the name's value -----------------------------------


def test_a_split_s_progress_pair_is_not_a_value(tmp_path):
    """WS-DAN's (and PyTorch's ImageNet example's) evaluation batches, `Test: [10/242]\\tTime ... Loss ...`: `Test`
    is no metric of value 10; before, 97 rows of an extra `test` were imported from them."""
    assert "test" not in (read_counted("Test: [10/242]\tTime 0.646 (0.634)\tLoss 7.5117 (5.1709)") or {})
    lines = [f"Test: [{i}/242]\tTime 0.6 (0.6)\tLoss 4.9 (5.0)" for i in range(0, 242, 10)]
    with pytest.raises(InputError):
        imported(write(tmp_path, "eval.log", "\n".join(lines) + "\n"))


_COUNTER_WORDS = {"step", "steps", "iter", "iters", "iteration", "iterations", "it", "epoch", "epochs", "ep", "batch"}
_COUNTER_WORDS |= {"cost", "loss", "global_step", "completed_step", "num_updates", "up", "upd"}


@_FAST
@given(
    key=st.from_regex(r"[A-Za-z][a-z_]{0,9}", fullmatch=True).filter(lambda k: k.lower() not in _COUNTER_WORDS),
    n=st.integers(0, 10**6),
    total=st.integers(1, 10**6),
    bracket=st.booleans(),
    loss=st.floats(0.001, 10.0),
)
def test_no_count_of_a_total_is_read_as_a_value(key, n, total, bracket, loss):
    pair = f"[{n}/{total}]" if bracket else f"{n}/{total}"
    read = read_counted(f"step: 7 {key}: {pair} loss: {loss:.4f}") or {}
    assert read.get(key.lower()) is None
    assert read.get("loss") == pytest.approx(float(f"{loss:.4f}"))


def test_a_bracketed_value_and_a_rate_are_still_values():
    """Not the class: DeepSpeed's `lr=[0.0001]` and a unit after a slash (`tokens/s`) stay values."""
    assert read_counted("steps: 100 loss: 3.4567 lr=[0.0001]")["lr"] == pytest.approx(1e-4)
    assert read_counted("step: 3 loss: 2.5 tok/s: 1200")["tokens_per_s"] == 1200


# -- 4. a timestamp of month and day without a year is the clock ------------------------------------------------------


def _d2(seconds: list[int], start: tuple[int, int, int] = (11, 17, 15 * 3600)) -> str:
    """detectron2's events lines, logging's `[%m/%d %H:%M:%S]` before each."""
    month, day, base = start
    lines = []
    for k, s in enumerate(seconds):
        t = base + s
        stamp = f"[{month:02d}/{day + t // 86400:02d} {t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}]"
        lines.append(
            f"{stamp} d2.utils.events INFO:  eta: 1:00:00  iter: {20 * k + 19}  total_loss: {1 / (k + 1):.4f}  "
            f"time: 0.6826  data_time: 0.0791  lr: 0.0002  max_mem: 11810M"
        )
    return "\n".join(lines) + "\n"


def test_detectron2_s_bracketed_month_day_stamps_are_the_clock(tmp_path):
    steps, _, warnings = imported(write(tmp_path, "log.txt", _d2([0, 14, 27, 41])))
    assert column(steps, "wall_s") == {19: 0.0, 39: 14.0, 59: 27.0, 79: 41.0}
    assert column(steps, "step_s") == dict.fromkeys((19, 39, 59, 79), 0.6826)  # the per-iteration time beside them


@_FAST
@given(
    gaps=st.lists(st.integers(1, 7200), min_size=2, max_size=30),
    month=st.integers(1, 11),
    day=st.integers(1, 20),
    start=st.integers(0, 86399),
)
def test_month_day_stamps_give_the_seconds_between_records(tmp_path_factory, gaps, month, day, start):
    """Whatever the day and time the log starts (within a year: no year is printed), the clock is the seconds since
    its first record, across midnight and month days."""
    seconds = np.cumsum([0, *gaps]).tolist()
    steps, _, _ = imported(write(tmp_path_factory.mktemp("d2"), "log.txt", _d2(seconds, (month, day, start))))
    assert list(column(steps, "wall_s").values()) == pytest.approx(seconds)


def test_a_progress_pair_or_a_dated_stamp_is_not_read_as_a_month_and_day(tmp_path):
    """Not the class: `[03/30] 12:00:00`-like counts without a time are no stamps, and where a line has a dated stamp
    the dated stamps are the clock (a year is needed to mix the two)."""
    assert _glog_stamp("[03/30][50/390] loss: 2.1") is None
    assert _glog_stamp("03/30 loss: 2.1 time: 12:00:00") is None
    text = "2024-11-17 15:16:00,000 INFO start\n" + _d2([0, 30])
    steps, _, _ = imported(write(tmp_path, "log.txt", text))
    assert "wall_s" not in steps or steps["wall_s"].isna().all() or set(column(steps, "wall_s")) <= {19, 39}


# -- 5. several records of one epoch with no count within it: the steps count epochs ----------------------------------


def _per_epoch(means: list[list[float]], accs: list[float] | None = None) -> str:
    """A loop that prints its running mean loss a few times an epoch beside the epoch alone (`Epoch: 3| train loss:
    0.41`), and perhaps a validation line after each epoch."""
    lines = ["Training..."]
    for e, epoch in enumerate(means, start=1):
        lines += [f"Epoch: {e}| train loss: {v}" for v in epoch]
        if accs is not None:
            lines.append(f"Epoch: {e}| val_acc: {accs[e - 1]}")
    return "\n".join(lines) + "\n"


def test_records_that_print_only_the_epoch_are_read_at_each_epoch_s_last(tmp_path):
    means = [[0.56, 0.47, 0.42], [0.16, 0.15, 0.14], [0.08, 0.08, 0.07]]
    steps, evals, warnings = imported(write(tmp_path, "train.log", _per_epoch(means, [0.86, 0.90, 0.93])))
    assert column(steps, "loss") == {1: 0.42, 2: 0.14, 3: 0.07}
    assert {s: v for (k, s), v in evals_at(evals).items() if k == "val/acc"} == {1: 0.86, 2: 0.9, 3: 0.93}
    assert any("records print the epoch and no count within it" in w and "steps count epochs" in w for w in warnings)
    assert not any("logged again" in w or "second writer" in w for w in warnings)


@_FAST
@given(
    means=st.lists(
        st.lists(st.floats(0.001, 9.0).map(lambda v: round(v, 4)), min_size=2, max_size=6), min_size=2, max_size=8
    )
)
def test_each_epoch_is_its_last_record_whatever_the_records_per_epoch(tmp_path_factory, means):
    steps, _, warnings = imported(write(tmp_path_factory.mktemp("ep"), "train.log", _per_epoch(means)))
    assert column(steps, "loss") == {e: epoch[-1] for e, epoch in enumerate(means, start=1)}
    assert sum("steps count epochs" in w for w in warnings) == 1


def test_one_record_an_epoch_or_a_count_within_it_is_not_the_class(tmp_path):
    """Not the class: one line an epoch is read as before (no warning of several), and a count within the epoch
    (`Epoch: 3| iter: 20| train loss: ...`) nests into steps as before."""
    steps, _, warnings = imported(write(tmp_path, "one.log", _per_epoch([[0.5], [0.4], [0.3]])))
    assert column(steps, "loss") == {1: 0.5, 2: 0.4, 3: 0.3}
    assert not any("no count within it" in w for w in warnings)
    lines = [f"Epoch: {e}| iter: {i}/10| train loss: {1 / (e * 10 + i):.5f}" for e in (1, 2) for i in (5, 10)]
    steps, _, warnings = imported(write(tmp_path, "nested.log", "\n".join(lines) + "\n"))
    assert sorted(column(steps, "loss")) == [5, 10, 15, 20]
    assert not any("no count within it" in w for w in warnings)


# -- 6. a value in a sentence after its counter ------------------------------------------------------------------------


def test_a_validation_sentence_after_its_epoch_is_an_evaluation(tmp_path):
    """`Epoch 1: Val acc is 86.0026%` (a mobilenetv2 liveness repo's train.log): before, no evaluation was read."""
    text = _per_epoch([[0.5, 0.4], [0.3, 0.2]]) + "Epoch 1: Val acc is 86.0026%\nEpoch 2: Val acc is 90.9464%\n"
    _, evals, _ = imported(write(tmp_path, "train.log", text))
    assert evals_at(evals) == {("val/acc_pct", 1): 86.0026, ("val/acc_pct", 2): 90.9464}
    assert set(evals["higher_is_better"]) == {True}


@_FAST
@given(
    counter=st.sampled_from(["Epoch", "epoch", "Iteration", "Step"]),
    n=st.integers(0, 10**6),
    name=st.sampled_from(["Val acc", "loss", "validation loss", "test accuracy"]),
    value=st.floats(0.0, 1000.0).map(lambda v: round(v, 4)),
    sep=st.sampled_from([":", ",", " |", " -"]),
    pct=st.booleans(),
)
def test_counter_first_sentences_read_their_value_and_counter(counter, n, name, value, sep, pct):
    read = read_counted(f"{counter} {n}{sep} {name} is {value}{'%' if pct else ''}")
    key = name.lower().replace(" ", "_") + ("_pct" if pct else "")
    assert read is not None and read[key] == value
    assert read["step"] == n


def test_prose_that_goes_on_after_the_number_is_not_a_value():
    """Not the class: `Epoch 3: the model is 5 layers deep` states a fact with a number inside a sentence."""
    assert read_counted("Epoch 3: the model is 5 layers deep") is None
    assert "model" not in (read_counted("Epoch 3: the model is 5 layers deep, loss: 0.2") or {})


# -- 7. a batch's loss is the training loss ----------------------------------------------------------------------------


def test_a_batch_loss_is_the_training_loss(tmp_path):
    """`Epoch 3 - Batch loss: 0.52` (a T5 fine-tuning script's train.log): before, no training loss was read, only an
    extra `batch_loss`."""
    text = "".join(f"2025-03-02 05:16:{10 + i:02d},348 - INFO - step {i} - Batch loss: {9 - i:.4f}\n" for i in range(8))
    steps, _, warnings = imported(write(tmp_path, "train.log", text))
    assert column(steps, "loss") == {i: 9.0 - i for i in range(8)}
    assert not any("none of its" in w for w in warnings)


@_FAST
@given(spelling=st.sampled_from(["batch_loss", "Batch loss", "batch-loss", "BATCH_LOSS"]), n=st.integers(2, 20))
def test_every_spelling_of_a_batch_loss_is_the_loss(tmp_path_factory, spelling, n):
    text = "".join(f"step: {i} {spelling}: {1 / (i + 1):.5f}\n" for i in range(n))
    steps, _, _ = imported(write(tmp_path_factory.mktemp("bl"), "train.log", text))
    assert column(steps, "loss") == {i: round(1 / (i + 1), 5) for i in range(n)}


def test_a_validation_batch_loss_or_a_loss_beside_it_is_not_taken(tmp_path):
    """Not the class: `val_batch_loss` is an evaluation's; where a `loss` is printed too, `loss` keeps the name."""
    text = "".join(
        f"step: {i} loss: {2 - i / 10:.2f} batch_loss: {3 - i / 10:.2f} val_batch_loss: 1.5\n" for i in range(4)
    )
    steps, evals, _ = imported(write(tmp_path, "train.log", text))
    assert column(steps, "loss") == {i: round(2 - i / 10, 2) for i in range(4)}
    assert set(evals_at(evals)) == {("val/batch_loss", i) for i in range(4)}


# -- 8. a line of names, then a line of as many values: one row of a table ---------------------------------------------


def _copypaste(aps: list[list[float]], names: list[str], task: str | None = "bbox") -> str:
    """detectron2's log: events lines every 20 iterations, and after each 100 its evaluator's `copypaste:` lines."""
    lines, k = [], 0
    for row in aps:
        for _ in range(5):
            lines.append(
                f"[11/17 15:{k // 60:02d}:{k % 60:02d}] d2.utils.events INFO:  iter: {20 * k + 19}  total_loss: 0.5"
            )
            k += 1
        head = f"[11/17 15:{k // 60:02d}:{k % 60:02d}] d2.evaluation.testing INFO: copypaste: "
        lines += ([head + f"Task: {task}"] if task else []) + [head + ",".join(names), head + ",".join(map(str, row))]
    return "\n".join(lines) + "\n"


def test_detectron2_s_copypaste_rows_are_evaluations_of_their_task(tmp_path):
    names = ["AP", "AP50", "AP75", "APs", "APm", "APl"]
    aps = [[3.0706, 6.8876, 2.243, 0.3698, 1.2776, 3.5768], [7.3013, 15.6868, 5.7619, 0.8877, 3.4656, 9.0269]]
    _, evals, _ = imported(write(tmp_path, "log.txt", _copypaste(aps, names)))
    got = evals_at(evals)
    assert {k: v for k, v in got.items() if k[0] == "bbox/AP"} == {("bbox/AP", 99): 3.0706, ("bbox/AP", 199): 7.3013}
    assert len(got) == 12 and set(evals["higher_is_better"]) == {True}


_METRICS = ["AP", "AP50", "AP75", "APs", "APm", "APl", "mIoU", "acc", "f1"]  # names yieldgate knows as evaluations


@_FAST
@given(
    names=st.lists(st.sampled_from(_METRICS), min_size=2, max_size=8, unique=True),
    rows=st.integers(1, 4),
    task=st.sampled_from(["bbox", "segm", "coco"]),
    data=st.data(),
)
def test_every_value_of_a_row_lands_under_its_name_and_task(tmp_path_factory, names, rows, task, data):
    value = st.floats(0.0, 100.0).map(lambda v: round(v, 4))
    aps = [data.draw(st.lists(value, min_size=len(names), max_size=len(names))) for _ in range(rows)]
    _, evals, _ = imported(write(tmp_path_factory.mktemp("cp"), "log.txt", _copypaste(aps, names, task)))
    want = {(f"{task}/{n}", 100 * r + 99): v for r, row in enumerate(aps) for n, v in zip(names, row, strict=True)}
    assert evals_at(evals) == want


def test_names_and_values_that_do_not_pair_are_not_a_row():
    """Not the class: a count of values unlike the names', another prefix, or a list of words are no row."""
    lines = ["x INFO: copypaste: AP,AP50,AP75", "x INFO: copypaste: 1.0,2.0"]
    assert names_then_values(lines[0], lines, 0) is None
    lines = ["x INFO: copypaste: AP,AP50", "y WARN: other: 1.0,2.0"]
    assert names_then_values(lines[0], lines, 0) is None
    lines = ["classes: cat,dog,bird", "classes: cat,dog,bird"]
    assert names_then_values(lines[0], lines, 0) is None
