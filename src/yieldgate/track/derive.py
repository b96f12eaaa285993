"""The writer's pure part: a packet of steps -> the columns of their step records.

Tokens and samples continue the run's stored counters; tokens/s comes from a window of cumulative counters
(`throughput.Throughput`), MFU from that rate, cost from wall time; `clipped` from the pre-clip gradient norm and
the manifest's threshold, `signals/skipped_steps` from GradScaler's scale drops, `signals/loss_var` from a window of
losses, `stream/repeat_rate` from the samples' ids; shipped tensors spread into columns by slot. No thread, no
ledger, no device: `Derivation` holds the windows that span packets and is driven by the writer's thread (or a
test) one packet at a time.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from yieldgate.data.stream import RepeatCounter
from yieldgate.errors import InputError
from yieldgate.ledger import EvalRecord
from yieldgate.manifest import Manifest
from yieldgate.names import key_problem
from yieldgate.track.config import TrackerConfig
from yieldgate.track.packet import Packet, Stacked, StepRow, TensorRef
from yieldgate.track.signals import loss_variance
from yieldgate.track.throughput import Throughput

__all__ = ["Derivation", "Frame", "Start", "clipped", "cost_usd", "counters", "joined", "totals"]

AT_KEPT = 4096
"""Steps whose (tokens, wall) an eval may still name; past it, all but the last 1024 are forgotten."""


@dataclass(frozen=True, slots=True)
class Start:
    """Where a run's counters start: the stored record it continues from (a new run: all zero)."""

    step: int = 0
    tokens: float = 0.0
    samples: float = 0.0
    wall_s: float = 0.0


class Frame:
    """Step records of one packet in column form: per key, one value per step (None: not recorded).

    Plain lists, turned into arrays once per flush (`joined`): a packet holds ~10 steps, and at that size
    numpy's per-call cost (with caches cold after a second asleep) outweighs the work."""

    def __init__(self, steps: list[int]) -> None:
        self.steps = steps
        self.n = len(steps)
        self.columns: dict[str, list[float | None]] = {}
        self.layers: dict[str, list[float | None]] = {}
        """Per-layer signals (one key per layer and signal): the writer writes them less often than the rest."""

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

    def held(self) -> Frame | None:
        """The per-layer columns alone, on the steps that have them (one in `layer_every`), or None."""
        rows = [i for i in range(self.n) if any(column[i] is not None for column in self.layers.values())]
        if not rows:
            return None
        out = Frame([self.steps[i] for i in rows])
        out.columns = {key: [column[i] for i in rows] for key, column in self.layers.items()}
        return out


def joined(frames: list[Frame]) -> dict[str, Any]:
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


def counters(rows: list[StepRow]) -> np.ndarray:
    """This rank's counters of a packet, [fields, rows]: tokens and samples of each step, its seconds, and the
    running totals of tokens and samples. Distributed runs all-gather this array (`totals`)."""
    return np.array(
        [
            [r.tokens for r in rows],
            [r.samples for r in rows],
            [r.step_s for r in rows],
            [r.tokens_total for r in rows],
            [r.samples_total for r in rows],
        ],
        dtype=np.float64,
    ).reshape(5, len(rows))


