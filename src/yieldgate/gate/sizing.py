"""From probe size to target size: what a campaign's L(N, D) law (`analysis.scaling`) says about a plan.

For each stage of a policy, with the planned model's N (non-embedding parameters): the predicted loss at the
stage's tokens D, with the law's interval, and whether the stage would leave the model **undertrained**: its tokens
per parameter D/N far below (under 1/UNDERTRAINED_FACTOR of) the ratio the law finds compute-optimal at the same
compute C = 6ND, the fitted counterpart of Chinchilla's ~20 that `diagnose` (`undertrained`) and the gate's
`min_tokens_per_param` check use.

For a FLOP budget C: the compute-optimal N and D (Hoffmann et al. 2022, eq. 4: `ScalingLaw.optimal`) with their
intervals and the loss predicted there; and, where every source's unique tokens are known, whether the recipe can
supply D_opt tokens without passing any source more than max_epochs times (the policy's, else EPOCHS_FRESH, the
~4 epochs that Muennighoff et al. find nearly as good as new data). When it cannot, the compute-optimal model would
be undertrained for the token supply, and the plan names the largest model the supply trains compute-optimally.

The law predicts the constant-LR loss (`campaign_sizes`: it is fitted to stable-phase evaluations).

**What it will not say.** No compute-optimal size comes from a law that is not identified
(`ScalingLaw.unidentified`: E at its bound, as on tiny probes, where the split once named "train N = 86"), nor one
more than EXTRAPOLATION times outside the sizes the probes span: the plan says why instead (a note, and
`flops_refused`), with the probes or the budgets that would let it answer.
"""

from __future__ import annotations

import math
from typing import Any

from yieldgate.analysis.campaign import probe_runs
from yieldgate.analysis.campaign_sizes import fit_recipe, scaling_points
from yieldgate.analysis.detectors import EPOCHS_FRESH, UNDERTRAINED_FACTOR
from yieldgate.analysis.scaling import ScalingLaw
from yieldgate.data.supply import drawn_tokens
from yieldgate.errors import InputError
from yieldgate.gate.policy import Stage
from yieldgate.ledger import Ledger
from yieldgate.manifest import Recipe

__all__ = ["campaign_law", "sizing", "supply_tokens", "EXTRAPOLATION"]

EXTRAPOLATION = 10.0
"""How far outside the probed sizes (a factor of N, either way) a compute-optimal size is named: one decade. The
exponents come from the probes' one or two decades of N, and an exponent off by its typical bootstrap spread
(~0.05 on a few sizes) moves a prediction by 10^0.05 ~ 12% per decade: past one decade the answer rests on that
error more than on the data (Hoffmann et al. 2022 named Chinchilla, 70B, at ~4x their largest fitted model)."""


def campaign_law(ledger: Ledger, ref: str, *, level: float, boots: int = 100) -> tuple[str, ScalingLaw]:
    """(`campaign/recipe`, its fitted law) for `ref`: `CAMPAIGN/RECIPE`, or `CAMPAIGN` when it has one recipe."""
    campaign, _, recipe = ref.partition("/")
    ledger.campaign(campaign)  # an unknown campaign is refused with the ledger's message
    runs = probe_runs(ledger, campaign)
    recipes = sorted(runs["recipe"].unique())
    if not recipe:
        if len(recipes) != 1:
            raise InputError(
                f"campaign {campaign!r} has {len(recipes)} recipes ({', '.join(recipes)}): name one, "
                f"as {campaign}/{recipes[0] if recipes else 'RECIPE'}"
            )
        recipe = recipes[0]
    if recipe not in recipes:
        raise InputError(f"campaign {campaign!r} has no recipe {recipe!r}; it has {', '.join(recipes) or 'none'}")
    points = scaling_points(ledger, runs[runs["recipe"] == recipe])
    return f"{campaign}/{recipe}", fit_recipe(points, recipe, level=level, boots=boots)


def supply_tokens(recipe: Recipe, max_epochs: float) -> float | None:
    """The most tokens the recipe draws before any source passes `max_epochs` epochs of its unique tokens; None
    where a source drawn from has no unique-token count."""
    if any(s.unique_tokens is None and s.weight > 0 for s in recipe.sources):
        return None

    def within(tokens: float) -> bool:
        drawn = drawn_tokens(recipe, tokens)
        return all(s.unique_tokens is None or drawn[s.name] <= max_epochs * s.unique_tokens for s in recipe.sources)

    lo, hi = 1.0, 1e18  # bisection in log space: drawn tokens grow monotonically with the run's tokens
    if within(hi):
        return math.inf
    if not within(lo):
        return 0.0
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if within(mid) else (lo, mid)
        if hi / lo < 1 + 1e-9:
            break
    return lo


