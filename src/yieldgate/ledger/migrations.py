"""Named schema migrations of the ledger, each applied in its own transaction and recorded in a table.

A ledger that records a migration this version does not know was written by a newer yieldgate: it is
refused (SchemaVersionError) rather than read with a schema we would misunderstand, and never changed.
Add a migration by appending to MIGRATIONS; never edit or reorder one that has shipped.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from yieldgate.errors import LedgerError, SchemaVersionError
from yieldgate.ledger import pg as ledger_pg
from yieldgate.ledger.checksum import block_ok, group_checksum, group_columns, record_checksum, record_columns
from yieldgate.names import EVENT_KINDS, EVENT_STATES, RUN_STATUSES, metric_direction
from yieldgate.util import lazy

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy.module("numpy")  # only the migrations that rewrite blocks need it

__all__ = ["MIGRATIONS", "migrate", "applied_migrations"]

# The statements below are SQLite's; on PostgreSQL `ledger_pg.PgConnection` runs them with its types and locks.
Connection = sqlite3.Connection | ledger_pg.PgConnection


def _sql_list(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def _initial(db: Connection) -> None:
    statements = [
        """CREATE TABLE manifests (
            hash TEXT PRIMARY KEY,
            body TEXT NOT NULL,
            created_at REAL NOT NULL
        )""",
        f"""CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            status TEXT NOT NULL CHECK (status IN ({_sql_list(RUN_STATUSES)})),
            manifest_hash TEXT REFERENCES manifests(hash),
            source TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        )""",
        # The wide core step table, stored as blocks of consecutive steps: `data` holds int64 steps[n]
        # then float64 values[n] for each name in `columns`; `missing` is a packed bit matrix
        # [len(columns), n] with 1 where nothing was recorded (so a recorded NaN stays a NaN, which a
        # REAL column could not keep: SQLite stores NaN as NULL). Blocks of a run never overlap and are
        # ordered by first_step. Reading a run's core columns is a handful of BLOB reads, not a million
        # Python rows (see benchmarks/bench_ledger.py).
        """CREATE TABLE step_blocks (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            first_step INTEGER NOT NULL,
            last_step INTEGER NOT NULL,
            n INTEGER NOT NULL,
            tokens_max REAL,
            columns TEXT NOT NULL,
            data BLOB NOT NULL,
            missing BLOB,
            UNIQUE (run_id, first_step)
        )""",
        "CREATE TABLE extra_keys (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE)",
        # The long table of namespaced extras: one record per (run, key) and block of steps, in the same
        # block form as step_blocks with the single column `value` (a recorded NaN stays NaN; a step with
        # no record for a key is simply absent). Per-key blocks keep an import of a million scalars at
        # millions of values/s and make one key's series a few BLOB reads.
        """CREATE TABLE extra_blocks (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            key_id INTEGER NOT NULL REFERENCES extra_keys(id),
            first_step INTEGER NOT NULL,
            last_step INTEGER NOT NULL,
            n INTEGER NOT NULL,
            tokens_max REAL,
            columns TEXT NOT NULL,
            data BLOB NOT NULL,
            missing BLOB,
            UNIQUE (run_id, key_id, first_step)
        )""",
        """CREATE TABLE evals (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            step INTEGER NOT NULL,
            tokens REAL,
            wall_s REAL,
            portfolio TEXT NOT NULL DEFAULT '',
            portfolio_version TEXT NOT NULL DEFAULT '',
            task TEXT NOT NULL,
            metric TEXT NOT NULL,
            value REAL,
            higher_is_better INTEGER NOT NULL,
            UNIQUE (run_id, step, portfolio, portfolio_version, task, metric)
        )""",
        f"""CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE,
            kind TEXT NOT NULL CHECK (kind IN ({_sql_list(EVENT_KINDS)})),
            start_step INTEGER,
            end_step INTEGER,
            body TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ({_sql_list(EVENT_STATES)})),
            created_at REAL NOT NULL,
            resolved_at REAL
        )""",
        """CREATE TABLE decisions (
            id INTEGER PRIMARY KEY,
            target TEXT NOT NULL,
            run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
            stage TEXT,
            decision TEXT NOT NULL CHECK (decision IN ('approve', 'hold', 'reject')),
            policy_hash TEXT,
            policy TEXT,
            evidence TEXT NOT NULL,
            rationale TEXT NOT NULL,
            created_at REAL NOT NULL
        )""",
        "CREATE INDEX evals_by_run ON evals (run_id, task, metric, step)",
        "CREATE INDEX events_by_run ON events (run_id, kind, state)",
        "CREATE INDEX decisions_by_target ON decisions (target, created_at)",
    ]
    for statement in statements:
        db.execute(statement)


def _run_meta(db: Connection) -> None:
    # How a run's figures were measured (MFU formula, peak used, telemetry sources): a JSON object.
    db.execute("ALTER TABLE runs ADD COLUMN meta TEXT NOT NULL DEFAULT '{}'")


def _campaigns(db: Connection) -> None:
    # A probe campaign: its spec (JSON, with its hash) and the latest summary of its results (rankings per
    # budget, decision accuracy, forecasts), rewritten each time the campaign is run or summarised.
    db.execute("""CREATE TABLE campaigns (
        name TEXT PRIMARY KEY,
        spec_hash TEXT NOT NULL,
        spec TEXT NOT NULL,
        summary TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""")


def _resume_events(db: Connection) -> None:
    # A run resumed from a checkpoint older than its last stored row: the rows after the checkpoint belong to
    # work that was thrown away. They are kept apart, never spliced into the curve: a `resume` event (both
    # points in its body) and the superseded rows in `superseded_blocks`, in the block form of step_blocks
    # (`key_id` NULL) and extra_blocks (`key_id` set). SQLite cannot change a CHECK, so `events` is rebuilt
    # with the kinds of this migration written out (not EVENT_KINDS, which may grow later).
    kinds = ("diagnosis", "gate", "warning", "fault", "resume")
    db.execute(f"""CREATE TABLE events_new (
        id INTEGER PRIMARY KEY,
        run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ({_sql_list(kinds)})),
        start_step INTEGER,
        end_step INTEGER,
        body TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('open', 'resolved')),
        created_at REAL NOT NULL,
        resolved_at REAL
    )""")
    db.execute(
        "INSERT INTO events_new SELECT id, run_id, kind, start_step, end_step, body, state, created_at, "
        "resolved_at FROM events"
    )
    db.execute("DROP TABLE events")
    db.execute("ALTER TABLE events_new RENAME TO events")
    db.execute("CREATE INDEX events_by_run ON events (run_id, kind, state)")
    db.execute("""CREATE TABLE superseded_blocks (
        id INTEGER PRIMARY KEY,
        event_id INTEGER NOT NULL REFERENCES events(id) ON DELETE CASCADE,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        key_id INTEGER REFERENCES extra_keys(id),
        first_step INTEGER NOT NULL,
        last_step INTEGER NOT NULL,
        n INTEGER NOT NULL,
        columns TEXT NOT NULL,
        data BLOB NOT NULL,
        missing BLOB
    )""")
    db.execute("CREATE INDEX superseded_by_run ON superseded_blocks (run_id, event_id, key_id, first_step)")


def _run_owner(db: Connection) -> None:
    # One writer per run (yieldgate.ledger.owners): the process that claimed it (host, pid, process start time) and the
    # last heartbeat its writer stamped. NULL: no Tracker claimed the run (an import, an older ledger).
    for column in ("owner_host TEXT", "owner_pid INTEGER", "owner_started REAL", "heartbeat_at REAL"):
        db.execute(f"ALTER TABLE runs ADD COLUMN {column}")


def _block_checksums(db: Connection) -> None:
    # A checksum per stored block (yieldgate.ledger.checksum), computed on write and checked on every read, so a damaged
    # block is an error naming its run and steps, never silently wrong numbers. Blocks written before this
    # migration keep NULL: read as before, counted as unverified by `yieldgate check`.
    for table in ("step_blocks", "extra_blocks", "superseded_blocks"):
        db.execute(f"ALTER TABLE {table} ADD COLUMN checksum TEXT")


def _run_lifecycle(db: Connection) -> None:
    # Runs a team can manage: tags (one row per run and tag, so a filter is an index lookup on any backend), a
    # free-text note, and the wall-clock end of each block of core steps (`wall_s_max`, the largest recorded
    # `wall_s`), so a run's duration is read like its tokens, without decoding a block. Blocks stored before
    # this migration get theirs computed here, once.
    db.execute("ALTER TABLE runs ADD COLUMN note TEXT")
    db.execute("""CREATE TABLE run_tags (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        tag TEXT NOT NULL,
        PRIMARY KEY (run_id, tag)
    )""")
    db.execute("CREATE INDEX run_tags_by_tag ON run_tags (tag, run_id)")
    db.execute("ALTER TABLE step_blocks ADD COLUMN wall_s_max REAL")
    rows = db.execute(
        "SELECT id, n, columns, data, missing FROM step_blocks WHERE ',' || columns || ',' LIKE '%,wall_s,%'"
    ).fetchall()
    db.executemany(
        "UPDATE step_blocks SET wall_s_max = ? WHERE id = ?",
        [(_column_max(n, columns, data, missing, "wall_s"), block) for block, n, columns, data, missing in rows],
    )


def _column_max(n: int, columns: str, data: bytes, missing: bytes | None, name: str) -> float | None:
    """Largest finite recorded value of column `name` in a stored block (the block layout of `step_blocks`: int64
    steps[n], then float64 values[n] per column, then a packed missing-bit matrix), or None."""
    names = columns.split(",")
    i = names.index(name)
    values = np.frombuffer(data, dtype="<f8", count=n, offset=8 * n * (i + 1))
    keep = np.isfinite(values)
    if missing is not None:
        bits = np.unpackbits(np.frombuffer(missing, dtype=np.uint8).reshape(len(names), -1), axis=1, count=n)
        keep &= ~bits[i].astype(bool)
    return float(values[keep].max()) if keep.any() else None


def _eval_stderr(db: Connection) -> None:
    # A standard error (lm-eval's `acc_stderr`) is the uncertainty of its metric's value, not a metric of its own: a
    # column beside the value. Rows stored before as metrics `<metric>_stderr` are folded into their metric's row at
    # the same point (or, with no such row, become one with no value), so no reader meets one as a metric. The name
    # rule is written out here, as it was when this shipped (`names.stderr_of`).
    db.execute("ALTER TABLE evals ADD COLUMN stderr REAL")
    rows = db.execute(
        "SELECT id, run_id, step, portfolio, portfolio_version, task, metric, value FROM evals "
        "WHERE metric LIKE '%stderr%'"
    ).fetchall()
    for row_id, run_id, step, portfolio, version, task, name, value in rows:
        base, comma, rest = str(name).partition(",")
        if not base.endswith("_stderr") or base == "_stderr":
            continue
        metric = base[: -len("_stderr")] + comma + rest
        target = db.execute(
            "SELECT id FROM evals WHERE run_id = ? AND step = ? AND portfolio = ? AND portfolio_version = ? "
            "AND task = ? AND metric = ?",
            (run_id, step, portfolio, version, task, metric),
        ).fetchone()
        if target is None:
            direction = metric_direction(metric)
            db.execute(
                "UPDATE evals SET metric = ?, stderr = value, value = NULL, higher_is_better = ? WHERE id = ?",
                (metric, int(True if direction is None else direction), row_id),
            )
        else:
            db.execute("UPDATE evals SET stderr = ? WHERE id = ?", (value, target[0]))
            db.execute("DELETE FROM evals WHERE id = ?", (row_id,))


def _listing_index(db: Connection) -> None:
    # `runs` sums each run's blocks (steps, last step, tokens, wall clock). `wall_s_max` was added after the block's
    # data, so reading it walked every block's overflow pages: listing a ledger read the whole file (0.09 s for 200
    # MB here, minutes for a team's). A covering index answers the sums without touching a block.
    db.execute("CREATE INDEX step_blocks_summary ON step_blocks (run_id, n, last_step, tokens_max, wall_s_max)")


def _record_checksums(db: Connection) -> None:
    # Every other record gets a checksum like the blocks' (yieldgate.ledger.checksum: RECORD_FIELDS, record_checksum):
    # one flipped bit in a stored evaluation turned `compare`'s verdict while `check` said whole. Rows stored before
    # get theirs here, from what they hold now (damage older than this migration cannot be told from data).
    keys = {
        "runs": ("id",),
        "manifests": ("hash",),
        "run_tags": ("run_id", "tag"),
        "evals": ("id",),
        "events": ("id",),
        "decisions": ("id",),
        "campaigns": ("name",),
    }
    for table, key in keys.items():
        held = [d[0] for d in db.execute(f"SELECT * FROM {table} WHERE 1 = 0").description]
        if "checksum" not in held:  # a ledger set back to an older schema by hand (as upgrade tests do) has some
            db.execute(f"ALTER TABLE {table} ADD COLUMN checksum TEXT")
        rows = db.execute(f"SELECT {', '.join(key)}, {record_columns(table)} FROM {table}").fetchall()
        db.executemany(
            f"UPDATE {table} SET checksum = ? WHERE {' AND '.join(f'{k} = ?' for k in key)}",
            [(_stamp(table, row[len(key) :]), *row[: len(key)]) for row in rows],
        )


def _stamp(table: str, values: tuple[object, ...]) -> str | None:
    """A stored row's checksum; None for one whose values no write of yieldgate could have stored (a value of another
    type: damage), so that the upgrade completes and `yieldgate check` reports the row."""
    try:
        return record_checksum(table, values)
    except TypeError:
        return None


def _owner_namespace(db: Connection) -> None:
    # A pid means something only in its PID namespace: a Tracker in a container sharing the host's name (a
    # `hostNetwork` pod) was judged crashed from the host, and taken over while it wrote. The writer's claim gains
    # where its pid lives (yieldgate.ledger.owners.process_namespace: boot id and PID namespace); NULL for a claim
    # made before, which liveness then judges by its heartbeat alone. Beside the other owner_* columns, outside the
    # run's checksum like them: a claim is rewritten by every takeover, and is not a measurement (not `meta`).
    db.execute("ALTER TABLE runs ADD COLUMN owner_ns TEXT")


def _more_checksums(db: Connection) -> None:
    # The fields no checksum covered (ledger.checksum.FIELD_GROUPS): a flip in a block's `wall_s_max` changed a run's
    # duration in `runs` (5m00s -> 4m50s) while `check` said whole. A core block's summary (what `runs` sums without
    # decoding the block), a run's writer claim and heartbeat, and the ids of events and decisions each get a checksum.
    # A summary is stamped only where its block passes its own checksum and its `wall_s_max` is its data's: damage
    # older than this migration stays unstamped, and `check` reports it. Claims and ids cannot be told from data: they
    # are stamped as they stand (as 0010 did for records). The listing's covering index gains the summary's checksum.
    db.execute("ALTER TABLE step_blocks ADD COLUMN summary_checksum TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN claim_checksum TEXT")
    for table in ("events", "decisions"):
        db.execute(f"ALTER TABLE {table} ADD COLUMN id_checksum TEXT")
        rows = db.execute(f"SELECT id, checksum FROM {table}").fetchall()
        db.executemany(
            f"UPDATE {table} SET id_checksum = ? WHERE id = ?",
            [(group_checksum(f"{table}.id", (i, c)), i) for i, c in rows if isinstance(c, str)],
        )
    rows = db.execute(f"SELECT id, {group_columns('runs.claim')} FROM runs").fetchall()
    db.executemany(
        "UPDATE runs SET claim_checksum = ? WHERE id = ?", [(_group_stamp("runs.claim", r[1:]), r[0]) for r in rows]
    )
    blocks = db.execute(
        f"SELECT id, checksum, columns, data, missing, {group_columns('step_blocks.summary')} FROM step_blocks"
    ).fetchall()
    stamps = []
    for block, checksum, columns, data, missing, run_id, first, last, n, tokens_max, wall in blocks:
        if block_ok(checksum, run_id, None, first, last, n, tokens_max, columns, data, missing) is False:
            continue
        try:
            held = _column_max(n, columns, data, missing, "wall_s") if "wall_s" in columns.split(",") else None
        except (ValueError, TypeError, AttributeError):
            continue
        if wall == held:
            stamps.append((_group_stamp("step_blocks.summary", (run_id, first, last, n, tokens_max, wall)), block))
    db.executemany("UPDATE step_blocks SET summary_checksum = ? WHERE id = ?", stamps)
    db.execute("DROP INDEX step_blocks_summary")
    db.execute(
        "CREATE INDEX step_blocks_summary ON step_blocks "
        "(run_id, n, last_step, tokens_max, wall_s_max, first_step, summary_checksum)"
    )


def _group_stamp(group: str, values: tuple[object, ...]) -> str | None:
    """A stored group's checksum; None where a value is of another type (damage): `check` reports it."""
    try:
        return group_checksum(group, values)
    except TypeError:
        return None


