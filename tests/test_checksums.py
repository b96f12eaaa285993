"""Checksums of every stored record other than step blocks (`yieldgate.ledger.checksum.RECORD_FIELDS`): a flipped bit
in an evaluation, a run's status, name, source, meta or note, its manifest, a tag, an event, a decision or a campaign
is found by `check` (naming the run and the record) and refused on read; an older ledger gets its checksums on
upgrade."""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

import pytest

from tests.test_manifest import BASE
from yieldgate.errors import BlockDamaged
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.ledger.check import check_ledger
from yieldgate.manifest import parse_manifest

RECORD_TABLES = ("runs", "manifests", "run_tags", "evals", "events", "decisions", "campaigns")


def build(path: Path) -> None:
    """A ledger holding every kind of record (`add_every_kind`), and a resume that set steps of run b apart."""
    with Ledger(path) as led:
        for run in ("a", "b"):
            led.create_run(run, source="tracker")
            led.append_steps(
                run,
                {
                    "step": list(range(1, 401)),
                    "tokens": [s * 4096.0 for s in range(1, 401)],
                    "loss": [3.0 - s / 400 for s in range(1, 401)],
                },
            )
        add_every_kind(led)
        led.supersede("b", 350, resume={"step": 350, "tokens": 350 * 4096.0})


def add_every_kind(led: Ledger) -> None:
    """To runs a and b (with steps past 300): a manifest, meta, a note, tags, evaluations (one with its standard
    error), a final status, events (one resolved), a decision citing both runs with its evidence and policy, and a
    campaign with its summary."""
    for run, loss in (("a", 2.5), ("b", 2.4)):
        led.set_manifest(run, parse_manifest(BASE))
        led.append_evals(
            run,
            [
                EvalRecord(step=s, task="val", metric="loss", value=loss - s / 1000, tokens=s * 4096.0)
                for s in (100, 200, 300)
            ],
        )
        led.append_evals(
            run,
            [
                {"step": 300, "task": "arc", "metric": "acc", "value": 0.41},
                {"step": 300, "task": "arc", "metric": "acc_stderr", "value": 0.02},
            ],
        )
        led.set_meta(run, "mfu", {"formula": "6N", "peak_flops": 9.9e14})
        led.set_status(run, "finished")
    led.set_note("a", "baseline, lr 3e-4")
    led.tag_run("a", ["baseline", "sweep-7"])
    event = led.add_event("a", "warning", {"source": "tracker", "message": "loss spike at 150"}, start_step=150)
    led.resolve_event(event)
    led.add_event("a", "diagnosis", {"cause": "schedule", "evidence": {"lr": 3e-4}}, start_step=100, end_step=200)
    led.add_decision(
        "model-x",
        "approve",
        evidence={"runs": ["a", "b"], "yield": 1.06},
        rationale="b 6% better",
        run="b",
        stage="pretrain",
        policy={"min_yield": 1.0},
        policy_hash="p1",
    )
    led.put_campaign("sweep", {"recipes": {"clean": "x"}, "seeds": 2}, "h1")
    led.set_campaign_summary("sweep", {"ranking": ["clean"], "accuracy": 0.9})


def _flip(value: object) -> object:
    """`value` with one bit flipped, as damage on disk would leave it: a float's low mantissa bit, an integer's
    lowest bit, the lowest bit of a text's middle character."""
    if isinstance(value, float):
        return struct.unpack("<d", bytes([struct.pack("<d", value)[0] ^ 1]) + struct.pack("<d", value)[1:])[0]
    if isinstance(value, int):
        return value ^ 1
    assert isinstance(value, str) and value, value
    i = len(value) // 2
    return value[:i] + chr(ord(value[i]) ^ 1) + value[i + 1 :]


