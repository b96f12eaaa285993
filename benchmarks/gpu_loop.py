"""The training loop of the GPU check (`benchmarks/gpu_check.py`, parts 1, 2 and 4).

One small GPT in three copies made from one initialisation: untracked (`none`), handed to a `throughput` Tracker, and
to a `full` one. After a warm-up (compilation, the allocator, each Tracker's first packets) the three train in rounds
of one block each, the order rotated every round, each block timed from one device synchronisation to the next: the
whole-step cost of a Tracker is its block's time over the untracked block's of the same round, less 1 (median and
spread over rounds). The trackers' writer threads run throughout, so a writer's work spills into the next block, of
another copy: the rotation spreads it over all three.

During the rounds torch's sync debug mode is on ("warn", set after warm-up): every call that synchronises the host
with the device (`.item()`, a copy to the host, `torch.cuda.synchronize`, a copy from pageable host memory) becomes a
warning on the thread that made it, recorded with the block's copy, the thread and the call site (the innermost frame
of yieldgate when one is on the stack). The check's own synchronisations at block ends are made with the mode off.

Then the `throughput` copy trains alone for a contiguous stretch, timed the same way, for MFU (part 4): the Tracker's
figure for rows whose tokens/s window lies inside the stretch, beside the check's own from the stretch's time.
"""

from __future__ import annotations

import contextlib
import copy
import statistics
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import torch

import yieldgate
from yieldgate.ledger import Ledger
from yieldgate.probe.model import GPT, GPTConfig
from yieldgate.track import Tracker, TrackerConfig

ARMS = ("none", "throughput", "full")
PACKAGE = str(Path(yieldgate.__file__).resolve().parent)


@dataclass(frozen=True, kw_only=True)
class LoopShape:
    """The model, the batch and how long each phase runs."""

    gpt: GPTConfig
    rows: int
    """Sequences per microbatch."""
    micro: int
    """Microbatches per optimizer step (two or more: the gradient noise scale needs them)."""
    warmup: int
    """Steps each copy trains before anything is measured."""
    block: int
    """Steps per block."""
    rounds: int
    """Rounds of one block per copy."""
    contiguous: int
    """Steps of the throughput copy alone, for MFU."""

    @property
    def tokens(self) -> int:
        """Tokens per optimizer step."""
        return self.rows * self.micro * self.gpt.context


@dataclass
class Sync:
    """One synchronising call seen by torch's sync debug mode."""

    arm: str
    thread: str
    site: str
    ours: bool
    """A frame of yieldgate is on the stack: the Tracker made it."""


class SyncRecorder:
    """Records synchronising CUDA calls while on (`torch.cuda.set_sync_debug_mode("warn")`); `arm` names the copy
    whose block runs. Off a GPU it records nothing: there is no device to synchronise with."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.arm = "-"
        self.syncs: list[Sync] = []
        self._shown: Callable[..., None] = warnings.showwarning

    def _show(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        text = str(message)
        if "synchroniz" not in text:  # torch: "called a synchronizing CUDA operation"
            self._shown(message, category, filename, lineno, file, line)
            return
        stack = traceback.extract_stack()[:-1]
        ours = [f for f in stack if f.filename.startswith(PACKAGE)]
        frame = ours[-1] if ours else next((f for f in reversed(stack) if "warnings" not in f.filename), stack[-1])
        where = f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"
        self.syncs.append(Sync(arm=self.arm, thread=threading.current_thread().name, site=where, ours=bool(ours)))

    @contextlib.contextmanager
    def on(self) -> Iterator[None]:
        if not self.cuda:
            yield
            return
        self._shown = warnings.showwarning
        with warnings.catch_warnings():
            warnings.filterwarnings("always", message=".*synchroniz.*")
            warnings.showwarning = self._show
            torch.cuda.set_sync_debug_mode("warn")
            try:
                yield
            finally:
                torch.cuda.set_sync_debug_mode("default")

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The check's own synchronisations (block ends) are not counted."""
        if not self.cuda:
            yield
            return
        mode = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("default")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode(mode)

    def summary(self, blocks: int) -> dict[str, Any]:
        """Counts on the training side (the loop's thread and torch's autograd threads, where the Tracker's hooks run)
        per copy; the Tracker's own by call site, apart from those on its background threads (`yieldgate-writer`,
        `yieldgate-meta`), which wait for the device without holding up training."""
        background = [s for s in self.syncs if s.thread.startswith("yieldgate-")]
        training = [s for s in self.syncs if not s.thread.startswith("yieldgate-")]
        per_arm = {arm: sum(s.arm == arm for s in training) for arm in ARMS}
        return {
            "counted": self.cuda,
            "per_arm": per_arm,
            "per_block": {arm: n / max(blocks, 1) for arm, n in per_arm.items()},
            "added_by_tracker": {arm: per_arm[arm] - per_arm["none"] for arm in ARMS[1:]},
            "tracker_call_sites": _sites([s for s in training if s.ours]),
            "tracker_background_sites": _sites([s for s in background if s.ours]),
            "other_call_sites": _sites([s for s in self.syncs if not s.ours]),
        }


def _sites(syncs: list[Sync]) -> dict[str, int]:
    """How many syncs at each call site, by `site [thread]`."""
    out: dict[str, int] = {}
    for s in syncs:
        key = f"{s.site} [{s.thread}]"
        out[key] = out.get(key, 0) + 1
    return out


@dataclass
class Arm:
    name: str
    model: GPT
    forward: Callable[..., Any]
    opt: torch.optim.Optimizer
    tracker: Tracker | None
    steps: int = 0
    times: list[float] = field(default_factory=list)


