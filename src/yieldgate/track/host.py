"""How much the host held a run back, read from Linux's /proc between two telemetry samples: the share of the CPU
time this process's threads wanted that they spent waiting on a run queue (`host/cpu_wait`, from each thread's
`schedstat`), the share of the host's CPU time a hypervisor gave to other guests (`host/cpu_steal`, from
/proc/stat), and the host's CPU count (`host/cpus`, to read `host/load_1m` per CPU).

A busy neighbour shows in the run's wait share within seconds, where the 1-minute load average takes a minute to
follow. Where a file is missing (not Linux, a kernel without schedstats) its key is left out; nothing here raises.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["HostContention"]

_PROC = Path("/proc")


def _stat_cpu() -> tuple[float, float] | None:
    """(all CPU time, stolen CPU time) of the host in jiffies, from /proc/stat's `cpu` line."""
    try:
        with open(_PROC / "stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    ticks = [float(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal (guest is in user)
    return sum(ticks), ticks[7]


def _schedstat() -> tuple[float, float] | None:
    """(ns on a CPU, ns waiting on a run queue), summed over this process's threads."""
    ran = waited = 0.0
    found = False
    try:
        tasks = list((_PROC / "self" / "task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            fields = (task / "schedstat").read_text().split()
        except OSError:  # a thread that ended since the listing
            continue
        if len(fields) >= 2:
            ran += float(fields[0])
            waited += float(fields[1])
            found = True
    return (ran, waited) if found else None


class HostContention:
    """Reads the host's contention since its last `sample()` (the first sample sets the baseline)."""

    def __init__(self) -> None:
        self._stat = _stat_cpu()
        self._sched = _schedstat()

    def sample(self) -> dict[str, float]:
        out: dict[str, float] = {}
        cpus = os.cpu_count()
        if cpus:
            out["host/cpus"] = float(cpus)
        stat, sched = _stat_cpu(), _schedstat()
        if stat is not None and self._stat is not None and stat[0] > self._stat[0]:
            out["host/cpu_steal"] = 100.0 * max(stat[1] - self._stat[1], 0.0) / (stat[0] - self._stat[0])
        if sched is not None and self._sched is not None:
            ran, waited = sched[0] - self._sched[0], sched[1] - self._sched[1]
            if ran + waited > 0 and ran >= 0 and waited >= 0:  # a thread gone since: its counters left the sum
                out["host/cpu_wait"] = 100.0 * waited / (ran + waited)
        self._stat, self._sched = stat, sched
        return out
