"""A digest of a ledger's content: every table's rows, in a fixed order. Equal digests before and after a
refused input mean the ledger did not change (WAL and page layout aside, which are not content)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path


def ledger_digest(path: Path) -> str:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        h = hashlib.sha256()
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        for table in tables:
            h.update(table.encode())
            for row in sorted(map(repr, db.execute(f'SELECT * FROM "{table}"'))):
                h.update(row.encode())
        return h.hexdigest()
    finally:
        db.close()
