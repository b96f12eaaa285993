"""Logs read by their structure (issue 45), the classes seen in real public logs that were refused or misread: tables
in any delimiter, a last row without a line end, times of day as the clock, RL progress tables, JSON column documents
with metadata and per-split losses, relaunches with another epoch size, `name value` segments and split-named
evaluation lines, torchtune's bar and where an evaluation's direction comes from. Each on a small file written here
(no real log), each rule on generated cases (hypothesis), and beside each a file that is not the class and is not
read as it."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.ingested import column as _column
from tests.support.ingested import evals_at as _evals
from tests.support.ingested import imported as _import
from tests.support.ingested import write as _write
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ingest.epochfiles import columns_of
from yieldgate.ingest.explain import explain_import
from yieldgate.ingest.sniff import kind_of, table_format
from yieldgate.ingest.textlog.kv import read_counted
from yieldgate.ledger import Ledger

_FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# -- 1. delimiters ------------------------------------------------------------------------------------------------


def test_catboost_s_learn_error_tsv_reads_its_logloss_as_the_loss(tmp_path):
    """CatBoost names its column by the loss function (`Logloss`) and its step `iter`, tab-separated."""
    path = _write(tmp_path, "learn_error.tsv", "iter\tLogloss\n0\t0.6815\n1\t0.6702\n2\t0.6590\n")
    steps, evals, _ = _import(path)
    assert _column(steps, "loss") == {0: 0.6815, 1: 0.6702, 2: 0.6590}
    assert evals.empty


_ROWS = st.lists(
    st.tuples(st.integers(1, 10**6), st.integers(1, 10**6)), min_size=2, max_size=8, unique_by=lambda r: r[0]
)


@_FAST
@given(rows=_ROWS, sep=st.sampled_from(["\t", ",", ";", "  ", "aligned"]))
def test_any_delimiter_gives_the_same_run(tmp_path_factory, rows, sep):
    """Property: a table written with tab, comma, semicolon or runs of spaces (aligned columns too) reads back as the
    same steps, loss and evaluation."""
    rows = sorted(rows)
    table = [["step", "loss", "val_loss"]] + [[str(s), f"{v / 1e4:.4f}", f"{v / 2e4:.5f}"] for s, v in rows]
    if sep == "aligned":
        widths = [max(len(row[c]) for row in table) for c in range(3)]
        text = "".join("   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + "\n" for row in table)
    else:
        text = "".join(sep.join(row) + "\n" for row in table)
    path = _write(tmp_path_factory.mktemp("sep"), "log.txt", text)
    assert table_format(path) == "csv"
    steps, evals, _ = _import(path)
    assert _column(steps, "loss") == {s: round(v / 1e4, 4) for s, v in rows}
    assert _evals(evals) == {("val/loss", s): round(v / 2e4, 5) for s, v in rows}


def test_a_text_log_whose_lines_each_hold_one_comma_is_no_table(tmp_path):
    """Python logging's `12:00:01,000` and a tqdm bar's `[00:01<00:00, 1.00it/s]` put one comma on every line; a
    log beginning with a rule line (Flair's `-----`) then looked like a two-column CSV (found writing this test: both
    were read as tables and refused with `no step column among no columns`)."""
    flair = "".join(
        f"2023-01-01 12:00:0{i},000 epoch 1 - iter {i}/9 - loss 0.{9 - i}0000000 - lr: 0.100000\n" for i in range(1, 6)
    )
    bar = "".join(f"1|{s}|Loss: 1.{9 - s}: 100%|#| {s}/9 [00:0{s}<00:00,  1.00it/s]\n" for s in range(1, 6))
    for name, text in (("flair.log", f"2023-01-01 12:00:00,000 {'-' * 60}\n{flair}"), ("bar.log", bar)):
        path = _write(tmp_path, name, text)
        assert table_format(path) is None and kind_of(path) == "textlog", name
    steps, _, _ = _import(tmp_path / "bar.log")
    assert _column(steps, "loss") == {s: round(1 + (9 - s) / 10, 1) for s in range(1, 6)}


# -- 2. a last row without a line end; times of day as the clock -----------------------------------------------------

_FLAIR_TSV = (
    "EPOCH\tTIMESTAMP\tBAD_EPOCHS\tLEARNING_RATE\tTRAIN_LOSS\tDEV_LOSS\tDEV_F1\n"
    "1\t23:59:10\t0\t0.1000\t0.5000\t0.4000\t0.8000\n"
    "2\t23:59:50\t0\t0.1000\t0.4000\t0.3500\t0.8500\n"
)


def test_flair_s_loss_tsv_keeps_its_last_row_and_runs_past_midnight(tmp_path):
    """Flair writes each row's line end before it: the last row has none, and is whole (its F1 to four places as on
    every row). Its clock is a time of day: 00:00:30 after 23:59:50 is 40 s later, not a day earlier."""
    path = _write(tmp_path, "loss.tsv", _FLAIR_TSV + "3\t00:00:30\t0\t0.1000\t0.3000\t0.3300\t0.8700")
    steps, evals, _ = _import(path)
    assert _column(steps, "loss") == {1: 0.5, 2: 0.4, 3: 0.3}
    assert _column(steps, "wall_s") == {1: 0.0, 2: 40.0, 3: 80.0}
    assert _evals(evals) == {
        **{("val/loss", s): v for s, v in ((1, 0.4), (2, 0.35), (3, 0.33))},
        **{("val/f1", s): v for s, v in ((1, 0.8), (2, 0.85), (3, 0.87))},
    }


def test_a_last_row_whose_last_field_is_shorter_than_every_other_is_dropped(tmp_path):
    """`0.87` where every row prints four places may have lost its digits: not imported, and said."""
    path = _write(tmp_path, "loss.tsv", _FLAIR_TSV + "3\t00:00:30\t0\t0.1000\t0.3000\t0.3300\t0.87")
    steps, _, warnings = _import(path)
    assert _column(steps, "loss") == {1: 0.5, 2: 0.4}
    assert any("line end" in w or "cut" in w or "incomplete" in w for w in warnings), warnings


@_FAST
@given(
    start=st.integers(0, 86399),
    gaps=st.lists(st.integers(0, 43199), min_size=1, max_size=12),
)
def test_times_of_day_past_midnight_stay_increasing(tmp_path_factory, start, gaps):
    """Property: rows a few seconds to nearly half a day apart, their clock a time of day without a date, read as
    seconds since the first row however many midnights they pass."""
    elapsed = [0]
    for gap in gaps:
        elapsed.append(elapsed[-1] + gap)

    def of_day(t: int) -> str:
        t = (start + t) % 86400
        return f"{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"

    text = "step,timestamp,loss\n" + "".join(f"{i},{of_day(t)},{1 / (i + 1):.6f}\n" for i, t in enumerate(elapsed))
    steps, _, _ = _import(_write(tmp_path_factory.mktemp("tod"), "log.csv", text))
    assert _column(steps, "wall_s") == {i: float(t) for i, t in enumerate(elapsed)}


# -- 3. RL and progress tables ------------------------------------------------------------------------------------


def test_an_episode_counter_beside_a_cumulative_step_count_steps_by_the_count(tmp_path):
    """An RL trainer's progress table: `episode` rises by one a row, `env_steps` by each episode's length (a name
    that is no step name: `total_timesteps` is one, and taken as the step at once)."""
    text = "episode,env_steps,ep_reward,loss\n0,100,1.0,0.50\n1,250,2.0,0.40\n2,330,3.0,0.30\n3,500,4.0,0.20\n"
    steps, _, warnings = _import(_write(tmp_path, "progress.csv", text))
    assert _column(steps, "loss") == {100: 0.5, 250: 0.4, 330: 0.3, 500: 0.2}
    assert any("'env_steps'" in w and "'episode'" in w for w in warnings)


@_FAST
@given(lengths=st.lists(st.integers(1, 5000), min_size=3, max_size=20).filter(lambda ls: max(ls[1:]) > 1))
def test_a_cumulative_count_beside_a_row_counter_is_the_step(tmp_path_factory, lengths):
    """Property: whatever each episode's length, the step is the count (where it rises by more than one somewhere
    after the first row: a count rising by one a row is the episode's twin, and the episode stays the step)."""
    total, text = 0, "episode,steps_done,loss\n"
    for i, n in enumerate(lengths):
        total += n
        text += f"{i + 1},{total},{1 / (i + 2):.6f}\n"
    steps, _, _ = _import(_write(tmp_path_factory.mktemp("rl"), "progress.csv", text))
    totals = [sum(lengths[: i + 1]) for i in range(len(lengths))]
    assert _column(steps, "loss") == {t: round(1 / (i + 2), 6) for i, t in enumerate(totals)}


