"""The yield of each stage of a staged curriculum (issue #31, item 10): whether a curriculum changes the slope is
read per stage, on a run whose loss falls at a known rate in each stage."""

from __future__ import annotations

import numpy as np
import pytest

from yieldgate import EvalRecord, Ledger, Manifest, api

RECIPE = {
    "sources": [{"name": "web", "weight": 0.5}, {"name": "code", "weight": 0.5}],
    "curriculum": {
        "kind": "staged",
        "stages": [
            {"until_tokens": 200_000, "weights": {"web": 1.0}},
            {"until_tokens": 300_000, "weights": {"code": 1.0}},
        ],
    },
}


def _staged_run(led: Ledger, name: str, every: int = 25) -> None:
    """400k tokens; the validation loss falls 4.0 per million tokens in stage 1 (to 200k), 1.0 per million in stage 2
    (to 300k), 0.5 per million after, evaluated every `every` thousand tokens with a +-0.001 wobble."""
    led.create_run(name, manifest=Manifest.model_validate({"data": RECIPE}))
    step = np.arange(0, 401)
    led.append_steps(name, {"step": step.tolist(), "tokens": (step * 1000.0).tolist(), "lr": [1e-3] * len(step)})

    def loss(t: float) -> float:
        return 5.0 - 4e-6 * min(t, 2e5) - 1e-6 * min(max(t - 2e5, 0), 1e5) - 0.5e-6 * max(t - 3e5, 0)

    led.append_evals(
        name,
        [
            EvalRecord(
                step=s,
                tokens=s * 1000.0,
                task="val",
                metric="loss",
                value=loss(s * 1000.0) + 0.001 * (-1) ** (s // every),
            )
            for s in [*range(0, 400, every), 400]
        ],
    )
    led.set_status(name, "finished")


def test_each_stage_of_a_staged_curriculum_has_its_yield(tmp_path, cli_for):
    path = tmp_path / "c.db"
    with Ledger(path) as led:
        _staged_run(led, "staged")
    report = api.yields("staged", ledger=path)
    stages = {s["stage"]: s for s in report.stages}
    assert list(stages) == ["stage 1", "stage 2", "after the stages"]
    assert (stages["stage 2"]["start_tokens"], stages["stage 2"]["end_tokens"]) == (200_000, 300_000)
    # 4.0, 1.0 and 0.5 per million tokens: 4,000, 1,000 and 500 per billion (the wobble cancels at the boundaries)
    assert stages["stage 1"]["yield_per_btok"] == pytest.approx(4000)
    assert stages["stage 2"]["yield_per_btok"] == pytest.approx(1000)
    assert stages["after the stages"]["yield_per_btok"] == pytest.approx(500)
    assert all(s["within_noise"] is False for s in stages.values())
    out = cli_for(path)("yield", "staged").stdout
    assert "curriculum stage 2 (200,000-300,000 tokens, measured 200,000-300,000): 1000 per B" in " ".join(out.split())
    assert api.yields("staged", ledger=path).to_dict()["stages"] == report.stages


def test_a_recipe_without_stages_has_none(tmp_path):
    path = tmp_path / "c.db"
    with Ledger(path) as led:
        led.create_run("plain", manifest=Manifest.model_validate({"data": {"sources": [{"name": "web"}]}}))
        led.append_steps("plain", {"step": [0, 100], "tokens": [0.0, 1e5]})
        led.append_evals(
            "plain",
            [EvalRecord(step=s, tokens=s * 1e3, task="val", metric="loss", value=3.0 - s / 1e3) for s in (0, 50, 100)],
        )
    assert api.yields("plain", ledger=path).stages == []


@pytest.mark.parametrize("every", [40, 60, 70, 110])
def test_a_stage_boundary_between_evaluations_does_not_mix_the_stages(tmp_path, every):
    """Issue #44 item 4: a stage read from the last evaluation before its start took the previous stage's steeper
    slope in (1,408 per billion tokens where the truth was 1,000). Read between its own evaluations it is the truth
    (the wobble aside: +-0.002 over the span); with fewer than two inside it has no yield, and says why."""
    path = tmp_path / "c.db"
    with Ledger(path) as led:
        _staged_run(led, "staged", every=every)
    stages = {s["stage"]: s for s in api.yields("staged", ledger=path).stages}
    truth = {"stage 1": 4000, "stage 2": 1000, "after the stages": 500}
    for name, stage in stages.items():
        if stage["yield_per_btok"] is None:
            assert every == 110 and name == "stage 2" and stage["missing"].startswith("1 evaluation inside the stage")
            continue
        span = (stage["measured_to"] - stage["measured_from"]) / 1e9
        assert stage["yield_per_btok"] == pytest.approx(truth[name], abs=0.0021 / span), (every, name, stage)
        assert stage["start_tokens"] <= stage["measured_from"] < stage["measured_to"] <= stage["end_tokens"]
