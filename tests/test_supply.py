"""Data supply at a stage (`gate/supply.py`): epochs per source and the worth of repeated tokens."""

from __future__ import annotations

import math
import re

import pytest

from yieldgate.analysis.detectors import R_STAR, effective_tokens
from yieldgate.data.supply import drawn_tokens
from yieldgate.gate.supply import stage_supply, worth
from yieldgate.manifest import parse_manifest


def _recipe(**data):
    return parse_manifest({"data": data}).data


def test_effective_tokens_follow_muennighoff_et_al():
    unique = 1_000_000
    assert effective_tokens(400_000, unique) == 400_000  # within the first epoch every token is new
    # Their headline: 4 epochs are worth nearly as much as new data (here 93%), 40 epochs far less (38%).
    assert effective_tokens(4 * unique, unique) / (4 * unique) == pytest.approx(0.9315, abs=1e-3)
    assert effective_tokens(40 * unique, unique) / (40 * unique) == pytest.approx(0.3793, abs=1e-3)
    assert effective_tokens(1e12, unique) == pytest.approx(unique * (1 + R_STAR))  # the ceiling
    # The worth of one more token after R repetitions is exp(-R / R*): the derivative of the formula.
    for epochs in (1.5, 4, 16, 40):
        d = epochs * unique
        slope = (effective_tokens(d + 1000, unique) - effective_tokens(d - 1000, unique)) / 2000
        assert slope == pytest.approx(math.exp(-(epochs - 1) / R_STAR), rel=1e-4)


def test_drawn_tokens_follow_weights_and_a_staged_curriculum():
    mix = _recipe(sources=[{"name": "web", "weight": 3}, {"name": "code", "weight": 1}])
    assert drawn_tokens(mix, 1000) == {"web": 750, "code": 250}
    staged = _recipe(
        sources=[{"name": "web", "weight": 3}, {"name": "code", "weight": 1}],
        curriculum={"kind": "staged", "stages": [{"until_tokens": 400, "weights": {"code": 1}}]},
    )
    assert drawn_tokens(staged, 300) == {"web": 0, "code": 300}
    assert drawn_tokens(staged, 1000) == {"web": 450, "code": 400 + 150}  # the recipe's weights after the stages
    # Stages at shares of the run scale with its budget: the last fifth from code, at 1,000 tokens as at 10,000.
    anneal = _recipe(
        sources=[{"name": "web", "weight": 3}, {"name": "code", "weight": 1}],
        curriculum={
            "kind": "staged",
            "stages": [
                {"until_share": 0.8, "weights": {"web": 3, "code": 1}},
                {"until_share": 1.0, "weights": {"code": 1}},
            ],
        },
    )
    assert drawn_tokens(anneal, 1000) == pytest.approx({"web": 600, "code": 200 + 200})
    assert drawn_tokens(anneal, 10_000) == pytest.approx({"web": 6000, "code": 2000 + 2000})


def test_a_stage_names_each_sources_epochs_and_the_worth_of_its_new_tokens():
    recipe = _recipe(
        sources=[
            {"name": "big", "weight": 0.5, "unique_tokens": 10_000_000},
            {"name": "scarce", "weight": 0.5, "unique_tokens": 100_000},
        ]
    )
    rows = {r.source: r for r in stage_supply(recipe, "pilot", 200_000, 8_000_000)}
    assert rows["big"].epochs == pytest.approx(0.4) and rows["big"].stage_worth == 1.0
    assert rows["scarce"].epochs == pytest.approx(40) and rows["scarce"].stage_worth < 0.4
    assert worth(recipe, 0, 200_000) == 1.0  # each token seen once: all new
    assert worth(recipe, 200_000, 8_000_000) == pytest.approx(
        (rows["big"].stage_worth + rows["scarce"].stage_worth) / 2
    )
    unknown = _recipe(sources=[{"name": "a"}, {"name": "b", "unique_tokens": 10}])
    assert worth(unknown, 0, 100) is None and stage_supply(unknown, "x", 0, 100)[0].epochs is None


POLICY = """name: p
version: 1
stages:
  - {name: probe, tokens: 150000, compute_share: 0.05}
  - {name: pilot, tokens: 500000, compute_share: 0.15}
  - {name: full, tokens: 5000000, compute_share: 0.8}
requirements: {min_yield_per_btok: 250, max_epochs: 4}
"""


