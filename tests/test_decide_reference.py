"""The restated decision benchmark (issue #34): `benchmarks/bench_decide.py`'s scoring on exact small numbers (the
de-noising, the >= 3-unit pairs, the decided-half rule), the reference keyed by the hash of the recipes and
settings (`benchmarks/decide_reference.py`), and the refusals: a stale or partial reference, a probe that does not
reproduce. No training here."""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm, sem

from yieldgate.probe.campaign import load_campaign

ROOT = Path(__file__).resolve().parents[1]
DECIDE = ROOT / "examples" / "decide.yaml"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


ref = _module("decide_reference")
bench = _module("bench_decide")


sc = _module("decide_scoring")


def pair(pairs, a, b):
    return next(p for p in pairs if {p["a"], p["b"]} == {a, b})


def test_reference_pairs_read_each_recipes_own_noise():
    # Ten seeds each (own noise, >= OWN_NOISE_SEEDS): a and b with sd 0.01, c with sd 0.03.
    def seeds(mean, sd):
        z = [(-1) ** s for s in range(10)]  # +-1: a sample std of sqrt(10/9)
        return {s: mean + sd * x / math.sqrt(10 / 9) for s, x in enumerate(z)}

    by_recipe = {"a": seeds(1.0, 0.01), "b": seeds(1.02, 0.01), "c": seeds(1.1, 0.03)}
    pairs, noise = sc.reference_pairs(by_recipe)
    assert noise == {"a": pytest.approx(0.01), "b": pytest.approx(0.01), "c": pytest.approx(0.03)}
    ab, ac = pair(pairs, "a", "b"), pair(pairs, "a", "c")
    assert (ab["a"], ab["b"], ab["diff"]) == ("a", "b", pytest.approx(0.02))
    assert ab["units"] == pytest.approx(2.0) and ab["sd"] == pytest.approx(0.01 * math.sqrt(2 / 10))
    assert ab["q"] == pytest.approx(norm.cdf(0.02 / (0.01 * math.sqrt(0.2))))
    # a-c: 0.1 apart in units of sqrt((0.01^2 + 0.03^2) / 2) = 0.02236, where one pooled sd (0.0191) said 5.2.
    assert ac["units"] == pytest.approx(0.1 / math.sqrt((0.01**2 + 0.03**2) / 2))
    assert [p["units"] for p in pairs] == sorted(p["units"] for p in pairs)


def test_denoised_accuracy_takes_out_the_references_own_noise():
    q = [0.75, 1.0, 1.0]
    # A probe right on every pair agrees with the reference 0.75 of the time on the first: de-noised, it is 1.
    assert sc.denoised([0.75, 1.0, 1.0], q) == pytest.approx(1.0)
    # A coin agrees half the time everywhere: 0.5, where accuracy / ceiling would say 0.5 / 0.917.
    assert sc.denoised([0.5, 0.5, 0.5], q) == pytest.approx(0.5)
    # Wrong on the first pair, right on the others: (0 - 0.25 + 1 + 1) / (0.5 + 1 + 1) = 0.7.
    assert sc.denoised([0.0, 1.0, 1.0], q) == pytest.approx(0.7)
    assert sc.denoised([1.0, 1.0, 1.0], q) == 1.0  # (0.75 + 1 + 1) / 2.5 = 1.1, clipped
    assert sc.denoised([1.0], [0.5]) is None  # a pair the reference orders at random says nothing


def two_seed_reference():
    """a < b < c < d, two seeds each 0.1414 apart (sd 0.1): a-b 1 unit apart, the rest >= 3."""
    s = 0.1 / math.sqrt(2)
    return {r: {0: m - s, 1: m + s} for r, m in {"a": 1.0, "b": 1.1, "c": 1.5, "d": 2.0}.items()}


