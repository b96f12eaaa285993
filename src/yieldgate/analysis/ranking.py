"""Recipes ranked over seeds, and how often a smaller scale orders them as the largest does.

- `rank`: recipes ordered best first, each with its mean and interval over seeds (`stats.mean_interval`, Student t);
  two recipes compared paired by seed, a pair resolved when the t-interval of the mean difference (`stats.difference`,
  paired) excludes 0 at the level held family-wise over the ranking's pairs (Bonferroni), a tie otherwise.
- `resolved_pairs`: the pairs a ranking resolves, by `rank`'s rule: the one rule of a campaign's screen, read by its
  ranking's ties and by its decision accuracy alike (the largest budget's resolved pairs, a smaller budget's decided
  ones): a screen whose ranking tied three recipes while its decision accuracy decided two of their pairs by another
  rule said two things of one noise.
- `beyond_seed_noise`: the pairs whose difference of means exceeds one noise unit of such a difference,
  sqrt(s_a^2 / k_a + s_b^2 / k_b), each recipe's seed spread s its own where it has `OWN_NOISE_SEEDS` or more seeds
  and else the seeds' spread pooled over the recipes (`recipe_noise`: one pooled spread overstates the certainty of
  the pairs of a noisier recipe; with 2-4 seeds a recipe's own variance is too uncertain to stand alone); the rest
  are within noise. The rule of an imported results campaign (`results`), whose scales rank no seeds pair by pair,
  of `benchmarks/bench_decide.py` and of an adaptive campaign's rounds (`adaptive`).
- `decision_accuracy` (DataDecide, Magnusson et al. 2025): the share of pairs a smaller budget (or model size) orders
  as the largest does, over all pairs (with its standard error over pairs, `pair_stderr`), the pairs the largest
  resolves, and the pairs it decides itself with the share decided (`coverage`): the three figures every decision
  in yieldgate reports, a probe campaign and a replayed table alike.
- `signal_to_noise`: the spread between recipes over the spread between seeds (the DataDecide and "Signal and Noise"
  studies' measure, Heineman et al. 2025), measured on the probes alone: what picks a metric and a scoring window.

Shared by a campaign's summary (`campaign`) and its transfer across model sizes (`campaign_sizes`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from yieldgate.analysis import stats

__all__ = [
    "rank",
    "resolved_pairs",
    "pooled_seed_std",
    "recipe_noise",
    "pair_unit",
    "beyond_noise",
    "beyond_seed_noise",
    "pair_stderr",
    "signal_to_noise",
    "decision_accuracy",
    "OWN_NOISE_SEEDS",
]

OWN_NOISE_SEEDS = 5
"""Seeds from which a recipe's noise is its own spread: with 4 degrees of freedom a sample variance lies between 0.18
and 2.4 times the true one in 90% of draws (chi-square quantiles), with two seeds' 1 between 0.004 and 3.8; below it,
the seeds' spread pooled over the recipes."""


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
    """The seeds' spread pooled over recipes: sqrt of the variances of the recipes' scores (each recipe with two or
    more), weighted by their degrees of freedom (k - 1); with as many seeds a recipe, the mean of the variances."""
    usable = [values for values in scores.values() if len(values) >= 2]
    dof = sum(len(values) - 1 for values in usable)
    return math.sqrt(sum(_squares(values) for values in usable) / dof)


def _squares(values: list[float]) -> float:
    """The sum of squared deviations from the mean ((k - 1) x the sample variance), in plain Python: the
    benchmark's seed subsets ask it of a handful of values some 10^5 times, where numpy's call costs 30x the sum."""
    mean = math.fsum(values) / len(values)
    return math.fsum((x - mean) ** 2 for x in values)


def _finite(by_recipe: dict[str, dict[int, float]]) -> dict[str, list[float]]:
    return {r: [x for x in v.values() if math.isfinite(x)] for r, v in by_recipe.items()}


def recipe_noise(by_recipe: dict[str, dict[int, float]]) -> dict[str, float] | None:
    """Recipe -> the standard deviation of its score over seeds: its own with `OWN_NOISE_SEEDS` or more finite
    scores, else the spread pooled over every recipe (`pooled_seed_std`). None when a recipe has fewer than two
    finite scores: there is no spread to measure (a diverged probe's recipe is not decided on a guess)."""
    finite = _finite(by_recipe)
    if not finite or min(len(values) for values in finite.values()) < 2:
        return None
    pooled = pooled_seed_std(finite)
    return {
        r: math.sqrt(_squares(values) / (len(values) - 1)) if len(values) >= OWN_NOISE_SEEDS else pooled
        for r, values in finite.items()
    }


