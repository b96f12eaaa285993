"""The Tracker's background writer: turns packets of raw per-step counters into step records and writes
them to the ledger, off the training thread.

The training thread only records host counters and device tensors, and every few steps appends a packet
to a bounded inbox (full: the packet is dropped and counted, never waited for). Here, on a background
thread that wakes once per flush interval, the packet's tensors are waited for (their non-blocking copy to
the host), ranks' counters are reduced (distributed runs), derived columns are computed (windowed tokens/s,
MFU, cost, energy, repeat rate, loss variance, GNS) and rows are written to the ledger; when it cannot be
written they are kept, then spilled to a side file, and moved in once it can.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.data.stream import RepeatCounter
from yieldgate.errors import InputError, LedgerError, RunInUse
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.ledger.file import file_problem
from yieldgate.ledger.location import Location
from yieldgate.ledger.owners import HEARTBEAT_EVERY_S, Owner
from yieldgate.ledger.pg import masked
from yieldgate.names import key_problem
from yieldgate.track.config import TrackerConfig
from yieldgate.track.hardware import Telemetry
from yieldgate.track.packet import Packet, Stacked, StepRow, TensorRef
from yieldgate.track.signals import loss_variance
from yieldgate.track.throughput import Throughput

__all__ = ["Writer", "WriterSettings"]

log = logging.getLogger("yieldgate.track")


@dataclass(frozen=True, kw_only=True)
class WriterSettings:
    """What the writer needs to know of the run, beyond the Tracker's `TrackerConfig` (handed over whole)."""

    location: str
    run: str | None
    """Run name; None on ranks other than 0 (they reduce, they do not write)."""
    owner: Owner | None = None
    """The process that claimed the run: the heartbeat is stamped for it, and stops when another took the run."""
    base_step: int = 0
    base_tokens: float = 0.0
    base_samples: float = 0.0
    base_wall: float = 0.0
    t0: float
    manifest: Any = None
    """The run's manifest, to create the run again in a ledger file that was removed mid-run."""
    grad_clip: float | None = None
    price_per_device_hour: float | None = None
    devices: int = 1
    layer_names: tuple[str, ...] = ()
    full_signals: bool = False
    mfu: Callable[[float], float | None] = lambda rate: None
    portfolio: tuple[str, str] = ("", "")
    reduce: Callable[[np.ndarray], np.ndarray] | None = None
    """Distributed: all-gather a [fields, rows] array from every rank -> [ranks, fields, rows]."""


MAX_BUFFERED_ROWS = 1_000_000
"""Rows kept in memory when even the spill file cannot be written; the oldest beyond are dropped."""
ONLINE_WINDOW = 256
"""Steps the online diagnosis detectors look at (`TrackerConfig.online_diagnosis_every_s`)."""
BUSY_TIMEOUT_S = 1.0
"""How long a flush waits for another process's lock on the ledger before retrying at the next one."""

LAYERS_EVERY_S = HEARTBEAT_EVERY_S
"""Per-layer signals go to the ledger this often (and at close), the rest of a step's record at every flush: a
model's per-layer keys number hundreds, and written once a second their per-key cost would be most of the
writer's work, competing with the training loop for the cores."""


class _Frame:
    """Step records of one packet in column form: per key, one value per step (None: not recorded).

    Plain lists, turned into arrays once per flush (`_joined`): a packet holds ~10 steps, and at that size
    numpy's per-call cost (with caches cold after a second asleep) outweighs the work."""

    def __init__(self, steps: list[int]) -> None:
        self.steps = steps
        self.n = len(steps)
        self.columns: dict[str, list[float | None]] = {}
        self.layers: dict[str, list[float | None]] = {}
        """Per-layer signals (one key per layer and signal): written every LAYERS_EVERY_S, not at every flush."""

    def put(self, key: str, values: Sequence[float | None]) -> None:
        """A whole column (left out when no step has a value)."""
        if any(v is not None for v in values):
            self.columns[key] = list(values)

    def set(self, key: str, i: int, value: float) -> None:
        column = self.columns.get(key)
        if column is None:
            column = self.columns[key] = [None] * self.n
        column[i] = value

    def get(self, key: str) -> list[float | None]:
        return self.columns.get(key) or [None] * self.n

    def held(self) -> _Frame | None:
        """The per-layer columns alone, on the steps that have them (one in `layer_every`), or None."""
        rows = [i for i in range(self.n) if any(column[i] is not None for column in self.layers.values())]
        if not rows:
            return None
        out = _Frame([self.steps[i] for i in rows])
        out.columns = {key: [column[i] for i in rows] for key, column in self.layers.items()}
        return out


