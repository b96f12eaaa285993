"""The ledger's connection: open a SQLite file (WAL; its headers checked, network mounts refused, an older schema
upgraded) or a PostgreSQL database (`pg.PgConnection`), one write transaction at a time, reads that fail with the
ledger named. The parts of the `Ledger` class (`runs`, `steps`, `records`) build on it; `store.Ledger` joins them."""

from __future__ import annotations

import collections
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from yieldgate.errors import InputError, LedgerError, NetworkFilesystem
from yieldgate.ledger import migrations
from yieldgate.ledger import mounts as _mounts
from yieldgate.ledger import pg as ledger_pg
from yieldgate.ledger.file import file_problem
from yieldgate.ledger.location import Location
from yieldgate.util import lazy

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from yieldgate.manifest import Manifest
else:
    np = lazy.module("numpy")  # loaded by the first block read or written: listing runs needs neither
    pd = lazy.module("pandas")  # loaded by the first DataFrame built: listing runs builds none

__all__ = ["LedgerConnection", "json_body", "inserted_id", "readonly_pg_open"]

# Connections this process has open, by the file's real path: a header read by Python must wait until there are
# none (`file.py`: closing its descriptor would drop their POSIX locks).
_OPEN: collections.Counter[str] = collections.Counter()
_OPEN_LOCK = threading.RLock()  # re-entered: a read-only open of an older schema upgrades it with a writable open


def _zero_bytes(path: Path) -> bool:
    """A regular file with nothing in it (`touch yieldgate.db`) and no write-ahead log holding anything beside it:
    nothing stored yet, as with no file at all. Beside a log that holds something, SQLite is left to read the log."""
    wal = path.with_name(path.name + "-wal")
    return path.is_file() and path.stat().st_size == 0 and (not wal.exists() or wal.stat().st_size == 0)


def readonly_pg_open(applied: Sequence[str], pending: Sequence[str]) -> Literal["read", "upgrade", "empty"]:
    """What a read-only open of a PostgreSQL ledger does, given the migrations the database records and those it
    lacks: `empty` when it records none (no ledger there yet: a read creates no table in it, and reads an empty
    ledger), `upgrade` when it lacks some (an older yieldgate's ledger, upgraded once), else `read`."""
    if not applied:
        return "empty"
    return "upgrade" if pending else "read"


