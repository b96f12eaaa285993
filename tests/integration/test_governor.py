"""The gate inside the run (issue #48) on real tiny trainings of the built-in corpus, through a plain loop, the Hugging
Face `Trainer` (a GPT-2 built from a `GPT2Config` in code) and Lightning (`tests/support/governed.py`):

- exhausted data (Milton cut to what the run passes 40 times: the held-out loss bottoms out near 150-190k tokens and
  turns up) is held at a stage boundary once its forecast yield has fallen below the bar, asked to stop, its saved
  compute stated and stored, its status `held`, and `yieldgate gate RUN` offline reaches the same decision;
- a healthy run (both sources, learning well above the bar) is never held; over 20 seeds the false holds are counted;
- a plateau at a constant LR (too high an LR for 4-sequence batches: the loss sits at the LR's noise floor) is held
  with the cause not known and the cooldown probe named, never called exhausted data; the same run with a decaying LR
  is not held;
- a run whose update goes NaN is held at the next evaluation with the damaged update named;
- the governor adds nothing to the training thread: the loop makes as many host syncs with a policy as without;
- `YIELDGATE_POLICY` governs a probe the probe trainer runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from tests.support import gate_cases
from tests.support import governed as g
from yieldgate.cli import app
from yieldgate.ledger import Ledger
from yieldgate.probe.config import Faults

pytestmark = pytest.mark.slow  # real trainings: `make test-all`

FRAMEWORKS = ["plain", "hf", "lightning"]
STAGES = (150_000, 225_000, 300_000, 450_000)
BAR = 250.0
EXHAUSTED = g.Case(recipe=gate_cases.ONE, faults=Faults(repeat_source=("milton", 40.0)))
HEALTHY = g.Case()
PLATEAU = g.Case(schedule="constant", lr=0.05, batch=4, tokens=300_000)
"""A constant LR too high for batches of 4 sequences: the loss reaches the LR's noise floor by ~60k tokens."""
PLATEAU_STAGES = (100_000, 200_000, 300_000)
PLATEAU_BAR = 100.0


def train(framework: str, case: g.Case, tmp: Path, run: str, policy: Any) -> g.Trained:
    ledger = tmp / "runs.db"
    if framework == "plain":
        return g.train(case, run=run, ledger=ledger, policy=policy)
    if framework == "hf":
        pytest.importorskip("transformers")
        return g.train_hf(case, run=run, ledger=ledger, policy=policy, out=tmp / "hf")
    pytest.importorskip("lightning")
    return g.train_lightning(case, run=run, ledger=ledger, policy=policy)


def decisions(tmp: Path, run: str) -> list[dict[str, Any]]:
    with Ledger(tmp / "runs.db", readonly=True) as led:
        return led.decisions(run).to_dict("records")


