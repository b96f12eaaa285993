"""`check_ledger`: is a ledger file whole? SQLite's own integrity check, then every stored block's and record's
checksum (`ledger.checksum`).

Damage is reported by run and step range (and extra key), or by run and record (`evaluation val/loss at step 300`,
`event #12 (resume)`), so a user knows which runs to restore or re-import; blocks written before checksums existed
are counted as unverified, not as whole.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yieldgate.errors import LedgerError
from yieldgate.ledger.checksum import block_ok, group_columns, group_ok, record_columns, record_name, record_ok
from yieldgate.ledger.pg import PgConnection
from yieldgate.ledger.spills import WaitingSpill, waiting_spills
from yieldgate.ledger.store import Ledger

__all__ = ["CheckResult", "Damage", "check_ledger"]


@dataclass(frozen=True)
class Damage:
    """One damaged part of a ledger."""

    problem: str
    """What is wrong, in a sentence."""
    run: str | None = None
    """The run it belongs to (None: the file as a whole, or a block whose run is unknown)."""
    key: str | None = None
    """The extra's key for an extra block; None for core step records."""
    first_step: int | None = None
    last_step: int | None = None
    record: str | None = None
    """The damaged record other than a block (`evaluation val/loss at step 300`, `run record (...)`); None for a
    block."""


@dataclass(frozen=True)
class CheckResult:
    """What `check_ledger` found."""

    location: str
    integrity: list[str]
    """SQLite's `PRAGMA integrity_check` messages; [] when it says ok."""
    damaged: list[Damage]
    """Blocks that fail their checksum (or cannot be read), by run and step range."""
    verified_blocks: int
    """Blocks whose checksum matched."""
    unverified: dict[str, int] = field(default_factory=dict)
    """Per run, blocks without a checksum (written before migration 0006) or in an algorithm not installed here."""
    verified_records: int = 0
    """Other records (runs, manifests, tags, evaluations, events, decisions, campaigns) whose checksum matched
    (every one of them has one since migration 0010: a missing one is damage)."""
    spills: list[WaitingSpill] = field(default_factory=list)
    """Spill files a killed Tracker left with step records the ledger lacks (not damage: `yieldgate merge` them), and
    recorded ones that are gone: their steps are missing, and the ledger is not whole."""

    @property
    def clean(self) -> bool:
        return not self.integrity and not self.damaged and not any(s.gone for s in self.spills)

    def to_dict(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "clean": self.clean,
            "integrity": list(self.integrity),
            "damaged": [asdict(d) for d in self.damaged],
            "verified_blocks": self.verified_blocks,
            "unverified": dict(self.unverified),
            "verified_records": self.verified_records,
            "waiting_spills": [w.to_dict() | {"hint": w.hint} for w in self.spills],
        }


_TABLES = {
    "step_blocks": "SELECT b.run_id, r.name, NULL, b.checksum, b.first_step, b.last_step, b.n, b.tokens_max, "
    "b.columns, b.data, b.missing FROM step_blocks b LEFT JOIN runs r ON r.id = b.run_id",
    "extra_blocks": "SELECT b.run_id, r.name, k.key, b.checksum, b.first_step, b.last_step, b.n, b.tokens_max, "
    "b.columns, b.data, b.missing FROM extra_blocks b LEFT JOIN runs r ON r.id = b.run_id "
    "LEFT JOIN extra_keys k ON k.id = b.key_id",
    "superseded_blocks": "SELECT b.run_id, r.name, k.key, b.checksum, b.first_step, b.last_step, b.n, NULL, b.columns, "
    "b.data, b.missing FROM superseded_blocks b LEFT JOIN runs r ON r.id = b.run_id "
    "LEFT JOIN extra_keys k ON k.id = b.key_id",
}


