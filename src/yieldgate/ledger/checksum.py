"""Checksums of every stored record: computed on write, checked on every read and by `yieldgate check`.

Blocks. A block (`step_blocks`, `extra_blocks`, `superseded_blocks`) carries `checksum`, a text `<algorithm>:<hex>`
over everything that gives its numbers their meaning: the run's id, the extra's key (its name, not its id,
so a damaged key table is caught too), first and last step, row count, the tokens maximum, the column
names, the value bytes and the missing-value bits. The algorithm is CRC32C (Castagnoli; `google-crc32c`,
installed with the tensorboard extra) when importable, else zlib's CRC32; the name is stored with the
value, so a ledger written with one is read correctly where only the other is installed (a CRC32C block
read without `google-crc32c` counts as unverified, not as damaged). Blocks written before migration
`0006_block_checksums` have none and are read as before, unverified (`yieldgate check` counts them).

Records. Every other row (`RECORD_FIELDS`: a run's record, its manifest, tags, evaluations, events, gate decisions
with their evidence, campaigns) carries `checksum`, `sha256:` and the first 16 hex digits of
`util.hashing.content_hash` over the table's name and the row's fields in `RECORD_FIELDS` order, each as the
ledger reads it back on either backend (a REAL as a float, a NaN, which SQLite keeps as NULL, as null; JSON bodies
as their stored text). A write computes it in the transaction that writes the row; a rewrite (a status, a note,
a resolved event) first checks the stored row, so damage is never sealed under a fresh checksum. Rows stored
before migration `0010_record_checksums` got theirs from it. Left out of a run's record: `updated_at` and its
writer's claim (`owner_*`, `heartbeat_at`), rewritten by every flush of a live Tracker; the claim has a checksum of its
own (below). The `extra_keys` names are
covered by the checksums of the blocks that use them. Unlike a block's, a record's missing checksum is damage:
every record has one since that migration, and a damaged record header can make SQLite read its last column,
the checksum, as NULL.

Field groups (`FIELD_GROUPS`, migration `0012_more_checksums`). What no block or record checksum covers, and a command
shows or decides on, carries a CRC32 of its own: a core block's summary (`runs` sums count, last step, tokens and wall
clock from the index without decoding the block), a run's writer claim and heartbeat (liveness, takeover, rename and
removal decide on them; each heartbeat restamps it), and the ids of events and decisions (`event #12`). Only
`updated_at` (an ordering hint) and ids no command shows (blocks', evaluations') are left out.

A checksum guards against damage on disk (a flipped bit, a torn page SQLite's own checks miss), not
against someone rewriting the ledger on purpose.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from yieldgate.errors import BlockDamaged
from yieldgate.util.hashing import content_hash

__all__ = [
    "ALGORITHM",
    "FIELD_GROUPS",
    "RECORD_FIELDS",
    "group_checksum",
    "group_columns",
    "group_ok",
    "verify_group",
    "block_checksum",
    "block_ok",
    "record_checksum",
    "record_columns",
    "record_name",
    "record_ok",
    "verify_block",
    "verify_record",
]

google_crc32c: ModuleType | None
try:
    import google_crc32c as _google_crc32c

    google_crc32c = _google_crc32c
    ALGORITHM = "crc32c"
except ImportError:  # pragma: no cover - depends on the install
    google_crc32c = None
    ALGORITHM = "crc32"


def _fields(
    run_id: int,
    key: str | None,
    first_step: int,
    last_step: int,
    n: int,
    tokens_max: float | None,
    columns: str,
    data: bytes,
    missing: bytes | None,
) -> list[bytes]:
    # Each field length-prefixed, so that no two different blocks serialise to the same bytes. A field of the
    # wrong type (a damaged record header turns a BLOB into TEXT) raises TypeError: the block is damaged.
    if not isinstance(data, bytes) or not (missing is None or isinstance(missing, bytes)):
        raise TypeError("block data is not bytes")
    if not isinstance(columns, str) or not (key is None or isinstance(key, str)):
        raise TypeError("block column names are not text")
    tokens = b"-" if tokens_max is None else struct.pack("<d", float(tokens_max))
    if tokens_max is not None and math.isnan(float(tokens_max)):
        tokens = b"nan"
    head = struct.pack("<qqqq", int(run_id), int(first_step), int(last_step), int(n))
    return [
        head,
        tokens,
        b"-" if key is None else key.encode("utf-8", "surrogatepass"),
        columns.encode("utf-8", "surrogatepass"),
        data,
        b"-" if missing is None else missing,
    ]


def _crc(algorithm: str, parts: list[bytes]) -> int | None:
    value = 0
    for part in parts:
        chunk = struct.pack("<q", len(part)) + part
        if algorithm == "crc32c":
            if google_crc32c is None:
                return None
            value = google_crc32c.extend(value, chunk)
        elif algorithm == "crc32":
            value = zlib.crc32(chunk, value)
        else:
            return None
    return value


def block_checksum(
    run_id: int,
    key: str | None,
    first_step: int,
    last_step: int,
    n: int,
    tokens_max: float | None,
    columns: str,
    data: bytes,
    missing: bytes | None,
) -> str:
    """The checksum stored with a block: `crc32c:0123abcd` (or `crc32:...` without google-crc32c)."""
    parts = _fields(run_id, key, first_step, last_step, n, tokens_max, columns, data, missing)
    return f"{ALGORITHM}:{_crc(ALGORITHM, parts):08x}"


def block_ok(
    checksum: Any,
    run_id: int,
    key: str | None,
    first_step: Any,
    last_step: Any,
    n: Any,
    tokens_max: Any,
    columns: Any,
    data: Any,
    missing: Any,
) -> bool | None:
    """True when the block matches its checksum, False when it does not (or is malformed), None when it cannot
    be verified (no checksum: written before checksums; an algorithm not installed here)."""
    if checksum is None:
        return None
    if not isinstance(checksum, str) or ":" not in checksum:
        return False
    algorithm, _, stored = checksum.partition(":")
    try:
        value = _crc(algorithm, _fields(run_id, key, first_step, last_step, n, tokens_max, columns, data, missing))
    except (TypeError, ValueError, OverflowError, struct.error, UnicodeError):
        return False
    if value is None:
        return None if algorithm in ("crc32c", "crc32") else False
    return f"{value:08x}" == stored


def verify_block(where: str, run: str, key: str | None, row: tuple[Any, ...], run_id: int) -> None:
    """Raise BlockDamaged naming the run and step range when `row` (checksum, first_step, last_step, n,
    tokens_max, columns, data, missing) fails its checksum."""
    checksum, first, last, n, tokens_max, columns, data, missing = row
    if block_ok(checksum, run_id, key, first, last, n, tokens_max, columns, data, missing) is False:
        what = f"extra {key!r}" if key is not None else "core step records"
        raise BlockDamaged(
            f"{where}: run {run!r}, {what} of steps {first}-{last}: the stored block fails its "
            "checksum (the file is damaged); its numbers are not read. `yieldgate check` reports "
            "all damage; restore the ledger from a backup or re-import the run"
        )


# The fields each record's checksum covers, in order, with the type each is read back as. Stored checksums depend
# on them: never change a table's list (a field added later needs a new migration and a new algorithm name).
RECORD_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "runs": (
        ("name", "text"),
        ("status", "text"),
        ("source", "text"),
        ("manifest_hash", "text"),
        ("created_at", "real"),
        ("meta", "text"),
        ("note", "text"),
    ),
    "manifests": (("hash", "text"), ("body", "text"), ("created_at", "real")),
    "run_tags": (("run_id", "int"), ("tag", "text")),
    "evals": (
        ("run_id", "int"),
        ("step", "int"),
        ("tokens", "real"),
        ("wall_s", "real"),
        ("portfolio", "text"),
        ("portfolio_version", "text"),
        ("task", "text"),
        ("metric", "text"),
        ("value", "real"),
        ("higher_is_better", "int"),
        ("stderr", "real"),
    ),
    "events": (
        ("run_id", "int"),
        ("kind", "text"),
        ("start_step", "int"),
        ("end_step", "int"),
        ("body", "text"),
        ("state", "text"),
        ("created_at", "real"),
        ("resolved_at", "real"),
    ),
    "decisions": (
        ("target", "text"),
        ("run_id", "int"),
        ("stage", "text"),
        ("decision", "text"),
        ("policy_hash", "text"),
        ("policy", "text"),
        ("evidence", "text"),
        ("rationale", "text"),
        ("created_at", "real"),
    ),
    "campaigns": (
        ("name", "text"),
        ("spec_hash", "text"),
        ("spec", "text"),
        ("summary", "text"),
        ("created_at", "real"),
        ("updated_at", "real"),
    ),
}
_RECORD_PREFIX = "sha256:"

# Fields outside a block's or a record's checksum, each group under a checksum of its own (migration
# `0012_more_checksums`): what `runs` reads of a run's core blocks without decoding them (its steps, last step,
# tokens and duration come from these), a run's writer claim and heartbeat (liveness, takeover), and the ids of events
# and decisions (`event #12`, `decision #3`; superseded records name their event by it). Never change a list.
FIELD_GROUPS: dict[str, tuple[tuple[str, str], ...]] = {
    "step_blocks.summary": (
        ("run_id", "int"),
        ("first_step", "int"),
        ("last_step", "int"),
        ("n", "int"),
        ("tokens_max", "real"),
        ("wall_s_max", "real"),
    ),
    "runs.claim": (
        ("owner_host", "text"),
        ("owner_pid", "int"),
        ("owner_started", "real"),
        ("owner_ns", "text"),
        ("heartbeat_at", "real"),
    ),
    "events.id": (("id", "int"), ("checksum", "text")),
    "decisions.id": (("id", "int"), ("checksum", "text")),
}


def group_columns(group: str, alias: str = "") -> str:
    """The columns of a `FIELD_GROUPS` group, comma-separated (each prefixed `alias.`)."""
    return ", ".join(alias + ("." if alias else "") + name for name, _ in FIELD_GROUPS[group])


def group_checksum(group: str, values: Sequence[Any]) -> str:
    """`crc32:` and 8 hex digits over a `FIELD_GROUPS` group's values as either backend reads them back: cheap
    enough for `runs` to check the summary of every block it sums."""
    fields = FIELD_GROUPS[group]
    read = [_as_read(kind, v) for (_, kind), v in zip(fields, values, strict=True)]
    return f"crc32:{zlib.crc32(repr((group, *read)).encode('utf-8', 'surrogatepass')):08x}"


def group_ok(group: str, checksum: Any, values: Sequence[Any]) -> bool:
    """True when a group's values match their checksum; False when not, when there is none, or when malformed."""
    try:
        return bool(checksum == group_checksum(group, values))
    except (TypeError, ValueError, OverflowError, UnicodeError):
        return False


