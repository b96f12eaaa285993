"""The small-batch baseline check: did a throughput change (bigger batch, accumulation, lower precision)
alter what the optimiser learns per token?

From one starting state, the small-batch baseline and the candidate configuration are trained for the same
number of tokens over several seeds, and their learning per token (held-out loss decrease / tokens) is
compared against the seed noise floor. A candidate that loses more than `threshold` (15%) of the baseline's
learning per token, with the 95% paired t-interval of the difference (`analysis.stats`) below 0, has altered
learning.

Raw gradient norms are reported beside it with their noise correction: E|g_b|^2 = |G|^2 + tr(Σ)/b, so a
smaller batch shows a larger raw norm from noise alone (McCandlish et al. 2018); |G|^2 and tr(Σ) come from
the two batch sizes with the estimator of `signals.gns_estimate`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from yieldgate.analysis import stats
from yieldgate.errors import InputError
from yieldgate.track.signals import gns_estimate

__all__ = ["BatchConfig", "BatchCheckResult", "batch_size_check"]

Sample = Callable[[np.random.Generator, int], tuple[torch.Tensor, torch.Tensor]]
LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True, kw_only=True)
class BatchConfig:
    """One training configuration of the check."""

    batch_size: int
    """Sequences per optimizer step (all microbatches together)."""
    accumulation: int = 1
    """Microbatches per optimizer step."""
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    """Autocast precision of the forward pass."""
    lr: float | None = None
    """Learning rate; None: the check's `lr`."""

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.accumulation < 1 or self.batch_size % self.accumulation:
            raise InputError(
                f"BatchConfig.batch_size ({self.batch_size}) must be a positive multiple of "
                f"accumulation ({self.accumulation})"
            )


@dataclass(frozen=True)
class BatchCheckResult:
    """What the check measured; `altered` is the verdict."""

    tokens: int
    baseline_learning_per_token: float
    candidate_learning_per_token: float
    baseline_learning: list[float]
    candidate_learning: list[float]
    relative_loss: float
    """1 - candidate / baseline learning per token (0.2: the candidate learns 20% less per token)."""
    standard_error: float
    """Standard error of the paired difference in learning per token, from the seeds."""
    altered: bool
    grad_norms: dict[str, float]
    verdict: str


