"""What an import may do to a run that exists: nothing stored is overwritten.

An import into a run that exists is refused unless asked to `replace` it (the run's records set apart as
superseded, never deleted: `Ledger.supersede`, and the import put in their place) or to `append` to it (only when
every imported step comes after the run's last stored one). A run that a live Tracker writes is never written by
an import, whatever is asked. Telemetry attached to a run (`join_on="time"`) adds columns to it by design, and
keeps every value the run already holds.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from yieldgate.errors import InputError, RunInUse
from yieldgate.ledger import Ledger
from yieldgate.names import CORE_STEP_COLUMNS

if TYPE_CHECKING:
    from yieldgate.ingest.types import ImportResult, Mapped

__all__ = ["refuse_live", "make_room", "keep_stored"]


def refuse_live(ledger: Ledger, run: str) -> None:
    """RunInUse when a live Tracker writes `run` (its owner's process alive and its heartbeat fresh): an import
    would splice its rows into the live run's."""
    info = ledger.run_info(run)
    if info["status"] != "running" or info["owner"] is None:
        return
    beat = info["heartbeat_at"]
    since = "no heartbeat" if beat is None else f"last heartbeat {time.time() - beat:.0f} s ago"
    raise RunInUse(
        f"run {run!r} in {ledger.location} is being written by a live Tracker ({info['owner']}, {since}); an "
        "import never writes a live run: wait for its Tracker to close, or import under another run name"
    )


def _stored_steps(ledger: Ledger, run: str) -> np.ndarray:
    """Every step the run holds a record at: core steps, extras and evals."""
    return np.concatenate(
        [
            ledger.steps(run, [])["step"].to_numpy(dtype=np.int64),
            ledger.extras(run)["step"].to_numpy(dtype=np.int64),
            ledger.evals(run)["step"].to_numpy(dtype=np.int64),
        ]
    )


def make_room(
    ledger: Ledger, run: str, mapped: Mapped, *, kind: str, source: str, replace: bool, append: bool
) -> dict[str, int] | None:
    """Make way for an import into the existing run `run`, or refuse it (InputError, naming the run and the way
    on). `append`: every step of `mapped` after the run's last stored step. `replace`: the run's records set
    apart as superseded (a resolved `warning` event holds what replaced them and the run's status, source and
    imports before); returns the counts set apart. Neither: refused."""
    stored = _stored_steps(ledger, run)
    last = int(stored.max()) if len(stored) else None
    if append:
        new = np.concatenate([mapped.steps["step"].to_numpy(dtype=np.int64), [e.step for e in mapped.evals]])
        if last is not None and len(new) and int(new.min()) <= last:
            raise InputError(
                f"{source}: step {int(new.min())} is at or before run {run!r}'s last stored step ({last}); append "
                "adds only steps after it: import with replace to set the run's records apart, or under another "
                "run name",
                parameter=("append", "replace"),
            )
        return None
    info = ledger.run_info(run)
    if not replace:
        held = f"{len(np.unique(stored)):,} steps" if last is not None else "no records"
        raise InputError(
            f"run {run!r} already exists in {ledger.location} ({info['status']}, {held}, from {info['source']}); "
            "an import never overwrites a run: import with replace to set its records apart (kept as superseded) "
            f"and put these in their place, with append to add steps after its last"
            f"{f' ({last})' if last is not None else ''}, or under another run name",
            parameter=("replace", "append"),
        )
    meta = ledger.meta(run)
    before = {"by": f"import:{kind} {source}", "status": info["recorded_status"], "source": info["source"]}
    event = None
    if last is not None:
        event = ledger.supersede(
            run, int(stored.min()) - 1, replaced={**before, "imports": meta.get("imports", [])}, source=f"import:{kind}"
        )
    # The imports listed are those whose records the run holds: the same source again is a new import, not a no-op.
    ledger.set_meta(run, "imports", [])
    if event is None:
        return {"steps": 0, "extra_values": 0, "evals": 0}
    events = ledger.events(run, kind="warning")
    moved = events.loc[events["id"] == event, "body"].iloc[0]["superseded"]
    return {"steps": int(moved["steps"]), "extra_values": int(moved["extra_values"]), "evals": len(moved["evals"])}


def keep_stored(ledger: Ledger, run: str, mapped: Mapped, result: ImportResult) -> Mapped:
    """`mapped` without the values the run already holds for a column at a step (telemetry attached to a run
    that the Tracker already recorded power for): those stored are kept, counted in `result.kept` and said in
    one warning."""
    steps = mapped.steps.copy()
    columns = [c for c in steps.columns if c != "step"]
    core = [c for c in columns if c in CORE_STEP_COLUMNS]
    held: dict[str, set[int]] = {}
    if core:
        stored = ledger.steps(run, core)
        held.update({c: set(stored.loc[stored[c].notna(), "step"].tolist()) for c in core})
    extras = ledger.extras(run, [c for c in columns if c not in CORE_STEP_COLUMNS])
    for key, group in extras.groupby("key"):
        held[str(key)] = set(group["step"].tolist())
    kept: dict[str, int] = {}
    for column, at in held.items():
        clash = steps["step"].isin(at) & steps[column].notna()
        if clash.any():
            kept[column] = int(clash.sum())
            steps[column] = steps[column].mask(clash, pd.NA)
    if kept:
        result.kept = sum(kept.values())
        result.warnings.append(
            f"run {run!r} already holds {', '.join(f'{n:,} {c}' for c, n in kept.items())} value(s) at these "
            "steps: the stored values are kept, the imported ones left out"
        )
    mapped.steps = steps
    return mapped
