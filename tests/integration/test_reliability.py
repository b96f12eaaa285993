"""Faults of real clusters, tried on the Tracker and the ledger; each test keeps its docs/reliability.md row true
(tests/support/reliability.py: the table is the tests' own results)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.reliability import check
from yieldgate.ledger import Ledger
from yieldgate.track.tracker import Tracker, TrackerConfig

pytestmark = pytest.mark.slow  # real trainings, probes or processes: `make test-all`

# A child process: a training loop of cheap steps under the Tracker, printing "step wall-time" after each
# step returns, so the parent knows exactly which steps the loop completed and when.
CHILD = """
import os, resource, signal, sys, time
from yieldgate.track.tracker import Tracker, TrackerConfig
ledger, steps, close = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "close"
tr = {tracker}
{setup}
for i in range(1, steps + 1):
    tr.step(tokens=128, samples=1, loss=1.0 / i, extras={{"signals/pad": float(i)}})
    print(i, time.time(), flush=True)
    {each}
    time.sleep(0.004)
if close:
    tr.close()
    print("stats", tr.stats["faults"], tr.stats["dropped_rows"], tr.stats["spilled_rows"], flush=True)
"""


TRACKER = (
    'Tracker("child", ledger=ledger, suffix_if_taken=False, config=TrackerConfig(log_every_steps=10, '
    "flush_every_s=0.5))"
)
"""The child's Tracker, as constructed by default (a scenario may resume or take over instead): always the run
`child`, a second writer refused rather than recorded as `child-2`."""


def child(
    tmp_path: Path,
    ledger: Path,
    steps: int,
    *,
    close: bool = False,
    setup: str = "",
    each: str = "",
    tracker: str = TRACKER,
) -> subprocess.Popen:
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(setup=textwrap.indent(setup, "").strip(), each=each.strip(), tracker=tracker))
    return subprocess.Popen(
        [sys.executable, str(script), str(ledger), str(steps), "close" if close else "open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,  # the job's working directory, where a spill goes when the ledger's folder cannot take it
    )


def printed(lines: list[str]) -> dict[int, float]:
    return {int(a): float(b) for a, b in (line.split() for line in lines if line[:1].isdigit())}


def stored_steps(path: Path) -> tuple[set[int], str]:
    with Ledger(path, readonly=True) as led:
        return set(led.steps("child")["step"].tolist()), led.run_info("child")["status"]


def wait_for_steps(proc: subprocess.Popen, n: int) -> list[str]:
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    while len(lines) < n:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        lines.append(line)
    return lines


def test_sigkill_mid_write_loses_at_most_the_last_flush_interval(tmp_path):
    path = tmp_path / "k.db"
    proc = child(tmp_path, path, 100_000)
    lines = wait_for_steps(proc, 600)
    proc.send_signal(signal.SIGKILL)
    killed_at = time.time()
    out, _ = proc.communicate()
    done = printed(lines + out.splitlines())
    stored, status = stored_steps(path)  # opens cleanly
    missing = set(done) - stored
    assert stored <= set(done) | {max(done) + 1}
    oldest_missing = min((done[s] for s in missing), default=killed_at)
    assert killed_at - oldest_missing <= 2.0, (
        f"{len(missing)} steps missing, the oldest from {killed_at - oldest_missing:.2f} s before the kill"
    )
    assert status == "crashed"  # nothing runs at SIGKILL: still recorded `running`, shown crashed (its pid is gone)
    check(
        "training process killed (SIGKILL) mid-write",
        "ledger opens cleanly; rows of the last flush interval missing; the run shows `crashed` (its process is "
        "gone), not `running`",
        "≤ 2 s of steps",
    )


@pytest.mark.parametrize("how", ["SIGTERM", "exit without close"])
def test_sigterm_and_exit_without_close_flush_everything(tmp_path, how):
    path = tmp_path / "t.db"
    proc = child(tmp_path, path, 400 if how == "exit without close" else 100_000)
    if how == "SIGTERM":
        lines = wait_for_steps(proc, 300)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGTERM, err  # the process ends as SIGTERM would have ended it
    else:
        out, err = proc.communicate(timeout=120)
        lines = []
        assert proc.returncode == 0, err
    done = printed(lines + out.splitlines())
    stored, status = stored_steps(path)
    assert set(done) <= stored and len(stored - set(done)) <= 1  # a step interrupted after recording, not printing
    assert status == "killed"
    check(f"training process ends by {how}", "every recorded step flushed; run status `killed`", "0")


def test_disk_full_spills_and_the_rows_arrive_when_space_returns(tmp_path):
    path = tmp_path / "full.db"
    # The file-size limit stands in for a full disk: writes past it fail (EFBIG; SQLite says "disk I/O
    # error"). Once the Tracker has spilled rows, the limit is lifted, as when space is freed. 512 KiB: the
    # ledger's log outgrows it mid-run, while a fresh spill file (its schema's log is ~250 KiB) still fits.
    setup = """
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, hard))
"""
    each = "if tr.stats['spilled_rows'] or i == 2500: resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))"
    proc = child(tmp_path, path, 3000, close=True, setup=setup, each=each)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    faults, dropped, spilled = map(int, out.splitlines()[-1].split()[1:])
    stored, status = stored_steps(path)
    assert stored == set(range(1, 3001)) and dropped == 0 and status == "finished"
    assert faults >= 1 and "write failed (disk I/O error)" in err and "they are kept in" in err, err
    assert not list(tmp_path.glob("yieldgate-spill-*"))  # moved into the ledger and removed
    check(
        "disk full (file-size limit) mid-run",
        "training goes on; rows spill to a side file, reach the ledger when space returns",
        "0",
    )


def _lock(path: Path, hold: float) -> subprocess.Popen[str]:
    """Another process holding the ledger's write lock for `hold` seconds, from when this returns."""
    locker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sqlite3, sys, time
        db = sqlite3.connect({str(path)!r}, isolation_level=None)
        db.execute("BEGIN EXCLUSIVE")
        print("locked", flush=True)
        time.sleep({hold})
        db.execute("COMMIT")
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
    return locker