def _train(
    model: nn.Module,
    cfg: BatchConfig,
    make_optimizer: Callable[..., torch.optim.Optimizer],
    lr: float,
    sample: Sample,
    loss_fn: LossFn,
    tokens: int,
    seq_tokens: int,
    seed: int,
) -> int:
    """Train `model` in place for at least `tokens` tokens; return the tokens it saw."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = make_optimizer(model.parameters(), lr)
    device = next(model.parameters()).device.type
    scaler = torch.amp.GradScaler(device) if cfg.precision == "fp16" else None
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.precision)
    micro = cfg.batch_size // cfg.accumulation
    steps = math.ceil(tokens / (cfg.batch_size * seq_tokens))
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        for _ in range(cfg.accumulation):
            x, y = sample(rng, micro)
            with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
                loss = loss_fn(model, x, y) / cfg.accumulation
            (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
    return steps * cfg.batch_size * seq_tokens


def _mean_sq_grad(
    model: nn.Module, sample: Sample, loss_fn: LossFn, n: int, draws: int, rng: np.random.Generator
) -> float:
    total = 0.0
    for _ in range(draws):
        model.zero_grad(set_to_none=True)
        x, y = sample(rng, n)
        loss_fn(model, x, y).backward()
        total += sum(float(p.grad.float().square().sum()) for p in model.parameters() if p.grad is not None)
    model.zero_grad(set_to_none=True)
    return total / draws


def batch_size_check(
    model: nn.Module,
    *,
    make_optimizer: Callable[[Iterable[nn.Parameter], float], torch.optim.Optimizer],
    sample: Sample,
    loss_fn: LossFn,
    eval_batch: tuple[torch.Tensor, torch.Tensor],
    baseline: BatchConfig,
    candidate: BatchConfig,
    tokens: int,
    lr: float,
    seeds: int = 3,
    threshold: float = 0.15,
    grad_draws: int = 8,
    level: float = 0.95,
    progress: Callable[[int, int], None] | None = None,
) -> BatchCheckResult:
    """Run the check from `model`'s current state (the model itself is not changed).

    `sample(rng, n)` draws n training sequences (inputs, targets); `loss_fn(model, x, y)` is the mean loss;
    `eval_batch` is a fixed held-out batch, the same for every run. `level`: of the paired interval of the
    difference in learning per token (`stats.difference`) that must exclude 0 for `altered`. `progress(done,
    total)` is called after each of the 2 x `seeds` trainings.
    """
    if seeds < 2:
        raise InputError(f"batch_size_check needs seeds >= 2 for a noise floor, got {seeds}")
    if tokens < 1:
        raise InputError(f"batch_size_check needs tokens >= 1, got {tokens}")
    seq_tokens = int(eval_batch[1][0].numel())

    def held_out(m: nn.Module) -> float:
        with torch.no_grad():
            return float(loss_fn(m, *eval_batch))

    start = held_out(model)
    learned: dict[str, list[float]] = {"baseline": [], "candidate": []}
    seen: dict[str, int] = {}
    for seed in range(seeds):
        for name, cfg in (("baseline", baseline), ("candidate", candidate)):
            trial = copy.deepcopy(model)
            seen[name] = _train(trial, cfg, make_optimizer, cfg.lr or lr, sample, loss_fn, tokens, seq_tokens, seed)
            learned[name].append(start - held_out(trial))
            if progress is not None:
                progress(sum(map(len, learned.values())), 2 * seeds)
    per_token = {k: np.array(v) / seen[k] for k, v in learned.items()}
    for name, values in per_token.items():
        diverged = int((~np.isfinite(values)).sum())
        if diverged:  # a NaN would turn every figure below into NaN, and the verdict into "within noise"
            raise InputError(
                f"batch_size_check: the {name}'s held-out loss is not finite after training in "
                f"{diverged} of {seeds} seeds (training diverged): lower its lr"
            )
    base, cand = per_token["baseline"].mean(), per_token["candidate"].mean()
    # Paired by seed: seed k trains both configurations from the same state on the same draws.
    iv = stats.difference(per_token["baseline"], per_token["candidate"], level, paired=True)
    assert iv is not None and iv.dof is not None  # paired over seeds >= 2, every value finite
    relative = 1.0 - cand / base if base > 0 else math.nan
    altered = bool(relative > threshold and iv.high < 0)
    paired = f"{level:.0%} {stats.KINDS['paired']} [{iv.low:.3g}, {iv.high:.3g}] over {seeds} seeds"
    verdict = (
        f"the candidate learns {relative:.0%} less per token than the small-batch baseline, beyond the seed noise "
        f"({paired}): the throughput change altered learning"
        if altered
        else f"learning per token is within {threshold:.0%} of the baseline or within seed noise "
        f"(relative loss {relative:.0%}; {paired})"
    )
    return BatchCheckResult(
        tokens=tokens,
        baseline_learning_per_token=float(base),
        candidate_learning_per_token=float(cand),
        baseline_learning=learned["baseline"],
        candidate_learning=learned["candidate"],
        relative_loss=float(relative),
        standard_error=iv.half / stats.t_quantile(level, iv.dof) if iv.half > 0 else 0.0,
        altered=altered,
        grad_norms=_grad_norms(model, sample, loss_fn, baseline, candidate, seq_tokens, grad_draws),
        verdict=verdict,
    )


def _grad_norms(
    model: nn.Module,
    sample: Sample,
    loss_fn: LossFn,
    baseline: BatchConfig,
    candidate: BatchConfig,
    seq_tokens: int,
    draws: int,
) -> dict[str, Any]:
    """The raw mean squared gradient norm at the baseline's and the candidate's microbatch size, from `model`'s
    state (on a copy), with their noise correction (|G|^2 and tr(Σ), `signals.gns_estimate`) where the candidate's
    microbatch is the larger."""
    b = (baseline.batch_size // baseline.accumulation) * seq_tokens
    big_b = (candidate.batch_size // candidate.accumulation) * seq_tokens
    rng = np.random.default_rng(10_000)
    probe = copy.deepcopy(model)
    raw_b = _mean_sq_grad(probe, sample, loss_fn, b // seq_tokens, draws, rng)
    raw_big = _mean_sq_grad(probe, sample, loss_fn, big_b // seq_tokens, draws, rng)
    norms: dict[str, Any] = {"b_tokens": b, "B_tokens": big_b, "raw_sq_b": raw_b, "raw_sq_B": raw_big}
    if big_b > b:
        est = gns_estimate(torch.tensor(raw_b), torch.tensor(raw_big), float(b), float(big_b))
        g2, trace = float(est.g2), float(est.trace)
        norms |= {
            "noise_corrected_sq": g2,
            "trace_sigma": trace,
            "expected_raw_sq_b": g2 + trace / b,
            "expected_raw_sq_B": g2 + trace / big_b,
        }
    return norms
