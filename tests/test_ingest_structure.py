"""Logs read by their structure (issue 45): a count within each epoch beside the epoch, a second writer whose copies
step back by a logging interval, a restart that redid a few steps. Each on a small log shaped as such logs are, and
each rule on generated cases as well (hypothesis)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yieldgate.analysis.goodput import goodput_of
from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ledger import Ledger


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _import(ledger, path: Path, run: str = "r", kind: str = "auto", **options):
    (res,) = import_run(ledger, kind, [str(path)], ImportOptions(run=run, **options))
    return res


def _loss(ledger, run: str = "r") -> dict[int, float]:
    steps = ledger.steps(run)
    known = steps[["step", "loss"]].dropna()
    return dict(zip(known["step"].astype(int).tolist(), known["loss"].tolist(), strict=True))


# -- 1. nested counters: the count within each epoch is not the step ---------------------------------------------


def _epochs(epochs: int, per: int, *, base: int = 1, start: int = 1) -> list[dict]:
    """A table of `epoch` and `iter` (within the epoch, from `base`) columns, no global step: loss by position."""
    rows = []
    for e in range(start, start + epochs):
        for i in range(base, per + base):
            step = (e - start) * per + i
            rows.append({"epoch": e, "iter": i, "loss": round(5.0 / (1 + step), 6)})
    return rows


def test_a_count_within_each_epoch_beside_the_epoch_is_combined_into_the_step(ledger, tmp_path):
    """A 30-epoch run of 8 iterations an epoch: 240 steps, no restart (the count alone as the step gave 8 rows and
    29 restarts, each epoch's rows overwriting the one before)."""
    rows = _epochs(30, 8)
    res = _import(ledger, _jsonl(tmp_path / "log.jsonl", rows))
    assert _loss(ledger) == {(r["epoch"] - 1) * 8 + r["iter"]: r["loss"] for r in rows}
    assert ledger.events("r", kind="resume").empty
    assert not any("go back" in w for w in res.warnings)


@settings(max_examples=25, deadline=None)
@given(
    epochs=st.integers(2, 6),
    per=st.integers(2, 12),
    base=st.sampled_from([0, 1]),
    start=st.sampled_from([0, 1]),
)
def test_nested_counters_read_as_the_step_whatever_their_bases(tmp_path_factory, epochs, per, base, start):
    """Property: whatever the epoch's first number and the count's, step = (E - E0) x N + I, every row once."""
    rows = _epochs(epochs, per, base=base, start=start)
    path = _jsonl(tmp_path_factory.mktemp("nested") / "log.jsonl", rows)
    with Ledger(":memory:") as led:
        _import(led, path)
        assert _loss(led) == {(r["epoch"] - start) * per + r["iter"]: r["loss"] for r in rows}
        assert led.events("r", kind="resume").empty


def test_an_epoch_column_under_another_name_is_found_by_rising_where_the_count_restarts(ledger, tmp_path):
    """A companion that rises by one exactly where the count starts again is the epoch, whatever its name."""
    rows = [{"round": r["epoch"], "step": r["iter"], "loss": r["loss"]} for r in _epochs(5, 6)]
    _import(ledger, _jsonl(tmp_path / "log.jsonl", rows))
    assert sorted(_loss(ledger)) == list(range(1, 31))
    assert ledger.events("r", kind="resume").empty


def test_a_printed_global_step_beside_the_counts_is_the_step(ledger, tmp_path):
    rows = [{**r, "global_step": 1000 + (r["epoch"] - 1) * 6 + r["iter"]} for r in _epochs(4, 6)]
    _import(ledger, _jsonl(tmp_path / "log.jsonl", rows))
    assert sorted(_loss(ledger)) == [r["global_step"] for r in rows]


def test_the_epoch_s_size_may_change_after_a_resume(ledger, tmp_path):
    """Three epochs of 8, a crash in the fourth, a resume at its start with a loader one batch shorter: the steps go
    on from where the checkpoint was (24), each epoch its own size, and the crash is one restart."""
    first = _epochs(4, 8)[:28]  # the fourth epoch crashed after 4 of its 8 iterations
    again = [{"epoch": 4 + k // 7, "iter": 1 + k % 7, "loss": 0.1 + k / 100} for k in range(14)]
    _import(ledger, _jsonl(tmp_path / "log.jsonl", first + again))
    assert sorted(_loss(ledger)) == list(range(1, 24 + 14 + 1))
    assert _loss(ledger)[25] == again[0]["loss"] and _loss(ledger)[38] == again[-1]["loss"]
    (event,) = ledger.events("r", kind="resume")["body"]
    assert (event["old"]["step"], event["resume"]["step"], event["redone"]["step"]) == (28, 24, 28)


# -- 4. lost work: only the steps done again ------------------------------------------------------------------------


def test_a_fresh_launch_appended_charges_only_the_steps_it_redid(ledger, tmp_path):
    """1,000 steps, then a second launch into the same log that ran 20 steps from 1: 20 steps lost, not 1,000 (the
    relaunch's clock restarts from 0, the time it spent charged at the first launch's pace)."""
    first = [{"step": s, "loss": 5.0 - s / 1000, "elapsed": 2.0 * s} for s in range(10, 1010, 10)]
    again = [{"step": s, "loss": 5.1 - s / 1000, "elapsed": 2.0 * s} for s in (10, 20)]
    _import(ledger, _jsonl(tmp_path / "log.jsonl", first + again))
    gp = goodput_of(ledger, "r")
    assert gp is not None and gp.restarts == 1 and gp.steps_lost == 20
    assert gp.lost_s == pytest.approx(40.0) and gp.share > 0.9


def test_a_relaunch_from_a_checkpoint_that_died_early_charges_what_it_redid(ledger, tmp_path):
    """Steps 1-100 one second apart, back to the checkpoint at 50, killed after 5 steps: 5 steps lost (50 before)."""
    first = [{"step": s, "loss": 5 - s / 100, "elapsed": float(s)} for s in range(1, 101)]
    again = [{"step": s, "loss": 5.01 - s / 100, "elapsed": 150.0 + s - 51} for s in range(51, 56)]
    _import(ledger, _jsonl(tmp_path / "log.jsonl", first + again))
    gp = goodput_of(ledger, "r")
    assert gp is not None and (gp.restarts, gp.steps_lost) == (1, 5)
    assert gp.lost_s == pytest.approx(5.0)


# -- 5. two writers, in general --------------------------------------------------------------------------------------


def _two_writers(n: int = 60, *, fewer_digits: bool = True, clock: bool = False) -> list[dict]:
    """One record a step every 10 steps; a second process appends each again a little later, printing one digit
    fewer, its own step time, and drifting so that its copy comes after the first writer's next record now and
    then: the order steps back by one logging interval."""
    lines = []
    for k in range(1, n + 1):
        a = {"step": 10 * k, "loss": round(5.0 / k + 0.01234 * (k % 7), 5), "lr": 1e-3, "step_s": 2.0}
        b = {**a, "loss": round(a["loss"], 4 if fewer_digits else 5), "step_s": 2.03}
        if clock:
            a, b = {**a, "elapsed": 20.0 * k}, {**b, "elapsed": 20.0 * k + 3.0}
        lines += [a, b]
    for k in range(5, n, 6):  # the copy of step k after the first writer's step k+1
        lines[2 * k - 1], lines[2 * k] = lines[2 * k], lines[2 * k - 1]
    return lines


@pytest.mark.parametrize("clock", [False, True])
def test_a_second_writer_printing_fewer_digits_is_not_a_restart(ledger, tmp_path, clock):
    lines = _two_writers(clock=clock)
    res = _import(ledger, _jsonl(tmp_path / "log.jsonl", lines))
    assert _loss(ledger) == {r["step"]: r["loss"] for r in lines[::2] if r["step_s"] == 2.0} | {
        r["step"]: r["loss"] for r in lines if r["step_s"] == 2.0
    }
    assert ledger.events("r", kind="resume").empty
    assert sum("second writer" in w for w in res.warnings) == 1


def test_a_restart_one_interval_back_with_other_values_is_still_a_restart(ledger, tmp_path):
    """The same step back, but the values differ beyond the digits printed: a relaunch, one restart."""
    first = [{"step": s, "loss": round(5 - s / 100, 4)} for s in range(10, 110, 10)]
    again = [{"step": s, "loss": round(5.2 - s / 100, 4)} for s in range(90, 160, 10)]
    _import(ledger, _jsonl(tmp_path / "log.jsonl", first + again))
    assert len(ledger.events("r", kind="resume")) == 1
    assert _loss(ledger)[90] == again[0]["loss"] and _loss(ledger)[100] == again[1]["loss"]


@settings(max_examples=20, deadline=None)
@given(n=st.integers(12, 40), lag=st.integers(1, 3), digits=st.integers(3, 6))
def test_copies_stepping_back_up_to_three_intervals_are_one_writer_s(tmp_path_factory, n, lag, digits):
    """Property: a second writer whose copies come `lag` records late (up to three logging intervals back), printed
    to one digit fewer, leaves the first writer's values and no restart."""
    a = [{"step": 10 * k, "loss": round(3.0 + 1.0 / k, digits), "step_s": 1.0} for k in range(1, n + 1)]
    b = [{**r, "loss": round(r["loss"], digits - 1), "step_s": 1.1} for r in a]
    lines = []
    for k in range(n):
        lines.append(a[k])
        if k >= lag:
            lines.append(b[k - lag])
    lines += b[n - lag :]
    path = _jsonl(tmp_path_factory.mktemp("writers") / "log.jsonl", lines)
    with Ledger(":memory:") as led:
        _import(led, path)
        assert _loss(led) == {r["step"]: r["loss"] for r in a}
        assert led.events("r", kind="resume").empty


# -- 1. nested counters in printed logs ------------------------------------------------------------------------------


def _printed(
    epochs: int, per: int, shape: str, *, every: int = 1
) -> tuple[list[str], dict[int, float], dict[int, float]]:
    """A printed log of `epochs` x `per` iterations, a line every `every` (and at each epoch's last), an evaluation
    line after each epoch; (its lines, the loss at each global step, the validation loss at each epoch's last)."""
    lines, loss, val = ["Starting training: 3 epochs"], {}, {}
    for e in range(1, epochs + 1):
        for i in range(1, per + 1):
            if i % every and i != per:
                continue
            step = (e - 1) * per + i
            loss[step] = round(4.0 / (1 + step / 10), 4)
            pair = {
                "bracketed": f"Epoch [{e}/{epochs}] Iter [{i}/{per}]",
                "unlabelled": f"[{e}/{epochs}][{i}/{per}]",
                "count-first": f"Step: {i}/{per}, Epoch: {e}/{epochs},",
                "plain": f"Epoch {e}/{epochs} iter {i}/{per}",
            }[shape]
            lines.append(f"{pair} loss: {loss[step]:.4f} lr: 1.0e-03")
        val[e * per] = round(loss[e * per] + 0.1, 4)
        lines.append(
            f"Epoch: {e}/{epochs}, val_loss: {val[e * per]:.4f}"
            if shape == "count-first"
            else f"{'' if shape == 'unlabelled' else 'Epoch '}[{e}/{epochs}] val_loss: {val[e * per]:.4f}"
        )
    return lines, loss, val


@pytest.mark.parametrize("shape", ["bracketed", "unlabelled", "count-first", "plain"])
def test_a_printed_progress_pair_is_an_epoch_and_a_count_within_it(ledger, tmp_path, shape):
    """`Epoch [3/300] Iter [50/390]`, `[3/300][50/390]`, `Step: 50/390, Epoch: 3/300`: the count that starts again
    as its companion rises is the inner one; each evaluation after an epoch lands at the epoch's last step."""
    lines, loss, val = _printed(12, 9, shape, every=2)
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    _import(ledger, tmp_path / "train.log")
    assert _loss(ledger) == loss
    evals = ledger.evals("r")
    assert dict(zip(evals["step"].tolist(), evals["value"].tolist(), strict=True)) == val
    assert ledger.events("r", kind="resume").empty


# -- 2. multi-line records --------------------------------------------------------------------------------------------

LOGS = Path(__file__).parent / "data" / "textlogs"


def test_a_step_header_with_one_metric_a_line_is_one_record(ledger):
    """Coqui TTS's trainer: `--> STEP: 1/3 -- GLOBAL_STEP: 1` then `| > loss: 0.0544  (0.0556)` lines; its
    `--> EVAL PERFORMANCE` block of `avg_*` values is the evaluation of the step before, its evaluation batches
    (`--> STEP: 0`, no total) no training step; the head's `TIME:` is the clock."""
    res = _import(ledger, LOGS / "coqui-tts.log")
    assert _loss(ledger) == {0: 0.0568, 1: 0.0544, 2: 0.0531, 3: 0.0519, 4: 0.0502, 5: 0.0497}
    steps = ledger.steps("r")
    assert steps["lr"].tolist() == [5e-06] * 6 and steps["data_wait_s"].tolist() == [0.0041] * 6
    assert steps["wall_s"].tolist() == [0.0, 2.0, 5.0, 52.0, 54.0, 57.0]
    evals = ledger.evals("r")
    val = evals[(evals["task"] == "val") & (evals["metric"] == "loss")]
    assert dict(zip(val["step"].tolist(), val["value"].tolist(), strict=True)) == {2: 0.061, 5: 0.0583}
    assert not val["higher_is_better"].any()
    assert ledger.events("r", kind="resume").empty and "read as kv" in res.source


def test_a_text_log_of_counters_alone_is_refused_not_imported_empty(ledger, tmp_path):
    """The heads of Coqui's blocks without their bodies: a step and a global step on each line, nothing measured.
    It was imported with exit 0, holding one extra (the global step)."""
    log = tmp_path / "heads.log"
    log.write_text(
        "".join(f"   --> TIME: 2024-08-05 17:17:1{s} -- STEP: {s}/3 -- GLOBAL_STEP: {s}\n" for s in range(3))
    )
    with pytest.raises(InputError, match=r"heads.log:1: only counters were read \(global_step, step\) on 3 line"):
        _import(ledger, log, kind="textlog")
    assert "r" not in set(ledger.runs()["name"])


# -- 3. clocks ----------------------------------------------------------------------------------------------------


def test_timestamps_on_every_line_are_the_clock_and_a_time_field_is_the_step_time(ledger, tmp_path):
    """Every line starts with a timestamp and prints `time` (the seconds of its iteration): the timestamps are the
    clock, gaps between launches included, and `time` is step_s (the clock was their sum, the gap lost)."""
    log = tmp_path / "train.log"
    lines = [
        f"2024-01-01 10:00:{2 * k:02d},000 INFO step {10 * k} loss: {5 - k / 10:.2f} time: 0.25" for k in range(1, 6)
    ]
    lines += [
        f"2024-01-01 10:10:{2 * k:02d},000 INFO step {10 * k} loss: {4 - k / 10:.2f} time: 0.26" for k in range(6, 9)
    ]
    log.write_text("\n".join(lines) + "\n")
    res = _import(ledger, log)
    steps = ledger.steps("r")
    assert steps["wall_s"].tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 610.0, 612.0, 614.0]
    assert steps["step_s"].tolist() == [0.25] * 5 + [0.26] * 3
    assert res.mapping["timestamp"] == "wall_s" and res.mapping["time"] == "step_s"


# -- 7. progress bars with their values before the bar --------------------------------------------------------------


def test_a_bar_with_its_values_in_its_description_and_its_evaluation_bar_apart(ledger, tmp_path):
    """`Epoch 2 loss: 0.41, acc: 0.88:  42%|████ | 5/12 [...]`, each epoch followed by `Eval loss: ...: 100%|...|
    4/4` (no epoch, a count of its own): the training values at step = the epochs before x 12 + count, the
    evaluation bar's values evaluations of the epoch's last step, not training steps."""
    lines, loss, val = [], {}, {}
    for e in range(3):
        for n in range(3, 13, 3):
            step = e * 12 + n
            loss[step] = round(2.0 - step / 100, 3)
            bar = f"{100 * n // 12:3d}%|{'#' * (n // 2):6s}| {n}/12 [00:{n:02d}<00:03,  3.9it/s]"
            lines.append(f"Epoch {e} loss: {loss[step]:.3f}, acc: 0.5: {bar}")
        val[e * 12 + 12] = round(1.9 - e / 10, 3)
        lines.append(
            f"Eval loss: {val[e * 12 + 12]:.3f}, acc: {0.6 + e / 10:.2f}: 100%|######| 4/4 [00:01<00:00, 3.1it/s]"
        )
    (tmp_path / "train.log").write_text("\r".join(lines) + "\n")
    _import(ledger, tmp_path / "train.log")
    assert _loss(ledger) == loss
    evals = ledger.evals("r")
    got = evals[evals["metric"] == "loss"]
    assert dict(zip(got["step"].tolist(), got["value"].tolist(), strict=True)) == val
    assert set(evals["task"]) == {"val"} and set(evals["metric"]) == {"loss", "acc"}


# -- 9. values printed without a step --------------------------------------------------------------------------------


def test_a_mapping_carries_the_epoch_named_on_its_own_line_to_a_metric_printed_alone(ledger, tmp_path):
    log = tmp_path / "train.log"
    log.write_text(
        "Epoch 1\niter 1 loss 3.0\niter 2 loss 2.5\nValidation accuracy: 0.61\n"
        "Epoch 2\niter 1 loss 2.2\niter 2 loss 2.0\nValidation accuracy: 0.72\n"
    )
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text(
        "lines:\n"
        "  - '^Epoch (?P<epoch>\\d+)$'\n"
        "  - '^iter (?P<iter>\\d+) loss (?P<loss>\\S+)'\n"
        "  - '^Validation accuracy: (?P<acc>\\S+)'\n"
        "step: {epoch: epoch, iter: iter, iters_per_epoch: 2}\n"
        "evals: {acc: {key: val/acc, direction: higher}}\n"
        "carry: true\n"
    )
    _import(ledger, log, kind="textlog", map=[str(mapping)])
    assert _loss(ledger) == {1: 3.0, 2: 2.5, 3: 2.2, 4: 2.0}
    evals = ledger.evals("r")
    assert list(zip(evals["step"], evals["metric"], evals["value"], strict=True)) == [
        (2, "acc", 0.61),
        (4, "acc", 0.72),
    ]
    assert evals["higher_is_better"].all()
