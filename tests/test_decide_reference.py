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

import pytest
from scipy.stats import norm

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


def pair(pairs, a, b):
    return next(p for p in pairs if {p["a"], p["b"]} == {a, b})


def test_reference_pairs_in_noise_units_with_the_chance_ten_seeds_order_them_truly():
    # Two seeds each, 0.2 apart: every recipe's variance is 0.02, the noise unit sqrt(0.02).
    by_recipe = {"a": {0: 1.0, 1: 1.2}, "b": {0: 1.1, 1: 1.3}, "c": {0: 2.0, 1: 2.2}}
    pairs, sigma = bench.reference_pairs(by_recipe)
    assert sigma == pytest.approx(math.sqrt(0.02))
    ab = pair(pairs, "a", "b")
    assert (ab["a"], ab["b"]) == ("a", "b") and ab["diff"] == pytest.approx(0.1)
    assert ab["units"] == pytest.approx(0.1 / math.sqrt(0.02))
    # The difference of two 2-seed means has a std of sigma * sqrt(1/2 + 1/2) = sigma.
    assert ab["q"] == pytest.approx(norm.cdf(0.1 / math.sqrt(0.02)))
    assert pair(pairs, "b", "c")["units"] == pytest.approx(0.9 / math.sqrt(0.02))
    assert [p["units"] for p in pairs] == sorted(p["units"] for p in pairs)


def test_denoised_accuracy_takes_out_the_references_own_noise():
    q = [0.75, 1.0, 1.0]
    # A probe right on every pair agrees with the reference 0.75 of the time on the first: de-noised, it is 1.
    assert bench.denoised([0.75, 1.0, 1.0], q) == pytest.approx(1.0)
    # A coin agrees half the time everywhere: 0.5, where accuracy / ceiling would say 0.5 / 0.917.
    assert bench.denoised([0.5, 0.5, 0.5], q) == pytest.approx(0.5)
    # Wrong on the first pair, right on the others: (0 - 0.25 + 1 + 1) / (0.5 + 1 + 1) = 0.7.
    assert bench.denoised([0.0, 1.0, 1.0], q) == pytest.approx(0.7)
    assert bench.denoised([1.0, 1.0, 1.0], q) == 1.0  # (0.75 + 1 + 1) / 2.5 = 1.1, clipped
    assert bench.denoised([1.0], [0.5]) is None  # a pair the reference orders at random says nothing


def test_decided_half_adds_the_largest_gaps_until_half_are_decided():
    means = {"a": 0.0, "b": 1.0, "c": 3.0, "d": 7.0}  # gaps: a-d 7, b-d 6, c-d 4, a-c 3, b-c 2, a-b 1
    f = frozenset
    assert bench.decided_half(means, None, 6) == {f("ad"), f("bd"), f("cd")}
    assert bench.decided_half(means, {f("ab")}, 6) == {f("ab"), f("ad"), f("bd")}
    beyond = {f("ab"), f("ac"), f("ad"), f("bc")}
    assert bench.decided_half(means, beyond, 6) == beyond  # more than half beyond noise: those


