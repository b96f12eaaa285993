"""The gate cites the mixture regression (issue #34): a gate decision on runs of an imported results campaign with
enough mixtures carries the regression's proposed mixture, its predicted value and interval and its cross-validated
rho in its evidence, and `yieldgate gate` shows it in one line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
POLICY = str(ROOT / "examples" / "policy.yaml")


def loss(code: float) -> float:
    """Lowest at a code weight of 0.7125: -0.5 + 1.6 (w - 0.4) = 0."""
    return 3.0 - 0.5 * code + 0.8 * (code - 0.4) ** 2


def mixtures_table(path: Path, n: int) -> Path:
    """`n` mixtures of code and prose at N = 1000 (three token counts, one seed), the first four also at N = 8000."""
    rows = []
    for i in range(n):
        code = 0.05 + 0.9 * i / (n - 1)
        w = {"w:code": code, "w:prose": 1 - code}
        noise = 0.002 * ((i * 7) % 5 - 2)
        sizes = [(1000, 10_000, 1.0), (1000, 20_000, 0.5), (1000, 40_000, 0.0)]
        if i < 4:
            sizes.append((8000, 160_000, -1.0))
        for params, tokens, above in sizes:
            rows.append(
                {"recipe": f"m{i:02d}", "params": params, "tokens": tokens, "seed": 0, "metric": "val/loss"}
                | {"value": loss(code) + above + noise, **w}
            )
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_the_gate_cites_the_mixture_regression(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # the checks' table on one line a row: its detail read whole
    cli("import", "results", str(mixtures_table(tmp_path / "r.csv", 12)), "--campaign", "mix")
    decision = cli.json("gate", "mix/m03/s0/n1000", "--policy", POLICY)
    cited = decision["evidence"]["mixture_regression"]
    assert (cited["campaign"], cited["metric"], cited["available"], cited["runs"], cited["params"]) == (
        "mix",
        "val/loss",
        True,
        12,
        1000,
    )
    # The proposal moves towards the true optimum (code 0.71), away from the runs' mean mixture (code 0.5).
    assert cited["mixture"]["code"] > 0.6 and sum(cited["mixture"].values()) == pytest.approx(1)
    lo, hi = cited["interval"]
    assert lo <= cited["predicted"] <= hi and cited["level"] == 0.9
    assert cited["cv_rho"] > 0.9
    note = next(c for c in decision["checks"] if c["name"] == "mixture regression")
    assert note["passed"] is None  # a note: it decides nothing
    shown = cli("gate", "mix/m03/s0/n1000", "--policy", POLICY).stdout
    # One row of the gate's checks: the same line as in the evidence.
    assert f"mixture regression note {note['detail']}" in " ".join(shown.replace("│", " ").split())
    assert "proposes code 0.7" in note["detail"] and "cross-validated rho 1.000" in note["detail"]


def test_too_few_mixtures_are_said_not_fitted(tmp_path, cli):
    cli("import", "results", str(mixtures_table(tmp_path / "r.csv", 6)), "--campaign", "mix")
    decision = cli.json("gate", "mix/m03/s0/n1000", "--policy", POLICY)
    cited = decision["evidence"]["mixture_regression"]
    assert cited["available"] is False and "needs 10 or more" in cited["reason"]
    assert "mixture" not in cited


def test_a_run_of_no_results_campaign_cites_nothing(tmp_path, cli):
    rows = [
        {"recipe": "a", "params": 1000, "tokens": t, "seed": 0, "metric": "val/loss", "value": 4.0 - t / 1e5}
        for t in (10_000, 20_000, 40_000)
    ]
    path = tmp_path / "r.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    cli("import", "results", str(path), "--campaign", "plain")  # no w: columns: no mixtures to fit
    decision = cli.json("gate", "plain/a/s0/n1000", "--policy", POLICY)
    assert "mixture_regression" not in decision["evidence"]
    assert all(c["name"] != "mixture regression" for c in decision["checks"])
