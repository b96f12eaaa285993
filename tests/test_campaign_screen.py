"""One noise rule per campaign screen (issue #43 item 10): a screen tied all three recipes in a budget's ranking while
its decision accuracy decided two of their three pairs at that budget, by another rule (one pooled noise unit). Now
a smaller budget abstains on exactly the pairs its own ranking ties (`campaign.screen_accuracy`)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from yieldgate.analysis.campaign import screen_accuracy
from yieldgate.analysis.ranking import beyond_seed_noise, rank

LEVEL = 0.9


def rankings(scores: dict[int, dict[str, dict[int, float]]]) -> dict[str, dict]:
    return {str(b): {"bpb": rank(by, lower_is_better=True, level=LEVEL)} for b, by in scores.items()}


def test_a_budget_whose_ranking_ties_every_pair_abstains_on_every_pair():
    """Three recipes, three seeds that disagree by seed: the family-wise paired ranking ties all three pairs at the
    smaller budget, where one pooled noise unit would decide all three. The screen abstains on all three."""
    small = {
        "a": {0: 1.00, 1: 1.30, 2: 1.10},
        "b": {0: 1.32, 1: 1.18, 2: 1.45},
        "c": {0: 1.60, 1: 1.35, 2: 1.52},
    }
    large = {"a": {0: 0.9, 1: 0.91, 2: 0.92}, "b": {0: 1.0, 1: 1.01, 2: 1.02}, "c": {0: 1.1, 1: 1.11, 2: 1.12}}
    ranked = rankings({100: small, 400: large})
    assert all(not p["resolved"] for p in ranked["100"]["bpb"]["pairs"])  # the table: three ties
    assert len(beyond_seed_noise(small) or ()) == 3  # what the old rule decided on the same screen
    entry = screen_accuracy(ranked)["100"]
    assert (entry["decided_pairs"], entry["abstained"], entry["accuracy_decided"]) == (0, 1.0, None)


SEED_SCORES = st.lists(st.floats(0.5, 2.0), min_size=2, max_size=4)


@settings(max_examples=40, deadline=None)
@given(
    recipes=st.integers(2, 4),
    draws=st.lists(st.tuples(SEED_SCORES, SEED_SCORES), min_size=4, max_size=4),
)
def test_a_smaller_budget_decides_exactly_the_pairs_its_ranking_resolves(recipes, draws):
    names = "abcd"[:recipes]
    scores = {
        budget: {n: dict(enumerate(draws[i][k])) for i, n in enumerate(names)} for k, budget in enumerate((100, 400))
    }
    ranked = rankings(scores)
    entry = screen_accuracy(ranked)["100"]
    pairs = ranked["100"]["bpb"]["pairs"]
    resolved = [p for p in pairs if p["resolved"]]
    assert entry["decided_pairs"] == len(resolved)
    assert entry["abstained"] == 1 - len(resolved) / len(list(itertools.combinations(names, 2)))
    ties = {frozenset((e["recipe"], t)) for e in ranked["100"]["bpb"]["order"] for t in e["ties"]}
    assert len(ties) == len(pairs) - len(resolved)  # abstained on: the table's ties, no more, no fewer