def verify_group(where: str, group: str, checksum: Any, values: Sequence[Any], run: str | None, what: str) -> None:
    """Raise BlockDamaged naming the run and `what` when a group's values fail their checksum."""
    if not group_ok(group, checksum, values):
        owner = f"run {run!r}, " if run is not None else ""
        raise BlockDamaged(
            f"{where}: {owner}{what}: the stored fields fail their checksum (the file is damaged); they are not read. "
            "`yieldgate check` reports all damage; restore the ledger from a backup, or remove the run and record it "
            "again"
        )


def record_columns(table: str, alias: str = "") -> str:
    """The covered columns of `table`, comma-separated in `RECORD_FIELDS` order (each prefixed `alias.`)."""
    return ", ".join(alias + ("." if alias else "") + name for name, _ in RECORD_FIELDS[table])


def _as_read(kind: str, value: Any) -> Any:
    # What either backend reads back: SQLite keeps a NaN as NULL and a REAL that is a whole number as an integer on
    # disk (-0.0 as 0); PostgreSQL keeps both as given. A value of the wrong type (damage to a record's header)
    # raises TypeError.
    exact = type(value)  # the common cases first: an import checksums every evaluation it stores
    if exact is float and kind == "real":
        return None if value != value else value + 0.0
    if (exact is str and kind == "text") or (exact is int and kind == "int"):
        return value
    if value is None:
        return None
    if kind == "text":
        if not isinstance(value, str):
            raise TypeError("not text")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("not a number")
    if kind == "int":
        if not isinstance(value, int):
            raise TypeError("not an integer")
        return value
    number = float(value)
    return None if math.isnan(number) else number + 0.0  # -0.0 + 0.0 == 0.0


