"""`check_ledger`: is a ledger file whole? SQLite's own integrity check, then every stored block's checksum.

Damage is reported by run and step range (and extra key), so a user knows which runs to restore or
re-import; blocks written before checksums existed are counted as unverified, not as whole.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yieldgate.errors import LedgerError
from yieldgate.ledger.checksum import block_ok
from yieldgate.ledger.pg import PgConnection
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

    @property
    def clean(self) -> bool:
        return not self.integrity and not self.damaged

    def to_dict(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "clean": self.clean,
            "integrity": list(self.integrity),
            "damaged": [asdict(d) for d in self.damaged],
            "verified_blocks": self.verified_blocks,
            "unverified": dict(self.unverified),
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


def check_ledger(ledger: Ledger, run: str | None = None) -> CheckResult:
    """Run SQLite's `PRAGMA integrity_check` on the whole file (a PostgreSQL server checks its own pages), then check
    every stored block's checksum (of `run` only, when given). A clean result: no message from SQLite and no
    damaged block."""
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
    damaged: list[Damage] = []
    unverified: dict[str, int] = {}
    verified = 0
    run_id = ledger.run_id(run) if run is not None else None
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
    return CheckResult(ledger.location, integrity, damaged, verified, unverified)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) else None
