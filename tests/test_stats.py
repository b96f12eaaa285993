"""analysis/stats.py: the one statistical rule, exact for pure math, and every consumer routed through it."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from yieldgate.analysis import compare, ranking, stats
from yieldgate.gate import evidence, requirements
from yieldgate.track import batch_check


def test_t_quantiles_and_family_levels_exactly():
    assert stats.t_quantile(0.95, 2) == float(scipy_stats.t.ppf(0.975, 2))
    assert round(stats.t_quantile(0.95, 2), 3) == 4.303  # the table value, not the normal 1.96
    assert stats.family_level(0.95, 5) == 1 - 0.05 / 5
    assert stats.family_level(0.9, 1) == 0.9
    with pytest.raises(ValueError, match="0 < level < 1"):
        stats.family_level(1.0, 2)


def test_mean_interval_over_seeds_is_a_t_interval():
    iv = stats.mean_interval([1.0, 2.0, 3.0], 0.95)
    half = float(scipy_stats.t.ppf(0.975, 2)) * 1.0 / math.sqrt(3)
    assert (iv.estimate, iv.low, iv.high, iv.dof, iv.n) == (2.0, 2.0 - half, 2.0 + half, 2, 3)
    assert iv.to_dict()["kind"] == "mean over seeds" and iv.level == 0.95
    assert stats.mean_interval([1.0], 0.95) is None


def test_unpaired_difference_is_welch_and_a_single_seed_borrows_the_other_sides_spread():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0, 8.0])
    va, vb = a.var(ddof=1) / 3, b.var(ddof=1) / 4
    dof = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 3)
    iv = stats.difference(a, b, 0.9)
    half = float(scipy_stats.t.ppf(0.95, dof)) * math.sqrt(va + vb)
    assert (iv.estimate, iv.dof, iv.kind) == (3.0, dof, "difference")
    assert iv.low == 3.0 - half and iv.high == 3.0 + half
    one = stats.difference(a, [5.0], 0.8)
    assert one.dof == 2.0 and one.high == 3.0 + float(scipy_stats.t.ppf(0.9, 2)) * math.sqrt(1.0 / 3 + 1.0)
    assert stats.difference([1.0], [2.0], 0.9) is None


def test_paired_difference_uses_the_shared_seeds_and_the_family():
    a = {0: 1.0, 1: 2.0, 2: 3.0, 9: 100.0}
    b = {0: 1.5, 1: 2.25, 2: 3.75, 7: -5.0}
    iv = stats.difference(a, b, 0.9, paired=True, family=3)
    d = np.array([0.5, 0.25, 0.75])
    half = float(scipy_stats.t.ppf(0.5 + (1 - 0.1 / 3) / 2, 2)) * d.std(ddof=1) / math.sqrt(3)
    assert (iv.estimate, iv.low, iv.high, iv.family, iv.kind) == (0.5, 0.5 - half, 0.5 + half, 3, "paired")
    assert stats.verdict(iv) == "within noise" and stats.verdict(iv, tie=True) == "tie"
    assert stats.verdict(stats.difference([1.0, 1.1, 0.9], [5.0, 5.1, 4.9], 0.95)) == "beyond noise"
    assert stats.verdict(None) is None


def test_an_estimate_outside_its_interval_is_refused_and_identical_points_are_told():
    with pytest.raises(ValueError, match="outside its interval"):
        stats.Interval(2.0, 0.0, 1.0, 0.9, "mean", 3)
    with pytest.raises(ValueError, match="interval kind"):
        stats.Interval(0.5, 0.0, 1.0, 0.9, "guess", 3)
    assert stats.identical([4.684, 4.684], [4.606, 4.606]) and not stats.identical([1.0, 1.0], [2.0, 2.1])
    assert not stats.identical([1.0], [2.0])  # one seed a side: nothing is known either way
    assert stats.seeds_for_margin(3, 2.0, 1.0) == 9 and stats.seeds_for_margin(3, 10.0, 1.0) == 12


@pytest.mark.parametrize("module", [compare, ranking, requirements, evidence, batch_check])
def test_every_consumer_decides_through_stats(module):
    source = inspect.getsource(module)
    assert "from yieldgate.analysis import stats" in source and "stats." in source
    for copy in ("scipy.stats", "from scipy import stats", "1.96", ".ppf(", "norm.ppf"):
        assert copy not in source, f"{module.__name__} keeps its own {copy!r}"
