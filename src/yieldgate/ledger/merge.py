"""`yieldgate merge`: another ledger's runs into this one, adding what this ledger lacks and overwriting nothing.

A merge brings in what a ledger lacks: a spill file's rows, another node's runs, the steps, extras, evaluations, meta
keys, tags and note a run here has not recorded. A value this ledger holds that the other holds differently (both
recorded, not equal; a NaN equals a NaN) is a conflict: the merge is refused before anything is written, naming the
first and counting them, unless `replace` is given. Then this ledger's records at the conflicting steps are set apart
as superseded (`Ledger.set_apart_steps`: a resolved `warning` event says what replaced them) and the other ledger's
take their place; the result says how many. A run a live Tracker writes is written by no one else, whatever the
other ledger holds (RunInUse), except by that Tracker (`owner`), which moves its own spill file in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from yieldgate.errors import InputError, RunInUse
from yieldgate.ledger.blocks import column_values
from yieldgate.ledger.owners import Owner
from yieldgate.util import lazy

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from yieldgate.ledger.store import Ledger
else:
    np = lazy.module("numpy")
    pd = lazy.module("pandas")

__all__ = ["Conflicts", "MergedRun", "MergeResult", "conflicts", "copy_run", "merge_ledger", "merge_run"]

EVAL_KEY = ["step", "portfolio", "portfolio_version", "task", "metric"]


@dataclass(frozen=True)
class Conflicts:
    """Where run `run` of another ledger differs from this ledger's records of it."""

    run: str
    steps: list[int] = field(default_factory=list)
    """Steps whose core or extra values differ."""
    evals: list[tuple[int, str, str, str, str]] = field(default_factory=list)
    """Evaluations (`EvalRecord.key`) whose value or standard error differs."""
    meta: list[str] = field(default_factory=list)
    """Meta keys (and `note`) held differently."""
    first: tuple[str, str, str] = ("", "", "")
    """The first difference: where (`at step 1, loss`), this ledger's value and the other's."""

    def __bool__(self) -> bool:
        return bool(self.steps or self.evals or self.meta)

    @property
    def count(self) -> str:
        parts = [(len(self.steps), "step"), (len(self.evals), "evaluation"), (len(self.meta), "meta field")]
        return ", ".join(f"{n:,} {what}{'s' * (n != 1)}" for n, what in parts if n)


@dataclass(frozen=True)
class MergedRun:
    """What `merge_run` did to one run."""

    steps: int
    """Step records brought in from the other ledger."""
    replaced_steps: int = 0
    """Stored steps the other ledger's records replaced (only with `replace`), kept apart as superseded."""
    replaced_evals: int = 0
    event: int | None = None
    """The `warning` event that keeps the replaced records (None: nothing replaced)."""


@dataclass(frozen=True)
class MergeResult:
    """`yieldgate merge`: per run, what came in from `source` and what it replaced."""

    source: str
    runs: dict[str, MergedRun]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "runs": {name: r.steps for name, r in self.runs.items()},
            "replaced": {
                name: {"steps": r.replaced_steps, "evals": r.replaced_evals, "event": r.event}
                for name, r in self.runs.items()
                if r.event is not None
            },
        }


@dataclass(frozen=True)
class _Held:
    """One run's records as a ledger holds them, read once."""

    steps: pd.DataFrame
    extras: pd.DataFrame
    evals: pd.DataFrame
    meta: dict[str, Any]
    note: str | None

    @classmethod
    def read(cls, ledger: Ledger, run: str) -> _Held:
        return cls(
            ledger.steps(run, nullable=True), ledger.extras(run), ledger.evals(run), ledger.meta(run), ledger.note(run)
        )


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b) | (np.isnan(a) & np.isnan(b))


def _number(value: float) -> str:
    return f"{value:.6g}"


Difference = tuple[str, str, str]


