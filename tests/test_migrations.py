from __future__ import annotations

import sqlite3

import pytest

from yieldgate.errors import SchemaVersionError
from yieldgate.ledger import Ledger
from yieldgate.migrations import MIGRATIONS, applied_migrations, migrate


def test_a_new_ledger_records_every_migration(ledger_path):
    Ledger(ledger_path).close()
    db = sqlite3.connect(ledger_path)
    assert applied_migrations(db) == [name for name, _ in MIGRATIONS]
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"runs", "manifests", "step_blocks", "extra_blocks", "extra_keys", "evals", "events", "decisions",
            "schema_migrations"} <= tables


def test_migrating_twice_changes_nothing(ledger_path):
    Ledger(ledger_path).close()
    db = sqlite3.connect(ledger_path, isolation_level=None)
    before = db.execute("SELECT name, applied_at FROM schema_migrations").fetchall()
    migrate(db, str(ledger_path))
    assert db.execute("SELECT name, applied_at FROM schema_migrations").fetchall() == before


def test_a_failing_migration_rolls_back_whole(ledger_path, monkeypatch):
    def broken(db):
        db.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("migration bug")

    monkeypatch.setattr("yieldgate.migrations.MIGRATIONS", [*MIGRATIONS, ("0002_broken", broken)])
    with pytest.raises(RuntimeError, match="migration bug"):
        Ledger(ledger_path)
    db = sqlite3.connect(ledger_path)
    assert "0002_broken" not in applied_migrations(db)
    assert not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'half_done'").fetchone()


def test_unknown_migration_means_newer_schema(ledger_path):
    Ledger(ledger_path).close()
    db = sqlite3.connect(ledger_path)
    db.execute("INSERT INTO schema_migrations VALUES ('0042_newer', 1)")
    db.commit()
    with pytest.raises(SchemaVersionError, match="upgrade yieldgate"):
        Ledger(ledger_path)