@pytest.mark.parametrize(
    ("beside", "why"),
    [
        ("", "no count beside it"),
        (",ep_steps", "each episode's own length, which falls: not cumulative"),
        (",ep_reward", "a value whose name says no steps"),
    ],
)
def test_an_episode_column_without_a_cumulative_count_beside_it_stays_the_step(tmp_path, beside, why):
    lengths = [120, 80, 200, 95]
    rows = "".join(
        f"{i},{0.6 - i / 10:.2f}" + (f",{n}" if beside else "") + "\n" for i, n in enumerate(lengths, start=1)
    )
    steps, _, _ = _import(_write(tmp_path, "progress.csv", f"episode,loss{beside}\n{rows}"))
    assert _column(steps, "loss") == {1: 0.5, 2: 0.4, 3: 0.3, 4: 0.2}, why


def test_update_names_the_step_of_an_updates_table(tmp_path):
    steps, _, _ = _import(_write(tmp_path, "log.csv", "num_updates,loss\n100,2.5\n200,2.1\n300,1.9\n"))
    assert _column(steps, "loss") == {100: 2.5, 200: 2.1, 300: 1.9}


# -- 4. JSON column documents: metadata beside the lists, per-split total losses ---------------------------------


def _ludwig(epochs: int = 3) -> dict:
    """Ludwig's training_statistics.json: per split, per output feature and `combined` (their sum), one value an
    epoch; its evaluation frequency beside them."""

    def split(base: float) -> dict:
        a = [round(base - 0.1 * e, 4) for e in range(epochs)]
        b = [round(base / 2 - 0.05 * e, 4) for e in range(epochs)]
        return {
            "label": {"loss": a, "accuracy": [round(0.5 + 0.1 * e, 4) for e in range(epochs)]},
            "tag": {"loss": b},
            "combined": {"loss": [round(x + y, 4) for x, y in zip(a, b, strict=True)]},
        }

    return {
        "evaluation_frequency": {"frequency": 1, "period": "epoch"},
        "training": split(1.0),
        "validation": split(1.2),
        "test": split(1.4),
    }