class LedgerConnection:
    """A run ledger in one SQLite file (WAL), or in a PostgreSQL database (`postgresql://USER@HOST:PORT/DB`).
    One instance per thread; processes and hosts may share the ledger."""

    _db: sqlite3.Connection | ledger_pg.PgConnection

    def __init__(
        self,
        location: str | os.PathLike[str] | None = None,
        *,
        readonly: bool = False,
        busy_timeout_s: float = 30.0,
        durable: bool = False,
        mounts: str | None = None,
    ) -> None:
        """`busy_timeout_s`: how long a write waits for another process's lock before failing (the Tracker's
        writer waits briefly and retries at its next flush, so it keeps collecting rows meanwhile).

        `durable`: every commit is on disk when it returns (WAL with synchronous=FULL: the log is synced at each
        commit). Without it (synchronous=NORMAL) a commit survives the process dying, but a host crash or power
        loss may take the commits since the last checkpoint with it. The Tracker's writer and its spill files
        write durably; bulk imports, which can be run again, do not.

        `mounts`: the mounts table telling which filesystem the file is on (default `/proc/mounts`). A ledger on a
        network or FUSE filesystem (NFS, Lustre, GPFS, CIFS/SMB, FUSE) is refused: NetworkFilesystem.

        A PostgreSQL URL: `busy_timeout_s` is how long a write waits for the ledger's write lock; `durable` is the
        server's to keep (its commits are synced unless it is configured otherwise); `location` is the URL with
        its password masked, and the password is kept nowhere but in the open connection."""
        where = Location.parse(location)
        if where.is_url:
            self._open_pg(where.text, readonly=readonly, busy_timeout_s=busy_timeout_s)
            return
        location = where.text
        self.location = location
        self.readonly = readonly
        self._depth = 0
        self._busy_ms = int(busy_timeout_s * 1000)
        self._durable = durable
        self._mounts = mounts if mounts is not None else _mounts.MOUNTS
        self._real: str | None = None
        # One thread of this process connects at a time, so that a header read (which a connection of this
        # process must never see: `_OPEN`) cannot overlap another thread's connect.
        with _OPEN_LOCK:
            self._db = self._connect(location, readonly)
            if location != ":memory:":
                self._real = os.path.realpath(location)
                _OPEN[self._real] += 1

    def _connect(self, location: str, readonly: bool) -> sqlite3.Connection:
        path = Path(location)
        try:
            if location == ":memory:" or (readonly and (not path.exists() or _zero_bytes(path))):
                # Nothing stored yet: an empty ledger, without creating (or filling) a file for a read.
                db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
                migrations.migrate(db, location)
                return db
            if path.is_dir():
                raise LedgerError(f"{location}: is a directory; a ledger is a file, such as ./yieldgate.db")
            remote = _mounts.network_filesystem(path, self._mounts)
            if remote is not None:
                raise NetworkFilesystem(
                    f"{location}: on a {remote[1]} filesystem (mounted at {remote[0]}), where SQLite's write-ahead log "
                    "does not work across hosts and a shared ledger can be damaged without an error; keep one ledger "
                    "per node on a local disk and combine them with `yieldgate merge`, or share a PostgreSQL ledger "
                    "(postgresql://USER@HOST:PORT/DB)"
                )
            # Before SQLite reads it (a truncated file or damaged log can read "fine"): its headers only while no
            # connection of this process has the file open, since closing the descriptor the read used would drop
            # that connection's locks (file.py's docstring); the size otherwise.
            problem = file_problem(path, headers=_OPEN[os.path.realpath(path)] == 0)  # under _OPEN_LOCK
            if problem is not None:
                raise LedgerError(
                    f"{location}: not a usable yieldgate ledger ({problem}); no run in it is read as "
                    "whole: restore it from a backup (a damaged write-ahead log moved aside leaves the "
                    "file as of its last checkpoint)"
                )
            if readonly:
                db = self._open_readonly(path)
                if migrations.check(db, location):
                    # An older schema: upgrade it once (migrations only add), then read as asked.
                    db.close()
                    if not os.access(path, os.W_OK):
                        raise LedgerError(
                            f"{location}: written by an older yieldgate and read-only here; "
                            "open it once where it is writable to upgrade it"
                        )
                    type(self)(path).close()
                    db = self._open_readonly(path)
                return db
            if not path.parent.exists():
                raise LedgerError(f"{location}: folder {path.parent} does not exist; create it first")
            return self._open_writable(path, location)
        except sqlite3.OperationalError as exc:  # the file may be fine: locked, unwritable, a full disk
            raise LedgerError(f"{location}: cannot open the ledger ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{location}: not a usable yieldgate ledger ({exc}); use another ledger file") from None

    def _open_writable(self, path: Path, location: str) -> sqlite3.Connection:
        """Connect, switch to WAL and migrate, trying again while another process holds the file. Two
        processes opening one new file at once race for the switch to WAL and the first migration, and SQLite
        answers some of those steps "database is locked" at once instead of waiting in its busy handler."""
        deadline = time.monotonic() + self._busy_ms / 1000
        pause = 0.01
        while True:
            db = sqlite3.connect(path, isolation_level=None, timeout=self._busy_ms / 1000, check_same_thread=False)
            try:
                db.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                migrations.check(db, location)  # refuse a newer schema before changing anything
                db.execute("PRAGMA journal_mode = WAL")
                db.execute(f"PRAGMA synchronous = {'FULL' if self._durable else 'NORMAL'}")
                db.execute("PRAGMA foreign_keys = ON")
                migrations.migrate(db, location)
                return db
            except sqlite3.OperationalError as exc:
                db.close()
                busy = "locked" in str(exc) or "busy" in str(exc)
                if not busy or time.monotonic() + pause > deadline:
                    raise
            except BaseException:
                db.close()
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.25)

    def _open_pg(self, url: str, *, readonly: bool, busy_timeout_s: float) -> None:
        self.location = ledger_pg.masked(url)
        self.readonly = readonly
        self._depth = 0
        self._real = None
        db: sqlite3.Connection | ledger_pg.PgConnection = ledger_pg.connect(url, lock_timeout_s=busy_timeout_s)
        try:
            if not readonly:
                migrations.migrate(db, self.location)
            else:
                opening = readonly_pg_open(migrations.applied_migrations(db), migrations.check(db, self.location))
                if opening == "upgrade":
                    type(self)(url).close()  # an older schema: upgraded once, under the write lock
                elif opening == "empty":
                    db.close()  # read as the empty ledger it is, as a missing SQLite file is
                    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
                    migrations.migrate(db, self.location)
        except BaseException:
            db.close()
            raise
        self._db = db

    @staticmethod
    def _open_readonly(path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, isolation_level=None, timeout=30, check_same_thread=False
        )
        db.execute("PRAGMA busy_timeout = 30000")
        return db

    if TYPE_CHECKING:  # what one part of the Ledger calls on another (the parts are joined in `store.Ledger`)

        def run_id(self, run: str) -> int: ...
        def create_run(
            self,
            name: str,
            *,
            manifest: Manifest | None = None,
            status: str = "running",
            source: str = "api",
            if_exists: Literal["error", "reuse", "replace"] = "error",
        ) -> int: ...
        def set_meta(self, run: str, key: str, value: Any) -> None: ...
        def set_note(self, run: str, text: str) -> None: ...
        def tag_run(self, run: str, tags: Iterable[str]) -> list[str]: ...
        def append_steps(
            self, run: str, rows: pd.DataFrame | Mapping[str, Any] | Iterable[Mapping[str, Any]]
        ) -> int: ...
        def evals(self, run: str) -> pd.DataFrame: ...
        def add_event(
            self,
            run: str | None,
            kind: str,
            body: Mapping[str, Any],
            *,
            start_step: int | None = None,
            end_step: int | None = None,
            state: str = "open",
        ) -> int: ...

    # -- plumbing -------------------------------------------------------------------------------------

    def close(self) -> None:
        self._db.close()
        self._release()

    def set_busy_timeout(self, seconds: float) -> None:
        """From now on a write waits up to `seconds` for another process's lock (the Tracker's writer, which waits
        briefly while the loop runs, waits longer for its last flush)."""
        if isinstance(self._db, ledger_pg.PgConnection):
            self._db.set_lock_timeout(seconds)
            return
        self._busy_ms = int(seconds * 1000)
        self._db.execute(f"PRAGMA busy_timeout = {self._busy_ms}")

    def _release(self) -> None:
        """This instance no longer counts as a connection on its file (`_OPEN`)."""
        real, self._real = self._real, None
        if real is not None:
            with _OPEN_LOCK:
                _OPEN[real] -= 1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction; nested calls join the outer one (an import is all or nothing)."""
        if self.readonly:
            raise LedgerError(f"{self.location}: opened read-only")
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise LedgerError(f"{self.location}: cannot start a write ({exc})") from None
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            if self._db.in_transaction:  # SQLite has already rolled back after some errors (a full disk)
                self._db.execute("ROLLBACK")
            raise
        self._depth = 0
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise LedgerError(f"{self.location}: write failed ({exc})") from None

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{self.location}: read failed ({exc})") from None

    def _rows(self, sql: str, params: Sequence[Any] = (), batch: int = 16) -> Generator[tuple[Any, ...], None, None]:
        """`_query`'s rows a few at a time, so that the caller can let each go before the next come (SQLite reads
        them as they are asked for, within one statement's snapshot; psycopg has them all already)."""
        try:
            cursor = self._db.execute(sql, params)
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{self.location}: read failed ({exc})") from None
        try:
            while rows := cursor.fetchmany(batch):
                yield from rows
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{self.location}: read failed ({exc})") from None
        finally:
            cursor.close()  # also when the caller stops early (`close()` on this generator): no statement left open


def inserted_id(cur: Any) -> int:
    """The id of the row the cursor's `INSERT ... RETURNING id` just wrote (both backends; `lastrowid` is SQLite's
    alone). Fetched whole, so that no statement is left open in the transaction."""
    return int(cur.fetchall()[0][0])


def json_body(value: Mapping[str, Any], what: str) -> str:
    """JSON for stored bodies. NaN and inf are not JSON: they are written as strings, not lost."""

    def fix(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        if isinstance(v, Mapping):
            return {str(k): fix(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [fix(x) for x in v]
        if isinstance(v, np.generic):
            return fix(v.item())
        return v

    try:
        return json.dumps(fix(value), allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{what} is not JSON-serialisable: {exc}") from None
