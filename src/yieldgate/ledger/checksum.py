"""Checksums of stored step blocks: computed on write, checked on every read.

A block (`step_blocks`, `extra_blocks`, `superseded_blocks`) carries `checksum`, a text `<algorithm>:<hex>`
over everything that gives its numbers their meaning: the run's id, the extra's key (its name, not its id,
so a damaged key table is caught too), first and last step, row count, the tokens maximum, the column
names, the value bytes and the missing-value bits. The algorithm is CRC32C (Castagnoli; `google-crc32c`,
installed with the tensorboard extra) when importable, else zlib's CRC32; the name is stored with the
value, so a ledger written with one is read correctly where only the other is installed (a CRC32C block
read without `google-crc32c` counts as unverified, not as damaged). Blocks written before migration
`0006_block_checksums` have none and are read as before, unverified (`yieldgate check` counts them).

A checksum guards against damage on disk (a flipped bit, a torn page SQLite's own checks miss), not
against someone rewriting the ledger on purpose.
"""

from __future__ import annotations

import math
import struct
import zlib
from types import ModuleType
from typing import Any

from yieldgate.errors import BlockDamaged

__all__ = ["ALGORITHM", "block_checksum", "block_ok", "verify_block"]

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
