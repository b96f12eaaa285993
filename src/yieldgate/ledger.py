"""The ledger: every run with its manifest, step records, eval records, events and decisions.

SQLite by default (WAL: several processes may write different runs at once, and readers see a consistent
snapshot while a run is being written); PostgreSQL for a team, given a `postgresql://` URL: the same schema,
statements and transactions, run by `ledger_pg.PgConnection`. Writes are batched in transactions; reads return
DataFrames.

Step records follow the data contract of DESIGN.md: the core columns (`yieldgate.names.CORE_STEP_COLUMNS`)
live in a wide table stored as column blocks of consecutive steps, the namespaced extras in a long table
(run, step, key, value). Reading a run's core columns never touches the long table.
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from yieldgate import lazy, ledger_pg, migrations
from yieldgate import mounts as _mounts
from yieldgate.checksum import block_checksum, verify_block
from yieldgate.errors import InputError, LedgerError, NetworkFilesystem, RunInUse, RunNotFound, RunReferenced
from yieldgate.ledger_file import file_problem
from yieldgate.names import (
    CORE_STEP_COLUMNS,
    EVENT_KINDS,
    EVENT_STATES,
    RUN_STATUSES,
    STEP_VALUE_COLUMNS,
    check_note,
    check_run_name,
    check_tag,
    is_extra_key,
    metric_direction,
    readable_name,
    stderr_of,
    unsafe_character,
)
from yieldgate.owners import STALE_AFTER_S, Owner, liveness

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from yieldgate.manifest import Manifest
else:
    np = lazy.module("numpy")  # loaded by the first block read or written: listing runs needs neither
    pd = lazy.module("pandas")  # loaded by the first DataFrame built: listing runs builds none

__all__ = [
    "Ledger",
    "EvalRecord",
    "fold_stderr",
    "DEFAULT_LEDGER",
    "default_location",
    "must_exist",
    "higher_is_better",
]

DEFAULT_LEDGER = "yieldgate.db"

# The fields of a run record read off its steps and evals, not off the runs table (`Ledger.add_totals`).
TOTAL_FIELDS = (
    "steps",
    "last_step",
    "tokens",
    "last_eval_task",
    "last_eval_metric",
    "last_eval_value",
    "last_eval_step",
    "duration_s",
)

# The fields of `Ledger.run_records()`, in the order of `Ledger.runs()`'s columns.
RUN_COLUMNS = (
    "name",
    "status",
    "source",
    "manifest_hash",
    "created_at",
    "updated_at",
    *TOTAL_FIELDS,
    "note",
    "tags",
    "owner",
    "heartbeat_at",
    "recorded_status",
)

# `add_totals` looks up to this many runs by name; over it, it reads every run's totals in one pass.
LOOKUP_RUNS = 1000

# Bulk appends are cut into blocks of BLOCK_ROWS steps. Small appends (a tracker flushing every second)
# are written as blocks of their own, and every COMPACT_BLOCKS of them at the run's end are merged into one
# while they hold fewer than TAIL_MERGE_ROWS steps, so a long run ends up in ~256-row blocks and a flush
# seldom decodes and rewrites old rows (the Tracker's CPU per step is a target: benchmarks/bench_tracker.py).
BLOCK_ROWS = 8192
_TAILS_PER_QUERY = 200
"""Extras keys whose tails one query reads (a compound SELECT; SQLite allows 500 parts)."""
_BLOCK_FIELDS = ["first_step", "last_step", "n", "tokens_max", "columns", "data", "missing", "checksum"]
_BLOCK_COLUMNS = {
    "step_blocks": ["run_id", *_BLOCK_FIELDS, "wall_s_max"],
    "extra_blocks": ["run_id", "key_id", *_BLOCK_FIELDS],
}
TAIL_MERGE_ROWS = 256
COMPACT_BLOCKS = 16


def higher_is_better(metric: str) -> bool:
    """Default direction of a metric (`names.metric_direction`): False for losses, perplexities and error
    rates; a name that does not say is taken as higher-is-better unless its record says otherwise."""
    direction = metric_direction(metric)
    return True if direction is None else direction


def must_exist(location: str | os.PathLike[str]) -> str:
    """`location` when it names a ledger that exists (or a URL or `:memory:`); InputError otherwise. For what changes
    runs already stored: opening a missing file for writing would create an empty ledger."""
    text = os.fspath(location)
    if text != ":memory:" and "://" not in text and not Path(text).exists():
        raise InputError(
            f"{text}: no ledger there; give the file the runs are in (the ledger argument, or $YIELDGATE_LEDGER)"
        )
    return text


def default_location() -> str:
    """The ledger a user gets without `--ledger`: $YIELDGATE_LEDGER, else ./yieldgate.db."""
    return os.environ.get("YIELDGATE_LEDGER") or DEFAULT_LEDGER


@dataclass(frozen=True, kw_only=True)
class EvalRecord:
    """One evaluation result at a point of a run (data contract: task, metric, value, direction)."""

    step: int
    """Optimizer step the evaluation was taken at."""
    task: str
    """Task, e.g. `val`, `val/code`, `lambada_openai`."""
    metric: str
    """Metric, e.g. `loss`, `bpb`, `acc`."""
    value: float
    """The score (NaN is kept as NaN)."""
    tokens: float | None = None
    """Accepted tokens at that step, when known."""
    wall_s: float | None = None
    """Cumulative wall-clock seconds at that step, when known."""
    higher_is_better: bool | None = None
    """Direction; None takes the metric's default (`higher_is_better(metric)`)."""
    portfolio: str = ""
    """Eval portfolio name."""
    portfolio_version: str = ""
    """Eval portfolio version."""
    stderr: float | None = None
    """Standard error of `value`, where the evaluation reports one (lm-eval's `acc_stderr` beside `acc`)."""

    @property
    def key(self) -> tuple[int, str, str, str, str]:
        """What one stored evaluation is: (step, portfolio, portfolio version, task, metric)."""
        return self.step, self.portfolio, self.portfolio_version, self.task, self.metric


def _given(value: float | None) -> float | None:
    """A value, or None where none was given (None, or the NaN a frame holds for one; PostgreSQL would keep a NaN)."""
    return None if value is None or math.isnan(value) else float(value)


def fold_stderr(records: Iterable[EvalRecord]) -> tuple[list[EvalRecord], list[EvalRecord]]:
    """Records given as standard errors of other records' metrics (`acc_stderr` beside `acc`, `names.stderr_of`)
    set as those records' `stderr`: (the records with them folded in, the standard errors whose metric is not among
    the records). A standard error is never a metric of its own."""
    records = list(records)
    at = {r.key: i for i, r in enumerate(records) if stderr_of(r.metric) is None}
    alone = []
    for r in records:
        base = stderr_of(r.metric)
        if base is None:
            continue
        i = at.get((r.step, r.portfolio, r.portfolio_version, r.task, base))
        if i is None:
            alone.append(r)
        else:
            records[i] = replace(records[i], stderr=r.value)
    return [r for r in records if stderr_of(r.metric) is None], alone


# -- step columns ---------------------------------------------------------------------------------------


@dataclass
class _Columns:
    """Step records in column form: sorted unique steps, and per column (values, missing mask)."""

    steps: np.ndarray
    values: dict[str, tuple[np.ndarray, np.ndarray]]

    def __len__(self) -> int:
        return len(self.steps)


