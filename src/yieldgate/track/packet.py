"""What the training thread hands the writer: a `Packet` of steps, their host rows and device tensors by typed slot.

The training thread holds its values in `Pending` between packets: host rows (`StepRow`), device tensors kept in
one of three slots (a step value by its key, a per-layer signal by its key, an activation entropy by its layer),
optimizer timers (`Timer`) and evals. Every few steps `Pending.take()` empties it into a `Packet`, starting one
non-blocking host copy per stacked tensor; the writer waits for the copies on its own thread. No slot is told
apart by a name prefix: the writer reads each by its field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Packet", "Pending", "Stacked", "StepRow", "TensorRef", "Timer"]


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
    """Tokens per source since the Tracker started (running totals), for the sources this step drew from."""
    sample_ids: Any = None
    values: dict[str, float] | None = None
    """Host values given as plain numbers (loss, grad_norm, user extras), by canonical key."""
    rebase: bool = False
    """The first step of a resumed run, numbered by the loop: the run resumes after the stored record before it."""
    tokens_total: float = 0.0
    """Tokens since the Tracker started, through this step (this rank): the training thread's running total."""
    samples_total: float = 0.0
    """Samples likewise."""


@dataclass(frozen=True, slots=True)
class Timer:
    """A span timed on the training thread for the record of row `row` (of its packet) under `key`: two CUDA
    events on a GPU (read once both have run, on the writer thread), else two `time.perf_counter()` readings."""

    row: int
    key: str
    start: Any
    end: Any

    def seconds(self) -> Any:
        """The span in seconds. CUDA events: the writer calls this after the packet's event has completed."""
        if hasattr(self.start, "elapsed_time"):
            return self.start.elapsed_time(self.end) / 1e3  # elapsed_time is in milliseconds
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class TensorRef:
    """An eval value that is a device tensor: entry `index` of its packet's `eval_tensors`."""

    index: int


@dataclass(slots=True)
class Stacked:
    """The values of one key on the steps that have it: `values`' first axis follows `rows` (indices into the
    packet's rows); a step value is [rows], a per-layer signal [rows, layers] in the writer's layer order."""

    rows: list[int]
    values: torch.Tensor


@dataclass
class Packet:
    """Steps handed from the training thread: host rows, and device tensors being copied to the host.

    `event` completes when the copies have landed (CUDA), else None."""

    rows: list[StepRow]
    steps: dict[str, Stacked] = field(default_factory=dict)
    """Step values by canonical key (`loss`, `grad_norm`, `signals/gns`, extras given as tensors)."""
    layers: dict[str, Stacked] = field(default_factory=dict)
    """Per-layer signals by key (`signals/grad_norm`): one value per layer of the model, in order."""
    entropy: dict[str, Stacked] = field(default_factory=dict)
    """Activation entropy by sampled layer name."""
    timers: list[Timer] = field(default_factory=list)
    evals: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    """(step, {`<task>/<metric>`: a number or a `TensorRef`}) per `Tracker.eval` call."""
    eval_tensors: torch.Tensor | None = None
    """The evals' tensor values, stacked: [refs]."""
    event: Any = None


def _keep(slot: dict[str, tuple[list[int], list[torch.Tensor]]], key: str, row: int, value: torch.Tensor) -> None:
    kept = slot.get(key)
    if kept is None:
        kept = slot[key] = ([], [])
    kept[0].append(row)
    kept[1].append(value.detach())


def _to_host(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to("cpu", non_blocking=True) if tensor.device.type == "cuda" else tensor


class Pending:
    """What the training thread holds between packets. Device tensors are only held here (detached), never
    read: `take` starts their copies to the host without waiting for them."""

    def __init__(self) -> None:
        self._empty()

    def _empty(self) -> None:
        self.rows: list[StepRow] = []
        self.steps: dict[str, tuple[list[int], list[torch.Tensor]]] = {}
        self.layers: dict[str, tuple[list[int], list[torch.Tensor]]] = {}
        self.entropy: dict[str, tuple[list[int], list[torch.Tensor]]] = {}
        self.timers: list[Timer] = []
        self.evals: list[tuple[int, dict[str, Any]]] = []
        self.eval_tensors: list[torch.Tensor] = []

    def keep_step(self, key: str, row: int, value: torch.Tensor) -> None:
        """Hold a step value (a 0-d tensor) for row `row` under its canonical key."""
        _keep(self.steps, key, row, value)

    def keep_layers(self, key: str, row: int, value: torch.Tensor) -> None:
        """Hold a per-layer signal ([layers], in the writer's layer order) for row `row` under its key."""
        _keep(self.layers, key, row, value)

    def keep_entropy(self, layer: str, row: int, value: torch.Tensor) -> None:
        """Hold the activation entropy of a sampled layer (a 0-d tensor) for row `row`."""
        _keep(self.entropy, layer, row, value)

    def eval_value(self, value: torch.Tensor) -> TensorRef:
        """Hold an eval's tensor value; the packet carries it as a `TensorRef`."""
        self.eval_tensors.append(value.detach().float().reshape(()))
        return TensorRef(len(self.eval_tensors) - 1)

    def take(self, *, cuda: bool) -> Packet:
        """Empty into a packet, starting the host copy of every stacked tensor (non-blocking: the writer thread
        waits for them, the training thread never does)."""

        def stacked(slot: dict[str, tuple[list[int], list[torch.Tensor]]]) -> dict[str, Stacked]:
            return {key: Stacked(rows, _to_host(torch.stack(values))) for key, (rows, values) in slot.items()}

        packet = Packet(
            rows=self.rows,
            steps=stacked(self.steps),
            layers=stacked(self.layers),
            entropy=stacked(self.entropy),
            timers=self.timers,
            evals=self.evals,
            eval_tensors=_to_host(torch.stack(self.eval_tensors)) if self.eval_tensors else None,
        )
        if cuda and (packet.steps or packet.layers or packet.entropy or packet.eval_tensors is not None):
            packet.event = torch.cuda.Event()
            packet.event.record()
        self._empty()
        return packet
