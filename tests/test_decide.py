"""Deciding between recipes at a fraction of the compute (`benchmarks/bench_decide.py`): the smoothed score, the
abstention and compute of `analysis.campaign.decision_accuracy`, bits per byte on the same bytes under two
tokenizers (`ProbeConfig.eval_documents`), and per-budget seeds."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from yieldgate.analysis.campaign import BPB, probe_scores
from yieldgate.analysis.ranking import beyond_seed_noise, decision_accuracy, rank
from yieldgate.data.recipe import resolve
from yieldgate.errors import InputError
from yieldgate.manifest import Recipe
from yieldgate.probe.campaign import load_campaign, plan
from yieldgate.probe.config import ProbeConfig
from yieldgate.probe.parts import Portfolio


def evals_at(values: dict[int, tuple[float, float]]) -> pd.DataFrame:
    """Evaluation records of one probe: step -> (bpb on source a, bpb on source b)."""
    rows = []
    for step, (a, b) in values.items():
        rows += [
            {"step": step, "tokens": 100 * step, "task": f"val/{s}", "metric": "bpb", "value": v}
            for s, v in (("a", a), ("b", b))
        ]
        rows.append({"step": step, "tokens": 100 * step, "task": "val", "metric": "loss", "value": a + b})
    return pd.DataFrame(rows)


def test_the_score_is_the_mean_over_the_last_evaluations():
    evals = evals_at({0: (9.0, 9.0), 10: (4.0, 6.0), 20: (3.0, 5.0), 30: (2.0, 3.0)})
    assert probe_scores(evals, ["a", "b"])[BPB] == 2.5  # the last evaluation: (2 + 3) / 2
    assert probe_scores(evals, ["a", "b"], last_evals=2)[BPB] == 3.25  # (2.5 + 4) / 2
    assert probe_scores(evals, ["a", "b"], last_evals=3)[BPB] == 11.5 / 3  # (2.5 + 4 + 5) / 3
    assert probe_scores(evals, ["a"], last_evals=2)[BPB] == 2.5  # (2 + 3) / 2, source a alone


def test_a_small_budget_abstains_on_the_pairs_its_seeds_call_a_tie_and_pays_for_every_seed():
    largest = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    # 100 tokens x 4 seeds order every pair as the largest budget does but a-b, and decide three pairs: a-b (wrong),
    # c-d and a-d (right); the other three are ties there.
    small = {"a": 1.6, "b": 1.5, "c": 3.0, "d": 4.0}
    decided = {frozenset("ab"), frozenset("cd"), frozenset("ad")}
    out = decision_accuracy({100: small, 1000: largest}, set(), resolved={100: decided}, seeds={100: 4})["100"]
    assert out["pairs"] == 6 and out["accuracy"] == 5 / 6  # only a-b is ordered against the largest budget
    assert out["decided_pairs"] == 3 and out["abstained"] == 0.5
    assert out["accuracy_decided"] == 2 / 3  # c < d and a < d right, b < a wrong
    assert out["compute_share"] == 0.4 and out["share_of_largest"] == 0.1  # 4 probes of 100 tokens over one of 1000
    nothing = decision_accuracy({100: small, 1000: largest}, set(), resolved={100: set()}, seeds={100: 1})["100"]
    assert nothing["abstained"] == 1.0 and nothing["accuracy_decided"] is None and nothing["compute_share"] == 0.1
    assert "abstained" not in decision_accuracy({100: small, 1000: largest}, set())["100"]  # asked for, or absent


def test_abstention_follows_the_rankings_paired_interval():
    # Seeds 0-3: b - a = +0.10 on every seed (resolved however noisy the seeds are), c - a flips sign (a tie).
    scores = {
        "a": {0: 1.0, 1: 2.0, 2: 1.5, 3: 1.2},
        "b": {0: 1.1, 1: 2.1, 2: 1.6, 3: 1.3},
        "c": {0: 0.9, 1: 2.3, 2: 1.3, 3: 1.4},
    }
    pairs = {frozenset((p["a"], p["b"])): p["resolved"] for p in rank(scores, lower_is_better=True, level=0.9)["pairs"]}
    assert pairs == {frozenset("ab"): True, frozenset("ac"): False, frozenset("bc"): False}


def test_abstention_within_the_seeds_pooled_noise():
    # Two seeds each: every recipe's two seeds are 0.2 apart (variance 0.02), so the noise of a difference of two
    # 2-seed means is sqrt(0.02) * sqrt(2 / 2) = 0.1414. Means: a 1.0, b 1.1, c 1.3: a-b (0.1) is within it, a-c
    # (0.3) and b-c (0.2) beyond.
    scores = {"a": {0: 0.9, 1: 1.1}, "b": {0: 1.0, 1: 1.2}, "c": {0: 1.2, 1: 1.4}}
    assert beyond_seed_noise(scores) == {frozenset("ac"), frozenset("bc")}
    # One recipe's seeds spread out more: the pooled variance is (0.02 + 0.02 + 0.18) / 3 = 0.0733, the unit
    # 0.2708: only a-c is beyond.
    assert beyond_seed_noise({**scores, "c": {0: 1.0, 1: 1.6}}) == {frozenset("ac")}
    assert beyond_seed_noise({"a": {0: 1.0}, "b": {0: 3.0}}) is None  # one seed: no spread to measure
    assert beyond_seed_noise({**scores, "c": {0: 1.2, 1: float("nan")}}) is None  # a diverged probe leaves one


def recipe(**over) -> Recipe:
    spec = {
        "sources": [{"name": "shakespeare-modern", "weight": 0.5}, {"name": "milton", "weight": 0.5}],
        "tokenizer": {"name": "bpe-512", "vocab_size": 512},
        **over,
    }
    return Recipe.model_validate(spec)


@pytest.mark.slow
def test_whole_documents_score_the_same_bytes_under_two_tokenizers():
    plain = resolve(recipe(), max_chars_per_source=60_000)
    filtered = resolve(
        recipe(filters=[{"kind": "max_symbol_ratio", "params": {"max": 0.06}}]), max_chars_per_source=60_000
    )
    assert plain.tokenizer_hash != filtered.tokenizer_hash  # the filter changes the tokenizer's training text
    cfg = ProbeConfig(tokens=1000, eval_seed=0, eval_documents=3, eval_sources=("shakespeare-modern", "milton"))
    scored_bytes = {}
    for data in (plain, filtered):
        portfolio = Portfolio(data, cfg)
        for name, rows in portfolio.sets.items():
            src, picked = data.sources[name], portfolio.documents[name]
            assert len(picked) == 3
            # Every token of the chosen documents but each one's first is scored exactly once, and the bytes are
            # the documents' less those first tokens' (one character per byte in a byte-level BPE token's string).
            assert sum(int(r.scored.sum()) for r in rows) == sum(len(src.held_out[i]) - 1 for i in picked)
            first = [len(data.tokenizer.id_to_token(int(src.held_out[i][0]))) for i in picked]
            assert sum(r.nbytes for r in rows) == pytest.approx(sum(src.held_out_bytes[i] for i in picked) - sum(first))
            scored_bytes.setdefault(name, []).append(([src.held_out_bytes[i] for i in picked], sum(first)))
    for name, ((docs_a, first_a), (docs_b, first_b)) in scored_bytes.items():
        assert docs_a == docs_b, name  # the same documents under both tokenizers
        assert 3 <= first_a <= 3 * 8 and 3 <= first_b <= 3 * 8  # differing only in each document's first token
    windows = ProbeConfig(tokens=1000, eval_seed=0, eval_sequences=3, eval_sources=("shakespeare-modern", "milton"))
    assert all(len(rows) == 3 for rows in Portfolio(plain, windows).sets.values())  # the default is unchanged


def write(tmp_path, spec: dict):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_budgets_take_their_own_seeds_and_old_keys_stay(tmp_path):
    spec = {
        "name": "k",
        "recipes": {"a": {"sources": [{"name": "milton"}]}},
        "seeds": [0, 1],
        "budgets": [1000, 2000],
        "eval_sources": ["milton"],
    }
    specs = plan(load_campaign(write(tmp_path, spec)))
    # The keys `plan` gave these probes before per-budget seeds and `eval_documents` existed: a ledger's finished
    # probes are still found.
    assert [(s.run, s.key) for s in specs] == [
        ("k/a/s0/t2000", "e763b5d519bea4233c32"),
        ("k/a/s1/t2000", "8bf17b380455abc4c475"),
        ("k/a/s0/t1000", "33dd68927d1baf62a65d"),
        ("k/a/s1/t1000", "9aeaf5c993e56bf84bfa"),
    ]
    more = plan(load_campaign(write(tmp_path, {**spec, "budget_seeds": {1000: 3}})))
    assert [s.run for s in more if s.tokens == 1000] == ["k/a/s0/t1000", "k/a/s1/t1000", "k/a/s2/t1000"]
    assert [s.key for s in more if s.tokens == 2000] == [s.key for s in specs if s.tokens == 2000]
    docs = plan(load_campaign(write(tmp_path, {**spec, "probe": {"eval_documents": 4}})))
    assert not {s.key for s in docs} & {s.key for s in specs}  # scored on other text: other probes
    for bad, message in [
        ({"budget_seeds": {3000: 2}}, "budget_seeds names budgets not in budgets"),
        ({"budget_seeds": {1000: [5, 5]}}, r"budget_seeds\[1000\] repeat a value"),
        ({"probe": {"eval_documents": 0}}, "eval_documents"),
    ]:
        with pytest.raises(InputError, match=message):
            load_campaign(write(tmp_path, {**spec, **bad}))
