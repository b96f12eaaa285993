"""`yieldgate ledger copy`: a whole ledger from SQLite to PostgreSQL and back, every record with its ids, verified
before it commits; a destination with records refused unless told; no password in any message."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from tests.conftest import pg_ledger_url
from yieldgate.errors import InputError, LedgerError
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.ledger.check import check_ledger
from yieldgate.ledger.copy import TABLES, copy_ledger, ledger_digest
from yieldgate.manifest import parse_manifest


def _fill(location: str) -> None:
    """Something of every kind a ledger holds."""
    manifest = parse_manifest({"data": {"sources": [{"name": "web"}]}, "seed": 1})
    with Ledger(location) as led:
        for r, name in enumerate(("a", "b")):
            led.create_run(name, manifest=manifest)
            n = 700
            led.append_steps(
                name,
                {
                    "step": np.arange(n),
                    "tokens": 100.0 * np.arange(1, n + 1),
                    "loss": np.where(np.arange(n) == 5, np.nan, 3.0 / (np.arange(n) + 1 + r)),
                    "signals/gns": np.arange(n) * 0.25,
                },
            )
            led.append_evals(
                name,
                [
                    EvalRecord(step=s, tokens=100.0 * s, task="val", metric="loss", value=2.0 / s)
                    for s in (100, 200, 300)
                ],
            )
            led.append_evals(name, [EvalRecord(step=400, task="val", metric="loss", value=float("nan"))])
        led.supersede("b", 500, resume={"step": 500, "tokens": 50_000.0})
        led.tag_run("a", ["baseline", "bs64"])
        led.set_note("a", "the reference run")
        led.set_meta("a", "mfu", {"formula": "6N"})
        led.add_event("a", "diagnosis", {"cause": "schedule"}, start_step=10, end_step=20)
        led.add_decision("stage-1", "approve", evidence={"runs": ["a"]}, rationale="yield holds", run="a")
        led.put_campaign("mix", {"recipes": ["x"]}, "h1")
        led.set_campaign_summary("mix", {"best": "x"})
        led.create_run("empty", status="imported", source="import:table")


def _same_records(a: str, b: str) -> None:
    with Ledger(a, readonly=True) as x, Ledger(b, readonly=True) as y:
        assert ledger_digest(x) == ledger_digest(y)
        rx, ry = x.runs(), y.runs()
        assert rx.drop(columns=["status"]).equals(ry.drop(columns=["status"]))
        for run in rx["name"]:
            pd.testing.assert_frame_equal(x.steps(run, nullable=True), y.steps(run, nullable=True))
            pd.testing.assert_frame_equal(x.extras(run), y.extras(run))
            pd.testing.assert_frame_equal(x.evals(run), y.evals(run))
            pd.testing.assert_frame_equal(x.superseded(run), y.superseded(run))
            assert x.tags(run) == y.tags(run) and x.note(run) == y.note(run) and x.meta(run) == y.meta(run)
        assert x.events().equals(y.events()) and x.decisions().equals(y.decisions())
        assert x.campaign("mix") == y.campaign("mix")


def test_sqlite_to_postgres_and_back_keeps_every_record(tmp_path):
    src, back = str(tmp_path / "src.db"), str(tmp_path / "back.db")
    _fill(src)
    with pg_ledger_url() as pg:
        there = copy_ledger(src, pg)
        assert there.rows["runs"] == 3 and there.rows["superseded_blocks"] >= 1 and there.replaced == 0
        _same_records(src, pg)
        with Ledger(pg) as led:
            assert check_ledger(led).clean and check_ledger(led).verified_blocks == sum(
                there.rows[t] for t in ("step_blocks", "extra_blocks", "superseded_blocks")
            )
            # the copy's ids are taken: the next records get new ones
            led.create_run("after")
            led.add_event("after", "warning", {})
            assert led.run_id("after") > led.run_id("empty")
        back_result = copy_ledger(pg, back)
        assert back_result.rows["runs"] == 4
    with Ledger(back) as led:
        led.remove_runs(["after"])
    _same_records(src, back)


def test_a_destination_with_records_is_refused_unless_replaced(tmp_path, cli_for):
    src, dest = str(tmp_path / "src.db"), str(tmp_path / "dest.db")
    _fill(src)
    with Ledger(dest) as led:
        led.create_run("theirs")
    with Ledger(dest) as led:
        before = ledger_digest(led)
    with pytest.raises(InputError, match="holds 1 records already.*replace=True"):
        copy_ledger(src, dest)
    result = cli_for(src)("ledger", "copy", src, dest, code=2)
    assert "--replace" in result.stderr or "replace" in result.stderr
    with Ledger(dest) as led:
        assert ledger_digest(led) == before
    out = cli_for(src)("ledger", "copy", src, dest, "--replace", "--json")
    assert '"replaced": 1' in out.stdout
    _same_records(src, dest)


def test_the_cli_copies_to_postgres_and_never_prints_the_password(tmp_path, cli_for):
    src = str(tmp_path / "src.db")
    _fill(src)
    with pg_ledger_url() as pg:
        password = pg.split("@")[0].rsplit(":", 1)[1]
        out = cli_for(src)("ledger", "copy", src, pg)
        assert "3 runs" in out.stdout and "counts and digest verified" in out.stdout
        assert password not in out.stdout and ":***@" in out.stdout
        again = cli_for(src)("ledger", "copy", src, pg, code=2)
        assert password not in again.stderr and "holds" in again.stderr
        assert cli_for(pg).json("runs")[0]["name"] == "a"


def test_a_copy_that_fails_verification_stores_nothing(tmp_path, monkeypatch):
    src, dest = str(tmp_path / "src.db"), str(tmp_path / "new.db")
    _fill(src)
    calls = []

    def digest_that_differs_on_the_destination(ledger):
        calls.append(ledger.location)
        got = ledger_digest(ledger)
        return got if len(calls) == 1 else ("0" * 64, got[1])

    monkeypatch.setattr("yieldgate.ledger.copy.ledger_digest", digest_that_differs_on_the_destination)
    with pytest.raises(LedgerError, match="the copy does not match .*digests differ.*nothing was stored"):
        copy_ledger(src, dest)
    assert not os.path.exists(dest)


def test_a_missing_source_is_one_line_and_creates_nothing(tmp_path, cli_for):
    result = cli_for(tmp_path / "x.db")("ledger", "copy", str(tmp_path / "none.db"), str(tmp_path / "d.db"), code=2)
    assert "no ledger there to copy" in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "d.db").exists()
    assert set(TABLES) >= {"runs", "step_blocks", "decisions"}
