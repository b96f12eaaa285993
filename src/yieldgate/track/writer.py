"""The Tracker's background writer: turns packets of raw per-step counters into step records and writes
them to the ledger, off the training thread.

The training thread only records host counters and device tensors, and every few steps appends a packet
to a bounded inbox (full: the packet is dropped and counted, never waited for). Here, on a background
thread that wakes once per flush interval, the packet's tensors are waited for (their non-blocking copy to
the host), ranks' counters are reduced (distributed runs), the step records' columns are derived
(`derive.Derivation`: windowed tokens/s, MFU, cost, repeat rate, loss variance...), device telemetry (energy,
power) is sampled into them, and rows are written to the ledger with the run's heartbeat; when it cannot be
written they are kept, then spilled to a side file, and moved in once it can.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.errors import LedgerError, RunInUse
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.ledger.file import file_problem
from yieldgate.ledger.location import Location
from yieldgate.ledger.owners import HEARTBEAT_EVERY_S, Owner
from yieldgate.ledger.pg import masked
from yieldgate.manifest import Manifest
from yieldgate.track import derive
from yieldgate.track.config import TrackerConfig
from yieldgate.track.derive import Derivation, Frame, joined
from yieldgate.track.governed import Governed
from yieldgate.track.hardware import Telemetry
from yieldgate.track.packet import Packet
from yieldgate.track.spill import SpillFile, spill_folder

__all__ = ["Writer"]

log = logging.getLogger("yieldgate.track")


MAX_BUFFERED_ROWS = 1_000_000
"""Rows kept in memory when even the spill file cannot be written; the oldest beyond are dropped."""
ONLINE_WINDOW = 256
"""Steps the online diagnosis detectors look at (`TrackerConfig.online_diagnosis_every_s`)."""
BUSY_TIMEOUT_S = 1.0
"""How long a flush waits for another process's lock on the ledger before its rows go to the spill file (and the
ledger is tried again at the next flush)."""
CLOSE_BUSY_TIMEOUT_S = 30.0
"""How long the last flush, at close, waits for the lock (`Writer._last`): the loop is done, and rows left in a spill
file would wait for someone to `yieldgate merge` them."""

LAYERS_EVERY_S = HEARTBEAT_EVERY_S
"""Per-layer signals go to the ledger this often (and at close), the rest of a step's record at every flush: a
model's per-layer keys number hundreds, and written once a second their per-key cost would be most of the
writer's work, competing with the training loop for the cores."""


