"""A probe's configuration: its budget, model, optimisation and seed (`ProbeConfig`), the injected faults of the
diagnosis suite (`Faults`, all off by default), and the warmup-stable-decay schedule they set (`wsd`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from yieldgate.errors import InputError

__all__ = ["Faults", "ProbeConfig", "wsd", "PORTFOLIO"]

PORTFOLIO = ("probe", "1")  # name, version: bump the version when a task or metric changes


@dataclass(frozen=True, kw_only=True)
class Faults:
    """Injected faults, each off by default (for the diagnosis fault-injection suite)."""

    lr_multiplier: float = 1.0
    """Multiply the learning rate (x30: too high; /100: too low)."""
    no_warmup: bool = False
    """Start at the peak learning rate."""
    nan_at_step: int | None = None
    """Make this step's gradients NaN (the trainer skips the update, as a guarded trainer does)."""
    diverge_at_step: int | None = None
    """Make this step's gradients NaN and apply the update all the same, as an unguarded trainer does: the weights go
    non-finite, and every loss and evaluation after it is NaN (a diverged run)."""
    sleep_loader_s: float = 0.0
    """Seconds the data loader sleeps before each batch (an infrastructure stall)."""
    sleep_from_step: int = 1
    """First step whose batch the loader sleeps before (a stall that starts mid-run)."""
    unshuffled: bool = False
    """Present each source's windows in order, sources one after another (a non-i.i.d. stream)."""
    loop_examples: int | None = None
    """Sample only the first N windows, looping (the 'same 200 examples' failure)."""
    repeat_source: tuple[str, float] | None = None
    """(source, epochs): keep only as many of the source's windows as the budget passes `epochs` times. The
    manifest records the source's unique tokens as the windows kept: the run declares its small source."""
    corrupt_at_step: int | None = None
    """Replace this step's batch with uniformly random token ids (a corrupted shard)."""
    inf_at_steps: tuple[int, ...] = ()
    """Make these steps' gradients inf; with `ProbeConfig.loss_scaler` the scaler skips them and backs off."""
    drift_to: Mapping[str, float] | None = None
    """Source weights the mixture creeps to by the end of the run, linearly from the recipe's weights; the
    manifest keeps the recipe's weights (a pipeline letting drift through)."""


@dataclass(frozen=True, kw_only=True)
class ProbeConfig:
    """One probe: budget, model, optimisation and seed."""

    tokens: int
    """Token budget."""
    seed: int = 0
    """Seed of the model init, the sampler and the eval draw."""
    batch_size: int = 16
    """Sequences per step."""
    microbatches: int = 2
    """Accumulation microbatches per step (two batch sizes per step: what the gradient noise scale needs)."""
    context: int = 64
    """Tokens per sequence."""
    layers: int = 2
    width: int = 64
    heads: int = 4
    lr: float = 3e-3
    """Peak learning rate."""
    warmup_frac: float = 0.05
    """Share of steps warming up."""
    decay_frac: float = 0.2
    """Share of steps in the final linear cooldown (to 10% of the peak)."""
    evals: int = 8
    """Evaluations over the budget (plus one at step 0)."""
    eval_at: tuple[float, ...] = ()
    """More evaluations, at these shares of the budget (a campaign's `score_window`: inside the LR decay)."""
    eval_sequences: int = 32
    """Held-out sequences per source per evaluation (drawn from token positions: see `eval_documents`)."""
    eval_documents: int | None = None
    """Score this many whole held-out documents per source instead of `eval_sequences` windows: every token of
    each but its first, so the text scored is the same whatever the tokenizer. Windows drawn at token positions
    fall on different text under two recipes' tokenizers, and with a few dozen windows the difference of text
    outweighs the difference of data between close recipes; bits per byte on the same bytes does not."""
    eval_seed: int | None = None
    """Seed of the eval draw (None: `seed`). A campaign fixes it, so its probes differ by seed in training only and
    are scored on the same held-out sequences."""
    threads: int | None = None
    """torch threads (None: leave as is)."""
    eval_sources: tuple[str, ...] = ()
    """Sources whose held-out text makes the overall `val/loss`, `val/bpb` and the hard slices (empty: every
    source's): a campaign's common yardstick, so recipes that train on different sources are scored on the same
    text. Per-source evaluations (`val/<source>/...`) are made for every source either way."""
    loss_scaler: bool = False
    """Train through a dynamic loss scaler (torch.amp.GradScaler), as fp16 training does: a step with inf or
    NaN gradients is skipped and the scale backs off (recorded as `signals/loss_scale`, `signals/skipped_steps`)."""
    checkpoint: bool = True
    """Save the model, optimizer, loss-scaler and sampler state at the end of the probe (`probe.cooldown`: a file
    beside the ledger, about 12 bytes per parameter), so that a cooldown can continue it."""
    faults: Faults = field(default_factory=Faults)

    def __post_init__(self) -> None:
        for name in (
            "tokens",
            "batch_size",
            "microbatches",
            "context",
            "layers",
            "width",
            "heads",
            "evals",
            "eval_sequences",
        ):
            if getattr(self, name) < 1:
                raise InputError(f"probe.{name} must be >= 1, got {getattr(self, name)}")
        if self.eval_documents is not None and self.eval_documents < 1:
            raise InputError(f"probe.eval_documents must be >= 1 (or None), got {self.eval_documents}")
        if self.batch_size % self.microbatches:
            raise InputError(
                f"probe.batch_size ({self.batch_size}) must be a multiple of microbatches ({self.microbatches})"
            )
        if not 0 <= self.warmup_frac + self.decay_frac <= 1:
            raise InputError(
                f"probe.warmup_frac + decay_frac must be within [0, 1], got {self.warmup_frac} + {self.decay_frac}"
            )


def wsd(step: int, steps: int, cfg: ProbeConfig) -> float:
    """Warmup-stable-decay learning rate at `step` (1-based) of `steps`."""
    warm = 0 if cfg.faults.no_warmup else max(1, round(cfg.warmup_frac * steps))
    decay = round(cfg.decay_frac * steps)
    peak = cfg.lr * cfg.faults.lr_multiplier
    if step <= warm:
        return peak * step / warm
    if step > steps - decay:
        frac = (step - (steps - decay)) / max(decay, 1)
        return peak * (1.0 - 0.9 * frac)
    return peak