@pytest.mark.parametrize("hold", [3.0, pytest.param(30.0, marks=pytest.mark.soak)])
def test_a_locked_ledger_does_not_slow_the_loop_and_rows_arrive_after(tmp_path, hold):
    path = tmp_path / "lock.db"
    Ledger(path).close()
    locker = _lock(path, hold)
    start = time.perf_counter()
    slowest = 0.0
    steps = 0
    with Tracker("locked", ledger=path, config=TrackerConfig(flush_every_s=0.2)) as tr:
        while time.perf_counter() - start < hold + 1.5:
            t = time.perf_counter()
            tr.step(tokens=128, samples=1, loss=1.0)
            slowest = max(slowest, time.perf_counter() - t)
            steps += 1
            time.sleep(0.002)
    locker.wait(timeout=30)
    with Ledger(path, readonly=True) as led:
        assert len(led.steps("locked")) == steps
    assert slowest < 0.05, f"a Tracker call took {slowest * 1e3:.1f} ms while the ledger was locked"
    check(
        "ledger locked by another process (3 s here, 30 s in `make soak`)",
        "no Tracker call slowed (each < 50 ms); rows written once the lock clears",
        "0",
    )


def test_close_waits_for_a_lock_held_past_the_last_step(tmp_path):
    """Another process writes (an import, sixteen Trackers) as the loop ends: the last flush waits for the lock
    (up to 30 s) rather than leave the last rows in a spill file that someone must merge."""
    path = tmp_path / "busy.db"
    Ledger(path).close()
    with Tracker("busy", ledger=path, config=TrackerConfig(flush_every_s=30, spill_dir=str(tmp_path))) as tr:
        for _ in range(50):
            tr.step(tokens=128, samples=1, loss=1.0)
        tr.eval({"val/loss": 1.0})
        time.sleep(0.5)  # the writer has opened the ledger; its first flush is the last, at close
        locker = _lock(path, 3.0)
        for _ in range(50):
            tr.step(tokens=128, samples=1, loss=1.0)
        tr.eval({"val/loss": 0.9})
        start = time.perf_counter()
    waited = time.perf_counter() - start
    locker.wait(timeout=30)
    with Ledger(path, readonly=True) as led:
        assert len(led.steps("busy")) == 100 and len(led.evals("busy")) == 2
        assert led.run_info("busy")["status"] == "finished"
    assert tr.stats["spilled_rows"] == 0 and tr.stats["spill_path"] is None and tr.stats["faults"] == 0, tr.stats
    assert not list(tmp_path.glob("yieldgate-spill-*")) and 1.5 < waited < 10.0, waited
    check(
        "ledger locked by another process as the loop ends (3 s)",
        "close waits for the lock (up to 30 s): the last rows and the status reach the ledger, no spill file is left",
        "0",
    )


