"""`yieldgate merge` adds what a ledger lacks and overwrites nothing (issue #46, item 1): a stored step or evaluation
the other ledger holds differently is refused in one line unless --replace, which keeps this ledger's records apart
as superseded and says so; a run a live Tracker writes is written by no one else."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.support.reliability import check
from yieldgate.cli import app
from yieldgate.errors import InputError, RunInUse
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.ledger.copy import ledger_digest
from yieldgate.ledger.merge import copy_run, merge_ledger
from yieldgate.track.tracker import Tracker


def _finished(path, loss1: float = 2.9875, tokens1: float = 4096.0, steps: int = 20) -> None:
    """A finished run `a` of `steps` steps whose step 1 has `loss1` and `tokens1`, with a val/loss at step 10."""
    s = np.arange(1, steps + 1)
    with Ledger(path) as led:
        led.create_run("a", status="finished")
        led.append_steps("a", {"step": s, "tokens": 4096.0 * s, "loss": 3.0 - 0.0125 * s, "signals/gns": 0.5 * s})
        led.append_steps("a", {"step": [1], "tokens": [tokens1], "loss": [loss1]})
        led.append_evals("a", [EvalRecord(step=10, task="val", metric="loss", value=2.5)])


def _invoke(ledger, *args: str, code: int):
    result = CliRunner().invoke(app, ["--ledger", str(ledger), *args])
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


def _shown(text: str, tmp_path) -> str:
    text = text.strip().replace(f"{tmp_path}/", "").removeprefix("error: ")
    return text if len(text) <= 110 else text[:109] + "…"


def test_a_merge_of_a_run_held_differently_is_refused_and_changes_nothing(tmp_path):
    here, other = tmp_path / "ledger.db", tmp_path / "other.db"
    _finished(here)
    _finished(other, loss1=77.0, tokens1=1.0, steps=30)  # step 1 differs; steps 21-30 are new
    with Ledger(here, readonly=True) as led:
        before, digest = led.steps("a"), ledger_digest(led)
    err = _invoke(here, "merge", str(other), code=2).stderr
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "at step 1, tokens is 4096 in" in err and "differing: 1 step)" in err and "--replace" in err, err
    with Ledger(here, readonly=True) as led:
        assert ledger_digest(led) == digest
        pd.testing.assert_frame_equal(led.steps("a"), before)
    check(
        "merge of a ledger whose run holds a stored step differently (a finished run's step 1: loss 2.9875 → 77, "
        "tokens 4,096 → 1)",
        f"refused, exit 2, ledger unchanged: `{_shown(err, tmp_path)}`",
        "0",
    )


def test_replace_takes_the_other_values_and_keeps_the_old_apart_as_superseded(tmp_path):
    here, other = tmp_path / "ledger.db", tmp_path / "other.db"
    _finished(here)
    _finished(other, loss1=77.0, tokens1=1.0, steps=30)
    with Ledger(other) as led:
        led.append_evals("a", [EvalRecord(step=10, task="val", metric="loss", value=2.75)])
    out = _invoke(here, "merge", str(other), "--replace", code=0).stdout
    assert "REPLACED 1 stored step and 1 evaluation" in " ".join(out.split()), out
    with Ledger(here, readonly=True) as led:
        steps, apart = led.steps("a"), led.superseded("a")
        (event,) = led.events("a").to_dict("records")
        evals = led.evals("a")
    assert steps["step"].tolist() == list(range(1, 31))
    assert steps.loc[0, ["tokens", "loss"]].tolist() == [1.0, 77.0]
    assert apart["step"].tolist() == [1] and apart.loc[0, ["tokens", "loss"]].tolist() == [4096.0, 2.9875]
    assert event["kind"] == "warning" and event["state"] == "resolved"
    assert event["body"]["superseded"]["evals"][0]["value"] == 2.5 and evals["value"].tolist() == [2.75]
    # merged again: nothing differs any more, nothing changes
    _invoke(here, "merge", str(other), code=0)
    with Ledger(here, readonly=True) as led:
        pd.testing.assert_frame_equal(led.steps("a"), steps)
        pd.testing.assert_frame_equal(led.superseded("a"), apart)
        assert len(led.events("a")) == 1
    check(
        "merge --replace of a ledger whose run holds a stored step differently",
        "the other ledger's values stored; this ledger's rows and evaluations kept apart as superseded (a resolved "
        "`warning` event), and the output says `REPLACED 1 stored step and 1 evaluation`",
        "0 (the replaced rows are kept)",
    )


def test_a_run_a_live_tracker_writes_is_merged_into_by_no_one_else(tmp_path):
    here, other = tmp_path / "ledger.db", tmp_path / "other.db"
    with Ledger(other) as led:  # steps the live run has not written: nothing differs, and it is still refused
        led.create_run("live", status="finished")
        led.append_steps("live", {"step": [100, 101], "tokens": [1.0, 2.0], "loss": [9.0, 9.0]})
    with Tracker("live", ledger=here) as tr:
        tr.step(tokens=1000, loss=1.0)
        for extra in ((), ("--replace",)):
            err = _invoke(here, "merge", str(other), *extra, code=2).stderr
            assert err.count("\n") == 1 and "being written by host" in err, err
    with Ledger(here, readonly=True) as led:
        assert led.steps("live")["step"].tolist() == [1] and led.superseded("live").empty
    shown = _shown(err, tmp_path)
    check(
        "merge into a run a live Tracker writes, with --replace too",
        f"refused, exit 2, the run unchanged: `{shown[: shown.index('host ') + 5]}…`",
        "0",
    )


def test_one_conflicting_run_leaves_every_run_unmerged(tmp_path):
    here, other = tmp_path / "ledger.db", tmp_path / "other.db"
    _finished(here)
    _finished(other, loss1=77.0)
    with Ledger(other) as led:  # created before `a` would be merged: all or nothing
        led.create_run("b")
        led.append_steps("b", {"step": [1], "loss": [1.0]})
    with Ledger(here) as led, Ledger(other, readonly=True) as side:
        with pytest.raises(InputError, match="replace"):
            merge_ledger(led, side, ["b", "a"])
        assert led.run_names() == ["a"]


def test_the_tracker_moves_its_own_spill_into_the_run_it_writes(tmp_path):
    here, spill = tmp_path / "ledger.db", tmp_path / "spill.db"
    with Ledger(spill) as side:
        side.create_run("own")
        side.append_steps("own", {"step": [2, 3], "loss": [1.0, 0.5]})
    with Tracker("own", ledger=here) as tr:
        tr.step(tokens=10, loss=2.0)
        with Ledger(here) as led, Ledger(spill, readonly=True) as side:
            with pytest.raises(RunInUse):
                copy_run(led, side, "own")  # another writer
        writer = tr._writer  # noqa: SLF001 - the Tracker's own writer moves its spill in
        assert writer is not None and writer.owner is not None
        with Ledger(here) as led, Ledger(spill, readonly=True) as side:
            assert copy_run(led, side, "own", owner=writer.owner) == 2


# -- the property: whatever the two ledgers hold, a merge never changes a stored value -----------------------------

_values = st.one_of(st.none(), st.sampled_from([0.0, 1.0, 2.5, float("nan"), -3.0]))
_records = st.dictionaries(st.integers(1, 12), st.tuples(_values, _values), min_size=1, max_size=8)


def _ledger_with(records: dict[int, tuple[float | None, float | None]]) -> Ledger:
    led = Ledger(":memory:")
    led.create_run("r", status="finished")
    steps = sorted(records)
    led.append_steps(
        "r",
        pd.DataFrame(
            {
                "step": steps,
                "loss": pd.array([records[s][0] for s in steps], dtype="Float64"),
                "lr": pd.array([records[s][1] for s in steps], dtype="Float64"),
            }
        ),
    )
    return led


def _cells(led: Ledger) -> dict[tuple[int, str], float | str]:
    """Every recorded (step, column) value; NaN as the string 'nan' so that it compares equal."""
    frame = led.steps("r", nullable=True)
    out = {}
    for column in ("loss", "lr"):
        if column not in frame:
            continue
        for step, value in zip(frame["step"], frame[column], strict=True):
            if value is not pd.NA:
                out[int(step), column] = "nan" if np.isnan(value) else float(value)
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(here=_records, there=_records, replace=st.booleans())
def test_a_merge_never_changes_a_stored_value_unless_replacing_and_then_keeps_it(here, there, replace):
    led, side = _ledger_with(here), _ledger_with(there)
    stored, given_ = _cells(led), _cells(side)
    differ = {k for k in stored.keys() & given_.keys() if stored[k] != given_[k]}
    try:
        merge_ledger(led, side, ["r"], replace=replace)
    except InputError:
        assert differ and not replace
        assert _cells(led) == stored
        return
    after = _cells(led)
    assert not differ or replace
    conflicting_steps = {s for s, _ in differ}
    for key, value in given_.items():  # every value of the other ledger is there
        assert after[key] == value
    for (step, column), value in stored.items():
        if step in conflicting_steps:  # replaced whole: the old record is kept apart
            apart = led.superseded("r")
            row = apart[apart["step"] == step]
            assert len(row) == 1
            kept = row[column].iloc[0]
            assert ("nan" if np.isnan(kept) else float(kept)) == value
        else:
            assert after[step, column] == value
    led.close()
    side.close()
