"""The yield of each stage of a staged curriculum: whether a curriculum changes the slope is read, not guessed.

A staged recipe (`data.curriculum.kind: staged`) holds each stage's source weights until its end (`until_tokens`, or
`until_share` of the run's tokens), then the recipe's own weights. Each stage's yield is the improvement of the
followed metric between its first and last evaluations inside it, per billion tokens between those two evaluations
(`measured_from`, `measured_to`), with the band the run's evaluation noise allows (`stats.evaluation_difference`,
the noise of the run's trained evaluations). A stage with fewer than two evaluations inside has no yield, and says
so: a span that crosses its boundary mixes the neighbouring stage's slope in.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis import stats
from yieldgate.manifest import Curriculum

__all__ = ["stage_yields"]

BILLION = 1e9


def _spans(curriculum: Curriculum, tokens: float) -> list[tuple[str, float, float]]:
    """(name, start, end) of each stage in a run of `tokens`, then the recipe's own weights to the end."""
    spans, start = [], 0.0
    for i, stage in enumerate(curriculum.stages):
        end = min(stage.end(tokens), tokens)
        if end > start:
            spans.append((f"stage {i + 1}", start, end))
        start = max(start, end)
    if start < tokens:
        spans.append(("after the stages", start, tokens))
    return spans


def stage_yields(
    points: pd.DataFrame,
    curriculum: Curriculum,
    tokens: float,
    *,
    noise: float,
    noise_dof: int,
    level: float,
) -> list[dict[str, Any]]:
    """Per stage of `curriculum` in a run trained to `tokens`: its span, the evaluations bounding it, the improvement
    and the yield per billion tokens with its band (`points`: the run's evaluations with tokens, `eval_points`'
    shape; `noise`, `noise_dof`: the run's evaluation noise, `fit.learning_noise`). [] unless it is staged."""
    if curriculum.kind != "staged" or not curriculum.stages or not math.isfinite(tokens) or tokens <= 0:
        return []
    known = points.dropna(subset=["tokens", "value"]).sort_values("tokens")
    x = known["tokens"].to_numpy(dtype=float)
    y = known["value"].to_numpy(dtype=float)
    higher = bool(known["higher_is_better"].iloc[0]) if len(known) else False
    out = []
    for name, start, end in _spans(curriculum, tokens):
        row: dict[str, Any] = {"stage": name, "start_tokens": start, "end_tokens": end}
        measured = _measured(x, y, start, end)
        if measured is None:
            inside = int(((x >= start) & (x <= end)).sum())
            out.append(
                {
                    **row,
                    "yield_per_btok": None,
                    "band": None,
                    "missing": f"{inside} evaluation{'s' * (inside != 1)} inside the stage: its yield is read between "
                    "two or more of its own (evaluate it more often)",
                }
            )
            continue
        (lo, y_lo), (hi, y_hi), how = measured
        gain = y_hi - y_lo if higher else y_lo - y_hi
        span = (hi - lo) / BILLION
        band = stats.evaluation_difference(gain, noise, noise_dof, level)
        out.append(
            {
                **row,
                "measured_from": lo,
                "measured_to": hi,
                "measured": how,
                "improvement": gain,
                "yield_per_btok": gain / span,
                "band": None if band is None else [band.low / span, band.high / span],
                "within_noise": None if band is None else stats.verdict(band) == "within noise",
            }
        )
    return out


def _measured(
    x: np.ndarray, y: np.ndarray, start: float, end: float
) -> tuple[tuple[float, float], tuple[float, float], str] | None:
    """The two points a stage's yield is read between: its first and last evaluations inside it; None with fewer than
    two inside. Reading from the last evaluation before the stage mixed the previous stage's slope into this one's
    (1,408 per billion tokens where the truth was 1,000), and so would the curve interpolated across a boundary."""
    a, b = int(np.searchsorted(x, start, side="left")), int(np.searchsorted(x, end, side="right")) - 1
    if b <= a:
        return None
    return (float(x[a]), float(y[a])), (float(x[b]), float(y[b])), "inside"
