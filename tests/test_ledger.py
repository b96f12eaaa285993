from __future__ import annotations

import hashlib
import multiprocessing as mp
import sqlite3
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from yieldgate.errors import InputError, LedgerError, RunNotFound, SchemaVersionError
from yieldgate.ledger import EvalRecord, Ledger, higher_is_better
from yieldgate.ledger import steps as ledger_steps
from yieldgate.manifest import parse_manifest
from yieldgate.names import STEP_VALUE_COLUMNS


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def ledger(ledger_location):
    """The tests that take `ledger` run on both backends: a SQLite file and a PostgreSQL schema."""
    with Ledger(ledger_location) as led:
        yield led


def test_core_columns_round_trip_exactly(ledger):
    rng = np.random.default_rng(0)
    n = 500
    cols = {c: rng.normal(size=n) for c in STEP_VALUE_COLUMNS}
    ledger.create_run("r")
    assert ledger.append_steps("r", {"step": np.arange(n), **cols}) == n
    frame = ledger.steps("r")
    assert list(frame.columns) == ["step", *STEP_VALUE_COLUMNS]
    assert frame["step"].dtype == np.int64
    for c in STEP_VALUE_COLUMNS:
        assert np.array_equal(frame[c].to_numpy(), cols[c])
    assert list(ledger.steps("r", ["loss", "tokens"]).columns) == ["step", "loss", "tokens"]


def test_nan_and_inf_are_kept_apart_from_missing(ledger):
    ledger.create_run("r")
    ledger.append_steps(
        "r",
        [
            {"step": 1, "loss": float("nan"), "grad_norm": float("inf")},
            {"step": 2, "loss": 2.0},
            {"step": 3, "loss": None, "grad_norm": -float("inf")},
        ],
    )
    frame = ledger.steps("r", ["loss", "grad_norm"], nullable=True)
    loss, grad = frame["loss"].array, frame["grad_norm"].array
    assert np.isnan(loss._data[0]) and not loss._mask[0]  # a recorded NaN
    assert loss._mask[2]  # not recorded
    assert grad[0] == np.inf and grad[1] is pd.NA and grad[2] == -np.inf
    plain = ledger.steps("r", ["loss"])
    assert np.isnan(plain["loss"][0]) and np.isnan(plain["loss"][2]) and plain["loss"][1] == 2.0


def test_relogged_steps_merge_column_by_column(ledger):
    ledger.create_run("r")
    ledger.append_steps("r", {"step": [1, 2, 3, 4], "loss": [4.0, 3.0, 2.0, 1.0], "lr": [1.0, 1.0, 1.0, 1.0]})
    # A resumed run re-logs steps 3-5: the new values win where recorded, old ones stay where not.
    ledger.append_steps("r", {"step": [3, 4, 5], "loss": [2.5, 1.5, 1.2]})
    frame = ledger.steps("r", ["loss", "lr"])
    assert frame["step"].tolist() == [1, 2, 3, 4, 5]
    assert frame["loss"].tolist() == [4.0, 3.0, 2.5, 1.5, 1.2]
    assert frame["lr"].tolist()[:4] == [1.0] * 4 and np.isnan(frame["lr"][4])
    # Out of order and repeated within one batch: the last record of a step wins.
    ledger.append_steps("r", {"step": [0, 2, 2], "loss": [9.0, 8.0, 7.0]})
    assert ledger.steps("r", ["loss"])["loss"].tolist() == [9.0, 4.0, 7.0, 2.5, 1.5, 1.2]
    assert ledger.run_info("r")["steps"] == 6


def test_small_appends_are_compacted_into_blocks_and_bulk_appends_split(ledger, monkeypatch):
    monkeypatch.setattr(ledger_steps, "BLOCK_ROWS", 64)
    monkeypatch.setattr(ledger_steps, "TAIL_MERGE_ROWS", 16)
    ledger.create_run("small")
    for step in range(200):  # a tracker flushing one row at a time
        ledger.append_steps("small", [{"step": step, "tokens": 10 * (step + 1), "loss": 1.0 / (step + 1)}])
    ledger.create_run("bulk")
    ledger.append_steps("bulk", {"step": np.arange(200), "tokens": 10.0 * np.arange(1, 201)})
    blocks = dict(
        ledger._db.execute(
            "SELECT r.name, COUNT(*) FROM step_blocks b JOIN runs r ON r.id = b.run_id GROUP BY r.name"
        ).fetchall()
    )
    # every COMPACT_BLOCKS small blocks at the end are merged: ~200/17 full ones, at most 15 small ones after
    assert blocks["small"] <= 200 // 17 + ledger_steps.COMPACT_BLOCKS
    assert blocks["bulk"] == 4
    small = ledger.steps("small")
    assert small["step"].tolist() == list(range(200))
    assert small["tokens"].tolist() == [10.0 * (s + 1) for s in range(200)]
    info = ledger.run_info("small")
    assert (info["steps"], info["last_step"], info["tokens"]) == (200, 199, 2000.0)


