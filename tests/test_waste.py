"""Wasted compute as a number (issue #31, item 8): the device-hours, dollars and kWh a run spent on tranches whose
yield was within noise of zero, on restarts' redone work and on diverged steps, beside goodput; a campaign's summed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from yieldgate import EvalRecord, Ledger, Manifest, api

STEPS = 400
"""One second per step (wall_s = step), 1,000 tokens per step, 100 W on 4 devices at $2 per device-hour."""
EVERY = 50


def _run(led: Ledger, name: str, *, nan_steps: range = range(0), lost: float | None = None) -> None:
    manifest = Manifest.model_validate(
        {"hardware": {"device_kind": "cpu", "device_count": 4, "price_per_device_hour": 2.0}}
    )
    led.create_run(name, manifest=manifest)
    step = np.arange(STEPS + 1)
    loss = 3.0 * np.exp(-step / 100) + 1.0
    loss[list(nan_steps)] = np.nan
    led.append_steps(
        name,
        {
            "step": step.tolist(),
            "tokens": (step * 1000.0).tolist(),
            "wall_s": step.astype(float).tolist(),
            "energy_j": (step * 100.0).tolist(),
            "loss": loss.tolist(),
            "lr": [1e-3] * (STEPS + 1),
        },
    )
    # Falling by 0.5, 0.4, 0.3, 0.2 over the first four tranches, then flat within +-0.002: four flat tranches.
    values = [4.0, 3.5, 3.1, 2.8, 2.6, 2.602, 2.6, 2.602, 2.6]
    led.append_evals(
        name,
        [
            EvalRecord(step=i * EVERY, tokens=i * EVERY * 1000.0, task="val", metric="loss", value=v)
            for i, v in enumerate(values)
        ],
    )
    if lost is not None:  # a restart from step 100 that threw away 50 steps, as an import records one
        led.add_event(
            name,
            "resume",
            {"resume": {"step": 100}, "old": {"step": 150}, "lost_s": lost},
            start_step=100,
            end_step=150,
            state="resolved",
        )
    led.set_status(name, "finished")


def test_flat_tranches_restarts_and_diverged_steps_priced_beside_goodput(tmp_path):
    path = tmp_path / "w.db"
    with Ledger(path) as led:
        _run(led, "a", nan_steps=range(360, 370), lost=50.0)
        _run(led, "b")
    out = api.waste("a", ledger=path)
    (a,) = out["runs"]
    assert a["flat_tranches"]["count"] == 4 and a["flat_tranches"]["seconds"] == pytest.approx(4 * EVERY)
    assert a["restarts"]["count"] == 1 and a["restarts"]["seconds"] == pytest.approx(50.0)
    assert a["diverged_steps"]["count"] == 10 and a["diverged_steps"]["seconds"] == pytest.approx(10.0)
    wasted = 4 * EVERY + 50.0 + 10.0
    assert a["wasted"]["seconds"] == pytest.approx(wasted)
    assert a["wasted"]["device_hours"] == pytest.approx(wasted / 3600 * 4)
    assert a["wasted"]["usd"] == pytest.approx(wasted / 3600 * 4 * 2.0)
    assert a["wasted"]["kwh"] == pytest.approx(wasted * 100 / 3.6e6)
    assert a["goodput"] == pytest.approx((STEPS - 50) / STEPS) and a["missing"] == {}
    both = api.waste("[ab]", ledger=path)
    assert [r["run"] for r in both["runs"]] == ["a", "b"]
    total = both["total"]
    assert total["flat_tranches"]["count"] == 8 and total["restarts"]["count"] == 1
    assert total["wasted"]["seconds"] == pytest.approx(wasted + 4 * EVERY)
    assert total["goodput"] == pytest.approx(((STEPS - 50) + STEPS) / (2 * STEPS))


def test_what_cannot_be_priced_is_none_with_the_reason(tmp_path):
    path = tmp_path / "w.db"
    with Ledger(path) as led:
        led.create_run("bare")
        step = np.arange(101)
        led.append_steps("bare", {"step": step.tolist(), "loss": (3.0 - step / 100).tolist()})
        led.set_status("bare", "finished")
    (bare,) = api.waste("bare", ledger=path)["runs"]
    assert bare["wasted"]["seconds"] == 0 and bare["goodput"] is None
    assert {"usd", "kwh", "flat_tranches"} <= set(bare["missing"])
    assert bare["wasted"]["usd"] is None and math.isfinite(bare["wasted"]["device_hours"])
