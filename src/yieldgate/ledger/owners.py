"""Who writes a run: one owner per run, known by host, process id and process start time, and its heartbeat.

A Tracker claims its run when it opens it (`Ledger.claim_run`, in the same write transaction as the check
that the run is free), and its writer thread stamps `heartbeat_at` at every flush. A second writer is
refused while the owner lives; a run whose owner died without closing it is taken over only when asked
(`takeover=True`). The same test of life shows, at read time, a run left `running` by a dead writer as
`stale` or `crashed` (`Ledger.runs()`, `yieldgate runs`).

An owner is dead when its process is gone (on this host: the pid no longer exists, or it now belongs to a
process started after the owner's last heartbeat) or when its heartbeat is older than `STALE_AFTER_S` (another
host, or a hung process: a host that went down, a partition, a process stopped).

A pid means something only in the PID namespace it was given in. A container that shares the host's name (a
`hostNetwork` pod, `docker --network host`) has pids of its own: seen from the host, a live Tracker's pid is
missing or held by another process. So the owner records its namespace (`Owner.namespace`: the boot id and the PID
namespace, `process_namespace()`), and the pid is consulted only where it is the checker's; anywhere else, or for
an owner that recorded none, the heartbeat alone tells, and a run whose heartbeat is fresh is live.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from yieldgate.ledger.checksum import group_checksum, verify_group

__all__ = [
    "CLAIM",
    "NO_CLAIM",
    "Owner",
    "claim_fields",
    "holder",
    "stored_owner",
    "STALE_AFTER_S",
    "HEARTBEAT_EVERY_S",
    "REUSED_AFTER_S",
    "liveness",
    "process_namespace",
    "shares_pids",
]

HEARTBEAT_EVERY_S = 10.0
"""The writer stamps the heartbeat at every flush (1 s by default) and at least this often, whatever the flush
interval."""
STALE_AFTER_S = 120.0
"""A heartbeat older than this means the writer is dead or hung. Well above HEARTBEAT_EVERY_S: a flush that waits
for another process's lock on the ledger (the Tracker retries, and keeps rows meanwhile) must not look dead."""

Liveness = Literal["live", "stale", "crashed"]


def _process_start(pid: int) -> float | None:
    """Start time (Unix seconds) of process `pid` on this host, or None when there is no such process."""
    try:
        import psutil
    except ImportError:  # without psutil: existence only (a reused pid passes for the owner)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # it exists, owned by another user
        return float("nan")
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:  # dead, not yet reaped (its parent died with it)
            return None
        return process.create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None


@cache
def process_namespace() -> str | None:
    """Where this process's pids mean something: `<boot id>/pid:[<inode>]` on Linux (the kernel's boot id, and the
    PID namespace of `/proc/self/ns/pid`: a container has its own), None where these cannot be read (another
    system, a /proc hidden from the process). Fixed for a process's life, so read once."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        pid_ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot}/{pid_ns}" if boot and pid_ns else None


@dataclass(frozen=True)
class Owner:
    """The process that writes a run."""

    host: str
    """Host name (`socket.gethostname()`)."""
    pid: int
    """Process id on that host."""
    started: float
    """The process's start time (Unix seconds): tells a reused pid from the owner."""
    namespace: str | None = field(default_factory=process_namespace)
    """Where its pid means something (`process_namespace()`). An owner made here is this process's namespace by
    default; one read from the ledger has what its process recorded, None when it recorded none (an older yieldgate,
    a system without PID namespaces)."""

    @classmethod
    def this_process(cls) -> Owner:
        started = _process_start(os.getpid())
        if started is None or started != started:  # NaN: no psutil (None: no such process, not this one)
            started = 0.0
        return cls(socket.gethostname(), os.getpid(), round(started, 2))

    def __str__(self) -> str:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started)) if self.started else "?"
        return f"host {self.host}, pid {self.pid} (started {started})"


REUSED_AFTER_S = 5.0
"""A process holding the owner's pid that started this long after the owner's last heartbeat is another process
(the pid was reused). A wall-clock reading, not an identity: a process's start time in Unix seconds moves when the
host's clock is stepped (NTP on a new machine), so only a start well after the owner was last seen alive tells."""


def shares_pids(owner: Owner) -> bool:
    """Whether the owner's pid names a process this process can see: same host name and same recorded namespace
    (boot id and PID namespace). An owner that recorded no namespace shares only with a checker that has none (a
    system without PID namespaces): on Linux it may be a container's, whose pid says nothing here."""
    return owner.host == socket.gethostname() and owner.namespace == process_namespace()


def liveness(owner: Owner, heartbeat_at: float | None, now: float | None = None) -> Liveness:
    """`crashed`: the owner's process is gone, where its pid can be seen (`shares_pids`: no process holds its pid,
    or the one that does started after the owner's last heartbeat: the pid was reused); `stale`: its heartbeat is
    older than STALE_AFTER_S; else `live`. Across hosts or PID namespaces only the heartbeat tells."""
    if shares_pids(owner):
        started = _process_start(owner.pid)
        last_seen = max(owner.started, heartbeat_at or 0.0)
        if started is None or (owner.started and started == started and started > last_seen + REUSED_AFTER_S):
            return "crashed"
    now = time.time() if now is None else now
    if heartbeat_at is None or now - heartbeat_at > STALE_AFTER_S:
        return "stale"
    return "live"


def stored_owner(host: str, pid: int, started: float | None, namespace: str | None) -> Owner:
    """A run's writer as its claim is stored (`owner_*`); `namespace` None for a claim that recorded none."""
    return Owner(host, int(pid), float(started or 0.0), namespace)


CLAIM = "owner_host, owner_pid, owner_started, owner_ns, heartbeat_at, claim_checksum"
"""A run's writer claim and heartbeat as read (`checksum.FIELD_GROUPS["runs.claim"]`), with their checksum."""
NO_CLAIM = group_checksum("runs.claim", (None,) * 5)
"""The claim checksum of a run no writer has claimed (an import's, a new run's)."""


def holder(claim: Sequence[Any]) -> str:
    """Who holds a run, from its stored `owner_host, owner_pid, owner_started, owner_ns`, in words."""
    if claim[0] is None:
        return "released: the attempt that claimed it has ended"
    return f"written by {stored_owner(*claim[:4])}"


def claim_fields(where: str, run: str, row: Sequence[Any]) -> Sequence[Any]:
    """The claim fields of `row` (as `CLAIM` reads them) once they pass their checksum (BlockDamaged otherwise)."""
    verify_group(where, "runs.claim", row[5], row[:5], run, "writer claim and heartbeat")
    return row[:5]