def _step_conflicts(here: _Held, there: _Held) -> tuple[set[int], Difference | None]:
    """Steps whose core or extra values both ledgers hold and differ, and the first of them."""
    differ: set[int] = set()
    first: tuple[int, Difference] | None = None
    both = here.steps.merge(there.steps, on="step", suffixes=("_here", "_there"))
    if len(both):
        n = len(both)
        for column in here.steps.columns.intersection(there.steps.columns).drop("step"):
            a, a_missing = column_values(both[f"{column}_here"], n, column)
            b, b_missing = column_values(both[f"{column}_there"], n, column)
            bad = ~a_missing & ~b_missing & ~_same(a, b)
            if bad.any():
                i = int(np.argmax(bad))
                step = int(both["step"].iloc[i])
                if first is None or step < first[0]:
                    first = (step, (f"at step {step}, {column}", _number(a[i]), _number(b[i])))
                differ.update(both["step"][bad].astype(int).tolist())
    extras = here.extras.merge(there.extras, on=["step", "key"], suffixes=("_here", "_there"))
    bad = ~_same(extras["value_here"].to_numpy(float), extras["value_there"].to_numpy(float))
    if bad.any():
        i = int(np.argmax(bad))
        row = extras.iloc[i]
        step = int(row["step"])
        if first is None or step < first[0]:
            first = (step, (f"at step {step}, {row['key']}", _number(row["value_here"]), _number(row["value_there"])))
        differ.update(extras["step"][bad].astype(int).tolist())
    return differ, None if first is None else first[1]


def _eval_conflicts(here: _Held, there: _Held) -> tuple[list[tuple[int, str, str, str, str]], Difference | None]:
    both = here.evals.merge(there.evals, on=EVAL_KEY, suffixes=("_here", "_there"))
    value = ~_same(both["value_here"].to_numpy(float), both["value_there"].to_numpy(float))
    sa, sb = both["stderr_here"].to_numpy(float), both["stderr_there"].to_numpy(float)
    stderr = ~np.isnan(sa) & ~np.isnan(sb) & (sa != sb)
    bad = value | stderr
    keys = [tuple(k) for k in both.loc[bad, EVAL_KEY].itertuples(index=False, name=None)]
    if not keys:
        return [], None
    row = both[bad].iloc[0]
    where = f"at step {int(row['step'])}, evaluation {row['task']}/{row['metric']}"
    return keys, (where, _number(row["value_here"]), _number(row["value_there"]))


def conflicts(here_ledger: Ledger, there_ledger: Ledger, run: str) -> Conflicts:
    """Where the other ledger's run `run` differs from this ledger's (none when this ledger lacks the run)."""
    if not _exists(here_ledger, run):
        return Conflicts(run)
    return _conflicts(run, _Held.read(here_ledger, run), _Held.read(there_ledger, run))


def _conflicts(run: str, here: _Held, there: _Held) -> Conflicts:
    steps, first = _step_conflicts(here, there)
    evals, first_eval = _eval_conflicts(here, there)
    meta = [k for k, v in there.meta.items() if k in here.meta and _text(here.meta[k]) != _text(v)]
    if here.note and there.note and here.note != there.note:
        meta.append("note")
    if first is None:
        first = first_eval
    if first is None and meta:
        key = meta[0]
        first = (f"its {key}" if key == "note" else f"meta {key!r}", "one value", "another")
    return Conflicts(run, sorted(steps), keys_sorted(evals), meta, first or ("", "", ""))


def keys_sorted(keys: list[tuple[int, str, str, str, str]]) -> list[tuple[int, str, str, str, str]]:
    return sorted(keys, key=lambda k: (int(k[0]), k[1:]))


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=True)


def _exists(ledger: Ledger, run: str) -> bool:
    return bool(ledger._query("SELECT 1 FROM runs WHERE name = ?", (run,)))  # noqa: SLF001 - one indexed lookup


def refusal(here_ledger: Ledger, there: str, found: Conflicts) -> InputError:
    """The one line a conflicting merge without `replace` is refused with."""
    where, here, other = found.first
    return InputError(
        f"run {found.run!r}: {where} is {here} in {here_ledger.location} and {other} in {there} (differing: "
        f"{found.count}); a merge never overwrites a stored record: merge with replace "
        "to put the other ledger's in their place (this ledger's kept apart as superseded), or leave the run out",
        parameter="replace",
    )