def totals(local: np.ndarray, gathered: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Running totals of tokens and samples per step (summed over ranks when `gathered`, [ranks, fields, rows],
    is given), and the spread of the ranks' tokens/s and step time."""
    if gathered is None:
        return local[3], local[4], {}
    rates = gathered[:, 0] / np.maximum(gathered[:, 2], 1e-12)  # per-rank tokens/s of each step
    spread = {
        "dist/tokens_per_s/min": rates.min(0),
        "dist/tokens_per_s/max": rates.max(0),
        "dist/step_s/max": gathered[:, 2].max(0),
    }
    return gathered[:, 3].sum(0), gathered[:, 4].sum(0), spread


def clipped(given: list[float | None], grad_norm: list[float | None], clip: float | None) -> list[float | None]:
    """Given per step, or else known from the pre-clip gradient norm and the manifest's clip threshold."""
    out = list(given)
    if clip is not None:
        for i, g in enumerate(grad_norm):
            if out[i] is None and g is not None and not math.isnan(g):
                out[i] = float(g > clip)
    return out


def cost_usd(wall: list[float], devices: int, price_per_device_hour: float) -> list[float]:
    """What the run has cost by each step: its wall time on all its devices at the manifest's hourly price."""
    return [w / 3600.0 * devices * price_per_device_hour for w in wall]


class Derivation:
    """The derived columns of one run, packet after packet: the windows that span packets (tokens/s, loss
    variance, repeated samples, GradScaler's last scale) and each recent step's tokens and wall time, for evals.

    `mfu` turns a tokens/s rate into MFU (None where it would mislead); `on_fault` hears of a step value key that
    may not be stored (reported once per key, its values left out)."""

    def __init__(
        self,
        config: TrackerConfig,
        *,
        start: Start,
        t0: float,
        manifest: Manifest | None = None,
        world: int = 1,
        layer_names: tuple[str, ...] = (),
        full_signals: bool = False,
        mfu: Callable[[float], float | None] = lambda rate: None,
        on_fault: Callable[[str, BaseException], None],
    ) -> None:
        hw = manifest.hardware if manifest else None
        self.start = start
        self.t0 = t0
        """The training thread's `perf_counter()` at wall time `start.wall_s`."""
        self.grad_clip = manifest.optimisation.grad_clip if manifest and manifest.optimisation else None
        self.price_per_device_hour = hw.price_per_device_hour if hw else None
        self.devices = hw.device_count if hw and hw.device_count > 1 else world
        self.portfolio = (manifest.evals.name, manifest.evals.version) if manifest and manifest.evals else ("", "")
        self.layer_names = layer_names
        self.full_signals = full_signals
        self.mfu = mfu
        self.on_fault = on_fault
        self._tokens, self._samples = start.tokens, start.samples
        self._throughput = Throughput(window=config.throughput_window, skip=config.throughput_skip)
        self._losses: deque[float] = deque(maxlen=config.loss_var_window)
        self._repeats = RepeatCounter(config.repeat_window)
        self._last_scale: float | None = None
        self._skipped = 0
        self._at: dict[int, tuple[float, float]] = {start.step: (start.tokens, start.wall_s)}
        """Tokens and wall time at each recent step, for evals; the run's starting point is known exactly."""
        self._keys: dict[str, bool] = {}
        """Step value keys seen, and whether each may be stored (checked once per key)."""

    @property
    def last_step(self) -> int:
        """The last step derived (or the run's starting step)."""
        return max(self._at)

    def rebase(self, step: int, tokens: float, samples: float) -> None:
        """Counters continue from `step`'s stored record (a resume that set apart the records after it)."""
        self._tokens, self._samples = tokens, samples
        self._at = {step: (tokens, self.start.wall_s)}

    def frame(
        self, packet: Packet, step_s: list[float], tokens: list[float], samples: list[float], spread: dict[str, Any]
    ) -> Frame:
        """The step records of a packet's rows. `tokens` and `samples` are the running totals since the Tracker
        started (over all ranks), `step_s` this rank's step times, `spread` the ranks' spread (`totals`)."""
        rows = packet.rows
        frame = Frame([r.step for r in rows])
        tok, smp, wall, rate = [], [], [], []
        for r, k, m in zip(rows, tokens, samples, strict=True):
            t = self.start.wall_s + (r.t_end - self.t0)
            self._throughput.update(time=t, tokens=self._tokens + k, samples=self._samples + m)
            tok.append(self._tokens + k)
            smp.append(self._samples + m)
            wall.append(t)
            rate.append(self._throughput.compute().get("tokens_per_s"))
        frame.put("tokens", tok)
        frame.put("samples", smp)
        frame.put("wall_s", wall)
        frame.put("step_s", step_s)
        frame.put("data_wait_s", [r.data_wait_s for r in rows])
        frame.put("lr", [r.lr for r in rows])
        frame.put("tokens_per_s", rate)
        frame.put("mfu", [None if x is None else self.mfu(x) for x in rate])
        if self.price_per_device_hour is not None:
            frame.put("cost_usd", cost_usd(wall, self.devices, self.price_per_device_hour))
        self._place(frame, packet)
        for timer in packet.timers:
            frame.set(timer.key, timer.row, timer.seconds())
        for name, column in spread.items():
            frame.put(name, column)
        self._host_values(frame, rows)
        frame.put("clipped", clipped([r.clipped for r in rows], frame.get("grad_norm"), self.grad_clip))
        self._skipped_steps(frame)
        if self.full_signals:
            self._loss_variance(frame)
        self._at.update(zip(frame.steps, zip(tok, wall, strict=True), strict=True))
        return frame

    def _host_values(self, frame: Frame, rows: list[StepRow]) -> None:
        """The rows' host values, per-source token totals and repeat rate."""
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

    def _skipped_steps(self, frame: Frame) -> None:
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

    def _loss_variance(self, frame: Frame) -> None:
        for i, value in enumerate(frame.columns.get("loss", ())):
            if value is None:
                continue  # no loss at this step; a NaN loss is recorded, and counts
            self._losses.append(float(value))
            if len(self._losses) == self._losses.maxlen:
                frame.set("signals/loss_var", i, loss_variance(np.fromiter(self._losses, dtype=np.float64)))

    def _place(self, frame: Frame, packet: Packet) -> None:
        """Spread the packet's shipped tensors into the frame's columns, slot by slot: step values by key,
        per-layer signals ([rows, layers]) as `<key>/<layer>`, activation entropy as `signals/act_entropy/<layer>`."""
        for key, stacked in packet.steps.items():
            if self._key_ok(key):
                frame.columns[key] = _scatter(frame, stacked)
        for key, stacked in packet.layers.items():
            per_row = stacked.values.float().tolist()
            for j, layer in enumerate(self.layer_names):
                frame.layers[f"{key}/{layer}"] = _scatter(frame, stacked, [row[j] for row in per_row])
        for layer, stacked in packet.entropy.items():
            frame.layers[f"signals/act_entropy/{layer}"] = _scatter(frame, stacked)

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

    def evals(self, packet: Packet) -> list[EvalRecord]:
        """The packet's evals as records, each at its step's tokens and wall time (None when that step is not
        among the recent ones). Call after `frame`, which records the packet's steps."""
        # Host tensors (the packet's event has completed): no device sync.
        tensors = packet.eval_tensors.tolist() if packet.eval_tensors is not None else []
        name, version = self.portfolio
        out = []
        for step, metrics in packet.evals:
            tokens, wall = self._at.get(step, (None, None))
            for key, value in metrics.items():
                if isinstance(value, TensorRef):
                    value = tensors[value.index]
                task, _, metric = key.rpartition("/")
                out.append(
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
        if len(self._at) > AT_KEPT:
            for step in sorted(self._at)[:-1024]:
                del self._at[step]
        return out


def _scatter(frame: Frame, stacked: Stacked, values: list[Any] | None = None) -> list[float | None]:
    """One column of the frame from a stacked tensor's rows (or `values` read from it)."""
    column: list[float | None] = [None] * frame.n
    for i, v in zip(stacked.rows, stacked.values.float().tolist() if values is None else values, strict=True):
        column[i] = v[0] if isinstance(v, list) else v  # a [1]-shaped value per step comes as [x]
    return column
