"""Fields outside the blocks' and records' checksums get their own (issue #46, item 4; `checksum.FIELD_GROUPS`): a
core block's summary (its count, last step, tokens and wall clock, which `runs` sums without decoding the block), a
run's writer claim and heartbeat (liveness, takeover), and the ids of events and decisions. A flip in any of them is
found by `check`, naming the run and what, and refused by the reads that show or decide on it; an older ledger gets
its checksums on upgrade, where the data still vouches for them."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from tests.support.reliability import check
from tests.test_checksums import damage
from yieldgate.errors import BlockDamaged
from yieldgate.ledger import Ledger
from yieldgate.ledger.check import check_ledger
from yieldgate.ledger.owners import Owner


def build(path: Path) -> None:
    """Run `a`: 300 steps of 1 s each (5m00s), claimed by a writer that stamps its heartbeat; an event, a decision."""
    with Ledger(path) as led:
        led.claim_run("a", owner=Owner("node-7", 4242, 1.0, "boot/pid:[1]"))
        for start in range(1, 301, 100):
            steps = list(range(start, start + 100))
            led.append_steps(
                "a", {"step": steps, "tokens": [s * 4096.0 for s in steps], "wall_s": [s * 1.0 for s in steps]}
            )
        led.add_event("a", "diagnosis", {"cause": "schedule"}, start_step=10, end_step=20)
        led.add_decision("model-x", "approve", evidence={"runs": ["a"]}, rationale="holds", run="a")


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fields") / "whole.db"
    build(path)
    return path


# (table, column, which row, what `check` names, a read that must refuse it)
CASES = [
    ("step_blocks", "wall_s_max", "first_step = 201", "summary of core step records", lambda led: led.runs()),
    ("step_blocks", "tokens_max", "first_step = 101", "summary of core step records", lambda led: led.runs()),
    ("step_blocks", "n", "first_step = 1", "summary of core step records", lambda led: led.run_info("a")),
    ("runs", "owner_pid", "name = 'a'", "writer claim and heartbeat", lambda led: led.runs()),
    ("runs", "owner_host", "name = 'a'", "writer claim and heartbeat", lambda led: led.run_info("a")),
    ("runs", "owner_started", "name = 'a'", "writer claim and heartbeat", lambda led: led.remove_runs(["a"])),
    ("runs", "owner_ns", "name = 'a'", "writer claim and heartbeat", lambda led: led.rename_run("a", "b")),
    ("runs", "heartbeat_at", "name = 'a'", "writer claim and heartbeat", lambda led: led.runs()),
    ("events", "id", "1 = 1", "id of event #0", lambda led: led.events("a")),
    ("decisions", "id", "1 = 1", "id of decision #0", lambda led: led.decisions()),
]


@pytest.mark.parametrize(("table", "column", "where", "what", "read"), CASES, ids=[f"{c[0]}.{c[1]}" for c in CASES])
def test_a_flip_outside_blocks_and_records_is_found_and_refused(whole, tmp_path, table, column, where, what, read):
    path = tmp_path / "l.db"
    path.write_bytes(whole.read_bytes())
    with Ledger(path, readonly=True) as led:
        assert check_ledger(led).clean
        duration = led.run_info("a")["duration_s"]
    assert duration == 300.0
    damage(path, table, column, where)
    with Ledger(path) as led:
        result = check_ledger(led)
        assert not result.clean
        # a block's count and tokens are in its own checksum too: both say so
        assert all(d.run == "a" for d in result.damaged) and any(what in d.problem for d in result.damaged)
        with pytest.raises(BlockDamaged, match="fail their checksum"):
            read(led)
    if (table, column) == ("step_blocks", "wall_s_max"):
        check(
            "single bit flipped in a field outside every block's and record's checksum: a block's wall clock "
            "(`wall_s_max`, a run's duration in `runs`), its count or tokens as `runs` sums them, a run's writer "
            "claim or heartbeat, an event's or a decision's id",
            "`check` exits 2 naming the run and the field; `runs`, `show` and every read, rename or removal that "
            "decides on it refuse it (BlockDamaged); before: `runs` showed the flipped duration (5m00s → 4m50s "
            "in the issue) and `check` said whole",
            "0 numbers read wrong",
        )


def test_a_writer_s_heartbeats_and_a_takeover_keep_the_claim_whole(tmp_path):
    path = tmp_path / "l.db"
    me = Owner.this_process()
    with Ledger(path) as led:
        led.claim_run("r", owner=me)
        for _ in range(3):
            led.heartbeat("r", me)
        led.set_status("r", "running")
        gone = Owner(me.host, 2**22 + 17, time.time() - 60)  # a dead writer here: taken over at once
        led.claim_run("s", owner=gone)
        assert led.claim_run("s", owner=me, resume=True, takeover=True)
        assert check_ledger(led).clean


def test_an_older_ledger_gets_the_field_checksums_on_upgrade_unless_its_data_disagrees(whole, tmp_path):
    path = tmp_path / "old.db"
    path.write_bytes(whole.read_bytes())
    db = sqlite3.connect(path)  # as a yieldgate before 0012_more_checksums left it
    db.execute("DROP INDEX step_blocks_summary")
    db.execute("CREATE INDEX step_blocks_summary ON step_blocks (run_id, n, last_step, tokens_max, wall_s_max)")
    for table, column in (("runs", "claim_checksum"), ("step_blocks", "summary_checksum")):
        db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    for table in ("events", "decisions"):
        db.execute(f"ALTER TABLE {table} DROP COLUMN id_checksum")
    db.execute("DELETE FROM schema_migrations WHERE name = '0012_more_checksums'")
    db.execute("UPDATE step_blocks SET wall_s_max = 299.0 WHERE first_step = 201")  # damage before the upgrade
    db.commit()
    db.close()
    with Ledger(path) as led:
        (found,) = check_ledger(led).damaged  # the block's data says 300 s: that summary is not vouched for
        assert found.problem.startswith("summary of core step records") and "has no checksum" in found.problem
        assert (found.first_step, found.last_step) == (201, 300)