def make_arms(
    shape: LoopShape, device: torch.device, *, backend: str | None, ledger: Path, tag: str, manifest: dict[str, Any]
) -> list[Arm]:
    """The three copies, compiled with `backend` (None: eager); a Tracker's run is `<tag>/<arm>`."""
    torch.manual_seed(0)
    base = GPT(shape.gpt).to(device)
    arms = []
    for name in ARMS:
        model = copy.deepcopy(base)  # the tied embedding stays tied: deepcopy keeps shared tensors shared
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=device.type == "cuda")
        tracker = None
        if name != "none":
            tracker = Tracker(
                f"{tag}/{name}",
                ledger=str(ledger),
                manifest=manifest,
                signals=name,  # type: ignore[arg-type]  # "throughput" or "full"
                model=model,
                optimizer=opt,
                config=TrackerConfig(),  # the default cadences: the overhead targets are for these
                suffix_if_taken=False,
            )
        forward = torch.compile(model, backend=backend) if backend else model
        arms.append(Arm(name, model, forward, opt, tracker))
    return arms


def train_step(arm: Arm, batch: torch.Tensor, shape: LoopShape, device: torch.device) -> None:
    """One optimizer step over `batch` (rows x micro, context + 1), bf16 autocast on a GPU; nothing read back."""
    arm.opt.zero_grad(set_to_none=True)
    total = torch.zeros((), device=device)
    for chunk in batch.chunk(shape.micro):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            _, loss = arm.forward(chunk[:, :-1], chunk[:, 1:])
        (loss / shape.micro).backward()
        total += loss.detach() / shape.micro
    norm = torch.nn.utils.clip_grad_norm_(arm.model.parameters(), 1.0)
    arm.opt.step()
    arm.steps += 1
    if arm.tracker is not None:
        arm.tracker.step(tokens=shape.tokens, samples=shape.rows * shape.micro, loss=total, grad_norm=norm)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(arm: Arm, data: torch.Tensor, steps: int, shape: LoopShape, device: torch.device, rec: SyncRecorder) -> float:
    """Seconds for `steps` steps, from one device synchronisation to the next (those two not counted as syncs)."""
    with rec.paused():
        _synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        train_step(arm, data[arm.steps % len(data)], shape, device)
    with rec.paused():
        _synchronize(device)
    return time.perf_counter() - start


def _graphs() -> int:
    """Graphs dynamo has compiled in this process so far (0 where torch._dynamo keeps no such count)."""
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])
    except (ImportError, KeyError, TypeError):
        return 0


def spread(values: list[float]) -> dict[str, float]:
    """Median, quartiles and range."""
    ordered = sorted(values)
    q = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
    return {"median": q[1], "q1": q[0], "q3": q[2], "min": ordered[0], "max": ordered[-1], "n": len(ordered)}


def run_variant(
    shape: LoopShape, device: torch.device, *, backend: str | None, ledger: Path, tag: str, manifest: dict[str, Any]
) -> dict[str, Any]:
    """Warm-up, interleaved rounds under the sync recorder, the contiguous stretch; the figures of parts 1, 2, 4."""
    gen = torch.Generator(device=device).manual_seed(0)
    data = torch.randint(
        0, shape.gpt.vocab_size, (4, shape.rows * shape.micro, shape.gpt.context + 1), generator=gen, device=device
    )
    arms = make_arms(shape, device, backend=backend, ledger=ledger, tag=tag, manifest=manifest)
    rec = SyncRecorder(device.type == "cuda")
    warm = {arm.name: timed(arm, data, shape.warmup, shape, device, rec) for arm in arms}
    graphs = _graphs()
    with rec.on():
        for r in range(shape.rounds):
            k = r % len(arms)
            for arm in arms[k:] + arms[:k]:
                rec.arm = arm.name
                arm.times.append(timed(arm, data, shape.block, shape, device, rec))
    recompiled = _graphs() - graphs
    first = arms[1].steps + 1  # the throughput copy's first step of the stretch
    stretch = timed(arms[1], data, shape.contiguous, shape, device, rec)
    params = {id(p): p.numel() for p in arms[1].model.parameters()}
    faults = {}
    for arm in arms:
        if arm.tracker is not None:
            arm.tracker.close()
            faults[arm.name] = arm.tracker.faults
    return {
        "compiled": backend,
        "warmup_s": warm,
        "graphs_compiled_while_measured": recompiled,
        "step_ms": {arm.name: spread([t * 1e3 / shape.block for t in arm.times]) for arm in arms},
        "overhead": {
            arm.name: spread([t / base - 1.0 for t, base in zip(arm.times, arms[0].times, strict=True)])
            for arm in arms[1:]
        },
        "syncs": rec.summary(shape.rounds),
        "tracker_faults": faults,
        "stretch": {
            "first_step": first,
            "steps": shape.contiguous,
            "seconds": stretch,
            "tokens": shape.tokens * shape.contiguous,
        },
        "params_unique": sum(params.values()),
        "params_position": arms[1].model.pos.weight.numel(),
        "tracked_rows": _rows(ledger, f"{tag}/throughput", first),
    }


def _rows(ledger: Path, run: str, first: int) -> dict[str, Any]:
    """The Tracker's MFU and tokens/s on the stretch's rows whose window lies inside it, and its MFU meta."""
    with Ledger(str(ledger), readonly=True) as led:
        steps = led.steps(run)
        meta = led.meta(run).get("mfu", {})
    window = TrackerConfig().throughput_window
    inside = steps[steps["step"] >= first + window]
    return {
        "rows": len(inside),
        "mfu_median": float(inside["mfu"].median()) if len(inside) else None,
        "tokens_per_s_median": float(inside["tokens_per_s"].median()) if len(inside) else None,
        "meta": meta,
    }
