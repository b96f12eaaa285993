"""A Tracker's spill file: the side ledger its writer keeps step records in while the ledger cannot take them (locked,
read-only, full, gone, or the run taken over by another process), moved into the ledger once it can.

What the ledger is told of it. Where a spill file goes is recorded in the run's meta at the start (`ledger.spills`).
Whenever rows are left in a spill file while the writer can reach the ledger (a move in that failed, the close), the
run's meta also records the file, its host, its rows and their steps (`spill.left`), so that rows in a spill file
that later vanished (a job's private /tmp wiped at its end) are known missing: `runs`, `show` and `check` say so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.ledger.merge import copy_run
from yieldgate.ledger.owners import Owner
from yieldgate.ledger.pg import masked
from yieldgate.ledger.spills import META_KEY, step_ranges
from yieldgate.manifest import Manifest
from yieldgate.track.derive import Frame, joined

__all__ = ["SpillFile", "SPILL_DIR_ENV"]

log = logging.getLogger("yieldgate.track")

SPILL_DIR_ENV = "YIELDGATE_SPILL_DIR"
"""A folder for spill files when `TrackerConfig.spill_dir` names none: a job's scheduler can point every Tracker at a
disk that outlives the job (a private /tmp does not)."""


def remove_ledger_file(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            os.remove(path + suffix)


class SpillFile:
    """The spill file of one run's writer (rank 0): where it may go, what it holds, and what the ledger knows of it."""

    def __init__(
        self,
        *,
        run: str,
        location: str,
        folder: str | None,
        manifest: Manifest | None,
        on_fault: Callable[[str, BaseException], None],
    ):
        """`folder`: where spill files go first (`TrackerConfig.spill_dir`, else $YIELDGATE_SPILL_DIR, else the ledger
        file's folder; None for a PostgreSQL ledger without either)."""
        self.run = run
        self.location = location
        self.folder = folder
        self.manifest = manifest
        self.on_fault = on_fault
        self.path: str | None = None
        """The file holding rows the ledger has not taken yet (None: nothing waiting)."""
        self.rows = 0
        """Step records in it, not yet moved into the ledger."""
        self.steps: list[list[int]] = []
        """Their steps, as [first, last] ranges."""
        self.moved = 0
        """Step records that waited in a spill file and are back in the ledger, over the run."""
        self.recorded = False
        """The ledger's run meta records this file's rows as left in it (`record`)."""
        self.vanished = 0
        """Spill files that vanished under this writer (`_vanished`)."""
        self.lost = 0
        """Step records lost with them."""

    def candidates(self) -> list[str]:
        """Where a spill file may go, in order: the spill folder (`folder`), the job's working directory, then the
        temp folder. Named by run, host and process: nodes that share a folder never share a spill file."""
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{self.run}-{socket.gethostname()}")
        folders = [self.folder, os.getcwd(), tempfile.gettempdir()]
        return [str(Path(f) / f"yieldgate-spill-{name}-{os.getpid()}.db") for f in dict.fromkeys(folders) if f]

    def write(self, frames: list[Frame], held: list[Frame], evals: list[EvalRecord], *, announce: bool = True) -> bool:
        """Keep these rows in the spill file (the one in use, else the first candidate that takes them); False when
        none could (the rows stay with the caller). Says once, with the file's path, that rows are kept aside
        (`announce`: False when the caller says why in its own words)."""
        for path in [self.path] if self.path else self.candidates():
            fresh = not os.path.exists(path)
            try:
                with Ledger(path, durable=True) as side, side.transaction():
                    side.create_run(
                        self.run, manifest=self.manifest, status="running", source="tracker", if_exists="reuse"
                    )
                    if frames:
                        side.append_steps(self.run, joined(frames))
                    if held:
                        side.append_steps(self.run, joined(held))
                    if evals:
                        side.append_evals(self.run, evals)
            except Exception as exc:  # noqa: BLE001 - try the next folder; else rows stay in memory, bounded
                self.on_fault("spilling step records to a side file", exc)
                if fresh:
                    remove_ledger_file(path)
                continue
            if self.path is None and announce:
                log.warning(
                    "yieldgate tracker: the ledger %s cannot take step records now; they are kept in %s and move into "
                    "the ledger when it is writable again (or run: yieldgate --ledger %s merge %s)",
                    masked(self.location),
                    path,
                    masked(self.location),
                    path,
                )
            self.path = path
            self.rows += sum(f.n for f in frames)
            self.steps = step_ranges(_steps(frames), self.steps)
            return True
        return False

    def move_in(self, ledger: Ledger, owner: Owner | None) -> bool:
        """The ledger is writable again: move the spilled rows into it (as their run's writer, `owner`) and remove the
        spill file; a record of rows left in it goes in the same transaction. False: the file stays, retried later."""
        path = self.path
        assert path is not None
        if not os.path.isfile(path):
            return self._vanished(ledger, path)
        try:
            with Ledger(path) as side, ledger.transaction():
                copy_run(ledger, side, self.run, owner=owner)
                if self.recorded:
                    _set_left(ledger, self.run, path, None)
        except Exception as exc:  # noqa: BLE001 - the spill file stays; retried at the next flush
            self.on_fault("moving spilled step records into the ledger", exc)
            return False
        self.moved += self.rows
        self.rows, self.steps, self.path, self.recorded = 0, [], None, False
        remove_ledger_file(path)
        return True

    def _vanished(self, ledger: Ledger, path: str) -> bool:
        """The spill file is gone from under its writer (a scratch purge, someone's `rm`): its rows are lost. The
        ledger records which (`spill.left`, `vanished`), so that `check` and `show` say the run misses them, and that
        is said loudly, once per file. False when the ledger could not be told (tried again at the next flush)."""
        self.vanished += 1
        entry = {"path": path, "host": socket.gethostname(), "rows": self.rows, "steps": self.steps, "vanished": True}
        try:
            with ledger.transaction():
                if self.recorded:
                    _set_left(ledger, self.run, path, None)
                _set_left(ledger, self.run, f"{path}#{self.vanished}", entry)
        except Exception as exc:  # noqa: BLE001 - contained: the next reachable flush tries again
            self.vanished -= 1
            self.on_fault("recording the spill file in the ledger", exc)
            return False
        log.error(
            "yieldgate tracker: run %r: the spill file %s VANISHED with %d step records the ledger %s had not taken; "
            "they are lost, and the ledger records them as missing (`yieldgate check` names them)",
            self.run,
            path,
            self.rows,
            masked(self.location),
        )
        self.lost += self.rows
        self.rows, self.steps, self.path, self.recorded = 0, [], None, False
        return False

    def record(self, ledger: Ledger) -> None:
        """Tell the ledger that rows are left in this spill file (its path, host, rows and steps), in the run's meta:
        should the file vanish, the rows are known missing. Within the caller's transaction, if any."""
        if self.path is None:
            return
        entry = {"path": self.path, "host": socket.gethostname(), "rows": self.rows, "steps": self.steps}
        try:
            _set_left(ledger, self.run, self.path, entry)
        except Exception as exc:  # noqa: BLE001 - contained: the next reachable flush or the close tries again
            self.on_fault("recording the spill file in the ledger", exc)
            return
        self.recorded = True

    def said_back(self) -> None:
        """At close: rows that waited in a spill file and are all back in the ledger are said to be back, once."""
        if self.moved and self.path is None and not self.lost:
            log.warning(
                "yieldgate tracker: run %r: the %d step records kept aside in a spill file while the ledger %s was "
                "busy or unwritable are all back in the ledger",
                self.run,
                self.moved,
                masked(self.location),
            )


def _steps(frames: Iterable[Frame]) -> list[int]:
    return [int(s) for f in frames for s in f.steps]


def _set_left(ledger: Ledger, run: str, path: str, entry: dict[str, Any] | None) -> None:
    """The run meta's record of rows left in spill file `path`: set to `entry`, or removed (None)."""
    with ledger.transaction():
        spill = dict(ledger.meta(run).get(META_KEY) or {})
        left = {k: v for k, v in (spill.get("left") or {}).items() if k != path}
        if entry is not None:
            left[path] = entry
        spill["left"] = left
        ledger.set_meta(run, META_KEY, spill)


def spill_folder(configured: str | None, location_folder: str | None) -> str | None:
    """The first folder spill files go to: the configured one, else $YIELDGATE_SPILL_DIR, else the ledger file's."""
    return configured or os.environ.get(SPILL_DIR_ENV) or location_folder
