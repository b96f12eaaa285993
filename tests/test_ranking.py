"""Deciding beyond noise (`analysis.ranking`): noise per recipe where seeds allow, the standard error of an accuracy
over pairs, signal-to-noise; and adaptive seeds (`analysis.adaptive`): rounds only for the recipes still close."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import sem

from yieldgate.analysis.adaptive import adaptive_seeds, close_recipes
from yieldgate.analysis.ranking import (
    OWN_NOISE_SEEDS,
    beyond_seed_noise,
    decision_accuracy,
    pair_stderr,
    recipe_noise,
    signal_to_noise,
)


def spread(mean: float, sd: float, k: int) -> dict[int, float]:
    """k seeds with mean `mean` and sample standard deviation exactly `sd`."""
    z = np.arange(k) - (k - 1) / 2
    z = z / np.std(z, ddof=1)
    return {s: mean + sd * float(x) for s, x in enumerate(z)}


def test_a_recipe_with_seeds_enough_is_judged_by_its_own_noise():
    # Three recipes of 6 seeds: a and b quiet (sd 0.01), c noisy (sd 0.1). The pooled sd is sqrt((1 + 1 + 100) / 3)
    # x 0.01 = 0.0583, a pair's unit 0.0583 x sqrt(2/6) = 0.0337: a-b (0.02 apart) within it, though their own
    # unit is 0.01 x sqrt(2/6) = 0.0058; c's pairs, 0.15 apart, beyond either way (own unit 0.0582).
    scores = {"a": spread(1.0, 0.01, 6), "b": spread(1.02, 0.01, 6), "c": spread(1.15, 0.1, 6)}
    noise = recipe_noise(scores)
    assert noise == {"a": pytest.approx(0.01), "b": pytest.approx(0.01), "c": pytest.approx(0.1)}
    assert beyond_seed_noise(scores) == {frozenset("ab"), frozenset("ac"), frozenset("bc")}
    # With fewer seeds than OWN_NOISE_SEEDS a recipe's own spread is too uncertain: all pooled, a-b within it.
    few = {r: {s: v[s] for s in range(OWN_NOISE_SEEDS - 1)} for r, v in scores.items()}
    assert len(set(recipe_noise(few).values())) == 1
    assert frozenset("ab") not in beyond_seed_noise(few)


@settings(max_examples=30, deadline=None)
@given(
    means=st.lists(st.floats(-5, 5), min_size=2, max_size=6),
    k=st.integers(2, OWN_NOISE_SEEDS - 1),
    sd=st.floats(0.01, 1.0),
    scale=st.floats(0.1, 10.0),
    shift=st.floats(-100, 100),
)
def test_with_few_seeds_the_rule_is_the_pooled_one_and_units_do_not_matter(means, k, sd, scale, shift):
    """Below OWN_NOISE_SEEDS seeds every recipe has the pooled spread: a pair is decided when its difference of
    means exceeds sqrt(mean variance) x sqrt(2/k), the rule before noise per recipe; and a change of units (scale,
    shift) decides the same pairs."""
    rng = np.random.default_rng(len(means) * 31 + k)
    scores = {f"r{i}": {s: m + sd * float(rng.normal()) for s in range(k)} for i, m in enumerate(means)}
    unit = math.sqrt(float(np.mean([np.var(list(v.values()), ddof=1) for v in scores.values()]))) * math.sqrt(2 / k)
    mean = {r: float(np.mean(list(v.values()))) for r, v in scores.items()}
    gaps = {frozenset((a, b)): abs(mean[a] - mean[b]) for a, b in itertools.combinations(sorted(scores), 2)}
    assume(all(abs(g - unit) > 1e-6 * unit for g in gaps.values()))  # not on the line, where rounding decides
    assert beyond_seed_noise(scores) == {p for p, g in gaps.items() if g > unit}
    moved = {r: {s: scale * x + shift for s, x in v.items()} for r, v in scores.items()}
    assert beyond_seed_noise(moved) == beyond_seed_noise(scores)


def test_the_standard_error_over_pairs_is_scipys_sem():
    right = [1.0] * 15 + [0.0] * 6  # 71.4% of 21 pairs
    assert pair_stderr(right) == pytest.approx(sem(right))  # about +-10 points: 21 pairs say little
    assert pair_stderr(right) == pytest.approx(0.1010, abs=1e-4)
    assert pair_stderr([1.0]) is None
    out = decision_accuracy({1: {"a": 1, "b": 2, "c": 3}, 2: {"a": 1, "b": 3, "c": 2}}, set(), resolved={1: set()})["1"]
    assert out["accuracy_stderr"] == pytest.approx(sem([1, 1, 0])) and out["coverage"] == 0.0


def test_signal_to_noise_is_the_spread_of_recipes_over_the_spread_of_seeds():
    # Means 0, 1, 2 (sd 1), every recipe's seeds +-0.5 (sd 0.7071): 1.414.
    scores = {r: {0: m - 0.5, 1: m + 0.5} for r, m in {"a": 0.0, "b": 1.0, "c": 2.0}.items()}
    assert signal_to_noise(scores) == pytest.approx(math.sqrt(2))
    flipped = {r: {s: 7 - 3 * x for s, x in v.items()} for r, v in scores.items()}  # a higher-is-better twin
    assert signal_to_noise(flipped) == pytest.approx(math.sqrt(2))
    assert signal_to_noise({"a": {0: 1.0}, "b": {0: 2.0}}) is None  # one seed: no noise to measure
    assert signal_to_noise({"a": {0: 1.0, 1: 1.0}, "b": {0: 2.0, 1: 2.0}}) is None  # no spread between seeds


def pool(means: dict[str, float], sd: float, seeds: int, seed: int = 0) -> dict[str, dict[int, float]]:
    rng = np.random.default_rng(seed)
    return {r: {s: m + sd * float(rng.normal()) for s in range(seeds)} for r, m in means.items()}


def drawer(scores: dict[str, dict[int, float]], start: int):
    """`draw` for `adaptive_seeds` from a pool of scored seeds, each recipe's in order from `start`."""
    taken = dict.fromkeys(scores, start)

    def draw(recipes: list[str]) -> dict[str, dict[int, float]]:
        out = {}
        for r in recipes:
            if taken[r] < len(scores[r]):
                out[r] = {taken[r]: scores[r][taken[r]]}
                taken[r] += 1
        return out

    return draw


