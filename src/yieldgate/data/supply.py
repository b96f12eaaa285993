"""The tokens a recipe draws from each of its sources by a token count: its weights normalised, or a staged
curriculum's weights within each of its stages (the recipe's own after the last). Pure recipe arithmetic, read by
the gate's supply table (`gate.supply`), its sizing (`gate.sizing`) and the probe trainer's checks."""

from __future__ import annotations

import math

from yieldgate.manifest import Recipe

__all__ = ["drawn_tokens"]


def _shares(weights: dict[str, float], names: list[str]) -> dict[str, float]:
    total = sum(weights.get(n, 0.0) for n in names)
    return {n: weights.get(n, 0.0) / total if total > 0 else 0.0 for n in names}


def drawn_tokens(recipe: Recipe, tokens: float) -> dict[str, float]:
    """Tokens each source gives a run trained to `tokens`."""
    names = [s.name for s in recipe.sources]
    base = _shares({s.name: s.weight for s in recipe.sources}, names)
    spans: list[tuple[float, dict[str, float]]] = []  # (end, shares) in token order
    if recipe.curriculum.kind == "staged":
        spans = [(st.end(tokens), _shares(st.weights, names)) for st in recipe.curriculum.stages]
    spans.append((math.inf, base))
    drawn = dict.fromkeys(names, 0.0)
    start = 0.0
    for end, shares in spans:
        span = min(end, tokens) - start
        if span <= 0:
            break
        for name in names:
            drawn[name] += span * shares[name]
        start = end
    return drawn