def sizing(
    law: ScalingLaw,
    stages: list[Stage],
    *,
    params: int | None,
    flops: float | None,
    recipe: Recipe | None,
    max_epochs: float | None,
) -> dict[str, Any]:
    """The plan's model-size section; see the module docstring."""
    out: dict[str, Any] = {"law": law.to_dict(), "params": params, "stages": [], "flops": None, "notes": []}
    if params is not None:
        for stage in stages:
            p = law.predict(params, stage.token_budget)
            optimum = law.optimal(6.0 * params * stage.token_budget)
            ratio = stage.token_budget / params
            under = bool(ratio < optimum["tokens_per_param"] / UNDERTRAINED_FACTOR)
            out["stages"].append(
                {
                    "stage": stage.name,
                    "tokens": stage.token_budget,
                    "prediction": p.to_dict(),
                    "tokens_per_param": ratio,
                    "optimal_tokens_per_param": optimum["tokens_per_param"],
                    "undertrained": under,
                    "advice": (
                        f"{stage.name} would leave the model undertrained ({ratio:.3g} tokens per parameter, far below "
                        f"the fitted optimum's {optimum['tokens_per_param']:.3g} at its compute): give it more tokens "
                        f"or a smaller model"
                        if under
                        else None
                    ),
                }
            )
    else:
        out["notes"].append("no planned model size (the target's manifest gives no model.non_embedding_params)")
    refused = _refusal(law, flops) if flops is not None else None
    if refused is not None:
        out["notes"].append(refused)
        out["flops_refused"] = {"flops": flops, "reason": refused}
    elif flops is not None:
        out["flops"] = _at_flops(law, flops, recipe, max_epochs, out["notes"])
    return out


def _at_flops(
    law: ScalingLaw, flops: float, recipe: Recipe | None, max_epochs: float | None, notes: list[str]
) -> dict[str, Any]:
    """The compute-optimal size for `flops` and whether the recipe's sources supply its tokens (`supply_tokens`),
    with the size the supply allows where they fall short; a note where the supply is unknown."""
    opt = law.optimal(flops)
    epochs = max_epochs if max_epochs is not None else EPOCHS_FRESH
    supply = supply_tokens(recipe, epochs) if recipe is not None else None
    entry: dict[str, Any] = {
        **opt,
        "intervals": law.optimal_interval(flops),
        "prediction": law.predict(opt["params"], opt["tokens"]).to_dict(),
        "max_epochs": epochs,
        "supply_tokens": supply,
        "undertrained": False,
        "advice": None,
    }
    if supply is not None and supply <= 0:  # a source drawn from holds no unique tokens: no size trains on it
        entry.update(
            undertrained=True,
            supply_params=None,
            supply_flops=None,
            advice=f"the sources supply no tokens within {epochs:g} epochs (a source drawn from holds no unique "
            "tokens): grow the sources",
        )
    elif supply is not None and supply < opt["tokens"]:
        # The largest compute the supply trains compute-optimally: D_opt(C) = supply, with D_opt = C / (6 N_opt).
        c_supply = _flops_for_tokens(law, supply)
        n_supply = law.optimal(c_supply)["params"]
        named = _within(law, n_supply)
        entry.update(
            undertrained=bool(supply / opt["params"] < opt["tokens_per_param"] / UNDERTRAINED_FACTOR),
            supply_params=n_supply if named else None,
            supply_flops=c_supply,
            advice=(
                f"the compute-optimal model (N = {opt['params']:,.0f}) needs {opt['tokens']:,.0f} tokens; the "
                f"sources supply {supply:,.0f} within {epochs:g} epochs, {supply / opt['params']:.3g} tokens per "
                f"parameter against the fitted optimum's {opt['tokens_per_param']:.3g}: grow the sources"
                + (
                    f", or train N = {n_supply:,.0f} (compute-optimal for that supply at {c_supply:.3g} FLOPs)"
                    if named
                    else f" (the size compute-optimal for that supply lies more than {EXTRAPOLATION:g}x outside "
                    "the probed sizes: not named)"
                )
            ),
        )
    elif supply is None:
        notes.append("token supply unknown (data.sources[].unique_tokens): not checked against D_opt")
    return entry


def _within(law: ScalingLaw, params: float) -> bool:
    """`params` lies within EXTRAPOLATION times the probed sizes, either way."""
    return law.sizes[0] / EXTRAPOLATION <= params <= law.sizes[-1] * EXTRAPOLATION


def _refusal(law: ScalingLaw, flops: float) -> str | None:
    """Why the plan names no compute-optimal size for `flops` (the law not identified, or the size more than
    EXTRAPOLATION times outside the probed ones, with the budgets whose optimum is not); None when it names one."""
    if law.unidentified is not None:
        return f"no compute-optimal size for {flops:.3g} FLOPs: {law.unidentified}"
    n = law.optimal(flops)["params"]
    if _within(law, n):
        return None
    lo, hi = law.sizes[0] / EXTRAPOLATION, law.sizes[-1] * EXTRAPOLATION
    return (
        f"no compute-optimal size for {flops:.3g} FLOPs: the law puts it at N = {n:,.0f}, more than "
        f"{EXTRAPOLATION:g}x outside the probed sizes (N = {law.sizes[0]:,} to {law.sizes[-1]:,}); probe sizes nearer "
        f"it, or plan a budget of {_flops_for_params(law, lo):.3g} to {_flops_for_params(law, hi):.3g} FLOPs"
    )


def _flops_for_params(law: ScalingLaw, params: float) -> float:
    """C at which the compute-optimal N is `params`: N_opt = G (C/6)^(beta/(alpha+beta)), inverted."""
    g = (law.alpha * law.A / (law.beta * law.B)) ** (1.0 / (law.alpha + law.beta))
    return 6.0 * (params / g) ** ((law.alpha + law.beta) / law.beta)


def _flops_for_tokens(law: ScalingLaw, tokens: float) -> float:
    """C at which the compute-optimal D is `tokens`: D_opt = G^-1 (C/6)^(alpha/(alpha+beta)), inverted."""
    g = (law.alpha * law.A / (law.beta * law.B)) ** (1.0 / (law.alpha + law.beta))
    return 6.0 * (tokens * g) ** ((law.alpha + law.beta) / law.alpha)
