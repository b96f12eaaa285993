"""The report's per-layer learning signals (issue #43 item 11): the Tracker records the gradient noise scale and the
update/weight ratio of every layer (`signals/gns/<layer>`, `signals/update_ratio/<layer>`), and the report drew only
the global noise scale and the median ratio. The small-multiples panel draws them: a row per run, a column per
signal, one line per layer, each line the ledger's values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yieldgate.analysis.compare import RunData
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.report.figures.signals import LAYER_RUNS, PER_LAYER, per_layer_figure
from yieldgate.report.sections import ReportData, RunView, collect

STEPS = np.arange(10, 201, 10)


def layered_run(led: Ledger, run: str, layers: dict[str, dict[str, np.ndarray]]) -> None:
    """A run logged per token with an evaluation curve and, per signal prefix, each layer's values at `STEPS`."""
    led.create_run(run)
    step = np.arange(1, 201)
    led.append_steps(run, {"step": step, "tokens": step * 512.0, "wall_s": step * 0.1, "loss": 6.0 - np.log(step)})
    extras = {f"{prefix}{layer}": values for prefix, per in layers.items() for layer, values in per.items()}
    if extras:
        led.append_steps(run, {"step": STEPS, **extras})
    led.append_evals(
        run,
        [
            EvalRecord(step=s, tokens=s * 512.0, task="val", metric="loss", value=6.0 - np.log(s))
            for s in (50, 100, 200)
        ],
    )


def panel(led: Ledger, runs: list[str]):
    figure = per_layer_figure(collect(led, runs))
    assert figure is not None and figure.id == "signals-layers"
    return figure


@pytest.mark.slow  # a ledger read whole by `collect`: about a second
def test_each_layer_is_a_line_of_its_own_values_in_every_panel():
    """Two runs, three layers, both signals: a 2 x 2 panel of the ledger's values (as `collect` reads them), one
    colour and legend entry per layer."""
    rng = np.random.default_rng(0)
    layers = ["blocks.0.attn", "blocks.0.mlp", "blocks.1.attn"]
    recorded = {
        run: {prefix: {layer: rng.uniform(1e-4, 1e3, len(STEPS)) for layer in layers} for prefix in PER_LAYER}
        for run in ("a", "b")
    }
    with Ledger(":memory:") as led:
        for run, values in recorded.items():
            layered_run(led, run, values)
        figure = panel(led, ["*"])  # one group: no comparison to compute
    traces = figure.figure.data
    assert len(traces) == 2 * len(PER_LAYER) * len(layers)
    for t in traces:
        prefix = next(p for p in PER_LAYER if t.meta["series"].startswith(p))
        layer = t.meta["series"][len(prefix) :]
        assert t.name == layer and np.array_equal(t.y, recorded[t.meta["run"]][prefix][layer])
        assert np.array_equal(t.x, STEPS * 512.0)  # against accepted tokens
    colours = {(t.name, t.line.color) for t in traces}
    assert len(colours) == len(layers)  # one colour per layer, in every panel
    assert sorted(t.name for t in traces if t.showlegend) == layers  # one legend entry per layer
    titles = [a.text for a in figure.figure.layout.annotations]
    assert titles == [f"{run}: {PER_LAYER[p][0]}" for run in ("a", "b") for p in PER_LAYER]


def view(run: str, layers: dict[str, dict[str, np.ndarray]]) -> RunView:
    """A run as the report holds it, built from frames (no ledger): steps with tokens, and its per-layer signals in
    the long form `collect` reads (step, key, value)."""
    step = np.arange(1, 201)
    steps = pd.DataFrame({"step": step, "tokens": step * 512.0})
    signals = pd.DataFrame(
        [
            {"step": int(s), "key": f"{prefix}{layer}", "value": float(v)}
            for prefix, per in layers.items()
            for layer, values in per.items()
            for s, v in zip(STEPS, values, strict=True)
        ],
        columns=["step", "key", "value"],
    )
    data = RunData(name=run, steps=steps, evals=pd.DataFrame())
    return RunView(run, data, pd.DataFrame(), None, signals, pd.DataFrame())


@settings(max_examples=5, deadline=None)  # make_subplots: ~0.1 s a figure
@given(
    runs=st.lists(
        st.tuples(st.integers(0, 5), st.booleans(), st.booleans()),  # layers, has gns, has update ratios
        min_size=1,
        max_size=LAYER_RUNS + 2,
    )
)
def test_the_panel_draws_what_the_runs_recorded_and_nothing_else(runs):
    """Any mix of runs with and without per-layer signals: a row per run that recorded some (the first LAYER_RUNS),
    a column per signal any of them recorded, a trace per (run, signal, layer) recorded with its values; no panel
    when none did."""
    views, wanted = [], {}
    for i, (n, gns, ratio) in enumerate(runs):
        kinds = [p for p, on in zip(PER_LAYER, (gns, ratio), strict=True) if on and n]
        layers = {p: {f"l{j}": np.full(len(STEPS), (1.0 + j) * (1 + i)) for j in range(n)} for p in kinds}
        views.append(view(f"r{i}", layers))
        wanted.update({(f"r{i}", p, layer): values for p, per in layers.items() for layer, values in per.items()})
    figure = per_layer_figure(ReportData(patterns=["*"], metric="val/loss", runs=views))
    drawn_runs = list(dict.fromkeys(run for run, _, _ in wanted))[:LAYER_RUNS]
    if not drawn_runs:
        assert figure is None
        return
    assert figure is not None
    got = {(t.meta["run"], t.meta["series"][: -len(t.name)], t.name): t.y for t in figure.figure.data}
    assert sorted(got) == sorted(w for w in wanted if w[0] in drawn_runs)
    assert all(np.array_equal(y, wanted[key]) for key, y in got.items())
    kinds = {p for run, p, _ in wanted if run in drawn_runs}
    assert len(figure.figure.layout.annotations) == len(drawn_runs) * len(kinds)


@pytest.mark.parametrize("count", [LAYER_RUNS + 2])
def test_past_the_rows_it_draws_the_panel_says_how_many_it_left_out(count):
    views = [view(f"r{i}", {"signals/update_ratio/": {"h.0": np.full(len(STEPS), 1e-3)}}) for i in range(count)]
    figure = per_layer_figure(ReportData(patterns=["*"], metric="val/loss", runs=views))
    assert figure is not None
    assert {t.meta["run"] for t in figure.figure.data} == {f"r{i}" for i in range(LAYER_RUNS)}
    assert f"the first {LAYER_RUNS} of the {count} runs with per-layer signals" in " ".join(figure.notes)
