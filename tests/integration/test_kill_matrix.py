"""Faults combined, as real jobs meet them: a training process killed (SIGKILL) while another process locks the
ledger, while the ledger cannot be written at all, after it was resumed from a checkpoint older than the
ledger's last row, and while a second process tries to write the same run; and SIGTERM arriving in the middle
of shipping a packet or of the final flush.

Each scenario trains a loop of cheap steps under a real Tracker in a subprocess (`tests.test_reliability.child`)
that writes a side file, one line per step it completed, flushed and fsynced before the next step starts. The
test counts the ledger's rows, plus the rows of spill files merged as `yieldgate merge` merges them, against it.

The bound: rows ship every 10 steps and the writer flushes every 0.5 s, to the ledger or, when the ledger
cannot take them, to a synced spill file at the first failed flush. So a SIGKILL loses at most the steps of
the last flush interval and the packet not yet shipped; a step completed more than BOUND_S before the kill
is stored. No row is stored that the loop did not complete (but the one step a kill cut after it was
recorded), and no step twice.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_reliability import child, completed, printed, stored_steps
from tests.support.reliability import check
from yieldgate.ledger import Ledger
from yieldgate.ledger.merge import copy_run

pytestmark = pytest.mark.slow  # processes killed mid-run

BOUND_S = 2.0
"""Seconds of completed steps a SIGKILL may take with it: one 0.5 s flush interval, the packet not yet shipped,
and the scheduling slack of a loaded machine."""


def side_file(path: Path, offset: int = 0) -> str:
    """Setup code for `child`: after each step, append `step time` to `path`, flushed and fsynced."""
    return f"side = open({str(path)!r}, 'a')\nOFFSET = {offset}"


EACH = "side.write(f'{OFFSET + i} {time.time()}\\n'); side.flush(); os.fsync(side.fileno())"


def wait_for_side(proc: subprocess.Popen, side: Path, n: int, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while not (side.exists() and len(completed(side)) >= n):
        if proc.poll() is not None:
            assert proc.stderr is not None
            raise AssertionError(proc.stderr.read())
        assert time.time() < deadline, f"{len(completed(side)) if side.exists() else 0} steps after {timeout} s"
        time.sleep(0.05)


def kill(proc: subprocess.Popen) -> float:
    proc.send_signal(signal.SIGKILL)
    killed_at = time.time()
    proc.wait(timeout=30)
    return killed_at


def stored_with_spills(path: Path, spill_dirs: list[Path]) -> list[int]:
    """The run's steps in the ledger after merging every spill file, as `yieldgate merge` does, each step once."""
    spills = sorted(s for d in spill_dirs for s in d.glob("yieldgate-spill-child-*.db"))
    with Ledger(path) as ledger:
        for spill in spills:
            with Ledger(spill, readonly=True) as side:
                copy_run(ledger, side, "child")
        steps = ledger.steps("child")["step"].tolist()
    assert len(steps) == len(set(steps)), "a step stored twice"
    return steps


def lost(done: dict[int, float], stored: list[int], killed_at: float) -> int:
    """Assert the bound and return how many completed steps the ledger lacks."""
    missing = set(done) - set(stored)
    assert set(stored) <= set(done) | {max(done) + 1}, sorted(set(stored) - set(done))[:10]
    oldest = min((done[s] for s in missing), default=killed_at)
    assert killed_at - oldest <= BOUND_S, (
        f"{len(missing)} of {len(done)} steps lost, the oldest from {killed_at - oldest:.2f} s before the kill"
    )
    return len(missing)


def locked_then_killed(tmp_path: Path, path: Path, side: Path, *, sigterm: bool = False) -> float:
    """The child's loop under way, another process takes the ledger's write lock (every flush from then on fails),
    `sigterm`: a scheduler's SIGTERM at once, before a flush of the loop meets the lock, so that the close the
    signal starts is the first to meet it; SIGKILL 3 s later. Returns when the child was killed."""
    proc = child(tmp_path, path, 1_000_000, setup=side_file(side), each=EACH)
    try:
        wait_for_side(proc, side, 200)
        locker = sqlite3.connect(path, isolation_level=None, timeout=10)
        locker.execute("BEGIN EXCLUSIVE")
        if sigterm:
            proc.send_signal(signal.SIGTERM)  # the handler closes the Tracker on the main thread: the loop stops
        time.sleep(3.0)
        killed_at = kill(proc)
        locker.execute("COMMIT")
        locker.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    return killed_at


