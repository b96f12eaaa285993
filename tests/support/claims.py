"""A run's writer claim set as another writer's would be (a node elsewhere, a container, a heartbeat long ago), with
its checksum (`ledger.checksum.FIELD_GROUPS["runs.claim"]`): tests that stand in for another process write the claim
through this, never by bare SQL, which the ledger now refuses as damage."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from yieldgate.ledger.checksum import group_checksum, group_columns

__all__ = ["set_claim"]

_KEEP: Any = object()


def set_claim(
    where: Path | str | Any,
    run: str,
    *,
    host: Any = _KEEP,
    pid: Any = _KEEP,
    started: Any = _KEEP,
    namespace: Any = _KEEP,
    heartbeat: Any = _KEEP,
) -> None:
    """Set the given claim fields of `run` (the others kept) and stamp their checksum, in one statement. `where`: a
    ledger file, or an open connection (SQLite's, or a PostgreSQL ledger's) inside the caller's transaction."""
    opened = isinstance(where, str | Path)
    db: Any = sqlite3.connect(where) if isinstance(where, str | Path) else where
    try:
        row = db.execute(f"SELECT {group_columns('runs.claim')} FROM runs WHERE name = ?", (run,)).fetchone()
        given = (host, pid, started, namespace, heartbeat)
        claim = [old if new is _KEEP else new for old, new in zip(row, given, strict=True)]
        db.execute(
            "UPDATE runs SET owner_host = ?, owner_pid = ?, owner_started = ?, owner_ns = ?, heartbeat_at = ?, "
            "claim_checksum = ? WHERE name = ?",
            (*claim, group_checksum("runs.claim", claim), run),
        )
        if opened:
            db.commit()
    finally:
        if opened:
            db.close()
