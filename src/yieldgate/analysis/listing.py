"""Which runs a command means: names and globs matched against the ledger, and the runs table filtered, sorted
and limited (`yieldgate runs`). Light on purpose: listing runs imports no analysis.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from typing import Any

from yieldgate.errors import InputError, RunNotFound, check_choice
from yieldgate.ledger import Ledger
from yieldgate.ledger.runs import TOTAL_FIELDS
from yieldgate.names import HELD_STATUS, RUN_STATUSES, check_tag

__all__ = ["match_runs", "match_patterns", "list_runs", "select_runs", "SORT_KEYS"]


def match_runs(ledger: Ledger, pattern: str) -> list[str]:
    """Run names matching `pattern`: the exact name if there is one, else a glob (`bs64-seed*`). Read off the names
    alone (not every run's totals: 1.5-2 s on a ledger of 10,000 runs); the runs matched are read, and checked, by
    the command that asked."""
    names = ledger.run_names()
    if pattern in names:
        return [pattern]
    found = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    if not found:
        raise RunNotFound(f"no run named or matching {pattern!r} in {ledger.location}; `yieldgate runs` lists them")
    return found


def match_patterns(names: Sequence[str], patterns: Sequence[str], where: str) -> list[str]:
    """The runs of `names` that the patterns match, in ledger order, each once. Each pattern is an exact name or a
    glob, and must match at least one run (RunNotFound naming it otherwise): a command that changes runs must
    not quietly change fewer than asked. `where` names the ledger in that message."""
    if not patterns:
        raise InputError("name at least one run (a name or a glob such as 'bs64-seed*')")
    known = set(names)
    chosen: set[str] = set()
    for pattern in patterns:
        found = {pattern} if pattern in known else {n for n in names if fnmatch.fnmatchcase(n, pattern)}
        if not found:
            raise RunNotFound(f"no run named or matching {pattern!r} in {where}; `yieldgate runs` lists them")
        chosen |= found
    return [n for n in names if n in chosen]


# `sort` keys -> `Ledger.runs()` columns.
SORT_KEYS = {
    "name": "name",
    "created": "created_at",
    "updated": "updated_at",
    "status": "status",
    "steps": "last_step",  # the last step, as the listings show steps (`console.runs.steps_taken`)
    "tokens": "tokens",
    "duration": "duration_s",
}
# Statuses a filter may ask for: the recorded ones, the two `Ledger.runs()` computes for a dead writer, and `held`
# (a run stopped by the gate inside it).
_STATUSES = (*RUN_STATUSES, "stale", "crashed", HELD_STATUS)


def select_runs(
    records: Sequence[dict[str, Any]],
    *,
    patterns: Sequence[str] = (),
    tags: Sequence[str] = (),
    statuses: Sequence[str] = (),
    sort: str | None = None,
    reverse: bool = False,
    limit: int | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Filter and order `Ledger.run_records()`: runs matching any of `patterns` (names or globs; none: all),
    carrying every tag of `tags`, with any status of `statuses`; ordered by `sort` (a `SORT_KEYS` key, runs
    without a value last; `reverse` turns the order around, still with those last), or oldest first. `limit`
    keeps the first N of that order, or, without `sort`, the N most recently updated (in oldest-first order).
    Returns (the runs, how many matched before `limit`). A pattern matching nothing is an empty answer, not an
    error: this is a filter. Plain Python over dicts: `yieldgate runs` loads no pandas."""
    tags = [check_tag(t) for t in tags]
    for status in statuses:
        check_choice("status", status, _STATUSES)
    if sort is not None:
        check_choice("sort", sort, SORT_KEYS)
    if limit is not None and limit < 0:
        raise InputError(f"limit must be >= 0, got {limit}")
    rows = [
        r
        for r in records
        if (not patterns or any(r["name"] == p or fnmatch.fnmatchcase(r["name"], p) for p in patterns))
        and set(tags) <= set(r["tags"])
        and (not statuses or r["status"] in statuses)
    ]
    matched = len(rows)
    if sort is not None:
        column = SORT_KEYS[sort]
        known = [r for r in rows if not _missing(r[column])]
        rows = sorted(known, key=lambda r: r[column], reverse=reverse) + [r for r in rows if _missing(r[column])]
        if limit:
            rows = rows[:limit]
    elif reverse:
        rows = rows[::-1]
    if limit and sort is None and matched > limit:  # the most recently updated, in the order chosen
        newest = sorted(range(len(rows)), key=lambda i: -rows[i]["updated_at"])[:limit]
        rows = [rows[i] for i in sorted(newest)]
    return rows, matched


def list_runs(
    ledger: Ledger,
    *,
    patterns: Sequence[str] = (),
    tags: Sequence[str] = (),
    statuses: Sequence[str] = (),
    sort: str | None = None,
    reverse: bool = False,
    limit: int | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """`select_runs` over the ledger's runs, reading steps and evals only for the runs it keeps (all of them when
    it sorts by steps, tokens or duration): a page of a 10,000-run ledger costs a page's totals, not the ledger's."""
    by_totals = sort is not None and SORT_KEYS.get(sort) in TOTAL_FIELDS
    rows, matched = select_runs(
        ledger.run_records(totals=by_totals),
        patterns=patterns,
        tags=tags,
        statuses=statuses,
        sort=sort,
        reverse=reverse,
        limit=limit,
    )
    return (rows if by_totals else ledger.add_totals(rows)), matched


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
