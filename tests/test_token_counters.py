"""Issue 45, item 10: a `tokens` column that is no running count (equal on every row, falling, negative) is read as
per-step tokens (a fixed batch: step x its count; varying counts: their running sum) or refused, never stored as
cumulative silently; every refusal's advice (`tokens_per_step`) works when run; negative steps are refused, or said
where another column counts the steps. The rule on generated columns, and the shape of the real log that showed it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from yieldgate.cli import app
from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ingest.tokencount import PER_STEP_FALLS
from yieldgate.ledger import Ledger


def _table(path: Path, steps, tokens, loss=None) -> Path:
    rows = [
        {"step": int(s), "tokens": t, "loss": 3.0 - 0.001 * i if loss is None else loss[i]}
        for i, (s, t) in enumerate(zip(steps, tokens, strict=True))
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _tokens(led: Ledger, path: Path, **options) -> list[float]:
    import_run(led, "table", [str(path)], ImportOptions(run="r", **options))
    return led.steps("r", nullable=True)["tokens"].tolist()


def _run(prop, n: int) -> None:
    settings(max_examples=n, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))(prop)()


@pytest.mark.parametrize("n", [8, pytest.param(200, marks=pytest.mark.slow)])
def test_a_running_count_is_kept_as_logged(n, tmp_path):
    @given(st.lists(st.integers(0, 10**6), min_size=2, max_size=40))
    def prop(increments):
        tokens = np.cumsum(increments).astype(float).tolist()
        if len(set(tokens)) == 1:
            return  # a count that never moves is the next test's
        with Ledger(":memory:") as led:
            assert _tokens(led, _table(tmp_path / "t.jsonl", range(1, len(tokens) + 1), tokens)) == tokens

    _run(prop, n)


@pytest.mark.parametrize("n", [8, pytest.param(200, marks=pytest.mark.slow)])
def test_a_count_equal_on_every_step_is_the_tokens_of_one_step(n, tmp_path):
    """A fixed batch logged as `tokens: 1024` on every row: tokens = step x 1024, with gaps in the log or not."""

    @given(st.integers(1, 10**7), st.lists(st.integers(0, 10**5), min_size=2, max_size=40, unique=True))
    def prop(count, steps):
        steps = sorted(steps)
        with Ledger(":memory:") as led:
            got = _tokens(led, _table(tmp_path / "t.jsonl", steps, [count] * len(steps)))
        assert got == [float(s * count) for s in steps]

    _run(prop, n)


@st.composite
def per_step_counts(draw) -> list[int]:
    """Counts of a batch's tokens, varying with padding: falling at a third to two thirds of their changes."""
    counts = draw(st.lists(st.integers(1, 10**5), min_size=3, max_size=40))
    change = np.diff(counts)
    falls, moved = int((change < 0).sum()), int(np.count_nonzero(change))
    if not (moved and PER_STEP_FALLS * moved <= falls <= (1 - PER_STEP_FALLS) * moved):
        counts = [counts[0] + 300 * (i % 2) for i in range(len(counts))]  # up, down, up, ...: half its changes fall
    return counts


@pytest.mark.parametrize("n", [8, pytest.param(200, marks=pytest.mark.slow)])
def test_counts_per_step_are_summed_over_a_log_of_every_step(n, tmp_path):
    @given(per_step_counts(), st.integers(0, 10**5))
    def prop(counts, first):
        steps = range(first, first + len(counts))
        with Ledger(":memory:") as led:
            got = _tokens(led, _table(tmp_path / "t.jsonl", steps, counts))
        assert got == np.cumsum(counts).astype(float).tolist()

    _run(prop, n)


