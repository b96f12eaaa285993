"""A logged `tokens` column is stored as the run's cumulative count only where it is one. Trainers log other counts
under that name: the tokens of one step (equal on every row with a fixed batch, or varying with padding), a count
that restarts at every epoch or launch, one that runs down, or a value that is no count at all. Stored as cumulative,
such a column makes `compare` say that one run needs "1e+03x fewer tokens" than another.

Read on one value per step (the last logged, as the ledger keeps it), in step order:

- never falling: cumulative, as it should be;
- equal on every step: the tokens of one step (a fixed batch): tokens = step x that count, as `tokens_per_step` does;
- falling at a third to two thirds of its changes, as counts drawn batch by batch do: the tokens of each step, summed
  into a running count where the log holds every step, refused where it skips some (nobody counted the skipped steps);
- falling at fewer of its changes, rising in between: a count that restarts (per epoch, per launch): refused;
- falling at more of them: a count that runs down (the tokens left): refused;
- below 0 anywhere: refused.

Given `tokens_per_step` or `tokens_per_sample`, a column that is not cumulative is kept as `imported/tokens_as_logged`
and the given count takes its place: the advice every refusal here gives.

A logged `samples` column is the run's cumulative count of samples only where it is one too; one that falls or stays
the same from step to step (PaddleOCR's `samples: 176`, the samples of the last print window) is kept as
`imported/samples_as_logged`, said once, never stored as the count (`read_samples`).
"""

from __future__ import annotations

import numpy as np

from yieldgate.errors import InputError
from yieldgate.ingest.types import Rows, Warnings

__all__ = ["PER_STEP_FALLS", "SAMPLES_ASIDE", "read_tokens", "read_samples"]

PER_STEP_FALLS = 1 / 3
"""Share of a column's changes that are falls from which (up to 1 - it) the column is read as per-step counts: counts
drawn batch by batch fall at about half their changes; a running count that restarts every L logged rows at 1/L of
them, one that runs down at nearly all."""

_ASIDE = "imported/tokens_as_logged"
_ADVICE = "give tokens_per_step N (or tokens_per_sample) to count the tokens, the column kept as " + _ASIDE
_GIVEN = ("tokens_per_step", "tokens_per_sample")


