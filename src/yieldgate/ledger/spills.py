"""Spill files still waiting, and rows known missing: step records a Tracker kept in a side file while its ledger
could not take them, left behind when the Tracker died or closed before it could move them in (a SIGKILL during a
PostgreSQL outage, a close while another process held the lock).

A Tracker records where it would spill in its run's meta at the start (`spill`: the candidate paths, in the order it
tries them), so that what it leaves behind is found without it: `yieldgate runs`, `show` and `check` read the meta,
look for the files, and count the step records in them the ledger does not hold yet. A spill file that `yieldgate
merge` has brought in holds nothing new and is no longer reported.

Whenever a Tracker leaves rows in a spill file while it can reach the ledger (a move that failed, its close), the meta
also records that file with its host, rows and steps (`left`). Should the file vanish (a job's private /tmp wiped at
its end), the steps the ledger lacks are still known: they are reported as missing, and `check` no longer calls the
ledger whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yieldgate.ledger.store import Ledger

__all__ = ["WaitingSpill", "META_KEY", "note_paths", "step_ranges", "waiting_spills"]

META_KEY = "spill"
"""The run meta key a Tracker records its spill paths under: `{"paths": [...], "host": ..., "hosts": {path: host},
"left": {key: {"path", "host", "rows", "steps": [[first, last], ...], "vanished"}}}`; `left` is keyed by the path of
a file rows are left in, or by `path#n` for one that vanished under its writer (`vanished`: true)."""


@dataclass(frozen=True)
class WaitingSpill:
    """A spill file holding step records of `run` that the ledger does not hold, or that held them and is gone."""

    run: str
    path: str
    steps: int
    """Step records in the file whose step the ledger's run lacks (-1: the file cannot be read); for a file that is
    gone, the recorded steps the ledger lacks."""
    host: str | None = None
    """The host the Tracker ran on: the path is on that machine."""
    gone: bool = False
    """The file is no longer there: its steps are missing from the run, not waiting."""

    @property
    def hint(self) -> str:
        """The one line the commands print."""
        where = f" on host {self.host}" if self.host else ""
        if self.gone:
            return (
                f"{self.run}: {self.steps:,} steps MISSING: the Tracker left them in spill file {self.path}{where}, "
                "which is gone; restore that file and `yieldgate merge` it, or train the steps again"
            )
        if self.steps < 0:
            return f"{self.run}: a spill file {self.path}{where} cannot be read; check it, then `yieldgate merge` it"
        return f"{self.run}: {self.steps:,} steps waiting in {self.path}{where}: run `yieldgate merge {self.path}`"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def step_ranges(steps: Iterable[int], ranges: Sequence[Sequence[int]] = ()) -> list[list[int]]:
    """`[first, last]` ranges of consecutive steps covering `steps` and `ranges`, sorted and merged: a spill file's
    steps as its run's meta records them."""
    spans = sorted([[int(a), int(b)] for a, b in ranges] + [[s, s] for s in {int(s) for s in steps}])
    merged: list[list[int]] = []
    for first, last in spans:
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return merged


def note_paths(ledger: Ledger, run: str, paths: list[str], host: str) -> None:
    """Record in the run's meta where its writer on `host` would spill, beside what earlier writers recorded (a
    resumed or taken-over run keeps the paths of the writers before, whose spill files may still wait)."""
    with ledger.transaction():
        spill = dict(_mapping(ledger.meta(run).get(META_KEY)))
        before = [p for p in spill.get("paths", []) if isinstance(p, str)]
        hosts = _mapping(spill.get("hosts"))
        if isinstance(spill.get("host"), str):
            hosts = {**dict.fromkeys(before, spill["host"]), **hosts}
        spill.update(
            paths=list(dict.fromkeys([*paths, *before])), host=host, hosts={**hosts, **dict.fromkeys(paths, host)}
        )
        ledger.set_meta(run, META_KEY, spill)


def waiting_spills(ledger: Ledger, runs: list[str] | None = None) -> list[WaitingSpill]:
    """The spill files of `runs` (None: every run) that hold step records the ledger lacks, and the recorded ones that
    are gone with steps the ledger lacks. A file that cannot be read is reported with what it holds unknown (-1 steps)
    rather than hidden."""
    found = []
    # One run's meta at a time, without pandas: `yieldgate runs` lists runs without loading it.
    for name in runs if runs is not None else ledger.run_names():
        meta = ledger.meta(name)
        spill = meta.get(META_KEY) if isinstance(meta, dict) else None
        if not isinstance(spill, dict):
            continue
        host = spill.get("host") if isinstance(spill.get("host"), str) else None
        left = _mapping(spill.get("left"))
        paths = [p for p in spill.get("paths", []) if isinstance(p, str)]
        hosts = _mapping(spill.get("hosts"))
        for key in dict.fromkeys([*paths, *left]):
            entry = _mapping(left.get(key))
            path = entry.get("path", key)
            at = entry.get("host") or hosts.get(path) or host
            at = at if isinstance(at, str) else None
            if not entry.get("vanished") and os.path.isfile(path):
                steps = _new_steps(ledger, name, path)
                if steps != 0:
                    found.append(WaitingSpill(name, path, steps, at))
            elif entry:
                missing = _missing(ledger, name, entry.get("steps") or [])
                if missing:
                    found.append(WaitingSpill(name, path, missing, at, gone=True))
    return found


def _mapping(value: Any) -> dict[str, Any]:
    """`value` when the meta holds a mapping there, else an empty one (a meta written by hand, or damaged)."""
    return value if isinstance(value, dict) else {}


def _missing(ledger: Ledger, run: str, ranges: list[Any]) -> int:
    """Steps of the recorded `ranges` the ledger's run does not hold."""
    import numpy as np

    spans = [(int(a), int(b)) for a, b in ranges]
    held = np.sort(ledger.steps(run, columns=[])["step"].to_numpy())
    return sum(b - a + 1 - int(np.searchsorted(held, b, "right") - np.searchsorted(held, a, "left")) for a, b in spans)


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