def test_ludwig_s_statistics_give_each_split_s_total_loss_and_leave_the_metadata_out(tmp_path):
    doc = _ludwig()
    path = _write(tmp_path, "training_statistics.json", json.dumps(doc))
    assert table_format(path) == "columns"
    steps, evals, warnings = _import(path)
    assert _column(steps, "loss") == dict(enumerate(doc["training"]["combined"]["loss"]))
    got = _evals(evals)
    for split, task in (("validation", "val"), ("test", "test")):
        assert {s: got[(f"{task}/loss", s)] for s in range(3)} == dict(enumerate(doc[split]["combined"]["loss"]))
        assert {s: got[(f"{task}/label/acc", s)] for s in range(3)} == dict(enumerate(doc[split]["label"]["accuracy"]))
    assert any("evaluation_frequency/period" in w and "not imported" in w for w in warnings)


def test_a_configuration_of_many_scalars_and_a_few_lists_is_no_column_document(tmp_path):
    config = {"lr": 0.1, "batch_size": 32, "epochs": 10, "optimizer": "adam", "seed": 1, "milestones": [3, 6, 9]}
    config |= {"betas": [0.9, 0.999, 0.0]}
    assert columns_of(config) is None
    assert table_format(_write(tmp_path, "config.json", json.dumps(config))) != "columns"
    assert columns_of({"loss": [0.5, 0.4], "epoch": [0, 1], "name": "run", "seed": 1}) is not None
    assert columns_of({"loss": [0.5, 0.4], "name": "run", "seed": 1}) is None


# -- 5. nested counters where a relaunch prints another epoch size ------------------------------------------------


