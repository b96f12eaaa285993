"""The scoring of `bench_decide.py`, pure: the reference's pairs and noise, the figures of one configuration of probes,
the tolerance a retrained reference probe is held to, and what the reference's separated pairs cover.

**The reference's noise is per recipe** (`analysis.ranking.recipe_noise`: its 10 seeds a recipe give each its own
spread, 0.008-0.018 bpb on `decide.yaml`; one pooled spread overstated the certainty of the noisier recipes' pairs).
A pair's difference d of 10-seed means has the standard deviation sqrt(s_a^2 / 10 + s_b^2 / 10), and
q = Phi(d / that) is the chance that ten seeds order it the true way (a plug-in estimate); its **noise units** are
d / sqrt((s_a^2 + s_b^2) / 2), the difference in seeds' standard deviations of the two recipes.

**The figures of a configuration** (a budget and k of its seeds, each the mean over every k-subset of its seeds):

- **All-pairs accuracy**, the headline: DataDecide's measure (Magnusson et al., 2025), the share of the recipe pairs
  the probes' means order as the reference's means do, with its **standard error over pairs** (`ranking.pair_stderr`:
  the standard deviation over pairs of each pair's agreement, averaged over the seed subsets, over sqrt(pairs); pairs
  sharing a recipe are not independent, so it understates the spread over other recipe sets).
- **Accuracy on the decided pairs and coverage**: the probes decide a pair when its difference of means is beyond one
  noise unit of their own seeds (`ranking.beyond_seed_noise`, per recipe where seeds allow); coverage is the share of
  pairs decided. With one seed there is no noise to measure and nothing is decided (coverage 0).
- **De-noised accuracy**, secondary: the accuracy against the true order with the reference's own noise taken out.
  A probe that orders a pair truly with probability p agrees with the reference with probability
  p q + (1 - p)(1 - q), so p = sum(agreement - (1 - q)) / sum(2q - 1) over the pairs; a perfect probe scores 1 and a
  coin 0.5, and a pair the reference orders at random weighs nothing. Clipped to [0, 1]. The plug-in q overstates
  the closest pairs', which lowers this figure: it errs against the probes.
- **Accuracy on the separated pairs**, those >= 3 noise units apart at the reference (q > 0.999 there), with what
  they cover (`difference_kinds`): on `decide.yaml` every one sets a recipe with the First Folio source against one
  without, so the figure measures that one effect, not decisions between filters, dedup or weights.

**The retrained reference probe** (`tolerance`): its value must lie within 1% of its recipe's seed standard deviation
of the stored one (1.1e-4 bpb for `base` seed 0): another CPU or torch build differs by ~1e-7 bpb, a changed trainer
by a share of the seed noise or more. `sensitivity` says which figures a drift of that size on every reference probe
could move: none of the orderings (all-pairs, decided and separated accuracy) unless two recipes' means lie within
twice the tolerance; the noise units and q (so the de-noised figure) by at most the bounds it gives.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from scipy.stats import norm

from yieldgate.analysis.ranking import beyond_seed_noise, pair_stderr, recipe_noise, signal_to_noise

SEPARATED_UNITS = 3.0
TOLERANCE_SHARE = 0.01
"""A retrained reference probe may differ from the stored value by this share of its recipe's seed std."""

Probes = dict[str, dict[int, float]]
"""recipe -> seed -> score."""


def reference_pairs(by_recipe: Probes) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Every recipe pair at the largest budget, `a` the better (lower bpb) by the mean over its seeds: its difference
    `diff` (>= 0), `sd` (the standard deviation of that difference of means), `units` (module docstring) and `q`;
    sorted by units. Returned with each recipe's noise (`recipe_noise`)."""
    noise = recipe_noise(by_recipe)
    if noise is None:
        raise ValueError("the reference needs two or more finite scores a recipe")
    means = {r: float(np.mean(list(v.values()))) for r, v in by_recipe.items()}
    pairs = []
    for x, y in itertools.combinations(sorted(by_recipe), 2):
        a, b = (x, y) if means[x] <= means[y] else (y, x)
        diff = means[b] - means[a]
        sd = math.sqrt(noise[a] ** 2 / len(by_recipe[a]) + noise[b] ** 2 / len(by_recipe[b]))
        seed_sd = math.sqrt((noise[a] ** 2 + noise[b] ** 2) / 2)
        pairs.append(
            {
                "a": a,
                "b": b,
                "diff": diff,
                "sd": sd,
                "units": diff / seed_sd if seed_sd else math.inf,
                "q": float(norm.cdf(diff / sd)) if sd else 1.0,
            }
        )
    return sorted(pairs, key=lambda p: p["units"]), noise


