"""A campaign's adaptive seeds (`Campaign.adaptive`): after its first pass, rounds of one more probe for each recipe
still in a pair within noise at the adaptive budget, until every pair is decided, the compute is spent or the
budget's seeds are drawn (the rule is `analysis.adaptive.adaptive_seeds`'; this module trains its rounds).

The first pass is in the campaign's plan (`Campaign.planned_seeds`: the budget's first `first_seeds` seeds). Each
round's probes are the recipe's next seeds of the budget (`seeds_of`, in order), trained by `run_round` (the
campaign's executor, `api.probe`), and read back from the ledger, scored by the campaign's `rank_by` metric. The
compute cap in probes: `compute` x largest budget x recipes / budget (rounded down). A re-run finds the probes it
trained in the ledger and goes on from them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from yieldgate.analysis.adaptive import AdaptiveRun, adaptive_seeds
from yieldgate.ledger import Ledger
from yieldgate.probe.campaign.spec import Campaign, ProbeSpec, probes_of

__all__ = ["adapt", "max_probes"]


def max_probes(campaign: Campaign) -> int:
    """The adaptive budget's probes the compute pays for, the first pass included."""
    assert campaign.adaptive is not None
    share = campaign.adaptive.compute * max(campaign.budgets) / campaign.adaptive.budget
    return math.floor(share * len(campaign.recipes) + 1e-9)


def _scores(ledger: str, campaign: Campaign) -> dict[str, dict[int, float]]:
    """Recipe -> seed -> the rank_by score of its finished probes at the adaptive budget."""
    from yieldgate.analysis.campaign import campaign_scores

    assert campaign.adaptive is not None
    with Ledger(ledger) as led:
        scores = campaign_scores(led, campaign.name).get(campaign.adaptive.budget, {})
    by_recipe = scores.get(campaign.rank_by.metric, {})
    return {r: dict(by_recipe.get(r, {})) for r in campaign.recipes}


def adapt(campaign: Campaign, ledger: str, run_round: Callable[[list[ProbeSpec]], Any]) -> AdaptiveRun | None:
    """The adaptive rounds of `campaign` after its first pass (module docstring); None without `adaptive`."""
    if campaign.adaptive is None:
        return None
    budget = campaign.adaptive.budget
    pool = campaign.seeds_of(budget)

    def draw(recipes: list[str]) -> dict[str, dict[int, float]]:
        have = _scores(ledger, campaign)
        specs = []
        for recipe in recipes:
            left = [s for s in pool if s not in have[recipe]]
            if left:
                specs += probes_of(campaign, recipe, budget, left[:1])
        if specs:
            run_round(specs)
        after = _scores(ledger, campaign)
        new = {r: {s: v for s, v in after[r].items() if s not in have[r]} for r in recipes}
        return {r: v for r, v in new.items() if v}  # none for a recipe whose probe failed: it is left out

    return adaptive_seeds(_scores(ledger, campaign), draw, max_probes=max_probes(campaign))
