"""Smaller holes of issue #32 item 8: the token given to `serve` is not echoed; read-only commands create nothing in
an empty PostgreSQL database; `tag`/`untag` hold the write lock briefly."""

from __future__ import annotations

import sqlite3
import time

import pytest
from typer.testing import CliRunner

from yieldgate.cli import app
from yieldgate.ledger import Ledger

TOKEN = "s3cret-given-by-the-user-0123456789"


@pytest.fixture
def served(tmp_path, monkeypatch):
    """`yieldgate serve` up to the point where it would start answering (the server's loop is not run)."""
    pytest.importorskip("uvicorn", reason="the [serve] extra is not installed")
    from yieldgate.serve.server import Server

    monkeypatch.setattr(Server, "run", lambda self: None)
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.create_run("a", status="finished")

    def serve(*args: str, env: dict[str, str] | None = None) -> str:
        result = CliRunner().invoke(app, ["--ledger", str(path), "serve", "--port", "0", *args], env=env)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return result.stdout

    return serve


def test_the_token_given_to_serve_is_not_echoed(served):
    for out in (
        served("--token", TOKEN),
        served("--host", "0.0.0.0", "--token", TOKEN),
        served("--host", "0.0.0.0", env={"YIELDGATE_TOKEN": TOKEN}),
    ):
        assert TOKEN not in out and "?token=<the token given>" in out, out


def test_a_generated_token_is_printed_once(served):
    out = served("--host", "0.0.0.0")
    assert out.count("?token=") == 1 and "<the token given>" not in out and "printed only this once" in out


def test_a_servers_repr_holds_no_token(tmp_path):
    pytest.importorskip("uvicorn", reason="the [serve] extra is not installed")
    from yieldgate.serve import open_server

    Ledger(tmp_path / "l.db").close()
    server = open_server(str(tmp_path / "l.db"), host="127.0.0.1", port=0, token=TOKEN)
    try:
        assert TOKEN not in repr(server) and TOKEN not in server.shown_url and TOKEN in server.url
    finally:
        server.sock.close()


# -- read-only commands on an empty PostgreSQL database ------------------------------------------------------


def test_the_decision_of_a_readonly_open():
    from yieldgate.ledger.connection import readonly_pg_open

    assert readonly_pg_open([], ["0001_initial", "0002_run_meta"]) == "empty"  # no ledger there: create nothing
    assert readonly_pg_open(["0001_initial"], ["0002_run_meta"]) == "upgrade"  # an older ledger: upgraded once
    assert readonly_pg_open(["0001_initial", "0002_run_meta"], []) == "read"


def test_readonly_runs_and_serve_create_no_table_in_an_empty_postgresql_database():
    from tests.conftest import pg_ledger_url

    with pg_ledger_url() as url:
        import psycopg

        def tables() -> int:
            with psycopg.connect(url) as db:
                row = db.execute(
                    "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()"
                ).fetchone()
                assert row is not None
                return int(row[0])

        result = CliRunner().invoke(app, ["--ledger", url, "runs", "--json"])
        assert result.exit_code == 0 and result.stdout.strip() == "[]", (result.stdout, result.stderr)
        with Ledger(url, readonly=True) as led:
            assert led.run_records() == []
        pytest.importorskip("uvicorn", reason="the [serve] extra is not installed")
        from yieldgate.serve import open_server

        open_server(url, host="127.0.0.1", port=0).sock.close()
        assert tables() == 0
        with Ledger(url) as led:  # a write makes the ledger, as before
            led.create_run("a")
        assert tables() > 0
        with Ledger(url, readonly=True) as led:
            assert [r["name"] for r in led.run_records()] == ["a"]


# -- tag and untag hold the write lock briefly -------------------------------------------------------------------


def _write_lock_held(led: Ledger, act) -> list[float]:
    """Seconds between each BEGIN IMMEDIATE and its COMMIT on the ledger's connection while `act` runs: how long
    another process's write (a Tracker's flush) waits."""
    marks: list[tuple[float, str]] = []
    db = led._db
    assert isinstance(db, sqlite3.Connection)  # the trace callback is SQLite's
    db.set_trace_callback(lambda sql: marks.append((time.perf_counter(), sql.strip().split()[0].upper())))
    try:
        act()
    finally:
        db.set_trace_callback(None)
    begins = [t for t, s in marks if s == "BEGIN"]
    commits = [t for t, s in marks if s == "COMMIT"]
    assert begins and len(begins) == len(commits)
    return [c - b for b, c in zip(begins, commits, strict=True)]


@pytest.mark.slow
def test_tag_and_untag_hold_the_write_lock_briefly_on_a_ledger_of_many_runs(tmp_path):
    """They matched the names against the whole runs list (every run's totals and checksums, a DataFrame) inside
    their write transaction: 0.22 s on 4,000 runs here (0.45-0.8 s with the ledger opened for the call), 1.5-2.1 s
    on a team's ledger, while a live Tracker's flush waited and spilled. Now the names alone: a few ms."""
    from yieldgate import api
    from yieldgate.ledger import EvalRecord

    path = tmp_path / "many.db"
    with Ledger(path) as led:
        with led.transaction():
            for i in range(4000):
                led.create_run(f"r-{i}", status="finished")
                led.append_steps(f"r-{i}", {"step": [1, 2, 3], "tokens": [1.0, 2.0, 3.0], "loss": [3.0, 2.0, 1.0]})
                led.append_evals(f"r-{i}", [EvalRecord(step=3, tokens=3.0, task="val", metric="loss", value=1.0)])
        held = _write_lock_held(led, lambda: api.tag_runs(["r-1000", "r-399*"], ["keep"], ledger=led))
        held += _write_lock_held(led, lambda: api.untag_runs(["r-1000"], ["keep"], ledger=led))
        assert led.tags("r-1000") == [] and led.tags("r-3999") == ["keep"]
    assert max(held) < 0.1, held  # 0.22 s before, here
