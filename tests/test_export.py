"""Exporters, each read back with the receiving ecosystem's reader (the table by re-importing it)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ledger import EvalRecord
from yieldgate.report.export import export_run, run_table

TOKENS = [4096.0 * s for s in range(1, 7)]


@pytest.fixture
def run(ledger):
    ledger.create_run("r")
    ledger.append_steps(
        "r",
        {
            "step": list(range(1, 7)),
            "tokens": TOKENS,
            "wall_s": [0.5 * s for s in range(1, 7)],
            "loss": [4.0, 3.6, 3.3, 3.1, math.nan, 2.9],
            "lr": [1e-3] * 6,
        },
    )
    ledger.append_steps("r", {"step": [2, 4, 6], "signals/gns": [100.0, 150.0, 210.0]})
    ledger.append_evals(
        "r", [EvalRecord(step=s, task="val", metric="loss", value=v) for s, v in ((2, 3.7), (4, 3.3), (6, 3.0))]
    )
    ledger.append_evals(
        "r",
        [
            EvalRecord(
                step=6, task="lambada_openai", metric="acc", value=0.31, portfolio="lm-eval", portfolio_version="0.4.2"
            )
        ],
    )
    ledger.add_event("r", "diagnosis", {"cause": "schedule", "confidence": 0.7}, start_step=4, end_step=6)
    return "r"


def test_run_table_has_canonical_columns_one_row_per_step(ledger, run):
    table = run_table(ledger, run)
    assert table.columns.tolist() == [
        "step",
        "tokens",
        "wall_s",
        "loss",
        "lr",
        "signals/gns",
        "lambada_openai/acc",
        "val/loss",
    ]
    assert table["step"].tolist() == [1, 2, 3, 4, 5, 6]
    assert table["val/loss"].isna().tolist() == [True, False, True, False, True, False]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_table_round_trip_through_the_importer(ledger, run, tmp_path, suffix):
    dest = tmp_path / f"r{suffix}"
    res = export_run(ledger, run, "table", str(dest))
    assert res.rows == 6
    (back,) = import_run(ledger, "table", [str(dest)], ImportOptions(run="back"))
    assert back.mapping == {
        "tokens": "tokens",
        "wall_s": "wall_s",
        "loss": "loss",
        "lr": "lr",
        "signals/gns": "signals/gns",
        "lambada_openai/acc": "lambada_openai/acc (eval)",
        "val/loss": "val/loss (eval)",
    }
    pd.testing.assert_frame_equal(ledger.steps("back", nullable=True), ledger.steps(run, nullable=True))
    pd.testing.assert_frame_equal(ledger.extras("back"), ledger.extras(run))
    cols = ["step", "task", "metric", "value", "higher_is_better"]
    pd.testing.assert_frame_equal(ledger.evals("back")[cols], ledger.evals(run)[cols])
    assert math.isnan(ledger.steps("back")["loss"].iloc[4])  # a recorded NaN stays a NaN


def test_tensorboard_export_uses_tokens_as_steps(ledger, run, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    res = export_run(ledger, run, "tensorboard", str(tmp_path / "tb"))
    assert res.x_axis == "tokens" and res.yields == 2 and res.diagnoses == 1
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    loss = acc.Scalars("yieldgate/val/loss")
    assert [e.step for e in loss] == [8192, 16384, 24576]
    assert [e.value for e in loss] == pytest.approx([3.7, 3.3, 3.0])
    assert [e.value for e in acc.Scalars("yieldgate/step")] == [1, 2, 3, 4, 5, 6]
    yields = acc.Scalars("yield/per_btok")
    assert [e.step for e in yields] == [16384, 24576]
    assert [e.value for e in yields] == pytest.approx([0.4 / 8192 * 1e9, 0.3 / 8192 * 1e9])
    assert "diagnosis/text_summary" in acc.Tags()["tensors"]


@pytest.mark.slow  # MLflow's client, 1.7 s
def test_mlflow_export_read_back_with_the_client(ledger, run, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    res = export_run(ledger, run, "mlflow", str(tmp_path / "mlruns"))
    uri, run_id = res.dest.split("#")
    client = MlflowClient(tracking_uri=uri)
    history = client.get_metric_history(run_id, "val/loss")
    assert [m.step for m in history] == [8192, 16384, 24576]
    assert [m.value for m in history] == pytest.approx([3.7, 3.3, 3.0])
    assert [m.step for m in client.get_metric_history(run_id, "yield/per_btok")] == [16384, 24576]
    assert client.get_run(run_id).info.run_name == "r"
    from pathlib import Path

    diag = Path(client.download_artifacts(run_id, "yieldgate/diagnoses.json", str(tmp_path))).read_text()
    assert '"cause": "schedule"' in diag


@pytest.mark.slow
def test_wandb_export_is_an_offline_run_the_importer_reads(ledger, run, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    res = export_run(ledger, run, "wandb", str(tmp_path / "wb"))
    assert res.x_axis == "tokens" and res.yields == 2
    (back,) = import_run(ledger, "wandb", [res.dest], ImportOptions(run="wb"))
    steps = ledger.steps("wb")
    assert steps["step"].tolist() == [1, 2, 3, 4, 5, 6] and steps["tokens"].tolist() == TOKENS
    assert ledger.evals("wb").query("task == 'val'")["value"].tolist() == pytest.approx([3.7, 3.3, 3.0])
    assert any("yield series are derived" in w for w in back.warnings)  # recomputed, not imported


def test_export_errors(ledger, run, tmp_path, cli):
    with pytest.raises(InputError, match="writes .csv or .parquet"):
        export_run(ledger, run, "table", str(tmp_path / "r.xlsx"))
    with pytest.raises(InputError, match="^to must be one of"):
        export_run(ledger, run, "excel", str(tmp_path / "r.csv"))
    out = cli.json("export", "r", str(tmp_path / "c.csv"), "--to", "table")
    assert out["rows"] == 6 and np.isfinite(pd.read_csv(tmp_path / "c.csv")["tokens"]).all()
    assert "no run named 'nope'" in cli("export", "nope", str(tmp_path / "x.csv"), "--to", "table", code=2).stderr


@pytest.mark.slow
@pytest.mark.parametrize("to", ["tensorboard", "mlflow", "wandb"])
def test_export_then_import_gives_back_the_same_run(ledger, run, tmp_path, monkeypatch, to):
    """Training loss stays a step column, evaluations stay evaluations, tokens and extras are kept, and a
    name MLflow refuses (`exact_match,strict-match`) comes back unchanged; derived yields are not imported."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("WANDB_SILENT", "true")
    ledger.append_evals(
        run, [EvalRecord(step=6, task="gsm8k", metric="exact_match,strict-match", value=0.125, portfolio="lm-eval")]
    )
    res = export_run(ledger, run, to, str(tmp_path / to))
    if to == "mlflow":
        uri, run_id = res.dest.split("#")
        (back,) = import_run(ledger, "mlflow", [uri, run_id], ImportOptions(run="back"))
    else:
        (back,) = import_run(ledger, to, [res.dest], ImportOptions(run="back"))
    cols = ["step", "tokens", "wall_s", "loss", "lr"]
    pd.testing.assert_frame_equal(ledger.steps("back")[cols], ledger.steps(run)[cols], check_dtype=False, rtol=1e-6)
    assert ledger.extras("back", ["signals/gns"])["value"].tolist() == pytest.approx([100.0, 150.0, 210.0])
    got = ledger.evals("back").set_index(["task", "metric", "step"])["value"].sort_index()
    want = ledger.evals(run).set_index(["task", "metric", "step"])["value"].sort_index()
    pd.testing.assert_series_equal(got, want, rtol=1e-6)
    assert not [k for k in ledger.extra_keys("back") if "yield" in k or k.startswith("imported/")]
    assert any("yield series are derived" in w for w in back.warnings)
