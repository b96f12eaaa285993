"""Failures said where they are read (issue #46, item 10): a campaign with a failed probe exits non-zero, `show` of a
failed probe prints its failure and its output's tail, `campaign NAME` re-checks its probes' records before it prints
the stored ranking, and a probe's `attempts` counts its trainings."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.support.reliability import check
from tests.test_checksums import damage
from yieldgate.cli import app
from yieldgate.ledger import Ledger
from yieldgate.probe.campaign.run import claim_probe


def _invoke(ledger: Path, *args: str, code: int):
    result = CliRunner().invoke(app, ["--ledger", str(ledger), *args])
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


def test_show_of_a_failed_probe_prints_the_failure_and_its_output_s_tail(tmp_path):
    db = tmp_path / "l.db"
    with Ledger(db) as led:
        led.create_run("c/a/s0/t100", status="failed", source="probe")
        led.set_meta("c/a/s0/t100", "error", "the trainer exited with status 3; its output's tail is kept")
        led.set_meta("c/a/s0/t100", "output_tail", "step 1 loss 4.1\nRuntimeError: CUDA out of memory\n")
        led.create_run("fine", status="finished")
    out = " ".join(_invoke(db, "show", "c/a/s0/t100", code=0).stdout.split())
    assert "FAILED: the trainer exited with status 3" in out and "RuntimeError: CUDA out of memory" in out, out
    shown = json.loads(_invoke(db, "show", "c/a/s0/t100", "--json", code=0).stdout)["failure"]
    assert shown == {
        "error": "the trainer exited with status 3; its output's tail is kept",
        "tail": "step 1 loss 4.1\nRuntimeError: CUDA out of memory\n",
    }
    assert json.loads(_invoke(db, "show", "fine", "--json", code=0).stdout)["failure"] is None


@pytest.mark.slow  # the golden ledger's campaign, built: 2 s
def test_campaign_rechecks_its_probes_records_before_printing_the_stored_ranking(tmp_path):
    from tests.test_golden_cli import build_ledger

    db = tmp_path / "l.db"
    build_ledger(db)
    _invoke(db, "campaign", "camp", code=0)  # whole: the stored ranking
    damage(db, "evals", "value", "run_id = (SELECT id FROM runs WHERE name = 'camp/base/s1/t150000') AND step > 0")
    err = _invoke(db, "campaign", "camp", code=2).stderr
    assert err.count("\n") == 1 and "camp/base/s1/t150000" in err and "fails its checksum" in err, err
    check(
        "`yieldgate campaign NAME` after a bit flip in one probe's evaluations",
        "exit 2, one line naming the probe's run and the damaged evaluation; no ranking printed (before: the stored "
        "ranking, as if whole)",
        "0 numbers read wrong",
    )


def test_a_probe_s_attempts_count_its_trainings(tmp_path):
    db = tmp_path / "l.db"
    with Ledger(db) as led:
        for _ in range(3):  # trained, and twice again after it failed
            assert claim_probe(led, "c/a/s0/t100", "k1", {"key": "k1"})
            led.set_status("c/a/s0/t100", "failed")
        assert led.meta("c/a/s0/t100")["attempts"] == 3
        assert claim_probe(led, "c/a/s0/t100", "k2", {"key": "k2"})  # another probe now: its own count
        assert led.meta("c/a/s0/t100")["attempts"] == 1
        led.set_status("c/a/s0/t100", "finished")
        assert not claim_probe(led, "c/a/s0/t100", "k2", {"key": "k2"})  # finished: not trained again
        assert led.meta("c/a/s0/t100")["attempts"] == 1


TRAIN = """
import sys
from yieldgate import Tracker
seed = int(sys.argv[1])
if seed % 2:
    print("loading data ... step 1 loss nan", flush=True)
    raise SystemExit(f"diverged at seed {seed}")
tr = Tracker()
for step in range(1, 4):
    tr.step(tokens=64, loss=3.0 / step)
tr.eval({"val/bpb": 2.0 + seed / 10})
tr.close()
"""


@pytest.mark.slow  # four probes, each a Python process with a Tracker
def test_a_campaign_with_a_failed_probe_exits_non_zero_and_ranks_the_rest(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    spec = {
        "name": "half",
        "recipes": {"a": {"sources": [{"name": "a", "path": "a.jsonl"}]}},
        "seeds": [0, 1, 2, 3],
        "budgets": [100],
        "trainer": {"command": f"{sys.executable} train.py {{seed}}"},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(spec))
    db = tmp_path / "l.db"
    result = _invoke(db, "probe", str(path), "--workers", "2", code=1)
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: campaign 'half': 2 of 4 probe(s) failed; the first, half/a/s1/t100:"), line
    with Ledger(db, readonly=True) as led:
        statuses = {r["name"]: r["status"] for r in led.run_records(totals=False)}
    assert sorted(statuses.values()) == ["failed", "failed", "finished", "finished"], statuses
    out = " ".join(_invoke(db, "show", "half/a/s1/t100", code=0).stdout.split())
    assert "FAILED:" in out and "diverged at seed 1" in out, out
    check(
        "campaign in which 2 of 4 probes fail",
        "the other probes ranked and stored; exit 1 with one line on stderr naming the first failure (before: exit 0 "
        "with 6 of 8 failed); `show` of a failed probe prints its failure and its output's tail",
        "0",
    )
