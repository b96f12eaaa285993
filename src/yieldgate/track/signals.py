"""Learning signals, computed on the device without host syncs: per-layer gradient norms, update-to-weight
ratios, the gradient noise scale, activation entropy; and host-side loss variance.

Which failure each one reveals:
- per-layer gradient norms: exploding or vanishing layers, a damaged update (a spike in one layer first);
- update/weight ratio: a learning rate too high (ratios far above ~1e-3) or too low, a layer that stopped
  learning (ratio collapsing toward 0);
- gradient noise scale B_simple (McCandlish et al. 2018), in tokens (b and B are the tokens of a microbatch and of
  the step): the batch size beyond which more tokens per step buy little; a batch far above it wastes tokens; one
  falling over training is a heuristic early warning (its lead over the validation loss is measured by
  benchmarks/bench_diagnose.py, not assumed);
- activation entropy: the entropy of the softmax over a layer's output features, which is not scale-invariant: it
  falls when the activations concentrate in a few features and also when they merely grow in scale (the
  runaway activations of a too-high LR, Wortsman et al. 2023, lower it as a collapse does);
- loss scale and skipped steps: mixed-precision overflow, a loss scale collapsing;
- per-batch loss variance: a non-i.i.d. stream (workers not sharing the shuffle, source-ordered data).

Nothing here calls `.item()`, `.cpu()` or `.tolist()`: values stay device tensors until the Tracker moves
them to the host at log steps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.autograd.graph import register_multi_grad_hook

__all__ = [
    "ENTROPY_UNSEEN",
    "Busy",
    "FlopCount",
    "layer_groups",
    "GradientSignals",
    "GNSEstimate",
    "gns_estimate",
    "activation_entropy",
    "loss_variance",
]


class Busy:
    """Seconds spent in our hooks on the training thread: the Tracker's own cost, reported beside step time."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def layer_groups(model: nn.Module) -> tuple[list[str], list[nn.Parameter], list[int]]:
    """(layer names, trainable parameters, layer index of each parameter).

    A layer is a module path (`blocks.0.attn.qkv`): the parameter name without its last segment. A
    parameter shared by two modules (tied embeddings) is counted once, under its first name.
    """
    names: list[str] = []
    index: dict[str, int] = {}
    params: list[nn.Parameter] = []
    layer_of: list[int] = []
    seen: set[int] = set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        layer = name.rsplit(".", 1)[0] if "." in name else name
        if layer not in index:
            index[layer] = len(names)
            names.append(layer)
        params.append(p)
        layer_of.append(index[layer])
    return names, params, layer_of


@dataclass(frozen=True)
class GNSEstimate:
    """Unbiased estimates of |G|^2 and tr(Σ) from one step (McCandlish et al. 2018, appendix A)."""

    g2: torch.Tensor
    """|G|^2 per layer, then global (last entry)."""
    trace: torch.Tensor
    """tr(Σ) per layer, then global (last entry), in the unit of b and B."""


def gns_estimate(small_sq: torch.Tensor, big_sq: torch.Tensor, b: float, big_b: float) -> GNSEstimate:
    """From squared gradient norms at two batch sizes b < B:

    |G|^2 ≈ (B|g_B|^2 − b|g_b|^2)/(B − b),   tr(Σ) ≈ (|g_b|^2 − |g_B|^2)/(1/b − 1/B).
    """
    if not big_b > b > 0:
        raise ValueError(f"need 0 < b < B, got b={b}, B={big_b}")
    g2 = (big_b * big_sq - b * small_sq) / (big_b - b)
    trace = (small_sq - big_sq) / (1.0 / b - 1.0 / big_b)
    return GNSEstimate(g2=g2, trace=trace)


@dataclass
class _StepState:
    small: list[torch.Tensor] = field(default_factory=list)
    microbatches: int = 0
    big: torch.Tensor | None = None
    update_ratio: torch.Tensor | None = None
    before: list[torch.Tensor] | None = None
    optimizer_steps: int = 0