def test_locked_by_another_process_then_sigkill(tmp_path):
    path, side = tmp_path / "k.db", tmp_path / "steps.txt"
    killed_at = locked_then_killed(tmp_path, path, side)
    done = completed(side)
    assert list(tmp_path.glob("yieldgate-spill-child-*.db")), "the rows taken during the lock went to no spill file"
    n = lost(done, stored_with_spills(path, [tmp_path]), killed_at)
    print(f"{n} of {len(done)} steps lost")
    check(
        "kill matrix: ledger locked by another process, then SIGKILL",
        "ledger plus the spill file (`yieldgate merge`) hold every step but the last flush interval's; none twice",
        f"≤ {BOUND_S:g} s of steps",
    )


def test_locked_then_sigterm_then_sigkill_before_the_close_could_wait_out_the_lock(tmp_path):
    """A scheduler's SIGTERM while another process holds the ledger, and its SIGKILL a grace period later: the close
    the signal starts may wait up to 30 s for the lock, but puts the rows in a spill file first."""
    path, side = tmp_path / "k.db", tmp_path / "steps.txt"
    killed_at = locked_then_killed(tmp_path, path, side, sigterm=True)
    done = completed(side)
    stored = stored_with_spills(path, [tmp_path])
    assert set(done) <= set(stored), f"{len(set(done) - set(stored))} of {len(done)} completed steps lost"
    assert lost(done, stored, killed_at) == 0
    check(
        "kill matrix: ledger locked by another process, SIGTERM, then SIGKILL 3 s later",
        "the close SIGTERM starts puts the rows in a spill file before it waits for the lock: ledger plus spill "
        "file hold every step; none twice",
        "0",
    )