def copy_run(ledger: Ledger, source: Ledger, run: str, *, owner: Owner | None = None) -> int:
    """Merge run `run` of another ledger (a Tracker's spill file, another node's ledger) into `ledger`, adding what it
    lacks and overwriting nothing (`merge_run`: a record held differently is refused, and so is a run a live Tracker
    other than `owner` writes). Returns step rows copied."""
    return merge_run(ledger, source, run, owner=owner).steps


def merge_run(
    ledger: Ledger, source: Ledger, run: str, *, replace: bool = False, owner: Owner | None = None
) -> MergedRun:
    """Merge run `run` of `source` (a spill file, another node's ledger) into `ledger`, one transaction: the run is
    created (with its manifest and status) if `ledger` lacks it; otherwise only what it lacks is added, and a record
    held differently is refused (InputError) unless `replace`. A run a live Tracker other than `owner` writes is
    refused (RunInUse). Returns what came in and what it replaced."""
    info = source.run_info(run)
    there = _Held.read(source, run)
    tags, manifest = source.tags(run), source.manifest(run)
    with ledger.transaction():
        event = None
        found = Conflicts(run)
        if _exists(ledger, run):
            writer = ledger._live_writer(run)  # noqa: SLF001 - inside this write transaction
            if writer is not None and writer != owner:
                raise _live(ledger, run, writer)
            found = _conflicts(run, _Held.read(ledger, run), there)
            if found and not replace:
                raise refusal(ledger, source.location, found)
            if found:
                here_meta = ledger.meta(run)
                body = {
                    "source": "merge",
                    "replaced": {
                        "by": f"merge {source.location}",
                        "meta": {k: here_meta.get(k) for k in found.meta if k != "note"},
                        **({"note": ledger.note(run)} if "note" in found.meta else {}),
                    },
                }
                event = ledger.set_apart_steps(run, found.steps, found.evals, body)
        else:
            ledger.create_run(run, manifest=manifest, status=info["recorded_status"], source=info["source"])
        held = ledger.meta(run)
        for key, value in there.meta.items():
            if key not in held or key in found.meta:
                ledger.set_meta(run, key, value)
        ledger.tag_run(run, tags)
        if there.note and (not ledger.note(run) or "note" in found.meta):
            ledger.set_note(run, there.note)
        if len(there.steps):
            ledger.append_steps(run, there.steps)
        for key, part in there.extras.groupby("key", sort=False):
            ledger.append_steps(run, {"step": part["step"].to_numpy(), str(key): part["value"].to_numpy()})
        if len(there.evals):
            ledger.append_evals(run, there.evals.to_dict("records"))
    return MergedRun(len(there.steps), len(found.steps), len(found.evals), event)


def merge_ledger(ledger: Ledger, source: Ledger, runs: list[str], *, replace: bool = False) -> MergeResult:
    """Merge `runs` of `source` into `ledger` (`merge_run`, one transaction each). Every run is looked at before any
    is written: a conflict without `replace`, or a run a live Tracker writes, leaves the ledger as it was."""
    for run in runs:
        source.run_id(run)  # RunNotFound, naming the other ledger
        if not _exists(ledger, run):
            continue
        writer = ledger._live_writer(run)  # noqa: SLF001
        if writer is not None:
            raise _live(ledger, run, writer)
        found = _conflicts(run, _Held.read(ledger, run), _Held.read(source, run))
        if found and not replace:
            raise refusal(ledger, source.location, found)
    return MergeResult(source.location, {run: merge_run(ledger, source, run, replace=replace) for run in runs})


def _live(ledger: Ledger, run: str, writer: Owner) -> RunInUse:
    return RunInUse(
        f"cannot merge into run {run!r} of {ledger.location}: it is being written by {writer}; a live run is written "
        "only by its Tracker: merge once it has closed"
    )