# Each record table's rows as (row id, run name, run id, checksum, covered fields...), and the condition that picks
# one run's rows (None: rows of no run, not checked when one run is asked for). A manifest is named by the first
# run that uses it.
_RECORDS: dict[str, tuple[str, str | None]] = {
    "runs": (f"SELECT NULL, x.name, x.id, x.checksum, {record_columns('runs', 'x')} FROM runs x", "x.id = ?"),
    "manifests": (
        f"SELECT NULL, r.name, r.id, x.checksum, {record_columns('manifests', 'x')} FROM manifests x "
        "LEFT JOIN runs r ON r.id = (SELECT MIN(u.id) FROM runs u WHERE u.manifest_hash = x.hash)",
        "x.hash = (SELECT manifest_hash FROM runs WHERE id = ?)",
    ),
    "run_tags": (
        f"SELECT NULL, r.name, x.run_id, x.checksum, {record_columns('run_tags', 'x')} FROM run_tags x "
        "LEFT JOIN runs r ON r.id = x.run_id",
        "x.run_id = ?",
    ),
    **{
        table: (
            f"SELECT x.id, r.name, x.run_id, x.checksum, {record_columns(table, 'x')} FROM {table} x "
            "LEFT JOIN runs r ON r.id = x.run_id",
            "x.run_id = ?",
        )
        for table in ("evals", "events", "decisions")
    },
    "campaigns": (f"SELECT NULL, NULL, NULL, x.checksum, {record_columns('campaigns', 'x')} FROM campaigns x", None),
}


def check_ledger(ledger: Ledger, run: str | None = None) -> CheckResult:
    """Run SQLite's `PRAGMA integrity_check` on the whole file (a PostgreSQL server checks its own pages), then check
    every stored block's and record's checksum (of `run` only, when given). A clean result: no message from SQLite
    and no damaged block or record."""
    db = ledger._db  # noqa: SLF001 - a check reads the store below the Ledger's typed reads, on purpose
    if isinstance(db, PgConnection):
        messages = ["ok"]  # the server keeps its own pages whole (WAL, and data checksums where initdb enabled them)
    else:
        if ledger.location != ":memory:" and not Path(ledger.location).is_file():
            raise LedgerError(f"{ledger.location}: no ledger file there to check")
        try:
            messages = [row[0] for row in db.execute("PRAGMA integrity_check").fetchall()]
        except sqlite3.DatabaseError as exc:
            messages = [f"integrity check could not run: {exc}"]
    integrity = [] if messages == ["ok"] else messages
    run_id = ledger.run_id(run) if run is not None else None
    damaged: list[Damage] = []
    with _damaged_text_read(db):
        verified, unverified = _check_blocks(db, run, run_id, damaged)
        verified_records = _check_records(db, run, run_id, damaged) + _check_groups(db, run_id, damaged)
    spills: list[WaitingSpill] = []
    if not damaged:  # the runs' meta is read through their checksums: only from a whole ledger
        spills = waiting_spills(ledger, [run] if run is not None else None)
    return CheckResult(ledger.location, integrity, damaged, verified, unverified, verified_records, spills)


@contextlib.contextmanager
def _damaged_text_read(db: Any) -> Iterator[None]:
    """SQLite text read with its undecodable bytes kept (as surrogates), so that a damaged name or body fails its
    checksum, naming its record, instead of failing the read of its whole table."""
    if not isinstance(db, sqlite3.Connection):
        yield
        return
    before = db.text_factory
    db.text_factory = lambda data: data.decode("utf-8", "surrogateescape")
    try:
        yield
    finally:
        db.text_factory = before


