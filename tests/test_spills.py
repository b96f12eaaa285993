"""Spill files are never forgotten (issue #46, item 2): rows a Tracker kept aside in a spill file that vanished are
known missing to `check`, `show` and `runs`; rows that waited and came back are said to be back at close; spill
files go to a folder a job can name; and a campaign's probe claim holds the ledger's lock for milliseconds, not for
a read of every run, so a Tracker beside it is not pushed into a spill."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from pathlib import Path

import pytest

from tests.support.reliability import check
from yieldgate.errors import BlockDamaged
from yieldgate.ledger import Ledger
from yieldgate.probe.campaign.run import claim_probe
from yieldgate.probe.campaign.status import probe_statuses
from yieldgate.track.spill import SPILL_DIR_ENV
from yieldgate.track.tracker import Tracker, TrackerConfig

CONFIG = TrackerConfig(flush_every_s=0.1, log_every_steps=1)


def _steps(tr: Tracker, n: int) -> None:
    for _ in range(n):
        tr.step(tokens=128, loss=1.0)


def _wait(condition, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _locked(path: Path) -> sqlite3.Connection:
    """Another process's write lock on the ledger (a connection of its own, as a campaign's writer holds it)."""
    locker = sqlite3.connect(path, isolation_level=None, timeout=10)
    locker.execute("BEGIN EXCLUSIVE")
    return locker


@pytest.mark.slow  # a flush waits its second for the lock
def test_a_spill_file_that_vanished_is_known_missing_to_check_show_and_runs(tmp_path, cli_for):
    path = tmp_path / "ledger.db"
    with Tracker("v", ledger=path, config=CONFIG) as tr:
        _steps(tr, 20)
        _wait(lambda: tr.stats["written_rows"] >= 20)
        locker = _locked(path)
        _steps(tr, 30)
        _wait(lambda: tr.stats["spilled_rows"] >= 30)  # a flush waited 1 s for the lock, then spilled
        spill = tr.stats["spill_path"]
        for suffix in ("", "-wal", "-shm"):  # a job's private /tmp wiped, a scratch purge
            Path(f"{spill}{suffix}").unlink(missing_ok=True)
        locker.execute("COMMIT")
        locker.close()
        _steps(tr, 20)
    with Ledger(path, readonly=True) as led:
        assert len(led.steps("v")) == 40  # the 30 spilled steps are gone with their file
    cli = cli_for(path)
    out = cli("check", code=2).stdout
    line = f"missing: v: 30 steps MISSING: the Tracker left them in spill file {spill}"
    assert "".join(line.split()) in "".join(out.split()) and "INCOMPLETE" in out, out
    (gone,) = json.loads(cli("check", "--json", code=2).stdout)["waiting_spills"]
    assert gone["gone"] and gone["steps"] == 30 and gone["path"] == spill
    assert cli.json("show", "v")["waiting_spills"][0]["steps"] == 30
    assert "30 steps MISSING" in "".join(cli("runs").stdout.split("\n"))
    check(
        "spill file removed after the Tracker spilled 30 of 70 steps into it (a job's private /tmp wiped)",
        "the writer finds it gone when the ledger is writable again and records the 30 steps in the run's meta; "
        "`check` exits 2 (`INCOMPLETE`), `check`, `show` and `runs` say `30 steps MISSING` with the file's path; "
        "before: the run silently lacked them and `check` said whole",
        "30 (known and said)",
    )


@pytest.mark.slow  # a flush waits its second for the lock
def test_rows_kept_aside_while_the_ledger_was_busy_are_said_back_at_close(tmp_path, caplog):
    path = tmp_path / "ledger.db"
    with caplog.at_level(logging.WARNING, "yieldgate.track"), Tracker("b", ledger=path, config=CONFIG) as tr:
        _steps(tr, 10)
        locker = _locked(path)
        _steps(tr, 10)
        _wait(lambda: tr.stats["spilled_rows"] >= 10)
        locker.execute("COMMIT")
        locker.close()
        _steps(tr, 10)
    with Ledger(path, readonly=True) as led:
        assert led.steps("b")["step"].tolist() == list(range(1, 31))
    assert tr.stats["spill_path"] is None and not list(tmp_path.glob("yieldgate-spill-*"))
    back = [r.getMessage() for r in caplog.records if "are all back in the ledger" in r.getMessage()]
    assert len(back) == 1 and "kept aside in a spill file" in back[0], back


def test_spill_files_go_to_the_folder_the_job_names(tmp_path, monkeypatch):
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setenv(SPILL_DIR_ENV, str(folder))
    with Tracker("s", ledger=tmp_path / "ledger.db", config=CONFIG) as tr:
        first = tr._writer.spill_files()[0]  # noqa: SLF001
    assert Path(first).parent == folder
    with Ledger(tmp_path / "ledger.db", readonly=True) as led:
        assert led.meta("s")["spill"]["paths"][0] == first


def test_a_probe_claim_reads_its_own_run_only(tmp_path):
    """The claim of a probe ran `probe_statuses` (every run's record, checksums and meta) inside its write
    transaction: on 10,000 runs that held the lock for ~1 s, a Tracker's whole wait. Now one run's record: a damaged
    record of another run does not stop it, and it takes milliseconds however many runs the ledger holds."""
    path = tmp_path / "ledger.db"
    with Ledger(path) as led, led.transaction():
        for i in range(2000):
            led.create_run(f"c/r{i}", status="finished", source="probe")
            led.set_meta(f"c/r{i}", "probe", {"key": f"k{i}"})
    db = sqlite3.connect(path)
    db.execute("UPDATE runs SET status = 'failed' WHERE name = 'c/r7'")  # damage to another run's record
    db.commit()
    db.close()
    with Ledger(path) as led:
        with pytest.raises(BlockDamaged):
            probe_statuses(led)  # what the claim read before
        started = time.perf_counter()
        assert claim_probe(led, "c/new", "knew", {"key": "knew"})
        took = time.perf_counter() - started
        assert not claim_probe(led, "c/r3", "k3", {"key": "k3"})  # finished already: skipped
    assert took < 0.1, took
    check(
        "a campaign's probe claimed on a ledger of 2,000 runs, one of another run's records damaged",
        "claimed, reading its own run's record only, inside its write transaction (before: every run's record and "
        "meta under the write lock, which a Tracker beside the campaign waited its second for, then spilled; and the "
        "damaged record stopped it)",
        "0",
    )


def test_the_spill_dir_environment_variable_is_the_folder_not_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv(SPILL_DIR_ENV, os.fspath(tmp_path))
    with Tracker("e", ledger=tmp_path / "l.db", config=CONFIG) as tr:
        paths = tr._writer.spill_files()  # noqa: SLF001
    assert all(Path(p).name.startswith("yieldgate-spill-e-") for p in paths)
