"""Opening the files a user names as input (manifests, recipes, policies, logs, event files): regular files
only.

A path that is a FIFO blocks its reader until something writes to it, `/dev/zero` or `/dev/urandom` never
ends, a socket or a directory holds no document: each is refused in one line before a byte is read, never
waited on. The check is made on the opened descriptor, not on the name (opened non-blocking, so that the
open of a FIFO without a writer returns at once), so nothing can be swapped in between check and read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from yieldgate.errors import InputError

__all__ = ["check_regular", "open_regular", "read_regular"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def open_regular(path: str | Path, expected: str) -> BinaryIO:
    """`path` opened for reading in binary; InputError (one line: what it is, what was expected) when it is
    missing, unreadable or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file; expected {expected}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror}); expected {expected}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError(f"{path}: is {_kind(mode)}, not a regular file; expected {expected}: give a file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(path: str | Path, expected: str) -> bytes:
    """The bytes of a regular file (`open_regular`'s refusals), read whole: for documents read as one piece
    (manifests, recipes, JSON results), not for logs that may run to gigabytes."""
    with open_regular(path, expected) as fh:
        try:
            return fh.read()
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror})") from None


def check_regular(path: str | Path, expected: str) -> None:
    """Refuse `path` as `open_regular` would, before a library opens it by name (Parquet, SQLite)."""
    open_regular(path, expected).close()
