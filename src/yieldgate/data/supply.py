"""The tokens a recipe draws from each of its sources by a token count: its weights normalised, or a staged
curriculum's weights within each of its stages (the recipe's own after the last). Pure recipe arithmetic, read by
the gate's supply table (`gate.supply`), its sizing (`gate.sizing`) and the probe trainer's checks; and the weights
themselves (`recipe_weights`), for a team that keeps its own loader."""

from __future__ import annotations

import math
from pathlib import Path

from yieldgate.errors import InputError
from yieldgate.manifest import Recipe, load_recipe

__all__ = ["drawn_tokens", "recipe_weights"]


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


def recipe_weights(
    recipe: Recipe | str | Path, *, at: float | None = None, of: float | None = None
) -> dict[str, float]:
    """Each source's share of the stream (summing to 1): the recipe's weights normalised or, `at` tokens into a run of
    `of` tokens, the weights of the staged curriculum's stage in force then (the recipe's own after the last stage).
    `recipe`: a Recipe or a recipe file (YAML/JSON)."""
    if not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe)
    names = [s.name for s in recipe.sources]
    if at is not None and recipe.curriculum.kind == "staged":
        if of is None:
            raise InputError("a staged curriculum's weights at a token count need the run's tokens: pass of=TOKENS")
        for stage in recipe.curriculum.stages:
            if at < stage.end(of):
                return _shares(stage.weights, names)
    return _shares({s.name: s.weight for s in recipe.sources}, names)
