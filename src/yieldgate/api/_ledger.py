"""The runs and the ledger itself: listing, removing, renaming, tagging and noting runs, one run whole, the checksum
check, merging and copying ledgers."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yieldgate.errors import InputError
from yieldgate.ledger import Ledger

if TYPE_CHECKING:
    import pandas as pd

    from yieldgate.ledger.check import CheckResult
    from yieldgate.ledger.copy import CopyResult
    from yieldgate.ledger.merge import MergeResult
    from yieldgate.ledger.spills import WaitingSpill


from yieldgate.api._common import LedgerArg, _many, _matching, _open


def runs(
    patterns: str | Sequence[str] = (),
    *,
    ledger: LedgerArg = None,
    tags: Sequence[str] = (),
    status: str | Sequence[str] = (),
    sort: str | None = None,
    reverse: bool = False,
    limit: int | None = None,
) -> pd.DataFrame:
    """The ledger's runs, one row each (`yieldgate runs`): those matching any of `patterns` (names or globs; none:
    all), carrying every one of `tags`, with any `status`; ordered by `sort` (name, created, updated, status, steps,
    tokens, duration; default oldest first), `reverse`d if asked; the first `limit` (see
    `analysis.listing.select_runs`)."""
    import pandas as pd

    from yieldgate.ledger.runs import RUN_COLUMNS

    listed = list_runs(patterns, ledger=ledger, tags=tags, status=status, sort=sort, reverse=reverse, limit=limit)
    return pd.DataFrame(listed.rows, columns=list(RUN_COLUMNS))


@dataclass(frozen=True)
class RunListing:
    """The runs `list_runs` selected, and how many matched before its `limit`."""

    rows: list[dict[str, Any]]
    """One record per run (`Ledger.run_records`), in the order asked."""
    matched: int
    spills: list[WaitingSpill] = field(default_factory=list)
    """Spill files a killed Tracker left with step records the ledger lacks, of the runs listed."""


def list_runs(
    patterns: str | Sequence[str] = (),
    *,
    ledger: LedgerArg = None,
    tags: Sequence[str] = (),
    status: str | Sequence[str] = (),
    sort: str | None = None,
    reverse: bool = False,
    limit: int | None = None,
) -> RunListing:
    """`runs` as plain records, without pandas (what `yieldgate runs` prints), with the count before `limit`."""
    from yieldgate.analysis.listing import list_runs as listed
    from yieldgate.ledger.spills import waiting_spills

    with _open(ledger, readonly=True) as led:
        rows, matched = listed(
            led,
            patterns=_many(patterns),
            tags=list(tags),
            statuses=_many(status),
            sort=sort,
            reverse=reverse,
            limit=limit,
        )
        spills = waiting_spills(led, [r["name"] for r in rows])
    return RunListing(rows, matched, spills)


@dataclass(frozen=True)
class RemovedRun:
    """A run `remove_runs` deleted, with what went with it."""

    name: str
    steps: int
    """Core step records."""
    extra_values: int
    """Namespaced extra values (signals, per-source tokens, ...)."""
    evals: int
    events: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def matching_runs(patterns: str | Sequence[str], *, ledger: LedgerArg = None) -> list[str]:
    """The runs the patterns (names or globs) match, in ledger order: what `remove_runs`, `tag_runs` and
    `untag_runs` change. A pattern that matches no run is RunNotFound."""
    with _open(ledger, readonly=True, existing=True) as led:
        return _matching(led, patterns)


def remove_runs(patterns: str | Sequence[str], *, ledger: LedgerArg = None) -> list[RemovedRun]:
    """Delete the runs the patterns (names or globs) match, with their steps, extras, evals and events
    (`yieldgate rm`). All or nothing: a pattern matching no run (RunNotFound), a run a live Tracker writes
    (RunInUse) or one a gate decision cites (RunReferenced) leaves every run in place."""
    with _open(ledger, readonly=False, existing=True) as led, led.transaction():
        return [RemovedRun(**r) for r in led.remove_runs(_matching(led, patterns))]


def rename_run(run: str, new: str, *, ledger: LedgerArg = None) -> str:
    """Rename a run (`yieldgate rename`); returns the new name. A name already taken, a run a live Tracker writes
    and one a gate decision cites are refused."""
    with _open(ledger, readonly=False, existing=True) as led:
        led.rename_run(run, new)
    return new


def tag_runs(
    patterns: str | Sequence[str], tags: str | Sequence[str], *, ledger: LedgerArg = None
) -> dict[str, list[str]]:
    """Add tags to the runs the patterns match (`yieldgate tag`); returns each run's tags after."""
    with _open(ledger, readonly=False, existing=True) as led, led.transaction():
        return {run: led.tag_run(run, _many(tags)) for run in _matching(led, patterns)}


def untag_runs(
    patterns: str | Sequence[str], tags: str | Sequence[str], *, ledger: LedgerArg = None
) -> dict[str, list[str]]:
    """Take tags off the runs the patterns match (`yieldgate untag`); each run must carry them. Returns each run's
    tags after."""
    with _open(ledger, readonly=False, existing=True) as led, led.transaction():
        return {run: led.untag_run(run, _many(tags)) for run in _matching(led, patterns)}


