"""Recipes ranked over seeds, and how often a smaller scale orders them as the largest does.

- `rank`: recipes ordered best first, each with its mean and interval over seeds (`stats.mean_interval`, Student t);
  two recipes compared paired by seed, a pair resolved when the t-interval of the mean difference (`stats.difference`,
  paired) excludes 0 at the level held family-wise over the ranking's pairs (Bonferroni), a tie otherwise.
- `resolved_pairs`: the pairs a ranking resolves, by `rank`'s rule: the one rule of a campaign's screen, read by its
  ranking's ties and by its decision accuracy alike (the largest budget's resolved pairs, a smaller budget's decided
  ones): a screen whose ranking tied three recipes while its decision accuracy decided two of their pairs by another
  rule said two things of one noise.
- `beyond_seed_noise`: the pairs whose difference of means exceeds one noise unit of such a difference (the seeds'
  spread pooled over the recipes, `pooled_seed_std`, times sqrt(2/k)); the rest are within noise. The rule of an
  imported results campaign (`results`), whose scales rank no seeds pair by pair, and of `benchmarks/bench_decide.py`.
- `decision_accuracy` (DataDecide, Magnusson et al. 2025): the share of pairs a smaller budget (or model size) orders
  as the largest does, over all pairs, the pairs the largest resolves, and the pairs it decides itself.

Shared by a campaign's summary (`campaign`) and its transfer across model sizes (`campaign_sizes`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from yieldgate.analysis import stats

__all__ = ["rank", "resolved_pairs", "pooled_seed_std", "beyond_seed_noise", "decision_accuracy"]


def rank(by_recipe: dict[str, dict[int, float]], *, lower_is_better: bool, level: float) -> dict[str, Any]:
    """Recipes ordered best first, each with its mean and interval over seeds, and every pair: resolved
    (which is better) or a tie."""
    entries: list[dict[str, Any]] = []
    for recipe, seeds in by_recipe.items():
        values = np.array(list(seeds.values()), dtype=float)
        iv = stats.mean_interval(values, level)
        mean = float(np.mean(values[np.isfinite(values)])) if np.isfinite(values).any() else math.nan
        entries.append(
            {
                "recipe": recipe,
                "mean": mean,
                "interval": None if iv is None else [iv.low, iv.high],
                "interval_kind": stats.KINDS["mean"],
                "level": level,
                "seeds": len(seeds),
            }
        )
    sign = 1.0 if lower_is_better else -1.0
    entries.sort(key=lambda e: (not math.isfinite(e["mean"]), sign * e["mean"] if math.isfinite(e["mean"]) else 0.0))
    pairs: list[dict[str, Any]] = []
    family = max(len(entries) * (len(entries) - 1) // 2, 1)
    for i, j in itertools.combinations(range(len(entries)), 2):
        a, b = entries[i]["recipe"], entries[j]["recipe"]
        iv = stats.difference(by_recipe[a], by_recipe[b], level, paired=True, family=family)
        shared = [by_recipe[b][s] - by_recipe[a][s] for s in sorted(set(by_recipe[a]) & set(by_recipe[b]))]
        diff = iv.estimate if iv is not None else (float(np.mean(shared)) if shared else math.nan)
        resolved = stats.verdict(iv, tie=True) == "beyond noise"
        pairs.append(
            {
                "a": a,
                "b": b,
                "diff": diff,
                "interval": None if iv is None else [iv.low, iv.high],
                "interval_kind": stats.KINDS["paired"],
                "level": level,
                "family": family,
                "resolved": resolved,
                "better": (a if (diff > 0) == lower_is_better else b) if resolved else None,
            }
        )
    for k, e in enumerate(entries):
        e["rank"] = k + 1
        e["ties"] = [
            p["b"] if p["a"] == e["recipe"] else p["a"]
            for p in pairs
            if not p["resolved"] and e["recipe"] in (p["a"], p["b"])
        ]
    return {"order": entries, "pairs": pairs, "lower_is_better": lower_is_better}


def resolved_pairs(ranking: dict[str, Any]) -> set[frozenset[str]]:
    """The recipe pairs a `rank` result resolves (the rest are its ties)."""
    return {frozenset((p["a"], p["b"])) for p in ranking["pairs"] if p["resolved"]}


def pooled_seed_std(scores: dict[str, list[float]]) -> float:
    """The seeds' spread pooled over recipes: sqrt of the mean over recipes of the variance of a recipe's scores
    (each recipe with two or more)."""
    return math.sqrt(float(np.mean([np.var(values, ddof=1) for values in scores.values()])))


def beyond_seed_noise(by_recipe: dict[str, dict[int, float]]) -> set[frozenset[str]] | None:
    """The recipe pairs whose difference of means lies beyond one noise unit of such a difference: the seeds' spread
    pooled over the recipes (sqrt of the mean over recipes of the variance of a recipe's score over its k seeds) times
    sqrt(2/k). The rest are within noise (abstain). Less strict than `rank`'s family-wise interval, which with two or
    three seeds resolves almost nothing; the pooled spread has (k - 1) x recipes degrees of freedom, where a pair's
    own has k - 1. None with fewer than two seeds per recipe: there is no spread to measure."""
    finite = {r: [x for x in v.values() if math.isfinite(x)] for r, v in by_recipe.items()}
    k = min((len(values) for values in finite.values()), default=0)
    if k < 2:  # a diverged probe leaves its recipe fewer scores: no pair of it is decided on a guess
        return None
    means = {r: float(np.mean(values)) for r, values in finite.items()}
    unit = pooled_seed_std(finite) * math.sqrt(2 / k)
    return {frozenset((a, b)) for a, b in itertools.combinations(sorted(means), 2) if abs(means[a] - means[b]) > unit}


def decision_accuracy(
    means: dict[int, dict[str, float]],
    resolved_at_largest: set[frozenset[str]],
    *,
    axis: str = "budget",
    resolved: dict[int, set[frozenset[str]]] | None = None,
    seeds: dict[int, int] | None = None,
) -> dict[str, Any]:
    """For each budget below the largest: the share of recipe pairs ordered as the largest budget orders them
    (by mean), over all pairs and over the pairs the largest budget resolves. `axis` names what the keys of `means`
    are (`budget`, or `params` for model sizes: `campaign_sizes.rank_transfer`).

    With `resolved` (budget -> the pairs that budget's own seeds decide), also the share of pairs it abstains on
    and its accuracy on the pairs it decides (a budget missing from `resolved` gets neither); with `seeds` (budget
    -> probes per recipe), its compute: budget x seeds over one probe of the largest budget (see the module
    docstring)."""
    budgets = sorted(means)
    if len(budgets) < 2:
        return {}
    top = means[budgets[-1]]
    out: dict[str, Any] = {}
    for budget in budgets[:-1]:
        here = means[budget]
        pairs = [
            (a, b)
            for a, b in itertools.combinations(sorted(set(here) & set(top)), 2)
            if all(math.isfinite(v) for v in (here[a], here[b], top[a], top[b]))
        ]
        agree = [np.sign(here[a] - here[b]) == np.sign(top[a] - top[b]) for a, b in pairs]
        firm = [ok for (a, b), ok in zip(pairs, agree, strict=True) if frozenset((a, b)) in resolved_at_largest]
        out[str(budget)] = {
            axis: budget,
            "share_of_largest": budget / budgets[-1],
            "pairs": len(pairs),
            "accuracy": float(np.mean(agree)) if agree else None,
            "resolved_pairs": len(firm),
            "accuracy_resolved": float(np.mean(firm)) if firm else None,
        }
        if seeds is not None:
            out[str(budget)].update(seeds=seeds[budget], compute_share=budget * seeds[budget] / budgets[-1])
        if resolved is not None and budget in resolved:
            decided = [ok for (a, b), ok in zip(pairs, agree, strict=True) if frozenset((a, b)) in resolved[budget]]
            out[str(budget)].update(
                decided_pairs=len(decided),
                abstained=1 - len(decided) / len(pairs) if pairs else None,
                accuracy_decided=float(np.mean(decided)) if decided else None,
            )
    return out
