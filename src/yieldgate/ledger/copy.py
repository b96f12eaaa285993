"""`yieldgate ledger copy`: a whole ledger into another, across backends (SQLite to PostgreSQL and back).

Every table is copied row for row with its ids, so that what refers to an id (a block's checksum covers its run's
id, an event its run, a decision its run) stays true without rewriting anything. The copy is one write
transaction on the destination, verified before it commits: each table's row count and a digest of every row
must equal the source's, or nothing is stored. A destination that holds anything is refused unless `replace` is
given; then what it held is deleted in the same transaction.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from yieldgate.errors import InputError, LedgerError
from yieldgate.ledger import pg as ledger_pg
from yieldgate.ledger.location import Location
from yieldgate.ledger.store import Ledger

__all__ = ["CopyResult", "copy_ledger", "ledger_digest", "TABLES"]

# Parents before children (foreign keys), each with the columns that order its rows. `schema_migrations` is not
# copied: both ledgers are at this version's schema once opened.
TABLES: dict[str, tuple[str, ...]] = {
    "manifests": ("hash",),
    "runs": ("id",),
    "extra_keys": ("id",),
    "step_blocks": ("id",),
    "extra_blocks": ("id",),
    "evals": ("id",),
    "events": ("id",),
    "superseded_blocks": ("id",),
    "decisions": ("id",),
    "campaigns": ("name",),
    "run_tags": ("run_id", "tag"),
}
PAGE_ROWS = 2000
"""Rows read at a time from a table with ids: a large ledger is streamed, never held whole in memory."""


@dataclass(frozen=True)
class CopyResult:
    """What `copy_ledger` copied, as verified on the destination before it committed."""

    source: str
    destination: str
    rows: dict[str, int]
    """Rows per table, equal on both sides."""
    digest: str
    """sha256 of every copied row (`ledger_digest`), equal on both sides."""
    replaced: int
    """Rows the destination held before, deleted (only with `replace`)."""
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "destination": self.destination,
            "rows": dict(self.rows),
            "digest": self.digest,
            "replaced": self.replaced,
            "seconds": round(self.seconds, 3),
        }


def _columns(ledger: Ledger, table: str) -> list[str]:
    cur = ledger._db.execute(f"SELECT * FROM {table} WHERE 1 = 0")  # noqa: SLF001 - a copy reads tables as stored
    return [d[0] for d in cur.description]


def _rows(ledger: Ledger, table: str, columns: list[str]) -> Iterator[tuple[Any, ...]]:
    """A table's rows in its order; a table with ids page by page."""
    db = ledger._db  # noqa: SLF001
    order = TABLES[table]
    select = f"SELECT {', '.join(columns)} FROM {table}"
    if order != ("id",):
        yield from db.execute(f"{select} ORDER BY {', '.join(order)}").fetchall()
        return
    after = None
    while True:
        where = "" if after is None else " WHERE id > ?"
        page = db.execute(f"{select}{where} ORDER BY id LIMIT {PAGE_ROWS}", () if after is None else (after,))
        rows = page.fetchall()
        yield from rows
        if len(rows) < PAGE_ROWS:
            return
        after = rows[-1][columns.index("id")]


def _canonical(value: Any) -> bytes:
    """One stored value as bytes that are the same whichever backend read it. NaN reads as NULL: SQLite stores a
    NaN in a REAL column as NULL."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return b"N"
    if isinstance(value, bool | int):
        return b"i" + str(int(value)).encode()
    if isinstance(value, float):
        return b"f" + struct.pack("<d", value)
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        return b"s" + struct.pack("<q", len(data)) + data
    if isinstance(value, bytes | memoryview):
        data = bytes(value)
        return b"b" + struct.pack("<q", len(data)) + data
    raise LedgerError(f"a stored value of type {type(value).__name__} cannot be copied: {value!r}")


def ledger_digest(ledger: Ledger) -> tuple[str, dict[str, int]]:
    """sha256 over every row of every copied table (in `TABLES` order, rows in key order, columns by name) and the
    row count per table: equal for two ledgers that hold the same records, whatever their backends."""
    h = hashlib.sha256()
    counts = {}
    for table in TABLES:
        columns = sorted(_columns(ledger, table))
        h.update(f"table {table} {','.join(columns)}\n".encode())
        n = 0
        for row in _rows(ledger, table, columns):
            for value in row:
                h.update(_canonical(value))
            n += 1
        counts[table] = n
    return h.hexdigest(), counts


def _held(ledger: Ledger) -> int:
    db = ledger._db  # noqa: SLF001
    return sum(int(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in TABLES)


def copy_ledger(
    source: str | os.PathLike[str], destination: str | os.PathLike[str], *, replace: bool = False
) -> CopyResult:
    """Copy the whole ledger at `source` into `destination` (a file path or a PostgreSQL URL each; a missing file
    is created, a PostgreSQL database must exist). Verified by row counts and digest before the destination
    commits. `replace`: delete what the destination holds first (otherwise a destination with records is
    refused, InputError)."""
    t0 = time.perf_counter()
    src_text, dest_text = os.fspath(source), os.fspath(destination)
    if Location.parse(src_text).missing():
        raise InputError(f"{src_text}: no ledger there to copy; give the file or PostgreSQL URL the runs are in")
    if _same(src_text, dest_text):
        raise InputError(f"{ledger_pg.masked(dest_text)}: the source and the destination are the same ledger")
    new_file = Location.parse(dest_text).missing()
    try:
        return _copy(src_text, dest_text, replace=replace, t0=t0)
    except BaseException:
        if new_file:  # a failed copy leaves no empty ledger behind
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    os.remove(dest_text + suffix)
        raise


def _copy(src_text: str, dest_text: str, *, replace: bool, t0: float) -> CopyResult:
    with Ledger(src_text, readonly=True) as src, Ledger(dest_text) as dest:
        with dest.transaction():
            held = _held(dest)
            if held and not replace:
                raise InputError(
                    f"{dest.location}: holds {held} records already; copy into an empty ledger, or "
                    "pass replace=True to delete them first"
                )
            db = dest._db  # noqa: SLF001
            if held:
                for table in reversed(TABLES):
                    db.execute(f"DELETE FROM {table}")
            for table in TABLES:
                columns = _columns(src, table)
                batch: list[tuple[Any, ...]] = []
                for row in _rows(src, table, columns):
                    batch.append(tuple(row))
                    if len(batch) >= PAGE_ROWS:
                        dest._insert_rows(table, columns, batch)  # noqa: SLF001
                        batch = []
                if batch:
                    dest._insert_rows(table, columns, batch)  # noqa: SLF001
            if isinstance(db, ledger_pg.PgConnection):
                ledger_pg.reset_ids(db)
            want, want_rows = ledger_digest(src)
            got, got_rows = ledger_digest(dest)
            if (got, got_rows) != (want, want_rows):
                differ = [t for t in TABLES if got_rows[t] != want_rows[t]]
                raise LedgerError(
                    f"{dest.location}: the copy does not match {src.location} ("
                    + (f"row counts differ in {', '.join(differ)}" if differ else "digests differ")
                    + "); nothing was stored"
                )
        return CopyResult(src.location, dest.location, want_rows, want, held, time.perf_counter() - t0)


def _same(a: str, b: str) -> bool:
    if Location.parse(a).is_url or Location.parse(b).is_url:
        return a == b
    return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)
