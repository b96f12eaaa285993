"""Readings that cannot be true, refused before anything is stored.

A reader that takes the wrong field for the step, or two writers for many restarts, still produces rows; stored, they
make a run that never happened (a 300-epoch run of 4 rows and 309 restarts, a goodput of 0 for a run that redid
nothing). Every import is checked for what no real run shows:

- **restarts past a few per cent of the rows**: a real run restarts a few times, not every few rows;
- **a counter that resets at regular intervals**: the steps go back to the same step again and again (a count within
  an epoch read as the step);
- **lost work past half the run without the clock restarting**: the restarts would throw away more than half the run,
  and neither the clock shows a gap where the job was down nor the log marks a new launch (its banner printed again);
- **tokens that are not monotone**: a cumulative count that falls where the steps do not go back;
- **a clock that runs backwards**: more than a few falls where the steps do not go back.

Each is refused in one line that says what was implausible and which mapping would read it (a field that counts the
steps on), or imported as read when asked (`accept_implausible`), the line kept among the import's warnings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.errors import InputError
from yieldgate.ingest.types import Mapped, Rows, Warnings

__all__ = ["Implausible", "check_plausible"]

_RESTART_SHARE = 0.03  # restarts past this share of the rows (and 3 at least) are no run's
_LOST_SHARE = 0.5  # lost work past this share of the run, with no gap in the clock, is no run's
_FALLS = 3  # clock or token falls past this many (and the restarts) are no clock's, no count's


@dataclass(frozen=True)
class Implausible:
    """What is implausible in a reading, and the mapping that would read the source instead (None: none found)."""

    what: str
    mapping: str | None = None


_STEPLIKE = re.compile(r"step|iter|update|batch", re.IGNORECASE)


def _steps_on(rows: Rows, step_field: str | None) -> str | None:
    """A field named as a step count, of whole numbers, that only rises and reaches further than the step: the step,
    counted on."""
    best = None
    for name, values in rows.values.items():
        present = rows.present[name] & np.isfinite(values)
        v = values[present]
        if name == step_field or not _STEPLIKE.search(name) or len(v) < 0.9 * len(rows) or len(v) < 3:
            continue
        if (v == np.round(v)).all() and (np.diff(v) >= 0).all() and v[-1] > rows.step.max():
            if best is None or v[-1] < rows.values[best][rows.present[best]][-1]:
                best = name
    return best


def _restarts(rows: Rows, restarts: list[dict[str, Any]], step_field: str | None) -> Implausible | None:
    n = len(restarts)
    if n < 3 or n <= _RESTART_SHARE * len(rows):
        return None
    back_to = {int(r["resume"]["step"]) for r in restarts}
    regular = len(back_to) <= max(1, n // 10)
    what = (
        f"the steps start again at {sorted(back_to)[0] + 1:,} {n:,} times in {len(rows):,} rows, at regular intervals: "
        "a count within each epoch read as the step"
        if regular
        else f"{n:,} restarts in {len(rows):,} rows (a run restarts a few times, not every {len(rows) // n:,} rows)"
    )
    field = _steps_on(rows, step_field)
    return Implausible(what, f"map step={field}" if field is not None else None)


def _lost(rows: Rows, restarts: list[dict[str, Any]]) -> Implausible | None:
    # a gap in the clock, or a launch the log marks (its banner again), says the job was down and started again
    if not restarts or any(float(r.get("down_s") or 0.0) > 0 or r.get("launch") for r in restarts):
        return None
    redone = sum(
        max(0, min(int(r["old"]["step"]), int(r.get("redone", r["old"])["step"])) - int(r["resume"]["step"]))
        for r in restarts
    )
    span = max(1, int(rows.step.max()) - int(rows.step.min()) + 1)
    if redone <= _LOST_SHARE * span:
        return None
    return Implausible(
        f"its {len(restarts):,} restart(s) would have redone {redone:,} of its {span:,} steps, and the clock shows no "
        "gap where the job was down"
    )


def _falls(steps: pd.DataFrame, column: str, restarts: int) -> int:
    """Falls of a column in step order beyond one per restart."""
    if column not in steps.columns:
        return 0
    known = steps[["step", column]].dropna().sort_values("step", kind="stable")
    falls = int((np.diff(known[column].to_numpy(dtype=float)) < 0).sum())
    return max(0, falls - restarts)


def _monotone(steps: pd.DataFrame, clock_falls: int, restarts: int) -> Implausible | None:
    tokens = _falls(steps, "tokens", restarts)
    if tokens > _FALLS:
        return Implausible(f"the cumulative tokens fall {tokens:,} times as the steps rise")
    clock = max(0, clock_falls - restarts)
    if clock > _FALLS:
        return Implausible(f"the clock runs backwards {clock:,} times where the steps do not go back")
    return None


def check_plausible(
    rows: Rows,
    mapped: Mapped,
    warnings: Warnings,
    *,
    clock_falls: int,
    accept: bool,
    reading: Mapping[str, str],
) -> None:
    """Refuse a reading no run could have made (InputError, naming what and the mapping that would read it), or with
    `accept`, say it among the warnings and go on. `rows`: the source's rows as read, `mapped`: its records as
    mapped (their restarts), `clock_falls`: the falls of its clock that cleaning offset, `reading`: how the reader
    read it (`Warnings.reading`)."""
    restarts = mapped.restarts
    found = (
        _restarts(rows, restarts, reading.get("step_field"))
        or _lost(rows, restarts)
        or _monotone(mapped.steps, clock_falls, len(restarts))
    )
    if found is None:
        return
    step = reading.get("step", f"the field {reading.get('step_field', 'step')!r}")
    if accept:
        warnings.reading["implausible"] = found.what
        warnings.add("implausible", f"{rows.source}: read as it is, although implausible: {found.what}")
        return
    advice = f"read it with {found.mapping}, or " if found.mapping is not None else ""
    raise InputError(
        f"{rows.source}: an implausible reading, not imported: {found.what} (the step: {step}); {advice}import it "
        "as read with accept_implausible",
        parameter=("map", "accept_implausible") if found.mapping is not None else "accept_implausible",
    )