def test_read_only_ledger_then_sigkill(tmp_path, monkeypatch):
    # /proc: a folder no process may create a file in, root included. The spill file goes to the job's working
    # directory (the child runs in tmp_path), never to the temp folder while that one can take it.
    path, side = Path("/proc/yieldgate-kill-matrix.db"), tmp_path / "steps.txt"
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    proc = child(tmp_path, path, 1_000_000, setup=side_file(side), each=EACH)
    try:
        wait_for_side(proc, side, 400)
        killed_at = kill(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    done = completed(side)
    assert len(list(tmp_path.glob("yieldgate-spill-child-*.db"))) == 1  # named by run, host and pid, in the cwd
    n = lost(done, stored_with_spills(tmp_path / "merged.db", [tmp_path]), killed_at)
    print(f"{n} of {len(done)} steps lost")
    check(
        "kill matrix: ledger read-only, then SIGKILL",
        "every step goes to the spill file (synced); merged, it holds all but the last flush interval's",
        f"≤ {BOUND_S:g} s of steps",
    )


def test_resumed_from_an_older_checkpoint_after_sigkill_then_sigkill_again(tmp_path):
    path, first, second = tmp_path / "k.db", tmp_path / "first.txt", tmp_path / "second.txt"
    proc = child(tmp_path, path, 1_000_000, setup=side_file(first), each=EACH)
    try:
        wait_for_side(proc, first, 400)
        kill(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    # The job restarts from its checkpoint of step 200, older than the ledger's last row, and is killed again.
    resumed = (
        'Tracker("child", ledger=ledger, resume=True, takeover=True, step=200, tokens=200 * 128, samples=200, '
        "config=TrackerConfig(log_every_steps=10, flush_every_s=0.5))"
    )
    proc = child(tmp_path, path, 1_000_000, setup=side_file(second, offset=200), each=EACH, tracker=resumed)
    try:
        wait_for_side(proc, second, 300)
        killed_at = kill(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    done = {s: t for s, t in completed(first).items() if s <= 200} | completed(second)
    stored = stored_with_spills(path, [tmp_path])
    n = lost(done, stored, killed_at)
    with Ledger(path, readonly=True) as led:
        steps = led.steps("child")
        (event,) = led.events("child", kind="resume")["body"]
        superseded = led.superseded("child")["step"]
    assert (steps["tokens"] == steps["step"] * 128).all(), "tokens at equal steps moved after the resume"
    assert event["resume"]["step"] == 200 and superseded.min() == 201 and event["old"]["step"] > 200, event
    print(f"{n} of {len(done)} steps lost")
    check(
        "kill matrix: SIGKILL, resumed from a checkpoint older than the ledger's last row, SIGKILL again",
        "the rows after the checkpoint are set apart (a `resume` event); tokens at each step are the checkpoint's "
        "count plus the steps since; only the last flush interval's steps missing",
        f"≤ {BOUND_S:g} s of steps",
    )


def test_two_writers_start_one_run_at_once_then_sigkill(tmp_path):
    path = tmp_path / "k.db"
    sides = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for name in ("a", "b"):
        (tmp_path / name).mkdir()  # each child's script in its own folder
    procs = [
        child(tmp_path / name, path, 1_000_000, setup=side_file(side), each=EACH)
        for name, side in zip(("a", "b"), sides, strict=True)
    ]
    try:
        deadline = time.time() + 120

        def started(s: Path) -> bool:
            return s.exists() and len(completed(s)) >= 200

        while sum(p.poll() is None for p in procs) > 1 or not any(started(s) for s in sides):
            # No stderr read here: reading a live child's stderr waits for it to end, and would hang the test.
            assert time.time() < deadline and any(p.poll() is None for p in procs), [p.poll() for p in procs]
            time.sleep(0.05)
        (writer,) = [i for i, p in enumerate(procs) if p.poll() is None]
        refused = procs[1 - writer].stderr.read()
        # A third process resuming the run while its writer is alive is refused too.
        again = subprocess.run(
            [
                sys.executable,
                "-c",
                (f"from yieldgate.track.tracker import Tracker\nTracker('child', ledger={str(path)!r}, resume=True)"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        killed_at = kill(procs[writer])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert procs[1 - writer].returncode != 0 and not sides[1 - writer].exists(), refused  # refused before a step
    assert "RunInUse" in refused or "already" in refused, refused
    assert again.returncode != 0 and "RunInUse" in again.stderr, again.stderr
    done = completed(sides[writer])
    n = lost(done, stored_with_spills(path, [tmp_path]), killed_at)
    print(f"{n} of {len(done)} steps lost")
    check(
        "kill matrix: two processes start one run at once (a third resumes it while it trains), then SIGKILL",
        "one writer claims the run; the others are refused before their first step (`RunInUse`, or the run "
        "exists); no row spliced in",
        f"≤ {BOUND_S:g} s of steps",
    )


# -- SIGTERM: the handler flushes everything, even when it arrives mid-packet or mid-close -------------------

# Sends SIGTERM to the process itself at a chosen point of the Tracker's own work: Python runs the handler at
# the next bytecode, so it lands exactly there (a scheduler's SIGTERM can land anywhere).
SIGTERM_INSIDE = """
from yieldgate.track.writer import Writer
_real = Writer.{method}
_calls = [0]
def _sigterm_inside(self, *args, **kwargs):
    _calls[0] += 1
    if _calls[0] == {at}:
        os.kill(os.getpid(), signal.SIGTERM)
    return _real(self, *args, **kwargs)
Writer.{method} = _sigterm_inside
"""


@pytest.mark.parametrize("inside", ["shipping a packet", "the final flush"])
def test_sigterm_inside_a_packet_or_the_final_flush_loses_nothing(tmp_path, inside):
    path = tmp_path / "t.db"
    # `submit`: the packet's rows have left the Tracker and are not yet in the writer's inbox. `close`: the
    # loop ended and close() is flushing.
    setup = (
        SIGTERM_INSIDE.format(method="submit", at=30)
        if inside == "shipping a packet"
        else SIGTERM_INSIDE.format(method="close", at=1)
    )
    proc = child(tmp_path, path, 400, close=True, setup=setup)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM, err  # it still ends as SIGTERM ends it
    done = printed(out.splitlines())
    stored, status = stored_steps(path)
    assert set(done) <= stored and stored <= set(done) | {max(done) + 1}, sorted(set(done) - stored)[:20]
    assert status == ("killed" if inside == "shipping a packet" else "finished"), status
    if inside == "shipping a packet":
        check(
            "SIGTERM arrives while the Tracker ships a packet (its rows out of the Tracker, not yet in the writer)",
            "the handler holds it until the packet is in the writer's inbox, then flushes: every step stored, run "
            "`killed`, the process ends by SIGTERM",
            "0",
        )
    else:
        check(
            "SIGTERM arrives during the Tracker's final flush (close)",
            "the handler holds it until the close has flushed: every step stored, run `finished`, the process "
            "ends by SIGTERM",
            "0",
        )
