"""The gate on real probes (issue #44 items 2 and 6): a schedule fault every recipe of a campaign shares decides
nothing between them, and a stage whose runs diverged (a NaN update applied: NaN losses, then NaN evaluations) is
held with its damaged update named. docs/gate.md shows both decisions from these probes.

Two recipes of the gate's probe (`tests/support/gate_cases.py`): the clean two-source recipe, and Milton alone repeated
for 40 epochs (exhausted data); three seeds each, with the warm-up and without it (the shared fault); and three seeds
of the clean recipe with a NaN update applied at step 100. 15 probes of ~3 s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.support import gate_cases as bench
from yieldgate import api
from yieldgate.cli import app
from yieldgate.ledger import Ledger
from yieldgate.probe.trainer import train_probe

pytestmark = pytest.mark.slow  # real trainings: `make test-all`


def _campaign(db: str, campaign: str, **faults: Any) -> None:
    two, one = bench.resolve_recipe(bench.TWO), bench.resolve_recipe(bench.ONE)
    repeat: dict[str, Any] = {"repeat_source": ("milton", 40.0)}
    for seed in range(3):
        for name, recipe, own in (("two", two, {}), ("repeat40", one, repeat)):
            run = f"{campaign}/{name}/s{seed}"
            train_probe(recipe, bench.probe_config(seed, **own, **faults), run=run, ledger=db)
            with Ledger(db) as led:
                led.set_meta(run, "probe", {"campaign": campaign, "recipe": name, "seed": seed, "tokens": 150_000})


@pytest.fixture(scope="module")
def probes(tmp_path_factory) -> Path:
    db = str(tmp_path_factory.mktemp("conditions") / "probes.db")
    _campaign(db, "warm")
    _campaign(db, "cold", no_warmup=True)
    two = bench.resolve_recipe(bench.TWO)
    for seed in range(3):
        train_probe(two, bench.probe_config(seed, diverge_at_step=100), run=f"diverged/s{seed}", ledger=db)
    return Path(db)


def test_a_schedule_fault_every_recipe_shares_leaves_the_decisions_as_they_are(probes):
    """Without a warm-up on every probe the clean recipe is still approved and the exhausted one rejected (before,
    the clean one was held on `schedule` while the other's finding could fall below the confidence bar); the fault
    is said once, as shared."""
    for recipe, want in (("two", "approve"), ("repeat40", "reject")):
        warm = api.gate(f"warm/{recipe}", ledger=str(probes), policy=str(bench.POLICY), record=False)
        cold = api.gate(f"cold/{recipe}", ledger=str(probes), policy=str(bench.POLICY), record=False)
        assert warm.decision == cold.decision == want, (warm.rationale, cold.rationale)
        (said,) = [c for c in cold.checks if c.name == "shared condition"]
        causes, rest = said.detail.split(" on every recipe of campaign ", 1)
        assert "schedule" in causes.split(" and ") and rest.startswith("cold (2 recipes)"), said.detail
        # a stall every probe shares (a machine busy with other work) is set aside alike, with or without warm-up
        assert not [c for c in warm.checks if c.name == "shared condition" and "schedule" in c.detail]


def test_a_diverged_stage_is_held_with_its_damaged_update_named(probes, tmp_path):
    """NaN losses from step 100, NaN evaluations after: a hold naming the damaged update, stored, exit 3 under
    --strict (before: a traceback, exit 1, nothing stored)."""
    ledger = tmp_path / "copy.db"
    ledger.write_bytes(probes.read_bytes())
    out = CliRunner().invoke(
        app, ["--ledger", str(ledger), "gate", "diverged/s*", "--policy", str(bench.POLICY), "--strict"]
    )
    assert out.exit_code == 3, out.output
    (stored,) = api.decisions("diverged/s*", ledger=str(ledger))
    assert stored["decision"] == "hold" and "open damaged_update diagnosis" in stored["rationale"]
    found = api.diagnose("diverged/s0", ledger=str(ledger), store=False).findings
    assert any("nonfinite_eval" in f.detector for f in found if f.cause == "damaged_update")