def _yolox(e: int, i: int, n: int, loss: float, at: int) -> str:
    """A YOLOX trainer line at `at` seconds past 2021-07-21 00:00:00."""
    return (
        f"2021-07-21 {at // 3600:02d}:{at // 60 % 60:02d}:{at % 60:02d} | INFO     | yolox.core.trainer:247 - "
        f"epoch: {e}/300, iter: {i}/{n}, mem: 2000Mb, "
        f"iter_time: 0.5s, data_time: 0.01s, total_loss: {loss:.1f}, iou_loss: 3.0, lr: 1.000e-05, size: 640, "
        "ETA: 1 day, 2:00:00\n"
    )


def _launches(plan: list[tuple[int, int, int]]) -> tuple[str, dict[int, float]]:
    """A YOLOX log of launches (iterations per epoch, epoch it resumes at, epochs it runs), logging every 10th
    iteration, and the loss each step should hold: step = the first step of the epoch (the sizes of the epochs
    before it, each in the launch that ran it last) + the iteration; a step logged again keeps its later value.
    A line every 5 s, a relaunch an hour after the launch before it stopped."""
    text, loss, clock = "", 1000.0, 0
    want: dict[int, float] = {}
    starts: dict[int, int] = {}
    for size, resume, epochs in plan:
        clock += 3600
        at = starts.get(resume, (resume - 1) * size)
        starts = {e: s for e, s in starts.items() if e < resume}
        for e in range(resume, resume + epochs):
            starts[e] = at + (e - resume) * size
            for i in range(10, size + 1, 10):
                loss, clock = loss - 1, clock + 5
                text += _yolox(e, i, size, loss, clock)
                want[starts[e] + i] = loss
        starts[resume + epochs] = at + epochs * size
    return text, want


def test_a_relaunch_with_another_epoch_size_counts_each_launch_s_steps_by_its_own_size(tmp_path):
    """YOLOX at 89 iterations an epoch, relaunched (fewer devices' batch, another loader) at 76 into epoch 3: the
    first launch's epochs are 89 steps, the relaunch's 76 (one size for all moved epoch 1-2's steps)."""
    text, want = _launches([(89, 1, 3), (76, 3, 2)])
    steps, _, _ = _import(_write(tmp_path, "train_log.txt", text), kind="textlog")
    assert _column(steps, "loss") == want
    assert min(s for s in want if s > 178) == 188  # epoch 3 of the relaunch begins where the first had it


@settings(max_examples=15, deadline=None)
@given(
    plan=st.lists(st.tuples(st.integers(12, 120), st.integers(0, 3), st.integers(1, 3)), min_size=1, max_size=3),
)
@pytest.mark.slow
def test_any_epoch_sizes_per_launch_give_the_steps_before_plus_the_iteration(tmp_path_factory, plan):
    """Property: launches of any sizes, each resuming at an epoch the one before reached (or the next), read as
    step = the sizes of the epochs before it + the iteration."""
    resolved, last = [], 1
    for size, back, epochs in plan:
        resume = 1 if not resolved else max(resolved[-1][1], last + 1 - back)
        resolved.append((size, resume, epochs))
        last = resume + epochs - 1
    text, want = _launches(resolved)
    steps, _, _ = _import(_write(tmp_path_factory.mktemp("yolox"), "train_log.txt", text), kind="textlog")
    assert _column(steps, "loss") == want


# -- 6. text logs: `name value` segments, split-named evaluations, a stepless record written twice ----------------

_FLAIR_LOG = """2023-01-01 12:00:00,000 -----------------------------------------------------------------------------
2023-01-01 12:00:01,000 epoch 1 - iter 10/20 - loss 0.85000000 - samples/sec: 9.54 - lr: 0.100000
2023-01-01 12:00:02,000 epoch 1 - iter 20/20 - loss 0.65000000 - samples/sec: 9.54 - lr: 0.100000
2023-01-01 12:00:03,000 -----------------------------------------------------------------------------
2023-01-01 12:00:03,000 EPOCH 1 done: loss 0.6500 - lr 0.100000
2023-01-01 12:00:04,000 DEV : loss 0.30412345 - score 0.8012
2023-01-01 12:00:05,000 epoch 2 - iter 10/20 - loss 0.40000000 - samples/sec: 9.54 - lr: 0.050000
2023-01-01 12:00:06,000 epoch 2 - iter 20/20 - loss 0.20000000 - samples/sec: 9.54 - lr: 0.050000
2023-01-01 12:00:07,000 EPOCH 2 done: loss 0.2000 - lr 0.050000
2023-01-01 12:00:08,000 DEV : loss 0.25187622 - score 0.8477
2023-01-01 12:00:09,000 TEST : loss 0.17630000 - score 0.9057
"""


