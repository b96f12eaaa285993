"""What must not change a decision (issue #44 item 5): renaming the recipes or runs, reordering the seeds, the loss in
bits instead of nats (with the policy's thresholds in the same unit), another evaluation cadence where both resolve
the question, and a default written out or left out of a manifest. Each is a property over constructed runs
(`tests/support/gate_ledger.py`) or generated manifests; the gate's own rules are pinned in tests/test_gate_rules.py.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from tests.support.gate_ledger import POLICY, Probe, campaign, power_law, turning
from yieldgate import api
from yieldgate.manifest import Hardware, Manifest, ModelConfig, Optimisation, diff

RECIPES = {
    "good": Probe(curve=power_law()),
    "bad": Probe(curve=turning(), train=power_law(floor=1.5)),
    "slow": Probe(curve=power_law(drop=60)),
}
BASELINE = {"good": "approve", "bad": "reject", "slow": "reject"}


def decisions(path: Path, names: dict[str, str], policy: Path = POLICY, name: str = "camp") -> dict[str, str]:
    """Each recipe's decision, keyed by its name in RECIPES (`names`: RECIPES' name -> the name it was written as)."""
    return {
        recipe: api.gate(f"{name}/{written}", ledger=str(path), policy=str(policy), record=False).decision
        for recipe, written in names.items()
    }


def with_phases(probe: Probe, phases: list[int]) -> list[Probe]:
    """One probe per seed, each drawing its noise from its own phase."""
    return [dataclasses.replace(probe, phase=phase) for phase in phases]


@pytest.mark.slow
def test_the_campaign_decides_approve_reject_reject(tmp_path):
    path = campaign(tmp_path / "base.db", {r: with_phases(p, [0, 1, 2]) for r, p in RECIPES.items()})
    assert decisions(path, {r: r for r in RECIPES}) == BASELINE


@pytest.mark.slow
@settings(max_examples=3, deadline=None, derandomize=True)
@given(
    names=st.lists(
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12),
        min_size=4,
        max_size=4,
        unique=True,
    ),
    order=st.permutations([0, 1, 2]),
)
def test_renaming_recipes_and_campaign_and_reordering_seeds_change_no_decision(tmp_path_factory, names, order):
    """The same runs under other recipe and campaign names, their seeds numbered in another order: the same
    decisions."""
    folder = tmp_path_factory.mktemp("renamed")
    renamed = dict(zip(RECIPES, names[:3], strict=True))
    path = campaign(
        folder / "r.db",
        {renamed[r]: with_phases(p, [order[0], order[1], order[2]]) for r, p in RECIPES.items()},
        name=names[3],
    )
    assert decisions(path, renamed, name=names[3]) == BASELINE


def scaled_policy(tmp_path: Path, factor: float) -> Path:
    spec = yaml.safe_load(POLICY.read_text())
    spec["requirements"]["min_yield_per_btok"] *= factor
    spec["requirements"]["regression_tolerance"] *= factor
    path = tmp_path / "scaled.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.slow
def test_the_loss_in_bits_instead_of_nats_changes_no_decision(tmp_path):
    """Every loss divided by ln 2 and the policy's thresholds with it: the gate holds no constant in nats of its
    own (a detector's threshold on an absolute loss change would flip a decision here)."""
    bits = 1 / math.log(2)
    probes = {r: with_phases(dataclasses.replace(p, scale=bits), [0, 1, 2]) for r, p in RECIPES.items()}
    path = campaign(tmp_path / "bits.db", probes)
    assert decisions(path, {r: r for r in RECIPES}, scaled_policy(tmp_path, bits)) == BASELINE


@pytest.mark.slow
def test_another_evaluation_cadence_changes_no_decision(tmp_path):
    """Evaluated 24 times instead of 12, where both cadences resolve each recipe: the same decisions."""
    path = campaign(
        tmp_path / "dense.db", {r: with_phases(dataclasses.replace(p, evals=24), [0, 1, 2]) for r, p in RECIPES.items()}
    )
    assert decisions(path, {r: r for r in RECIPES}) == BASELINE


SECTIONS: dict[str, type[BaseModel]] = {"model": ModelConfig, "optimisation": Optimisation, "hardware": Hardware}


def defaults(section: type[BaseModel]) -> dict[str, Any]:
    return {k: f.default for k, f in section.model_fields.items() if f.default is not None and not callable(f.default)}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_default_written_out_or_left_out_is_no_difference(data):
    """Issue #44 item 5: `hardware: {}` beside no hardware section read as seven confounders in `compare`. Any
    subset of the defaulted sections' defaults, written out or left out, section absent or present: no difference;
    a value other than the default still is one."""
    written: dict[str, Any] = {}
    for name, section in SECTIONS.items():
        mode = data.draw(st.sampled_from(["absent", "empty", "some"]), label=name)
        if mode == "empty":
            written[name] = {}
        elif mode == "some":
            keys = data.draw(st.lists(st.sampled_from(sorted(defaults(section))), unique=True), label=f"{name} keys")
            written[name] = {k: defaults(section)[k] for k in keys}
    source = {"name": "web"} | ({"shuffled_share": 0.0} if data.draw(st.booleans(), label="shuffled") else {})
    a = Manifest.model_validate({"data": {"sources": [{"name": "web"}]}})
    b = Manifest.model_validate({"data": {"sources": [source]}, **written})
    assert diff(a, b) == [] and diff(b, a) == []
    changed = Manifest.model_validate({**b.canonical(), "optimisation": {"precision": "bf16"}})
    assert [d.field for d in diff(a, changed)] == ["optimisation.precision"]


def test_compare_lists_no_confounder_for_a_default_written_out(tmp_path):
    """End to end: two runs whose manifests differ only by defaults written out have no confounder in `compare`."""
    from tests.support.gate_ledger import write_probe
    from yieldgate import Ledger

    path = tmp_path / "c.db"
    with Ledger(path) as led:
        write_probe(led, "a", "r", 0, Probe(curve=power_law()))
        write_probe(
            led, "b", "r", 0, Probe(curve=power_law(), manifest={"model": {"architecture": "decoder_transformer"}})
        )
        write_probe(led, "c", "r", 1, Probe(curve=power_law(), manifest={"hardware": {"tensor_parallel": 1}}))
    assert api.compare("a", "b", ledger=str(path)).confounders == []
    assert api.compare("a", "c", ledger=str(path)).confounders == []


@pytest.mark.parametrize("field", ["model", "optimisation", "hardware"])
def test_an_empty_section_is_its_defaults(field):
    assert diff(Manifest(), Manifest.model_validate({field: {}})) == []