class Writer(threading.Thread):
    """The background thread. The training thread appends packets to an inbox (a deque: no lock, no
    wake-up) and the writer collects them once per flush interval, so the training thread never hands the
    interpreter over to this thread from inside a Tracker call."""

    def __init__(
        self,
        config: TrackerConfig,
        derivation: Derivation,
        *,
        location: str,
        run: str | None,
        owner: Owner | None,
        manifest: Manifest | None,
        telemetry: Telemetry | None,
        on_fault: Callable[[str, BaseException], None],
        reduce: Callable[[np.ndarray], np.ndarray] | None = None,
        governed: Governed | None = None,
    ):
        """`run` names the run; None on ranks other than 0 (they reduce, they do not write). `owner` is the process
        that claimed the run: the heartbeat is stamped for it, and stops when another took the run. `manifest`
        makes the run again in a ledger file removed mid-run. `reduce`, distributed runs: all-gather a [fields,
        rows] array from every rank -> [ranks, fields, rows]. `governed`: the gate inside the run, which decides
        here, on this thread, once the evaluations it waits for are written (flushed as they arrive)."""
        super().__init__(name="yieldgate-writer", daemon=True)
        self.config = config
        self.derivation = derivation
        self.location = location
        self.run_name = run
        self.owner = owner
        self.manifest = manifest
        self.reduce = reduce
        self.telemetry = telemetry
        self.on_fault = on_fault
        self.governed = governed
        self._inbox: deque[Packet] = deque()
        self._wake = threading.Event()
        self._stopping = False
        self._status: str | None = None
        self._reason: str | None = None
        self.dropped_rows = 0
        self.written_rows = 0
        self._frames: list[Frame] = []
        self._held: list[Frame] = []
        """Per-layer signals of frames already written, until LAYERS_EVERY_S has passed (`Frame.held`)."""
        self._last_layers = time.monotonic()
        self._evals: list[EvalRecord] = []
        self._last_flush = time.monotonic()
        self._reduce_failed = False
        self._inode: int | None = None
        self._size = 0
        """Size of the ledger file after this writer's last commit: a shorter file was truncated or replaced."""
        self._refused: str | None = None
        """Why the ledger file is no longer written (truncated, replaced, damaged headers): rows go to the spill
        file."""
        self._recent: deque[Frame] = deque()
        self._last_online = time.monotonic()
        self._online_seen: set[tuple[Any, ...]] = set()
        self._last_telemetry = -math.inf
        folder = str(Path(location).parent) if Location.parse(location).is_file else None
        self.spill = SpillFile(
            run=run or "run",
            location=location,
            folder=spill_folder(config.spill_dir, folder),
            manifest=manifest,
            on_fault=on_fault,
        )
        """The spill file rows go to while the ledger cannot take them (rank 0)."""
        self._lost: RunInUse | None = None
        """Set when another process took the run over: nothing more is written."""
        self._busy_s = BUSY_TIMEOUT_S
        """How long a write waits for another process's lock (`_set_wait`: longer for the last flush)."""

    @property
    def buffered_rows(self) -> int:
        return sum(f.n for f in self._frames)

    @property
    def spill_path(self) -> str | None:
        """The spill file holding rows the ledger has not taken yet (None: nothing waiting)."""
        return self.spill.path

    @property
    def spilled_rows(self) -> int:
        """Step records waiting in the spill file."""
        return self.spill.rows

    def submit(self, packet: Packet) -> None:
        """Called on the training thread: append, or drop and count when the inbox is full."""
        if len(self._inbox) >= self.config.queue_size:
            self.dropped_rows += len(packet.rows)
            self.on_fault("writer queue full: step records dropped", RuntimeError(f"{self.dropped_rows} rows dropped"))
            return
        self._inbox.append(packet)
        if packet.evals and self.governed is not None:
            self._wake.set()  # the governor decides at evaluations: written now, not at the next interval
        if len(self._inbox) == self.config.queue_size // 2:
            self._wake.set()  # a very fast loop: collect before the inbox fills, not at the next interval

    def close(self, status: str | None = None, timeout: float = 60.0, *, reason: str | None = None) -> None:
        """Write what is left, record the run's `status` (rank 0) and, when the run ended on an error, the
        `reason` as a `fault` event; then stop."""
        self._status = status
        self._reason = reason
        self._stopping = True
        self._wake.set()
        self.join(timeout)

    # -- the thread -----------------------------------------------------------------------------------

    def run(self) -> None:
        ledger = None
        if self.run_name is not None:
            try:
                ledger = self._open()
            except Exception as exc:  # noqa: BLE001 - reported; rows stay buffered and are retried
                self.on_fault("opening the ledger", exc)
        while True:
            self._wake.wait(min(self.config.flush_every_s, HEARTBEAT_EVERY_S))
            self._wake.clear()
            stopping = self._stopping  # read before draining: every packet submitted before close is drained
            self._drain()
            if stopping:
                ledger = self._last(ledger)
                break
            due = time.monotonic() - self._last_flush >= min(self.config.flush_every_s, HEARTBEAT_EVERY_S)
            if due or (self.governed is not None and self._evals):
                ledger = self._flush(ledger)
        if self._frames:  # neither the ledger nor a spill file took them: say so, count them
            self.dropped_rows += self.buffered_rows
            self.on_fault(
                "closing with step records nothing could take",
                RuntimeError(
                    f"{self.buffered_rows} step records lost: the ledger {masked(self.location)} and every spill "
                    "folder refused them"
                ),
            )
        if self.run_name is not None and self._status is not None and self._lost is None:
            if self.spill_path is not None:  # the last flush waited in vain: the status does not wait as long again
                self._set_wait(ledger, BUSY_TIMEOUT_S)
            self._record_status(ledger, self._status)
            self.spill.said_back()
        if ledger is not None:
            ledger.close()

    def _last(self, ledger: Ledger | None) -> Ledger | None:
        """The last flush, waiting up to CLOSE_BUSY_TIMEOUT_S for another process's lock. A run ended by a signal or
        the interpreter's exit (`killed`) first flushes as the loop does: SIGKILL may follow the signal, and its rows
        are then already in the ledger or a spill file."""
        if self._status == "killed":
            ledger = self._flush(ledger, final=True)
            if self.spill_path is None and not self._frames:
                return ledger
        self._set_wait(ledger, CLOSE_BUSY_TIMEOUT_S)
        return self._flush(ledger, final=True)

    def _set_wait(self, ledger: Ledger | None, seconds: float) -> None:
        """How long writes wait for another process's lock from now on, on the open ledger and on one opened later."""
        self._busy_s = seconds
        if ledger is not None:
            try:
                ledger.set_busy_timeout(seconds)
            except Exception as exc:  # noqa: BLE001 - contained: the next write finds out what is wrong with it
                self.on_fault("setting how long to wait for the ledger's lock", exc)

    def _drain(self) -> None:
        while self._inbox:
            try:
                self._process(self._inbox.popleft())
            except Exception as exc:  # noqa: BLE001 - a bad value must not stop the writer
                self.on_fault("processing step records", exc)

    def _record_status(self, ledger: Ledger | None, status: str) -> None:
        """In the ledger; where the rows ended in a spill file, there too, so a merge carries it, and the ledger is
        told which rows wait there (`SpillFile.record`): should the file vanish, they are known missing."""
        assert self.run_name is not None
        try:
            if self.spill_path is not None and ledger is not None:
                self._unspill(ledger)  # the lock the last flush waited for may be free now
            if self.spill_path is not None:
                with Ledger(self.spill_path, durable=True) as side:
                    side.set_status(self.run_name, status)
            if ledger is None:
                raise LedgerError(f"the ledger {masked(self.location)} could not be opened")
            with ledger.transaction():
                self.spill.record(ledger)
                ledger.set_status(self.run_name, status)
                if self._reason:
                    body = {"source": "tracker", "status": status, "error": self._reason}
                    last = self.derivation.last_step
                    ledger.add_event(self.run_name, "fault", body, start_step=last, end_step=last)
        except Exception as exc:  # noqa: BLE001 - contained
            self.on_fault("recording the run's status", exc)

    def _flush(self, ledger: Ledger | None, *, final: bool = False) -> Ledger | None:
        """Write buffered rows and stamp the heartbeat, in one transaction (the heartbeat alone when idle)."""
        self._last_flush = time.monotonic()
        if self.run_name is None:
            return ledger
        if self._lost is not None:
            self._keep_lost()
            return ledger
        layers_due = final or time.monotonic() - self._last_layers >= LAYERS_EVERY_S
        if not (self._frames or self._evals or self.spill_path or (layers_due and self._held)):
            self._stamp(ledger)
            return ledger
        self._sample_telemetry(final)
        try:
            ledger = self._checked(ledger)
            if self._refused is not None:
                raise LedgerError(
                    f"{self.location}: {self._refused}; this run's step records go to a spill file "
                    "from now on, never into that file (`yieldgate check` tells what is left of it)"
                )
            if ledger is None:
                ledger = self._open()
            held = self._write(ledger, layers_due)
        except RunInUse as exc:
            self._lose(exc)
            return ledger
        except Exception as exc:  # noqa: BLE001 - the ledger may be locked, full, read-only or gone: keep the rows
            self.on_fault("writing to the ledger", exc)
            # Spill now, not once many rows have piled up in memory: a SIGKILL while the ledger is locked must
            # lose no more than one flush interval, as it does when the ledger is healthy. Rows that arrived
            # while this flush waited for the lock go too.
            self._drain()
            self._spill()
            while self.buffered_rows > MAX_BUFFERED_ROWS and len(self._frames) > 1:
                self.dropped_rows += self._frames.pop(0).n
            return ledger
        self.written_rows += self.buffered_rows
        evaluated = sorted({e.step for e in self._evals})
        self._frames, self._evals = [], []
        self._held = [] if layers_due else held
        if layers_due:
            self._last_layers = time.monotonic()
        with contextlib.suppress(OSError):
            self._size = os.stat(self.location).st_size if self._inode is not None else 0
        if self.spill_path is not None:
            self._unspill(ledger)
        self._online(ledger)
        if self.governed is not None and evaluated:
            self.governed.evaluate(ledger, self.run_name, evaluated)  # contained: a failure leaves it ungoverned
        return ledger

    def _stamp(self, ledger: Ledger | None) -> None:
        """The heartbeat alone (nothing to write): this process still writes the run."""
        if ledger is not None and self.owner is not None and self._refused is None:
            assert self.run_name is not None
            try:
                ledger.heartbeat(self.run_name, self.owner)
            except RunInUse as exc:
                self._lose(exc)
            except Exception as exc:  # noqa: BLE001 - a locked ledger: the next flush stamps it
                self.on_fault("stamping the run's heartbeat", exc)

    def _sample_telemetry(self, final: bool) -> None:
        """Device telemetry into the last buffered step, every `telemetry_every_s` (energy is a cumulative counter:
        nothing is lost between readings)."""
        due = final or time.monotonic() - self._last_telemetry >= self.config.telemetry_every_s
        if self.telemetry is not None and self._frames and due:
            self._last_telemetry = time.monotonic()
            try:
                last = self._frames[-1]
                for key, value in self.telemetry.sample().items():
                    last.set(key, last.n - 1, value)
            except OSError as exc:
                self.on_fault("reading device telemetry", exc)

    def _checked(self, ledger: Ledger | None) -> Ledger | None:
        """The open ledger, or None once closed here: a removed file is made again at the next open; a truncated,
        replaced or damaged one is refused from then on (`_refused`: the rows go to a spill file)."""
        if ledger is not None and self._removed():
            self.on_fault(
                "writing to the ledger",
                FileNotFoundError(
                    f"{self.location} was removed while the run was writing to it; a new ledger is made there "
                    "and the run goes on in it (rows already written went with the removed file)"
                ),
            )
            ledger.close()
            ledger = None
        if self._refused is None:
            self._refused = self._damaged()
            if self._refused is not None and ledger is not None:
                ledger.close()
                ledger = None
        return ledger

    def _write(self, ledger: Ledger, layers_due: bool) -> list[Frame]:
        """One transaction: the heartbeat, the buffered step records (their per-layer signals when due) and evals.
        Returns the per-layer records held back (written when `layers_due`)."""
        assert self.run_name is not None
        with ledger.transaction():
            if self.owner is not None:
                ledger.heartbeat(self.run_name, self.owner)
            if self._frames:
                ledger.append_steps(self.run_name, joined(self._frames))
            held = self._held + [h for h in map(Frame.held, self._frames) if h is not None]
            if held and layers_due:
                ledger.append_steps(self.run_name, joined(held))
            if self._evals:
                ledger.append_evals(self.run_name, self._evals)
        return held

    def _online(self, ledger: Ledger) -> None:
        every = self.config.online_diagnosis_every_s
        if every is not None and time.monotonic() - self._last_online >= every:
            self._last_online = time.monotonic()
            try:
                self._online_diagnosis(ledger)
            except Exception as exc:  # noqa: BLE001 - contained: a detector must not stop the writer
                self.on_fault("running the online diagnosis", exc)

    def _lose(self, exc: RunInUse) -> None:
        """Another process took the run over (it judged this writer dead: frozen past the stale limit by a stopped
        container, a debugger, swap): nothing more is written into its run. Every row this writer still has, and every
        later one, goes to the spill file instead, and that is said loudly, once."""
        self._lost = exc
        self.on_fault("writing to the ledger (the run was taken over; this process's step records are spilled)", exc)
        self._keep_lost()
        log.error(
            "yieldgate tracker: run %r was TAKEN OVER by another process while this one was stopped (%s); this process "
            "writes nothing more into it. Its step records not yet in the ledger, and every later one, are kept in "
            "%s (%d so far): once the other writer has closed, bring them in with: yieldgate --ledger %s merge %s",
            self.run_name,
            exc,
            self.spill_path or "no spill file (every spill folder refused it)",
            self.spilled_rows,
            masked(self.location),
            self.spill_path,
        )

    def _keep_lost(self) -> None:
        """A run taken over: this writer's rows go to its spill file only (in memory, bounded, when none takes
        them)."""
        if self._frames or self._evals or self._held:
            self._spill()
        while self.buffered_rows > MAX_BUFFERED_ROWS and len(self._frames) > 1:
            self.dropped_rows += self._frames.pop(0).n

    def _online_diagnosis(self, ledger: Ledger) -> None:
        """The cheap detectors (spikes, non-finite values, stalls) on the last steps; each new finding becomes
        an open `diagnosis` event while the run is still going."""
        from yieldgate.analysis.diagnose import online_findings  # analysis is imported only when asked for

        if not self._recent:
            return
        columns = joined(list(self._recent))
        window = pd.DataFrame(
            {k: np.ma.filled(v.astype(np.float64), np.nan) if k != "step" else v for k, v in columns.items()}
        )
        for finding in online_findings(window):
            key = (finding.cause, finding.detector, finding.start_step)
            if key in self._online_seen:
                continue
            self._online_seen.add(key)
            ledger.add_event(
                self.run_name,
                "diagnosis",
                {"source": "tracker", **finding.to_dict()},
                start_step=finding.start_step,
                end_step=finding.end_step,
            )

    def _open(self) -> Ledger:
        """Open the ledger, the run in it (made again if missing) and remember which file it is."""
        ledger = Ledger(self.location, busy_timeout_s=self._busy_s, durable=True)
        try:
            if self.run_name is not None and self.owner is not None:
                # Ours already, or made again in a ledger file that was removed; another's: RunInUse.
                ledger.claim_run(self.run_name, owner=self.owner, manifest=self.manifest, resume=True)
            elif self.run_name is not None:
                ledger.create_run(
                    self.run_name, manifest=self.manifest, status="running", source="tracker", if_exists="reuse"
                )
            self._inode = os.stat(self.location).st_ino if self._is_file() else None
            self._size = 0
        except BaseException:
            ledger.close()
            raise
        return ledger

    def _is_file(self) -> bool:
        """The ledger is a file (not `:memory:`, not a PostgreSQL URL): its inode and size are watched, and spill
        files go beside it."""
        return Location.parse(self.location).is_file

    def _damaged(self) -> str | None:
        """The ledger file truncated or replaced by a shorter copy, or its headers damaged (`ledger.file`): writing
        on would mix this run's pages into a file SQLite no longer describes."""
        if self._inode is None:
            return None
        # The size only: this process holds a connection on the file, whose locks a header read would drop.
        return file_problem(self.location, min_size=self._size, headers=False)

    def _removed(self) -> bool:
        """The ledger file is gone or replaced: SQLite would go on writing into the unlinked file, unseen."""
        if self._inode is None:
            return False
        try:
            return os.stat(self.location).st_ino != self._inode
        except FileNotFoundError:
            return True

    def spill_files(self) -> list[str]:
        """Where a spill file may go, in order (`SpillFile.candidates`). The run's meta records them at the start
        (`ledger.spills`), so that a spill left by a killed Tracker is found by `runs`, `show` and `check`."""
        return self.spill.candidates()

    def _spill(self) -> None:
        """Move buffered rows into a spill file (a ledger of its own) so memory stays bounded."""
        assert self.run_name is not None  # only rank 0, which names the run, writes or spills
        held = self._held + [h for h in map(Frame.held, self._frames) if h is not None]
        if self.spill.write(self._frames, held, self._evals, announce=self._lost is None):
            self._frames, self._held, self._evals = [], [], []

    def _unspill(self, ledger: Ledger) -> None:
        """The ledger is writable again: move the spilled rows into it and remove the spill file; when they cannot
        move yet, the ledger is told which rows wait there."""
        rows, lost = self.spill.rows, self.spill.lost
        if self.spill.move_in(ledger, self.owner):
            self.written_rows += rows
            return
        self.dropped_rows += self.spill.lost - lost  # a spill file that vanished: the ledger records them missing
        if self.spill.path is not None and not self.spill.recorded:
            self.spill.record(ledger)

    def _resume_before(self, step: int) -> None:
        """A resumed run's first step is `step` (numbered by the loop): when the ledger holds records from `step`
        on, they belong to work its checkpoint threw away. They are set apart (`Ledger.supersede`) and the
        counters continue from the stored record before `step`."""
        assert self.run_name is not None
        if step > self.derivation.start.step:
            return  # the checkpoint is not older than the ledger: nothing to set apart
        with Ledger(self.location, durable=True) as ledger:
            at = ledger.step_at(self.run_name, step - 1) or {"step": 0, "tokens": 0.0, "samples": 0.0}
            tokens, samples = at["tokens"] or 0.0, at["samples"] or 0.0
            if at["step"] != step - 1:
                log.warning(
                    "yieldgate: run %r resumes at step %d, but the ledger's last record before it is step %d: "
                    "tokens continue from that record's %g; pass step= and tokens= from the checkpoint to "
                    "Tracker to be exact",
                    self.run_name,
                    step,
                    at["step"],
                    tokens,
                )
            ledger.supersede(self.run_name, step - 1, resume={"step": step - 1, "tokens": tokens, "samples": samples})
        self.derivation.rebase(step - 1, tokens, samples)

    def _process(self, packet: Packet) -> None:
        if packet.rows and packet.rows[0].rebase and self.run_name is not None:
            try:
                self._resume_before(packet.rows[0].step)
            except Exception as exc:  # noqa: BLE001 - contained: the run goes on, continuing the ledger's counters
                self.on_fault("setting apart the records a resume superseded", exc)
        if packet.event is not None:
            packet.event.synchronize()  # waits on this thread only: the copies were queued non-blocking
        n = len(packet.rows)
        local = derive.counters(packet.rows)
        tokens, samples, spread = derive.totals(local, self._gathered(local) if n else None)
        if self.run_name is None or n == 0 and not packet.evals:
            return
        if n:
            frame = self.derivation.frame(
                packet, local[2].tolist(), tokens.tolist(), samples.tolist(), {k: v.tolist() for k, v in spread.items()}
            )
            self._frames.append(frame)
            if self.config.online_diagnosis_every_s is not None:
                self._recent.append(frame)
                while sum(f.n for f in self._recent) - self._recent[0].n >= ONLINE_WINDOW:
                    self._recent.popleft()
        self._evals.extend(self.derivation.evals(packet))

    def _gathered(self, local: np.ndarray) -> np.ndarray | None:
        """Every rank's counters, [ranks, fields, rows] (distributed runs), or None: a single process, or a rank
        died or timed out, and the run goes on with this rank's own counters."""
        if self.reduce is None or self._reduce_failed:
            return None
        try:
            return self.reduce(local)
        except RuntimeError as exc:
            self._reduce_failed = True
            self.on_fault("reducing counters across ranks (now recording this rank's counters only)", exc)
            return None