def test_plan_prints_every_stage_and_names_the_source_to_grow(cli, tmp_path):
    (tmp_path / "p.yaml").write_text(POLICY)
    (tmp_path / "r.yaml").write_text(
        "sources:\n  - {name: web, weight: 0.7, unique_tokens: 1500000}\n"
        "  - {name: code, weight: 0.3, unique_tokens: 40000}\n"
    )
    args = ("plan", str(tmp_path / "r.yaml"), "--policy", str(tmp_path / "p.yaml"))
    out = cli.json(*args)
    assert [s["stage"] for s in out["stages"]] == ["probe", "pilot", "full"]
    full = {r["source"]: r for r in out["stages"][2]["sources"]}
    assert full["code"]["epochs"] == pytest.approx(37.5) and full["code"]["over_limit"]
    assert full["web"]["epochs"] == pytest.approx(3500000 / 1500000) and not full["web"]["over_limit"]
    assert out["grow"] == [
        {"source": "code", "stage": "full", "epochs": 37.5, "unique_tokens": 40000, "needed_unique_tokens": 375000.0}
    ]
    import yieldgate

    assert yieldgate.plan(str(tmp_path / "r.yaml"), tmp_path / "p.yaml", ledger=cli.ledger_path).to_dict() == out
    text = cli(*args).stdout
    assert "OVER" in text and "grow code: full passes it 37.5 times" in text and "375,000 unique" in text


def test_plan_refuses_what_it_cannot_read_in_one_line(cli, tmp_path):
    (tmp_path / "p.yaml").write_text(POLICY)
    (tmp_path / "bad.yaml").write_text("sources: [{name: web, weight: -1}]\n")
    for target, word in ((str(tmp_path / "bad.yaml"), "weight"), ("nothing*", "no run named or matching")):
        result = cli("plan", target, "--policy", str(tmp_path / "p.yaml"), code=2)
        assert word in result.stderr and result.stderr.count("\n") == 1, result.stderr
    (tmp_path / "r.yaml").write_text("sources:\n  - {name: web, weight: 1.0, unique_tokens: 1500000}\n")
    (tmp_path / "hours.yaml").write_text(re.sub(r"tokens: (\d+)", r"device_hours: \1", POLICY))
    result = cli("plan", str(tmp_path / "r.yaml"), "--policy", str(tmp_path / "hours.yaml"), code=2)
    assert "gives its stages in device_hours" in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_a_campaign_recipe_probed_at_several_sizes_is_one_recipe_to_plan(cli, tmp_path):
    """The probes of one campaign recipe at two model sizes share their data recipe: `plan camp/recipe` plans it
    (no planned size: they differ); a seed group whose data recipes differ is refused, naming why."""
    from yieldgate.ledger import Ledger

    (tmp_path / "p.yaml").write_text(POLICY)
    data = {
        "sources": [
            {"name": "web", "weight": 0.7, "unique_tokens": 1500000},
            {"name": "code", "weight": 0.3, "unique_tokens": 40000},
        ]
    }
    with Ledger(cli.ledger_path) as led:
        for size, params in (("m1x32", 31_000), ("m2x48", 120_000)):
            for seed in (0, 1):
                led.create_run(
                    f"camp/mix/{size}/s{seed}",
                    status="finished",
                    manifest=parse_manifest({"data": data, "model": {"params": params}, "seed": seed}),
                )
        led.create_run("other/s0", status="finished", manifest=parse_manifest({"data": data, "seed": 0}))
        led.create_run(
            "other/s1",
            status="finished",
            manifest=parse_manifest({"data": {"sources": [{"name": "web", "unique_tokens": 1500000}]}, "seed": 1}),
        )
    out = cli.json("plan", "camp/mix", "--policy", str(tmp_path / "p.yaml"))
    assert {r["source"] for r in out["stages"][2]["sources"]} == {"web", "code"}
    assert out["grow"][0]["source"] == "code"
    err = cli("plan", "other/*", "--policy", str(tmp_path / "p.yaml"), code=2).stderr
    assert "differ in data recipe" in err and err.count("\n") == 1