def test_adaptive_rounds_go_only_to_recipes_still_close():
    # a and b 0.01 apart, c far from both, every seed 0.02 off its recipe's mean (sd 0.0219 over 12 seeds): after
    # the first pass only a and b are close, and stay so (a unit of 0.0283 x sqrt(2/6) = 0.0163 at 6 seeds each).
    scores = {
        r: {s: m + (0.02 if s % 2 else -0.02) for s in range(12)} for r, m in {"a": 1.0, "b": 1.01, "c": 2.0}.items()
    }
    first = {r: {s: v[s] for s in (0, 1)} for r, v in scores.items()}
    assert close_recipes(first) == ["a", "b"]
    run = adaptive_seeds(first, drawer(scores, 2), max_probes=14)
    assert all(set(r) == {"a", "b"} for r in run.rounds) and run.probes == 14 and run.stopped == "compute"
    assert len(run.scores["c"]) == 2 and len(run.scores["a"]) == len(run.scores["b"]) == 6
    # Every pair far apart: nothing to add.
    done = adaptive_seeds(
        {r: {0: m, 1: m + 0.01} for r, m in {"a": 1.0, "b": 2.0}.items()}, drawer(scores, 2), max_probes=99
    )
    assert (done.stopped, done.probes, done.rounds) == ("decided", 4, [])
    # A pool used up stops the rounds before the compute is spent.
    short = adaptive_seeds(first, drawer({r: dict(list(v.items())[:4]) for r, v in scores.items()}, 2), max_probes=40)
    assert short.stopped == "exhausted" and short.probes == 10


@settings(max_examples=40, deadline=None)
@given(
    means=st.lists(st.floats(0, 1), min_size=3, max_size=7, unique=True),
    sd=st.floats(0.001, 0.5),
    cap=st.integers(0, 30),
    seed=st.integers(0, 1000),
)
def test_adaptive_never_spends_past_its_cap_and_a_round_only_on_close_recipes(means, sd, cap, seed):
    """Generated pools: the probes scored never exceed the first pass plus the cap; every round's recipes were
    close (in a pair within noise) when it was drawn; and it stops only decided, capped or with nothing to draw."""
    names = [f"r{i}" for i in range(len(means))]
    scores = pool(dict(zip(names, means, strict=True)), sd, 8, seed)
    first = {r: {s: v[s] for s in (0, 1)} for r, v in scores.items()}
    limit = 2 * len(names) + cap
    seen: dict[str, dict[int, float]] = {r: dict(v) for r, v in first.items()}
    draw = drawer(scores, 2)

    def checked(recipes: list[str]) -> dict[str, dict[int, float]]:
        assert set(recipes) <= set(close_recipes(seen))
        out = draw(recipes)
        for r, v in out.items():
            seen[r].update(v)
        return out

    run = adaptive_seeds(first, checked, max_probes=limit)
    assert run.probes <= limit and run.probes == sum(map(len, run.scores.values()))
    assert run.stopped in ("decided", "compute", "exhausted")
    if run.stopped == "decided":
        assert close_recipes(run.scores) == []