def damage(path: Path, table: str, column: str, where: str) -> None:
    """Flip one bit of one stored value with sqlite3, around yieldgate (CHECK constraints off: a disk does not check
    them either)."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA ignore_check_constraints = ON")
    rowid, value = db.execute(f"SELECT rowid, {column} FROM {table} WHERE {where}").fetchone()
    db.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (_flip(value), rowid))
    db.commit()
    db.close()


A = "run_id = (SELECT id FROM runs WHERE name = 'a')"
B = "run_id = (SELECT id FROM runs WHERE name = 'b')"
# (table, column, which row, the run `check` names, the record it names, a read that must refuse it)
CASES = [
    (
        "evals",
        "value",
        f"{A} AND task = 'val' AND step = 300",
        "a",
        "evaluation val/loss at step 300",
        lambda led: led.evals("a"),
    ),
    (
        "evals",
        "value",
        f"{A} AND task = 'val' AND step = 300",
        "a",
        "evaluation val/loss at step 300",
        lambda led: led.runs(),
    ),  # the runs list shows each run's last evaluation
    ("evals", "stderr", f"{B} AND task = 'arc'", "b", "evaluation arc/acc at step 300", lambda led: led.evals("b")),
    (
        "evals",
        "step",
        f"{A} AND task = 'val' AND step = 200",
        "a",
        "evaluation val/loss at step 201",
        lambda led: led.evals("a"),
    ),
    (
        "evals",
        "higher_is_better",
        f"{A} AND task = 'val' AND step = 100",
        "a",
        "evaluation val/loss at step 100",
        lambda led: led.evals("a"),
    ),
    ("runs", "status", "name = 'a'", "a", "run record", lambda led: led.run_info("a")),
    ("runs", "status", "name = 'a'", "a", "run record", lambda led: led.runs()),
    ("runs", "source", "name = 'b'", "b", "run record", lambda led: led.run_info("b")),
    ("runs", "meta", "name = 'b'", "b", "run record", lambda led: led.meta("b")),
    ("runs", "meta", "name = 'b'", "b", "run record", lambda led: led.run_metas()),
    ("runs", "note", "name = 'a'", "a", "run record", lambda led: led.note("a")),
    ("runs", "manifest_hash", "name = 'a'", "a", "run record", lambda led: led.manifest("a")),
    ("runs", "name", "name = 'b'", "c", "run record", lambda led: led.runs()),  # 'b' reads as 'c'
    ("manifests", "body", "1 = 1", "a", "manifest", lambda led: led.manifest("a")),
    ("run_tags", "tag", f"{A} AND tag = 'baseline'", "a", "tag 'basemine'", lambda led: led.tags("a")),
    ("run_tags", "tag", f"{A} AND tag = 'baseline'", "a", "tag 'basemine'", lambda led: led.runs()),
    ("events", "body", f"{A} AND kind = 'warning'", "a", "(warning)", lambda led: led.events("a")),
    ("events", "state", f"{A} AND kind = 'diagnosis'", "a", "(diagnosis)", lambda led: led.events(kind="diagnosis")),
    ("events", "end_step", f"{A} AND kind = 'diagnosis'", "a", "(diagnosis)", lambda led: led.events("a")),
    ("events", "body", f"{B} AND kind = 'resume'", "b", "(resume)", lambda led: led.events("b")),
    ("decisions", "evidence", "1 = 1", "b", "(approve of target 'model-x')", lambda led: led.decisions()),
    ("decisions", "rationale", "1 = 1", "b", "(approve of target 'model-x')", lambda led: led.decisions("model-x")),
    ("campaigns", "summary", "name = 'sweep'", None, "campaign 'sweep'", lambda led: led.campaign("sweep")),
    ("campaigns", "spec", "name = 'sweep'", None, "campaign 'sweep'", lambda led: led.campaign("sweep")),
]


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("checksums") / "whole.db"
    build(path)
    return path


@pytest.mark.parametrize(
    ("table", "column", "where", "run", "record", "read"),
    CASES,
    ids=[f"{c[0]}.{c[1]}-{i}" for i, c in enumerate(CASES)],
)
def test_a_flipped_bit_in_a_record_is_reported_by_check_and_refused_on_read(
    whole, tmp_path, cli_for, table, column, where, run, record, read
):
    path = tmp_path / "l.db"
    path.write_bytes(whole.read_bytes())
    with Ledger(path, readonly=True) as led:
        before = check_ledger(led)
    assert before.clean and before.verified_records > 0
    damage(path, table, column, where)
    with Ledger(path, readonly=True) as led:
        result = check_ledger(led)
        with pytest.raises(BlockDamaged, match="fails its checksum") as refused:
            read(led)
    assert result.integrity == []  # SQLite sees a well-formed file: only the checksum knows
    assert [(d.run, d.record is not None and record in d.record) for d in result.damaged] == [(run, True)], (
        result.damaged
    )
    assert result.verified_records == before.verified_records - 1
    assert record in str(refused.value) and (run is None or f"run {run!r}" in str(refused.value))
    out = cli_for(path)("check", code=2).stdout
    owner = "the ledger" if run is None else f"run {run!r}"  # a campaign belongs to no run
    assert f"damaged: {owner}: " in out and record in out and "DAMAGED" in out


def test_check_of_one_run_names_only_its_damage(whole, tmp_path, cli_for):
    path = tmp_path / "l.db"
    path.write_bytes(whole.read_bytes())
    damage(path, "evals", "value", f"{A} AND task = 'val' AND step = 300")
    cli = cli_for(path)
    assert cli.json("check", "b")["clean"] is True
    damaged = cli("check", "a", "--json", code=2)
    assert '"record": "evaluation val/loss at step 300"' in damaged.stdout


def test_a_rewrite_of_a_damaged_record_is_refused_rather_than_sealed(whole, tmp_path):
    """A write that changes a record (a status, a meta key, a name, a resolved event, a campaign's summary) checks the
    stored one first: a fresh checksum over damaged values would hide the damage for good."""
    path = tmp_path / "l.db"
    path.write_bytes(whole.read_bytes())
    with Ledger(path) as led:
        led.create_run("c")  # cited by no decision: it may be renamed and removed
        led.set_note("c", "a run of its own")
    damage(path, "runs", "note", "name = 'c'")
    damage(path, "campaigns", "spec", "name = 'sweep'")
    damage(path, "events", "body", f"{A} AND kind = 'diagnosis'")
    with Ledger(path) as led:
        diagnosis = int(led._db.execute("SELECT id FROM events WHERE kind = 'diagnosis'").fetchone()[0])
        for write in (
            lambda: led.set_status("c", "failed"),
            lambda: led.set_meta("c", "k", 1),
            lambda: led.set_note("c", "new note"),
            lambda: led.rename_run("c", "c2"),
            lambda: led.set_campaign_summary("sweep", {}),
            lambda: led.resolve_event(diagnosis),
        ):
            with pytest.raises(BlockDamaged):
                write()
        led.set_status("b", "failed")  # an undamaged record is written as before
        assert len(check_ledger(led).damaged) == 3
        assert led.remove_runs(["c"])[0]["name"] == "c"  # a damaged run can still be removed and recorded again
        assert len(check_ledger(led).damaged) == 2


def test_evals_merged_into_stored_ones_keep_their_checksums_right(tmp_path):
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.create_run("r")
        led.append_evals("r", [{"step": 1, "task": "arc", "metric": "acc", "value": 0.5}])
        led.append_evals("r", [{"step": 1, "task": "arc", "metric": "acc_stderr", "value": 0.01}])
        led.append_evals("r", [{"step": 1, "task": "arc", "metric": "acc", "value": 0.6}])  # keeps its stderr
        led.append_evals(
            "r",
            [
                {"step": 2, "task": "arc", "metric": "acc_stderr", "value": 0.03},  # no value yet
                {"step": 2, "task": "val", "metric": "loss", "value": float("nan"), "tokens": 7},
            ],
        )
        got = led.evals("r")
        result = check_ledger(led)
    assert result.clean and result.verified_records == 5  # 4 evaluations and the run's (unclaimed) writer claim
    rows = {(r.step, r.task): (r.value, r.stderr) for r in got.itertuples()}
    assert rows[(1, "arc")] == (0.6, 0.01)
    assert rows[(2, "arc")][1] == 0.03 and rows[(2, "arc")][0] != rows[(2, "arc")][0]  # NaN: no value
    assert rows[(2, "val")][0] != rows[(2, "val")][0]


def test_an_older_ledger_gets_checksums_on_upgrade_and_checks_whole(whole, tmp_path, cli_for):
    path = tmp_path / "old.db"
    path.write_bytes(whole.read_bytes())
    with Ledger(path, readonly=True) as led:
        want = check_ledger(led).verified_records
    db = sqlite3.connect(path)  # as a yieldgate before 0010_record_checksums left it
    for table in RECORD_TABLES:
        db.execute(f"ALTER TABLE {table} DROP COLUMN checksum")
    db.execute("DELETE FROM schema_migrations WHERE name = '0010_record_checksums'")
    db.commit()
    db.close()
    out = cli_for(path).json("check")  # a read-only command upgrades it once
    assert out["clean"] is True and out["verified_records"] == want
    damage(path, "evals", "value", f"{A} AND task = 'val' AND step = 300")
    assert "evaluation val/loss at step 300" in cli_for(path)("check", code=2).stdout


def test_a_record_without_a_checksum_is_damaged(whole, tmp_path):
    """Every record has a checksum since migration 0010, and a damaged record header can make SQLite read the last
    column, the checksum, as NULL: a missing one is damage, not "unverified" as a block written before 0006 is."""
    path = tmp_path / "l.db"
    path.write_bytes(whole.read_bytes())
    db = sqlite3.connect(path)
    db.execute(f"UPDATE evals SET checksum = NULL WHERE {A} AND task = 'arc'")
    db.commit()
    db.close()
    with Ledger(path, readonly=True) as led:
        with pytest.raises(BlockDamaged, match="run 'a', evaluation arc/acc at step 300"):
            led.evals("a")
        result = check_ledger(led)
    assert [(d.run, d.problem) for d in result.damaged] == [("a", "evaluation arc/acc at step 300: has no checksum")]
