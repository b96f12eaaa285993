"""Throughput math: windowed rates from cumulative counters, FLOPs per token, and MFU.

Pure Python: no torch, no devices, testable on its own. The Tracker feeds it host-side counters.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from typing import Literal

__all__ = ["Throughput", "flops_per_token", "MFU", "mfu"]


class Throughput:
    """Tokens/s and samples/s over a sliding window of cumulative counters.

    The Lightning `Throughput` shape: `update(*, time, tokens, samples)` with cumulative values,
    `compute()` returns a dict, `reset()` starts over. A rate is (last - first) / (t_last - t_first) over the
    window, so a slow step weighs as much as the time it took. The first `skip` updates (compilation,
    allocator and cache warm-up) are not counted.
    """

    def __init__(self, *, window: int = 20, skip: int = 2) -> None:
        if window < 2:
            raise ValueError(f"window must be >= 2, got {window}")
        if skip < 0:
            raise ValueError(f"skip must be >= 0, got {skip}")
        self.window = window
        self.skip = skip
        self.reset()

    def reset(self) -> None:
        self._points: deque[tuple[float, float, float]] = deque(maxlen=self.window)
        self._seen = 0

    def update(self, *, time: float, tokens: float, samples: float) -> None:
        """Add one point of cumulative (time, tokens, samples). Counters that go backwards are refused."""
        if self._points:
            t0, k0, s0 = self._points[-1]
            if time < t0 or tokens < k0 or samples < s0:
                raise ValueError(
                    f"cumulative counters went backwards: time {t0} -> {time}, tokens {k0} -> {tokens}, "
                    f"samples {s0} -> {samples}"
                )
        self._seen += 1
        if self._seen > self.skip:
            self._points.append((time, tokens, samples))

    def compute(self) -> dict[str, float]:
        """`tokens_per_s` and `samples_per_s` over the window; empty until the window has two points."""
        if len(self._points) < 2:
            return {}
        (t0, k0, s0), (t1, k1, s1) = self._points[0], self._points[-1]
        dt = t1 - t0
        if dt <= 0:
            return {}
        return {"tokens_per_s": (k1 - k0) / dt, "samples_per_s": (s1 - s0) / dt}


def flops_per_token(
    *,
    non_embedding_params: int,
    layers: int,
    heads: int,
    head_dim: int,
    context: int,
    attention: bool = True,
) -> float:
    """Training FLOPs per token of a decoder-only transformer: 6N + 12·L·H·Q·T (PaLM, appendix B).

    N: non-embedding parameters; L layers; H attention heads of size Q (H·Q is the attention width, which
    need not equal the model width); T context length. 6N counts the forward (2N) and backward (4N)
    matmuls with the weights; 12·L·H·Q·T the attention scores and their use (QK^T and AV, forward and
    backward). `attention=False` gives 6N alone, as some reports quote.
    """
    flops = 6.0 * non_embedding_params
    if attention:
        flops += 12.0 * layers * heads * head_dim * context
    return flops


@dataclass(frozen=True)
class MFU:
    """An MFU figure with how it was computed; `value` is None when it would mislead (see `flag`)."""

    value: float | None
    """Model FLOPs utilisation, fraction of peak (0-1), or None."""
    flops_per_token: float | None
    """Training FLOPs per token used."""
    peak_flops: float | None
    """Peak FLOP/s of one device used."""
    devices: int
    """Devices the achieved rate is spread over."""
    formula: str = "6N + 12*L*H*Q*T (PaLM, appendix B)"
    """How FLOPs per token were computed."""
    attention: bool = True
    """Whether the attention term was counted."""
    dtype: str | None = None
    """Precision the peak refers to."""
    flag: Literal["ok", "unknown_device", "impossible", "not_transformer", "unknown_model"] = "ok"
    """Why `value` is None (or `ok`)."""


def mfu(
    *,
    tokens_per_s: float,
    flops_per_token: float | None,
    peak_flops: float | None,
    devices: int = 1,
    dtype: str | None = None,
    attention: bool = True,
    architecture: str = "decoder_transformer",
    formula: str | None = None,
) -> MFU:
    """MFU = achieved tokens/s x FLOPs/token / (peak FLOP/s x devices) (PaLM, appendix B).

    FLOPs per token come from the PaLM formula (`formula` None), or from elsewhere (`formula` says where: given
    in the manifest, counted by torch's FLOP counter), where the architecture does not matter. Flagged instead
    of returned when it would mislead: an unknown device (no peak), a model that is not a decoder transformer
    (the formula does not apply), unknown FLOPs per token, or a value above 100%.
    """
    flagged = MFU(
        value=None,
        flops_per_token=flops_per_token,
        peak_flops=peak_flops,
        devices=devices,
        dtype=dtype,
        attention=attention,
    )
    if formula:
        flagged = replace(flagged, formula=formula)
    if formula is None and architecture != "decoder_transformer":
        return replace(flagged, flag="not_transformer")
    if flops_per_token is None:
        return replace(flagged, flag="unknown_model")
    if peak_flops is None:
        return replace(flagged, flag="unknown_device")
    value = tokens_per_s * flops_per_token / (peak_flops * devices)
    if not math.isfinite(value) or value > 1.0:
        return replace(flagged, flag="impossible")
    return replace(flagged, value=value)