def _per_step(canon: Rows, name: str = "tokens") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps in order, the last value logged at each, the row it came from) of the finite logged `name`."""
    rows = np.nonzero(canon.present[name] & np.isfinite(canon.values[name]))[0]
    steps, last = np.unique(canon.step[rows][::-1], return_index=True)
    at = rows[::-1][last]
    return steps, canon.values[name][at], at


SAMPLES_ASIDE = "imported/samples_as_logged"


def read_samples(canon: Rows, warnings: Warnings) -> None:
    """Leave `canon`'s `samples` alone where it is a running count (never falling, rising somewhere); else keep it as
    `imported/samples_as_logged`, with a warning: the samples of a step or of a print window, stored as the run's
    count, made a run of 2,100 steps read 160 samples in all."""
    if "samples" not in canon.values:
        return
    steps, values, _ = _per_step(canon, "samples")
    if len(steps) < 2:
        return
    change = np.diff(values)
    if (change >= 0).all() and (change > 0).any():
        return
    shape = "is the same at every step" if not change.any() else f"falls at {int((change < 0).sum())} step(s)"
    canon.values[SAMPLES_ASIDE] = canon.values.pop("samples")
    canon.present[SAMPLES_ASIDE] = canon.present.pop("samples")
    warnings.add(
        "samples",
        f"{canon.source}: samples {shape}: the samples of a step or of a print window, not a running count; kept as "
        f"{SAMPLES_ASIDE}",
    )


def _set_aside(canon: Rows, warnings: Warnings, why: str) -> None:
    canon.values[_ASIDE] = canon.values.pop("tokens")
    canon.present[_ASIDE] = canon.present.pop("tokens")
    warnings.add(
        "tokens",
        f"{canon.source}: tokens {why}: not a running count; kept as {_ASIDE}, and the tokens counted from the "
        "count given",
    )


def read_tokens(canon: Rows, warnings: Warnings, *, given: bool) -> None:
    """Leave `canon`'s `tokens` alone where it is cumulative; else read it as per-step counts (a warning says how),
    set it aside where a count is `given`, or refuse it (InputError naming the row and what it shows)."""
    if "tokens" not in canon.values:
        return
    steps, values, at = _per_step(canon)
    if not len(steps):
        return
    negative = values < 0
    if negative.any():
        i = int(at[np.argmax(negative)])
        if given:
            return _set_aside(canon, warnings, f"is {canon.values['tokens'][i]:g} at {canon.where[i]}")
        raise InputError(
            f"{canon.where[i]}: tokens is {canon.values['tokens'][i]:g}, and no count of tokens is below 0: the "
            f"column holds something else; {_ADVICE}",
            parameter=_GIVEN,
        )
    change = np.diff(values)
    if len(steps) < 2 or ((change >= 0).all() and (change > 0).any()):
        return
    if given:
        return _set_aside(canon, warnings, "does not rise from step to step")
    if not change.any():
        return _fixed_batch(canon, warnings, float(values[0]))
    _check_per_step(canon, steps, values, at)
    _summed(canon, warnings, steps, values)


def _check_per_step(canon: Rows, steps: np.ndarray, values: np.ndarray, at: np.ndarray) -> None:
    """Refuse a column that rises and falls unless it falls as per-step counts do, over a log of every step."""
    change = np.diff(values)
    falls = change < 0
    k = int(np.argmax(falls))  # the first fall: from values[k] at steps[k] to values[k + 1]
    first, moved, fell = int(at[k + 1]), int(np.count_nonzero(change)), int(falls.sum())
    if not PER_STEP_FALLS * moved <= fell <= (1 - PER_STEP_FALLS) * moved:
        shape = (
            "a count that restarts (every epoch? every launch?)"
            if fell < PER_STEP_FALLS * moved
            else "a count that runs down (the tokens left?)"
        )
        raise InputError(
            f"{canon.where[first]}: tokens falls from {values[k]:g} to {values[k + 1]:g} while the steps go on "
            f"({fell} fall(s) in {moved} changes): {shape}, not a running count; {_ADVICE}",
            parameter=_GIVEN,
        )
    if int(steps[-1] - steps[0]) + 1 != len(steps):
        raise InputError(
            f"{canon.where[first]}: tokens falls at {fell} of its {moved} changes: the tokens of each step, not a "
            f"running count, and the log skips steps ({len(steps)} logged of {steps[0]}-{steps[-1]}), whose tokens "
            f"nobody counted; {_ADVICE}",
            parameter=_GIVEN,
        )


def _fixed_batch(canon: Rows, warnings: Warnings, count: float) -> None:
    """tokens = step x `count` on every row: the count of one step, the same at every step."""
    canon.values["tokens"] = canon.step.astype(float) * count
    canon.present["tokens"] = np.ones(len(canon), dtype=bool)
    warnings.add(
        "tokens",
        f"{canon.source}: tokens is {count:g} at every step: the tokens of one step, not a running count; "
        f"tokens = step x {count:g}",
    )


def _summed(canon: Rows, warnings: Warnings, steps: np.ndarray, values: np.ndarray) -> None:
    """tokens = the running sum of each step's count, from the first step logged, on the rows of a logged step."""
    total = np.cumsum(values)
    at = np.minimum(np.searchsorted(steps, canon.step), len(steps) - 1)
    known = steps[at] == canon.step
    canon.values["tokens"] = np.where(known, total[at], np.nan)
    canon.present["tokens"] = known
    warnings.add(
        "tokens",
        f"{canon.source}: tokens rises and falls from step to step: the tokens of each step, not a running count; "
        f"tokens = their running sum from step {steps[0]}",
    )
