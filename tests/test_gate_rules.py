"""The gate's rules pinned on constructed ledgers (issue #44): each requirement of the policy has a case whose answer
changes when the rule is mutated (the approval read off the forecast's point instead of its lower bound, the reject
off the point instead of the upper bound, the regression check dropped), a condition every recipe shares decides
nothing between them, and a diverged stage is held with its damaged update named, never a traceback.

The probes are `tests/support/gate_ledger.py`'s: three seeds of known curves. At the example policy's pilot stage the
clean recipe's forecast yield is 645 per billion tokens, its 80% interval [615, 676] (`test_the_clean_forecast_is_
where_the_thresholds_below_are_set`), so thresholds of 630 and 660 fall between its bounds and its point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tests.support.gate_ledger import POLICY, Probe, campaign, no_warmup, power_law, turning
from yieldgate import api
from yieldgate.cli import app
from yieldgate.gate.draft import RecordedDecision

GOOD = Probe(curve=power_law())
BAD = Probe(curve=turning(), train=power_law(floor=1.5))
"""Data exhausted: the held-out loss turns up after 60k tokens while the training loss keeps falling."""
SLOW = Probe(curve=power_law(drop=60))
"""A recipe that learns a third as much per token: its forecast is below the bar."""


def policy(tmp_path: Path, **requirements: Any) -> Path:
    """The example policy with `requirements` over its own."""
    spec = yaml.safe_load(POLICY.read_text())
    spec["requirements"].update(requirements)
    path = tmp_path / f"policy-{len(list(tmp_path.glob('policy-*')))}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> Path:
    return campaign(tmp_path_factory.mktemp("gate") / "g.db", {"good": GOOD, "bad": BAD, "slow": SLOW})


def decide(ledger: Path, target: str, policy_path: Path = POLICY) -> RecordedDecision:
    return api.gate(target, ledger=str(ledger), policy=str(policy_path), record=False)


def check(decision, name: str):
    (found,) = [c for c in decision.checks if c.name == name]
    return found


def test_the_clean_forecast_is_where_the_thresholds_below_are_set(ledger):
    d = decide(ledger, "camp/good")
    fc = d.evidence["forecast"]
    assert d.decision == "approve", d.rationale
    lo, hi = fc["interval"]
    assert lo < 630 < fc["yield_per_btok"] < 660 < hi, (fc["yield_per_btok"], lo, hi)


def test_approval_reads_the_lower_bound_not_the_point(ledger, tmp_path):
    """Point 645 above the bar of 630, lower bound 615 below it: hold with more seeds named. Read off the point, it
    would approve."""
    d = decide(ledger, "camp/good", policy(tmp_path, min_yield_per_btok=630))
    assert d.decision == "hold" and check(d, "lower bound above threshold").passed is False
    assert "the interval is too wide" in d.rationale and "more seed" in (d.what_to_run_next or "")


def test_reject_reads_the_upper_bound_not_the_point(ledger, tmp_path):
    """Point 645 below the bar of 660, upper bound 676 above it: a hold, not a reject; above 676 a reject."""
    d = decide(ledger, "camp/good", policy(tmp_path, min_yield_per_btok=660))
    assert d.decision == "hold" and check(d, "optimistic bound above threshold").passed is True
    d = decide(ledger, "camp/good", policy(tmp_path, min_yield_per_btok=700))
    assert d.decision == "reject" and check(d, "optimistic bound above threshold").passed is False


def test_exhausted_and_slow_data_are_rejected(ledger):
    bad, slow = decide(ledger, "camp/bad"), decide(ledger, "camp/slow")
    assert bad.decision == "reject" and "(the loss has turned up)" in bad.rationale
    assert slow.decision == "reject" and "the data is exhausted for this purpose" in slow.rationale


def test_too_few_seeds_hold(ledger, tmp_path):
    d = decide(ledger, "camp/good", policy(tmp_path, min_seeds=4))
    assert d.decision == "hold" and d.rationale.endswith("3 seeds, the policy needs 4 for an interval")


def test_tokens_per_parameter_hold_below_the_policy(ledger, tmp_path):
    """The pilot's 500,000 tokens give the 31,000-parameter model 16 per parameter."""
    assert check(decide(ledger, "camp/good", policy(tmp_path, min_tokens_per_param=16)), "tokens per parameter").passed
    d = decide(ledger, "camp/good", policy(tmp_path, min_tokens_per_param=17))
    assert d.decision == "hold" and "would leave the model undertrained (16.1 tokens per parameter)" in d.rationale


def test_a_regression_holds_and_its_tolerance_lets_it_pass(tmp_path):
    """The hard slice ends 0.2 worse than its best: held at a tolerance of 0.1, approved at 0.3."""
    hard = Probe(curve=power_law(), hard=lambda step: 2.0 + (0.2 if step > 100 else 0.0))
    led = campaign(tmp_path / "r.db", {"good": hard})
    d = decide(led, "camp/good")
    assert d.decision == "hold" and "hard/archaic/bpb regressed by 0.2000 (tolerance 0.1)" in d.rationale
    assert decide(led, "camp/good", policy(tmp_path, regression_tolerance=0.3)).decision == "approve"