def test_bad_step_records_are_refused_and_change_nothing(ledger):
    ledger.create_run("r")
    ledger.append_steps("r", {"step": [1], "loss": [1.0]})
    with pytest.raises(InputError, match="unknown column 'perplexity'.*'signals/perplexity'"):
        ledger.append_steps("r", {"step": [2], "perplexity": [3.0]})
    with pytest.raises(InputError, match="whole number, got 2.5"):
        ledger.append_steps("r", {"step": [2.5], "loss": [1.0]})
    with pytest.raises(InputError, match="'step' is missing"):
        ledger.append_steps("r", [{"step": None, "loss": 1.0}])
    with pytest.raises(InputError, match="expected a number, got 'high'"):
        ledger.append_steps("r", [{"step": 3, "loss": "high"}])
    with pytest.raises(RunNotFound, match="no run named 'nope'"):
        ledger.append_steps("nope", {"step": [1], "loss": [1.0]})
    assert ledger.steps("r")["step"].tolist() == [1]


def test_extras_go_to_the_long_table(ledger):
    ledger.create_run("r")
    ledger.append_steps(
        "r",
        [
            {"step": 10, "loss": 2.0, "signals/gns": 120.0, "tokens/web": 1000, "signals/grad_norm/blocks.0": 0.5},
            {"step": 20, "loss": 1.9, "signals/gns": float("nan"), "tokens/web": 2000},
        ],
    )
    assert ledger.extra_keys("r") == ["signals/gns", "signals/grad_norm/blocks.0", "tokens/web"]
    gns = ledger.extras("r", ["signals/gns"])
    assert gns["step"].tolist() == [10, 20] and gns["value"][0] == 120.0 and np.isnan(gns["value"][1])
    layer = ledger.extras("r", ["signals/grad_norm/blocks.0"])
    assert layer["step"].tolist() == [10]  # not recorded at step 20: absent, not NaN
    assert len(ledger.extras("r")) == 5
    assert "signals/gns" not in ledger.steps("r").columns


def test_evals_upsert_and_directions(ledger):
    ledger.create_run("r")
    ledger.append_evals(
        "r",
        [
            EvalRecord(step=100, tokens=1e6, task="val", metric="loss", value=3.0),
            {"step": 100, "task": "lambada_openai", "metric": "acc", "value": 0.3},
            {"step": 200, "task": "val", "metric": "loss", "value": 2.5, "tokens": 2e6},
        ],
    )
    ledger.append_evals("r", [EvalRecord(step=200, task="val", metric="loss", value=2.4, tokens=2e6)])
    frame = ledger.evals("r")
    val = frame[(frame.task == "val") & (frame.metric == "loss")]
    assert val["value"].tolist() == [3.0, 2.4]
    assert not val["higher_is_better"].any()
    assert frame[frame.task == "lambada_openai"]["higher_is_better"].all()
    assert higher_is_better("acc") and not higher_is_better("bpb") and not higher_is_better("perplexity")
    info = ledger.run_info("r")
    assert (info["last_eval_task"], info["last_eval_metric"], info["last_eval_value"]) == ("val", "loss", 2.4)
    with pytest.raises(InputError, match="eval record 0"):
        ledger.append_evals("r", [{"step": 1, "task": "val", "metric": "loss", "value": 1.0, "bogus": 1}])


def test_a_standard_error_is_stored_beside_its_metric_in_any_order(ledger):
    """`acc_stderr` given with `acc`, after it, or before it (a Tracker logging them in two calls) is acc's `stderr`;
    a later value of acc without one keeps it; no `*_stderr` metric is ever stored."""
    ledger.create_run("r")
    acc = {"task": "arc", "metric": "acc", "portfolio": "lm-eval"}
    error = {"task": "arc", "metric": "acc_stderr", "portfolio": "lm-eval"}
    ledger.append_evals("r", [{**acc, "step": 1, "value": 0.5}, {**error, "step": 1, "value": 0.01}])
    ledger.append_evals("r", [{**acc, "step": 2, "value": 0.6}])
    ledger.append_evals("r", [{**error, "step": 2, "value": 0.02}])
    ledger.append_evals("r", [{**error, "step": 3, "value": 0.03}])
    ledger.append_evals("r", [{**acc, "step": 3, "value": 0.7}])
    ledger.append_evals("r", [{**acc, "step": 1, "value": 0.55}])
    frame = ledger.evals("r")
    assert frame["metric"].tolist() == ["acc"] * 3 and frame["higher_is_better"].all()
    assert frame["value"].tolist() == [0.55, 0.6, 0.7] and frame["stderr"].tolist() == [0.01, 0.02, 0.03]