def test_a_configuration_scores_all_pairs_with_its_stderr_the_decided_pairs_and_coverage():
    pairs, noise = sc.reference_pairs(two_seed_reference())
    assert all(v == pytest.approx(0.1) for v in noise.values())
    # One seed at a small budget orders c < b < a < d: a-b (1 unit), a-c (5) and b-c (4) wrong.
    probes = {"a": {100: 3.0}, "b": {100: 2.9}, "c": {100: 2.8}, "d": {100: 4.0}}
    row = sc.configuration(probes, pairs, 1, 30_000, 300_000)
    assert row["compute_share"] == pytest.approx(0.1) and row["subsets"] == 1
    assert row["accuracy"] == pytest.approx(3 / 6) and row["stderr"] == pytest.approx(sem([0, 0, 0, 1, 1, 1]))
    assert (row["separated_pairs"], row["accuracy_separated"]) == (5, pytest.approx(3 / 5))  # all but a-b
    # One seed: no noise measured, nothing decided (the old rule decided the half with the largest gaps).
    assert (row["coverage"], row["accuracy_decided"]) == (0.0, None)
    # Two seeds 0.3 apart (unit 0.3 / sqrt(2) x sqrt(2/2) = 0.212): d's three pairs (>= 1.0) decided, right.
    two = {r: {100: v[100] - 0.15, 101: v[100] + 0.15} for r, v in probes.items()}
    row = sc.configuration(two, pairs, 2, 15_000, 300_000)
    assert (row["coverage"], row["accuracy_decided"]) == (0.5, 1.0)


def test_a_reference_probe_retrained_elsewhere_is_scored_within_its_seed_noise():
    reference = {r: {s: v + 0.001 * s for s, v in seeds.items()} for r, seeds in two_seed_reference().items()}
    _, noise = sc.reference_pairs(reference)
    tol = bench.check_value("a", 0, 0.9293 + 1.2e-7, 0.9293, reference)  # another CPU: 1.2e-7 bpb apart
    assert tol == pytest.approx(0.01 * noise["a"])
    with pytest.raises(bench.Refused, match=r"past the tolerance of 0\.00\d+ bpb \(1% of a's seed std\)"):
        bench.check_value("a", 0, 0.9293 + 2 * tol, 0.9293, reference)


def test_what_a_drift_of_the_tolerance_could_move():
    pairs, _ = sc.reference_pairs(two_seed_reference())
    quiet = sc.sensitivity(pairs, 1e-4)
    assert quiet["flippable_pairs"] == [] and quiet["moves"] == ["de-noised accuracy (through q)", "noise units"]
    assert quiet["units_at_most"] < 0.02 and quiet["q_at_most"] < 0.01  # 1e-4 on a seed std of 0.1
    loud = sc.sensitivity(pairs, 0.06)  # a-b are 0.1 apart: a drift of 0.06 a probe could flip them
    assert loud["flippable_pairs"] == ["a < b"] and loud["moves"][:2] == ["all-pairs accuracy", "decided accuracy"]


def test_the_separated_pairs_say_what_they_cover():
    campaign = load_campaign(DECIDE)
    recipes = {r: x.model_dump(mode="json") for r, x in campaign.recipes.items()}
    assert sc.difference_kinds(recipes["base"], recipes["with-folio"]) == ["source"]
    assert sc.difference_kinds(recipes["base"], recipes["modern-heavy"]) == ["weight"]
    assert sc.difference_kinds(recipes["base"], recipes["symbol-filter"]) == ["filter"]
    assert sc.difference_kinds(recipes["no-dedup"], recipes["with-folio-near-dedup"]) == ["source", "dedup"]
    far = [{"a": "base", "b": "with-folio", "units": 5.0}, {"a": "base", "b": "no-dedup", "units": 1.0}]
    cover = sc.separated_cover(far, recipes)
    assert cover["pairs"] == 1 and cover["kinds"] == {"source": 1} and cover["alone"] == ["source"]