@pytest.mark.parametrize("n", [8, pytest.param(200, marks=pytest.mark.slow)])
def test_no_column_that_falls_is_stored_as_it_was_logged(n, tmp_path):
    """Whatever a column that falls somewhere holds, the import either refuses it or stores a running count that
    never falls: never the column as logged."""

    @given(st.lists(st.integers(-5, 10**5), min_size=2, max_size=30), st.booleans())
    def prop(tokens, gaps):
        if all(b >= a for a, b in zip(tokens, tokens[1:], strict=False)) and min(tokens) >= 0:
            return
        steps = [3 * i if gaps else i for i in range(1, len(tokens) + 1)]
        with Ledger(":memory:") as led:
            try:
                got = _tokens(led, _table(tmp_path / "t.jsonl", steps, tokens))
            except InputError as exc:
                assert "tokens_per_step" in str(exc) and led.runs().empty
                return
        assert got != [float(t) for t in tokens] or len(set(tokens)) == 1
        assert all(b >= a for a, b in zip(got, got[1:], strict=False))

    _run(prop, n)


@pytest.mark.parametrize(
    ("tokens", "shape"),
    [
        ([100, 200, 300, 50, 150, 250, 40, 140], "restarts"),  # a count per epoch
        ([4096, 3072, 2048, 1024], "runs down"),  # the tokens left
        ([100, -5, 300], "below 0"),
    ],
)
def test_a_refusal_says_what_the_column_looked_like_and_its_advice_works(tokens, shape, tmp_path, ledger_path):
    path = _table(tmp_path / "t.jsonl", range(1, len(tokens) + 1), tokens)
    runner = CliRunner()
    base = ["--ledger", str(ledger_path)]
    refused = runner.invoke(app, [*base, "import", "table", str(path), "--run", "r"])
    assert refused.exit_code == 2 and shape in refused.output and "--tokens-per-step N" in refused.output
    done = runner.invoke(app, [*base, "import", "table", str(path), "--run", "r", "--tokens-per-step", "512"])
    assert done.exit_code == 0, done.output
    with Ledger(ledger_path) as led:
        steps = led.steps("r", nullable=True)
        kept = led.extras("r", ["imported/tokens_as_logged"])
    assert steps["tokens"].tolist() == [512.0 * s for s in range(1, len(tokens) + 1)]
    assert kept["value"].tolist() == [float(t) for t in tokens]  # what was logged is kept, under its own name


def test_counts_per_step_over_a_log_with_gaps_are_refused(ledger, tmp_path):
    counts = [1000 + random.Random(1).randrange(0, 500) * (i % 2) for i in range(10)]
    with pytest.raises(InputError, match=r"skips steps .* nobody counted"):
        _tokens(ledger, _table(tmp_path / "t.jsonl", range(10, 110, 10), counts))


def test_negative_steps_are_refused_with_advice_that_works(tmp_path, ledger_path):
    path = _table(tmp_path / "t.jsonl", [-2, -1, 0, 1], [10, 20, 30, 40])
    rows = [json.loads(line) | {"iteration": i} for i, line in enumerate(path.read_text().splitlines())]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runner = CliRunner()
    base = ["--ledger", str(ledger_path)]
    refused = runner.invoke(app, [*base, "import", "table", str(path), "--run", "r", "--map", "step=step"])
    assert refused.exit_code == 2 and "step -2 in 'step' is negative" in refused.output
    done = runner.invoke(app, [*base, "import", "table", str(path), "--run", "r", "--map", "step=iteration"])
    assert done.exit_code == 0, done.output


def test_a_negative_marker_in_a_step_column_is_said_and_another_counter_steps_the_rows(ledger, tmp_path):
    path = tmp_path / "results.csv"  # sentence-transformers' evaluator CSV: steps -1 at the end of each epoch
    path.write_text("epoch,steps,cosine_spearman\n0,-1,0.80\n1,-1,0.83\n2,-1,0.84\n")
    (res,) = import_run(ledger, "table", [str(path)], ImportOptions(run="r"))
    assert ledger.evals("r")["step"].tolist() == [0, 1, 2]
    assert any("'steps' holds a negative value on 3 row(s)" in w and "'epoch'" in w for w in res.warnings)
