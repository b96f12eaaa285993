"""A campaign across model sizes: the L(N, D) law of each recipe (`scaling.fit_scaling`), and whether the order of
recipes found at small sizes holds at the largest (rank transfer).

**Points of the fit.** Each finished probe's validation loss (task `val`, metric `loss`) at every evaluation in its
stable phase: after warm-up brings the LR near its peak and before the decay starts (`fit.stable_phase`'s rule). At
a constant LR the loss at D tokens does not depend on the budget the probe will stop at, so probes of every budget
lie on one surface; a cooldown's gain is annealing, not data (DESIGN.md), and would bend it. The law therefore
predicts the **constant-LR** loss; a cooldown lowers it further (the campaign's `cooldown_gain` measures by how
much at probe scale). N is the manifest's `model.non_embedding_params` (`GPT.non_embedding_params`).

**Rank transfer.** At each budget, the recipes are ranked per model size (`campaign.rank` over the seeds of that
size alone), and `campaign.decision_accuracy` compares each smaller size's order with the largest size's: the share
of recipe pairs ordered the same way, over all pairs and over the pairs the largest size resolves.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from yieldgate.analysis.fit import stable_phase
from yieldgate.analysis.ranking import decision_accuracy, rank
from yieldgate.analysis.scaling import MIN_SIZES, ScalingLaw, fit_scaling
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger

__all__ = ["scaling_points", "fit_recipe", "recipe_laws", "rank_transfer", "sizes_of", "transfer_by_budget"]

POINT_COLUMNS = ["run", "recipe", "seed", "params", "tokens", "loss"]


def scaling_points(ledger: Ledger, runs: pd.DataFrame) -> pd.DataFrame:
    """The stable-phase validation losses of the finished probes in `runs` (`campaign.probe_runs`' rows), one row
    per evaluation: run, recipe, seed, params (N), tokens (D), loss."""
    rows: list[tuple[Any, ...]] = []
    for row in runs[runs["status"] == "finished"].itertuples(index=False):
        manifest = ledger.manifest(row.run)
        params = manifest.model.non_embedding_params if manifest and manifest.model else None
        if not params:
            continue
        evals = ledger.evals(row.run)
        loss = evals[(evals["task"] == "val") & (evals["metric"] == "loss")].sort_values("step")
        if loss.empty:
            continue
        mask, _ = stable_phase(ledger.steps(row.run, ["tokens", "lr"]), loss["step"].to_numpy())
        kept = loss[mask & (loss["tokens"].to_numpy() > 0)]
        rows += [
            (row.run, row.recipe, row.seed, params, t, v) for t, v in zip(kept["tokens"], kept["value"], strict=True)
        ]
    return pd.DataFrame(rows, columns=POINT_COLUMNS)


def fit_recipe(points: pd.DataFrame, recipe: str, *, level: float, boots: int = 200) -> ScalingLaw:
    """`fit_scaling` over one recipe's points (`scaling_points`), each probe's run the bootstrap's unit."""
    mine = points[points["recipe"] == recipe]
    if mine.empty:
        raise InputError(f"recipe {recipe!r} has no finished probe with stable-phase evaluations and a parameter count")
    return fit_scaling(mine["params"], mine["tokens"], mine["loss"], mine["run"], level=level, boots=boots)


def recipe_laws(
    ledger: Ledger, runs: pd.DataFrame, *, level: float, target_tokens: float | None, boots: int = 200
) -> dict[str, Any]:
    """Recipe -> its law (`ScalingLaw.to_dict`, and the predicted loss at the largest size and `target_tokens`), or
    why there is none. Empty for a campaign of one model size."""
    if runs["model"].nunique() < 2:
        return {}
    points = scaling_points(ledger, runs)
    out: dict[str, Any] = {}
    for recipe in sorted(runs["recipe"].unique()):
        sizes = points.loc[points["recipe"] == recipe, "params"].nunique()
        if sizes < MIN_SIZES:
            out[recipe] = {
                "available": False,
                "reason": f"{sizes} model size(s) finished; an L(N, D) fit needs probes of {MIN_SIZES} or more",
            }
            continue
        try:
            law = fit_recipe(points, recipe, level=level, boots=boots)
        except InputError as exc:
            out[recipe] = {"available": False, "reason": str(exc)}
            continue
        entry: dict[str, Any] = {"available": True, **law.to_dict()}
        if target_tokens:
            entry["prediction"] = law.predict(max(law.sizes), target_tokens).to_dict()
        out[recipe] = entry
    return out


def rank_transfer(
    by_size: dict[int, dict[str, dict[int, float]]], *, level: float, labels: dict[int, str]
) -> dict[str, Any]:
    """Decision accuracy across sizes at one budget: `by_size` is N -> recipe -> seed -> score (lower is better),
    `labels` N -> the size's name (`2x64`). Each smaller size's entry (keyed by str(N)) has `campaign.
    decision_accuracy`'s fields with the size in `params` and `size`."""
    ranked = {n: rank(recipes, lower_is_better=True, level=level) for n, recipes in by_size.items()}
    means = {n: {e["recipe"]: e["mean"] for e in r["order"]} for n, r in ranked.items()}
    largest = max(ranked)
    firm = {frozenset((p["a"], p["b"])) for p in ranked[largest]["pairs"] if p["resolved"]}
    out = decision_accuracy(means, firm, axis="params")
    for entry in out.values():
        entry["size"] = labels[entry["params"]]
        entry["largest"] = labels[largest]
        entry["largest_params"] = largest
    return out


def sizes_of(ledger: Ledger, runs: pd.DataFrame) -> dict[str, int]:
    """Model name (`2x64`) -> N (the manifest's non-embedding parameters) over the finished probes."""
    out: dict[str, int] = {}
    for row in runs[runs["status"] == "finished"].drop_duplicates("model").itertuples(index=False):
        manifest = ledger.manifest(row.run)
        params = manifest.model.non_embedding_params if manifest and manifest.model else None
        if params:
            out[row.model] = int(params)
    return out


def transfer_by_budget(
    scores: dict[int, dict[str, dict[str, dict[int, float]]]],
    sizes: dict[str, int],
    key: str,
    *,
    level: float,
) -> dict[str, Any]:
    """Budget -> `rank_transfer` of score `key` (scores: budget -> score -> `recipe@size` -> seed -> value), for
    the budgets with two or more sizes."""
    labels = {n: name for name, n in sizes.items()}
    out: dict[str, Any] = {}
    for budget, by_score in sorted(scores.items()):
        by_size: dict[int, dict[str, dict[int, float]]] = {}
        for name, seeds in by_score.get(key, {}).items():
            recipe, _, size = name.rpartition("@")
            if size in sizes and any(math.isfinite(v) for v in seeds.values()):
                by_size.setdefault(sizes[size], {})[recipe] = seeds
        if len(by_size) >= 2 and len(by_size[max(by_size)]) >= 2:
            out[str(budget)] = rank_transfer(by_size, level=level, labels=labels)
    return out