def tolerance(noise: dict[str, float], recipe: str) -> float:
    """How far a retrained reference probe of `recipe` may lie from its stored value (module docstring)."""
    return TOLERANCE_SHARE * noise[recipe]


def sensitivity(pairs: list[dict[str, Any]], tol: float) -> dict[str, Any]:
    """What a drift of up to `tol` on every reference probe could move: the pairs whose order could flip (their
    means within 2 tol) or that could cross the separated line, and the most any pair's noise units and q could
    move. A mean moves by at most tol, so a difference by 2 tol; a seed std by at most tol sqrt(n / (n - 1)) <
    1.06 tol with 10 seeds, so the standard deviations under the units and q by as much (they are root mean squares
    of seed stds); the bounds are the ratios at those extremes (both rise with the difference, fall with the
    spread)."""
    wide = 1.06 * tol
    units = {}
    q = 0.0
    for p in pairs:
        seed_sd = p["diff"] / p["units"] if p["units"] > 0 else 0.0
        high = (p["diff"] + 2 * tol) / max(seed_sd - wide, 1e-300)
        units[id(p)] = max(high - p["units"], p["units"] - max(p["diff"] - 2 * tol, 0.0) / (seed_sd + wide))
        up = norm.cdf((p["diff"] + 2 * tol) / max(p["sd"] - wide, 1e-300))
        q = max(q, up - p["q"], p["q"] - norm.cdf((p["diff"] - 2 * tol) / (p["sd"] + wide)))
    flips = [p for p in pairs if p["diff"] <= 2 * tol]
    edge = [p for p in pairs if abs(p["units"] - SEPARATED_UNITS) <= units[id(p)]]
    moved = ["de-noised accuracy (through q)", "noise units"]
    if flips:
        moved = ["all-pairs accuracy", "decided accuracy", *moved]
    if flips or edge:
        moved.insert(len(moved) - 2, "separated accuracy")
    return {
        "tolerance_bpb": tol,
        "flippable_pairs": [f"{p['a']} < {p['b']}" for p in flips],
        "separated_edge": [f"{p['a']} < {p['b']}" for p in edge],
        "closest_bpb": min(p["diff"] for p in pairs),
        "units_at_most": max(units.values()),
        "q_at_most": float(q),
        "moves": moved,
    }


def denoised(agreement: list[float], q: list[float]) -> float | None:
    """The accuracy against the true order: sum(agreement - (1 - q)) / sum(2q - 1), clipped to [0, 1] (module
    docstring); None when the reference orders every pair at random."""
    weight = sum(2 * x - 1 for x in q)
    if weight <= 0:
        return None
    return min(1.0, max(0.0, sum(a - (1 - x) for a, x in zip(agreement, q, strict=True)) / weight))


def agrees(means: dict[str, float], pair: dict[str, Any]) -> float:
    """1 when the probes' means order the pair as the reference does, 0 when the other way, 0.5 on a tie."""
    d = means[pair["b"]] - means[pair["a"]]
    return 1.0 if d > 0 else 0.0 if d < 0 else 0.5


