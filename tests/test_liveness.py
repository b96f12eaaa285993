"""A run's writer in another PID namespace (a container sharing the host's name: a `hostNetwork` pod, `docker
--network host`): its pid says nothing here, so its heartbeat alone tells whether it lives. Simulated by a claim
that records another namespace, as a container's Tracker would, with a pid no process holds here."""

from __future__ import annotations

import shutil
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.support.claims import set_claim
from tests.support.reliability import check
from yieldgate.errors import RunInUse
from yieldgate.ledger import Ledger
from yieldgate.ledger.owners import STALE_AFTER_S, Owner, liveness, process_namespace, shares_pids

GONE_PID = 2**22 + 17  # above Linux's pid_max: no process here holds it
ELSEWHERE = "00000000-0000-0000-0000-000000000000/pid:[4026532999]"  # another container's namespace


def _container_owner() -> Owner:
    return Owner(socket.gethostname(), GONE_PID, time.time() - 60, ELSEWHERE)


def _beat(led: Ledger, run: str, age: float) -> None:
    with led.transaction():  # set as a writer's flush sets it, with the claim's checksum
        set_claim(led._db, run, heartbeat=time.time() - age)


def test_a_writer_in_another_pid_namespace_lives_while_its_heartbeat_is_fresh(ledger_location, cli_for):
    with Ledger(ledger_location) as led:
        led.claim_run("pod", owner=_container_owner())  # stamps a fresh heartbeat
        assert led.run_info("pod")["status"] == "running"  # not `crashed`: its pid is not this host's to look up
        with pytest.raises(RunInUse, match="being written by host .* pid 4194321.*only its heartbeat"):
            led.claim_run("pod", owner=Owner.this_process(), resume=True, takeover=True)
        with pytest.raises(RunInUse, match="cannot rename run 'pod'"):
            led.rename_run("pod", "moved")
        with pytest.raises(RunInUse, match="cannot remove run 'pod'"):
            led.remove_runs(["pod"])
        assert [r["name"] for r in led.run_records(totals=False)] == ["pod"]

        _beat(led, "pod", STALE_AFTER_S + 5)  # the container went quiet
        assert led.run_info("pod")["status"] == "stale"
        with pytest.raises(RunInUse, match="stopped without closing it.*takeover=True"):
            led.claim_run("pod", owner=Owner.this_process(), resume=True)
        assert led.claim_run("pod", owner=Owner.this_process(), resume=True, takeover=True) is True
        assert led.run_info("pod")["status"] == "running"
        assert "4194321" in led.events("pod", kind="warning")["body"].tolist()[0]["takeover"]["from"]
    check(
        "a live Tracker in a container sharing the host's name (its own PID namespace), seen from the host",
        "`running` while its heartbeat is fresh, whatever its pid says here; takeover, rename and removal refused "
        f"until its heartbeat is {STALE_AFTER_S:.0f} s old (then `stale`, never `crashed`)",
        "0",
    )


def test_a_claim_that_recorded_no_namespace_is_judged_by_its_heartbeat(tmp_path):
    """A claim made by an older yieldgate (no `owner_ns`) may be a container's: its pid proves nothing on Linux."""
    if process_namespace() is None:
        pytest.skip("this system has no PID namespaces to tell apart")
    path = tmp_path / "old.db"
    with Ledger(path) as led:
        led.claim_run("old", owner=Owner(socket.gethostname(), GONE_PID, 1.0, None))
        assert led.run_info("old")["status"] == "running"
        with pytest.raises(RunInUse):
            led.rename_run("old", "new")
        _beat(led, "old", STALE_AFTER_S + 5)
        assert led.run_info("old")["status"] == "stale"


def test_a_writer_in_this_namespace_whose_process_is_gone_is_still_crashed(tmp_path):
    """Where the pid can be seen, it still tells at once: a SIGKILLed Tracker's run is taken over without waiting."""
    path = tmp_path / "here.db"
    with Ledger(path) as led:
        gone = Owner(socket.gethostname(), GONE_PID, time.time() - 60)  # this process's namespace
        assert shares_pids(gone) and gone.namespace == process_namespace()
        led.claim_run("here", owner=gone)
        assert led.run_info("here")["status"] == "crashed"
        assert led.claim_run("here", owner=Owner.this_process(), resume=True, takeover=True) is True


def test_liveness_reads_the_heartbeat_alone_across_namespaces():
    now = time.time()
    me = Owner.this_process()
    there = Owner(me.host, me.pid, me.started, ELSEWHERE)  # even a pid that is alive here says nothing
    assert not shares_pids(there) and there != me
    assert liveness(there, now - 1, now) == "live"
    assert liveness(there, now - STALE_AFTER_S - 1, now) == "stale"
    assert liveness(there, None, now) == "stale"
    assert liveness(Owner(me.host, GONE_PID, 1.0, ELSEWHERE), now - 1, now) == "live"
    assert liveness(Owner(me.host, GONE_PID, 1.0), now - 1, now) == "crashed"


def test_the_heartbeat_of_a_writer_is_its_own_namespace_s(tmp_path):
    """Two processes with one host name, pid and start time in two namespaces are two writers: a heartbeat from
    the other one is refused, as one from a process that lost the run."""
    path = tmp_path / "twin.db"
    me = Owner.this_process()
    with Ledger(path) as led:
        led.claim_run("twin", owner=me)
        led.heartbeat("twin", me)
        with pytest.raises(RunInUse, match="no longer this process's to write"):
            led.heartbeat("twin", Owner(me.host, me.pid, me.started, ELSEWHERE))


def test_an_older_ledger_gains_the_owner_namespace_and_keeps_its_claims(tmp_path):
    path = tmp_path / "older.db"
    with Ledger(path) as led:
        led.claim_run("kept", owner=Owner.this_process())
    db = sqlite3.connect(path)  # as a yieldgate before 0011_owner_namespace left it (and so before 0012)
    db.execute("ALTER TABLE runs DROP COLUMN owner_ns")
    db.execute("DROP INDEX step_blocks_summary")
    db.execute("CREATE INDEX step_blocks_summary ON step_blocks (run_id, n, last_step, tokens_max, wall_s_max)")
    for table, column in (("runs", "claim_checksum"), ("step_blocks", "summary_checksum")):
        db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    for table in ("events", "decisions"):
        db.execute(f"ALTER TABLE {table} DROP COLUMN id_checksum")
    db.execute("DELETE FROM schema_migrations WHERE name IN ('0011_owner_namespace', '0012_more_checksums')")
    db.commit()
    db.close()
    with Ledger(path) as led:
        assert led.run_info("kept")["status"] == "running"  # this process, heartbeat fresh
        assert led._db.execute("SELECT owner_ns FROM runs").fetchone() == (None,)


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("unshare") is None, reason="Linux unshare")
def test_a_process_in_its_own_pid_namespace_records_another_namespace():
    """The namespace recorded is the process's own: a child in a new PID namespace (`unshare --pid`, as a container
    is) reads another one, on the same boot."""
    code = "from yieldgate.ledger.owners import process_namespace; print(process_namespace())"
    try:
        out = subprocess.run(
            ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot make a PID namespace here: {exc}")
    if out.returncode != 0:
        pytest.skip(f"cannot make a PID namespace here: {out.stderr.strip()[:200]}")
    theirs, mine = out.stdout.strip(), process_namespace()
    assert mine is not None and theirs != mine
    assert theirs.split("/")[0] == mine.split("/")[0]  # the same boot
