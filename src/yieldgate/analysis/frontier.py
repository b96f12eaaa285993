"""The frontier across a set of runs: throughput (tokens/s) against sample efficiency (tokens to a target value of
the metric), with the Pareto front marked.

Time to target = tokens to target / tokens/s (DESIGN.md, "speedups multiply"), so neither axis alone says which run
is best. A run is on the front when no other run is at least as fast and needs at most as many tokens, while being
strictly better in one of the two; runs at the same point are both on it (neither beats the other). A run that never
reaches the target, or has no wall-clock time, has no point: it is listed with the reason, never dropped silently.

Tokens to target is the first crossing of the target (`compare.crossing`, linear between evaluations), in the
metric's own direction; tokens/s is the run's throughput to the target: those tokens over the wall-clock time at
which the run had them (`compare.time_at`), the figure `compare` splits its speedup by. A report shows that one
throughput on its page (runs table, frontier and comparison alike): the run's average over all its steps would
count time spent after the target, and the median of its logged tokens/s leaves out what the steps do not time
(evaluations, checkpoints), so two figures of one run could say different runs were faster. The default target is
the worst best value across the runs, so every run that has the metric reaches it (`compare` chooses the same way).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from yieldgate.analysis.compare import Comparison, RunData, crossing, run_curve, time_at
from yieldgate.errors import InputError
from yieldgate.names import LOSS_METRIC, VAL_TASK

__all__ = ["Frontier", "frontier", "pareto_front", "rates_to_target"]


def pareto_front(points: Mapping[str, tuple[float, float]]) -> list[str]:
    """The names whose (tokens/s, tokens to target) no other point dominates: higher tokens/s is better, fewer
    tokens is better. Equal points do not dominate each other. In the order of `points`."""
    front = []
    for name, (rate, need) in points.items():
        dominated = any(
            r >= rate and n <= need and (r > rate or n < need) for other, (r, n) in points.items() if other != name
        )
        if not dominated:
            front.append(name)
    return front


def rates_to_target(c: Comparison, *, steps: bool = False) -> dict[str, float | None]:
    """Each side of a comparison's throughput to its target, the frontier's figure: its tokens (`steps`: its steps or
    epochs, where the runs count no tokens) to the target over its time to it; `c.speedup["throughput"]`
    (`steps_per_s`) is B's over A's. None where either is unknown."""
    need = c.steps_to_target if steps else c.tokens_to_target
    out: dict[str, float | None] = {}
    for side in (c.a, c.b):
        amount, took = need[side], c.time_to_target_s[side]
        out[side] = amount / took if amount is not None and took else None
    return out


@dataclass
class Frontier:
    """Each run's point, the front, and the runs without a point (with why)."""

    metric: str
    target: float | None
    higher_is_better: bool
    points: dict[str, dict[str, float]]
    """run -> {"tokens_per_s", "tokens_to_target"}: the runs with a point (tokens/s: to the target)."""
    front: list[str]
    """The runs on the Pareto front, fastest first."""
    unplaced: dict[str, str]
    """run -> why it has no point (never reaches the target, no wall-clock time, no evaluations)."""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def frontier(
    runs: list[RunData], *, target: float | None = None, task: str = VAL_TASK, metric: str = LOSS_METRIC
) -> Frontier:
    """The frontier of `runs` at `target` of `task`/`metric` (see the module docstring)."""
    if not runs:
        raise InputError("the frontier needs at least one run")
    curves = {r.name: run_curve(r, task, metric) for r in runs}
    shown = f"{task}/{metric}" if task else metric
    unplaced: dict[str, str] = {}
    usable = {}
    for name, curve in curves.items():
        values = curve.dropna(subset=["tokens", "loss"])
        if values.empty:
            unplaced[name] = f"no evaluations of {shown} with token counts"
        else:
            usable[name] = values
    directions = {bool(c["higher_is_better"].iloc[0]) for c in usable.values()}
    if len(directions) > 1:
        raise InputError(f"{shown} is recorded as rising in some runs and falling in others: fix it at import")
    hib = directions.pop() if directions else False
    notes = []
    if target is None and usable:
        bests = [float(c["loss"].max() if hib else c["loss"].min()) for c in usable.values()]
        target = min(bests) if hib else max(bests)
        notes.append(f"target {shown} {target:.6g}: the worst best across the runs (every run with it reaches it)")
    points: dict[str, dict[str, float]] = {}
    for r in runs:
        if r.name not in usable:
            continue
        assert target is not None  # set above whenever a run is usable
        c = usable[r.name]
        need = crossing(c["tokens"].to_numpy(dtype=float), c["loss"].to_numpy(dtype=float), target, hib)
        if need is None:
            best = c["loss"].max() if hib else c["loss"].min()
            unplaced[r.name] = f"never reaches the target {shown} {target:.6g} (its best: {best:.6g})"
            continue
        took = time_at(r, curves[r.name], "tokens", need)
        if took is None:
            unplaced[r.name] = "no wall-clock time recorded: no tokens/s"
        elif took <= 0 or not math.isfinite(need / took):
            unplaced[r.name] = f"reaches the target at {need:.6g} tokens in no recorded time: no tokens/s"
        else:
            points[r.name] = {"tokens_per_s": need / took, "tokens_to_target": need}
    front = pareto_front({n: (p["tokens_per_s"], p["tokens_to_target"]) for n, p in points.items()})
    front.sort(key=lambda n: -points[n]["tokens_per_s"])
    return Frontier(
        metric=shown, target=target, higher_is_better=hib, points=points, front=front, unplaced=unplaced, notes=notes
    )
