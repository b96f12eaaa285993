"""Batch advice from the gradient noise scale: is the run's batch far above the batch past which more batch buys
steps but not learning?

McCandlish et al. (2018, "An Empirical Model of Large-Batch Training") model the steps S and the data E needed
to reach a given loss at batch B as S = S_min (1 + B_noise / B) and E = E_min (1 + B / B_noise), with B_noise
estimated by the simple noise scale B_simple = tr(Σ) / |G|² (the Tracker's `signals/gns`, in tokens). So at B =
B_noise a run needs twice the minimum data, and against a run at B_noise, one at batch B needs (1 + B/B_noise) / 2
times the tokens and (1 + B_noise/B) / 2 times the steps. B_simple equals the critical batch only where the
Hessian is well conditioned; the paper finds it within a small factor of it, so the advice is a heuristic, and
says so. Far above it, tokens/s bought with a bigger batch are paid for in data; the small-batch check
(`track.batch_check.batch_size_check`) measures what a change did.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.manifest import Manifest

__all__ = ["batch_advice", "FAR"]

FAR = 4.0
"""A batch this many times B_simple (or this many times below it) gets advice."""
_MIN_POINTS = 5


def _batch_tokens(steps: pd.DataFrame, manifest: Manifest | None) -> tuple[float | None, str]:
    if "tokens" in steps and steps["tokens"].notna().sum() >= 3:
        per_step = np.diff(steps["tokens"].dropna().to_numpy()) / np.diff(steps.loc[steps["tokens"].notna(), "step"])
        per_step = per_step[np.isfinite(per_step) & (per_step > 0)]
        if len(per_step):
            return float(np.median(per_step)), "tokens per step, from the step records"
    opt = manifest.optimisation if manifest else None
    seq = manifest.data.sequence_length if manifest and manifest.data else None
    if opt and opt.batch_size and seq:
        return float(opt.batch_size * seq), "the manifest's batch_size x sequence_length"
    return None, "the batch in tokens is unknown (no token counts, no batch_size and sequence_length)"


def batch_advice(steps: pd.DataFrame, gns: pd.DataFrame, manifest: Manifest | None) -> dict[str, Any] | None:
    """The batch in tokens beside B_simple (the median of `signals/gns` over the last half of the run's steps,
    `gns` in the ledger's long extras form), their ratio, the token and step factors against a batch at B_simple,
    and advice when the batch is `FAR` from it; None where the run recorded too few noise-scale points."""
    if gns.empty or steps.empty:
        return None
    half = steps["step"].max() / 2
    values = gns.loc[gns["step"] >= half, "value"].to_numpy(dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) < _MIN_POINTS:
        return None
    b_simple = float(np.median(values))
    batch, basis = _batch_tokens(steps, manifest)
    out: dict[str, Any] = {
        "b_simple_tokens": b_simple,
        "points": int(len(values)),
        "batch_tokens": batch,
        "batch_basis": basis,
        "ratio": None,
        "tokens_factor": None,
        "steps_factor": None,
        "advice": None,
        "heuristic": True,
    }
    if batch is None:
        out["advice"] = basis
        return out
    ratio = batch / b_simple
    out.update(ratio=ratio, tokens_factor=(1 + ratio) / 2, steps_factor=(1 + 1 / ratio) / 2)
    if ratio >= FAR:
        out["advice"] = (
            f"the batch ({batch:,.0f} tokens) is x{ratio:.3g} the gradient noise scale (B_simple "
            f"~{b_simple:,.0f} tokens): throughput bought with data; reaching a loss takes ~x"
            f"{(1 + ratio) / 2:.3g} the tokens of a batch near B_simple (McCandlish et al. 2018; a "
            "heuristic: B_simple is within a small factor of the critical batch)"
        )
    elif ratio <= 1 / FAR:
        out["advice"] = (
            f"the batch ({batch:,.0f} tokens) is 1/{1 / ratio:.3g} of the gradient noise scale "
            f"(B_simple ~{b_simple:,.0f} tokens): a larger batch would take ~x{(1 + 1 / ratio) / 2:.3g} "
            "fewer steps for little more data (McCandlish et al. 2018; a heuristic)"
        )
    return out if math.isfinite(ratio) else None
