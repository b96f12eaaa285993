"""`yieldgate demo --quick` trains two real models into a ledger, and what it prints comes from that ledger."""

from __future__ import annotations

import numpy as np

from yieldgate.demo import run_demo
from yieldgate.ledger import Ledger


def test_quick_demo_records_two_real_runs(ledger_path, cli):
    result = cli("demo", "--quick")
    assert "Validation loss at equal tokens" in result.stdout
    with Ledger(ledger_path, readonly=True) as led:
        runs = led.runs().set_index("name")
        assert set(runs.index) == {"demo/batch-8", "demo/batch-32"}
        assert (runs["status"] == "finished").all()
        for name in runs.index:
            steps = led.steps(name)
            assert np.all(np.diff(steps["tokens"]) > 0)
            # Real training: the loss falls from its initial ln(256) ~ 5.5 on held-out text.
            val = led.evals(name).query("task == 'val' and metric == 'loss'")["value"].to_numpy()
            assert val[0] > 5.0 and val[-1] < val[0] - 1.0
            assert led.manifest(name).optimisation.batch_size == int(name.split("-")[-1])
    listed = {r["name"]: r for r in cli.json("runs")}
    assert listed["demo/batch-32"]["steps"] < listed["demo/batch-8"]["steps"]
    diff = cli.json("manifest", "diff", "demo/batch-8", "demo/batch-32")["differences"]
    assert {d["field"] for d in diff} == {"optimisation.batch_size", "optimisation.microbatch_size"}


def test_demo_summary_is_read_back_from_the_ledger(tmp_path):
    path = tmp_path / "d.db"
    result = run_demo(str(path), quick=True)
    with Ledger(path, readonly=True) as led:
        for name, summary in result["runs"].items():
            steps = led.steps(name)
            assert summary["tokens"] == steps["tokens"].iloc[-1]
            assert summary["tokens_per_s"] == steps["tokens"].iloc[-1] / steps["wall_s"].iloc[-1]
            assert summary["final_val_loss"] == led.evals(name).query("metric == 'loss'")["value"].iloc[-1]