def test_flair_s_log_reads_its_segments_and_its_split_named_evaluations(tmp_path):
    """`epoch 1 - iter 10/20 - loss 0.85` pairs without a `:`; `DEV : loss 0.3 - score 0.8` the dev split's
    evaluations at the step of the record before it (the epoch's end), `TEST :` the test split's."""
    steps, evals, _ = _import(_write(tmp_path, "training.log", _FLAIR_LOG))
    assert _column(steps, "loss") == {10: 0.85, 20: 0.65, 30: 0.4, 40: 0.2}
    assert _column(steps, "lr") == {10: 0.1, 20: 0.1, 30: 0.05, 40: 0.05}
    assert _evals(evals) == {
        ("val/loss", 20): 0.30412345,
        ("val/score", 20): 0.8012,
        ("val/loss", 40): 0.25187622,
        ("val/score", 40): 0.8477,
        ("test/loss", 40): 0.1763,
        ("test/score", 40): 0.9057,
    }


def test_a_stepless_record_written_again_by_a_second_writer_is_read_once(tmp_path):
    """Every line twice (a logger to the console and a file, both captured): the same run, no value logged again."""
    doubled = "".join(line + "\n" + line + "\n" for line in _FLAIR_LOG.splitlines())
    steps, evals, warnings = _import(_write(tmp_path, "training.log", doubled))
    once_steps, once_evals, _ = _import(_write(tmp_path, "once.log", _FLAIR_LOG))
    assert _column(steps, "loss") == _column(once_steps, "loss")
    assert _evals(evals) == _evals(once_evals)
    assert not any("logged again with" in w for w in warnings), warnings


_WORD = st.text("abcdefghkmnopqruvwxyz", min_size=3, max_size=8).filter(
    lambda w: w not in {"epoch", "iter", "step", "steps", "batch", "time", "test", "dev", "val", "eval", "valid"}
)


@_FAST
@given(
    pairs=st.dictionaries(_WORD, st.integers(0, 10**6), min_size=1, max_size=5),
    cut=st.sampled_from([" - ", " | "]),
    step=st.integers(1, 10**6),
)
def test_name_value_segments_read_as_their_pairs(pairs, cut, step):
    """Property: a line cut by ` - ` or ` | ` into `name value` segments reads as those pairs, whatever the names and
    values, beside its step."""
    line = cut.join([f"step {step}"] + [f"{k} {v / 1000:.3f}" for k, v in pairs.items()])
    read = read_counted(line)
    assert read is not None
    assert {k: read[k] for k in pairs} == {k: v / 1000 for k, v in pairs.items()}
    assert read["step"] == step


def test_words_between_dashes_are_no_pairs():
    """A message cut by ` - ` whose segments end in words, or dashes inside words, gives no values."""
    assert read_counted("2023-01-01 12:00:00,000 - INFO - saving model - epoch 3 of 10 done") is None
    assert read_counted("2023-01-01 12:00:00,000 - INFO - model loaded with 12 layers") is None
    assert read_counted("loss-scale 2 and warm-up 100") is None


# -- 7. tqdm: counters at the head of a description --------------------------------------------------------------


def test_torchtune_s_bar_reads_epoch_then_step_and_each_step_once(tmp_path):
    """torchtune's `1|512|Loss: 1.0188: ...`: the epoch, then the global step; the bar moves on before its
    description does, so each step is drawn twice."""
    lines = []
    for epoch, first in ((1, 1), (2, 4)):
        for step in range(first, first + 3):
            loss = f"{2 - step / 10:.4f}"
            n = step - first
            lines.append(f"{epoch}|{step}|Loss: {loss}:  {n * 33}%|###| {n}/3 [00:0{n}<00:03, 1.00s/it]")
            lines.append(f"{epoch}|{step}|Loss: {loss}:  {n * 33 + 33}%|###| {n + 1}/3 [00:0{n + 1}<00:03, 1.00s/it]")
    steps, _, _ = _import(_write(tmp_path, "log.txt", "\n".join(lines) + "\n"))
    assert _column(steps, "loss") == {s: round(2 - s / 10, 4) for s in range(1, 7)}


