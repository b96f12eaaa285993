from __future__ import annotations

import math
import sqlite3

import pytest

from yieldgate.errors import SchemaVersionError
from yieldgate.ledger import Ledger
from yieldgate.ledger.migrations import MIGRATIONS, applied_migrations, migrate


def test_a_new_ledger_records_every_migration(ledger_path):
    Ledger(ledger_path).close()
    db = sqlite3.connect(ledger_path)
    assert applied_migrations(db) == [name for name, _ in MIGRATIONS]
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {
        "runs",
        "manifests",
        "step_blocks",
        "extra_blocks",
        "extra_keys",
        "evals",
        "events",
        "decisions",
        "schema_migrations",
    } <= tables


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

    monkeypatch.setattr("yieldgate.ledger.migrations.MIGRATIONS", [*MIGRATIONS, ("0002_broken", broken)])
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


def test_standard_errors_stored_as_metrics_are_folded_into_their_metrics(ledger_path):
    """A ledger an older yieldgate filled from lm-eval holds `acc_stderr` rows beside `acc`: 0008_eval_stderr makes
    each its metric's `stderr` (a row of its metric with no value where the metric itself was never stored)."""
    with Ledger(ledger_path) as led:
        led.create_run("old")
    db = sqlite3.connect(ledger_path, isolation_level=None)
    db.execute("ALTER TABLE evals DROP COLUMN stderr")
    db.execute("DELETE FROM schema_migrations WHERE name IN ('0008_eval_stderr', '0010_record_checksums')")
    rows = [
        (1, "arc", "acc", 0.5, 1),
        (1, "arc", "acc_stderr", 0.01, 0),
        (2, "arc", "acc", 0.6, 1),
        (2, "arc", "acc_stderr", 0.02, 0),
        (1, "gsm8k", "exact_match,strict-match", 0.3, 1),
        (1, "gsm8k", "exact_match_stderr,strict-match", 0.03, 0),
        (1, "lambada", "ppl_stderr", 1.5, 0),
        (1, "val", "loss", 2.0, 0),
    ]
    db.executemany(
        "INSERT INTO evals (run_id, step, portfolio, portfolio_version, task, metric, value, "
        "higher_is_better) VALUES (1, ?, 'lm-eval', '0.4', ?, ?, ?, ?)",
        rows,
    )
    db.close()
    with Ledger(ledger_path) as led:
        evals = led.evals("old")
    got = {(r.step, r.task, r.metric): (r.value, r.stderr, r.higher_is_better) for r in evals.itertuples()}
    assert got.keys() == {
        (1, "arc", "acc"),
        (2, "arc", "acc"),
        (1, "gsm8k", "exact_match,strict-match"),
        (1, "lambada", "ppl"),
        (1, "val", "loss"),
    }
    assert got[(1, "arc", "acc")] == (0.5, 0.01, True) and got[(2, "arc", "acc")] == (0.6, 0.02, True)
    assert got[(1, "gsm8k", "exact_match,strict-match")] == (0.3, 0.03, True)
    value, stderr, higher = got[(1, "lambada", "ppl")]
    assert math.isnan(value) and stderr == 1.5 and higher is False  # a perplexity falls
    assert math.isnan(got[(1, "val", "loss")][1])
