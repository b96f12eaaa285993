"""An import never overwrites a run that exists (yieldgate.ingest.guard): refused unless asked to replace it (the old
records set apart as superseded, never deleted) or to append after its last step; a run a live Tracker writes is
never written by an import; the same file twice is one import; telemetry attached to a run keeps what it holds."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from yieldgate import Tracker
from yieldgate.errors import InputError, RunInUse
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ledger import Ledger

STEPS = 30


def _tracked(path: Path, run: str = "a") -> None:
    """A finished Tracker run of STEPS steps (1000 tokens each) with an eval every 10 steps."""
    with Tracker(run, ledger=path) as tr:
        for s in range(1, STEPS + 1):
            tr.step(tokens=1000, loss=1.0 / s)
            if s % 10 == 0:
                tr.eval({"val/loss": 2.0 / s})


def _state(path: Path, run: str = "a") -> tuple:
    """Everything an import could change of a run: steps, evals, status and source, meta, events."""
    with Ledger(path, readonly=True) as led:
        info = led.run_info(run)
        return (
            led.steps(run).to_json(),
            led.evals(run).drop(columns="id", errors="ignore").to_json(),
            info["status"],
            info["source"],
            json.dumps(led.meta(run), sort_keys=True),
            len(led.events(run)),
        )


def _csv(tmp_path: Path, steps: range, name: str = "m.csv") -> Path:
    path = tmp_path / name
    path.write_text("step,tokens,loss\n" + "".join(f"{s},{s * 7},{5.0 + s}\n" for s in steps))
    return path


def test_an_import_over_a_finished_tracked_run_is_refused_and_changes_nothing(ledger_path, tmp_path, cli):
    _tracked(ledger_path)
    before = _state(ledger_path)
    err = cli("import", "table", str(_csv(tmp_path, range(1, 11))), "--run", "a", code=2).stderr
    assert err.count("\n") == 1 and err.startswith("error: run 'a' already exists"), err
    assert "--replace" in err and "--append" in err and "(finished, 30 steps, from tracker)" in err, err
    assert _state(ledger_path) == before
    with Ledger(ledger_path) as led, pytest.raises(InputError, match="import with replace") as caught:
        import_run(led, "table", [str(_csv(tmp_path, range(1, 11)))], ImportOptions(run="a"))
    assert caught.value.parameters == ("replace", "append")  # the library names its arguments, never flags
    assert _state(ledger_path) == before


def test_replace_sets_the_old_records_apart_and_reads_the_new(ledger_path, tmp_path):
    _tracked(ledger_path)
    with Ledger(ledger_path) as led:
        old, extras = led.steps("a"), len(led.extras("a"))
        (res,) = import_run(led, "table", [str(_csv(tmp_path, range(1, 11)))], ImportOptions(run="a", replace=True))
        assert res.set_apart == {"steps": STEPS, "extra_values": extras, "evals": 3}
        assert "30 step rows" in res.warnings[-1] and "set apart as superseded" in res.warnings[-1]
        steps = led.steps("a")
        assert steps["step"].tolist() == list(range(1, 11))
        assert steps["loss"].tolist() == [5.0 + s for s in range(1, 11)]
        assert led.evals("a").empty
        gone = led.superseded("a")
        assert gone["step"].tolist() == list(range(1, STEPS + 1))
        assert gone["loss"].tolist() == old["loss"].tolist() and gone["tokens"].tolist() == old["tokens"].tolist()
        (event,) = led.events("a", kind="warning").to_dict("records")
        assert event["body"]["replaced"]["status"] == "finished" and event["body"]["replaced"]["source"] == "tracker"
        assert [e["step"] for e in event["body"]["superseded"]["evals"]] == [10, 20, 30]
        assert led.events("a", kind="resume").empty  # not a restart: goodput counts no lost work
        info = led.run_info("a")
        assert (info["status"], info["source"]) == ("imported", "import:table")


def test_append_after_the_last_step_works_and_an_overlap_is_refused(ledger_path, tmp_path, cli):
    _tracked(ledger_path)
    before = _state(ledger_path)
    err = cli("import", "table", str(_csv(tmp_path, range(25, 41))), "--run", "a", "--append", code=2).stderr
    assert err.count("\n") == 1 and "step 25 is at or before run 'a''s last stored step (30)" in err, err
    assert _state(ledger_path) == before
    cli("import", "table", str(_csv(tmp_path, range(31, 41), "later.csv")), "--run", "a", "--append")
    with Ledger(ledger_path, readonly=True) as led:
        steps = led.steps("a")
        assert steps["step"].tolist() == list(range(1, 41))
        assert steps["loss"].tolist()[:STEPS] == [1.0 / s for s in range(1, STEPS + 1)]  # the tracked ones as they were
        assert len(led.evals("a")) == 3 and led.superseded("a").empty
        info = led.run_info("a")
        assert (info["status"], info["source"]) == ("finished", "tracker")  # appended to, not re-labelled


def test_a_live_tracker_run_is_never_written_by_an_import(ledger_path, tmp_path, cli):
    csv = _csv(tmp_path, range(100, 110))
    with Tracker("live", ledger=ledger_path) as tr:
        for _ in range(5):
            tr.step(tokens=1000, loss=1.0)
        for flags in ((), ("--replace",), ("--append",)):
            err = cli("import", "table", str(csv), "--run", "live", *flags, code=2).stderr
            assert err.count("\n") == 1 and "is being written by a live Tracker" in err, (flags, err)
        with Ledger(ledger_path) as led, pytest.raises(RunInUse):
            import_run(led, "table", [str(csv)], ImportOptions(run="live", replace=True))
    with Ledger(ledger_path, readonly=True) as led:
        assert led.steps("live")["step"].tolist() == [1, 2, 3, 4, 5] and led.superseded("live").empty


def test_the_same_file_twice_is_one_import_and_replace_then_reimports(ledger_path, tmp_path, cli):
    csv = _csv(tmp_path, range(1, 11))
    cli("import", "table", str(csv), "--run", "t")
    before = _state(ledger_path, "t")
    assert "already imported" in cli("import", "table", str(csv), "--run", "t").stdout
    assert "already imported" in cli("import", "table", str(csv), "--run", "t", "--replace").stdout
    assert _state(ledger_path, "t") == before
    other = _csv(tmp_path, range(1, 6), "other.csv")
    cli("import", "table", str(other), "--run", "t", "--replace")
    # the first file's records are set apart now: importing it again is a new import, not "already imported"
    out = cli("import", "table", str(csv), "--run", "t", "--replace").stdout
    assert "already imported" not in out
    with Ledger(ledger_path, readonly=True) as led:
        assert led.steps("t")["step"].tolist() == list(range(1, 11))
        assert led.superseded("t")["step"].tolist() == [*range(1, 11), *range(1, 6)]


def test_replace_and_append_together_are_refused(tmp_path):
    with pytest.raises(InputError, match="exclude each other"):
        ImportOptions(run="a", replace=True, append=True)


def test_telemetry_attached_to_a_run_keeps_the_values_it_holds(ledger, tmp_path):
    """`--join-on time` adds columns to a run by design; a column the run already holds at a step keeps its
    stored value (the Tracker's power reading), the telemetry's goes only where there was none."""
    ledger.create_run("r", status="finished")
    ledger.append_steps("r", {"step": [1, 2, 3], "wall_s": [10.0, 20.0, 30.0], "device/power_w": [111.0, None, None]})
    start = ledger.run_info("r")["created_at"]
    path = tmp_path / "gpu.csv"
    stamp = [datetime.fromtimestamp(start + t).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3] for t in (5, 15, 25)]
    path.write_text("timestamp, index, power.draw [W]\n" + "".join(f"{s}, 0, 300.00 W\n" for s in stamp))
    (res,) = import_run(ledger, "table", [str(path)], ImportOptions(run="r", join_on="time"))
    power = ledger.extras("r", ["device/power_w"]).set_index("step")["value"]
    assert power.to_dict() == {1: 111.0, 2: 300.0, 3: 300.0}
    assert res.kept == 1 and "the stored values are kept" in res.warnings[-1]
    with pytest.raises(InputError, match="do not apply to join_on time"):
        ImportOptions(run="r", join_on="time", replace=True)
