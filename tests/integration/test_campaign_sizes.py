"""Campaigns across model sizes, on real probes of the reference GPT: an L(N, D) law fitted on three sizes predicts the
fourth, `plan` sizes a model from it, and rank transfer counts what the ledger's evaluations say."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from yieldgate.analysis.campaign import probe_runs
from yieldgate.analysis.campaign_sizes import fit_recipe, scaling_points
from yieldgate.ledger import Ledger

pytestmark = pytest.mark.slow  # real trainings: `make test-all`

CLEAN = {
    "sources": [{"name": "shakespeare-modern"}],
    "tokenizer": {"name": "bpe-512", "vocab_size": 512},
    "filters": [{"kind": "min_chars", "params": {"min": 200}}],
    "dedup": {"kind": "exact"},
}
SIZES = [
    {"layers": 1, "width": 16, "heads": 2},
    {"layers": 1, "width": 32, "heads": 4},
    {"layers": 2, "width": 48, "heads": 4},
    {"layers": 3, "width": 64, "heads": 4},
]
POLICY = {
    "name": "sizes",
    "version": 1,
    "requirements": {"min_yield_per_btok": 100, "max_epochs": 4},
    "stages": [
        {"name": "probe", "tokens": 200_000, "compute_share": 0.05},
        {"name": "pilot", "tokens": 2_000_000, "compute_share": 0.15},
        {"name": "full", "tokens": 20_000_000, "compute_share": 0.8},
    ],
}


def write(path: Path, spec: dict) -> Path:
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def sizes(tmp_path_factory) -> Path:
    """Four sizes (N = 11,504 to 182,848) x 2 seeds of one recipe, 200,000 tokens each (~2 min on 2 cores)."""
    from typer.testing import CliRunner

    from yieldgate.cli import app

    root = tmp_path_factory.mktemp("sizes")
    spec = {
        "name": "sizes",
        "recipes": {"clean": CLEAN},
        "seeds": 2,
        "budgets": [200_000],
        "models": SIZES,
        "probe": {"batch_size": 16, "evals": 10, "eval_sequences": 24},
        "data": {"max_chars_per_source": 300_000},
    }
    ledger = root / "l.db"
    out = CliRunner().invoke(app, ["--ledger", str(ledger), "probe", str(write(root / "c.yaml", spec)), "--json"])
    assert out.exit_code == 0, out.output
    return ledger


def test_a_law_fitted_on_three_sizes_predicts_the_fourth(sizes):
    with Ledger(sizes, readonly=True) as led:
        points = scaling_points(led, probe_runs(led, "sizes"))
        summary = led.campaign("sizes")["summary"]
    assert sorted(points["params"].unique()) == [11_504, 29_152, 81_216, 182_848]
    largest = points["params"].max()
    law = fit_recipe(points[points["params"] < largest], "clean", level=0.9, boots=100)
    assert law.sizes == [11_504, 29_152, 81_216] and law.resampled == "probes" and law.alpha > 0 and law.beta > 0
    held = points[points["params"] == largest].sort_values("tokens").groupby("run").tail(1)
    measured = held["loss"].to_numpy()
    p = law.predict(largest, float(held["tokens"].iloc[0]))
    # Each seed's last stable-phase loss at the held-out size falls where one probe's measured loss should fall.
    for value in measured:
        assert p.measured_interval[0] <= value <= p.measured_interval[1], (value, p)
    # And the law is off by less than 2% of the loss: the four sizes span 0.26 nats at this point.
    assert abs(p.loss - measured.mean()) < 0.02 * measured.mean(), (p.loss, measured)
    fitted = summary["scaling"]["clean"]
    assert fitted["available"] and fitted["sizes"] == [11_504, 29_152, 81_216, 182_848]
    assert fitted["prediction"]["params"] == largest and fitted["prediction"]["tokens"] == 400_000


def test_the_campaign_and_plan_show_the_law(sizes, tmp_path, cli_for):
    cli = cli_for(sizes)
    shown = cli("campaign", "sizes").stdout
    assert "L(N, D) clean = E + A/N^alpha + B/D^beta over 4 sizes, 8 probes" in shown
    policy = write(tmp_path / "p.yaml", POLICY)
    plan = cli.json("plan", "sizes/clean/*/*/m3x64", "--policy", str(policy), "--flops", "1e13", "--params", "2000000")
    sizing = plan["sizing"]
    assert sizing["scaling"] == "sizes/clean" and sizing["params"] == 2_000_000
    # Probes this small fit E to ~0: the law is not identified, so no compute-optimal size is named (it once
    # advised "train N = 86"), and the plan says which probes would identify it.
    assert sizing["flops"] is None and "E fitted to ~0" in sizing["flops_refused"]["reason"]
    assert "larger ones (past N = 182,848" in sizing["flops_refused"]["reason"]
    # 2M parameters on 200k tokens is 0.1 tokens per parameter: far below any optimum.
    assert sizing["stages"][0]["undertrained"] and "would leave the model undertrained" in sizing["stages"][0]["advice"]
    text = cli("plan", "sizes/clean/*/*/m3x64", "--policy", str(policy), "--flops", "1e13").stdout
    assert "compute-optimal at" not in text and "train N =" not in text and "planned model: N = 182,848" in text
    assert "note: no compute-optimal size for 1e+13 FLOPs: the law is not identified" in text


def test_rank_transfer_matches_a_count_from_the_ledger(tmp_path, cli, ledger_path):
    shuffled = lambda share: {**CLEAN, "sources": [{"name": "shakespeare-modern", "shuffled_share": share}]}  # noqa: E731
    spec = {
        "name": "transfer",
        "recipes": {"clean": CLEAN, "quarter": shuffled(0.25), "half": shuffled(0.5)},
        "seeds": 2,
        "budgets": [48_000],
        "models": [SIZES[0], SIZES[2]],
        "probe": {"batch_size": 16, "evals": 4, "eval_sequences": 24},
        "data": {"max_chars_per_source": 300_000},
    }
    out = cli.json("probe", str(write(tmp_path / "t.yaml", spec)), "--workers", "2")
    assert not out["run"]["failed"]
    summary = out["summary"]
    assert summary["scaling"] == {
        r: {"available": False, "reason": "2 model size(s) finished; an L(N, D) fit needs probes of 3 or more"}
        for r in ("clean", "half", "quarter")
    }
    # The count: each recipe's mean over seeds of its last evaluation's val/bpb, per size; pairs ordered alike.
    with Ledger(ledger_path, readonly=True) as led:
        bpb: dict[str, dict[str, list[float]]] = {}
        for run in led.runs()["name"]:
            probe = led.meta(run)["probe"]
            evals = led.evals(run)
            last = evals[(evals["step"] == evals["step"].max()) & (evals["task"] == "val") & (evals["metric"] == "bpb")]
            size = "{layers}x{width}".format(**probe["model"])
            bpb.setdefault(size, {}).setdefault(probe["recipe"], []).append(float(last["value"].iloc[0]))
        small_n = led.manifest("transfer/clean/s0/t48000/m1x16").model.non_embedding_params
    mean = {size: {r: np.mean(v) for r, v in recipes.items()} for size, recipes in bpb.items()}
    pairs = list(itertools.combinations(sorted(mean["1x16"]), 2))
    small, large = mean["1x16"], mean["2x48"]
    agree = sum(np.sign(small[a] - small[b]) == np.sign(large[a] - large[b]) for a, b in pairs)
    entry = summary["rank_transfer"]["48000"][str(small_n)]
    assert (entry["size"], entry["largest"], entry["pairs"]) == ("1x16", "2x48", 3)
    assert entry["accuracy"] == pytest.approx(agree / 3)
    assert 0 <= entry["resolved_pairs"] <= 3
    shown = cli("campaign", "transfer").stdout
    assert f"rank transfer at 48,000 tokens: 1x16 (N = {small_n:,}" in shown
    stored = json.loads(cli("campaign", "transfer", "--json").stdout)["summary"]
    assert stored["rank_transfer"] == summary["rank_transfer"]
    # Two sizes are too few for a law: plan refuses a FLOP budget in one line.
    policy = write(tmp_path / "p.yaml", POLICY)
    err = cli("plan", "transfer/clean/*/*/m2x48", "--policy", str(policy), "--flops", "1e12", code=2).stderr
    assert "needs an L(N, D) law" in err and len(err.strip().splitlines()) == 1