def _joined(frames: list[_Frame]) -> dict[str, Any]:
    """One dict of columns for `Ledger.append_steps`: `step` and a masked array per key (masked: not recorded;
    a recorded NaN stays NaN)."""
    keys = dict.fromkeys(k for f in frames for k in f.columns)
    out: dict[str, Any] = {"step": np.array([s for f in frames for s in f.steps], dtype=np.int64)}
    for key in keys:
        values = [v for f in frames for v in f.columns.get(key, [None] * f.n)]
        missing = np.array([v is None for v in values], dtype=bool)
        out[key] = np.ma.masked_array(
            np.array([math.nan if v is None else v for v in values], dtype=np.float64), missing
        )
    return out


def _remove_ledger_file(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            os.remove(path + suffix)


class Writer(threading.Thread):
    """The background thread. The training thread appends packets to an inbox (a deque: no lock, no
    wake-up) and the writer collects them once per flush interval, so the training thread never hands the
    interpreter over to this thread from inside a Tracker call."""

    def __init__(
        self,
        config: TrackerConfig,
        settings: WriterSettings,
        telemetry: Telemetry | None,
        on_fault: Callable[[str, BaseException], None],
    ):
        super().__init__(name="yieldgate-writer", daemon=True)
        self.config = config
        self.s = settings
        self.telemetry = telemetry
        self.on_fault = on_fault
        self._inbox: deque[Packet] = deque()
        self._wake = threading.Event()
        self._stopping = False
        self._status: str | None = None
        self._reason: str | None = None
        self.dropped_rows = 0
        self.written_rows = 0
        self._frames: list[_Frame] = []
        self._held: list[_Frame] = []
        """Per-layer signals of frames already written, until LAYERS_EVERY_S has passed (`_Frame.held`)."""
        self._last_layers = time.monotonic()
        self._evals: list[EvalRecord] = []
        # Where the counters start (the run's stored point); each row adds the training thread's running totals.
        self._base_tokens = settings.base_tokens
        self._base_samples = settings.base_samples
        self._throughput = Throughput(window=config.throughput_window, skip=config.throughput_skip)
        self._losses: deque[float] = deque(maxlen=config.loss_var_window)
        self._repeats = RepeatCounter(config.repeat_window)
        self._last_scale: float | None = None
        self._skipped = 0
        # tokens and wall time at each recent step, for evals; the run's starting point is known exactly
        self._at: dict[int, tuple[float, float]] = {settings.base_step: (settings.base_tokens, settings.base_wall)}
        self._last_flush = time.monotonic()
        self._reduce_failed = False
        self._inode: int | None = None
        self._size = 0
        """Size of the ledger file after this writer's last commit: a shorter file was truncated or replaced."""
        self._refused: str | None = None
        """Why the ledger file is no longer written (truncated, replaced, damaged headers): rows go to the spill
        file."""
        self._recent: deque[_Frame] = deque()
        self._last_online = time.monotonic()
        self._online_seen: set[tuple[Any, ...]] = set()
        self._last_telemetry = -math.inf
        self._keys: dict[str, bool] = {}
        """Step value keys seen, and whether each may be stored (checked once per key, on this thread)."""
        self.spill_path: str | None = None
        """The spill file holding rows the ledger could not take yet (None: nothing spilled)."""
        self.spilled_rows = 0
        self._lost: RunInUse | None = None
        """Set when another process took the run over: nothing more is written."""

    @property
    def buffered_rows(self) -> int:
        return sum(f.n for f in self._frames)

    def submit(self, packet: Packet) -> None:
        """Called on the training thread: append, or drop and count when the inbox is full."""
        if len(self._inbox) >= self.config.queue_size:
            self.dropped_rows += len(packet.rows)
            self.on_fault("writer queue full: step records dropped", RuntimeError(f"{self.dropped_rows} rows dropped"))
            return
        self._inbox.append(packet)
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
        if self.s.run is not None:
            try:
                ledger = self._open()
            except Exception as exc:  # noqa: BLE001 - reported; rows stay buffered and are retried
                self.on_fault("opening the ledger", exc)
        while True:
            self._wake.wait(min(self.config.flush_every_s, HEARTBEAT_EVERY_S))
            self._wake.clear()
            stopping = self._stopping  # read before draining: every packet submitted before close is drained
            self._drain()
            if stopping or time.monotonic() - self._last_flush >= min(self.config.flush_every_s, HEARTBEAT_EVERY_S):
                ledger = self._flush(ledger, final=stopping)
            if stopping:
                break
        if self._frames:  # neither the ledger nor a spill file took them: say so, count them
            self.dropped_rows += self.buffered_rows
            self.on_fault(
                "closing with step records nothing could take",
                RuntimeError(
                    f"{self.buffered_rows} step records lost: the ledger {masked(self.s.location)} and every spill "
                    "folder refused them"
                ),
            )
        if self.s.run is not None and self._status is not None and self._lost is None:
            self._record_status(ledger, self._status)
        if ledger is not None:
            ledger.close()

    def _drain(self) -> None:
        while self._inbox:
            try:
                self._process(self._inbox.popleft())
            except Exception as exc:  # noqa: BLE001 - a bad value must not stop the writer
                self.on_fault("processing step records", exc)

    def _record_status(self, ledger: Ledger | None, status: str) -> None:
        """In the ledger; where the rows ended in a spill file, there too, so a merge carries it."""
        assert self.s.run is not None
        try:
            if self.spill_path is not None:
                with Ledger(self.spill_path, durable=True) as side:
                    side.set_status(self.s.run, status)
            if ledger is None:
                raise LedgerError(f"the ledger {masked(self.s.location)} could not be opened")
            with ledger.transaction():
                ledger.set_status(self.s.run, status)
                if self._reason:
                    body = {"source": "tracker", "status": status, "error": self._reason}
                    ledger.add_event(self.s.run, "fault", body, start_step=max(self._at), end_step=max(self._at))
        except Exception as exc:  # noqa: BLE001 - contained
            self.on_fault("recording the run's status", exc)

    def _flush(self, ledger: Ledger | None, *, final: bool = False) -> Ledger | None:
        """Write buffered rows and stamp the heartbeat, in one transaction (the heartbeat alone when idle)."""
        self._last_flush = time.monotonic()
        if self.s.run is None:
            return ledger
        if self._lost is not None:
            self._drop_lost()
            return ledger
        layers_due = final or time.monotonic() - self._last_layers >= LAYERS_EVERY_S
        if not (self._frames or self._evals or self.spill_path or (layers_due and self._held)):
            if ledger is not None and self.s.owner is not None and self._refused is None:
                try:
                    ledger.heartbeat(self.s.run, self.s.owner)
                except RunInUse as exc:
                    self._lose(exc)
                except Exception as exc:  # noqa: BLE001 - a locked ledger: the next flush stamps it
                    self.on_fault("stamping the run's heartbeat", exc)
            return ledger
        due = final or time.monotonic() - self._last_telemetry >= self.config.telemetry_every_s
        if self.telemetry is not None and self._frames and due:
            self._last_telemetry = time.monotonic()
            try:
                last = self._frames[-1]
                for key, value in self.telemetry.sample().items():
                    last.set(key, last.n - 1, value)
            except OSError as exc:
                self.on_fault("reading device telemetry", exc)
        try:
            if ledger is not None and self._removed():
                self.on_fault(
                    "writing to the ledger",
                    FileNotFoundError(
                        f"{self.s.location} was removed while the run was writing to it; a new ledger is made there "
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
            if self._refused is not None:
                raise LedgerError(
                    f"{self.s.location}: {self._refused}; this run's step records go to a spill file "
                    "from now on, never into that file (`yieldgate check` tells what is left of it)"
                )
            if ledger is None:
                ledger = self._open()
            with ledger.transaction():
                if self.s.owner is not None:
                    ledger.heartbeat(self.s.run, self.s.owner)
                if self._frames:
                    ledger.append_steps(self.s.run, _joined(self._frames))
                held = self._held + [h for h in map(_Frame.held, self._frames) if h is not None]
                if held and layers_due:
                    ledger.append_steps(self.s.run, _joined(held))
                if self._evals:
                    ledger.append_evals(self.s.run, self._evals)
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
        self._frames, self._evals = [], []
        self._held = [] if layers_due else held
        if layers_due:
            self._last_layers = time.monotonic()
        with contextlib.suppress(OSError):
            self._size = os.stat(self.s.location).st_size if self._inode is not None else 0
        if self.spill_path is not None:
            self._unspill(ledger)
        if (
            self.config.online_diagnosis_every_s is not None
            and time.monotonic() - self._last_online >= self.config.online_diagnosis_every_s
        ):
            self._last_online = time.monotonic()
            try:
                self._online_diagnosis(ledger)
            except Exception as exc:  # noqa: BLE001 - contained: a detector must not stop the writer
                self.on_fault("running the online diagnosis", exc)
        return ledger

    def _lose(self, exc: RunInUse) -> None:
        """Another process took the run over (it judged this writer dead): never write into its run again."""
        self._lost = exc
        self.on_fault("writing to the ledger (the run was taken over; this process's step records are dropped)", exc)
        self._drop_lost()

    def _drop_lost(self) -> None:
        self.dropped_rows += self.buffered_rows
        self._frames, self._evals = [], []

    def _online_diagnosis(self, ledger: Ledger) -> None:
        """The cheap detectors (spikes, non-finite values, stalls) on the last steps; each new finding becomes
        an open `diagnosis` event while the run is still going."""
        from yieldgate.analysis.diagnose import online_findings  # analysis is imported only when asked for

        if not self._recent:
            return
        columns = _joined(list(self._recent))
        window = pd.DataFrame(
            {k: np.ma.filled(v.astype(np.float64), np.nan) if k != "step" else v for k, v in columns.items()}
        )
        for finding in online_findings(window):
            key = (finding.cause, finding.detector, finding.start_step)
            if key in self._online_seen:
                continue
            self._online_seen.add(key)
            ledger.add_event(
                self.s.run,
                "diagnosis",
                {"source": "tracker", **finding.to_dict()},
                start_step=finding.start_step,
                end_step=finding.end_step,
            )

    def _open(self) -> Ledger:
        """Open the ledger, the run in it (made again if missing) and remember which file it is."""
        ledger = Ledger(self.s.location, busy_timeout_s=BUSY_TIMEOUT_S, durable=True)
        try:
            if self.s.run is not None and self.s.owner is not None:
                # Ours already, or made again in a ledger file that was removed; another's: RunInUse.
                ledger.claim_run(self.s.run, owner=self.s.owner, manifest=self.s.manifest, resume=True)
            elif self.s.run is not None:
                ledger.create_run(
                    self.s.run, manifest=self.s.manifest, status="running", source="tracker", if_exists="reuse"
                )
            self._inode = os.stat(self.s.location).st_ino if self._is_file() else None
            self._size = 0
        except BaseException:
            ledger.close()
            raise
        return ledger

    def _is_file(self) -> bool:
        """The ledger is a file (not `:memory:`, not a PostgreSQL URL): its inode and size are watched, and spill
        files go beside it."""
        return Location.parse(self.s.location).is_file

    def _damaged(self) -> str | None:
        """The ledger file truncated or replaced by a shorter copy, or its headers damaged (`ledger.file`): writing
        on would mix this run's pages into a file SQLite no longer describes."""
        if self._inode is None:
            return None
        # The size only: this process holds a connection on the file, whose locks a header read would drop.
        return file_problem(self.s.location, min_size=self._size, headers=False)

    def _removed(self) -> bool:
        """The ledger file is gone or replaced: SQLite would go on writing into the unlinked file, unseen."""
        if self._inode is None:
            return False
        try:
            return os.stat(self.s.location).st_ino != self._inode
        except FileNotFoundError:
            return True

    def _spill_files(self) -> list[str]:
        """Where a spill file may go, in order: the configured folder or the ledger's, then the temp folder."""
        # Named by run, host and process: nodes that share a folder (one ledger per node) never share a spill file.
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{self.s.run or 'run'}-{socket.gethostname()}")
        folders = [
            self.config.spill_dir or (str(Path(self.s.location).parent) if self._is_file() else None),
            tempfile.gettempdir(),
        ]
        return [str(Path(f) / f"yieldgate-spill-{name}-{os.getpid()}.db") for f in dict.fromkeys(folders) if f]

    def _spill(self) -> None:
        """Move buffered rows into a spill file (a ledger of its own) so memory stays bounded."""
        rows = self.buffered_rows
        for path in [self.spill_path] if self.spill_path else self._spill_files():
            fresh = not os.path.exists(path)
            try:
                run = self.s.run
                assert run is not None  # only rank 0, which names the run, writes or spills
                with Ledger(path, durable=True) as side, side.transaction():
                    side.create_run(
                        run, manifest=self.s.manifest, status="running", source="tracker", if_exists="reuse"
                    )
                    if self._frames:
                        side.append_steps(run, _joined(self._frames))
                    held = self._held + [h for h in map(_Frame.held, self._frames) if h is not None]
                    if held:
                        side.append_steps(run, _joined(held))
                    if self._evals:
                        side.append_evals(run, self._evals)
            except Exception as exc:  # noqa: BLE001 - try the next folder; else rows stay in memory, bounded
                self.on_fault("spilling step records to a side file", exc)
                if fresh:
                    _remove_ledger_file(path)
                continue
            if self.spill_path is None:
                log.warning(
                    "yieldgate tracker: the ledger %s cannot take step records now; they are kept in %s "
                    "and move into the ledger when it is writable again (or run: yieldgate --ledger %s "
                    "merge %s)",
                    masked(self.s.location),
                    path,
                    masked(self.s.location),
                    path,
                )
            self.spill_path = path
            self.spilled_rows += rows
            self._frames, self._held, self._evals = [], [], []
            return

    def _unspill(self, ledger: Ledger) -> None:
        """The ledger is writable again: move the spilled rows into it and remove the spill file."""
        path = self.spill_path
        assert path is not None and self.s.run is not None
        try:
            with Ledger(path) as side:
                ledger.copy_run(side, self.s.run)
        except Exception as exc:  # noqa: BLE001 - the spill file stays; retried at the next flush
            self.on_fault("moving spilled step records into the ledger", exc)
            return
        self.written_rows += self.spilled_rows
        self.spilled_rows = 0
        self.spill_path = None
        _remove_ledger_file(path)

    def _resume_before(self, step: int) -> None:
        """A resumed run's first step is `step` (numbered by the loop): when the ledger holds records from `step`
        on, they belong to work its checkpoint threw away. They are set apart (`Ledger.supersede`) and the
        counters continue from the stored record before `step`."""
        assert self.s.run is not None
        if step > self.s.base_step:
            return  # the checkpoint is not older than the ledger: nothing to set apart
        with Ledger(self.s.location, durable=True) as ledger:
            at = ledger.step_at(self.s.run, step - 1) or {"step": 0, "tokens": 0.0, "samples": 0.0}
            tokens, samples = at["tokens"] or 0.0, at["samples"] or 0.0
            if at["step"] != step - 1:
                log.warning(
                    "yieldgate: run %r resumes at step %d, but the ledger's last record before it is step %d: "
                    "tokens continue from that record's %g; pass step= and tokens= from the checkpoint to "
                    "Tracker to be exact",
                    self.s.run,
                    step,
                    at["step"],
                    tokens,
                )
            ledger.supersede(self.s.run, step - 1, resume={"step": step - 1, "tokens": tokens, "samples": samples})
        self._base_tokens, self._base_samples = tokens, samples
        self._at = {step - 1: (tokens, self.s.base_wall)}

    def _process(self, packet: Packet) -> None:
        if packet.rows and packet.rows[0].rebase and self.s.run is not None:
            try:
                self._resume_before(packet.rows[0].step)
            except Exception as exc:  # noqa: BLE001 - contained: the run goes on, continuing the ledger's counters
                self.on_fault("setting apart the records a resume superseded", exc)
        if packet.event is not None:
            packet.event.synchronize()  # waits on this thread only: the copies were queued non-blocking
        rows = packet.rows
        n = len(rows)
        local = np.array(
            [
                [r.tokens for r in rows],
                [r.samples for r in rows],
                [r.step_s for r in rows],
                [r.tokens_total for r in rows],
                [r.samples_total for r in rows],
            ],
            dtype=np.float64,
        ).reshape(5, n)
        tokens, samples = local[3], local[4]
        spread: dict[str, np.ndarray] = {}
        gathered = None
        if self.s.reduce is not None and not self._reduce_failed and n:
            try:
                gathered = self.s.reduce(local)  # [ranks, fields, rows]
            except RuntimeError as exc:  # a rank died or timed out: go on with this rank's own counters
                self._reduce_failed = True
                self.on_fault("reducing counters across ranks (now recording this rank's counters only)", exc)
        if gathered is not None:
            tokens, samples = gathered[:, 3].sum(0), gathered[:, 4].sum(0)
            rates = gathered[:, 0] / np.maximum(gathered[:, 2], 1e-12)  # per-rank tokens/s of each step
            spread = {
                "dist/tokens_per_s/min": rates.min(0),
                "dist/tokens_per_s/max": rates.max(0),
                "dist/step_s/max": gathered[:, 2].max(0),
            }
        if self.s.run is None or n == 0 and not packet.evals:
            return
        if n:
            frame = self._frame(
                packet, local[2].tolist(), tokens.tolist(), samples.tolist(), {k: v.tolist() for k, v in spread.items()}
            )
            self._frames.append(frame)
            if self.config.online_diagnosis_every_s is not None:
                self._recent.append(frame)
                while sum(f.n for f in self._recent) - self._recent[0].n >= ONLINE_WINDOW:
                    self._recent.popleft()
        # Host tensors (the packet's event has completed): no device sync.
        eval_values = packet.eval_tensors.tolist() if packet.eval_tensors is not None else []
        for step, metrics in packet.evals:
            self._record_evals(step, metrics, eval_values)
        if len(self._at) > 4096:
            for step in sorted(self._at)[:-1024]:
                del self._at[step]

    def _frame(
        self,
        packet: Packet,
        step_s: list[float],
        tokens: list[float],
        samples: list[float],
        spread: dict[str, list[float]],
    ) -> _Frame:
        rows = packet.rows
        frame = _Frame([r.step for r in rows])
        tok, smp, wall, rate = [], [], [], []
        for r, k, m in zip(rows, tokens, samples, strict=True):
            t = self.s.base_wall + (r.t_end - self.s.t0)
            self._throughput.update(time=t, tokens=self._base_tokens + k, samples=self._base_samples + m)
            tok.append(self._base_tokens + k)
            smp.append(self._base_samples + m)
            wall.append(t)
            rate.append(self._throughput.compute().get("tokens_per_s"))
        frame.put("tokens", tok)
        frame.put("samples", smp)
        frame.put("wall_s", wall)
        frame.put("step_s", step_s)
        frame.put("data_wait_s", [r.data_wait_s for r in rows])
        frame.put("lr", [r.lr for r in rows])
        frame.put("tokens_per_s", rate)
        frame.put("mfu", [None if x is None else self.s.mfu(x) for x in rate])
        if self.s.price_per_device_hour is not None:
            frame.put("cost_usd", [w / 3600.0 * self.s.devices * self.s.price_per_device_hour for w in wall])
        self._place(frame, packet)
        for timer in packet.timers:
            frame.set(timer.key, timer.row, timer.seconds())
        for name, column in spread.items():
            frame.put(name, column)
        for i, r in enumerate(rows):
            if r.values:
                for key, value in r.values.items():
                    if self._key_ok(key):
                        frame.set(key, i, value)
            if r.sources:
                for source, count in r.sources.items():
                    if self._key_ok(f"tokens/{source}"):
                        frame.set(f"tokens/{source}", i, count)
            if r.sample_ids is not None:
                ids = r.sample_ids.tolist() if hasattr(r.sample_ids, "tolist") else list(r.sample_ids)
                frame.set("stream/repeat_rate", i, self._repeats.update(ids))
        frame.put("clipped", self._clipped(rows, frame.get("grad_norm")))
        self._skipped_steps(frame)
        if self.s.full_signals:
            self._loss_variance(frame)
        self._at.update(zip(frame.steps, zip(tok, wall, strict=True), strict=True))
        return frame

    def _clipped(self, rows: list[StepRow], grad_norm: list[float | None]) -> list[float | None]:
        """Given per step, or else known from the pre-clip gradient norm and the manifest's clip threshold."""
        clip = self.s.grad_clip
        out: list[float | None] = [r.clipped for r in rows]
        if clip is not None:
            for i, g in enumerate(grad_norm):
                if out[i] is None and g is not None and not math.isnan(g):
                    out[i] = float(g > clip)
        return out

    def _skipped_steps(self, frame: _Frame) -> None:
        """GradScaler lowers its scale exactly when it skips a step for inf/NaN gradients: count the drops."""
        if "signals/loss_scale" not in frame.columns:
            return
        for i, value in enumerate(frame.columns["signals/loss_scale"]):
            if value is None or math.isnan(value):
                continue
            if self._last_scale is not None and value < self._last_scale:
                self._skipped += 1
            self._last_scale = value
            frame.set("signals/skipped_steps", i, float(self._skipped))

    def _loss_variance(self, frame: _Frame) -> None:
        for i, value in enumerate(frame.columns.get("loss", ())):
            if value is None:
                continue  # no loss at this step; a NaN loss is recorded, and counts
            self._losses.append(float(value))
            if len(self._losses) == self._losses.maxlen:
                frame.set("signals/loss_var", i, loss_variance(np.fromiter(self._losses, dtype=np.float64)))

    def _place(self, frame: _Frame, packet: Packet) -> None:
        """Spread the packet's shipped tensors into the frame's columns, slot by slot: step values by key,
        per-layer signals ([rows, layers]) as `<key>/<layer>`, activation entropy as `signals/act_entropy/<layer>`."""
        for key, stacked in packet.steps.items():
            if self._key_ok(key):
                frame.columns[key] = self._scatter(frame, stacked)
        for key, stacked in packet.layers.items():
            per_row = stacked.values.float().tolist()
            for j, layer in enumerate(self.s.layer_names):
                frame.layers[f"{key}/{layer}"] = self._scatter(frame, stacked, [row[j] for row in per_row])
        for layer, stacked in packet.entropy.items():
            frame.layers[f"signals/act_entropy/{layer}"] = self._scatter(frame, stacked)

    def _key_ok(self, key: str) -> bool:
        """Whether `key` may name a step value (`names.key_problem`); a bad one (no namespace, a control, bidi or
        line-separator character) is reported once and its values are left out, never failing the whole flush."""
        ok = self._keys.get(key)
        if ok is None:
            problem = key_problem(key)
            ok = self._keys[key] = problem is None
            if problem is not None:
                self.on_fault(
                    "recording step values",
                    InputError(f"key {key!r} {problem}; its values are left out of the step records"),
                )
        return ok

    @staticmethod
    def _scatter(frame: _Frame, stacked: Stacked, values: list[Any] | None = None) -> list[float | None]:
        """One column of the frame from a stacked tensor's rows (or `values` read from it)."""
        column: list[float | None] = [None] * frame.n
        for i, v in zip(stacked.rows, stacked.values.float().tolist() if values is None else values, strict=True):
            column[i] = v[0] if isinstance(v, list) else v  # a [1]-shaped value per step comes as [x]
        return column

    def _record_evals(self, step: int, metrics: dict[str, Any], tensors: list[float]) -> None:
        tokens, wall = self._at.get(step, (None, None))
        name, version = self.s.portfolio
        for key, value in metrics.items():
            if isinstance(value, TensorRef):
                value = tensors[value.index]
            task, _, metric = key.rpartition("/")
            self._evals.append(
                EvalRecord(
                    step=step,
                    tokens=tokens,
                    wall_s=wall,
                    task=task,
                    metric=metric,
                    value=float(value) if value is not None else math.nan,
                    portfolio=name,
                    portfolio_version=version,
                )
            )