# (name, function). Names are permanent: they are what a ledger records.
MIGRATIONS: list[tuple[str, Callable[[Connection], None]]] = [
    ("0001_initial", _initial),
    ("0002_run_meta", _run_meta),
    ("0003_campaigns", _campaigns),
    ("0004_resume_events", _resume_events),
    ("0005_run_owner", _run_owner),
    ("0006_block_checksums", _block_checksums),
    ("0007_run_lifecycle", _run_lifecycle),
    ("0008_eval_stderr", _eval_stderr),
    ("0009_listing_index", _listing_index),
    ("0010_record_checksums", _record_checksums),
    ("0011_owner_namespace", _owner_namespace),
    ("0012_more_checksums", _more_checksums),
]


def applied_migrations(db: Connection) -> list[str]:
    """Names of the migrations recorded in the ledger, oldest first ([] for a new file)."""
    if isinstance(db, ledger_pg.PgConnection):
        exists = ledger_pg.has_table(db, "schema_migrations")
    else:
        exists = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
        ).fetchone()
    if not exists:
        return []
    return [row[0] for row in db.execute("SELECT name FROM schema_migrations ORDER BY applied_at, name")]


def _refuse_newer(applied: list[str], where: str) -> None:
    known = {name for name, _ in MIGRATIONS}
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise SchemaVersionError(
            f"{where}: written by a newer yieldgate (schema migration {unknown[0]!r} is unknown to this "
            f"version); upgrade yieldgate to read it"
        )


