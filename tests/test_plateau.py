"""Where a run stopped learning (`analysis.plateau`, issue #44 item 1): the rule's parts pinned by cases whose answer
flips when the rule is mutated, and its invariance to the evaluation cadence as a property over generated curves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, assume, given, settings
from hypothesis import strategies as st

from yieldgate.analysis.fit import eval_noise
from yieldgate.analysis.plateau import MIN_EVALS, THRESHOLD, plateau


def law(t, drop=3.0, beta=0.5):
    return 2.0 + drop * (np.asarray(t, dtype=float) / 100) ** -beta


def judged(x, y):
    return plateau(x, y, eval_noise(x, y))


def test_a_run_that_stops_learning_has_its_plateau_where_it_stopped():
    x = np.arange(250, 10_001, 250.0)
    y = law(np.minimum(x, 5000)) + np.random.default_rng(0).normal(0, 0.01, len(x))
    found = judged(x, y)
    assert abs(found.start - 5000) <= 250 and found.statistic > THRESHOLD  # within one evaluation interval
    assert found.evaluations == int((x >= found.start).sum())


def test_a_run_that_keeps_learning_has_none():
    x = np.arange(250, 10_001, 250.0)
    y = law(x) + np.random.default_rng(0).normal(0, 0.01, len(x))
    found = judged(x, y)
    assert found.start is None and found.unresolved is None and found.statistic < THRESHOLD


def test_the_statistic_is_read_against_the_threshold_not_beside_it():
    """A small stop (0.03 nats short of the law at the end, noise 0.004): its statistic lies between THRESHOLD / 4 and
    THRESHOLD at one noise and far above it at a third of that noise, so a rule that ignores the threshold, or inverts
    the comparison, gives one answer for both."""
    x = np.arange(250, 10_001, 250.0)
    y = law(np.minimum(x, 8500), drop=0.6)
    rng = np.random.default_rng(1)
    noisy = y + rng.normal(0, 0.004, len(x))
    quiet = y + rng.normal(0, 0.001, len(x))
    loud, soft = plateau(x, noisy, 0.012), plateau(x, quiet, 0.001)
    assert loud.start is None and soft.start == 8500, (loud, soft)


def test_a_plateau_needs_min_evals_evaluations_on_it():
    """Six evaluations are the fewest judged: three on the law up to the start, the start and three more after it."""
    x = np.arange(1, 7, dtype=float) * 1000
    y = law(np.minimum(x, 3000)) + np.array([0, 0, 0, 1, -1, 1]) * 1e-4
    assert MIN_EVALS == 4
    assert plateau(x[:5], y[:5], 0.001).unresolved is not None
    found = plateau(x, y, 0.001)
    assert found.unresolved is None and found.start == 3000 and found.evaluations == MIN_EVALS


def test_a_curve_that_never_learned_is_all_plateau_and_noise_must_be_known():
    x = np.arange(1, 21, dtype=float) * 1000
    y = 3.0 + np.random.default_rng(2).normal(0, 0.01, len(x))
    found = judged(x, y)
    assert found.start == x[0] and found.evaluations == len(x)
    assert plateau(x, law(x), float("nan")).unresolved == "no evaluation noise to judge against"


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate])
@given(
    drop=st.floats(0.5, 4.0),
    beta=st.floats(0.2, 0.8),
    stop=st.one_of(st.none(), st.floats(0.3, 0.7)),
    cadences=st.sampled_from([(100, 250), (100, 500), (250, 500), (200, 400)]),
    seed=st.integers(0, 1000),
)
def test_the_plateau_does_not_depend_on_how_often_one_evaluates(drop, beta, stop, cadences, seed):
    """The same run evaluated at two cadences (noise 0.01): a run that keeps learning has no plateau at either; one
    that stops has its plateau at both, the share of the run after it within 10 points of the truth (the issue's
    tolerance between cadences). A stop is generated only where it is resolvable at the coarser cadence: the
    statistic of its noiseless curve there is 3x the threshold (a gentle law's late fall, refitted, hides a stop that
    leaves it a few noise units short; a finer cadence then sees it and a coarser one need not)."""
    total = 10_000
    if stop is not None:  # resolvable: the noiseless curve's statistic at the coarser cadence is 3x the threshold
        x = np.arange(max(cadences), total + 1, max(cadences), dtype=float)
        signal = plateau(x, law(np.minimum(x, stop * total), drop, beta), 0.01).statistic
        assume(signal is not None and signal >= 3 * THRESHOLD)
    rng = np.random.default_rng(seed)
    shares = []
    for every in cadences:
        x = np.arange(every, total + 1, every, dtype=float)
        stopped = x if stop is None else np.minimum(x, stop * total)
        found = judged(x, law(stopped, drop, beta) + rng.normal(0, 0.01, len(x)))
        shares.append(None if found.start is None else 1 - found.start / total)
    if stop is None:
        assert shares == [None, None], shares
    else:
        assert all(s is not None and abs(s - (1 - stop)) <= 0.10 for s in shares), (shares, 1 - stop)
