"""Damage to a ledger file: block checksums on every read, and `check_ledger` / `yieldgate check`."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import yieldgate.ledger.checksum
from tests.support.reliability import check
from tests.test_checksums import CASES, add_every_kind, damage
from tests.test_checksums import build as build_every_kind
from yieldgate.errors import BlockDamaged, YieldgateError
from yieldgate.ledger import Ledger
from yieldgate.ledger.check import check_ledger

RUNS = {"a": 3000, "b": 600}


def build(path: Path) -> None:
    """Two runs as a Tracker leaves them: 100-step flushes (compacted into ~256-step blocks), core columns with a
    NaN loss per flush, two extras; and every other kind of record (`test_checksums.add_every_kind`)."""
    rng = np.random.default_rng(0)
    with Ledger(path) as led:
        for run, steps in RUNS.items():
            led.create_run(run)
            for start in range(1, steps + 1, 100):
                s = np.arange(start, start + 100)
                loss = 3.0 / np.sqrt(s) + rng.normal(0, 0.01, 100)
                loss[7] = np.nan
                led.append_steps(
                    run,
                    {
                        "step": s,
                        "tokens": s * 4096.0,
                        "wall_s": s * 0.1,
                        "loss": loss,
                        "lr": np.full(100, 3e-4),
                        "grad_norm": rng.random(100),
                        "signals/gns": rng.random(100),
                        "tokens/web": s * 2048.0,
                    },
                )
        add_every_kind(led)


def reads(path: Path) -> dict:
    """Every number a user reads of the runs: the runs table (statuses, counts, notes, tags, last evaluations), core
    columns, extras, evaluations, meta, manifests, events, decisions and campaigns (as text, to compare exactly)."""
    with Ledger(path, readonly=True) as led:
        out = {
            "runs": led.runs().drop(columns=["updated_at", "heartbeat_at"]).astype(str),
            "events": led.events().astype(str),
            "decisions": led.decisions().astype(str),
            "campaign": pd.DataFrame({"v": [repr(led.campaign("sweep"))]}),
        }
        for run in RUNS:
            out[run] = led.steps(run, nullable=True)
            out[f"{run}/extras"] = led.extras(run)
            out[f"{run}/evals"] = led.evals(run)
            manifest = led.manifest(run)
            out[f"{run}/meta"] = pd.DataFrame({"v": [repr(led.meta(run)), manifest and manifest.to_json()]})
    return out


def flip_outcomes(tmp_path: Path, trials: int, seed: int, *, checked: bool = True) -> Counter:
    original = tmp_path / "original.db"
    if not original.exists():
        build(original)
    want = reads(original)
    data = original.read_bytes()
    rnd = random.Random(seed)
    outcomes: Counter = Counter()
    for i in range(trials):
        damaged = bytearray(data)
        damaged[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
        path = tmp_path / f"flip{i}.db"
        path.write_bytes(bytes(damaged))
        try:
            got = reads(path)
        except YieldgateError:
            outcomes["refused on read"] += 1  # SQLite's own error, or a checksum: one LedgerError
        except (TypeError, ValueError, KeyError):  # a damaged JSON body read as it lies, with checksums not checked
            if checked:
                raise
            outcomes["traceback"] += 1
        else:
            if got.keys() == want.keys() and all(got[k].equals(want[k]) for k in want):
                outcomes["no number changed"] += 1
            else:
                try:
                    with Ledger(path, readonly=True) as led:
                        caught = not check_ledger(led).clean
                except YieldgateError:
                    caught = True
                outcomes["caught by check" if caught else "numbers changed, no error"] += 1
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    return outcomes


@pytest.mark.slow  # hundreds of flips, each read back through every command path: the full tier
def test_a_flipped_bit_is_refused_or_changes_no_number(tmp_path, monkeypatch):
    trials = 300
    outcomes = flip_outcomes(tmp_path, trials, seed=1)
    assert outcomes["numbers changed, no error"] == 0, outcomes
    assert sum(outcomes.values()) == trials  # every other exception (a traceback) would have failed the test
    # The same flips with the checksums not checked, as before they existed: most change numbers silently.
    monkeypatch.setattr(yieldgate.ledger.checksum, "block_ok", lambda *a, **k: None)
    monkeypatch.setattr("yieldgate.ledger.check.block_ok", lambda *a, **k: None)
    monkeypatch.setattr(yieldgate.ledger.checksum, "record_ok", lambda *a, **k: None)
    monkeypatch.setattr("yieldgate.ledger.check.record_ok", lambda *a, **k: None)
    unchecked = flip_outcomes(tmp_path, trials, seed=1, checked=False)
    assert unchecked["numbers changed, no error"] > trials / 2, unchecked
    print(f"checked: {dict(outcomes)}; unchecked: {dict(unchecked)}")
    check(
        "single bit flipped at a random offset of a ledger file holding every kind of record (300 trials)",
        "each flip is refused on read (SQLite's error, or a block's or record's checksum naming the run and its "
        "steps or record) or found by `yieldgate check`, or changes no number; unchecked, over half changed "
        "numbers with no error",
        "0 numbers read wrong",
    )


def _damage_one_block(path: Path, run: str) -> tuple[int, int]:
    db = sqlite3.connect(path)
    block_id, first, last, data = db.execute(
        "SELECT b.id, b.first_step, b.last_step, b.data FROM step_blocks b JOIN runs r ON r.id = b.run_id "
        "WHERE r.name = ? ORDER BY b.first_step LIMIT 1 OFFSET 1",
        (run,),
    ).fetchone()
    broken = bytearray(data)
    broken[len(data) // 2] ^= 0x10  # one bit of one float
    db.execute("UPDATE step_blocks SET data = ? WHERE id = ?", (bytes(broken), block_id))
    db.commit()
    db.close()
    return first, last


def test_a_damaged_block_is_an_error_naming_run_and_steps_and_check_reports_it(tmp_path, cli_for):
    path = tmp_path / "l.db"
    build(path)
    cli = cli_for(path)
    assert cli.json("check")["clean"] is True
    first, last = _damage_one_block(path, "a")
    with Ledger(path, readonly=True) as led:
        with pytest.raises(BlockDamaged, match=rf"run 'a', core step records of steps {first}-{last}: .*checksum"):
            led.steps("a")
        assert len(led.steps("b")) == RUNS["b"]  # another run reads as before
        result = check_ledger(led)
    assert not result.clean and result.integrity == []  # SQLite sees a well-formed file: only the checksum knows
    assert [(d.run, d.key, d.first_step, d.last_step) for d in result.damaged] == [("a", None, first, last)]
    out = cli("check", "--json", code=2)
    assert '"clean": false' in out.stdout and f'"first_step": {first}' in out.stdout
    assert f"damaged: run 'a' steps {first}-{last}" in cli("check", code=2).stdout
    assert cli.json("check", "b")["clean"] is True


def test_blocks_written_before_checksums_read_as_before_and_check_says_unverified(tmp_path, cli_for):
    path = tmp_path / "old.db"
    build(path)
    want = reads(path)
    db = sqlite3.connect(path)
    db.execute("UPDATE step_blocks SET checksum = NULL")
    db.execute("UPDATE extra_blocks SET checksum = NULL WHERE run_id = (SELECT id FROM runs WHERE name = 'b')")
    db.commit()
    db.close()
    got = reads(path)
    assert all(got[k].equals(want[k]) for k in want)
    out = cli_for(path).json("check")
    assert out["clean"] is True and out["unverified"]["a"] > 0 and out["unverified"]["b"] > out["unverified"]["a"]
    assert out["verified_blocks"] > 0  # run a's extras still carry theirs


def test_check_of_a_missing_file_is_one_line(tmp_path, cli_for):
    result = cli_for(tmp_path / "none.db")("check", code=2)
    assert result.stderr.startswith("error: ") and "no ledger file there" in result.stderr


def test_the_quick_check_of_a_file_that_never_stands_still_ends(tmp_path, monkeypatch):
    """A header problem is looked at again while the file moves (another process checkpointing); one whose
    reading changes every time is reported after ten times the settling time, not waited on for ever."""
    import itertools
    import time

    import yieldgate.ledger.file as ledger_file

    path = tmp_path / "moving.db"
    path.write_bytes(b"x" * 4096)
    counter = itertools.count()
    monkeypatch.setattr(ledger_file, "_header_problem", lambda p, size: f"reading {next(counter)}")
    start = time.monotonic()
    assert ledger_file.file_problem(path, settle_s=0.05).startswith("reading ")
    assert time.monotonic() - start < 2


def test_a_flipped_bit_in_each_kind_of_record_reads_no_wrong_number(tmp_path):
    """One bit flipped in each kind of stored record (`test_checksums.CASES`): each is refused on read and found by
    `check`, so no evaluation, status, note, event or decision is read wrong."""
    whole = tmp_path / "whole.db"
    build_every_kind(whole)
    wrong = 0
    for i, (table, column, where, _, _, read) in enumerate(CASES):
        path = tmp_path / f"flip{i}.db"
        path.write_bytes(whole.read_bytes())
        damage(path, table, column, where)
        with Ledger(path, readonly=True) as led:
            try:
                read(led)
            except BlockDamaged:
                pass
            else:
                wrong += 1
            wrong += check_ledger(led).clean
    assert wrong == 0
    check(
        f"one bit flipped inside a stored record ({len(CASES)} cases: evaluations, run statuses, names, sources, "
        "meta, notes, manifests, tags, events, decisions, campaigns)",
        "each is refused on read (`BlockDamaged` naming the run and the record) and reported by `yieldgate check`, "
        "exit 2: `damaged: run 'a': evaluation val/loss at step 300: fails its checksum`",
        "0 numbers read wrong",
    )