def test_events_and_decisions(ledger):
    ledger.create_run("r")
    first = ledger.add_event(
        "r", "diagnosis", {"cause": "schedule", "confidence": 0.9, "x": float("inf")}, start_step=10, end_step=50
    )
    ledger.add_event("r", "warning", {"message": "slow"})
    assert ledger.events("r", state="open")["id"].tolist() == [first, first + 1]
    ledger.resolve_event(first)
    events = ledger.events("r")
    assert events.set_index("id").loc[first, "state"] == "resolved"
    assert events.set_index("id").loc[first, "body"]["x"] == "inf"
    assert ledger.events("r", kind="diagnosis", state="open").empty
    with pytest.raises(InputError, match="event kind"):
        ledger.add_event("r", "rumour", {})
    did = ledger.add_decision(
        "r",
        "hold",
        evidence={"seeds": 1},
        rationale="one seed: no interval",
        run="r",
        stage="s1",
        policy={"stages": []},
        policy_hash="p1",
    )
    dec = ledger.decisions("r")
    assert dec["id"].tolist() == [did] and dec["evidence"][0] == {"seeds": 1} and dec["decision"][0] == "hold"


def test_runs_listing_manifest_and_replace(ledger):
    manifest = parse_manifest({"data": {"sources": [{"name": "web"}]}, "seed": 1})
    ledger.create_run("a", manifest=manifest)
    ledger.append_steps("a", {"step": [1, 2], "tokens": [100.0, 200.0]})
    ledger.create_run("b", status="imported", source="import:table")
    table = ledger.runs()
    assert table["name"].tolist() == ["a", "b"]
    assert table.set_index("name").loc["a", "tokens"] == 200.0
    assert table.set_index("name").loc["a", "manifest_hash"] == manifest.content_hash()
    assert ledger.manifest("a") == manifest and ledger.manifest("b") is None
    with pytest.raises(InputError, match="already exists"):
        ledger.create_run("a")
    ledger.create_run("a", if_exists="reuse")
    assert len(ledger.steps("a")) == 2
    ledger.create_run("a", if_exists="replace", status="imported")
    assert ledger.steps("a").empty and ledger.run_info("a")["status"] == "imported"
    ledger.set_status("b", "finished")
    with pytest.raises(InputError, match="run status"):
        ledger.set_status("b", "done")
    for bad in ("", " padded", "bell\x07", "x" * 201):
        with pytest.raises(InputError):
            ledger.create_run(bad)
    ledger.create_run("<script>alert(1)</script>")  # stored as given; renderers escape it


def test_a_failed_transaction_leaves_nothing(ledger):
    ledger.create_run("r")
    with pytest.raises(RuntimeError):
        with ledger.transaction():
            ledger.append_steps("r", {"step": [1], "loss": [1.0]})
            ledger.append_evals("r", [EvalRecord(step=1, task="val", metric="loss", value=1.0)])
            raise RuntimeError("import failed halfway")
    assert ledger.steps("r").empty and ledger.evals("r").empty


def test_readonly_on_a_missing_file_creates_nothing(tmp_path):
    path = tmp_path / "none.db"
    with Ledger(path, readonly=True) as led:
        assert led.runs().empty
        with pytest.raises(LedgerError, match="read-only"):
            led.create_run("x")
    assert not path.exists()


def test_readonly_on_an_empty_file_writes_nothing(tmp_path):
    """A zero-byte file (`touch yieldgate.db`, or a mistyped --ledger naming some other empty file) reads as an
    empty ledger, as a missing one does: a read leaves it zero bytes, with no -wal or -shm beside it."""
    path = tmp_path / "empty.csv"
    path.touch()
    with Ledger(path, readonly=True) as led:
        assert led.runs().empty
        with pytest.raises(LedgerError, match="read-only"):
            led.create_run("x")
    assert path.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.csv"]


@pytest.mark.slow
def test_corrupt_file_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database" * 100)
    before = digest(path)
    for readonly in (False, True):
        with pytest.raises(LedgerError, match="not a usable yieldgate ledger"):
            Ledger(path, readonly=readonly)
    assert digest(path) == before


