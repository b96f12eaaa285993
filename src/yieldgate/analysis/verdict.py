"""The sentence `compare` ends with: who learns more per token (or step), who moves them faster, who reaches the
target for less where the sides are aligned on cost, and whether the difference at the aligned points is beyond the
seed noise (`compare.Comparison.verdict`)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["verdict"]


def _side(value: float | None, names: tuple[str, str]) -> str | None:
    """Which side a speedup ratio (A over B) favours: > 1 favours B."""
    if value is None or math.isclose(value, 1.0, rel_tol=1e-9):
        return None
    return names[1] if value > 1 else names[0]


def verdict(
    names: tuple[str, str],
    primary: str,
    speedup: dict[str, float | None],
    points: list[dict[str, Any]],
    at: str,
    na: int,
    nb: int,
    level: float,
) -> str:
    first, second = _learning_and_speed(names, primary, speedup, points, at)
    judged = [p for p in points if p["within_noise"] is not None]
    family = judged[0]["family"] if judged else 1
    level_note = (
        (f" ({level:.0%} family-wise over {family} points)" if family > 1 else f" (at {level:.0%})") if judged else ""
    )
    if first.startswith("no difference"):
        return first
    if na < 2 and nb < 2:
        noise = "with one seed per side no noise floor is known"
    elif judged and all(p["within_noise"] for p in judged):
        noise = f"the loss difference at equal {at} is within the seed noise{level_note}"
    elif judged:
        beyond = sum(not p["within_noise"] for p in judged)
        noise = (
            f"the loss difference at equal {at} is beyond the seed noise at {beyond} of {len(judged)} "
            f"points{level_note}"
        )
    elif points:
        noise = f"every point at equal {at} is identical by construction: no verdict"
    else:
        noise = f"no points at equal {at} could be aligned"
    cost = f"; {_cost_clause(names, speedup['cost'])}" if at == "cost" else ""
    return f"On {primary} (primary): {first}; {second}{cost}; {noise}."


def _cost_clause(names: tuple[str, str], ratio: float | None) -> str:
    """Aligned on cost, who reaches the target for less, and how many times less (`speedup.cost`)."""
    if ratio is None:
        return "the cost to the target is unknown (no cost_usd recorded, and no price per device-hour)"
    cheaper = _side(ratio, names)
    if cheaper is None:
        return "both reach the target at the same cost"
    return f"{cheaper} reaches the target for less ({max(ratio, 1 / ratio):.3g}x cheaper)"


def _learning_and_speed(
    names: tuple[str, str], primary: str, speedup: dict[str, float | None], points: list[dict[str, Any]], at: str
) -> tuple[str, str]:
    """The verdict's two clauses, the primary first: who learns more per token (per step or epoch where the runs count
    no tokens and the time speedup splits on steps), and who moves them faster; or that there is no difference."""
    on_steps = speedup.get("step_efficiency") is not None
    unit = ("epoch" if at == "epochs" else "step") if on_steps else "token"
    se = speedup["step_efficiency"] if on_steps else speedup["sample_efficiency"]
    tp = speedup["steps_per_s"] if on_steps else speedup["throughput"]
    learn, fast = _side(se, names), _side(tp, names)
    if points and learn is None and fast is None and all(p["diff"] == 0 for p in points):
        if tp is not None or speedup["time"] is None or math.isclose(speedup["time"], 1.0, rel_tol=1e-9):
            no_diff = f"no difference: the two sides learn the same per {unit} and move {unit}s at the same rate"
            return no_diff, no_diff
    learning = (
        f"{learn} learns more per {unit} ({max(se, 1 / se):.3g}x fewer {unit}s to target)"
        if learn and se
        else f"neither side learns more per {unit}"
        if se
        else "learning per token is unknown" + (" (no token counts)" if speedup["time"] is not None else "")
    )
    t, sooner = speedup["time"], _side(speedup["time"], names)
    throughput = (
        f"{fast} moves {unit}s faster ({max(tp, 1 / tp):.3g}x {unit}s/s)"
        if fast and tp
        else "neither side is faster"
        if tp
        else f"{sooner} reaches the target sooner ({max(t, 1 / t):.3g}x less wall-clock time)"
        if sooner and t
        else "throughput is unknown (no wall-clock time)"
        if t is None
        else "throughput is unknown (no token counts)"
    )
    return (learning, throughput) if primary == "learning" else (throughput, learning)