def test_a_read_only_path_spills_and_merge_brings_the_rows_in(tmp_path, cli, monkeypatch):
    ledger = "/proc/yieldgate-readonly-test.db"  # a folder no process may create files in, root included
    monkeypatch.chdir(tmp_path)  # the spill goes to the job's working directory
    with Tracker("ro", ledger=ledger, config=TrackerConfig(flush_every_s=0.1, log_every_steps=5)) as tr:
        for i in range(40):
            tr.step(tokens=128, samples=1, loss=1.0 / (i + 1))
    spill = tr.stats["spill_path"]
    try:
        assert spill and tr.stats["spilled_rows"] == 40 and tr.stats["dropped_rows"] == 0
        host = "".join(c if c.isalnum() or c in "-_." else "_" for c in socket.gethostname())
        assert Path(spill).name == f"yieldgate-spill-ro-{host}-{os.getpid()}.db"  # nodes sharing a folder never collide
        assert Path(spill).parent == tmp_path
        out = cli.json("merge", spill)
        assert out["runs"] == {"ro": 40}
        assert cli.json("merge", spill)["runs"] == {"ro": 40}  # twice: nothing doubles
        with Ledger(cli.ledger_path, readonly=True) as led:
            assert led.steps("ro")["step"].tolist() == list(range(1, 41))
            assert led.run_info("ro")["status"] == "finished"
    finally:
        for suffix in ("", "-wal", "-shm"):
            if spill and os.path.exists(spill + suffix):
                os.remove(spill + suffix)
    check(
        "ledger on a read-only path",
        "training goes on; rows kept in a spill file, brought in by `yieldgate merge`",
        "0",
    )


def test_a_ledger_removed_mid_run_is_made_again(tmp_path):
    path = tmp_path / "gone.db"
    with Tracker("gone", ledger=path, config=TrackerConfig(flush_every_s=0.05, log_every_steps=5)) as tr:
        for _ in range(20):
            tr.step(tokens=128, samples=1, loss=1.0)
        time.sleep(0.3)
        written = tr.stats["written_rows"]
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        for _ in range(20):
            tr.step(tokens=128, samples=1, loss=1.0)
    with Ledger(path, readonly=True) as led:
        steps = led.steps("gone")["step"].tolist()
    assert written == 20 and steps == list(range(21, 41))
    check(
        "ledger file removed mid-run",
        "a new ledger is made in its place and the run goes on in it",
        "0 of the rows not yet written (the removed file's rows go with it)",
    )


# A training loop that runs until killed, writing "step wall-time" to a side file after each step returns
# (flushed: the parent reads exactly which steps the loop completed, even after SIGKILL).
LOOP = """
import sys, time
from yieldgate.track.tracker import Tracker, TrackerConfig
ledger, side = sys.argv[1], open(sys.argv[2], "w")
tr = Tracker("child", ledger=ledger, suffix_if_taken=False, config=TrackerConfig(flush_every_s=0.5))
i = 0
while True:
    i += 1
    tr.step(tokens=128, samples=1, loss=1.0 / i)
    side.write(f"{i} {time.time()}\\n")
    side.flush()
    time.sleep(0.002)
"""


def completed(side: Path) -> dict[int, float]:
    lines = side.read_text().splitlines()
    return {int(a): float(b) for a, b in (line.split() for line in lines if len(line.split()) == 2)}


