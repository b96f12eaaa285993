"""Spill files still waiting: step records a Tracker kept in a side file while its ledger could not take them, left
behind when the Tracker died before it could move them in (a SIGKILL during a PostgreSQL outage).

A Tracker records where it would spill in its run's meta at the start (`spill`: the candidate paths, in the order it
tries them), so that what it leaves behind is found without it: `yieldgate runs`, `show` and `check` read the meta,
look for the files, and count the step records in them the ledger does not hold yet. A spill file that `yieldgate
merge` has brought in holds nothing new and is no longer reported.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yieldgate.ledger.store import Ledger

__all__ = ["WaitingSpill", "META_KEY", "waiting_spills"]

META_KEY = "spill"
"""The run meta key a Tracker records its spill paths under: `{"paths": [...], "host": ...}`."""


@dataclass(frozen=True)
class WaitingSpill:
    """A spill file holding step records of `run` that the ledger does not hold."""

    run: str
    path: str
    steps: int
    """Step records in the file whose step the ledger's run lacks."""
    host: str | None = None
    """The host the Tracker ran on: the path is on that machine."""

    @property
    def hint(self) -> str:
        """The one line the commands print."""
        where = f" on host {self.host}" if self.host else ""
        if self.steps < 0:
            return f"{self.run}: a spill file {self.path}{where} cannot be read; check it, then `yieldgate merge` it"
        return f"{self.run}: {self.steps:,} steps waiting in {self.path}{where}: run `yieldgate merge {self.path}`"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def waiting_spills(ledger: Ledger, runs: list[str] | None = None) -> list[WaitingSpill]:
    """The spill files of `runs` (None: every run) that hold step records the ledger lacks. A file that cannot be
    read is reported with what it holds unknown (-1 steps) rather than hidden."""
    found = []
    # One run's meta at a time, without pandas: `yieldgate runs` lists runs without loading it.
    for name in runs if runs is not None else ledger.run_names():
        meta = ledger.meta(name)
        spill = meta.get(META_KEY) if isinstance(meta, dict) else None
        if not isinstance(spill, dict):
            continue
        host = spill.get("host")
        for path in spill.get("paths", []):
            if isinstance(path, str) and os.path.isfile(path):
                steps = _new_steps(ledger, name, path)
                if steps != 0:
                    found.append(WaitingSpill(name, path, steps, host if isinstance(host, str) else None))
    return found


def _new_steps(ledger: Ledger, run: str, path: str) -> int:
    """Step records of `run` in the spill file at `path` whose step the ledger's run does not hold (-1: unreadable)."""
    from yieldgate.ledger.store import Ledger

    try:
        with Ledger(path, readonly=True) as side:
            if run not in side.run_names():
                return 0
            spilled = set(side.steps(run)["step"].tolist())
    except Exception:  # noqa: BLE001 - a damaged or foreign file: reported, never a crash of `runs`
        return -1
    held = set(ledger.steps(run)["step"].tolist()) if spilled else set()
    return len(spilled - held)
