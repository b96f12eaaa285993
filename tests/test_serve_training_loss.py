"""The dashboard draws the training loss (issue #36, item 6): the run page's JSON holds it against steps, tokens and
time, the logged points faint under their moving average, beside the evaluations; the run has no loss scale, so
its clipping plot has no empty loss-scale panel; and headless Chromium draws the plot on the page (slow)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pytest
from starlette.testclient import TestClient

from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.report.figures.base import smoothed
from yieldgate.report.figures.training import loss_weight
from yieldgate.serve.app import create_app

from .test_serve import PLOTS_JS, _start_server, _until, _values

N = 300


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    step = np.arange(1, N + 1)
    loss = 6.0 - np.log(step) * 0.5 + 0.3 * np.sin(step)  # a noisy training loss
    with Ledger(path) as led:
        led.create_run("r")
        led.append_steps(
            "r",
            {
                "step": step,
                "tokens": step * 256.0,
                "wall_s": step * 0.05,
                "loss": loss,
                "tokens_per_s": np.full(N, 5120.0),
                "clipped": (step % 7 == 0).astype(float),
            },
        )
        led.append_evals(
            "r", [EvalRecord(step=s, tokens=s * 256.0, task="val", metric="loss", value=4.0) for s in (100, 200, 300)]
        )
    return path


def _figures(payload: dict) -> dict[str, dict]:
    return {f["id"]: f["figure"] for f in payload["figures"]}


def test_the_run_json_holds_the_training_loss_smoothed_over_its_faint_points(db):
    figs = _figures(TestClient(create_app(str(db))).get("/api/run/figures", params={"name": "r"}).json())
    fig = figs["train-loss"]
    by_series = {t["meta"]["series"]: t for t in fig["data"]}
    assert set(by_series) == {
        f"{s}@{c}" for s in ("loss", "loss:ema", "val/loss") for c in ("step", "tokens", "wall_s")
    }
    with Ledger(db, readonly=True) as led:
        logged = led.steps("r").set_index("step")["loss"]
    for column, scale in (("step", 1.0), ("tokens", 256.0), ("wall_s", 0.05)):
        raw, line = by_series[f"loss@{column}"], by_series[f"loss:ema@{column}"]
        np.testing.assert_allclose(_values(raw), logged.index * scale)  # every point of a small run
        np.testing.assert_allclose(_values(raw, "y"), logged.to_numpy())
        np.testing.assert_allclose(_values(line, "y"), smoothed(logged, loss_weight(N)).to_numpy())
        assert raw["opacity"] < 0.5
        assert list(_values(by_series[f"val/loss@{column}"])) == [s * scale for s in (100, 200, 300)]
    assert "xaxis2" not in figs["signals-clipping"]["layout"]  # no loss scale: no empty panel for one


@pytest.mark.slow
def test_the_run_page_draws_the_training_loss_in_chromium(db, chromium):
    from playwright.sync_api import sync_playwright

    server, url = _start_server(db)
    errors: list[str] = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{url.rstrip('/')}/run?{urlencode({'name': 'r'})}")
            box = page.locator("#fig-train-loss")
            box.scroll_into_view_if_needed()
            _until(page, "document.getElementById('fig-train-loss').classList.contains('js-plotly-plot')")
            (plot,) = [p for p in page.evaluate(PLOTS_JS) if p["id"] == "fig-train-loss"]
            browser.close()
    finally:
        server.terminate()
        server.wait()
    assert errors == []
    drawn = {t["series"]: t["n"] for t in plot["traces"]}
    assert drawn["loss@step"] == drawn["loss:ema@tokens"] == drawn["loss@wall_s"] == N
    assert drawn["val/loss@tokens"] == 3
