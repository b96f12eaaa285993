"""Smaller holes of issue #32 item 8: the token given to `serve` is not echoed; read-only commands create nothing in
an empty PostgreSQL database; `tag`/`untag` hold the write lock briefly."""

from __future__ import annotations

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
                return db.execute(
                    "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()"
                ).fetchone()[0]

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
