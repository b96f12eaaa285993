"""Leave-one-out probes (`yieldgate probe --ablate-sources`): which of a campaign's sources is paying.

The **base** is a recipe of the campaign (`base`; default: its first). For each source it trains on (weight > 0) there
is one more recipe, the base without that source, in one of two ways (in a staged curriculum, in every stage too):

- **the rest in proportion** (default), `<base>-minus-<source>`: that source's weight set to 0 and the others'
  renormalised to sum to 1. Every other source's share then grows by 1 / (1 - w) for a source of share w: leaving
  out a source of 30% takes another of 30% to 43%, so the contrast holds "more of the others" as well as "less of
  this one" (a damaged source's larger share is in it too).
- **replaced by a baseline source** (`by`), `<base>-minus-<source>+<by>`: that source's weight moved to `by`, the
  others' unchanged: the contrast is the source against the baseline, every other share held. `by` is a source of
  the base, trained on or at weight 0, and is not itself left out.

The source stays in the recipe at weight 0: never sampled for training, still evaluated on (`val/<source>/...`), and
the tokenizer, trained on every source's text, is the base's, so the base and its leave-one-out recipes are scored on
one yardstick whether or not the campaign names eval sources.

Each is trained at the campaign's smallest budget with that budget's seeds (the seeds pair each leave-one-out probe
with a base probe of the same initialisation and sampler), on the campaign's first model size, as probes of the
campaign: its runs carry `ablation` ({base, left_out}, and `by` for a replacement) in their `probe` meta, which is how
`analysis.attribution` finds them and their base. A base with nothing to leave out (one source trained on, or only
`by`) is refused before any probe.
"""

from __future__ import annotations

import dataclasses

from yieldgate.errors import InputError
from yieldgate.manifest import Curriculum, Recipe
from yieldgate.probe.campaign.spec import Campaign, ProbeSpec, _check_part, plan

__all__ = ["ablation_name", "ablation_plan", "ablation_recipes", "left_out"]


def ablation_name(base: str, source: str, by: str | None = None) -> str:
    """The leave-one-out recipe's name: `<base>-minus-<source>`, and `+<by>` where `by` takes its weight."""
    return f"{base}-minus-{source}" + (f"+{by}" if by else "")


def _moved(weights: dict[str, float], source: str, by: str | None, where: str) -> dict[str, float]:
    """`weights` (source -> weight) with `source` at 0: the rest renormalised to sum to 1, or its weight moved to
    `by`. InputError where the rest in proportion would leave nothing to train on."""
    if by is not None:
        out = {name: 0.0 if name == source else w for name, w in weights.items()}
        out[by] = out.get(by, 0.0) + weights.get(source, 0.0)
        return out
    rest = sum(w for name, w in weights.items() if name != source)
    if rest <= 0:
        raise InputError(f"leaving {source!r} out leaves {where} with no weight ({weights}); give it a second source")
    return {name: 0.0 if name == source else w / rest for name, w in weights.items()}


def left_out(recipe: Recipe, source: str, by: str | None = None) -> Recipe:
    """`recipe` with `source` at weight 0, the other sources' weights renormalised to sum to 1 or, with `by`, its weight
    moved to `by` and the others' as they were (and so in each stage of a staged curriculum). InputError where nothing
    would be left to train on, or `by` is no source of the recipe."""
    names = [s.name for s in recipe.sources]
    if by is not None and by not in names:
        raise InputError(f"the baseline source {by!r} is not a source of the recipe; its sources: {', '.join(names)}")
    weights = _moved({s.name: s.weight for s in recipe.sources}, source, by, "the recipe")
    sources = [s.model_copy(update={"weight": weights[s.name]}) for s in recipe.sources]
    stages = [
        stage.model_copy(update={"weights": _moved(stage.weights, source, by, "a curriculum stage")})
        for stage in recipe.curriculum.stages
    ]
    curriculum: Curriculum = recipe.curriculum.model_copy(update={"stages": stages})
    return recipe.model_copy(update={"sources": sources, "curriculum": curriculum})


def ablation_recipes(
    campaign: Campaign, base: str | None = None, by: str | None = None
) -> dict[str, tuple[Recipe, str]]:
    """Leave-one-out recipe name -> (recipe, the source it leaves out), one per source of the base (`base`, default the
    campaign's first recipe) with a weight > 0, `by` excepted. InputError, before any probe, for a base that is no
    recipe of the campaign, a `by` that is no source of it, a base with nothing to leave out, or a name taken."""
    name = base if base is not None else next(iter(campaign.recipes))
    if name not in campaign.recipes:
        raise InputError(
            f"campaign {campaign.name!r} has no recipe {name!r} to ablate; its recipes: {', '.join(campaign.recipes)}"
        )
    recipe = campaign.recipes[name]
    trained = [s.name for s in recipe.sources if s.weight > 0 and s.name != by]
    if by is not None and by not in {s.name for s in recipe.sources}:
        raise InputError(
            f"campaign {campaign.name!r}: the baseline source {by!r} is not a source of recipe {name!r}; its sources: "
            + ", ".join(s.name for s in recipe.sources)
        )
    if by is not None and not trained:
        raise InputError(
            f"campaign {campaign.name!r} cannot be ablated: recipe {name!r} trains on no source but {by!r}"
        )
    if by is None and len(trained) < 2:
        which = " (the first)" if base is None else ""
        raise InputError(
            f"campaign {campaign.name!r} cannot be ablated: its base recipe {name!r}{which} trains on one source "
            f"({', '.join(trained)}), and leaving it out leaves nothing; ablate a recipe of two or more sources, or "
            "move its weight to a baseline source of the recipe"
        )
    out: dict[str, tuple[Recipe, str]] = {}
    for source in trained:
        ablated = ablation_name(name, source, by)
        if ablated in campaign.recipes:
            raise InputError(
                f"campaign {campaign.name!r} already has a recipe {ablated!r}, the name of a leave-one-out recipe; "
                "rename it"
            )
        try:
            _check_part(ablated, "leave-one-out recipe name")
        except ValueError as exc:
            raise InputError(f"campaign {campaign.name!r}: {exc}") from None
        out[ablated] = (left_out(recipe, source, by), source)
    return out


def ablation_plan(campaign: Campaign, base: str | None = None, by: str | None = None) -> list[ProbeSpec]:
    """The leave-one-out probes of `campaign`'s recipe `base` (default: its first), the rest renormalised or, with
    `by`, each source's weight moved to `by` (see the module docstring), keyed and named as `plan` keys and names a
    campaign's probes."""
    recipes = ablation_recipes(campaign, base, by)
    name = base if base is not None else next(iter(campaign.recipes))
    budget = min(campaign.budgets)
    only = campaign.model_copy(
        update={
            "recipes": {ablated: recipe for ablated, (recipe, _) in recipes.items()},
            "budgets": [budget],
            "budget_seeds": {budget: campaign.seeds_of(budget)},
            "models": campaign.models[:1],
        }
    )
    meta = {"base": name} if by is None else {"base": name, "by": by}
    return [
        dataclasses.replace(spec, ablation={**meta, "left_out": recipes[spec.recipe_name][1]}) for spec in plan(only)
    ]
