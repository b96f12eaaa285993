"""Adaptive seeds: compute spent on the recipe pairs still within noise of each other.

Most misses of a cheap screen are pairs close at the target, and uniform seeds spend as much on a recipe that is
already separated from every other as on one that is not. After a first pass (at least two seeds a recipe, so that
the seeds' noise can be measured), each round gives one more seed to every recipe that is still in a pair within
noise (`ranking.beyond_seed_noise`'s rule: a difference of means within one noise unit of such a difference), and
none to a recipe separated from every other: successive halving over recipes, the field narrowing as pairs are
decided. It stops when every pair is decided, when the compute is spent, or when no recipe in a close pair has a
seed left to draw. A round that the remaining compute cannot pay for whole goes to the recipes in the most close
pairs first (then by name), so that the compute spent equals the cap exactly when there is work left: the measure
of the mode is its accuracy beside uniform seeds at equal compute (`benchmarks/bench_decide.py`).

`adaptive_seeds` is the loop, pure: `draw(recipes)` trains (or, in the benchmark, looks up) one more probe of each
recipe named and returns their scores. The campaign's mode (`probe.campaign.adaptive`) draws by training probes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from yieldgate.analysis.ranking import beyond_seed_noise

__all__ = ["AdaptiveRun", "close_recipes", "adaptive_seeds"]

Scores = dict[str, dict[int, float]]
"""recipe -> seed -> score."""


@dataclass(kw_only=True)
class AdaptiveRun:
    """What an adaptive run spent and why it stopped."""

    scores: Scores
    """Every probe's score, the first pass's and the rounds'."""
    probes: int
    """Probes scored in all (the first pass's included)."""
    rounds: list[list[str]] = field(default_factory=list)
    """The recipes given one more seed, round by round."""
    stopped: str = ""
    """`decided` (every pair beyond noise), `compute` (the cap reached) or `exhausted` (no seed left to draw)."""

    def to_dict(self) -> dict[str, Any]:
        return {"probes": self.probes, "rounds": self.rounds, "stopped": self.stopped}


def close_recipes(scores: Scores) -> list[str]:
    """The recipes in at least one pair within noise, those in the most such pairs first (then by name); every recipe
    when the noise cannot be measured (a recipe with fewer than two finite scores)."""
    decided = beyond_seed_noise(scores)
    if decided is None:
        return sorted(scores)
    count = dict.fromkeys(scores, 0)
    for a, b in itertools.combinations(sorted(scores), 2):
        if frozenset((a, b)) not in decided:
            count[a] += 1
            count[b] += 1
    return sorted((r for r, n in count.items() if n), key=lambda r: (-count[r], r))


def adaptive_seeds(first: Scores, draw: Callable[[list[str]], Scores], *, max_probes: int) -> AdaptiveRun:
    """Successive halving over recipes (module docstring): from the first pass's `first` scores, rounds of one more
    seed for each recipe still in a pair within noise, `draw(recipes)` scoring them (a recipe it returns nothing for
    has no seed left), until every pair is decided, `max_probes` probes are scored in all, or nothing is left."""
    scores = {r: dict(v) for r, v in first.items()}
    run = AdaptiveRun(scores=scores, probes=sum(map(len, scores.values())))
    while True:
        close = close_recipes(scores)
        if not close:
            run.stopped = "decided"
            return run
        room = max_probes - run.probes
        if room <= 0:
            run.stopped = "compute"
            return run
        drawn = draw(close[:room])
        added = [r for r in close[:room] if drawn.get(r)]
        if not added:
            run.stopped = "exhausted"
            return run
        for recipe in added:
            scores[recipe].update(drawn[recipe])
            run.probes += len(drawn[recipe])
        run.rounds.append(added)