class GradientSignals:
    """Hooks that measure gradients without an extra forward or backward pass.

    - one multi-gradient hook per backward pass sees the microbatch's own gradients, before they are
      accumulated into `.grad` (with DDP, the local gradients before the all-reduce): the small-batch squared
      norms |g_b|^2 per layer, all parameters in one fused norm;
    - an optimizer pre-step hook reads the accumulated (and all-reduced) gradient: |g_B|^2 per layer, and
      on update-ratio steps snapshots the weights; a post-step hook measures |ΔW| / |W| per layer.

    The optimizer sees clipped gradients; `collect(grad_norm=...)` undoes the clipping with the pre-clip
    global norm (clipping scales every gradient by one factor), so norms and GNS use pre-clipping values.
    `loss_scale()` returns the current mixed-precision scale tensor (or None), to unscale hook gradients.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer | None,
        *,
        loss_averaged: bool = True,
        loss_scale: Callable[[], torch.Tensor | None] = lambda: None,
        busy: Busy | None = None,
        sampled_microbatches: int = 1 << 30,
    ) -> None:
        self.names, self.params, self.layer_of = layer_groups(model)
        self.busy = busy or Busy()
        self.sampled_microbatches = sampled_microbatches
        """Microbatches per step whose norms are measured (the rest are only counted): each is an unbiased
        sample of E|g_b|^2; measuring fewer costs less and gives a noisier estimate."""
        self.loss_averaged = loss_averaged
        self.loss_scale = loss_scale
        self._state = _StepState()
        self._want_update_ratio = False
        self.layers_due = True
        """Measure |g_B|^2 per layer at the next optimizer step."""
        self.small_due = True
        """Measure the microbatches' |g_b|^2 in the next step's backward passes (off it they are only counted)."""
        self.total_from_norm = False
        """The caller passes the pre-clip global norm: off-cadence steps take |g_B|^2 from it, no gradient pass."""
        device = self.params[0].device if self.params else torch.device("cpu")
        self._layer_index = torch.tensor(self.layer_of, device=device)
        self._zero = torch.zeros((), device=device)
        self._handles: list[Any] = []
        if self.params:
            self._handles.append(register_multi_grad_hook(self.params, self.busy.wrap(self._on_backward), mode="all"))
        if optimizer is not None:
            self._handles.append(optimizer.register_step_pre_hook(self.busy.wrap(self._pre_step)))
            self._handles.append(optimizer.register_step_post_hook(self.busy.wrap(self._post_step)))

    def _layer_sq(self, tensors: Sequence[torch.Tensor | None]) -> torch.Tensor:
        """Squared norms per layer of one tensor per parameter (None: absent, as a parameter the step did not use), in
        one fused pass. An absent one adds a zero held on the device: picking the present ones' layers by a list of
        indices made an index tensor from host memory, a host-to-device copy that synchronises on a GPU."""
        out = torch.zeros(len(self.names), device=self._layer_index.device)
        if tensors:
            norms = torch._foreach_norm([t.detach() if t is not None else self._zero for t in tensors])
            out.index_add_(0, self._layer_index, torch.stack(norms).float().square())
        return out

    def _on_backward(self, grads: tuple[torch.Tensor | None, ...]) -> None:
        self._state.microbatches += 1
        if not self.small_due or len(self._state.small) >= self.sampled_microbatches:
            return  # counted, not measured: each microbatch is an unbiased sample of E|g_b|^2
        sq = self._layer_sq(list(grads))
        scale = self.loss_scale()
        if scale is not None:
            sq = sq / scale.float().square()
        self._state.small.append(sq)

    def want_update_ratio(self, flag: bool) -> None:
        """Measure |ΔW| / |W| at the next optimizer step (a weight snapshot costs one copy of the weights)."""
        self._want_update_ratio = flag

    def _pre_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        # |g_B|^2 is read on layer steps, and on GNS steps unless the loop passes the pre-clip norm (it is then that
        # norm squared): between them nothing needs the pass over the gradients.
        if self.layers_due or (self.small_due and not self.total_from_norm):
            self._state.big = self._layer_sq([p.grad for p in self.params])
        self._state.optimizer_steps += 1
        if self._want_update_ratio:
            self._state.before = [p.detach().clone() for p in self.params]

    def _post_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        before = self._state.before
        if before is None:
            return
        delta = self._layer_sq(torch._foreach_sub([p.detach() for p in self.params], before))
        weight = self._layer_sq(before)
        self._state.update_ratio = delta.sqrt() / weight.sqrt().clamp_min(1e-30)
        self._state.before = None

    def collect(self, grad_norm: torch.Tensor | float | None = None) -> dict[str, Any]:
        """End of an optimizer step: per-layer tensors, and reset for the next step.

        Returns `microbatches` (int), `small_sq` (mean |g_b|^2 per layer, or None), `big_sq` (|g_B|^2 per
        layer, pre-clip, or None: not a layer step, or no optimizer step ran, as in a skipped mixed-precision
        step), `big_total` (|g_B|^2 of all layers, or None), `update_ratio` (or None), `skipped` (bool).
        """
        st, self._state = self._state, _StepState()
        k = st.microbatches
        out: dict[str, Any] = {
            "microbatches": k,
            "small_sq": None,
            "big_sq": None,
            "big_total": None,
            "update_ratio": st.update_ratio,
            "skipped": st.optimizer_steps == 0,
        }
        big = st.big
        pre = None
        if isinstance(grad_norm, torch.Tensor) and st.optimizer_steps:
            pre = grad_norm.detach().to(device=self._layer_index.device, dtype=torch.float32).square()
        elif grad_norm is not None and st.optimizer_steps:
            # A host number is filled in on the device by a kernel: made into a tensor in host memory and copied, it
            # would synchronise the training thread with the GPU at every step.
            pre = torch.full((), float(grad_norm) ** 2, device=self._layer_index.device)
        if big is not None and pre is not None:
            # Clipping scaled every gradient by one factor c = post/pre: undo it with the pre-clip norm.
            post = big.sum()
            big = big * torch.where(post > 0, pre / post.clamp_min(1e-30), torch.ones_like(post))
        total = big.sum() if big is not None else pre
        if not self.loss_averaged and k >= 1:
            # Loss summed over microbatches: the accumulated gradient is the sum of k microbatch gradients, k·g_B,
            # so its squared norm (and the pre-clip norm passed in) is k^2 |g_B|^2: divide it back.
            big = None if big is None else big / float(k * k)
            total = None if total is None else total / float(k * k)
        out["big_sq"] = big
        out["big_total"] = total
        if k >= 1 and st.small:
            # A microbatch's loss divided by k makes its gradient g_b / k: scale the squares back by k^2.
            factor = float(k * k) if self.loss_averaged else 1.0
            out["small_sq"] = torch.stack(st.small).mean(0) * factor  # mean over the measured microbatches
        return out

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()


ENTROPY_UNSEEN = (
    "the sampled layers' forward hooks did not run in the step (a model compiled with torch.compile runs no hook "
    "added after it compiled), or their outputs are not floating-point tensors"
)
"""Why a run records no activation entropy when a sampled step saw none: torch.compile runs the module hooks that
were there when it compiled and no others (dynamo does not guard on them), so the entropy hooks, added for one step
in `entropy_every`, are never called on a compiled model."""


def _entropy_hook(store: list[torch.Tensor]) -> Callable[..., None]:
    def hook(module: nn.Module, args: Any, output: Any) -> None:
        out = output[0] if isinstance(output, tuple) else output
        if not isinstance(out, torch.Tensor) or out.dim() < 2 or not out.is_floating_point():
            return
        with torch.no_grad():
            logp = torch.log_softmax(out.detach().float(), dim=-1)  # (..., features)
            store.append(-(logp.exp() * logp).sum(-1).mean())

    return hook


@contextmanager
def activation_entropy(
    modules: dict[str, nn.Module], busy: Busy | None = None
) -> Iterator[dict[str, list[torch.Tensor]]]:
    """Forward hooks that record, for each module, the mean over positions of the entropy (nats) of the softmax
    over its output features, H = -sum_i p_i ln p_i with p = softmax(h) for each output vector h (..., features);
    removed on exit. It lies between 0 and ln(features) (all features equal).

    What it tracks, exactly: how peaked softmax(h) is, which depends on the scale of h as well as on its shape.
    It is not scale-invariant: h multiplied by c > 1 lowers it (a residual stream with small values reads near
    ln(features) whatever its shape). So it falls both when a layer's output concentrates in a few features and
    when the outputs grow large, as under a too-high LR (the `lr_too_high` detector reads a collapse below 25% of
    ln(width) together with a stalled loss); a fall alone does not say which of the two happened."""
    busy = busy or Busy()
    stores: dict[str, list[torch.Tensor]] = {name: [] for name in modules}
    handles = [m.register_forward_hook(busy.wrap(_entropy_hook(stores[name]))) for name, m in modules.items()]
    try:
        yield stores
    finally:
        for h in handles:
            h.remove()


def sample_layers(model: nn.Module, count: int) -> dict[str, nn.Module]:
    """Up to `count` layers, evenly spread: the blocks of the first ModuleList, else leaf modules."""
    blocks = next((m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m) > 0), None)
    if blocks is not None:
        prefix = next(name for name, m in model.named_modules() if m is blocks)
        candidates = [(f"{prefix}.{i}", m) for i, m in enumerate(blocks)]
    else:
        candidates = [(n, m) for n, m in model.named_modules() if n and not list(m.children())]
    if not candidates:
        return {}
    picks = np.unique(np.linspace(0, len(candidates) - 1, num=min(count, len(candidates))).round().astype(int))
    return dict(candidates[i] for i in picks)


class FlopCount:
    """Training FLOPs per token of a model no formula describes, counted once with `torch.utils.flop_counter`.

    The count spans one whole step of the loop: `Tracker.step` arms it at one step's end and reads it at the
    next one's, so the forward and backward passes of every microbatch in between run under the counter (slower,
    that once: the dispatch mode sees each operator) and nothing is added to any other step. The counter sees
    matmuls and convolutions, which is what model FLOPs count. A step that also ran an evaluation (`spoil`) is
    counted again at the next step; a count of zero (a compiled model, whose kernels the counter cannot see) is
    an answer too: the FLOPs stay unknown.
    """

    def __init__(self) -> None:
        self._mode: Any = None
        self._spoilt = False

    def spoil(self) -> None:
        """An evaluation ran inside the counted step: its FLOPs are not the step's."""
        self._spoilt = True

    def step(self, tokens: float) -> float | None:
        """At a step's end: the FLOPs per token of the step just ended when one was counted, else None (counting
        starts now, for the next step)."""
        from torch.utils.flop_counter import FlopCounterMode

        counted = None
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)
            if not self._spoilt:
                counted = mode.get_total_flops() / tokens if tokens > 0 else 0.0
        if counted is None:
            self._spoilt = False
            self._mode = FlopCounterMode(display=False)
            self._mode.__enter__()
        return counted

    def close(self) -> None:
        """Leave the counter if a step is still under it (the run ended first)."""
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)


def loss_variance(losses: np.ndarray) -> float:
    """Per-batch loss variance over a window, with the slow trend removed: var(diff(loss)) / 2.

    For i.i.d. batches around a smooth curve, consecutive differences carry twice the batch noise; a stream
    whose batches are not i.i.d. (source-ordered, workers not sharing the shuffle) shows far more.
    """
    finite = losses[np.isfinite(losses)]
    if len(finite) < 3:
        return math.nan
    return float(np.var(np.diff(finite)) / 2.0)
