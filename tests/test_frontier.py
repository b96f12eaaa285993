from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from yieldgate.analysis.compare import RunData
from yieldgate.analysis.frontier import frontier, pareto_front


def test_pareto_front_of_known_points_with_ties():
    points = {
        "fast": (1000.0, 900.0),  # fastest, needs the most tokens: on the front
        "efficient": (400.0, 300.0),  # fewest tokens: on the front
        "middle": (700.0, 500.0),  # beaten by neither: on the front
        "twin": (700.0, 500.0),  # the same point as middle: both on it
        "slow": (600.0, 600.0),  # middle is faster and needs fewer tokens
        "same_speed": (1000.0, 950.0),  # as fast as fast, needs more: dominated
    }
    assert pareto_front(points) == ["fast", "efficient", "middle", "twin"]
    assert pareto_front({"only": (1.0, 1.0)}) == ["only"]
    assert pareto_front({}) == []


def _run(name, slope, rate, *, wall=True, points=11, span=10_000.0):
    """loss = 10 - slope * tokens / 1000 at `rate` tokens/s."""
    tokens = np.linspace(0, span, points)
    steps = pd.DataFrame({"step": np.arange(points), "tokens": tokens})
    if wall:
        steps["wall_s"] = tokens / rate
    evals = pd.DataFrame(
        {
            "step": np.arange(points),
            "tokens": tokens,
            "task": "val",
            "metric": "loss",
            "value": 10 - slope * tokens / 1000,
            "higher_is_better": False,
        }
    )
    return RunData(name=name, steps=steps, evals=evals)


def test_frontier_lists_runs_that_never_reach_the_target_or_lack_time():
    runs = [
        _run("a", 1.0, 100.0),
        _run("b", 2.0, 50.0),
        _run("c", 0.5, 80.0),
        _run("d", 0.2, 500.0),
        _run("e", 2.0, 50.0, wall=False),
    ]
    result = frontier(runs, target=5.0)
    # tokens to reach loss 5: a 5,000, b 2,500, c 10,000; d reaches only 8 by the end
    assert result.points == {
        "a": {"tokens_per_s": pytest.approx(100.0), "tokens_to_target": pytest.approx(5000.0)},
        "b": {"tokens_per_s": pytest.approx(50.0), "tokens_to_target": pytest.approx(2500.0)},
        "c": {"tokens_per_s": pytest.approx(80.0), "tokens_to_target": pytest.approx(10000.0)},
    }
    assert result.front == ["a", "b"]  # fastest first; c is slower than a and needs more tokens
    assert result.unplaced == {
        "d": "never reaches the target val/loss 5 (its best: 8)",
        "e": "no wall-clock time recorded: no tokens/s",
    }
    default = frontier(runs[:3])
    assert default.target == pytest.approx(5.0) and default.notes[0].startswith("target val/loss 5: the worst best")
    assert set(default.points) == {"a", "b", "c"} and default.unplaced == {}


def test_a_metric_that_rises_is_reached_from_below():
    runs = [_run("a", 1.0, 100.0), _run("b", 2.0, 50.0)]
    for r in runs:
        r.evals = r.evals.assign(metric="acc", value=1 - r.evals["value"] / 10, higher_is_better=True)
    result = frontier(runs, metric="acc", target=0.5)
    assert result.higher_is_better and result.front == ["a", "b"]
    assert result.points["b"]["tokens_to_target"] == pytest.approx(2500.0)