def test_the_choices_read_the_probes_signal_to_noise_alone():
    def probes(spread, sd, seeds):  # four recipes `spread` apart, every seed +-sd
        return {r: {s: i * spread + (sd if s % 2 else -sd) for s in range(seeds)} for i, r in enumerate("abcd")}

    variants = {"x@last": {5000: probes(1.0, 1.0, 4)}, "x@window": {5000: probes(1.0, 0.5, 4)}}
    choice = sc.choose_variant(variants)
    assert choice["chosen"] == "x@window" and choice["snr_mean"]["x@window"] == pytest.approx(
        2 * choice["snr_mean"]["x@last"]
    )
    # At 10% of 300,000 tokens: 5,000 x 6 seeds or 15,000 x 2. Signal-to-noise x sqrt(seeds): 5,000 tokens, means
    # 0-3 over seeds +-1, 1.291 / 1.095 x sqrt(6) = 2.89; 15,000 tokens with means `spread` apart over two seeds
    # +-1, 1.291 spread / 1.414 x sqrt(2) = 1.291 spread: it wins from a spread of 2.24.
    assert sc.choose_budget({5000: probes(1.0, 1.0, 6), 15000: probes(2.5, 1.0, 2)}, 300_000, 0.1)["budget"] == 15000
    pick = sc.choose_budget({5000: probes(1.0, 1.0, 6), 15000: probes(2.0, 1.0, 2)}, 300_000, 0.1)
    assert (pick["budget"], pick["seeds"], pick["separation"]) == (
        5000,
        6,
        pytest.approx(1.291 / 1.0954 * 6**0.5, rel=1e-3),
    )
    # The adaptive mode's budget must afford a first pass and more: 15,000 tokens (two seeds) is out.
    assert (
        sc.choose_budget({5000: probes(1.0, 1.0, 6), 15000: probes(9.0, 1.0, 2)}, 300_000, 0.1, first=3)["budget"]
        == 5000
    )


def test_adaptive_seeds_spend_no_more_than_uniform_seeds_at_each_compute():
    pairs, _ = sc.reference_pairs(two_seed_reference())
    rng = np.random.default_rng(3)
    probes = {
        r: {100 + s: m + 0.05 * rng.normal() for s in range(6)}
        for r, m in {"a": 1.0, "b": 1.02, "c": 1.5, "d": 2.0}.items()
    }
    rows = sc.adaptive_curve(probes, pairs, 5000, 300_000, first=2, orders=20)
    assert [r["seeds"] for r in rows] == [3, 4, 5, 6]
    for r in rows:
        assert r["adaptive"]["compute_share"] <= r["compute_share"] + 1e-12 == r["uniform"]["compute_share"] + 1e-12
        assert 0 <= r["adaptive"]["accuracy"] <= 1 and r["adaptive"]["subsets"] == 20


def test_the_key_follows_the_recipes_and_settings_not_the_smaller_budgets():
    campaign = load_campaign(DECIDE)
    key = ref.reference_key(campaign)
    assert ref.reference_path(campaign).name == f"decide-reference-{key}.json"
    spec = campaign.model_dump()
    spec["recipes"]["base"]["sources"][0]["weight"] = 0.6
    changed = type(campaign).model_validate(spec)
    assert ref.reference_key(changed) != key
    spec = campaign.model_dump()
    spec["probe"]["lr"] = 0.002
    assert ref.reference_key(type(campaign).model_validate(spec)) != key
    spec = campaign.model_dump()
    spec["budget_seeds"][15000] = [100, 101]
    assert ref.reference_key(type(campaign).model_validate(spec)) == key


def reference_file(campaign, folder: Path, seeds: int = 10) -> Path:
    reference = ref.empty_reference(campaign, threads=1)
    for recipe in campaign.recipes:
        reference["probes"][recipe] = {
            str(s): {"bpb": 3.0 + s / 100, "key": f"k{s}", "seconds": 60.0} for s in range(10)
        }
    del reference["probes"]["base"]["9"]
    if seeds == 10:
        reference["probes"]["base"]["9"] = {"bpb": 3.09, "key": "k9", "seconds": 60.0}
    path = ref.reference_path(campaign, folder)
    ref.write_reference(path, reference)
    return path


def test_a_stale_reference_is_refused(tmp_path):
    campaign = load_campaign(DECIDE)
    reference_file(campaign, tmp_path)
    assert bench.stored_reference(campaign, "/tmp/r.db", folder=tmp_path)["key"] == ref.reference_key(campaign)
    spec = campaign.model_dump()
    spec["recipes"]["base"]["dedup"] = {"kind": "none"}
    changed = type(campaign).model_validate(spec)
    with pytest.raises(bench.Refused, match="holds another key: the recipes, trainer or settings changed"):
        bench.stored_reference(changed, "/tmp/r.db", folder=tmp_path)
    # The old file given by name: its key is not this campaign's.
    with pytest.raises(bench.Refused, match=f"not this campaign's {ref.reference_key(changed)}"):
        bench.stored_reference(changed, "/tmp/r.db", path=ref.reference_path(campaign, tmp_path))


