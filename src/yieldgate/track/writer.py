"""The Tracker's background writer: turns packets of raw per-step counters into step records and writes
them to the ledger, off the training thread.

The training thread only records host counters and device tensors, and every few steps hands a packet
over (a bounded queue; a full queue drops the packet and counts it, never blocks). Here, on a background
thread, the packet's tensors are waited for (their non-blocking copy to the host), ranks' counters are
reduced (distributed runs), derived columns are computed (windowed tokens/s, MFU, cost, energy, repeat
rate, loss variance, GNS) and rows are written to the ledger about once a second.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from yieldgate.data.stream import RepeatCounter
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.track.hardware import Telemetry
from yieldgate.track.signals import loss_variance
from yieldgate.track.throughput import Throughput

__all__ = ["Packet", "StepRow", "TensorRef", "Writer", "WriterSettings"]

log = logging.getLogger("yieldgate.track")


@dataclass(slots=True)
class StepRow:
    """Host-side values of one step, as the training thread saw them."""

    step: int
    tokens: float
    samples: float
    t_end: float
    step_s: float
    data_wait_s: float | None
    lr: float | None = None
    clipped: float | None = None
    sources: dict[str, Any] | None = None
    sample_ids: Any = None
    values: dict[str, float] | None = None
    """Host values given as plain numbers (loss, grad_norm, user extras), by canonical key."""


@dataclass(frozen=True, slots=True)
class TensorRef:
    """An eval value that is a device tensor shipped in the same packet under `name`."""

    name: str


@dataclass
class Packet:
    """Steps handed from the training thread: host rows, and device tensors being copied to the host.

    `tensors[name] = (row indices, tensor)`: a stacked tensor whose first axis follows the indices (per-layer
    values are [rows, layers]). `event` completes when the copies have landed (CUDA), else None.
    """

    rows: list[StepRow]
    tensors: dict[str, tuple[list[int], torch.Tensor]] = field(default_factory=dict)
    timers: list[tuple[int, str, Any, Any]] = field(default_factory=list)
    event: Any = None
    evals: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    eval_tensors: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class WriterSettings:
    """What the writer needs to know of the run."""

    location: str
    run: str | None
    """Run name; None on ranks other than 0 (they reduce, they do not write)."""
    base_step: int = 0
    base_tokens: float = 0.0
    base_samples: float = 0.0
    base_wall: float = 0.0
    t0: float
    flush_every_s: float = 1.0
    queue_size: int = 256
    max_buffered_rows: int = 1_000_000
    throughput_window: int = 20
    throughput_skip: int = 2
    loss_var_window: int = 50
    repeat_window: int = 100_000
    grad_clip: float | None = None
    price_per_device_hour: float | None = None
    devices: int = 1
    layer_names: tuple[str, ...] = ()
    full_signals: bool = False
    mfu: Callable[[float], float | None] = lambda rate: None
    portfolio: tuple[str, str] = ("", "")
    reduce: Callable[[np.ndarray], np.ndarray] | None = None
    """Distributed: all-gather a [fields, rows] array from every rank -> [ranks, fields, rows]."""


class Writer(threading.Thread):
    def __init__(self, settings: WriterSettings, telemetry: Telemetry | None, on_fault: Callable[[str, BaseException], None]):
        super().__init__(name="yieldgate-writer", daemon=True)
        self.s = settings
        self.telemetry = telemetry
        self.on_fault = on_fault
        self.queue: queue.Queue[Packet | None] = queue.Queue(maxsize=settings.queue_size)
        self.dropped_rows = 0
        self.written_rows = 0
        self._rows: list[dict[str, Any]] = []
        self._evals: list[EvalRecord] = []
        self._tokens = settings.base_tokens
        self._samples = settings.base_samples
        self._sources: dict[str, float] = {}
        self._throughput = Throughput(window=settings.throughput_window, skip=settings.throughput_skip)
        self._losses: deque[float] = deque(maxlen=settings.loss_var_window)
        self._repeats = RepeatCounter(settings.repeat_window)
        self._last_scale: float | None = None
        self._skipped = 0
        # tokens and wall time at each recent step, for evals; the run's starting point is known exactly
        self._at: dict[int, tuple[float, float]] = {settings.base_step: (settings.base_tokens, settings.base_wall)}
        self._last_flush = time.monotonic()
        self._reduce_failed = False

    def submit(self, packet: Packet) -> None:
        try:
            self.queue.put_nowait(packet)
        except queue.Full:
            self.dropped_rows += len(packet.rows)
            self.on_fault("writer queue full: step records dropped", RuntimeError(f"{self.dropped_rows} rows dropped"))

    def close(self, timeout: float = 60.0) -> None:
        self.queue.put(None)
        self.join(timeout)

    # -- the thread -----------------------------------------------------------------------------------

    def run(self) -> None:
        ledger = None
        if self.s.run is not None:
            try:
                ledger = Ledger(self.s.location)
            except Exception as exc:  # noqa: BLE001 - reported; rows stay buffered and are retried
                self.on_fault("opening the ledger", exc)
        while True:
            try:
                item = self.queue.get(timeout=self.s.flush_every_s)
            except queue.Empty:
                item = "tick"
            if item is None:
                break
            if isinstance(item, Packet):
                try:
                    self._process(item)
                except Exception as exc:  # noqa: BLE001 - a bad value must not stop the writer
                    self.on_fault("processing step records", exc)
            if time.monotonic() - self._last_flush >= self.s.flush_every_s:
                ledger = self._flush(ledger)
        self._flush(ledger)
        if ledger is not None:
            ledger.close()

    def _flush(self, ledger: Ledger | None) -> Ledger | None:
        self._last_flush = time.monotonic()
        if self.s.run is None or not (self._rows or self._evals):
            return ledger
        if self.telemetry is not None and self._rows:
            try:
                self._rows[-1].update(self.telemetry.sample())
            except OSError as exc:
                self.on_fault("reading device telemetry", exc)
        try:
            if ledger is None:
                ledger = Ledger(self.s.location)
            with ledger.transaction():
                if self._rows:
                    ledger.append_steps(self.s.run, self._rows)
                if self._evals:
                    ledger.append_evals(self.s.run, self._evals)
        except Exception as exc:  # noqa: BLE001 - the ledger may be locked, full or gone: keep the rows
            self.on_fault("writing to the ledger", exc)
            excess = len(self._rows) - self.s.max_buffered_rows
            if excess > 0:
                self.dropped_rows += excess
                del self._rows[:excess]
            return ledger
        self.written_rows += len(self._rows)
        self._rows, self._evals = [], []
        return ledger

    def _process(self, packet: Packet) -> None:
        if packet.event is not None:
            packet.event.synchronize()  # waits on this thread only: the copies were queued non-blocking
        host = {name: (idx, t.tolist()) for name, (idx, t) in packet.tensors.items()}
        n = len(packet.rows)
        local = np.array([[r.tokens for r in packet.rows], [r.samples for r in packet.rows],
                          [r.step_s for r in packet.rows]], dtype=np.float64)
        tokens, samples = local[0], local[1]
        spread: dict[str, np.ndarray] = {}
        gathered = None
        if self.s.reduce is not None and not self._reduce_failed and n:
            try:
                gathered = self.s.reduce(local)  # [ranks, fields, rows]
            except RuntimeError as exc:  # a rank died or timed out: go on with this rank's own counters
                self._reduce_failed = True
                self.on_fault("reducing counters across ranks (now recording this rank's counters only)", exc)
        if gathered is not None:
            tokens, samples = gathered[:, 0].sum(0), gathered[:, 1].sum(0)
            rates = gathered[:, 0] / np.maximum(gathered[:, 2], 1e-12)  # per-rank tokens/s of each step
            spread = {"dist/tokens_per_s/min": rates.min(0), "dist/tokens_per_s/max": rates.max(0),
                      "dist/step_s/max": gathered[:, 2].max(0)}
        if self.s.run is None or n == 0 and not packet.evals:
            return
        columns: dict[str, list[Any]] = {}
        for name, (idx, values) in host.items():
            col: list[Any] = [None] * n
            for i, v in zip(idx, values, strict=True):
                col[i] = v
            columns[name] = col
        timers = {}
        for i, name, start, end in packet.timers:
            timers.setdefault(name, [None] * n)[i] = start.elapsed_time(end) / 1e3 if hasattr(start, "elapsed_time") else end - start
        for i, r in enumerate(packet.rows):
            self._tokens += tokens[i]
            self._samples += samples[i]
            wall = self.s.base_wall + (r.t_end - self.s.t0)
            self._throughput.update(time=wall, tokens=self._tokens, samples=self._samples)
            rate = self._throughput.compute().get("tokens_per_s")
            row: dict[str, Any] = {"step": r.step, "tokens": self._tokens, "samples": self._samples, "wall_s": wall,
                                   "step_s": r.step_s, "data_wait_s": r.data_wait_s, "lr": r.lr,
                                   "tokens_per_s": rate, "mfu": None if rate is None else self.s.mfu(rate)}
            if self.s.price_per_device_hour is not None:
                row["cost_usd"] = wall / 3600.0 * self.s.devices * self.s.price_per_device_hour
            for name, col in columns.items():
                self._place(row, name, col[i])
            for name, col in timers.items():
                row[name] = col[i]
            for name, values in spread.items():
                row[name] = float(values[i])
            grad_norm = row.get("grad_norm")
            if r.clipped is not None:
                row["clipped"] = r.clipped
            elif self.s.grad_clip is not None and grad_norm is not None:
                row["clipped"] = float(grad_norm > self.s.grad_clip)
            if r.sources:
                for source, count in r.sources.items():
                    count = float(count)
                    self._sources[source] = self._sources.get(source, 0.0) + count
                    row[f"tokens/{source}"] = self._sources[source]
            if r.sample_ids is not None:
                ids = r.sample_ids.tolist() if hasattr(r.sample_ids, "tolist") else list(r.sample_ids)
                row["stream/repeat_rate"] = self._repeats.update(ids)
            if r.values:
                row.update(r.values)
            scale = row.get("signals/loss_scale")
            if scale is not None:
                # GradScaler lowers the scale exactly when it skips a step for inf/NaN gradients.
                if self._last_scale is not None and scale < self._last_scale:
                    self._skipped += 1
                self._last_scale = scale
                row["signals/skipped_steps"] = float(self._skipped)
            if self.s.full_signals and row.get("loss") is not None:
                self._losses.append(row["loss"])
                if len(self._losses) == self._losses.maxlen:
                    row["signals/loss_var"] = loss_variance(np.fromiter(self._losses, dtype=np.float64))
            self._at[r.step] = (self._tokens, wall)
            self._rows.append(row)
        eval_values = {name: float(t) for name, t in packet.eval_tensors.items()}  # host tensors: no device sync
        for step, metrics in packet.evals:
            self._record_evals(step, metrics, eval_values)
        if len(self._at) > 4096:
            for step in sorted(self._at)[:-1024]:
                del self._at[step]

    def _place(self, row: dict[str, Any], name: str, value: Any) -> None:
        if value is None:
            return
        if name.startswith("layers:"):
            key = name.removeprefix("layers:")
            for layer, v in zip(self.s.layer_names, value, strict=True):
                row[f"{key}/{layer}"] = v
        elif name.startswith("entropy:"):
            row[f"signals/act_entropy/{name.removeprefix('entropy:')}"] = value
        else:
            row[name] = value

    def _record_evals(self, step: int, metrics: dict[str, Any], tensors: dict[str, float]) -> None:
        tokens, wall = self._at.get(step, (None, None))
        name, version = self.s.portfolio
        for key, value in metrics.items():
            if isinstance(value, TensorRef):
                value = tensors[value.name]
            task, _, metric = key.rpartition("/")
            self._evals.append(EvalRecord(step=step, tokens=tokens, wall_s=wall, task=task, metric=metric,
                                          value=float(value) if value is not None else math.nan,
                                          portfolio=name, portfolio_version=version))
