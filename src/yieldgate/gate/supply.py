"""Data supply at the next stage: how many times each source's unique tokens would be passed, and what the
repetition is expected to cost in yield, before any compute is spent on it.

A stage that trains to T tokens draws from each source its share of T (the recipe's weights normalised; a
staged curriculum's weights within each of its stages, the recipe's after the last). A source drawn D tokens
from U unique ones is passed D/U times (epochs). Repeated tokens are worth less than new ones; Muennighoff et al.
(2023, "Scaling Data-Constrained Language Models", eq. 5) fit the tokens they are worth as

    D' = U + U · R* · (1 − exp(−R / R*)),   R = D/U − 1 (repetitions past the first epoch),   R* ≈ 15.4,

so ~4 epochs are worth nearly as much as new data and returns vanish past ~16 (D' tends to U · (1 + R*)).
The worth of a stage's new tokens is the effective tokens they add over the tokens they add: 1 while every
source is within its first epoch, e^(−R/R*) for the last token of a source passed 1 + R times.

The gate multiplies the forecast yield by the worth of the next stage's tokens over the worth of the tokens the
evidence was measured on (the forecast extrapolates a curve measured at that repetition), and the policy's
`max_epochs` holds any source that would be passed more often (`gate.py`). `yieldgate plan` prints the table
(`gate.plan`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from yieldgate.analysis.detectors import R_STAR, effective_tokens
from yieldgate.data.supply import drawn_tokens
from yieldgate.gate.policy import Stage
from yieldgate.manifest import Recipe

__all__ = ["SourceSupply", "stage_supply", "worth", "plan"]


@dataclass(frozen=True)
class SourceSupply:
    """One source at one stage."""

    stage: str
    source: str
    drawn_tokens: float
    """Tokens the stage's run draws from it, from the first token to the stage's end."""
    unique_tokens: int | None
    """What it holds (the manifest's `data.sources[].unique_tokens`; None where not recorded)."""
    epochs: float | None
    effective_tokens: float | None
    """What the drawn tokens are worth as new ones (Muennighoff et al.)."""
    stage_worth: float | None
    """Of the tokens it adds in this stage (past the previous stage's end), the share that counts as new."""

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def stage_supply(recipe: Recipe, stage: str, start: float, end: float) -> list[SourceSupply]:
    """Each source of `recipe` in a stage that trains from `start` to `end` tokens."""
    before, after = drawn_tokens(recipe, start), drawn_tokens(recipe, end)
    rows = []
    for source in recipe.sources:
        unique, d0, d1 = source.unique_tokens, before[source.name], after[source.name]
        if unique is None:
            rows.append(SourceSupply(stage, source.name, d1, None, None, None, None))
            continue
        gained = effective_tokens(d1, unique) - effective_tokens(d0, unique)
        rows.append(
            SourceSupply(
                stage,
                source.name,
                d1,
                unique,
                d1 / unique if unique else math.inf,
                effective_tokens(d1, unique),
                gained / (d1 - d0) if d1 > d0 else None,
            )
        )
    return rows


def worth(recipe: Recipe, start: float, end: float) -> float | None:
    """The share of the tokens from `start` to `end` that count as new, over all sources; None where a source
    drawn from has no unique-token count."""
    rows = stage_supply(recipe, "", start, end)
    before = drawn_tokens(recipe, start)
    added = {r.source: r.drawn_tokens - before[r.source] for r in rows}
    if any(r.unique_tokens is None and added[r.source] > 0 for r in rows):
        return None
    total = sum(added.values())
    if total <= 0:
        return None
    return sum((r.stage_worth or 0.0) * added[r.source] for r in rows) / total


def plan(
    recipe: Recipe, stages: Sequence[Stage], max_epochs: float | None = None, params: int | None = None
) -> dict[str, Any]:
    """Every stage's data supply (`yieldgate plan`): per source its tokens drawn, epochs, effective tokens and the
    worth of the stage's new tokens; the stage's tokens per parameter where `params` is known; and, for each
    source the policy's `max_epochs` would be passed on, the first stage it happens at and the unique tokens
    that stage needs."""
    out: list[dict[str, Any]] = []
    advice: list[dict[str, Any]] = []
    named: set[str] = set()
    start = 0.0
    for stage in stages:
        rows = stage_supply(recipe, stage.name, start, stage.token_budget)
        sources = []
        for r in rows:
            over = max_epochs is not None and r.epochs is not None and r.epochs > max_epochs
            sources.append({**r.to_dict(), "over_limit": over})
            if max_epochs is not None and over and r.source not in named:
                named.add(r.source)
                advice.append(
                    {
                        "source": r.source,
                        "stage": stage.name,
                        "epochs": r.epochs,
                        "unique_tokens": r.unique_tokens,
                        "needed_unique_tokens": r.drawn_tokens / max_epochs,
                    }
                )
        out.append(
            {
                "stage": stage.name,
                "start_tokens": start,
                "tokens": stage.token_budget,
                "worth": worth(recipe, start, stage.token_budget),
                "tokens_per_param": stage.token_budget / params if params else None,
                "sources": sources,
            }
        )
        start = stage.token_budget
    return {"max_epochs": max_epochs, "params": params, "r_star": R_STAR, "stages": out, "grow": advice}