def _column_values(seq: Any, n: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values, missing mask) from a column; None / pandas NA / masked entries are missing."""
    if isinstance(seq, pd.Series):
        missing = seq.isna().to_numpy()
        if isinstance(seq.dtype, pd.api.extensions.ExtensionDtype) and seq.dtype.kind == "f":
            # Nullable floats keep NaN apart from NA: only NA is missing.
            missing = seq.array._mask.copy()  # noqa: SLF001 - the public API has no mask accessor
            values = seq.array._data.astype(np.float64)  # noqa: SLF001
            return values, missing
        values = pd.to_numeric(seq, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        return values, missing
    if isinstance(seq, np.ma.MaskedArray):
        return np.ma.getdata(seq).astype(np.float64), np.ma.getmaskarray(seq).copy()
    if isinstance(seq, np.ndarray) and seq.dtype.kind in "fiub":
        return seq.astype(np.float64), np.zeros(n, dtype=bool)
    values = np.empty(n, dtype=np.float64)
    missing = np.zeros(n, dtype=bool)
    for i, v in enumerate(seq):
        if v is None or v is pd.NA:
            missing[i] = True
            values[i] = np.nan
        else:
            try:
                values[i] = float(v)  # numpy scalars and 0-d tensors too; NaN and inf kept
            except (TypeError, ValueError):
                raise InputError(f"column {name!r}, row {i}: expected a number, got {v!r}") from None
    return values, missing


def _collapse(steps: np.ndarray, values: dict[str, tuple[np.ndarray, np.ndarray]]) -> _Columns:
    """Sort by step and merge repeated steps: per column, the last recorded value wins."""
    if len(steps) == 0 or bool(np.all(np.diff(steps) > 0)):
        return _Columns(steps, values)
    order = np.argsort(steps, kind="stable")
    uniq, inverse = np.unique(steps[order], return_inverse=True)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, (vals, miss) in values.items():
        vals, miss = vals[order], miss[order]
        # Index of the last recorded row of each step (-1: none). np.maximum.at is order-independent,
        # unlike fancy assignment with repeated indices.
        last = np.full(len(uniq), -1, dtype=np.int64)
        present = np.nonzero(~miss)[0]
        np.maximum.at(last, inverse[present], present)
        got = last >= 0
        merged = np.full(len(uniq), np.nan)
        merged[got] = vals[last[got]]
        out[name] = (merged, ~got)
    return _Columns(uniq, out)


def _largest(cols: _Columns, name: str) -> float | None:
    """Largest finite recorded value of column `name`, or None (a block's `tokens_max`, `wall_s_max`)."""
    if name not in cols.values:
        return None
    v, m = cols.values[name]
    ok = ~m & np.isfinite(v)
    return float(v[ok].max()) if ok.any() else None


def _take(cols: _Columns, keep: np.ndarray) -> _Columns:
    return _Columns(cols.steps[keep], {k: (v[keep], m[keep]) for k, (v, m) in cols.values.items()})


def _concat(parts: list[_Columns]) -> _Columns:
    names = sorted({name for p in parts for name in p.values})
    steps = np.concatenate([p.steps for p in parts])
    values = {}
    for name in names:
        vals, miss = [], []
        for p in parts:
            v, m = p.values.get(name, (np.full(len(p), np.nan), np.ones(len(p), dtype=bool)))
            vals.append(v)
            miss.append(m)
        values[name] = (np.concatenate(vals), np.concatenate(miss))
    return _Columns(steps, values)


def _encode(cols: _Columns) -> tuple[str, bytes, bytes | None]:
    names = list(cols.values)
    data = b"".join([cols.steps.astype("<i8").tobytes()] + [cols.values[n][0].astype("<f8").tobytes() for n in names])
    if not names:
        return "", data, None
    missing = np.stack([cols.values[n][1] for n in names])
    packed = np.packbits(missing, axis=1).tobytes() if missing.any() else None
    return ",".join(names), data, packed


def _decode(n: int, columns: str, data: bytes, missing: bytes | None, want: Sequence[str] | None) -> _Columns:
    names = columns.split(",") if columns else []
    steps = np.frombuffer(data, dtype="<i8", count=n)
    mask = (
        np.unpackbits(np.frombuffer(missing, dtype=np.uint8).reshape(len(names), -1), axis=1, count=n).astype(bool)
        if missing is not None
        else None
    )
    values = {}
    for i, name in enumerate(names):
        if want is not None and name not in want:
            continue
        vals = np.frombuffer(data, dtype="<f8", count=n, offset=8 * n * (i + 1))
        values[name] = (vals, mask[i] if mask is not None else np.zeros(n, dtype=bool))
    return _Columns(steps, values)


# The stored fields of a block, in the order `checksum.verify_block` takes them.
_BLOCK = "checksum, first_step, last_step, n, tokens_max, columns, data, missing"


def _block_columns(row: Sequence[Any], want: Sequence[str] | None) -> _Columns:
    """Decode a checked `_BLOCK` row."""
    return _decode(row[3], row[5], row[6], row[7], want)


# -- the ledger -----------------------------------------------------------------------------------------

# Connections this process has open, by the file's real path: a header read by Python must wait until there are
# none (`ledger_file`: closing its descriptor would drop their POSIX locks).
_OPEN: collections.Counter[str] = collections.Counter()
_OPEN_LOCK = threading.RLock()  # re-entered: a read-only open of an older schema upgrades it with a writable open


class Ledger:
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
        location = os.fspath(location) if location is not None else default_location()
        if ledger_pg.is_url(location):
            self._open_pg(location, readonly=readonly, busy_timeout_s=busy_timeout_s)
            return
        if location.startswith("sqlite:///"):  # SQLAlchemy's form: sqlite:///relative.db, sqlite:////absolute.db
            location = location[len("sqlite:///") :]
        elif "://" in location:
            raise InputError(
                f"{ledger_pg.masked(location)}: not a ledger address yieldgate opens; give a file (./yieldgate.db, "
                "sqlite:///PATH) or a PostgreSQL URL (postgresql://USER@HOST:PORT/DB)"
            )
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
            if location == ":memory:" or (readonly and not path.exists()):
                # Nothing stored yet: an empty ledger, without creating a file for a read.
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
            # that connection's locks (ledger_file's docstring); the size otherwise.
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
                    Ledger(path).close()
                    db = self._open_readonly(path)
                return db
            if not path.parent.exists():
                raise LedgerError(f"{location}: folder {path.parent} does not exist; create it first")
            db = sqlite3.connect(path, isolation_level=None, timeout=self._busy_ms / 1000, check_same_thread=False)
            db.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            migrations.check(db, location)  # refuse a newer schema before changing anything
            db.execute("PRAGMA journal_mode = WAL")
            db.execute(f"PRAGMA synchronous = {'FULL' if self._durable else 'NORMAL'}")
            db.execute("PRAGMA foreign_keys = ON")
            migrations.migrate(db, location)
            return db
        except sqlite3.OperationalError as exc:  # the file may be fine: locked, unwritable, a full disk
            raise LedgerError(f"{location}: cannot open the ledger ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{location}: not a usable yieldgate ledger ({exc}); use another ledger file") from None

    def _open_pg(self, url: str, *, readonly: bool, busy_timeout_s: float) -> None:
        self.location = ledger_pg.masked(url)
        self.readonly = readonly
        self._depth = 0
        self._real = None
        db = ledger_pg.connect(url, lock_timeout_s=busy_timeout_s)
        try:
            if migrations.check(db, self.location) and readonly:
                Ledger(url).close()  # an older schema (or none yet): upgraded once, under the write lock
            elif not readonly:
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

    # -- plumbing -------------------------------------------------------------------------------------

    def close(self) -> None:
        self._db.close()
        self._release()

    def _release(self) -> None:
        """This instance no longer counts as a connection on its file (`_OPEN`)."""
        real, self._real = self._real, None
        if real is not None:
            with _OPEN_LOCK:
                _OPEN[real] -= 1

    def __enter__(self) -> Ledger:
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

    # -- runs -----------------------------------------------------------------------------------------

    def _put_manifest(self, manifest: Manifest) -> str:
        digest = manifest.content_hash()
        self._db.execute(
            "INSERT INTO manifests (hash, body, created_at) VALUES (?, ?, ?) ON CONFLICT (hash) DO NOTHING",
            (digest, manifest.to_json(), time.time()),
        )
        return digest

    def create_run(
        self,
        name: str,
        *,
        manifest: Manifest | None = None,
        status: str = "running",
        source: str = "api",
        if_exists: Literal["error", "reuse", "replace"] = "error",
    ) -> int:
        """Add a run and return its id.

        `if_exists`: `error` (default), `reuse` (keep the run and its records: a resumed run), or
        `replace` (drop its records first: a re-import).
        """
        check_run_name(name)
        if status not in RUN_STATUSES:
            raise InputError(f"run status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
        with self.transaction():
            digest = self._put_manifest(manifest) if manifest is not None else None
            row = self._db.execute("SELECT id FROM runs WHERE name = ?", (name,)).fetchone()
            now = time.time()
            if row is not None:
                if if_exists == "error":
                    raise InputError(f"run {name!r} already exists in {self.location}; pick another name")
                run_id = int(row[0])
                if if_exists == "replace":
                    for table in ("step_blocks", "extra_blocks", "evals", "events"):
                        self._db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
                    self._db.execute("UPDATE runs SET meta = '{}' WHERE id = ?", (run_id,))
                self._db.execute(
                    "UPDATE runs SET status = ?, manifest_hash = COALESCE(?, manifest_hash), source = ?, "
                    "updated_at = ? WHERE id = ?",
                    (status, digest, source, now, run_id),
                )
                return run_id
            cur = self._db.execute(
                "INSERT INTO runs (name, status, manifest_hash, source, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (name, status, digest, source, now, now),
            )
            return _inserted_id(cur)

    def claim_run(
        self,
        name: str,
        *,
        owner: Owner,
        manifest: Manifest | None = None,
        resume: bool = False,
        takeover: bool = False,
        source: str = "tracker",
    ) -> bool:
        """Make `owner` the one writer of run `name`, creating the run if it is new; return whether it existed.

        Check and claim are one write transaction, so two processes claiming at once cannot both succeed. An
        existing run needs `resume`; one still `running` under another owner is refused (RunInUse) while that
        owner lives, and taken over with `takeover` once it is dead (`yieldgate.owners.liveness`; the takeover
        is kept as a `warning` event)."""
        with self.transaction():
            row = self._db.execute(
                "SELECT status, owner_host, owner_pid, owner_started, heartbeat_at FROM runs WHERE name = ?", (name,)
            ).fetchone()
            if row is not None and not resume:
                raise InputError(
                    f"run {name!r} already exists in {self.location}; pass resume=True to continue it, "
                    "or pick another name"
                )
            previous = Owner(row[1], int(row[2]), float(row[3] or 0.0)) if row is not None and row[1] else None
            if row is not None and row[0] == "running" and previous is not None and previous != owner:
                state = liveness(previous, row[4])
                beat = "no heartbeat" if row[4] is None else f"last heartbeat {time.time() - row[4]:.0f} s ago"
                if state == "live":
                    raise RunInUse(
                        f"run {name!r} in {self.location} is being written by {previous}, {beat}; a second writer "
                        f"would splice two runs into one: wait for it to end (takeover=True takes over only a writer "
                        f"that is dead: its process gone, or no heartbeat for {STALE_AFTER_S:.0f} s)"
                    )
                if not takeover:
                    raise RunInUse(
                        f"run {name!r} in {self.location} was being written by {previous}, which stopped without "
                        f"closing it ({'its process is gone' if state == 'crashed' else beat}); pass takeover=True "
                        "to take it over"
                    )
            self.create_run(name, manifest=manifest, status="running", source=source, if_exists="reuse")
            self._db.execute(
                "UPDATE runs SET owner_host = ?, owner_pid = ?, owner_started = ?, heartbeat_at = ? WHERE name = ?",
                (owner.host, owner.pid, owner.started, time.time(), name),
            )
            if row is not None and row[0] == "running" and previous is not None and previous != owner:
                self.add_event(
                    name, "warning", {"source": "tracker", "takeover": {"from": str(previous), "by": str(owner)}}
                )
        return row is not None

    def heartbeat(self, run: str, owner: Owner) -> None:
        """Stamp the run's heartbeat for its writer `owner`; RunInUse when the run is no longer its own (taken
        over by another process)."""
        with self.transaction():
            cur = self._db.execute(
                "UPDATE runs SET heartbeat_at = ? WHERE name = ? AND owner_host = ? AND owner_pid = ? AND "
                "owner_started = ?",
                (time.time(), run, owner.host, owner.pid, owner.started),
            )
            if cur.rowcount == 0:
                row = self._db.execute(
                    "SELECT owner_host, owner_pid, owner_started FROM runs WHERE name = ?", (run,)
                ).fetchone()
                now = "gone from the ledger" if row is None else f"written by {Owner(row[0], row[1], row[2] or 0.0)}"
                raise RunInUse(f"run {run!r} in {self.location} is no longer this process's to write: it is {now}")

    def run_id(self, run: str) -> int:
        row = self._query("SELECT id FROM runs WHERE name = ?", (run,))
        if not row:
            raise RunNotFound(f"no run named {run!r} in {self.location}; `yieldgate runs` lists them")
        return int(row[0][0])

    def set_status(self, run: str, status: str) -> None:
        if status not in RUN_STATUSES:
            raise InputError(f"run status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
        with self.transaction():
            self._db.execute(
                "UPDATE runs SET status = ?, updated_at = ? WHERE id = ?", (status, time.time(), self.run_id(run))
            )

    def set_manifest(self, run: str, manifest: Manifest) -> str:
        with self.transaction():
            digest = self._put_manifest(manifest)
            self._db.execute(
                "UPDATE runs SET manifest_hash = ?, updated_at = ? WHERE id = ?",
                (digest, time.time(), self.run_id(run)),
            )
        return digest

    def set_meta(self, run: str, key: str, value: Any) -> None:
        """Record how the run's figures were measured under `key` (e.g. `mfu`: formula, peak, dtype)."""
        with self.transaction():
            run_id = self.run_id(run)
            meta = json.loads(self._db.execute("SELECT meta FROM runs WHERE id = ?", (run_id,)).fetchone()[0])
            meta[key] = value
            self._db.execute("UPDATE runs SET meta = ? WHERE id = ?", (_json(meta, "run meta"), run_id))

    def meta(self, run: str) -> dict[str, Any]:
        """What `set_meta` recorded for the run."""
        return json.loads(self._query("SELECT meta FROM runs WHERE id = ?", (self.run_id(run),))[0][0])

    def manifest(self, run: str) -> Manifest | None:
        """The run's manifest, or None when it has none."""
        rows = self._query(
            "SELECT m.body FROM runs r JOIN manifests m ON m.hash = r.manifest_hash WHERE r.id = ?",
            (self.run_id(run),),
        )
        from yieldgate.manifest import parse_manifest  # pydantic: only the commands that read manifests load it

        return parse_manifest(json.loads(rows[0][0]), origin=f"manifest of run {run!r}") if rows else None

    def runs(self) -> pd.DataFrame:
        """One row per run (`run_records`, as a DataFrame), oldest first."""
        return pd.DataFrame(self.run_records(), columns=list(RUN_COLUMNS))

    def run_records(self, name: str | None = None, *, totals: bool = True) -> list[dict[str, Any]]:
        """One dict per run: name, status, source, manifest_hash, created_at, updated_at, steps, last_step, tokens,
        last eval, duration_s (the largest recorded `wall_s`: the run's wall clock), tags (a sorted list), note,
        and its writer: owner, heartbeat_at, recorded_status; oldest first. A value not recorded is None.

        `status` is computed at read time for a run recorded `running` by a Tracker: `crashed` once its writer's
        process is gone (same host), `stale` once its heartbeat is older than `owners.STALE_AFTER_S` (a dead
        host, or a hung process); `recorded_status` is what the ledger holds. Builds no DataFrame: `yieldgate
        runs` lists runs without loading pandas. `name`: that run's record alone ([] if there is none).

        `totals=False` leaves the fields read off steps and evals (`TOTAL_FIELDS`) None, for a listing that
        chooses its runs first and fills those of the ones it shows with `add_totals`."""
        only = "WHERE name = ?" if name is not None else ""
        runs = self._query(
            "SELECT name, status, source, manifest_hash, created_at, updated_at, note, owner_host, owner_pid, "
            "owner_started, heartbeat_at FROM runs " + only + " ORDER BY created_at, id",
            (name,) if name is not None else (),
        )
        tags: dict[str, list[str]] = collections.defaultdict(list)
        for run, tag in self._query(
            "SELECT r.name, t.tag FROM run_tags t JOIN runs r ON r.id = t.run_id "
            + only.replace("name", "r.name")
            + " ORDER BY t.tag",
            (name,) if name is not None else (),
        ):
            tags[run].append(tag)
        now = time.time()
        out = []
        for run, recorded, source, digest, created, updated, note, host, pid, started, beat in runs:
            owner = Owner(host, int(pid), float(started or 0.0)) if host is not None else None
            status = recorded
            if recorded == "running" and owner is not None:
                state = liveness(owner, beat, now)
                status = recorded if state == "live" else state
            out.append(
                {
                    "name": run,
                    "status": status,
                    "source": source,
                    "manifest_hash": digest,
                    "created_at": created,
                    "updated_at": updated,
                    **dict.fromkeys(TOTAL_FIELDS),
                    "note": note,
                    "tags": tags.get(run, []),
                    "owner": None if owner is None else str(owner),
                    "heartbeat_at": beat,
                    "recorded_status": recorded,
                }
            )
        return self.add_totals(out) if totals else out

    def add_totals(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`records` (of `run_records(totals=False)`) with their `TOTAL_FIELDS` filled in, in place: the run's
        steps, last step, tokens and wall clock summed from its blocks' index entries (0009_listing_index: no
        block is read), and its last evaluation (the latest step's; `val/loss` first among equals)."""
        if not records:
            return records
        sums: dict[str, tuple[Any, ...]] = {}
        last: dict[str, tuple[Any, ...]] = {}
        names = [r["name"] for r in records]
        # A page of a listing looks its runs up by name, 500 at a time; more runs are read in one pass per table.
        chunks = [None] if len(names) > LOOKUP_RUNS else [names[i : i + 500] for i in range(0, len(names), 500)]
        for chunk in chunks:
            only = "" if chunk is None else f"WHERE r.name IN ({', '.join('?' * len(chunk))})"
            params = () if chunk is None else tuple(chunk)
            for run, *rest in self._query(
                "SELECT r.name, SUM(b.n), MAX(b.last_step), MAX(b.tokens_max), MAX(b.wall_s_max) "
                f"FROM step_blocks b JOIN runs r ON r.id = b.run_id {only} GROUP BY r.name",
                params,
            ):
                sums[run] = tuple(rest)
            for run, *rest in self._query(
                "SELECT name, task, metric, value, step FROM (SELECT r.name, e.task, e.metric, e.value, e.step, "
                "ROW_NUMBER() OVER (PARTITION BY e.run_id ORDER BY e.step DESC, "
                "(e.task = 'val' AND e.metric = 'loss') DESC, e.id DESC) AS k "
                f"FROM evals e JOIN runs r ON r.id = e.run_id {only}) latest WHERE k = 1",
                params,
            ):
                last[run] = tuple(rest)
        for r in records:
            steps, r["last_step"], r["tokens"], r["duration_s"] = sums.get(r["name"], (0, None, None, None))
            r["steps"] = steps or 0
            r["last_eval_task"], r["last_eval_metric"], r["last_eval_value"], r["last_eval_step"] = last.get(
                r["name"], (None, None, None, None)
            )
        return records

    def run_metas(self) -> pd.DataFrame:
        """One row per run: name, status, meta (dict), oldest first. Campaigns find their probes here."""
        rows = self._query("SELECT name, status, meta FROM runs ORDER BY created_at, id")
        return pd.DataFrame([(n, s, json.loads(m)) for n, s, m in rows], columns=["name", "status", "meta"])

    def run_info(self, run: str) -> dict[str, Any]:
        """The `run_records()` record of one run (RunNotFound if there is none)."""
        self.run_id(run)
        return self.run_records(run)[0]

    # -- managing runs --------------------------------------------------------------------------------
    # Remove, rename, tag and note runs. Nothing here touches a run a live Tracker writes (RunInUse, naming the
    # writer), and nothing removes or renames what a gate decision cites (RunReferenced): the audit trail keeps
    # every run it names. Tags and notes describe a run; they do not move its `updated_at`.

    def _live_writer(self, run: str) -> Owner | None:
        """The live process writing `run`, or None (no Tracker holds it, or its writer is dead)."""
        row = self._db.execute(
            "SELECT status, owner_host, owner_pid, owner_started, heartbeat_at FROM runs WHERE name = ?", (run,)
        ).fetchone()
        if row is None or row[0] != "running" or row[1] is None:
            return None
        owner = Owner(row[1], int(row[2]), float(row[3] or 0.0))
        return owner if liveness(owner, row[4]) == "live" else None

    def _refuse_if_held(self, run: str, doing: str) -> None:
        """RunInUse when a live Tracker writes `run`; RunReferenced when a gate decision cites it."""
        writer = self._live_writer(run)
        if writer is not None:
            raise RunInUse(
                f"cannot {doing} run {run!r} in {self.location}: it is being written by {writer}; wait "
                "for its Tracker to close"
            )
        run_id = self.run_id(run)
        citing = [
            (int(i), t)
            for i, t, rid, evidence in self._db.execute(
                "SELECT id, target, run_id, evidence FROM decisions ORDER BY id"
            ).fetchall()
            if rid == run_id or run in (json.loads(evidence).get("runs") or [])
        ]
        if citing:
            which = ", ".join(f"#{i} (target {t!r})" for i, t in citing[:3]) + (" ..." if len(citing) > 3 else "")
            many = len(citing) > 1
            raise RunReferenced(
                f"cannot {doing} run {run!r} in {self.location}: gate decision{'s' * many} {which} "
                f"cite{'' if many else 's'} it as evidence, and the audit trail keeps every run a "
                "decision names"
            )

    def remove_runs(self, runs: Sequence[str]) -> list[dict[str, Any]]:
        """Delete runs with their steps, extras, evals and events, all in one transaction: if any one is refused
        (RunNotFound, RunInUse, RunReferenced) nothing is deleted. Returns, per run, what went with it: name,
        steps, extra_values, evals, events."""
        removed = []
        with self.transaction():
            for run in dict.fromkeys(runs):
                self._refuse_if_held(run, "remove")
            for run in dict.fromkeys(runs):
                run_id = self.run_id(run)
                count: dict[str, Any] = {"name": run}
                for label, sql in (
                    ("steps", "SELECT COALESCE(SUM(n), 0) FROM step_blocks WHERE run_id = ?"),
                    ("extra_values", "SELECT COALESCE(SUM(n), 0) FROM extra_blocks WHERE run_id = ?"),
                    ("evals", "SELECT COUNT(*) FROM evals WHERE run_id = ?"),
                    ("events", "SELECT COUNT(*) FROM events WHERE run_id = ?"),
                ):
                    count[label] = int(self._db.execute(sql, (run_id,)).fetchone()[0])
                # Children first, so that no backend needs cascading foreign keys to get this right.
                for table in ("superseded_blocks", "events", "evals", "extra_blocks", "step_blocks", "run_tags"):
                    self._db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
                self._db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
                removed.append(count)
        return removed

    def rename_run(self, run: str, new: str) -> None:
        """Give run `run` the name `new` (validated as any run name; a name already taken is refused). Its records
        keep their place: they belong to the run, not to its name."""
        check_run_name(new)
        with self.transaction():
            self.run_id(run)
            if new == run:
                return
            if self._db.execute("SELECT 1 FROM runs WHERE name = ?", (new,)).fetchone() is not None:
                raise InputError(
                    f"cannot rename run {run!r} to {new!r}: a run named {new!r} is already in "
                    f"{self.location}; pick another name"
                )
            self._refuse_if_held(run, "rename")
            self._db.execute("UPDATE runs SET name = ? WHERE name = ?", (new, run))

    def tag_run(self, run: str, tags: Iterable[str]) -> list[str]:
        """Add tags to a run (one already there is kept once); return its tags, sorted."""
        wanted = [check_tag(t) for t in tags]
        with self.transaction():
            run_id = self.run_id(run)
            self._db.executemany(
                "INSERT INTO run_tags (run_id, tag) VALUES (?, ?) ON CONFLICT DO NOTHING", [(run_id, t) for t in wanted]
            )
            return self.tags(run)

    def untag_run(self, run: str, tags: Iterable[str]) -> list[str]:
        """Take tags off a run; a tag it does not carry is refused (InputError naming the ones it has), so a typo
        does not pass for done. Returns its tags, sorted."""
        unwanted = [check_tag(t) for t in tags]
        with self.transaction():
            have = self.tags(run)
            missing = [t for t in unwanted if t not in have]
            if missing:
                raise InputError(f"run {run!r} has no tag {missing[0]!r}; its tags: {', '.join(have) or 'none'}")
            run_id = self.run_id(run)
            self._db.executemany("DELETE FROM run_tags WHERE run_id = ? AND tag = ?", [(run_id, t) for t in unwanted])
            return self.tags(run)

    def tags(self, run: str) -> list[str]:
        """The run's tags, sorted."""
        rows = self._query("SELECT tag FROM run_tags WHERE run_id = ? ORDER BY tag", (self.run_id(run),))
        return [r[0] for r in rows]

    def set_note(self, run: str, text: str) -> None:
        """Keep a free-text note with the run (it replaces the one before; empty text removes it)."""
        note = check_note(text)
        with self.transaction():
            self._db.execute("UPDATE runs SET note = ? WHERE id = ?", (note or None, self.run_id(run)))

    def note(self, run: str) -> str | None:
        """The run's note, or None."""
        return self._query("SELECT note FROM runs WHERE id = ?", (self.run_id(run),))[0][0]

    def free_name(self, base: str) -> str:
        """`base` when no run has that name, else the first free of `base-2`, `base-3`, ... (a re-run script's
        next run). Call it inside the transaction that creates the run, so that no other writer takes the name
        in between."""
        check_run_name(base)
        # LIKE may match more than `base-N` (`_` is its wildcard, ASCII case is ignored): only exact names count.
        taken = {r[0] for r in self._query("SELECT name FROM runs WHERE name = ? OR name LIKE ?", (base, base + "-%"))}
        n = 1
        name = base
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        return name

    def readable_name(self) -> str:
        """A free run name a person can say (`brisk-otter-7`: `names.readable_name`, numbered by the runs so
        far). Like `free_name`, call it inside the transaction that creates the run."""
        number = int(self._query("SELECT COUNT(*) FROM runs")[0][0]) + 1
        for _ in range(8):
            name = readable_name(number)
            if not self._query("SELECT 1 FROM runs WHERE name = ?", (name,)):
                return name
        return self.free_name(name)

    # -- steps ----------------------------------------------------------------------------------------

    def _normalise_steps(
        self, rows: pd.DataFrame | Mapping[str, Any] | Iterable[Mapping[str, Any]]
    ) -> tuple[_Columns, dict[str, _Columns]]:
        pandas = sys.modules.get("pandas")  # a DataFrame means pandas is loaded: a Tracker's flush never loads it
        if pandas is not None and isinstance(rows, pandas.DataFrame):
            table: Mapping[str, Any] = {c: rows[c] for c in rows.columns}
        elif isinstance(rows, Mapping):
            table = rows
        else:
            records = list(rows)
            keys: dict[str, None] = {}
            for r in records:
                keys.update(dict.fromkeys(r))
            table = {k: [r.get(k) for r in records] for k in keys}
        if "step" not in table:
            raise InputError("step records need a 'step' column")
        n = len(table["step"])
        step_vals, step_missing = _column_values(table["step"], n, "step")
        if step_missing.any() or not np.all(np.isfinite(step_vals)):
            row = int(np.argmax(step_missing | ~np.isfinite(step_vals)))
            raise InputError(f"step records: 'step' is missing or not finite in row {row}")
        steps = step_vals.astype(np.int64)
        if not np.array_equal(steps, step_vals):
            bad = int(np.argmax(steps != step_vals))
            raise InputError(f"step records: 'step' must be a whole number, got {step_vals[bad]} in row {bad}")
        core, extras = {}, {}
        for key, seq in table.items():
            if key == "step":
                continue
            if len(seq) != n:
                raise InputError(f"step records: column {key!r} has {len(seq)} values, 'step' has {n}")
            unsafe = unsafe_character(key) if isinstance(key, str) else "a name that is not text"
            if unsafe is not None:
                raise InputError(f"step records: column {key!r} is not allowed: it holds {unsafe}")
            if key in CORE_STEP_COLUMNS:
                core[key] = _column_values(seq, n, key)
            elif is_extra_key(key):
                extras[key] = _column_values(seq, n, key)
            else:
                raise InputError(
                    f"step records: unknown column {key!r}; core columns are {', '.join(STEP_VALUE_COLUMNS)}, "
                    f"anything else needs a namespace (e.g. 'signals/{key}')"
                )
        series = {}
        for key, (vals, miss) in extras.items():
            keep = ~miss
            series[key] = _collapse(steps[keep], {"value": (vals[keep], miss[keep])})
        return _collapse(steps, core), series

    def append_steps(self, run: str, rows: pd.DataFrame | Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> int:
        """Add step records (a DataFrame, a dict of columns or a list of row dicts); return rows given.

        Core columns go to the core table, namespaced keys to the extras table. A step that is already
        stored is merged: each column takes the newly recorded value, and keeps the old one where the new
        record has none. Missing: None / pandas NA (and NaN in a plain float DataFrame column); a NaN given
        as a Python float or a numpy array value is recorded as NaN.
        """
        core, extras = self._normalise_steps(rows)
        if not len(core):
            return 0
        with self.transaction():
            run_id = self.run_id(run)
            if core.values or not extras:
                self._write_blocks(run, "step_blocks", {"run_id": run_id}, core)
            extras = {key: series for key, series in extras.items() if len(series)}
            if extras:
                self._write_extras(run, run_id, extras)
            self._db.execute("UPDATE runs SET updated_at = ? WHERE id = ?", (time.time(), run_id))
        return len(core)

    def _write_extras(self, run: str, run_id: int, extras: dict[str, _Columns]) -> None:
        """Write the new records of many extras keys: the common case, every key's series growing at its end
        (a Tracker's flush), costs one query for all the keys' tails and one insert, instead of both per key;
        a key whose new steps overlap its stored ones, or whose small blocks are due to merge, goes through
        `_write_blocks`."""
        ids = self._key_ids(extras)
        tails: dict[int, list[tuple[int, int]]] = {ids[key]: [] for key in extras}
        keys = list(tails)
        for start in range(0, len(keys), _TAILS_PER_QUERY):
            chunk = keys[start : start + _TAILS_PER_QUERY]
            query = " UNION ALL ".join(
                f"SELECT key_id, n, last_step, first_step FROM (SELECT key_id, n, last_step, first_step FROM "
                f"extra_blocks WHERE run_id = ? AND key_id = ? ORDER BY first_step DESC LIMIT {COMPACT_BLOCKS}) t{i}"
                for i in range(len(chunk))
            )
            rows = self._db.execute(query, [v for key_id in chunk for v in (run_id, key_id)]).fetchall()
            for key_id, n, last_step, _ in sorted(rows, key=lambda r: -r[3]):  # each key's last block first
                tails[key_id].append((n, last_step))
        appended = []
        for key, series in extras.items():
            scope = {"run_id": run_id, "key_id": ids[key]}
            tail = tails[ids[key]]
            small = sum(1 for _ in itertools.takewhile(lambda t: t[0] < TAIL_MERGE_ROWS, tail))
            if (tail and tail[0][1] >= int(series.steps[0])) or small >= COMPACT_BLOCKS:
                self._write_blocks(run, "extra_blocks", scope, series, key)
            else:
                appended += self._block_rows("extra_blocks", scope, series, key)
        if appended:
            self._insert_rows("extra_blocks", _BLOCK_COLUMNS["extra_blocks"], appended)

    def _checked(
        self, run: str, run_id: int, key: str | None, row: Sequence[Any], want: Sequence[str] | None = None
    ) -> _Columns:
        """A stored block (`_BLOCK` fields) decoded once it passes its checksum (BlockDamaged otherwise)."""
        verify_block(self.location, run, key, tuple(row), run_id)
        return _block_columns(row, want)

    def _write_blocks(self, run: str, table: str, scope: dict[str, int], new: _Columns, key: str | None = None) -> None:
        """Write step records into `table` (step_blocks or extra_blocks) for one scope (run, key).

        Blocks the new steps overlap or precede (a resumed run re-logging steps) are merged and rewritten;
        otherwise a small last block absorbs the new rows. Blocks never overlap and stay in step order.
        """
        where = " AND ".join(f"{k} = ?" for k in scope)
        params = list(scope.values())
        first = int(new.steps[0])
        # The common case, a run growing at its end, needs only the last block (an index lookup).
        tail = self._db.execute(
            f"SELECT id, n, last_step FROM {table} WHERE {where} ORDER BY first_step DESC LIMIT {COMPACT_BLOCKS}",
            params,
        ).fetchall()
        if tail and tail[0][2] >= first:
            # Re-logged or out-of-order steps: every block from the one holding `first` on is merged.
            affected = self._db.execute(
                f"SELECT id, {_BLOCK} FROM {table} WHERE {where} AND first_step >= COALESCE("
                f"(SELECT MAX(first_step) FROM {table} WHERE {where} AND first_step <= ?), ?) ORDER BY first_step",
                (*params, *params, first, first),
            ).fetchall()
        else:
            # Small appends go in as blocks of their own; once COMPACT_BLOCKS small blocks end the run, they
            # are merged into one (with the new rows), so a flush rarely decodes and rewrites old data.
            small = [t[0] for t in itertools.takewhile(lambda t: t[1] < TAIL_MERGE_ROWS, tail)]
            affected = []
            if len(small) >= COMPACT_BLOCKS:
                affected = self._db.execute(
                    f"SELECT id, {_BLOCK} FROM {table} WHERE id IN ({','.join('?' * len(small))}) ORDER BY first_step",
                    small,
                ).fetchall()
        if affected:
            merged = _concat([self._checked(run, scope["run_id"], key, a[1:]) for a in affected] + [new])
            new = _collapse(merged.steps, merged.values)
            self._db.executemany(f"DELETE FROM {table} WHERE id = ?", [(a[0],) for a in affected])
        self._insert_rows(table, _BLOCK_COLUMNS[table], self._block_rows(table, scope, new, key))

    @staticmethod
    def _block_rows(table: str, scope: dict[str, int], new: _Columns, key: str | None) -> list[tuple[Any, ...]]:
        """The rows (`_BLOCK_COLUMNS[table]`) that store `new` as blocks of at most BLOCK_ROWS steps."""
        rows = []
        for start in range(0, len(new), BLOCK_ROWS):
            cut = slice(start, start + BLOCK_ROWS)
            part = _Columns(new.steps[cut], {k: (v[cut], m[cut]) for k, (v, m) in new.values.items()})
            tokens_max = _largest(part, "tokens")
            head = (int(part.steps[0]), int(part.steps[-1]), len(part), tokens_max, *_encode(part))
            # The core table also keeps its blocks' last wall clock, which `runs()` reads as a run's duration.
            tail_cols = (_largest(part, "wall_s"),) if table == "step_blocks" else ()
            rows.append((*scope.values(), *head, block_checksum(scope["run_id"], key, *head), *tail_cols))
        return rows

    def _insert_rows(self, table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
        """Many new rows into one table: through COPY on PostgreSQL, one prepared INSERT on SQLite."""
        if isinstance(self._db, ledger_pg.PgConnection):
            self._db.copy_rows(table, columns, rows)
        else:
            self._db.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows
            )

    def step_at(self, run: str, step: int) -> dict[str, Any] | None:
        """The stored core record at or before `step`: step, tokens, samples, wall_s (None where not recorded),
        or None when the run has no step at or before it."""
        run_id = self.run_id(run)
        rows = self._query(
            f"SELECT {_BLOCK} FROM step_blocks WHERE run_id = ? AND first_step <= ? ORDER BY first_step DESC LIMIT 1",
            (run_id, int(step)),
        )
        if not rows:
            return None
        cols = self._checked(run, run_id, None, rows[0], ["tokens", "samples", "wall_s"])
        i = int(np.searchsorted(cols.steps, int(step), side="right")) - 1
        out: dict[str, Any] = {"step": int(cols.steps[i])}
        for name in ("tokens", "samples", "wall_s"):
            stored = cols.values.get(name)  # (values, missing mask), or None: never recorded in this block
            out[name] = None if stored is None or stored[1][i] else float(stored[0][i])
        return out

    def supersede(self, run: str, after_step: int, *, resume: Mapping[str, Any], source: str = "tracker") -> int | None:
        """Set apart the run's records after `after_step`: the run was resumed from a checkpoint taken there, so
        the work recorded after it was thrown away. Steps and extras move to `superseded_blocks` (read them with
        `superseded`), evals into the event's body, and a `resume` event keeps both points: `old`, the last
        stored step and its tokens, and `resume`, as given. From then on the run's steps, extras and evals are
        the surviving records only; nothing is spliced. Returns the event's id, or None when nothing was stored
        after `after_step`."""
        after = int(after_step)
        with self.transaction():
            run_id = self.run_id(run)
            core = self._db.execute(
                f"SELECT id, NULL, NULL, {_BLOCK} FROM step_blocks WHERE run_id = ? AND last_step > ? "
                "ORDER BY first_step",
                (run_id, after),
            ).fetchall()
            extra = self._db.execute(
                f"SELECT b.id, b.key_id, k.key, {', '.join('b.' + f for f in _BLOCK.split(', '))} FROM extra_blocks b "
                "JOIN extra_keys k ON k.id = b.key_id WHERE b.run_id = ? AND b.last_step > ? "
                "ORDER BY b.key_id, b.first_step",
                (run_id, after),
            ).fetchall()
            decoded = {
                (table, b[0]): self._checked(run, run_id, b[2], b[3:])  # ids are per table
                for table, blocks in (("step_blocks", core), ("extra_blocks", extra))
                for b in blocks
            }
            evals = self.evals(run)
            evals = evals[evals["step"] > after]
            if not (core or extra or len(evals)):
                return None
            last = self.step_at(run, 1 << 62)
            old_step = max(
                [last["step"] if last else after] + [int(decoded["extra_blocks", b[0]].steps[-1]) for b in extra]
            )
            body: dict[str, Any] = {
                "source": source,
                "resume": dict(resume),
                "old": {"step": old_step, "tokens": last["tokens"] if last else None},
                "superseded": {"steps": 0, "extra_values": 0, "evals": evals.to_dict("records")},
            }
            event = self.add_event(run, "resume", body, start_step=after, end_step=old_step, state="resolved")
            moved = {"step_blocks": 0, "extra_blocks": 0}
            for table, blocks in (("step_blocks", core), ("extra_blocks", extra)):
                for block_id, key_id, key, *_ in blocks:
                    cols = decoded[table, block_id]
                    later = cols.steps > after
                    gone, kept = _take(cols, later), _take(cols, ~later)
                    self._db.execute(f"DELETE FROM {table} WHERE id = ?", (block_id,))
                    head = (int(gone.steps[0]), int(gone.steps[-1]), len(gone), None, *_encode(gone))
                    self._db.execute(
                        "INSERT INTO superseded_blocks (event_id, run_id, key_id, first_step, last_step, n, columns, "
                        "data, missing, checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (event, run_id, key_id, *head[:3], *head[4:], block_checksum(run_id, key, *head)),
                    )
                    moved[table] += len(gone)
                    if len(kept):
                        scope = {"run_id": run_id} if key_id is None else {"run_id": run_id, "key_id": key_id}
                        self._write_blocks(run, table, scope, kept, key)
            self._db.execute("DELETE FROM evals WHERE run_id = ? AND step > ?", (run_id, after))
            body["superseded"].update(steps=moved["step_blocks"], extra_values=moved["extra_blocks"])
            self._db.execute("UPDATE events SET body = ? WHERE id = ?", (_json(body, "event body"), event))
            self._db.execute("UPDATE runs SET updated_at = ? WHERE id = ?", (time.time(), run_id))
        return event

    def superseded(self, run: str) -> pd.DataFrame:
        """Core step records that a resume set apart (`supersede`): event_id (the `resume` event), step and the
        core columns, by event and step. They are not part of `steps(run)`."""
        run_id = self.run_id(run)
        rows = self._query(
            f"SELECT event_id, {_BLOCK.replace('tokens_max', 'NULL')} FROM superseded_blocks WHERE run_id = ? "
            "AND key_id IS NULL ORDER BY event_id, first_step",
            (run_id,),
        )
        frames = []
        for event, *block in rows:
            cols = self._checked(run, run_id, None, block)
            n = len(cols)
            frame = {"event_id": np.full(n, event, dtype=np.int64), "step": cols.steps.astype(np.int64)}
            frame.update({k: np.where(m, np.nan, v) for k, (v, m) in cols.values.items()})
            frames.append(pd.DataFrame(frame))
        if not frames:
            return pd.DataFrame({"event_id": np.empty(0, np.int64), "step": np.empty(0, np.int64)})
        return pd.concat(frames, ignore_index=True)

    def _key_ids(self, keys: Iterable[str]) -> dict[str, int]:
        keys = list(keys)
        self._db.executemany("INSERT INTO extra_keys (key) VALUES (?) ON CONFLICT DO NOTHING", [(k,) for k in keys])
        found = self._db.execute(
            f"SELECT key, id FROM extra_keys WHERE key IN ({','.join('?' * len(keys))})", keys
        ).fetchall()
        return dict(found)

    def steps(
        self, run: str, columns: Sequence[str] | None = None, *, nullable: bool = False, after: int | None = None
    ) -> pd.DataFrame:
        """A run's core step records, one row per step in step order.

        `columns` picks core columns (default: all). Missing values are NaN; with `nullable=True` the
        columns are pandas nullable floats, where <NA> is "not recorded" and NaN is a recorded NaN.
        `after`: only the steps after this one, reading only the blocks that hold them (a live view's poll).
        """
        want = list(STEP_VALUE_COLUMNS) if columns is None else [c for c in columns if c != "step"]
        unknown = [c for c in want if c not in STEP_VALUE_COLUMNS]
        if unknown:
            raise InputError(f"unknown core column {unknown[0]!r}; core columns are {', '.join(STEP_VALUE_COLUMNS)}")
        run_id = self.run_id(run)
        blocks = self._query(
            f"SELECT {_BLOCK} FROM step_blocks WHERE run_id = ? AND last_step > ? ORDER BY first_step",
            (run_id, -(2**63) if after is None else int(after)),
        )
        parts = [self._checked(run, run_id, None, b, want) for b in blocks]
        steps = np.concatenate([p.steps for p in parts]) if parts else np.empty(0, dtype=np.int64)
        out: dict[str, Any] = {"step": steps.astype(np.int64)}
        for name in want:
            vals = np.empty(len(steps))
            miss = np.ones(len(steps), dtype=bool)
            at = 0
            for p in parts:
                if name in p.values:
                    v, m = p.values[name]
                    vals[at : at + len(p)] = v
                    miss[at : at + len(p)] = m
                at += len(p)
            if nullable:
                out[name] = pd.arrays.FloatingArray(np.where(miss, 0.0, vals), miss)
            else:
                vals[miss] = np.nan
                out[name] = vals
        frame = pd.DataFrame(out)
        return frame if after is None else frame[frame["step"] > after].reset_index(drop=True)

    def extras(self, run: str, keys: Sequence[str] | None = None) -> pd.DataFrame:
        """A run's namespaced extras in long form: columns step, key, value (a recorded NaN is NaN)."""
        run_id = self.run_id(run)
        sql = (
            f"SELECT k.key, {', '.join('b.' + f for f in _BLOCK.split(', '))} FROM extra_blocks b "
            "JOIN extra_keys k ON k.id = b.key_id WHERE b.run_id = ?"
        )
        params: list[Any] = [run_id]
        if keys is not None:
            sql += f" AND k.key IN ({','.join('?' * len(keys))})"
            params += list(keys)
        parts = [
            (key, self._checked(run, run_id, key, block))
            for key, *block in self._query(sql + " ORDER BY k.key, b.first_step", params)
        ]
        if not parts:
            return pd.DataFrame({"step": np.empty(0, np.int64), "key": np.empty(0, object), "value": np.empty(0)})
        return pd.DataFrame(
            {
                "step": np.concatenate([p.steps for _, p in parts]),
                "key": np.repeat([k for k, _ in parts], [len(p) for _, p in parts]),
                "value": np.concatenate([p.values["value"][0] for _, p in parts]),
            }
        )

    def extra_keys(self, run: str) -> list[str]:
        rows = self._query(
            "SELECT DISTINCT k.key FROM extra_blocks b JOIN extra_keys k ON k.id = b.key_id WHERE b.run_id = ? "
            "ORDER BY k.key",
            (self.run_id(run),),
        )
        return [r[0] for r in rows]

    # -- evals ----------------------------------------------------------------------------------------

    def append_evals(self, run: str, records: Iterable[EvalRecord | Mapping[str, Any]]) -> int:
        """Add eval records; a record for the same (step, portfolio, task, metric) replaces the old one, keeping its
        standard error when the new one has none. A record of a standard error (`acc_stderr`, `names.stderr_of`) is
        stored as its metric's `stderr`, beside the value given with it or stored before (or still to come: a row of
        the metric with no value until then). Returns the records given."""
        given = []
        for i, rec in enumerate(records):
            try:
                r = rec if isinstance(rec, EvalRecord) else EvalRecord(**rec)
            except TypeError as exc:
                raise InputError(f"eval record {i}: {exc}") from None
            if not r.task or not r.metric:
                raise InputError(f"eval record {i}: task and metric must be non-empty, got {r.task!r}/{r.metric!r}")
            unsafe = unsafe_character(f"{r.task}/{r.metric}/{r.portfolio}/{r.portfolio_version}")
            if unsafe is not None:
                raise InputError(f"eval record {i}: {r.task!r}/{r.metric!r} is not allowed: it holds {unsafe}")
            given.append(r)
        folded, alone = fold_stderr(given)

        def given_direction(r: EvalRecord) -> bool:
            return higher_is_better(r.metric) if r.higher_is_better is None else bool(r.higher_is_better)

        def row(r: EvalRecord, metric: str, value: float | None, stderr: float | None, hib: bool) -> tuple[Any, ...]:
            tokens = None if r.tokens is None else float(r.tokens)
            wall = None if r.wall_s is None else float(r.wall_s)
            return (
                int(r.step),
                tokens,
                wall,
                r.portfolio,
                r.portfolio_version,
                r.task,
                metric,
                value,
                int(hib),
                stderr,
            )

        columns = (
            "run_id, step, tokens, wall_s, portfolio, portfolio_version, task, metric, value, higher_is_better, stderr"
        )
        insert = f"INSERT INTO evals ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT "
        insert += "(run_id, step, portfolio, portfolio_version, task, metric) DO UPDATE SET "
        with self.transaction():
            run_id = self.run_id(run)
            self._db.executemany(
                insert + "tokens = excluded.tokens, wall_s = excluded.wall_s, value = excluded.value, "
                "higher_is_better = excluded.higher_is_better, stderr = COALESCE(excluded.stderr, evals.stderr)",
                [(run_id, *row(r, r.metric, float(r.value), _given(r.stderr), given_direction(r))) for r in folded],
            )
            # A standard error whose metric is not among these records: its metric's row (stored, or one with no
            # value yet) takes it.
            if alone:
                metrics = [str(stderr_of(r.metric)) for r in alone]
                self._db.executemany(
                    insert + "stderr = excluded.stderr",
                    [
                        (run_id, *row(r, m, None, _given(r.value), higher_is_better(m)))
                        for r, m in zip(alone, metrics, strict=True)
                    ],
                )
            self._db.execute("UPDATE runs SET updated_at = ? WHERE id = ?", (time.time(), run_id))
        return len(given)

    def copy_run(self, source: Ledger, run: str) -> int:
        """Merge run `run` of another ledger (a Tracker's spill file, another node's ledger) into this one:
        steps, extras, evals, tags and note, one transaction; the run is created (with its manifest and status) if
        this ledger lacks it, and steps already here are merged as `append_steps` merges. Returns step rows copied."""
        info = source.run_info(run)
        steps = source.steps(run, nullable=True)
        extras = source.extras(run)
        evals = source.evals(run)
        with self.transaction():
            if self._db.execute("SELECT 1 FROM runs WHERE name = ?", (run,)).fetchone() is None:
                self.create_run(
                    run, manifest=source.manifest(run), status=info["recorded_status"], source=info["source"]
                )
            for key, value in source.meta(run).items():
                self.set_meta(run, key, value)
            self.tag_run(run, source.tags(run))
            note = source.note(run)
            if note:
                self.set_note(run, note)
            if len(steps):
                self.append_steps(run, steps)
            for key, part in extras.groupby("key", sort=False):
                self.append_steps(run, {"step": part["step"].to_numpy(), str(key): part["value"].to_numpy()})
            if len(evals):
                self.append_evals(run, evals.to_dict("records"))
        return len(steps)

    def evals(self, run: str) -> pd.DataFrame:
        """A run's eval records: step, tokens, wall_s, portfolio, portfolio_version, task, metric, value,
        higher_is_better, stderr (the value's standard error, NaN where none was given); ordered by task, metric,
        step."""
        rows = self._query(
            "SELECT step, tokens, wall_s, portfolio, portfolio_version, task, metric, value, higher_is_better, "
            "stderr FROM evals WHERE run_id = ? ORDER BY task, metric, step",
            (self.run_id(run),),
        )
        frame = pd.DataFrame(
            rows,
            columns=[
                "step",
                "tokens",
                "wall_s",
                "portfolio",
                "portfolio_version",
                "task",
                "metric",
                "value",
                "higher_is_better",
                "stderr",
            ],
        )
        for c in ("tokens", "wall_s", "value", "stderr"):
            frame[c] = frame[c].astype(np.float64)
        frame["higher_is_better"] = frame["higher_is_better"].astype(bool)
        return frame

    # -- events and decisions -------------------------------------------------------------------------

    def add_event(
        self,
        run: str | None,
        kind: str,
        body: Mapping[str, Any],
        *,
        start_step: int | None = None,
        end_step: int | None = None,
        state: str = "open",
    ) -> int:
        """Record an event (a diagnosis finding, a gate note, a warning, a fault); return its id."""
        if kind not in EVENT_KINDS:
            raise InputError(f"event kind must be one of {', '.join(EVENT_KINDS)}, got {kind!r}")
        if state not in EVENT_STATES:
            raise InputError(f"event state must be one of {', '.join(EVENT_STATES)}, got {state!r}")
        text = _json(body, "event body")
        with self.transaction():
            run_id = self.run_id(run) if run is not None else None
            cur = self._db.execute(
                "INSERT INTO events (run_id, kind, start_step, end_step, body, state, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (run_id, kind, start_step, end_step, text, state, time.time()),
            )
            return _inserted_id(cur)

    def resolve_event(self, event_id: int) -> None:
        with self.transaction():
            cur = self._db.execute(
                "UPDATE events SET state = 'resolved', resolved_at = ? WHERE id = ?", (time.time(), event_id)
            )
            if cur.rowcount == 0:
                raise InputError(f"no event with id {event_id} in {self.location}")

    def events(self, run: str | None = None, *, kind: str | None = None, state: str | None = None) -> pd.DataFrame:
        """Events, oldest first: id, run, kind, start_step, end_step, body (dict), state, created_at."""
        sql = (
            "SELECT e.id, r.name, e.kind, e.start_step, e.end_step, e.body, e.state, e.created_at, e.resolved_at "
            "FROM events e LEFT JOIN runs r ON r.id = e.run_id WHERE 1 = 1"
        )
        params: list[Any] = []
        if run is not None:
            sql += " AND e.run_id = ?"
            params.append(self.run_id(run))
        for column, value in (("kind", kind), ("state", state)):
            if value is not None:
                sql += f" AND e.{column} = ?"
                params.append(value)
        rows = self._query(sql + " ORDER BY e.id", params)
        frame = pd.DataFrame(
            rows, columns=["id", "run", "kind", "start_step", "end_step", "body", "state", "created_at", "resolved_at"]
        )
        frame["body"] = [json.loads(b) for b in frame["body"]]
        return frame

    def add_decision(
        self,
        target: str,
        decision: Literal["approve", "hold", "reject"],
        *,
        evidence: Mapping[str, Any],
        rationale: str,
        run: str | None = None,
        stage: str | None = None,
        policy: Mapping[str, Any] | None = None,
        policy_hash: str | None = None,
    ) -> int:
        """Record a gate decision with its evidence, policy and one-line rationale; return its id."""
        if decision not in ("approve", "hold", "reject"):
            raise InputError(f"decision must be approve, hold or reject, got {decision!r}")
        with self.transaction():
            run_id = self.run_id(run) if run is not None else None
            cur = self._db.execute(
                "INSERT INTO decisions (target, run_id, stage, decision, policy_hash, policy, evidence, rationale, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    target,
                    run_id,
                    stage,
                    decision,
                    policy_hash,
                    None if policy is None else _json(policy, "policy"),
                    _json(evidence, "evidence"),
                    rationale,
                    time.time(),
                ),
            )
            return _inserted_id(cur)

    def decisions(self, target: str | None = None) -> pd.DataFrame:
        """Gate decisions, oldest first: the audit trail."""
        sql = "SELECT id, target, stage, decision, policy_hash, policy, evidence, rationale, created_at FROM decisions"
        params: list[Any] = []
        if target is not None:
            sql += " WHERE target = ?"
            params.append(target)
        rows = [
            (*row[:5], None if row[5] is None else json.loads(row[5]), json.loads(row[6]), *row[7:])
            for row in self._query(sql + " ORDER BY id", params)
        ]
        # Object columns: pandas' string dtype would turn a decision's missing stage or policy hash into NaN.
        frame = pd.DataFrame(
            rows,
            columns=[
                "id",
                "target",
                "stage",
                "decision",
                "policy_hash",
                "policy",
                "evidence",
                "rationale",
                "created_at",
            ],
            dtype=object,
        )
        return frame.astype({"id": "int64", "created_at": "float64"})

    # -- campaigns ------------------------------------------------------------------------------------

    def put_campaign(self, name: str, spec: Mapping[str, Any], spec_hash: str) -> None:
        """Record a campaign's spec (kept across re-runs: a changed spec replaces it, its summary is cleared)."""
        text = _json(spec, "campaign spec")
        now = time.time()
        with self.transaction():
            row = self._db.execute("SELECT spec_hash FROM campaigns WHERE name = ?", (name,)).fetchone()
            if row is None:
                self._db.execute(
                    "INSERT INTO campaigns (name, spec_hash, spec, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                    (name, spec_hash, text, now, now),
                )
            elif row[0] != spec_hash:
                self._db.execute(
                    "UPDATE campaigns SET spec_hash = ?, spec = ?, summary = NULL, updated_at = ? WHERE name = ?",
                    (spec_hash, text, now, name),
                )

    def set_campaign_summary(self, name: str, summary: Mapping[str, Any]) -> None:
        """Store the latest summary of a campaign's results (rankings, decision accuracy, forecasts)."""
        with self.transaction():
            cur = self._db.execute(
                "UPDATE campaigns SET summary = ?, updated_at = ? WHERE name = ?",
                (_json(summary, "campaign summary"), time.time(), name),
            )
            if cur.rowcount == 0:
                raise InputError(f"no campaign named {name!r} in {self.location}")

    def campaign(self, name: str) -> dict[str, Any]:
        """A campaign's record: name, spec_hash, spec, summary (None before it was summarised), timestamps."""
        rows = self._query(
            "SELECT name, spec_hash, spec, summary, created_at, updated_at FROM campaigns WHERE name = ?", (name,)
        )
        if not rows:
            known = [r[0] for r in self._query("SELECT name FROM campaigns ORDER BY name")]
            raise InputError(
                f"no campaign named {name!r} in {self.location}"
                + (f"; campaigns: {', '.join(known)}" if known else "; run `yieldgate probe CAMPAIGN.yaml`")
            )
        n, h, spec, summary, created, updated = rows[0]
        return {
            "name": n,
            "spec_hash": h,
            "spec": json.loads(spec),
            "summary": None if summary is None else json.loads(summary),
            "created_at": created,
            "updated_at": updated,
        }

    def campaigns(self) -> list[str]:
        return [r[0] for r in self._query("SELECT name FROM campaigns ORDER BY created_at, name")]


def _inserted_id(cur: Any) -> int:
    """The id of the row the cursor's `INSERT ... RETURNING id` just wrote (both backends; `lastrowid` is SQLite's
    alone). Fetched whole, so that no statement is left open in the transaction."""
    return int(cur.fetchall()[0][0])


def _json(value: Mapping[str, Any], what: str) -> str:
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