def test_newer_schema_is_refused_and_left_alone(ledger_path):
    with Ledger(ledger_path) as led:
        led.create_run("keep")
        led.append_steps("keep", {"step": [1, 2], "loss": [2.0, 1.0]})
    db = sqlite3.connect(ledger_path)
    db.execute("INSERT INTO schema_migrations VALUES ('0099_from_the_future', 0)")
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    before = digest(ledger_path)
    for readonly in (False, True):
        with pytest.raises(SchemaVersionError, match="newer yieldgate.*0099_from_the_future"):
            Ledger(ledger_path, readonly=readonly)
    assert digest(ledger_path) == before


def test_sqlite_url(tmp_path, monkeypatch):
    """SQLAlchemy's forms: sqlite:////absolute/path (four slashes) and sqlite:///relative/path, read and written;
    any other scheme is refused in one line, its password masked."""
    with Ledger(f"sqlite:///{tmp_path}/u.db") as led:
        led.create_run("r")
    assert (tmp_path / "u.db").exists()
    with Ledger(f"sqlite:///{tmp_path}/u.db", readonly=True) as led:
        assert led.location == f"{tmp_path}/u.db" and len(led.run_records()) == 1
    monkeypatch.chdir(tmp_path)
    with Ledger("sqlite:///u.db", readonly=True) as led:
        assert led.location == "u.db" and len(led.run_records()) == 1
    with pytest.raises(InputError, match=r"^mysql://me:\*\*\*@db/x: not a ledger address") as refused:
        Ledger("mysql://me:hunter2@db/x")
    assert "hunter2" not in str(refused.value)


# -- several processes ------------------------------------------------------------------------------


def _writer(path: str, run: str, batches: int, rows: int) -> None:
    with Ledger(path) as led:
        led.create_run(run)
        for b in range(batches):
            steps = np.arange(b * rows, (b + 1) * rows)
            led.append_steps(
                run,
                {"step": steps, "tokens": (steps + 1) * 100.0, "loss": 1.0 / (steps + 1), "signals/gns": steps * 1.0},
            )
            led.append_evals(run, [EvalRecord(step=int(steps[-1]), task="val", metric="loss", value=1.0)])


@pytest.mark.slow
def test_two_processes_write_different_runs_at_once(ledger_path):
    Ledger(ledger_path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(ledger_path), f"run-{i}", 60, 37)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    with Ledger(ledger_path, readonly=True) as led:
        for i in range(2):
            frame = led.steps(f"run-{i}")
            assert frame["step"].tolist() == list(range(60 * 37))
            assert np.array_equal(frame["tokens"].to_numpy(), (np.arange(60 * 37) + 1) * 100.0)
            assert len(led.extras(f"run-{i}")) == 60 * 37
            assert len(led.evals(f"run-{i}")) == 60


@pytest.mark.slow
def test_a_reader_sees_consistent_snapshots_while_a_run_is_written(ledger_location):
    Ledger(ledger_location).close()
    ctx = mp.get_context("spawn")
    proc = ctx.Process(target=_writer, args=(ledger_location, "live", 150, 20))
    proc.start()
    seen = set()
    try:
        with Ledger(ledger_location, readonly=True) as reader:
            deadline = time.monotonic() + 120
            while proc.is_alive() and time.monotonic() < deadline:
                if not reader.runs()["name"].eq("live").any():
                    continue
                frame = reader.steps("live", ["tokens"])
                n = len(frame)
                # Every snapshot is a whole number of committed batches, contiguous from step 0.
                assert n % 20 == 0
                assert frame["step"].tolist() == list(range(n))
                assert np.array_equal(frame["tokens"].to_numpy(), (np.arange(n) + 1) * 100.0)
                seen.add(n)
    finally:
        proc.join(timeout=120)
    assert proc.exitcode == 0
    assert len(seen) >= 2, "the reader should have seen the run part-way through"


def test_decisions_recorded_without_a_policy_read_back_and_list(ledger, ledger_location, cli_for):
    ledger.add_decision("t", "hold", evidence={"why": [1, 2]}, rationale="no policy given")
    ledger.add_decision(
        "t", "approve", evidence={}, rationale="with one", policy={"name": "p", "version": 2}, policy_hash="ab" * 32
    )
    table = ledger.decisions("t")
    assert table["policy"].tolist() == [None, {"name": "p", "version": 2}]
    assert table["evidence"].tolist() == [{"why": [1, 2]}, {}]
    cli = cli_for(ledger_location)
    assert [(d["stage"], d["policy"]) for d in cli.json("decisions")] == [
        (None, None),
        (None, {"name": "p", "version": 2}),
    ]
    assert "hold" in cli("decisions").stdout  # the table, where a missing policy once crashed it