def record_checksum(table: str, values: Sequence[Any]) -> str:
    """The checksum stored with a record of `table`: `sha256:` and 16 hex digits, over `values` (its
    `RECORD_FIELDS` in order)."""
    fields = RECORD_FIELDS[table]
    if len(values) != len(fields):
        raise TypeError(f"{table}: {len(fields)} fields, got {len(values)}")
    read = [_as_read(kind, v) for (_, kind), v in zip(fields, values, strict=True)]
    return _RECORD_PREFIX + content_hash([table, *read])[:16]


def record_ok(table: str, checksum: Any, values: Sequence[Any]) -> bool:
    """True when the record matches its checksum; False when it does not, or has none, or is malformed."""
    try:
        return bool(checksum == record_checksum(table, values))
    except (TypeError, ValueError, OverflowError):
        return False


def record_name(table: str, values: Sequence[Any], row_id: Any = None) -> str:
    """How a message names a record of `table` (`values`: its `RECORD_FIELDS`; `row_id` for events and
    decisions): `evaluation val/loss at step 300`, `event #12 (resume)`, `tag 'baseline'`."""
    f = dict(zip((name for name, _ in RECORD_FIELDS[table]), values, strict=True))
    if table == "runs":
        return "run record (name, status, source, manifest, meta, note)"
    if table == "manifests":
        return f"manifest {str(f['hash'])[:12]}"
    if table == "run_tags":
        return f"tag {f['tag']!r}"
    if table == "evals":
        portfolio = f" of portfolio {f['portfolio']} {f['portfolio_version']}".rstrip() if f["portfolio"] else ""
        return f"evaluation {f['task']}/{f['metric']}{portfolio} at step {f['step']}"
    if table == "events":
        return f"event #{row_id} ({f['kind']})"
    if table == "decisions":
        return f"decision #{row_id} ({f['decision']} of target {f['target']!r})"
    return f"campaign {f['name']!r}"


def verify_record(
    where: str, table: str, checksum: Any, values: Sequence[Any], run: str | None, row_id: Any = None
) -> None:
    """Raise BlockDamaged naming the run and the record (`record_name`) when a record of `table` (`values`: its
    `RECORD_FIELDS`) fails its checksum."""
    if record_ok(table, checksum, values) is False:
        owner = f"run {run!r}, " if run is not None else ""
        raise BlockDamaged(
            f"{where}: {owner}{record_name(table, values, row_id)}: the stored record fails its checksum (the file "
            "is damaged); it is not read. `yieldgate check` reports all damage; restore the ledger from a backup, "
            "or remove the run and record it again"
        )