def test_a_count_and_its_total_in_a_description_are_no_head_counters(tmp_path):
    """`3/10` is a count of 10 (an epoch of ten), not an epoch and a step: the bar's own count steps the run."""
    text = "".join(
        f"3/10: {p}%|###| {n}/4 [00:0{n}<00:02, 1.00it/s, loss={1 - n / 10:.2f}]\n"
        for n, p in ((1, 25), (2, 50), (3, 75), (4, 100))
    )
    steps, _, _ = _import(_write(tmp_path, "log.txt", text))
    assert sorted(_column(steps, "loss").values(), reverse=True) == [0.9, 0.8, 0.7, 0.6]
    assert len(steps) == 4


# -- 8. import --explain says where each evaluation's direction comes from ------------------------------------------


def test_explain_says_where_each_evaluation_s_direction_comes_from(tmp_path):
    """`val_loss` falls by its name; `val_grip` falls as the mapping declares; `widgetness` says nothing, and is taken
    as rising, which the explanation says rather than hides."""
    text = "step,loss,val_loss,val_widgetness,val_grip\n1,0.9,1.0,3.0,5.0\n2,0.8,0.9,2.0,6.0\n"
    path = _write(tmp_path, "log.csv", text)
    mapping = _write(
        tmp_path,
        "map.yaml",
        "evals: {val_grip: {key: val/grip, direction: lower}, val_widgetness: {key: val/widgetness}}\n",
    )
    (explained,) = explain_import("auto", [str(path)], ImportOptions(run="r", map=[str(mapping)]))
    said = {e.key: (e.direction, e.direction_from) for e in explained.evaluations}
    assert said == {
        "val/loss": ("falls", "its name"),
        "val/widgetness": ("rises", "no rule: taken as rising"),
        "val/grip": ("falls", "the source or mapping"),
    }


# -- a step column named with spaces, dashes or dots, or under a namespace ---------------------------------------
# A PPO trainer's progress CSV names its counter `total timesteps` (with a space); Stable-Baselines3's
# `time/total_timesteps`. Names are compared by `ingest.core.step_key`.


@settings(max_examples=40, deadline=None)
@given(
    sep=st.sampled_from([" ", "-", ".", "_", "  ", " - "]),
    prefix=st.sampled_from(["", "time/", "rollout/"]),
    upper=st.booleans(),
)
def test_a_step_name_written_with_other_separators_or_a_namespace_is_the_step(sep, prefix, upper):
    from yieldgate.ingest.core import pick_step

    name = f"{prefix}total{sep}timesteps"
    name = name.upper() if upper else name
    assert pick_step(["ep_rew_mean", name, "total_loss", "num_episodes"], {}, "t.csv") == name


def test_a_namespaced_name_s_last_part_is_read_only_where_no_name_is_a_step_name():
    from yieldgate.ingest.core import pick_step

    # `eval/step` may be on the evaluation rows alone: a step name as a whole (W&B's `_step`) goes first
    assert pick_step(["_step", "eval/step"], {}, "t.csv") == "_step"
    assert pick_step(["global_step", "train/step"], {}, "t.csv") == "global_step"
    assert pick_step(["time/iterations", "time/total_timesteps", "loss"], {}, "t.csv") == "time/total_timesteps"


def test_a_ppo_progress_table_with_a_spaced_counter_imports_by_it(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text(
        "ep_rew_mean,Progress,num_episodes,total timesteps,total_loss\n"
        "11.6,0.0%,454,8192,\n"
        "14.3,0.82%,813,16384,1.70\n"
        "15.0,1.64%,1190,24576,1.41\n"
    )
    with Ledger(str(tmp_path / "l.db")) as led:
        import_run(led, "auto", [str(path)], ImportOptions(run="r"))
        steps = led.steps("r")
    assert steps["step"].tolist() == [8192, 16384, 24576]
    assert steps["loss"].tolist()[1:] == pytest.approx([1.70, 1.41])