def _refuse_foreign(db: sqlite3.Connection, where: str) -> None:
    """An SQLite file with tables and no `schema_migrations` (the first thing a ledger gets) is another program's
    database: refused before anything is written to it. (A PostgreSQL database may hold other tables beside ours.)"""
    tables = [
        row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    ]
    if tables and "schema_migrations" not in tables:
        shown = ", ".join(sorted(tables)[:3]) + (f" and {len(tables) - 3} more" if len(tables) > 3 else "")
        raise LedgerError(
            f"{where}: an SQLite database of another program (tables {shown}), not a yieldgate ledger; "
            "it is left as it is: name a new file as the ledger"
        )


def check(db: Connection, where: str) -> list[str]:
    """Refuse a ledger from a newer schema, and an SQLite database that is not a ledger; return the migrations not
    yet applied to it."""
    applied = applied_migrations(db)
    _refuse_newer(applied, where)
    if not applied and isinstance(db, sqlite3.Connection):
        _refuse_foreign(db, where)
    return [name for name, _ in MIGRATIONS if name not in applied]


def migrate(db: Connection, where: str) -> None:
    """Apply pending migrations, each in its own transaction (the connection must be in autocommit)."""
    if not check(db, where):
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # SQLite has already rolled back after some errors (a full disk)
            db.execute("ROLLBACK")
        raise
    for name, apply in MIGRATIONS:
        db.execute("BEGIN IMMEDIATE")
        try:
            # Re-read inside the write lock: another process may have migrated since we looked.
            applied = applied_migrations(db)
            _refuse_newer(applied, where)
            if name not in applied:
                apply(db)
                if isinstance(db, ledger_pg.PgConnection) and name == "0004_resume_events":
                    ledger_pg.reset_ids(db)  # its rebuilt `events` kept its rows' ids: the next row needs a free one
                db.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)", (name, time.time()))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    if isinstance(db, ledger_pg.PgConnection):
        # PostgreSQL also gets plain-SQL readers of the step blocks (`yieldgate_steps(run)`), made for this schema.
        db.execute("BEGIN IMMEDIATE")
        try:
            ledger_pg.install_readers(db)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
