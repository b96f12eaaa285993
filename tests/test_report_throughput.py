"""One throughput per page (issue #43 item 5): the report's runs table said one run was faster (the median of its
logged tokens/s), its comparison said the other was 1.2x faster (tokens over time to the target), and the
comparison's throughput row left A and B empty. Now the page has one figure, labelled with what it is: each run's
tokens to the target over its time to it, in the runs table, the frontier and the comparison alike (one run alone:
the median of its logged tokens/s, said so)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yieldgate.analysis.compare import RunData, compare
from yieldgate.analysis.frontier import frontier, rates_to_target
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.report.format import fmt
from yieldgate.report.html import comparison_view, render_html
from yieldgate.report.sections import collect


def frames(name: str, step_s: np.ndarray, slope: float) -> RunData:
    """A run of len(step_s) steps of 100 tokens, each taking its `step_s` seconds, its loss 8 - slope * ln(tokens)
    evaluated at every 5th step."""
    n = len(step_s)
    step = np.arange(1, n + 1)
    tokens = step * 100.0
    wall = np.cumsum(step_s)
    steps = pd.DataFrame({"step": step, "tokens": tokens, "wall_s": wall, "tokens_per_s": 100.0 / step_s})
    at = step[4::5]
    evals = pd.DataFrame(
        {
            "step": at,
            "tokens": at * 100.0,
            "task": "val",
            "metric": "loss",
            "value": 8 - slope * np.log(at * 100.0),
            "higher_is_better": False,
        }
    )
    return RunData(name=name, steps=steps, evals=evals)


STEP_TIMES = st.lists(st.floats(0.01, 2.0), min_size=20, max_size=60).map(np.array)


@settings(max_examples=8, deadline=None)
@given(a=STEP_TIMES, b=STEP_TIMES, slope_a=st.floats(0.2, 1.0), slope_b=st.floats(0.2, 1.0))
def test_the_frontier_and_the_comparison_give_each_run_the_same_throughput(a, b, slope_a, slope_b):
    """Any two runs, any step times: the frontier's tokens/s of each run is the comparison's throughput to target of
    its side, their ratio is the comparison's throughput speedup, and tokens over it is the time to target."""
    runs = [frames("a", a, slope_a), frames("b", b, slope_b)]
    c = compare([runs[0]], [runs[1]], names=("a", "b"))
    f = frontier(runs)
    assert f.target == pytest.approx(c.target_loss)
    for run in ("a", "b"):
        point = f.points[run]
        assert point["tokens_per_s"] == pytest.approx(rates_to_target(c)[run], rel=1e-9)
        assert point["tokens_to_target"] / point["tokens_per_s"] == pytest.approx(c.time_to_target_s[run], rel=1e-9)
    rates = rates_to_target(c)
    assert c.speedup["throughput"] == pytest.approx(rates["b"] / rates["a"], rel=1e-9)


def _run(led: Ledger, name: str, step_s: np.ndarray, slope: float) -> None:
    data = frames(name, step_s, slope)
    led.create_run(name)
    led.append_steps(name, {c: data.steps[c].to_numpy() for c in data.steps})
    led.append_evals(
        name,
        [
            EvalRecord(step=int(s), tokens=float(t), task="val", metric="loss", value=float(v))
            for s, t, v in zip(data.evals["step"], data.evals["tokens"], data.evals["value"], strict=True)
        ],
    )


@pytest.mark.slow  # two runs read and compared, the page rendered with plotly.js: about a second
def test_the_page_names_one_faster_run_and_fills_the_throughput_row():
    """Run `fast-steps` logs faster steps (its median tokens/s is 2x the other's) but stalls 10 s at every
    evaluation; over the time to the target it is the slower. The page says so in one voice: its runs table, its
    frontier and its comparison give each run the same tokens/s to target, and no cell of the throughput row is
    empty."""
    even = np.full(40, 0.1)
    stalling = np.where(np.arange(1, 41) % 5 == 0, 10.0, 0.05)
    with Ledger(":memory:") as led:
        _run(led, "even", even, 0.5)
        _run(led, "fast-steps", stalling, 0.5)
        data = collect(led, ["even", "fast-steps"])
    page = render_html(data, [])
    (c,) = data.comparisons
    rates = rates_to_target(c)
    assert rates["even"] > 2 * rates["fast-steps"]  # stalls count: slower to the target
    assert {r: p["tokens_per_s"] for r, p in data.frontier.points.items()} == pytest.approx(rates)
    header = re.search(r"<th>(tokens/s to target \(tokens over time to val/loss [^<]+\))</th>", page)
    assert header and "median of the logged" not in page
    runs_rows = re.findall(r"<tr><td>(even|fast-steps)</td>(.*?)</tr>", page)
    for run, row in runs_rows[:2]:  # the runs table comes first on the page
        assert f'<td class="num">{fmt(rates[run])}</td>' in row, (run, row)
    view = comparison_view(c)
    (row,) = [r for r in view.speedup.rows if r[0].text.startswith("throughput")]
    assert [cell.text for cell in row[1:]] == [
        fmt(rates["even"]),
        fmt(rates["fast-steps"]),
        fmt(c.speedup["throughput"]),
    ]


def test_one_run_alone_shows_the_median_of_its_logged_tokens_per_s_and_says_so():
    with Ledger(":memory:") as led:
        _run(led, "even", np.full(40, 0.1), 0.5)
        page = render_html(collect(led, ["even"]), [])
    assert "<th>tokens/s (median of the logged tokens/s)</th>" in page and f'<td class="num">{fmt(1000.0)}</td>' in page