def test_a_partial_reference_is_refused_with_the_command_to_finish_it(tmp_path):
    campaign = load_campaign(DECIDE)
    reference_file(campaign, tmp_path, seeds=9)
    with pytest.raises(bench.Refused) as err:
        bench.stored_reference(campaign, "/tmp/r.db", folder=tmp_path)
    assert "lacks 1 of 70 probes (base: 1)" in str(err.value)
    assert "decide_reference.py --campaign examples/decide.yaml --ledger /tmp/r.db" in str(err.value)
    assert ref.missing(json.loads(ref.reference_path(campaign, tmp_path).read_text()), list(campaign.recipes)) == {
        "base": [9]
    }


def test_the_benchmark_exits_2_in_one_line_on_a_stale_reference(tmp_path, monkeypatch, capsys):
    campaign = load_campaign(DECIDE)
    spec = campaign.model_dump()
    spec["recipes"]["base"]["dedup"] = {"kind": "none"}
    stale = reference_file(type(campaign).model_validate(spec), tmp_path)
    monkeypatch.setattr(sys, "argv", ["bench_decide.py", "--reference", str(stale)])
    logger = logging.getLogger("yieldgate")
    level = logger.level  # main() quiets yieldgate's loggers for the script's run: not for the tests after this one
    try:
        with pytest.raises(SystemExit) as done:
            bench.main()
    finally:
        logger.setLevel(level)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("refused: ") and "the recipes, trainer or settings changed" in err


def test_seed_ranges():
    assert ref.parse_seeds("0-9") == list(range(10))
    assert ref.parse_seeds("3-5") == [3, 4, 5]
    assert ref.parse_seeds("0-2,7") == [0, 1, 2, 7]


def test_the_benchmark_writes_the_figures_under_the_keys_the_issue_names():
    from types import SimpleNamespace

    campaign = load_campaign(DECIDE)
    campaign.budget_seeds[5000] = list(range(100, 106))  # the 6 seeds 10% affords, not the 12 of the pool: fast
    reference = json.loads(next(ref.DATA.glob("decide-reference-*.json")).read_text())
    truth = bench.by_recipe(reference)
    rng = np.random.default_rng(0)
    small = [b for b in campaign.budgets if b != max(campaign.budgets)]
    variants = {
        f"{m}@{w}": {
            b: {
                r: {s: float(np.mean(list(v.values()))) + rng.normal(0, 0.02) for s in campaign.seeds_of(b)}
                for r, v in truth.items()
            }
            for b in small
        }
        for m in ("bpb", "val/milton/bpb", "val/shakespeare-modern/bpb")
        for w in ("last", "window")
    }
    out = bench.evaluate(campaign, reference, variants, orders=10)
    done = SimpleNamespace(planned=168, finished=["x"] * 168, skipped=[])
    out.update(
        bench.run_facts(
            {"recipe": "base", "seed": 0, "bpb": 3.12, "stored": 3.12, "tolerance": 1e-4, "seconds": 5.0}, done, 60.0, 2
        )
    )
    out["checks"] = {name: {"met": ok, "what": what} for name, ok, what in bench.checks(out)}
    json.dumps(out)
    for figures in (out, out["adaptive"]):
        assert set(figures["all_pairs"]) == {"accuracy", "stderr"} and 0 <= figures["all_pairs"]["accuracy"] <= 1
        assert figures["all_pairs"]["stderr"] > 0 and 0 <= figures["coverage"] <= 1 and "accuracy" in figures["decided"]
    # The headline is the budget the probes' signal-to-noise picks, at 10% of the compute; adaptive at that compute.
    top = out["headline"]
    assert top["compute_share"] == pytest.approx(0.1) and (top["budget"], top["seeds"]) == (
        out["choice"]["budget"]["budget"],
        out["choice"]["budget"]["seeds"],
    )
    assert out["adaptive"]["compute_share"] <= 0.1 + 1e-12 and out["reference"]["separated"]["pairs"] == 12
    assert out["checks"]["wall time"]["met"] is True
