"""Which filesystem a path is on, from the mounts table (`/proc/mounts` on Linux): a ledger must not be on a
network filesystem.

SQLite's write-ahead log keeps its index in shared memory (the `-shm` file, memory-mapped) and relies on
POSIX locks: neither works across hosts on NFS, Lustre, GPFS, CIFS/SMB or FUSE mounts, so two nodes writing
one ledger there can damage it without an error (https://www.sqlite.org/wal.html, "WAL does not work over a
network filesystem"). One ledger per node on a local disk, merged with `yieldgate merge`, works today.
"""

from __future__ import annotations

import os
import re

__all__ = ["MOUNTS", "NETWORK_FILESYSTEMS", "filesystem_of", "network_filesystem"]

MOUNTS = "/proc/mounts"
"""The mounts table read by default (a parameter everywhere it is used, for tests and other systems)."""

NETWORK_FILESYSTEMS = frozenset({"nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "smbfs", "fuse", "fuseblk"})
"""Filesystem types refused for a ledger; any `fuse.<name>` type (sshfs, gcsfuse, s3fs, ...) is refused too."""


def _unescape(field: str) -> str:
    # /proc/mounts writes space, tab, newline and backslash in paths as octal escapes (\040 ...)
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def filesystem_of(path: str | os.PathLike[str], mounts: str = MOUNTS) -> tuple[str, str] | None:
    """(mount point, filesystem type) of the mount holding `path`: the longest mount point that is a prefix of
    its real path (symlinks resolved; a file not made yet is judged by its folder). None without a mounts table."""
    try:
        with open(mounts, encoding="utf-8", errors="replace") as f:
            table = [line.split() for line in f]
    except OSError:
        return None
    real = os.path.realpath(os.fspath(path))
    best: tuple[str, str] | None = None
    for fields in table:
        if len(fields) < 3:
            continue
        point, kind = _unescape(fields[1]), fields[2]
        inside = point == "/" or real == point or real.startswith(point.rstrip("/") + "/")
        # Equal mount points: the later line is mounted over the earlier one and is what the path is on.
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, kind)
    return best


def network_filesystem(path: str | os.PathLike[str], mounts: str = MOUNTS) -> tuple[str, str] | None:
    """(mount point, type) when `path` is on a network or FUSE filesystem, else None."""
    found = filesystem_of(path, mounts)
    if found is None:
        return None
    kind = found[1]
    return found if kind in NETWORK_FILESYSTEMS or kind.startswith("fuse.") else None
