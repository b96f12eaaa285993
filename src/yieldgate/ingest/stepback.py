"""Where a log's steps go back in file order, and why: a second writer, or a restart.

- **A second writer** (two ranks, or two launches, appending one log) writes each record again a little later: the
  two drift, so the file order steps back by about one logging interval now and then. Its rows hold the same values
  as the first writer's, to the digits each printed (one may print fewer: `4.6666` and `4.667` are the same loss),
  except what each times for itself; where both rows have a clock, the two are within three logging intervals of
  each other, and where they have none, the rows between the two reach no more than three logging intervals past it.
  Such a row is the same record written twice, whatever the trainer: kept once, and not a restart.
- **A restart** (a run resumed from a checkpoint, or launched afresh into the same log) steps the training rows
  back. It throws away the work from the checkpoint to the crash; what it charges as lost is only what was done
  again: the steps from the first one logged again to the furthest the relaunch reached (at most the last step
  before the crash), and their time on the crashed attempt's clock. A relaunch that redid five steps of a long run
  lost five steps, never the run.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from yieldgate.ingest.types import Rows, Warnings

__all__ = ["TIMING", "printed_alike", "printed_places", "restarts", "same_as_printed", "second_writer"]

_LAG_ROWS = 64  # a second writer's copy comes within this many rows of the first writer's
_FEW = 8  # values: fewer tell no writer's digits
# What each writer of a log times for itself (two ranks differ in these, never in the loss or the LR).
TIMING = ("wall_s", "step_s", "data_wait_s", "tokens_per_s", "mfu")


def _decimals(values: np.ndarray) -> np.ndarray:
    """The decimal places each value was printed with, as far as its shortest form shows (4.667: 3; 9.35e-04: 6)."""
    out = np.zeros(len(values), dtype=np.int64)
    for j, v in enumerate(values.tolist()):
        if math.isfinite(v):
            mantissa, _, exponent = repr(float(v)).partition("e")
            places = len(mantissa.partition(".")[2].rstrip("0"))
            out[j] = max(0, places - int(exponent or 0))
    return out


def printed_places(column: np.ndarray) -> int:
    """The places a column's values are printed to, by the writer that prints fewer where two print it: the lower of
    two levels each shown by a fifth of the values (two of them at least), else the level most show (the greater on
    a tie). A value whose last printed digits are zeros shows fewer places (`3.2600` is 3.26): never the level."""
    finite = column[np.isfinite(column)]
    if len(finite) < _FEW:
        return 0  # too few to tell a writer's digits from a value's trailing zeros: each pair by its own digits
    levels, counts = np.unique(_decimals(finite), return_counts=True)
    common = [int(v) for v, n in zip(levels, counts, strict=True) if n >= max(2, 0.2 * len(finite))]
    if len(common) >= 2:
        return sorted(common)[-2]
    return int(levels[counts == counts.max()].max())


def same_as_printed(a: np.ndarray, b: np.ndarray, places: int = 0) -> np.ndarray:
    """Whether each pair of values is one value printed to different digits: equal within half a unit of the last
    digit of the one printed with fewer, and at least to `places` (`printed_places` of their column: two values that
    differ in digits the log prints are two values, whatever zeros one ends with). NaN equals NaN."""
    da, db = _decimals(a), _decimals(b)
    # to the digits of the coarser, and at most two fewer than the finer (`4.0000` shows as 4.0: no print of 3.8476)
    shown = np.maximum(np.maximum(np.minimum(da, db), np.maximum(da, db) - 2), places).astype(float)
    with np.errstate(invalid="ignore"):
        near = np.abs(a - b) <= 0.5 * 10.0 ** (-shown) * (1 + 1e-9)
    # a value of fewer than two places is no print of a finer one (2.0 and 1.9 are two losses): equal or not
    near &= np.maximum(da, db) >= 2
    return near | (a == b) | (np.isnan(a) & np.isnan(b))


def printed_alike(a: float, b: float, places: int = 0) -> bool:
    """Whether two values are one value printed to different digits (`same_as_printed` of one pair)."""
    return bool(same_as_printed(np.array([a]), np.array([b]), places)[0])


def _interval(steps: np.ndarray) -> float:
    """The logging interval in steps: the median rise between consecutive distinct steps."""
    distinct = np.unique(steps)
    rises = np.diff(distinct)
    return float(np.median(rises)) if len(rises) else 1.0


def second_writer(rows: Rows, table: pd.DataFrame, exact: np.ndarray) -> np.ndarray:
    """The rows a second writer wrote (see the module's doc): equal, as printed, to the row before them of their step
    and kind in every column but the timing ones, and not an exact repeat (`exact`)."""
    learning = [
        c for c in table.columns if c not in (*TIMING, "step", "kind") and not c.startswith(("device/", "host/"))
    ]
    key = table["step"].to_numpy() * (int(table["kind"].max()) + 1) + table["kind"].to_numpy()
    order = np.lexsort((np.arange(len(rows)), key))
    first_of = np.arange(len(rows))  # the row before each of its step and kind (itself where none)
    follows = key[order][1:] == key[order][:-1]
    first_of[order[1:][follows]] = order[:-1][follows]
    again = (first_of != np.arange(len(rows))) & ~exact
    if not again.any():
        return again
    cand = np.nonzero(again)[0]
    same = np.ones(len(cand), dtype=bool)
    # the places each column is printed to, over the rows of the steps logged twice: a second writer's rows where
    # there is one (it may print fewer digits), the rows of one writer where a step is only logged again
    involved = np.union1d(cand, first_of[cand])
    for name in learning:
        column = table[name].to_numpy(dtype=float)
        same &= same_as_printed(column[cand], column[first_of[cand]], printed_places(column[involved]))
    clock, timed = rows.values.get("wall_s"), rows.present.get("wall_s")
    both = np.zeros(len(cand), dtype=bool) if timed is None else timed[cand] & timed[first_of[cand]]
    if both.any():
        assert clock is not None
        firsts = np.nonzero((first_of == np.arange(len(rows))) & timed)[0]
        rises = np.diff(clock[firsts])
        rises = rises[np.isfinite(rises) & (rises > 0)]
        per_step = _rate(rows.step[firsts], clock[firsts]) or 0.0
        # three logging intervals of time (a copy lags by about one; each writer's clock jitters): of the median
        # rise between rows, or of steps at the median seconds per step
        span = 3.0 * max(float(np.median(rises)) if len(rises) else 0.0, per_step * _interval(rows.step))
        same &= ~both | (np.abs(clock[cand] - clock[first_of[cand]]) <= span)
    # without a clock: a copy follows its row closely, never reaching on more than three intervals past its step first
    interval = _interval(rows.step)
    near = np.zeros(len(cand), dtype=bool)
    for j, (row, before) in enumerate(zip(cand.tolist(), first_of[cand].tolist(), strict=True)):
        if row - before <= _LAG_ROWS:
            near[j] = rows.step[before + 1 : row + 1].max() - rows.step[row] <= 3.0 * interval
    again[cand] = same & (both | near)
    return again


def _training_rows(rows: Rows) -> np.ndarray:
    """The rows of the kind logged most (which columns a row has): the training lines."""
    kinds = pd.DataFrame({n: rows.present[n] for n in sorted(rows.values)})
    if not len(kinds.columns):
        return np.arange(len(rows))
    kind = kinds.groupby(list(kinds.columns), sort=False).ngroup().to_numpy()
    return np.nonzero(kind == np.bincount(kind).argmax())[0]


def _rate(steps: np.ndarray, clock: np.ndarray) -> float | None:
    """Median seconds per step between consecutive rows."""
    if len(steps) < 2:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):  # a step logged twice: no rate there
        rate = np.diff(clock) / np.diff(steps.astype(float))
    rate = rate[np.isfinite(rate) & (rate > 0)]
    return float(np.median(rate)) if len(rate) else None


def restarts(rows: Rows, warnings: Warnings) -> None:
    """Find where a run restarted: among the training rows, a step below the step of the row before it in file
    order, or at it where the source marks a new launch between the two (`Rows.launch`). Each becomes a `resume`
    event body: the last step before (`old`), the checkpoint's step (`resume`: one before the first step logged
    again; 0 for a new launch, whose first step is the log's first or before it), the furthest step done again
    (`redone`: where the relaunch got to before its own end or restart, at most `old`), and, read off the log's clock
    (`wall_s`, before clock resets are offset), `lost_s`, the crashed attempt's time over the steps done again,
    `down_s`, the gap to the first line after the restart where the clock ran on through it; `launch` where the
    source marks a new launch there."""
    if len(rows) < 2:
        return
    at = _training_rows(rows)
    steps = rows.step[at]
    clock = rows.values.get("wall_s")
    timed = rows.present.get("wall_s")
    back = steps[1:] < steps[:-1]
    if rows.launch is not None:  # a new launch the log marks, at the step the one before stopped at, restarts too
        back |= (rows.launch[at][1:] != rows.launch[at][:-1]) & (steps[1:] == steps[:-1])
    backs = np.nonzero(back)[0] + 1
    bounds = np.r_[0, backs, len(steps)]
    for n, i in enumerate(backs.tolist()):
        last, began = i - 1, int(bounds[n])  # the crash's row, and the first row of the attempt it ended
        # back to the log's first step or before: a new launch, from nothing; else from a checkpoint just before
        resume = 0 if steps[i] <= steps[0] else int(steps[i]) - 1
        redone = min(int(steps[last]), int(steps[i : bounds[n + 2]].max()))
        body: dict[str, Any] = {
            "source": "import",
            "where": rows.where[at[i]],
            "old": {"step": int(steps[last])},
            "resume": {"step": resume},
            "redone": {"step": redone},
        }
        if rows.launch is not None and rows.launch[at[i]] != rows.launch[at[last]]:
            body["launch"] = True  # the log marks a new launch here (`textlog.launches`): the job was started again
        if clock is not None and timed is not None and timed[at[last]]:
            lost = _lost_seconds(steps, clock, timed, at, began, i, resume, redone)
            if lost is not None:
                body["lost_s"] = lost
            if timed[at[i]] and clock[at[i]] >= clock[at[last]]:
                body["down_s"] = float(clock[at[i]] - clock[at[last]])
        warnings.restarts.append(body)
        went = (
            f"the steps go back from {int(steps[last]):,} to {int(steps[i]):,} (a restart from a checkpoint, or a new "
            "launch)"
            if steps[i] < steps[last]
            else f"a new launch the log marks begins again at step {int(steps[i]):,}"
        )
        warnings.add(
            "restart",
            f"{rows.where[at[i]]}: {went}: recorded as a resume event; the {max(0, redone - resume):,} step(s) done "
            "again are its lost work in goodput",
        )


def _lost_seconds(
    steps: np.ndarray,
    clock: np.ndarray,
    timed: np.ndarray,
    at: np.ndarray,
    began: int,
    crash: int,
    resume: int,
    redone: int,
) -> float | None:
    """The crashed attempt's time from the checkpoint's step to the furthest step done again: its clock at the last
    row at or before each. An attempt that began after the checkpoint (a new launch from step 0) is taken back to it
    at its own median seconds per step."""
    rows = [j for j in range(began, crash) if timed[at[j]] and np.isfinite(clock[at[j]])]
    if not rows:
        return None
    attempt_steps = steps[rows]
    attempt_clock = clock[at[rows]]
    end = [k for k, s in enumerate(attempt_steps.tolist()) if s <= redone]
    if not end:
        return 0.0
    start = [k for k, s in enumerate(attempt_steps.tolist()) if s <= resume]
    if start:
        since = float(attempt_clock[start[-1]])
    else:
        rate = _rate(attempt_steps, attempt_clock) or 0.0
        since = float(attempt_clock[0]) - (float(attempt_steps[0]) - resume) * rate
    return max(0.0, float(attempt_clock[end[-1]]) - since)
