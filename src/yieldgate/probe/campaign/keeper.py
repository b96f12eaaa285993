"""The keeper of one probe's trainer command: a small process between the campaign's worker and the command, that
outlives the worker just long enough to end what it started.

Killing a worker (SIGKILL, the out-of-memory killer, a Ray node lost) left the training process running with no
timeout: it later wrote its run as `finished`, and a re-run trained the same probe a second time beside it. So the
worker runs the command through the keeper (`python -m yieldgate.probe.campaign.keeper PARENT BACKSTOP COMMAND`):
the command runs in the keeper's process group; when the worker dies (the kernel's parent-death signal, and the
keeper's own watch of its parent) or the backstop passes (the probe's timeout, held here as well as in the worker),
the keeper stops the whole group: SIGTERM, then SIGKILL after `GRACE_S`. A SIGTERM to the group from the worker (a
timeout, a preemption it forwards) reaches the command as before. The keeper exits with the command's status, a
command killed by signal N as 128 + N (as a shell reports it).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

__all__ = ["GRACE_S", "command_line", "main"]

GRACE_S = 10.0
"""Seconds between the SIGTERM to the command's group and the SIGKILL."""
PR_SET_PDEATHSIG = 1


def command_line(command: str, backstop_s: float | None) -> list[str]:
    """The argv that runs `command` under a keeper watching this process, stopping it after `backstop_s` (None:
    only when this process dies)."""
    backstop = "0" if backstop_s is None else f"{backstop_s:.3f}"
    return [sys.executable, "-m", "yieldgate.probe.campaign.keeper", str(os.getpid()), backstop, command]


def _on_parent_death() -> None:
    """Ask the kernel for SIGTERM when the parent dies (Linux); elsewhere the watch loop alone tells."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the group (the keeper ignores it), SIGKILL after GRACE_S to what is left (the keeper too)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.killpg(0, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> int:
    parent, backstop, command = int(argv[0]), float(argv[1]), argv[2]
    stopping = [False]

    def stop(signum: int, frame: object) -> None:
        stopping[0] = True

    signal.signal(signal.SIGTERM, stop)
    if os.getpgrp() != os.getpid():  # the group it stops must be its own and the command's, never its caller's
        os.setsid()
    _on_parent_death()
    proc = subprocess.Popen(command, shell=True)  # in the keeper's group: the worker's SIGTERM to it reaches both
    deadline = time.monotonic() + backstop if backstop > 0 else float("inf")
    while True:
        try:
            rc = proc.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            pass
        if stopping[0] or os.getppid() != parent or time.monotonic() > deadline:
            _stop_group(proc)
            rc = proc.wait()
            break
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
