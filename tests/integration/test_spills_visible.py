"""Spills are never invisible (issue #32, item 4): a Tracker killed while its ledger could not take its rows leaves
them in a spill file; `runs`, `show` and `check` name that file with the steps waiting in it and the command that
brings them in, until `yieldgate merge` has. The spill goes beside the job (the ledger file's folder, else the
working directory), never silently to the system's temp folder."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from tests.conftest import NO_PG, PG_URL, pg_ledger_url
from tests.integration.test_kill_matrix import EACH, kill, side_file, wait_for_side
from tests.integration.test_reliability import child
from yieldgate.ledger import Ledger
from yieldgate.ledger.spills import META_KEY
from yieldgate.track.tracker import Tracker

pytestmark = pytest.mark.slow  # a training process killed mid-run


def test_a_killed_trackers_spill_is_named_by_runs_show_and_check_until_merged(tmp_path, cli_for):
    path, side = tmp_path / "k.db", tmp_path / "steps.txt"
    proc = child(tmp_path, path, 1_000_000, setup=side_file(side), each=EACH)
    try:
        wait_for_side(proc, side, 100)
        locker = sqlite3.connect(path, isolation_level=None, timeout=10)
        locker.execute("BEGIN EXCLUSIVE")  # every flush from now on fails: the rows go to the spill file
        deadline = time.time() + 60
        while not list(tmp_path.glob("yieldgate-spill-child-*.db")):
            assert time.time() < deadline, "no spill file after 60 s of a locked ledger"
            time.sleep(0.1)
        time.sleep(1.5)  # a few more flushes into it
        kill(proc)
        locker.execute("COMMIT")
        locker.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    (spill,) = tmp_path.glob("yieldgate-spill-child-*.db")
    with Ledger(spill, readonly=True) as s, Ledger(path, readonly=True) as led:
        waiting = len(set(s.steps("child")["step"]) - set(led.steps("child")["step"]))
    assert waiting > 0
    cli = cli_for(path)
    line = f"child: {waiting:,} steps waiting in {spill}"
    for command in (["runs"], ["show", "child"], ["check"]):
        out = "".join(cli(*command).stdout.split())  # a long path folds at the terminal's width
        assert "".join(line.split()) in out, (command, out)
        assert f"yieldgatemerge{spill}" in out
    (found,) = cli.json("check")["waiting_spills"]
    assert found["path"] == str(spill) and found["steps"] == waiting
    assert cli.json("show", "child")["waiting_spills"][0]["steps"] == waiting

    cli("merge", str(spill))
    for command in (["runs"], ["show", "child"], ["check"]):
        assert "waiting" not in cli(*command).stdout, command
    assert cli.json("check")["waiting_spills"] == []


def test_a_postgresql_run_spills_into_the_jobs_working_directory(tmp_path, monkeypatch):
    if not PG_URL:
        pytest.skip(NO_PG)
    monkeypatch.chdir(tmp_path)
    with pg_ledger_url() as url:
        with Tracker("pg-spill", ledger=url) as tr:
            tr.step(tokens=128, loss=1.0)
        with Ledger(url, readonly=True) as led:
            paths = led.meta("pg-spill")[META_KEY]["paths"]
    assert Path(paths[0]).parent == tmp_path  # before the temp folder, which no one looks in
    assert Path(paths[0]).name.startswith("yieldgate-spill-pg-spill-")