def pair_unit(noise: dict[str, float], counts: dict[str, int], a: str, b: str) -> float:
    """One noise unit of the difference of two recipes' means: sqrt(s_a^2 / k_a + s_b^2 / k_b)."""
    return math.sqrt(noise[a] ** 2 / counts[a] + noise[b] ** 2 / counts[b])


def beyond_noise(means: dict[str, float], counts: dict[str, int], noise: dict[str, float]) -> set[frozenset[str]]:
    """The recipe pairs whose difference of means lies beyond one noise unit of such a difference (`pair_unit`:
    `noise` is a recipe's standard deviation over runs, `counts` its runs)."""
    return {
        frozenset((a, b))
        for a, b in itertools.combinations(sorted(means), 2)
        if abs(means[a] - means[b]) > pair_unit(noise, counts, a, b)
    }


def beyond_seed_noise(by_recipe: dict[str, dict[int, float]]) -> set[frozenset[str]] | None:
    """The recipe pairs whose difference of means lies beyond one noise unit of such a difference (`beyond_noise`,
    each recipe's spread by `recipe_noise`: with k seeds a recipe and all pooled, the pooled spread times
    sqrt(2/k)). The rest are within noise (abstain). Less strict than `rank`'s family-wise interval, which with two
    or three seeds resolves almost nothing; the pooled spread has (k - 1) x recipes degrees of freedom, where a
    pair's own has k - 1. None when a recipe has fewer than two finite scores: there is no spread to measure."""
    noise = recipe_noise(by_recipe)
    if noise is None:
        return None
    finite = _finite(by_recipe)
    means = {r: float(np.mean(values)) for r, values in finite.items()}
    return beyond_noise(means, {r: len(values) for r, values in finite.items()}, noise)


def pair_stderr(agreement: list[float]) -> float | None:
    """The standard error over pairs of an accuracy that is the mean of `agreement` (each pair's 0/1, or its share
    over seed subsets): std (ddof 1) / sqrt(pairs); 73.8% of 21 pairs is +-9.8 points. Pairs that share a recipe are
    not independent, so it understates the spread a new set of recipes would show. None with fewer than two pairs."""
    if len(agreement) < 2:
        return None
    return float(np.std(agreement, ddof=1) / math.sqrt(len(agreement)))


def signal_to_noise(by_recipe: dict[str, dict[int, float]]) -> float | None:
    """The spread between recipes over the spread between seeds: the standard deviation of the recipes' means (ddof
    1) over the seeds' pooled standard deviation (`pooled_seed_std`). Unitless, so metrics of other units compare;
    measured on the probes alone. None with fewer than two recipes or two seeds a recipe, or no spread between
    seeds."""
    finite = {r: v for r, v in _finite(by_recipe).items() if v}
    if len(finite) < 2 or min(len(v) for v in finite.values()) < 2:
        return None
    noise = pooled_seed_std(finite)
    if not noise > 0:
        return None
    return float(np.std([np.mean(v) for v in finite.values()], ddof=1) / noise)


def decision_accuracy(
    means: dict[int, dict[str, float]],
    resolved_at_largest: set[frozenset[str]],
    *,
    axis: str = "budget",
    resolved: dict[int, set[frozenset[str]]] | None = None,
    seeds: dict[int, int] | None = None,
) -> dict[str, Any]:
    """For each budget below the largest: the share of recipe pairs ordered as the largest budget orders them
    (by mean), over all pairs (`accuracy`, with `accuracy_stderr` over pairs: `pair_stderr`) and over the pairs the
    largest budget resolves. `axis` names what the keys of `means` are (`budget`, or `params` for model sizes:
    `campaign_sizes.rank_transfer`).

    With `resolved` (budget -> the pairs that budget's own seeds decide), also the share of pairs it decides
    (`coverage`; `abstained` is 1 - coverage) and its accuracy on the pairs it decides (`accuracy_decided`; a budget
    missing from `resolved` gets neither); with `seeds` (budget
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
            "accuracy_stderr": pair_stderr([float(x) for x in agree]),
            "resolved_pairs": len(firm),
            "accuracy_resolved": float(np.mean(firm)) if firm else None,
        }
        if seeds is not None:
            out[str(budget)].update(seeds=seeds[budget], compute_share=budget * seeds[budget] / budgets[-1])
        if resolved is not None and budget in resolved:
            decided = [ok for (a, b), ok in zip(pairs, agree, strict=True) if frozenset((a, b)) in resolved[budget]]
            out[str(budget)].update(
                decided_pairs=len(decided),
                coverage=len(decided) / len(pairs) if pairs else None,
                abstained=1 - len(decided) / len(pairs) if pairs else None,
                accuracy_decided=float(np.mean(decided)) if decided else None,
            )
    return out