def _check_blocks(db: Any, run: str | None, run_id: int | None, damaged: list[Damage]) -> tuple[int, dict[str, int]]:
    """Every stored block's checksum: (blocks verified, blocks unverified per run); damage appended to `damaged`."""
    unverified: dict[str, int] = {}
    verified = 0
    for table, sql in _TABLES.items():
        params: tuple[Any, ...] = ()
        if run_id is not None:
            sql, params = sql + " WHERE b.run_id = ?", (run_id,)
        try:
            rows = db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            damaged.append(Damage(f"{table}: cannot be read ({exc})", run=run))
            continue
        for rid, name, key, checksum, first, last, n, tokens_max, columns, data, missing in rows:
            ok = block_ok(checksum, rid, key, first, last, n, tokens_max, columns, data, missing)
            if ok is None:
                unverified[str(name)] = unverified.get(str(name), 0) + 1
            elif ok:
                verified += 1
            else:
                where = (
                    "superseded records"
                    if table == "superseded_blocks"
                    else ("core step records" if table == "step_blocks" else "extra records")
                )
                damaged.append(
                    Damage(
                        f"{where} fail their checksum"
                        + ("" if name is not None else f" (and their run id {rid} names no run)"),
                        run=name,
                        key=key,
                        first_step=_int(first),
                        last_step=_int(last),
                    )
                )
    return verified, unverified


def _check_records(db: Any, run: str | None, run_id: int | None, damaged: list[Damage]) -> int:
    """Every other record's checksum: the records verified; damage appended to `damaged`, naming the run and the
    record."""
    verified = 0
    for table, (sql, by_run) in _RECORDS.items():
        params: tuple[Any, ...] = ()
        if run_id is not None:
            if by_run is None:
                continue
            sql, params = f"{sql} WHERE {by_run}", (run_id,)
        try:
            rows = db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            damaged.append(Damage(f"{table}: cannot be read ({exc})", run=run))
            continue
        for row_id, name, rid, checksum, *values in rows:
            if record_ok(table, checksum, values) is not False:
                verified += 1
                continue
            what = record_name(table, values, row_id)
            fails = "has no checksum" if checksum is None else "fails its checksum"
            orphan = rid is not None and name is None and table not in ("runs", "manifests")
            damaged.append(
                Damage(
                    f"{what}: {fails}" + (f" (and its run id {rid} names no run)" if orphan else ""),
                    run=name,
                    record=what,
                )
            )
    return verified


# Each field group's rows as (run name, checksum, the group's fields, first step, last step, what it is), and the
# condition that picks one run's rows.
_GROUPS: dict[str, tuple[str, str]] = {
    "step_blocks.summary": (
        f"SELECT r.name, x.summary_checksum, {group_columns('step_blocks.summary', 'x')}, x.first_step, x.last_step, "
        "'summary of core step records (count, tokens, wall clock)' FROM step_blocks x "
        "LEFT JOIN runs r ON r.id = x.run_id",
        "x.run_id = ?",
    ),
    "runs.claim": (
        f"SELECT x.name, x.claim_checksum, {group_columns('runs.claim', 'x')}, NULL, NULL, "
        "'writer claim and heartbeat' FROM runs x",
        "x.id = ?",
    ),
    **{
        f"{table}.id": (
            f"SELECT r.name, x.id_checksum, x.id, x.checksum, NULL, NULL, 'id of {table[:-1]} #' || x.id "
            f"FROM {table} x LEFT JOIN runs r ON r.id = x.run_id",
            "x.run_id = ?",
        )
        for table in ("events", "decisions")
    },
}


def _check_groups(db: Any, run_id: int | None, damaged: list[Damage]) -> int:
    """The checksums of the fields outside blocks and records (`checksum.FIELD_GROUPS`): the groups verified; damage
    appended to `damaged`."""
    verified = 0
    for group, (sql, by_run) in _GROUPS.items():
        params: tuple[Any, ...] = ()
        if run_id is not None:
            sql, params = f"{sql} WHERE {by_run}", (run_id,)
        try:
            rows = db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            damaged.append(Damage(f"{group}: cannot be read ({exc})"))
            continue
        for name, checksum, *values, first, last, what in rows:
            if group_ok(group, checksum, values):
                verified += 1
                continue
            fails = "has no checksum" if checksum is None else "fails its checksum"
            damaged.append(
                Damage(f"{what}: {fails}", run=name, first_step=_int(first), last_step=_int(last), record=what)
            )
    return verified


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) else None
