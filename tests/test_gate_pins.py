"""Rules of the code that decides, each pinned where mutation testing (`make mutation-sample`, issue #44 item 11)
found a change that no test told from the rule: which evaluations count as regressions, the governor's end after the
last stage, diagnoses read as the runs stood at a step, and a forecast that cannot be made failing its check."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.support.gate_ledger import Probe, power_law, write_probe
from yieldgate.analysis.compare import RunData
from yieldgate.gate.evidence import regressions
from yieldgate.gate.findings import target_findings
from yieldgate.gate.gate import gate
from yieldgate.gate.live import Governor
from yieldgate.gate.policy import parse_policy
from yieldgate.ledger import Ledger


def _evals(rows: list[tuple[str, str, int, float, bool]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["task", "metric", "step", "value", "higher_is_better"])


def test_a_regression_is_the_last_value_against_the_best_and_never_the_validation_loss():
    """The held-out loss (task `val`, `val/...`) is the yield's, not a regression's: only the hard slices and the
    capability evaluations count, each its final value against its best."""
    evals = _evals(
        [
            *[("val", "loss", s, v, False) for s, v in ((1, 3.0), (2, 2.0), (3, 2.5))],
            *[("val/code", "loss", s, v, False) for s, v in ((1, 3.0), (2, 2.0), (3, 2.6))],
            *[("hard", "bpb", s, v, False) for s, v in ((1, 1.5), (2, 1.0), (3, 1.2), (4, 1.3))],
            *[("arc", "acc", s, v, True) for s, v in ((1, 0.30), (2, 0.42), (3, 0.40), (4, 0.35))],
        ]
    )
    found = regressions([RunData("r", pd.DataFrame(), evals)])
    assert found == {"arc/acc": pytest.approx(0.07), "hard/bpb": pytest.approx(0.3)}


def _ledger(path: Path) -> Path:
    with Ledger(path) as led:
        write_probe(led, "r", "rec", 0, Probe(curve=power_law()))
        led.set_meta("r", "probe", {})
        led.set_status("r", "running")
    return path


def _policy(stages: tuple[int, ...]) -> dict:
    return {
        "name": "pins",
        "version": 1,
        "stages": [{"name": f"s{i}", "tokens": t, "compute_share": 0.2} for i, t in enumerate(stages)],
        "requirements": {"min_yield_per_btok": 250, "min_seeds": 1, "level": 0.8},
    }


def test_past_its_last_stage_the_governor_is_done_and_decides_nothing_more(tmp_path):
    path = _ledger(tmp_path / "l.db")
    governor = Governor.start(_policy((10_000, 20_000)), manifest=None)  # the run trains 150k tokens
    with Ledger(path) as led:
        steps = sorted(set(led.evals("r")["step"].tolist()))
        assert governor.evaluate(led, "r", steps[-1]) is None
        assert governor.done and led.decisions("r").empty


def test_a_diagnosis_stored_of_later_steps_is_not_read_at_an_earlier_one(tmp_path):
    path = _ledger(tmp_path / "l.db")
    with Ledger(path) as led:
        body = {"cause": "schedule", "confidence": 0.9, "detector": "lr_too_high", "advice": "lower it"}
        led.add_event("r", "diagnosis", body, start_step=120, end_step=140)
        later = [f for f in target_findings(led, {"r": None}) if f.get("event") is not None]
        earlier = [f for f in target_findings(led, {"r": None}, upto=100) if f.get("event") is not None]
    assert [(f["cause"], f["start_step"]) for f in later] == [("schedule", 120)]
    assert earlier == []


def test_a_forecast_that_cannot_be_made_fails_its_check(tmp_path):
    """Two evaluations: no forecast can be fitted; the check says so and fails (a hold), never a note."""
    with Ledger(tmp_path / "l.db") as led:
        write_probe(led, "r", "rec", 0, Probe(curve=power_law(), evals=2))
        decision = gate(led, "r", parse_policy(_policy((10_000, 500_000, 900_000))))
    (check,) = [c for c in decision.checks if c.name == "forecast"]
    assert check.passed is False and check.detail.startswith("no forecast: ")
    assert decision.decision == "hold"
