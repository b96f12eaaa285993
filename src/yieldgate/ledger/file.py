"""Quick checks of a ledger file from its size and headers, without SQLite: fast enough to run before every
listing and at every Tracker flush (a stat and two small reads).

They catch what SQLite would read silently or only fail on later: a file truncated or replaced by a shorter
copy (its header says more pages than it holds, or it is shorter than it was), a header that is not
SQLite's, a write-ahead log whose header is damaged. They do not read the pages: `yieldgate check`
(`check.check_ledger`) does, with SQLite's integrity check and every block's checksum.
File format: https://www.sqlite.org/fileformat2.html (database header, section 1.3; WAL, section 4).

Reading the headers opens the files, and closing any descriptor of a database file drops every POSIX lock this
process holds on it, SQLite's included ("How To Corrupt An SQLite Database File", section 2.2): another process
then writes under this one's feet and both see `disk I/O error`. So the headers are read only where no SQLite
connection of this process has the file open (`headers=True`); the Tracker's writer, which has, checks the size
alone.
"""

from __future__ import annotations

import os
import struct
import time

__all__ = ["file_problem", "holds_database"]

MAGIC = b"SQLite format 3\x00"
WAL_MAGIC = (0x377F0682, 0x377F0683)


def holds_database(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is an SQLite database (a ledger, most likely) or a side file of one (its -wal, -shm or
    -journal): a file that a report or other output must not replace."""
    path = os.fspath(path)
    for suffix in ("-wal", "-shm", "-journal"):
        if path.endswith(suffix) and os.path.isfile(path[: -len(suffix)]):
            path = path[: -len(suffix)]
            break
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:  # missing, a folder, unreadable: not a database this output would replace
        return False


def _wal_checksum(data: bytes, big_endian: bool) -> tuple[int, int]:
    """SQLite's WAL checksum over `data` (a multiple of 8 bytes), fileformat2 section 4.1."""
    words = struct.unpack((">" if big_endian else "<") + f"{len(data) // 4}I", data)
    s0 = s1 = 0
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def _wal_problem(path: str, page_size: int) -> str | None:
    name = os.path.basename(path)
    try:
        with open(path, "rb") as f:
            head = f.read(32)
    except FileNotFoundError:
        return None
    if not head:
        return None  # an empty log: nothing to replay
    if len(head) < 32:
        return f"the write-ahead log {name} is {len(head)} bytes, shorter than its header (damaged)"
    magic, version, wal_page, _, _, _, c0, c1 = struct.unpack(">8I", head)
    if magic not in WAL_MAGIC or version != 3007000:
        return f"the write-ahead log {name} does not start with a WAL header (damaged)"
    if wal_page != page_size:
        return f"the write-ahead log {name} has pages of {wal_page} bytes, the file {page_size} (not its log)"
    if _wal_checksum(head[:24], magic & 1 == 1) != (c0, c1):
        return f"the write-ahead log {name} fails its header checksum (damaged)"
    return None


def file_problem(
    path: str | os.PathLike[str], *, min_size: int = 0, headers: bool = True, settle_s: float = 1.0
) -> str | None:
    """What is wrong with the ledger file at `path` by its size and headers, in a sentence; None when nothing
    is (or there is no file: a ledger not made yet). `min_size`: the size it had when last seen (the Tracker's
    writer passes the size after its last write): a file shorter than that was truncated or replaced.
    `headers`: also read the database and WAL headers; only where this process has no connection open on the
    file (see the module's docstring).

    Another process may be checkpointing while the headers are read (it writes page 1, which states the new
    page count, before the pages that grow the file), so a header problem is reported only once the file has
    kept the same size and the problem for `settle_s` seconds (or after ten times that, if it never does)."""
    path = os.fspath(path)
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return None
    if size < min_size:
        return f"the file is {size:,} bytes, shorter than the {min_size:,} it had: truncated or replaced"
    if size == 0 or not headers:
        return None  # SQLite's empty database; or the size is all that may be looked at
    problem, since = _header_problem(path, size), time.monotonic()
    give_up = since + 10 * settle_s  # a file that never stands still: report what is read then
    while problem is not None and time.monotonic() - since < settle_s and time.monotonic() < give_up:
        time.sleep(0.05)
        try:
            now = os.stat(path).st_size
        except FileNotFoundError:
            return None
        again = _header_problem(path, now)
        if again != problem or now != size:  # still moving: a writer at work
            problem, size, since = again, now, time.monotonic()
    return problem


def _header_problem(path: str, size: int) -> str | None:
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except FileNotFoundError:
        return None
    if len(header) < 100:
        return f"the file is {size} bytes, shorter than an SQLite header: truncated"
    if header[:16] != MAGIC:
        return "the file does not start with an SQLite header: damaged, or not a ledger"
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return f"the file's header is damaged (page size {page_size})"
    if size % page_size:
        return f"the file is {size:,} bytes, not a whole number of {page_size}-byte pages: truncated"
    pages, counter, valid_for = (struct.unpack(">I", header[o : o + 4])[0] for o in (28, 24, 92))
    if pages and counter == valid_for and pages * page_size > size:
        return f"the file holds {size // page_size:,} pages, its header says {pages:,}: truncated"
    return _wal_problem(path + "-wal", page_size)