def test_a_source_passed_past_max_epochs_holds(tmp_path):
    """5,000,000 unique tokens pass the pilot's 500,000 once; 100,000 pass it 5 times, past the policy's 4."""
    small = Probe(curve=power_law(), manifest={"data": {"sources": [{"name": "tiny", "unique_tokens": 100_000}]}})
    led = campaign(tmp_path / "e.db", {"good": small})
    d = decide(led, "camp/good")
    assert d.decision == "hold" and check(d, "data supply").passed is False
    assert "pilot would pass tiny 5 times (the policy allows 4)" in d.rationale


def test_a_condition_every_recipe_shares_decides_nothing_between_them(tmp_path):
    """Issue #44 item 2: the same schedule fault (no warm-up) on every recipe of a campaign leaves each recipe's
    decision as it is without it (approve, reject, reject), and is said once; the same fault on one recipe alone
    still holds that recipe."""
    clean = campaign(tmp_path / "clean.db", {"good": GOOD, "bad": BAD, "slow": SLOW})
    shared = campaign(
        tmp_path / "shared.db",
        {name: Probe(**{**p.__dict__, "lr": no_warmup}) for name, p in (("good", GOOD), ("bad", BAD), ("slow", SLOW))},
    )
    want = {r: decide(clean, f"camp/{r}").decision for r in ("good", "bad", "slow")}
    assert want == {"good": "approve", "bad": "reject", "slow": "reject"}
    for recipe, decision in want.items():
        d = decide(shared, f"camp/{recipe}")
        assert d.decision == decision, (recipe, d.rationale)
        said = check(d, "shared condition")
        assert said.passed is None and said.detail.startswith("schedule on every recipe of campaign camp (3 recipes)")
        assert {"cause": "schedule", "detector": "no_warmup"} in d.evidence["shared_conditions"]["conditions"]
    alone = campaign(tmp_path / "alone.db", {"good": Probe(**{**GOOD.__dict__, "lr": no_warmup}), "slow": SLOW})
    d = decide(alone, "camp/good")
    assert d.decision == "hold" and "open schedule diagnosis" in d.rationale


@pytest.mark.parametrize(
    "probe",
    [
        Probe(curve=power_law(), nan_from=100),  # the training loss goes NaN, then the evaluations
        Probe(curve=power_law(), nan_from=100, nan_evals_only=True),  # finite training, NaN held-out losses
    ],
    ids=["diverged", "nan-evaluations"],
)
def test_a_diverged_stage_is_held_with_its_damaged_update_named(tmp_path, probe):
    """Issue #44 item 6: it ended in a traceback (exit 1, no decision stored). Now a hold naming the damaged update,
    stored (`decisions` lists it), exit 3 under --strict; `diagnose` names the NaN evaluations."""
    led = campaign(tmp_path / "n.db", {"div": probe, "good": GOOD})
    runner = CliRunner()
    out = runner.invoke(app, ["--ledger", str(led), "gate", "camp/div", "--policy", str(POLICY), "--strict"])
    assert out.exit_code == 3 and out.exception is None or isinstance(out.exception, SystemExit), out.output
    (stored,) = api.decisions("camp/div", ledger=str(led))
    assert stored["decision"] == "hold" and "open damaged_update diagnosis" in stored["rationale"]
    assert "evaluated val/loss to NaN or infinity" in " ".join(c["detail"] for c in stored["evidence"]["checks"])
    found = api.diagnose("camp/div/s0", ledger=str(led), store=False).findings
    damaged = [f for f in found if f.cause == "damaged_update"]
    assert damaged and "nonfinite_eval" in damaged[0].detector.split("+")
    assert damaged[0].start_step == (110 if probe.nan_evals_only else 100)  # the first NaN evaluation, or loss


def test_one_gate_call_reads_each_run_s_steps_at_most_once(tmp_path, monkeypatch):
    """Issue #44, typed evidence read once: one gate call read a target run's steps six times (the detectors, the
    forecast's stable points, tokens/s, the stage's price, joules per token); the evidence is read once
    (`TargetEvidence.read`) and handed to pure functions. The sibling recipes' runs, read for the shared conditions,
    are read once too."""
    from collections import Counter

    from yieldgate.ledger import Ledger

    reads: Counter[str] = Counter()
    steps = Ledger.steps

    def counted(self, run, *args, **kwargs):
        reads[run] += 1
        return steps(self, run, *args, **kwargs)

    led = campaign(tmp_path / "reads.db", {"good": GOOD, "slow": SLOW})
    monkeypatch.setattr(Ledger, "steps", counted)
    assert decide(led, "camp/good").decision == "approve"
    assert set(reads) == {f"camp/{r}/s{s}" for r in ("good", "slow") for s in range(3)}
    assert max(reads.values()) == 1, reads
