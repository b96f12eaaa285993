"""`TrackerConfig`: the Tracker's cadences, windows and limits, one typed object handed whole to its writer.

Every field has its docstring and is checked when the config is made: a bad value raises an `InputError` that names
the field and shows the value (`TrackerConfig.log_every_steps must be >= 1, got 0`). The defaults are DESIGN.md's.
"""

from __future__ import annotations

from dataclasses import dataclass

from yieldgate.errors import InputError

__all__ = ["TrackerConfig"]


@dataclass(frozen=True, kw_only=True)
class TrackerConfig:
    """Cadences and windows. The defaults are DESIGN.md's; the overhead targets hold at these."""

    log_every_steps: int = 10
    """Steps between host transfers of buffered device values."""
    log_every_s: float = 1.0
    """Seconds between host transfers (single process; distributed runs transfer on steps only)."""
    flush_every_s: float = 1.0
    """Seconds between ledger writes."""
    online_diagnosis_every_s: float | None = None
    """Seconds between runs of the cheap diagnosis detectors (loss and gradient-norm spikes, NaN/Inf, stalls)
    on the last 256 steps, each new finding written as an open `diagnosis` event while the run goes on. Off
    by default: the overhead targets are measured without it."""
    telemetry_every_s: float = 5.0
    """Seconds between device telemetry readings (utilisation, power, clocks, memory; energy is cumulative)."""
    layer_every: int = 10
    """Steps between per-layer gradient norms and update/weight ratios (signals="full")."""
    entropy_every: int = 100
    """Steps between activation-entropy samples (signals="full")."""
    entropy_layers: int = 4
    """Layers sampled for activation entropy."""
    gns_ema: float = 0.95
    """EMA decay for the GNS numerator and denominator (smoothed separately, DESIGN.md)."""
    gns_every: int = 5
    """Steps between gradient-noise-scale measurements (signals="full"; layer steps are always measured, for the
    per-layer GNS): each costs one fused norm over the gradients per backward pass, 3-5% of a small model's step on
    CPU when taken every step. The EMAs (`gns_ema`) are updated on measured steps only, so they span gns_every
    times as many steps."""
    gns_microbatches: int | None = None
    """Microbatches per step whose gradient norms feed the small-batch side of the GNS (None: all). Fewer cost
    less; each is an unbiased sample, but the estimate gets noisier (one of four: ~35% off the brute-force
    value where all four are within 10%, on tests/test_signals.py's check)."""
    throughput_window: int = 20
    """Steps in the tokens/s window (at least 2: a rate is taken between the window's first and last step)."""
    throughput_skip: int = 2
    """Warm-up steps left out of tokens/s."""
    loss_var_window: int = 50
    """Steps in the per-batch loss-variance window."""
    repeat_window: int = 100_000
    """Samples remembered by the stream-duplicate counter."""
    queue_size: int = 256
    """Packets the writer queue holds before dropping (and counting) new ones."""
    spill_dir: str | None = None
    """Folder for spill files (None: $YIELDGATE_SPILL_DIR, else the ledger file's folder; where it cannot take them,
    the working directory, then the system's temp folder)."""
    loss_averaged: bool = True
    """Whether each microbatch's loss is divided by the accumulation count (the common practice)."""
    dist_timeout_s: float = 120.0
    """Timeout of the tracker's own cross-rank reductions: a dead rank is reported, not waited on."""
    optimizer_timing: bool | None = None
    """Time the optimizer step (`time/optimizer_s`) with step hooks; None: on with signals="full"."""

    def __post_init__(self) -> None:
        for name in (
            "log_every_steps",
            "layer_every",
            "entropy_every",
            "gns_every",
            "loss_var_window",
            "repeat_window",
            "queue_size",
        ):
            if getattr(self, name) < 1:
                raise InputError(f"TrackerConfig.{name} must be >= 1, got {getattr(self, name)}")
        # A rate needs two points of the window (`throughput.Throughput`): said here, naming the field.
        if self.throughput_window < 2:
            raise InputError(f"TrackerConfig.throughput_window must be >= 2, got {self.throughput_window}")
        if self.throughput_skip < 0:
            raise InputError(f"TrackerConfig.throughput_skip must be >= 0, got {self.throughput_skip}")
        for name in ("log_every_s", "flush_every_s", "telemetry_every_s", "dist_timeout_s"):
            if not getattr(self, name) > 0:
                raise InputError(f"TrackerConfig.{name} must be > 0, got {getattr(self, name)}")
        if self.online_diagnosis_every_s is not None and not self.online_diagnosis_every_s > 0:
            raise InputError(
                f"TrackerConfig.online_diagnosis_every_s must be > 0 or None, got {self.online_diagnosis_every_s}"
            )
        if self.gns_microbatches is not None and self.gns_microbatches < 1:
            raise InputError(f"TrackerConfig.gns_microbatches must be >= 1 or None, got {self.gns_microbatches}")
        if not 0 <= self.gns_ema < 1:
            raise InputError(f"TrackerConfig.gns_ema must be in [0, 1), got {self.gns_ema}")