def note_run(run: str, text: str, *, ledger: LedgerArg = None) -> str | None:
    """Keep a note with a run, replacing the one before; empty text removes it (`yieldgate note`). Returns the note
    as kept (None: removed)."""
    with _open(ledger, readonly=False, existing=True) as led:
        led.set_note(run, text)
        return led.note(run)


def show(run: str, *, ledger: LedgerArg = None) -> dict[str, Any]:
    """One run whole (`yieldgate show`): its record (as `runs` gives it), each step column recorded with its count
    and its first, last, smallest and largest value (`(step, value)`; NaN and inf skipped for the extremes), the
    devices, summary, extras and unmeasured signals, goodput, each eval's last value, the events and the manifest."""
    import numpy as np

    from yieldgate.analysis.goodput import goodput_of
    from yieldgate.analysis.load import column_stats
    from yieldgate.ledger.spills import waiting_spills
    from yieldgate.report.console import run_record

    with _open(ledger, readonly=True) as led:
        info, steps, evals = run_record(led.run_info(run)), led.steps(run), led.evals(run)
        events, manifest, extras, meta = led.events(run), led.manifest(run), led.extra_keys(run), led.meta(run)
        good = goodput_of(led, run)
        spills = waiting_spills(led, [run])
    columns = {c: int(steps[c].notna().sum()) for c in steps.columns if c != "step" and steps[c].notna().any()}
    return {
        "run": info,
        "step_columns": columns,
        "column_stats": {c: column_stats(steps, c) for c in columns},
        "devices": meta.get("devices"),
        "summary": meta.get("summary"),
        "extras": extras,
        "unmeasured": meta.get("unmeasured", {}),
        "goodput": good.to_dict() if good is not None else None,
        "waiting_spills": [w.to_dict() | {"hint": w.hint} for w in spills],
        "failure": _failure(info, meta),
        "evals": [
            {
                "task": task,
                "metric": metric,
                "count": len(g),
                "last_step": int(g["step"].iloc[-1]),
                "last_value": g["value"].iloc[-1],
                "last_stderr": None if np.isnan(g["stderr"].iloc[-1]) else float(g["stderr"].iloc[-1]),
                "higher_is_better": bool(g["higher_is_better"].iloc[-1]),
            }
            for (task, metric), g in evals.groupby(["task", "metric"], sort=True)
        ],
        "events": {state: int((events["state"] == state).sum()) for state in ("open", "resolved")},
        "manifest": manifest.model_dump(mode="json", exclude_none=True) if manifest else None,
    }


def _failure(info: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any] | None:
    """What ended a run that failed or was killed, as its probe recorded it (meta `error`, `output_tail`), or None."""
    if info["status"] not in ("failed", "killed", "crashed", "stale") and not meta.get("error"):
        return None
    if not meta.get("error") and not meta.get("output_tail"):
        return None
    return {"error": meta.get("error") or f"run status {info['status']}", "tail": meta.get("output_tail") or ""}


def check(run: str | None = None, *, ledger: LedgerArg = None) -> CheckResult:
    """SQLite's integrity check (of a file) and every stored block's checksum, or only `run`'s blocks
    (`yieldgate check`)."""
    from yieldgate.ledger.check import check_ledger

    with _open(ledger, readonly=True) as led:
        return check_ledger(led, run)


def merge(
    source: str | os.PathLike[str], *, runs: Sequence[str] = (), ledger: LedgerArg = None, replace: bool = False
) -> MergeResult:
    """Merge the runs of another ledger file (a Tracker's spill file, another node's ledger), or only `runs`, into
    this one (`yieldgate merge`), one transaction per run, adding what this ledger lacks: a stored record the other
    holds differently is refused before anything is written, unless `replace` (this ledger's records kept apart as
    superseded), and a run a live Tracker writes is refused (`ledger.merge`). Merging twice changes nothing."""
    from yieldgate.ledger.merge import merge_ledger

    path = Path(source)
    if not path.is_file():
        raise InputError(f"{path}: no such ledger file; give the path the Tracker reported")
    with _open(ledger, readonly=False) as led:
        if os.path.isfile(led.location) and os.path.samefile(path, led.location):
            raise InputError(f"{path}: the ledger itself; give another ledger file (a spill file, another node's)")
        with Ledger(path, readonly=True) as side:
            return merge_ledger(led, side, list(runs) or side.run_names(), replace=replace)


def copy_ledger(
    source: str | os.PathLike[str], destination: str | os.PathLike[str], *, replace: bool = False
) -> CopyResult:
    """Copy a whole ledger into another, either way between SQLite and PostgreSQL (`yieldgate ledger copy`),
    verified by row counts and digest before the destination commits; `replace`: empty the destination first
    (`ledger.copy.copy_ledger`)."""
    from yieldgate.ledger.copy import copy_ledger as copied

    return copied(source, destination, replace=replace)
