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