def test_a_configuration_scores_all_pairs_the_separated_ones_and_the_decided_half():
    # The reference: a < b < c < d, sigma 0.1 (two seeds 0.1414 apart); a-b 0.1 apart (1 unit), the rest >= 3 units.
    s = 0.1 / math.sqrt(2)
    reference = {r: {0: m - s, 1: m + s} for r, m in {"a": 1.0, "b": 1.1, "c": 1.5, "d": 2.0}.items()}
    pairs, sigma = bench.reference_pairs(reference)
    assert sigma == pytest.approx(0.1)
    # One seed at a small budget orders c < b < a < d: a-b (1 unit), a-c (5) and b-c (4) wrong.
    probes = {"a": {100: 3.0}, "b": {100: 2.9}, "c": {100: 2.8}, "d": {100: 4.0}}
    row = bench.configuration(probes, pairs, 1, 30_000, 300_000)
    assert row["compute_share"] == pytest.approx(0.1) and row["subsets"] == 1
    assert row["accuracy"] == pytest.approx(3 / 6)  # a-d, b-d, c-d right
    assert (row["separated_pairs"], row["accuracy_separated"]) == (5, pytest.approx(3 / 5))  # all but a-b
    # Deciding half (3 of 6) by the probes' gaps: c-d 1.2, b-d 1.1, a-d 1.0, all right.
    assert (row["decided"], row["accuracy_decided"]) == (0.5, 1.0)
    # Two seeds: each k-subset scored, then averaged.
    probes2 = {r: {100: v[100], 101: v[100] + (0.01 if r == "c" else 0.0)} for r, v in probes.items()}
    assert bench.configuration(probes2, pairs, 2, 15_000, 300_000)["compute_share"] == pytest.approx(0.1)


def test_the_headline_is_the_most_compute_at_a_tenth_then_the_most_seeds():
    rows = [
        {"budget": 15_000, "seeds": 1, "compute_share": 0.05},
        {"budget": 30_000, "seeds": 1, "compute_share": 0.10},
        {"budget": 15_000, "seeds": 2, "compute_share": 0.10},
        {"budget": 15_000, "seeds": 3, "compute_share": 0.15},
    ]
    assert bench.headline(rows) == rows[2]
    assert bench.anchor(0.08) == pytest.approx(0.82) and bench.anchor(0.05) == pytest.approx(0.81)
    assert bench.anchor(0.3) is None and bench.anchor(0.01) is None  # beyond DataDecide's anchors


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


def test_a_probe_that_does_not_reproduce_its_stored_value_is_refused():
    bench.check_value("base", 0, 3.0123, 3.0123)
    with pytest.raises(bench.Refused, match="retrains to 3.0123000000000006 bpb, the stored reference holds 3.0123"):
        bench.check_value("base", 0, 3.0123000000000006, 3.0123)


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


def test_the_report_judges_the_headline_and_writes_json(tmp_path):
    from types import SimpleNamespace

    campaign = load_campaign(DECIDE)
    s = 0.1 / math.sqrt(2)
    reference = ref.empty_reference(campaign, threads=1)
    reference["probes"] = {
        r: {"0": {"bpb": m - s, "key": "k", "seconds": 60.0}, "1": {"bpb": m + s, "key": "k", "seconds": 30.0}}
        for r, m in {"a": 1.0, "b": 1.1, "c": 1.5, "d": 2.0}.items()
    }
    # Two seeds 0.3 apart (a noise unit of 0.21 for a difference of 2-seed means): c < b < a within it, d beyond.
    means = {"a": 3.05, "b": 2.95, "c": 2.85, "d": 4.05}
    small = {r: {100: m - 0.15, 101: m + 0.15} for r, m in means.items()}
    done = SimpleNamespace(planned=8, finished=["x"] * 8, skipped=[])
    checked = {"recipe": "a", "seed": 0, "bpb": 1.0 - s, "seconds": 5.0}
    out = bench.report(campaign, reference, checked, {15_000: small}, done, 60.0, 2)
    json.dumps(out)
    assert out["reference"]["seconds"] == 360.0 and out["separated_pairs"] == 5
    assert (out["headline"]["budget"], out["headline"]["seeds"]) == (15_000, 2)
    checks = out["checks"]
    assert checks["de-noised accuracy"]["met"] is False and "misordered most" in checks["de-noised accuracy"]["what"]
    assert checks["pairs >= 3 noise units apart"]["what"].startswith("60.0% of 5 pairs (target >= 95%): misordered")
    assert checks["decided pairs, deciding >= half"]["met"] is True  # the three pairs of d, beyond noise, right
    assert out["headline"]["decided"] == 0.5 and out["headline"]["accuracy_decided"] == 1.0
    assert checks["probes' wall time"]["met"] is True and out["pass"] is False
