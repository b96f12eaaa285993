"""Property-based tests (hypothesis): the manifest and recipe models (round trips, a content hash that no
key order or file format moves, diffs), and the analysis invariants (an exact power law is recovered,
tranche gains add up to the run's total, a run compared with itself differs by nothing). A modest number
of examples in `make test`, many more under `make soak`."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.helpers import shuffled
from yieldgate.analysis.compare import RunData, compare
from yieldgate.analysis.fit import fit_power_law
from yieldgate.analysis.yields import tranche_yields
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.manifest import Manifest, Recipe, diff, load_manifest, load_recipe, parse_manifest

EXAMPLES = [30, pytest.param(600, marks=pytest.mark.soak)]

# -- strategies ---------------------------------------------------------------------------------------------

names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)
finite = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
counts = st.integers(min_value=1, max_value=2**40)
weights = st.floats(min_value=1e-3, max_value=1e3)  # at least one source must weigh > 0


@st.composite
def recipes(draw) -> dict:
    sources = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    recipe: dict = {"sources": [{"name": n, "weight": draw(weights)} for n in sources]}
    if draw(st.booleans()):
        recipe["dedup"] = draw(
            st.sampled_from(
                [
                    {"kind": "none"},
                    {"kind": "exact"},
                    {
                        "kind": "near",
                        "shingle": "word:3",
                        "permutations": 128,
                        "bands": 16,
                        "rows": 8,
                        "threshold": 0.7,
                    },
                ]
            )
        )
    if draw(st.booleans()):
        recipe["filters"] = [{"kind": draw(names), "params": {"min": draw(st.integers(0, 100))}}]
    if draw(st.booleans()):
        recipe["sequence_length"] = draw(st.integers(1, 1 << 20))
    if draw(st.booleans()):
        recipe["tokenizer"] = {"name": draw(names), "vocab_size": draw(st.integers(1, 1 << 20))}
    return recipe


@st.composite
def manifests(draw) -> dict:
    m: dict = {"data": draw(recipes()), "seed": draw(st.integers(0, 2**31))}
    if draw(st.booleans()):
        m["model"] = {
            "params": draw(counts),
            "layers": draw(st.integers(1, 200)),
            "width": draw(st.integers(1, 1 << 16)),
        }
    if draw(st.booleans()):
        m["optimisation"] = {
            "lr": draw(st.floats(1e-8, 10)),
            "batch_size": draw(st.integers(1, 1 << 16)),
            "precision": draw(st.sampled_from(["fp32", "bf16", "fp16"])),
        }
    if draw(st.booleans()):
        m["hardware"] = {
            "device_kind": draw(names),
            "device_count": draw(st.integers(1, 4096)),
            "price_per_device_hour": draw(finite),
        }
    if draw(st.booleans()):
        m["code_version"] = draw(names)
    return m


def _run(n: int, prop) -> None:
    settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )(prop)()


# -- manifest and recipe --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", EXAMPLES)
def test_manifest_round_trips_and_hashes_the_same_in_any_key_order_or_format(n, tmp_path):
    @given(manifests(), st.randoms(use_true_random=False))
    def prop(data, rng):
        m = parse_manifest(data)
        again = parse_manifest(json.loads(m.to_json()))
        assert again == m and again.content_hash() == m.content_hash()
        assert parse_manifest(shuffled(data, rng)).content_hash() == m.content_hash()
        path = tmp_path / "m.yaml"
        path.write_text(yaml.safe_dump(shuffled(data, rng)), encoding="utf-8")
        assert load_manifest(path).content_hash() == m.content_hash()

    _run(n, prop)


@pytest.mark.parametrize("n", EXAMPLES)
def test_manifest_diff_is_empty_with_itself_and_symmetric(n):
    @given(manifests(), manifests())
    def prop(a_data, b_data):
        a, b = parse_manifest(a_data), parse_manifest(b_data)
        assert diff(a, a) == []
        ab, ba = diff(a, b), diff(b, a)
        assert [(d.field, d.a, d.b) for d in ab] == [(d.field, d.b, d.a) for d in ba]
        assert (ab == []) == (a.content_hash() == b.content_hash())

    _run(n, prop)


@pytest.mark.parametrize("n", EXAMPLES)
def test_recipe_round_trips_through_yaml_and_is_a_manifests_data(n, tmp_path):
    @given(recipes())
    def prop(data):
        r = Recipe.model_validate(data)
        path = tmp_path / "r.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        assert load_recipe(path) == r
        assert Manifest.model_validate({"data": data}).data == r

    _run(n, prop)


# -- analysis invariants ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", EXAMPLES)
def test_an_exact_power_law_is_recovered(n):
    @given(st.floats(0.5, 4.0), st.floats(0.2, 3.0), st.floats(0.1, 1.0), st.floats(1e5, 1e8), st.integers(5, 12))
    def prop(e, amplitude, beta, d0, points):
        tokens = d0 * np.geomspace(1, 1000, points)
        b = amplitude * d0**beta  # loss(d0) - E == amplitude: well inside what real runs show
        law = fit_power_law(tokens, e + b * tokens**-beta)
        assert law.E == pytest.approx(e, rel=1e-3, abs=1e-4)
        assert law.beta == pytest.approx(beta, rel=1e-3)
        assert law.B == pytest.approx(b, rel=1e-2)
        assert law.r2 == pytest.approx(1.0, abs=1e-9) and law.poor is None

    _run(n, prop)


def _ledger_run(led: Ledger, name: str, evals: list[tuple[int, float]], tokens_per_step: float, step_s: float):
    last = max(s for s, _ in evals)
    step = np.arange(1, last + 1)
    led.create_run(name)
    led.append_steps(
        name, {"step": step, "tokens": step * tokens_per_step, "wall_s": step * step_s, "loss": np.linspace(5, 2, last)}
    )
    led.append_evals(name, [EvalRecord(step=s, task="val", metric="loss", value=v) for s, v in evals])
    return RunData(name, led.steps(name), led.evals(name))


eval_series = st.lists(
    st.tuples(st.integers(1, 5000), st.floats(0.1, 10)), min_size=2, max_size=12, unique_by=lambda p: p[0]
).map(sorted)


@pytest.mark.slow
@pytest.mark.parametrize("n", EXAMPLES)
def test_tranche_gains_add_up_to_first_minus_last(n):
    @given(eval_series, st.floats(1, 1e6))
    def prop(evals, tokens_per_step):
        with Ledger(":memory:") as led:
            run = _ledger_run(led, "r", evals, tokens_per_step, 0.1)
            report = tranche_yields("r", run.steps, run.evals)
        gains = [t.loss_start - t.loss_end for t in report.tranches]
        assert len(report.tranches) == len(evals) - 1
        assert math.fsum(gains) == pytest.approx(evals[0][1] - evals[-1][1], abs=1e-9)
        for t in report.tranches:  # each yield is its gain over its own tokens
            span = (t.end_tokens - t.start_tokens) / 1e9
            assert t.yield_per_btok * span == pytest.approx(t.loss_start - t.loss_end, rel=1e-9, abs=1e-12)

    _run(n, prop)


@pytest.mark.slow
@pytest.mark.parametrize("n", EXAMPLES)
def test_a_run_compared_with_itself_differs_by_nothing(n):
    @given(eval_series.filter(lambda e: len(e) >= 3), st.floats(1, 1e6), st.floats(0.01, 10))
    def prop(evals, tokens_per_step, step_s):
        with Ledger(":memory:") as led:
            run = _ledger_run(led, "r", evals, tokens_per_step, step_s)
        target = float(np.median([v for _, v in evals]))
        result = compare([run], [run], names=("r", "r2"), target_loss=target)
        assert result.points and all(p["diff"] == 0 for p in result.points)
        assert result.confounders == []
        for key, value in result.speedup.items():
            assert value is None or value == pytest.approx(1.0), (key, value)
        assert result.speedup.get("time_to_target") in (None, pytest.approx(1.0))

    _run(n, prop)
