"""A log's time, as the importers read it: per-iteration times told apart from a clock, the clock summed from
step times where none is logged, and energy from logged power.

detectron2 and OpenMMLab log `time` (the seconds of each iteration, a window's median or mean) and `data_time`
(the part of it spent waiting for the batch) on every row; a name that elsewhere is a clock. A clock grows; these
do not. Read as `step_s` and `data_wait_s`, they give the clock (their sum over the steps) and the data-wait share
that the stall detector reads.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

import numpy as np
import pandas as pd

from yieldgate.aliases import Target, guess, imported
from yieldgate.ingest.types import Rows, Warnings

__all__ = ["energy", "per_step_times", "wall_from_step_times"]


def per_step_times(
    canon: Rows, targets: MutableMapping[str, Target], overrides: Mapping[str, str], warnings: Warnings
) -> None:
    """A clock that does not grow is the seconds of each logged iteration: the name read as `wall_s`, or one that
    would have been but another clock took the key (a log's timestamps beside its per-iteration `time`), becomes
    `step_s` (its target in `targets` too; an extra where a step time is logged already), and
    `wall_from_step_times` sums the clock from it where no other is left. Said in a warning. A name given as the
    clock (map wall_s=NAME) stays the clock."""
    clocks = [
        name
        for name, target in targets.items()
        if name not in overrides
        and (target.key == "wall_s" or (target == imported(name) and guess(name).key == "wall_s"))
    ]
    for name in clocks:
        key = targets[name].key
        if key not in canon.values:
            continue
        beside = key != "wall_s" and "wall_s" in canon.values  # another clock holds the key: is this one?
        logged = canon.values[key][canon.present[key]]
        if not (_apart_from(logged, canon.values["wall_s"][canon.present["wall_s"]]) if beside else _per_step(logged)):
            continue
        values = canon.values[key][canon.present[key] & np.isfinite(canon.values[key])]
        falls = int((np.diff(values) < 0).sum())
        target = Target("core", "step_s", guess(name).scale) if "step_s" not in canon.values else imported(name)
        if target.key != key:
            # a clock's values are in seconds already; an extra's as logged, in its name's unit (`time_ms`)
            scale = guess(name).scale if key != "wall_s" and target.key == "step_s" else 1.0
            canon.values[target.key] = canon.values.pop(key) * scale
            canon.present[target.key] = canon.present.pop(key)
        targets[name] = target
        warnings.add(
            "step-time",
            f"{canon.source}: {name} falls on {falls} of its {len(values) - 1} steps from one row to the next (median "
            f"{float(np.median(values)):.3g} s): the seconds of each iteration, not a clock; read as {target.key}"
            + (", and the clock as their sum" if target.key == "step_s" and "wall_s" not in canon.values else ""),
        )


def _apart_from(values: np.ndarray, clock: np.ndarray) -> bool:
    """Whether a time logged beside the log's clock is the seconds of each iteration: it does not keep pace with the
    clock (it rises over the log by less than half what the clock does), where a cumulative time would."""
    values, clock = values[np.isfinite(values)], clock[np.isfinite(clock)]
    if len(values) < 2 or len(clock) < 2:
        return False
    return float(values[-1] - values[0]) < 0.5 * float(np.ptp(clock))


def _per_step(values: np.ndarray) -> bool:
    """Whether a time logged on each row is the seconds of that row's iterations, not a clock. Of 5 rows or more, a
    clock does not grow when it never rises, falls from one row to the next on a third of its rows or more, falls
    on a tenth of them (3 at least) and rises in all no more than twice what it falls (it moves about a level), or
    rises on fewer than half of them and spans less than its median (it stays about a level). A few falls, each undone
    by what follows, are a clock reset or a resumed run, which `clean` offsets and reports."""
    values = values[np.isfinite(values)]
    if len(values) < 5:
        return False
    diffs = np.diff(values)
    falls = int((diffs < 0).sum())
    level = falls >= 3 and 10 * falls >= len(diffs) and diffs[diffs > 0].sum() <= -2.0 * diffs[diffs < 0].sum()
    # a time that mostly stays as it is and spans less than its own size (0.25 s, then 0.26 s) is no clock either
    flat = 2 * int((diffs > 0).sum()) < len(diffs) and np.ptp(values) < float(np.median(values))
    return not (3 * falls < len(diffs) and (diffs > 0).any() and not level and not flat)


# A logged step time this many times its neighbours' median took more than a training step: an evaluation, a
# checkpoint, compilation. It is counted once, not as the time of every step of its interval.
_SLOW_STEP = 3.0


def wall_from_step_times(canon: Rows, warnings: Warnings) -> None:
    """A log with step times and no clock (nanoGPT, llm.c, Megatron print the time per iteration) gets
    `wall_s` = the sum over logged steps of step_s x the steps since the previous one, so that yields per
    device-hour and comparisons at equal time work on it. Said in a warning: it is an estimate.

    A logged iteration that took far longer than its neighbours (`_SLOW_STEP` x their median: nanoGPT's dt
    after an evaluation, a checkpoint save, the first compiled step) is not the time of its interval's other
    steps: they take the median, the slow one its own time, once. A log that starts past its logging interval
    (a run resumed from a checkpoint) counts from its first logged step, not from step 0."""
    if "step_s" not in canon.values or not canon.present["step_s"].any():
        return
    if "wall_s" in canon.values and canon.present["wall_s"].any():
        return
    timed = canon.present["step_s"] & np.isfinite(canon.values["step_s"])
    if not timed.any():
        return
    steps, at = np.unique(canon.step, return_inverse=True)
    per_step = np.full(len(steps), np.nan)
    per_step[at[timed]] = canon.values["step_s"][timed]  # a step logged twice: its last time
    known = ~np.isnan(per_step)
    # A step without a time of its own takes the next logged one's (the time of the interval it closes).
    per_step = np.interp(steps, steps[known], per_step[known]) if not known.all() else per_step
    typical = pd.Series(per_step).rolling(11, center=True, min_periods=1).median().to_numpy()
    gaps = np.diff(steps, prepend=steps[0]).astype(float)
    interval = float(np.median(gaps[1:])) if len(steps) > 1 else 1.0
    first = float(steps[0])
    gaps[0] = max(first, 1.0) if first <= interval else 1.0
    slow = per_step > _SLOW_STEP * typical
    spent = np.where(slow, (gaps - 1.0) * typical + per_step, gaps * per_step)
    wall = np.cumsum(spent)
    canon.values["wall_s"], canon.present["wall_s"] = wall[at].astype(float), np.ones(len(canon), dtype=bool)
    warnings.add(
        "wall",
        f"{canon.source}: no clock logged; wall_s estimated as step_s x the steps between "
        "logged steps (what it prints per iteration, summed)"
        + (
            f"; {int(slow.sum())} slow iteration(s) (evaluation, checkpoint, compilation) counted once"
            if slow.any()
            else ""
        )
        + (f"; the log starts at step {int(first)} (a resumed run?): counted from there" if first > interval else ""),
    )


def energy(canon: Rows, warnings: Warnings) -> None:
    """`energy_j` is cumulative joules. A logged energy that falls somewhere is per interval (what the line's
    window used): summed. Without any, an average power per line (`device/power_w`) times the wall time since
    the line before gives it, where the log has a clock. Each said in a warning."""
    if "energy_j" in canon.values and canon.present["energy_j"].any():
        at = np.nonzero(canon.present["energy_j"] & np.isfinite(canon.values["energy_j"]))[0]
        values = canon.values["energy_j"][at]
        drops = np.nonzero(np.diff(values) < 0)[0]
        if len(drops) and len(drops) <= max(1, len(values) // 10) and (values[drops + 1] < 0.5 * values[drops]).all():
            # A cumulative counter that restarts (a resumed job): a few drops to well below the value before.
            # Each later value is offset so the count goes on, as a clock that restarts is.
            offset = np.zeros(len(values))
            for i in drops:
                offset[i + 1 :] += values[i]
            canon.values["energy_j"][at] = values + offset
            warnings.add(
                "energy",
                f"{canon.source}: the logged energy restarts {len(drops)} time(s) (a resumed run?): "
                "read as a cumulative counter, each restart continued from the value before it",
            )
            return
        if len(values) > 1 and len(drops):
            canon.values["energy_j"][at] = np.cumsum(values)
            warnings.add(
                "energy",
                f"{canon.source}: the logged energy falls between lines: read as each line's "
                "interval and summed into cumulative energy_j",
            )
        return
    power, wall = canon.values.get("device/power_w"), canon.values.get("wall_s")
    if power is None or wall is None:
        return
    at = np.nonzero(canon.present["device/power_w"] & canon.present["wall_s"] & np.isfinite(power) & np.isfinite(wall))[
        0
    ]
    if len(at) < 2:
        return
    joules = np.concatenate([[0.0], np.cumsum(power[at][1:] * np.diff(wall[at]))])
    canon.values["energy_j"] = np.full(len(canon), np.nan)
    canon.values["energy_j"][at] = joules
    canon.present["energy_j"] = np.zeros(len(canon), dtype=bool)
    canon.present["energy_j"][at] = True
    warnings.add(
        "energy",
        f"{canon.source}: energy_j integrated from the logged average power (device/power_w) over "
        "wall_s, from the first such line; the power as logged (per device or in total)",
    )
