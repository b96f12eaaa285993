"""Leave-one-out probes (`yieldgate probe --ablate-sources`): which of a campaign's sources is paying.

The **base** is the campaign's first recipe. For each source it trains on (weight > 0) there is one more recipe,
`<base>-minus-<source>`: the base with that source's weight set to 0 and the others' renormalised to sum to 1 (in a
staged curriculum, in every stage too). The source stays in the recipe at weight 0: never sampled for training,
still evaluated on (`val/<source>/...`), and the tokenizer, trained on every source's text, is the base's, so the
base and its leave-one-out recipes are scored on one yardstick whether or not the campaign names eval sources.

Each is trained at the campaign's smallest budget with that budget's seeds (the seeds pair each leave-one-out probe
with a base probe of the same initialisation and sampler), on the campaign's first model size, as probes of the
campaign: its runs carry `ablation` ({base, left_out}) in their `probe` meta, which is how `analysis.attribution`
finds them. A base that trains on one source has nothing to leave out: refused before any probe.
"""

from __future__ import annotations

import dataclasses

from yieldgate.errors import InputError
from yieldgate.manifest import Recipe
from yieldgate.probe.campaign.spec import Campaign, ProbeSpec, _check_part, plan

__all__ = ["ablation_name", "ablation_plan", "ablation_recipes", "left_out"]


def ablation_name(base: str, source: str) -> str:
    """The leave-one-out recipe's name: `<base>-minus-<source>`."""
    return f"{base}-minus-{source}"


def left_out(recipe: Recipe, source: str) -> Recipe:
    """`recipe` with `source` at weight 0 and the other sources' weights renormalised to sum to 1 (and so in each
    stage of a staged curriculum). InputError where nothing would be left to train on."""
    rest = sum(s.weight for s in recipe.sources if s.name != source)
    if rest <= 0:
        raise InputError(f"leaving {source!r} out leaves no source with a weight > 0 to train on")
    sources = [s.model_copy(update={"weight": 0.0 if s.name == source else s.weight / rest}) for s in recipe.sources]
    stages = []
    for stage in recipe.curriculum.stages:
        kept = sum(w for name, w in stage.weights.items() if name != source)
        if kept <= 0:
            raise InputError(
                f"leaving {source!r} out leaves a curriculum stage with no weight ({stage.weights}); "
                "give that stage a second source"
            )
        weights = {name: (0.0 if name == source else w / kept) for name, w in stage.weights.items()}
        stages.append(stage.model_copy(update={"weights": weights}))
    curriculum = recipe.curriculum.model_copy(update={"stages": stages})
    return recipe.model_copy(update={"sources": sources, "curriculum": curriculum})


def ablation_recipes(campaign: Campaign) -> dict[str, tuple[Recipe, str]]:
    """Leave-one-out recipe name -> (recipe, the source it leaves out), one per source of the base (the campaign's
    first recipe) with a weight > 0. InputError, before any probe, for a base of one source or a name taken."""
    base, recipe = next(iter(campaign.recipes.items()))
    trained = [s.name for s in recipe.sources if s.weight > 0]
    if len(trained) < 2:
        raise InputError(
            f"campaign {campaign.name!r} cannot be ablated: its base recipe {base!r} (the first) trains on one source "
            f"({', '.join(trained)}), and leaving it out leaves nothing; ablate a recipe of two or more sources"
        )
    out: dict[str, tuple[Recipe, str]] = {}
    for source in trained:
        name = ablation_name(base, source)
        if name in campaign.recipes:
            raise InputError(
                f"campaign {campaign.name!r} already has a recipe {name!r}, the name of a leave-one-out recipe; "
                "rename it"
            )
        try:
            _check_part(name, "leave-one-out recipe name")
        except ValueError as exc:
            raise InputError(f"campaign {campaign.name!r}: {exc}") from None
        out[name] = (left_out(recipe, source), source)
    return out


def ablation_plan(campaign: Campaign) -> list[ProbeSpec]:
    """The leave-one-out probes of `campaign` (see the module docstring), keyed and named as `plan` keys and names
    a campaign's probes."""
    recipes = ablation_recipes(campaign)
    base = next(iter(campaign.recipes))
    budget = min(campaign.budgets)
    only = campaign.model_copy(
        update={
            "recipes": {name: recipe for name, (recipe, _) in recipes.items()},
            "budgets": [budget],
            "budget_seeds": {budget: campaign.seeds_of(budget)},
            "models": campaign.models[:1],
        }
    )
    return [
        dataclasses.replace(spec, ablation={"base": base, "left_out": recipes[spec.recipe_name][1]})
        for spec in plan(only)
    ]
