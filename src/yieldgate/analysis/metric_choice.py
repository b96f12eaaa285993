"""Which evaluation should decide: every candidate metric's signal-to-noise on the probes, and, where the campaign has
a larger budget to check against, its decision accuracy beside it.

On published data the choice of score moved decision accuracy by more than going from the smaller to the larger
probe scale. A campaign ranks by its `rank_by` metric (default `bpb`); this measures the others:

- **Candidates**: `bpb` and every evaluation key `<task>/<metric>` that every finished probe of a budget has, finite,
  and whose direction is known (`names.metric_direction`; the `rank_by` metric with its declared one); where the
  recipes' tokenizers differ, bits per byte only: a loss or accuracy per token is then measured in other units for
  each recipe.
- **Signal-to-noise** at each budget (`ranking.signal_to_noise`: the spread between recipes over the spread between
  seeds, the DataDecide and "Signal and Noise" measure), from the probes alone.
- **Recommended**: the candidate with the highest signal-to-noise, averaged over the budgets below the largest that
  have two or more seeds a recipe (the probes that decide; all such budgets when there is one budget). Never chosen by
  agreement with the largest budget, which would choose by the answer.
- **Decision accuracy** per candidate and smaller budget: the share of recipe pairs its order (in its own direction)
  gives as the largest budget's `rank_by` order does (`ranking.decision_accuracy`), beside the signal-to-noise.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from yieldgate.analysis.probe_scores import BPB
from yieldgate.analysis.ranking import decision_accuracy, signal_to_noise
from yieldgate.names import metric_direction

__all__ = ["candidate_metrics", "metric_report"]

Scores = dict[int, dict[str, dict[str, dict[int, float]]]]
"""budget -> score -> recipe -> seed -> value (`campaign.campaign_scores`)."""


def _direction(key: str, rank_by: str, higher: bool) -> bool | None:
    if key == rank_by:
        return higher
    if key == BPB:
        return False
    if "/" not in key or key.startswith(("yield", "stable_yield", "cooldown")):
        return None
    return metric_direction(key.rpartition("/")[2])


def candidate_metrics(scores: Scores, rank_by: str, higher: bool, *, bytes_only: bool = False) -> dict[str, bool]:
    """Candidate metric -> higher is better: the keys every recipe has a finite score of at every budget it is
    scored at, with a known direction (module docstring); with `bytes_only` (the recipes' tokenizers differ, so a
    per-token loss or accuracy is not one yardstick), bits per byte only, and the rank_by metric."""
    out: dict[str, bool] = {}
    keys = set.intersection(*(set(by_key) for by_key in scores.values())) if scores else set()
    for key in sorted(keys):
        direction = _direction(key, rank_by, higher)
        if direction is None or (bytes_only and key not in (BPB, rank_by) and not key.endswith("/bpb")):
            continue
        finite = all(
            math.isfinite(v) for by_key in scores.values() for seeds in by_key[key].values() for v in seeds.values()
        )
        if finite:
            out[key] = direction
    return out


def _means(by_recipe: dict[str, dict[int, float]], higher: bool) -> dict[str, float]:
    """Recipe means as `lower is better` (a higher-is-better metric negated), what `decision_accuracy` compares."""
    sign = -1.0 if higher else 1.0
    return {r: sign * float(np.mean(list(v.values()))) for r, v in by_recipe.items()}


def metric_report(scores: Scores, rank_by: str, higher: bool, *, bytes_only: bool = False) -> dict[str, Any]:
    """Each candidate's direction, signal-to-noise per budget and decision accuracy per smaller budget against the
    largest budget's `rank_by` order, and the recommended one (module docstring; `bytes_only`: `candidate_metrics`).
    Empty with no candidate."""
    candidates = candidate_metrics(scores, rank_by, higher, bytes_only=bytes_only)
    if not candidates:
        return {}
    budgets = sorted(scores)
    largest = budgets[-1]
    target = _means(scores[largest][rank_by], higher) if rank_by in scores[largest] else None
    seeded = [b for b in budgets if min(len(v) for v in next(iter(scores[b].values())).values()) >= 2]
    deciding = [b for b in seeded if b != largest] or seeded
    rows: dict[str, Any] = {}
    for key, up in candidates.items():
        snr = {str(b): signal_to_noise(scores[b][key]) for b in budgets}
        measured = [x for x in (snr[str(b)] for b in deciding) if x is not None]
        accuracy: dict[str, Any] = {}
        if target is not None and len(budgets) > 1:
            for b in budgets[:-1]:
                entry = decision_accuracy({b: _means(scores[b][key], up), largest: target}, set())
                accuracy[str(b)] = entry[str(b)]["accuracy"] if entry else None
        rows[key] = {
            "higher_is_better": up,
            "snr": snr,
            "snr_mean": float(np.mean(measured)) if measured else None,
            "accuracy": accuracy,
        }
    ranked = [k for k in rows if rows[k]["snr_mean"] is not None]
    best = max(ranked, key=lambda k: (rows[k]["snr_mean"], k == rank_by), default=None)
    return {
        "rank_by": rank_by,
        "budgets": [str(b) for b in deciding],
        "recommended": best,
        "metrics": rows,
    }