def offline(tmp: Path, run: str, policy: Path) -> dict[str, Any]:
    out = CliRunner().invoke(app, ["--ledger", str(tmp / "runs.db"), "gate", run, "--policy", str(policy), "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_exhausted_data_is_held_with_its_saved_compute_and_the_offline_gate_agrees(framework, tmp_path):
    policy = g.policy(tmp_path, bar=BAR, stages=STAGES)
    trained = train(framework, EXHAUSTED, tmp_path, "exhausted", policy)
    assert trained.stopped and trained.faults == 0
    stored = decisions(tmp_path, trained.run)
    *earlier, held = stored
    assert all(d["decision"] == "approve" for d in earlier)
    assert held["decision"] in ("hold", "reject") and held["id"] == trained.decision.id
    evidence = held["evidence"]
    boundary = max(t for t in STAGES if t <= evidence["reached_tokens"])  # decided at a stage boundary...
    assert evidence["reached_tokens"] - boundary < 30_000  # ...at the first evaluation past it
    assert evidence["forecast"]["yield_per_btok"] < BAR  # once the forecast yield had fallen below the bar
    unspent = evidence["unspent"]
    assert unspent["tokens"] >= 0.3 * STAGES[-1] and unspent["device_hours"] > 0 and unspent["usd"] > 0
    assert trained.steps < trained.planned * 0.75  # the loop stopped a few steps after (the gate decides off-thread)
    with Ledger(tmp_path / "runs.db", readonly=True) as led:
        (record,) = led.run_records(trained.run)
        governor = led.meta(trained.run)["governor"]
    assert (record["status"], record["recorded_status"]) == ("held", "finished")
    assert governor["held"]["decision"] == held["id"] and governor["on_hold"] == "stop"
    again = offline(tmp_path, trained.run, policy)  # read as the run stood when held: the same decision, exactly
    assert (again["decision"], again["next_stage"], again["rationale"]) == (
        held["decision"],
        held["stage"],
        held["rationale"],
    )


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_healthy_run_is_not_held(framework, tmp_path):
    policy = g.policy(tmp_path, bar=BAR, stages=STAGES)
    trained = train(framework, HEALTHY, tmp_path, "healthy", policy)
    assert not trained.stopped and trained.steps == trained.planned and trained.faults == 0
    stored = decisions(tmp_path, trained.run)
    assert [d["stage"] for d in stored] == ["s1", "s2", "s3"] and {d["decision"] for d in stored} == {"approve"}
    with Ledger(tmp_path / "runs.db", readonly=True) as led:
        assert led.run_records(trained.run)[0]["status"] == "finished"


def test_twenty_healthy_seeds_are_held_at_most_once(tmp_path):
    """Issue #48: false holds <= 1 in 20, as measured (docs/gate.md states the count)."""
    policy = g.policy(tmp_path, bar=BAR, stages=STAGES)
    held = [seed for seed in range(20) if train("plain", g.Case(seed=seed), tmp_path, f"s{seed}", policy).stopped]
    print(f"false holds: {len(held)} of 20 healthy seeds ({held})")
    assert len(held) <= 1, held


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_constant_lr_plateau_is_held_as_not_known_and_its_decaying_twin_is_not(framework, tmp_path):
    """The probe's GPT at LR 0.05 sits at the constant LR's noise floor from ~60k tokens and keeps learning under a
    linear decay. GPT-2 (the Hugging Face case) has no such twin here: from LR 0.03 to 0.07 on these batches it either
    keeps learning at a constant LR or sticks at the unigram loss whatever the schedule (its decaying twin is
    rejected, rightly: it learns nothing), so its case is the stuck run at 0.07 held as a stall of unknown cause."""
    policy = g.policy(tmp_path, bar=PLATEAU_BAR, stages=PLATEAU_STAGES)
    case = PLATEAU if framework != "hf" else g.Case(**{**PLATEAU.__dict__, "lr": 0.07})
    flat = train(framework, case, tmp_path, "constant", policy)
    assert flat.stopped and flat.decision.decision == "hold"
    assert "cause not known: the LR's noise floor (schedule) or the data" in flat.decision.rationale
    assert "the cooldown probe" in (flat.decision.what_to_run_next or "")
    assert "the data is exhausted" not in flat.decision.rationale  # a reject's words
    if framework == "hf":
        return
    twin = train(framework, g.Case(**{**PLATEAU.__dict__, "schedule": "linear"}), tmp_path, "linear", policy)
    assert not twin.stopped and twin.steps == twin.planned
    assert {d["decision"] for d in decisions(tmp_path, twin.run)} == {"approve"}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_run_that_goes_nan_is_held_at_the_next_evaluation_with_the_damaged_update_named(framework, tmp_path):
    policy = g.policy(tmp_path, bar=BAR, stages=STAGES)
    trained = train(framework, g.Case(faults=Faults(diverge_at_step=100)), tmp_path, "nan", policy)
    assert trained.stopped and trained.decision.decision == "hold"
    assert "open damaged_update diagnosis" in trained.decision.rationale
    (held,) = [d for d in decisions(tmp_path, trained.run) if d["decision"] != "approve"]
    evals_after = held["evidence"]["reached_tokens"] / g.CONTEXT / 16 - 100
    assert 0 < evals_after <= 450 / 30 + 1  # the first evaluation after the NaN update (one every ~15 steps)
    assert trained.steps < 130  # and the loop stopped within a few steps of it


def _host_syncs(monkeypatch) -> dict[str, int]:
    """Calls that move a tensor to the host, made on the training thread (tests/test_tracker.py's count)."""
    from tests.test_tracker import _count_host_syncs

    return _count_host_syncs(monkeypatch)


def test_a_policy_adds_no_host_sync_to_the_training_thread(tmp_path, monkeypatch):
    """The same loop (with its own evaluations' syncs) makes as many host syncs with a policy, whose gate decides at
    each boundary on the writer's thread, as without one."""
    policy = g.policy(tmp_path, bar=BAR, stages=(50_000, 100_000, 160_000), on_hold="warn")
    counts = []
    for i, governed in enumerate((None, policy)):
        with monkeypatch.context() as m:
            syncs = _host_syncs(m)
            trained = train("plain", g.Case(tokens=160_000, evals=12), tmp_path, f"syncs{i}", governed)
            counts.append(dict(syncs))
        assert trained.steps == trained.planned
    assert counts[0] == counts[1]
    assert len(decisions(tmp_path, "syncs1")) == 2  # the gate did decide, off the training thread


def test_yieldgate_policy_governs_a_probe(tmp_path, monkeypatch):
    """A probe trained by the probe trainer (as `yieldgate probe` runs it) reads its policy from `YIELDGATE_POLICY`
    and stops when held."""
    from yieldgate.probe.trainer import train_probe

    policy = g.policy(tmp_path, bar=BAR, stages=STAGES)
    monkeypatch.setenv("YIELDGATE_POLICY", str(policy))
    cfg = EXHAUSTED.config()
    train_probe(g.resolved(EXHAUSTED.recipe), cfg, run="probe", ledger=str(tmp_path / "runs.db"))
    with Ledger(tmp_path / "runs.db", readonly=True) as led:
        (record,) = led.run_records("probe")
        stored = led.decisions("probe").to_dict("records")
    assert record["status"] == "held" and stored[-1]["decision"] in ("hold", "reject")
    assert record["tokens"] < cfg.tokens * 0.7