def test_sigkill_while_the_ledger_is_locked_loses_no_more_than_when_it_is_healthy(tmp_path):
    import sqlite3

    path, side = tmp_path / "locked.db", tmp_path / "steps.txt"
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    proc = subprocess.Popen([sys.executable, str(script), str(path), str(side)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while not (side.exists() and len(completed(side)) >= 300):
            assert proc.poll() is None and time.time() < deadline, proc.stderr.read() if proc.poll() is not None else ""
            time.sleep(0.05)
        locker = sqlite3.connect(path, isolation_level=None, timeout=10)
        locker.execute("BEGIN EXCLUSIVE")  # the ledger cannot be written: every flush now fails
        time.sleep(5.0)
        proc.send_signal(signal.SIGKILL)
        killed_at = time.time()
        proc.wait(timeout=30)
        locker.execute("COMMIT")
        locker.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    done = completed(side)
    stored, _ = stored_steps(path)
    spills = list(tmp_path.glob("yieldgate-spill-*.db"))
    for spill in spills:
        with Ledger(spill, readonly=True) as led:
            stored |= set(led.steps("child")["step"].tolist())
    missing = set(done) - stored
    assert stored <= set(done) | {max(done) + 1}
    oldest_missing = min((done[s] for s in missing), default=killed_at)
    print(
        f"{len(missing)} of {len(done)} steps lost, the oldest from {killed_at - oldest_missing:.2f} s before the kill"
    )
    assert killed_at - oldest_missing <= 2.0, (
        f"{len(missing)} of {len(done)} steps lost, the oldest from {killed_at - oldest_missing:.2f} s before the kill"
    )
    assert spills, "rows taken during the lock went to no spill file"
    check(
        "training process killed (SIGKILL) while the ledger is locked (5 s)",
        "rows go to a spill file (synced) at the first failed flush; the ledger plus the spill file lack only the "
        "last flush interval",
        "≤ 2 s of steps",
    )


def test_the_trackers_commits_are_synced_before_they_return(tmp_path, monkeypatch):
    # A power loss cannot be staged here; what bounds its loss can be checked: every transaction the Tracker
    # commits (claim, flushes, heartbeat, status, spill) runs on a connection with synchronous=FULL, where
    # SQLite syncs the WAL before COMMIT returns (with NORMAL, commits since the last checkpoint may be lost).
    import yieldgate.track.setup as setup_module
    import yieldgate.track.tracker as tracker_module
    import yieldgate.track.writer as writer_module

    modes: list[int] = []

    class Spy(Ledger):
        def transaction(self):
            modes.append(self._db.execute("PRAGMA synchronous").fetchone()[0])
            return super().transaction()

    monkeypatch.setattr(tracker_module, "Ledger", Spy)
    monkeypatch.setattr(setup_module, "Ledger", Spy)  # the claim and the run's notes (track/setup.py)
    monkeypatch.setattr(writer_module, "Ledger", Spy)
    slowest = 0.0
    with Tracker("durable", ledger=tmp_path / "d.db", config=TrackerConfig(flush_every_s=0.05)) as tr:
        for i in range(300):
            t = time.perf_counter()
            tr.step(tokens=128, samples=1, loss=1.0 / (i + 1))
            slowest = max(slowest, time.perf_counter() - t)
            time.sleep(0.002)
    with Ledger(tmp_path / "d.db", readonly=True) as led:
        assert len(led.steps("durable")) == 300
    assert len(modes) >= 10 and set(modes) == {2}, modes  # 2: FULL (1 would be NORMAL)
    assert slowest < 0.05, f"a Tracker call took {slowest * 1e3:.1f} ms"  # the syncs stay on the writer thread
    check(
        "host crash or power loss mid-run",
        "what the Tracker committed survives: each commit syncs the WAL before it returns (synchronous=FULL, "
        "~2 ms per flush on the writer thread, `benchmarks/bench_durability.py`)",
        "≤ 1 flush interval (1 s) of steps",
    )


@pytest.mark.parametrize("how", ["truncated", "replaced by an older copy"])
def test_a_ledger_truncated_or_replaced_mid_run_is_not_written_into(tmp_path, how):
    import shutil
    import sqlite3

    path = tmp_path / "live.db"
    older = tmp_path / "backup.db"
    with Tracker("live", ledger=path, config=TrackerConfig(flush_every_s=0.05, log_every_steps=5)) as tr:
        for phase in range(3):
            for _ in range(200):
                tr.step(tokens=128, samples=1, loss=1.0, extras={f"signals/pad{phase}_{k}": 1.0 for k in range(20)})
            time.sleep(0.3)
            with sqlite3.connect(path) as db:  # what SQLite's auto-checkpoint does in a long run: the file grows
                db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            time.sleep(0.2)
            if phase == 0:
                shutil.copyfile(path, older)
        written = tr.stats["written_rows"]
        if how == "truncated":
            os.truncate(path, os.path.getsize(path) // 2)
        else:
            shutil.copyfile(older, path)  # `cp backup.db live.db`: the same inode, other contents
        for _ in range(100):
            tr.step(tokens=128, samples=1, loss=1.0)
        time.sleep(0.3)
    stats = tr.stats
    assert written == 600 and stats["written_rows"] == 600, stats
    assert stats["spill_path"] and stats["spilled_rows"] == 100 and stats["dropped_rows"] == 0, stats
    with Ledger(stats["spill_path"], readonly=True) as led:
        assert led.steps("live")["step"].tolist() == list(range(601, 701))
        assert led.run_info("live")["recorded_status"] == "finished"
    check(
        f"ledger file {how} mid-run",
        "seen at the next flush (the file is shorter than the writer left it); the run goes on into a spill file, "
        "never into that file",
        "0 of the rows not yet written",
    )


@pytest.mark.parametrize("how", ["truncated", "with a damaged write-ahead log header"])
def test_runs_refuses_a_ledger_that_fails_its_quick_check(tmp_path, cli_for, how):
    import shutil

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.create_run("a")
        led.append_steps("a", {"step": list(range(1, 5001)), "loss": [1.0] * 5000})
        if how == "truncated":  # its last pages: the tail of a block's bytes
            led.close()
            os.truncate(path, os.path.getsize(path) - 4 * 4096)
        else:  # a host that went down mid-run leaves the log beside the file; its header is damaged
            copy = tmp_path / "c.db"
            shutil.copyfile(path, copy)
            shutil.copyfile(f"{path}-wal", f"{copy}-wal")
            path = copy
            wal = bytearray(Path(f"{path}-wal").read_bytes())
            wal[12] ^= 0x01  # the checkpoint sequence number: SQLite would ignore the log and its commits
            Path(f"{path}-wal").write_bytes(bytes(wal))
    cli = cli_for(path)
    result = cli("runs", code=2)
    assert result.stderr.count("\n") == 1 and "not a usable yieldgate ledger (" in result.stderr, result.stderr
    check(
        f"`yieldgate runs` on a ledger {how}",
        f"refused, exit 2: `{result.stderr.split(': ', 1)[1].split(';')[0].replace(str(tmp_path) + '/', '')}`",
        "0",
    )


def _checkpoint_repeatedly(path: str, rounds: int) -> None:
    import sqlite3

    for _ in range(rounds):  # each close of the last connection checkpoints the log into a growing file
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA wal_autocheckpoint = 0")
        db.execute("CREATE TABLE IF NOT EXISTS t (x BLOB)")
        db.execute("BEGIN")
        for _ in range(2000):
            db.execute("INSERT INTO t VALUES (randomblob(1000))")
        db.execute("COMMIT")
        db.close()


@pytest.mark.slow
def test_another_process_checkpointing_is_not_read_as_truncation(tmp_path):
    """A checkpoint writes page 1 (the new page count) before the pages that grow the file; the quick check
    read in between used to call a healthy ledger truncated, and a Tracker opening its run then ran unrecorded."""
    import multiprocessing

    from yieldgate.ledger.file import file_problem

    path = str(tmp_path / "busy.db")
    writer = multiprocessing.get_context("spawn").Process(target=_checkpoint_repeatedly, args=(path, 12))
    writer.start()
    problems = []
    while writer.is_alive():
        problem = file_problem(path, settle_s=0.5)
        if problem is not None:
            problems.append(problem)
    writer.join()
    assert writer.exitcode == 0 and problems == [], problems
    os.truncate(path, os.path.getsize(path) - 4 * 4096)  # a file truncated for real still is, after it settles
    assert "its header says" in (file_problem(path, settle_s=0.2) or "")


@pytest.mark.parametrize("kind", ["nfs4", "lustre", "gpfs", "cifs", "fuse.sshfs"])
def test_a_ledger_on_a_network_filesystem_is_refused(tmp_path, cli_for, monkeypatch, kind):
    import yieldgate.ledger.mounts
    from yieldgate.errors import NetworkFilesystem

    mounts = tmp_path / "mounts"
    mounts.write_text(f"/dev/vda / ext4 rw 0 0\nserver:/export {tmp_path}/shared {kind} rw 0 0\n")
    (tmp_path / "shared").mkdir()
    path = tmp_path / "shared" / "l.db"
    Ledger(path).close()  # made where it is local (this host's real mounts): a ledger copied onto the share
    with pytest.raises(NetworkFilesystem, match=rf"on a {kind} filesystem .*one ledger per node .*yieldgate merge"):
        Ledger(path, mounts=str(mounts))
    monkeypatch.setattr(yieldgate.ledger.mounts, "MOUNTS", str(mounts))
    with pytest.raises(NetworkFilesystem):  # the Tracker's constructor: before the first step
        Tracker("nfs", ledger=path)
    result = cli_for(path)("runs", code=2)
    assert result.stderr.count("\n") == 1 and "filesystem" in result.stderr
    with Ledger(tmp_path / "local.db", mounts=str(mounts)) as led:  # beside the mount: a local disk
        led.create_run("fine")
    check(
        f"ledger on a {kind} mount (a fake mounts table)",
        "refused by the Ledger and the Tracker's constructor, exit 2 in the CLI: SQLite's WAL does not work across "
        "hosts; use one ledger per node and `yieldgate merge`, or a PostgreSQL ledger",
        "0",
    )
