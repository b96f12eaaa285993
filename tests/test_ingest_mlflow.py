"""The MLflow importer, on runs written with `mlflow.log_metric` into a local folder store."""

from __future__ import annotations

import math

import pytest

from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run

pytestmark = pytest.mark.slow  # MLflow's client writes each test's store: 2.5 s


@pytest.fixture
def store(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_ENABLE_TELEMETRY", "false")
    uri = (tmp_path / "mlruns").as_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("sweep")
    ids = {}
    for name, lr in (("lr-small", 1e-4), ("lr-large", 1e-3)):
        with mlflow.start_run(run_name=name) as run:
            for s in range(1, 7):
                mlflow.log_metrics({"train/loss": 4.0 - s * lr * 100, "learning_rate": lr, "tokens": 1000 * s}, step=s)
                if s % 3 == 0:
                    mlflow.log_metric("val/loss", 4.1 - s * lr * 100, step=s)
            mlflow.log_metric("grad_norm", math.nan, step=6)  # a diverged step, logged as MLflow logs it
            ids[name] = run.info.run_id
    yield tmp_path / "mlruns", ids
    mlflow.set_tracking_uri(None)


def test_one_run_by_id_then_yield(ledger, cli, store):
    folder, ids = store
    (res,) = import_run(ledger, "mlflow", [str(folder), ids["lr-large"]], ImportOptions(run="large"))
    assert res.mapping == {
        "wall_time": "wall_s",
        "grad_norm": "grad_norm",
        "learning_rate": "lr",
        "tokens": "tokens",
        "train/loss": "loss",
        "val/loss": "val/loss (eval)",
    }
    steps = ledger.steps("large")
    assert steps["step"].tolist() == [1, 2, 3, 4, 5, 6]
    assert steps["loss"].tolist() == pytest.approx([3.9, 3.8, 3.7, 3.6, 3.5, 3.4])
    assert steps["tokens"].tolist() == [1000.0 * s for s in range(1, 7)]
    assert math.isnan(steps["grad_norm"].iloc[5])
    assert ledger.evals("large")["value"].tolist() == pytest.approx([3.8, 3.5])
    assert res.warnings == [f"mlflow run {ids['lr-large']} step 6: grad_norm is nan/inf on 1 row(s); kept as recorded"]
    (tranche,) = cli.json("yield", "large")
    assert tranche["yield_per_btok"] == pytest.approx(0.3 / 3000 * 1e9)


def test_whole_experiment_becomes_prefixed_runs_once(ledger, cli, store):
    folder, ids = store
    results = import_run(ledger, "mlflow", [folder.as_uri(), "sweep"], ImportOptions(run="sweep", experiment=True))
    assert sorted(r.run for r in results) == ["sweep/lr-large", "sweep/lr-small"]
    assert ledger.evals("sweep/lr-small")["value"].tolist() == pytest.approx([4.07, 4.04])
    again = import_run(ledger, "mlflow", [folder.as_uri(), "sweep"], ImportOptions(run="sweep", experiment=True))
    assert all(r.unchanged for r in again) and len(ledger.steps("sweep/lr-small")) == 6
    # The imported runs compare as tracked ones do.
    result = cli.json("compare", "sweep/lr-small", "sweep/lr-large", "--target-loss", "4.05")
    assert result["tokens_to_target"] == {"sweep/lr-small": 5000.0, "sweep/lr-large": 3000.0}  # interpolated


def test_errors_name_the_run_or_store(ledger, store, tmp_path):
    folder, _ = store
    with pytest.raises(InputError, match="mlflow run 'nope'"):
        import_run(ledger, "mlflow", [str(folder), "nope"], ImportOptions(run="x"))
    with pytest.raises(InputError, match="mlflow experiment 'nope': not found"):
        import_run(ledger, "mlflow", [str(folder), "nope"], ImportOptions(run="x", experiment=True))
    with pytest.raises(InputError, match="no such MLflow store"):
        import_run(ledger, "mlflow", [str(tmp_path / "missing"), "x"], ImportOptions(run="x"))
    assert ledger.runs().empty