def score(probes: Probes, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """One set of probes (every seed given): per pair its agreement with the reference, and which it decides."""
    means = {r: float(np.mean(list(v.values()))) for r, v in probes.items()}
    decided = beyond_seed_noise(probes) or set()
    return {
        "agreement": [agrees(means, p) for p in pairs],
        "decided": [frozenset((p["a"], p["b"])) in decided for p in pairs],
    }


def figures(scored: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of a configuration from its seed subsets' `score`s: all-pairs accuracy with its standard error,
    accuracy on the decided pairs and coverage, de-noised accuracy and accuracy on the separated pairs."""
    per_pair = [float(np.mean(col)) for col in zip(*(s["agreement"] for s in scored), strict=True)]
    far = [a for a, p in zip(per_pair, pairs, strict=True) if p["units"] >= SEPARATED_UNITS]
    right = sum(a * d for s in scored for a, d in zip(s["agreement"], s["decided"], strict=True))
    decided = sum(sum(s["decided"]) for s in scored)
    return {
        "subsets": len(scored),
        "accuracy": float(np.mean(per_pair)),
        "stderr": pair_stderr(per_pair),
        "accuracy_min": float(min(np.mean(s["agreement"]) for s in scored)),
        "coverage": decided / (len(scored) * len(pairs)),
        "accuracy_decided": right / decided if decided else None,
        "denoised": denoised(per_pair, [p["q"] for p in pairs]),
        "separated_pairs": len(far),
        "accuracy_separated": float(np.mean(far)) if far else None,
        "per_pair": per_pair,
    }


def configuration(probes: Probes, pairs: list[dict[str, Any]], k: int, budget: int, largest: int) -> dict[str, Any]:
    """The figures for `budget` with k seeds, each the mean over every k-subset of the seeds all recipes have
    (pooled over the subsets: accuracy on the decided pairs is right decisions over decisions made)."""
    seeds = sorted(set.intersection(*(set(v) for v in probes.values())))
    subsets = [
        score({r: {s: v[s] for s in subset} for r, v in probes.items()}, pairs)
        for subset in itertools.combinations(seeds, k)
    ]
    return {"budget": budget, "seeds": k, "compute_share": budget * k / largest, **figures(subsets, pairs)}


def curve(smaller: dict[int, Probes], pairs: list[dict[str, Any]], largest: int) -> list[dict[str, Any]]:
    """Every smaller budget with k = 1..all of its seeds, by compute."""
    rows = []
    for budget, probes in smaller.items():
        seeds = set.intersection(*(set(v) for v in probes.values()))
        rows += [configuration(probes, pairs, k, budget, largest) for k in range(1, len(seeds) + 1)]
    return sorted(rows, key=lambda r: (r["compute_share"], r["budget"]))


def difference_kinds(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """How two recipes (campaign `recipes` entries as dumped) differ: `source` (the sources trained on), `weight`
    (the same sources, other weights), `filter`, `dedup`, `curriculum`."""
    trained = lambda r: {s["name"]: s["weight"] for s in r["sources"] if s["weight"] > 0}  # noqa: E731
    kinds = []
    if set(trained(a)) != set(trained(b)):
        kinds.append("source")
    elif trained(a) != trained(b):
        kinds.append("weight")
    for kind, key in (("filter", "filters"), ("dedup", "dedup"), ("curriculum", "curriculum")):
        if a.get(key) != b.get(key):
            kinds.append(kind)
    return kinds


def separated_cover(pairs: list[dict[str, Any]], recipes: dict[str, Any]) -> dict[str, Any]:
    """What the separated pairs (>= 3 noise units apart) cover: how many differ by each kind, and the kinds that no
    separated pair tests alone (a pair differing by that kind only)."""
    far = [p for p in pairs if p["units"] >= SEPARATED_UNITS]
    kinds = {f"{p['a']} < {p['b']}": difference_kinds(recipes[p["a"]], recipes[p["b"]]) for p in far}
    count: dict[str, int] = {}
    for found in kinds.values():
        for kind in found:
            count[kind] = count.get(kind, 0) + 1
    alone = sorted({found[0] for found in kinds.values() if len(found) == 1})
    every = sorted(k for k, n in count.items() if n == len(far)) if far else []
    return {"pairs": len(far), "kinds": count, "alone": alone, "in_every_pair": every, "by_pair": kinds}


# Choices made from the probes alone: their signal-to-noise (`analysis.ranking.signal_to_noise`), never their
# agreement with the reference they are then scored against.

Variants = dict[str, dict[int, Probes]]
"""variant (a metric and a scoring window, `metric@window`) -> budget -> recipe -> seed -> score."""


def seeds_within(budget: int, largest: int, share: float) -> int:
    """Seeds a recipe that `budget` affords within `share` of one largest-budget probe."""
    return int(share * largest / budget + 1e-9)


def choose_variant(variants: Variants) -> dict[str, Any]:
    """The metric and scoring window with the highest signal-to-noise, averaged over the smaller budgets (each
    measured on all its seeds); every variant's figures beside it."""
    snr = {
        name: {b: signal_to_noise(probes) for b, probes in by_budget.items()} for name, by_budget in variants.items()
    }
    mean = {name: float(np.mean([x for x in v.values() if x is not None] or [np.nan])) for name, v in snr.items()}
    best = max((n for n in mean if np.isfinite(mean[n])), key=lambda n: mean[n])
    return {"chosen": best, "snr": {n: {str(b): x for b, x in v.items()} for n, v in snr.items()}, "snr_mean": mean}


def choose_budget(probes: dict[int, Probes], largest: int, share: float, *, first: int = 1) -> dict[str, Any] | None:
    """The budget whose seeds within `share` of the compute separate recipes most: the highest signal-to-noise x
    sqrt(seeds) (a pair's expected difference over its noise unit grows with sqrt(k)), among the budgets that afford
    at least `first` seeds a recipe and have them; None when none does."""
    options = {}
    for budget, by_recipe in probes.items():
        k = seeds_within(budget, largest, share)
        have = min(len(v) for v in by_recipe.values())
        snr = signal_to_noise(by_recipe)
        if k >= first and have >= k and snr is not None:
            options[budget] = {"seeds": k, "snr": snr, "separation": snr * math.sqrt(k)}
    if not options:
        return None
    budget = max(options, key=lambda b: (options[b]["separation"], -b))
    return {"budget": budget, **options[budget], "options": {str(b): o for b, o in sorted(options.items())}}


def adaptive_curve(
    probes: Probes, pairs: list[dict[str, Any]], budget: int, largest: int, *, first: int, orders: int = 100
) -> list[dict[str, Any]]:
    """Adaptive seeds (`analysis.adaptive.adaptive_seeds`) at `budget` beside uniform seeds at equal compute: for
    each k from `first` + 1 to the seeds every recipe has, the adaptive mode given the compute of k uniform seeds a
    recipe (first pass `first` seeds, then rounds), over `orders` random orders of the seeds (one order shared by
    the recipes, as uniform seeds share theirs), and uniform k seeds over every k-subset (`configuration`)."""
    seeds = sorted(set.intersection(*(set(v) for v in probes.values())))
    rng = np.random.default_rng(0)
    perms = [list(rng.permutation(seeds)) for _ in range(orders)]
    rows = []
    for k in range(first + 1, len(seeds) + 1):
        runs, spent = [], []
        for order in perms:
            run = _adaptive_once(probes, pairs, order, first, k * len(probes))
            runs.append(run["score"])
            spent.append(run["probes"])
        uniform = configuration(probes, pairs, k, budget, largest)
        rows.append(
            {
                "budget": budget,
                "seeds": k,
                "compute_share": budget * k / largest,
                "adaptive": {
                    **{key: v for key, v in figures(runs, pairs).items() if key != "per_pair"},
                    "compute_share": budget * float(np.mean(spent)) / (len(probes) * largest),
                },
                "uniform": {key: v for key, v in uniform.items() if key != "per_pair"},
            }
        )
    return rows


def _adaptive_once(
    probes: Probes, pairs: list[dict[str, Any]], order: list[int], first: int, max_probes: int
) -> dict[str, Any]:
    """One adaptive run drawing each recipe's seeds in `order`."""
    from yieldgate.analysis.adaptive import adaptive_seeds

    taken = dict.fromkeys(probes, first)

    def draw(recipes: list[str]) -> Probes:
        out = {}
        for r in recipes:
            if taken[r] < len(order):
                seed = int(order[taken[r]])
                out[r] = {seed: probes[r][seed]}
                taken[r] += 1
        return out

    start = {r: {int(s): v[int(s)] for s in order[:first]} for r, v in probes.items()}
    run = adaptive_seeds(start, draw, max_probes=max_probes)
    return {"score": score(run.scores, pairs), "probes": run.probes}
