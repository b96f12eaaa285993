"""The training loss is drawn (issue #36, item 6): against steps, tokens and time, its moving average over the logged
points drawn faint, beside the evaluations; a diagnosis that spans the whole run is a label, not a shading of the
whole plot; a panel no run has data for (no loss scale recorded, no yields yet) is left out. The page's figure data
is checked against the ledger it was drawn from."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.report.figures.base import figure_dict, smoothed
from yieldgate.report.figures.runs import build_figures
from yieldgate.report.figures.training import PANEL_POINTS, loss_weight
from yieldgate.report.sections import collect

STEPS = 3_000
"""More logged steps than a trace keeps (`PANEL_POINTS`): the raw and the smoothed series are downsampled."""


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("train-loss") / "runs.db"
    rng = np.random.default_rng(0)
    step = np.arange(1, STEPS + 1)
    loss = 2.0 + 3.0 / np.sqrt(step) + rng.normal(0, 0.2, STEPS)
    with Ledger(str(path)) as led:
        led.create_run("run")
        led.append_steps(
            "run",
            {
                "step": step,
                "tokens": step * 512.0,
                "wall_s": step * 0.05,
                "tokens_per_s": np.full(STEPS, 10_240.0),
                "loss": loss,
                "clipped": (step % 7 == 0).astype(float),
            },
        )
        led.append_evals(
            "run",
            [
                EvalRecord(step=s, tokens=s * 512.0, task="val", metric="loss", value=2.0 + 3.0 / np.sqrt(s))
                for s in range(300, STEPS + 1, 300)
            ],
        )
        led.add_event("run", "diagnosis", {"cause": "data_exhaustion"}, start_step=1, end_step=STEPS)
        led.add_event("run", "diagnosis", {"cause": "infrastructure_stall"}, start_step=2000, end_step=2100)
        built = build_figures(collect(led, ["run"]))
    return {f.id: figure_dict(f) for f in built} | {"_loss": pd.Series(loss, index=step)}


def _series(fig: dict, series: str) -> dict:
    (trace,) = [t for t in fig["data"] if t["meta"]["series"] == series]
    return trace


def _values(trace: dict, key: str) -> np.ndarray:
    value = trace[key]
    if isinstance(value, dict):  # plotly's encoding of a numpy array in the page's JSON
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"])).astype(float)
    return np.asarray(value, dtype=float)


def test_the_training_loss_is_drawn_against_steps_tokens_and_time_smoothed_over_faint_raw_points(figures):
    fig, logged = figures["train-loss"], figures["_loss"]
    layout = fig["layout"]
    assert [layout[a]["title"]["text"] for a in ("xaxis", "xaxis2", "xaxis3")] == [
        "optimizer steps (steps)",
        "accepted tokens (tokens)",
        "wall-clock (s)",
    ]
    assert layout["yaxis"]["title"]["text"] == "training loss (nats/token)"
    ema = smoothed(logged, loss_weight(STEPS))
    for column, scale, axis in (("step", 1.0, "x"), ("tokens", 512.0, "x2"), ("wall_s", 0.05, "x3")):
        raw, line = _series(fig, f"loss@{column}"), _series(fig, f"loss:ema@{column}")
        assert raw["xaxis"] == line["xaxis"] == axis
        assert raw["opacity"] < 0.5 and not raw["showlegend"] and "opacity" not in line  # the points faint
        for trace, expected in ((raw, logged), (line, ema)):
            x, y = _values(trace, "x"), _values(trace, "y")
            assert 100 < len(x) <= PANEL_POINTS  # downsampled: a large run stays light
            steps = np.rint(x / scale).astype(int)
            np.testing.assert_allclose(y, expected.loc[steps].to_numpy())  # each drawn point is the ledger's
            assert x[0] == pytest.approx(scale) and x[-1] == pytest.approx(STEPS * scale)  # both ends kept
        # the average is smoother than the points: its step-to-step changes are far smaller
        assert np.abs(np.diff(_values(line, "y"))).mean() < 0.2 * np.abs(np.diff(_values(raw, "y"))).mean()
    # beside the evaluations: the val/loss points on the same axes
    evals = _series(fig, "val/loss@tokens")
    assert evals["mode"] == "markers" and list(_values(evals, "x")) == [s * 512.0 for s in range(300, STEPS + 1, 300)]


def test_a_finding_of_the_whole_run_is_a_label_and_a_short_one_a_shaded_span(figures):
    layout = figures["loss-tokens"]["layout"]
    shapes = layout.get("shapes", [])
    assert [(s["x0"], s["x1"]) for s in shapes] == [(2000 * 512.0, 2100 * 512.0)]  # no full-width shading
    labels = [a["text"] for a in layout["annotations"]]
    assert "data_exhaustion: the whole run (run)" in labels and "infrastructure_stall" in labels


def test_a_run_without_a_loss_scale_gets_no_empty_loss_scale_panel(figures):
    fig = figures["signals-clipping"]
    assert "xaxis2" not in fig["layout"]
    assert [t["meta"]["series"] for t in fig["data"]] == ["clipped_share"]
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["gradient clipping"]


def test_no_training_loss_figure_where_no_run_logged_one_and_no_empty_learning_panel(tmp_path: Path):
    """Steps with throughput, no loss and no evaluations: no training-loss plot, and the throughput plot has no
    empty learning panel beside it (no yields without evaluations)."""
    with Ledger(str(tmp_path / "bare.db")) as led:
        led.create_run("bare")
        led.append_steps(
            "bare",
            {"step": [1, 2, 3], "tokens": [10.0, 20.0, 30.0], "wall_s": [1.0, 2.0, 3.0], "tokens_per_s": [10.0] * 3},
        )
        figures = {f.id: f for f in build_figures(collect(led, ["bare"]))}
    assert list(figures) == ["throughput-learning"]
    throughput = figure_dict(figures["throughput-learning"])
    assert "xaxis2" not in throughput["layout"] and [a["text"] for a in throughput["layout"]["annotations"]] == [
        "throughput: tokens/s"
    ]
    assert figures["throughput-learning"].title == "throughput, over wall-clock time"
