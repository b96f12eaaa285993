"""Table and text-log importers, on files written by the tools that write them (Lightning's CSVLogger,
pandas/pyarrow) and on a training log in modded-nanogpt's print format, mutated the ways real logs are."""

from __future__ import annotations

import csv
import math

import numpy as np
import pandas as pd
import pytest

from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run


def _rows(steps, val_every):
    """What a Lightning module logs: train rows every step, and sparse val/epoch rows."""
    for s in steps:
        yield s, {"train_loss": 4.0 - s / 100, "lr-AdamW": 1e-3}
        if s % val_every == 0 and s > 0:
            yield s, {"val_loss": 4.1 - s / 100, "epoch": s // val_every}


def _lightning_csv(root, name="run", steps=range(0, 60, 10), val_every=20):
    """A metrics.csv written by Lightning's own CSVLogger (importing lightning costs 6-10 s: the full tier only)."""
    from lightning.pytorch.loggers import CSVLogger

    logger = CSVLogger(root, name=name, version=0)
    for step, metrics in _rows(steps, val_every):
        logger.log_metrics(metrics, step=step)
    logger.save()
    return root / name / "version_0" / "metrics.csv"


def _metrics_csv(root, name="run", steps=range(0, 60, 10), val_every=20):
    """The same file in CSVLogger's layout (columns sorted, an empty cell where a row lacks a key), written with the
    csv module; `test_the_fast_tiers_metrics_csv_is_byte_for_byte_lightnings` keeps the two the same."""
    rows = [{"step": step, **metrics} for step, metrics in _rows(steps, val_every)]
    path = root / name / "version_0" / "metrics.csv"
    path.parent.mkdir(parents=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=sorted({k for row in rows for k in row}))
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.mark.slow  # imports lightning
def test_the_fast_tiers_metrics_csv_is_byte_for_byte_lightnings(tmp_path):
    for steps in (range(0, 60, 10), range(20, 70, 10)):
        assert (
            _metrics_csv(tmp_path / "ours", name=str(steps.start), steps=steps).read_bytes()
            == _lightning_csv(tmp_path / "lightning", name=str(steps.start), steps=steps).read_bytes()
        )


@pytest.mark.slow  # trains or runs a real trainer: the full tier (make test-all)
def test_lightning_csvlogger_sparse_rows_become_steps_and_evals(ledger, cli, tmp_path):
    path = _lightning_csv(tmp_path)
    (res,) = import_run(ledger, "table", [str(path)], ImportOptions(run="lit", tokens_per_step=1000))
    assert res.mapping == {
        "lr-AdamW": "lr",
        "train_loss": "loss",
        "val_loss": "val/loss (eval)",
        "epoch": "imported/epoch",
    }
    steps = ledger.steps("lit")
    assert steps["step"].tolist() == [0, 10, 20, 30, 40, 50]
    assert steps["loss"].tolist() == pytest.approx([4.0, 3.9, 3.8, 3.7, 3.6, 3.5])
    assert steps["tokens"].tolist() == [0, 10000, 20000, 30000, 40000, 50000]
    assert (steps["lr"] == 1e-3).all()
    evals = ledger.evals("lit")
    assert evals["step"].tolist() == [20, 40] and evals["value"].tolist() == pytest.approx([3.9, 3.7])
    assert set(evals["task"]) == {"val"} and set(evals["metric"]) == {"loss"}
    extras = ledger.extras("lit")
    assert extras["key"].unique().tolist() == ["imported/epoch"] and extras["value"].tolist() == [1.0, 2.0]
    assert ledger.run_info("lit")["status"] == "imported"
    assert res.warnings == []
    # The analysis works on the imported run as on a tracked one.
    (tranche,) = cli.json("yield", "lit")
    assert tranche["start_tokens"] == 20000 and tranche["end_tokens"] == 40000
    assert tranche["yield_per_btok"] == pytest.approx(0.2 / 20000 * 1e9)


def test_files_of_a_resumed_run_are_joined_on_step(ledger, tmp_path):
    first = _metrics_csv(tmp_path / "a", steps=range(0, 40, 10))
    # Resumed from step 20: steps 20 and 30 are logged again (the same values), then it goes on.
    second = _metrics_csv(tmp_path / "b", steps=range(20, 70, 10))
    (res,) = import_run(ledger, "table", [str(first), str(second)], ImportOptions(run="r"))
    assert ledger.steps("r")["step"].tolist() == [0, 10, 20, 30, 40, 50, 60]
    assert ledger.evals("r")["step"].tolist() == [20, 40, 60]
    assert res.warnings == [f"{second}:2: 3 repeated row(s) (same step, same values) dropped"]


def test_jsonl_and_parquet_keep_nan_apart_from_absent(ledger, tmp_path):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    # pandas writes NaN as null in both formats; pyarrow and json keep a NaN a NaN, as a diverged run logs it.
    columns = {"global_step": [1, 2, 3], "loss": [3.0, float("nan"), 2.5], "grad_norm": [1.0, None, 0.5]}
    pq.write_table(pa.table({k: pa.array(v, from_pandas=False) for k, v in columns.items()}), tmp_path / "m.parquet")
    (tmp_path / "m.jsonl").write_text(
        "".join(json.dumps({k: v[i] for k, v in columns.items() if v[i] is not None}) + "\n" for i in range(3))
    )
    for kind, name in (("parquet", "m.parquet"), ("jsonl", "m.jsonl")):
        (res,) = import_run(ledger, "table", [str(tmp_path / name)], ImportOptions(run=kind))
        steps = ledger.steps(kind, ["loss", "grad_norm"], nullable=True)
        assert steps["step"].tolist() == [1, 2, 3]
        assert math.isnan(steps["loss"].array._data[1]) and not steps["loss"].isna().iloc[1]
        assert steps["grad_norm"].isna().tolist() == [False, True, False]
        assert res.warnings == [
            f"{tmp_path / name}:{'row 1' if kind == 'parquet' else 2}: loss is nan/inf on 1 row(s); kept as recorded"
        ]


def test_a_bad_cell_is_one_error_naming_file_line_and_column_and_nothing_is_written(ledger, tmp_path):
    path = _metrics_csv(tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace("3.8", "3.8x", 1)
    path.write_text("".join(lines[:2] + ["\n"] + lines[2:]))  # a blank line is skipped, the numbering kept
    with pytest.raises(InputError, match=rf"{path}:5: column 'train_loss': expected a number, got '3.8x'"):
        import_run(ledger, "table", [str(path)], ImportOptions(run="bad"))
    assert ledger.runs().empty


def test_reimporting_the_same_file_changes_nothing(ledger, tmp_path):
    path = _metrics_csv(tmp_path)
    first = import_run(ledger, "table", [str(path)], ImportOptions(run="r"))[0]
    again = import_run(ledger, "table", [str(path)], ImportOptions(run="r"))[0]
    assert not first.unchanged and again.unchanged
    assert len(ledger.steps("r")) == 6 and len(ledger.evals("r")) == 2
    assert len(ledger.meta("r")["imports"]) == 1


# What the W&B UI writes when a chart is exported as CSV: every run on the chart, each metric with the
# bounds of its plotted buckets, and empty cells where a run has no point at that step.
CHART = """Step,giddy-sun-12 - train/loss,giddy-sun-12 - train/loss__MIN,giddy-sun-12 - train/loss__MAX,\
frosty-cloud-3 - train/loss,frosty-cloud-3 - train/loss__MIN,frosty-cloud-3 - train/loss__MAX
0,10.5,10.5,10.5,,,
10,8.2,8.1,8.3,8.0,7.9,8.1
20,7.1,7.0,7.2,6.9,6.8,7.0
"""


@pytest.mark.parametrize("kind", ["table", "wandb"])
def test_a_wandb_chart_export_becomes_one_run_per_run_on_the_chart(ledger, tmp_path, kind):
    path = tmp_path / "chart.csv"
    path.write_text(CHART)
    results = import_run(ledger, kind, [str(path)], ImportOptions(run="chart"))
    assert [r.run for r in results] == ["chart/giddy-sun-12", "chart/frosty-cloud-3"]
    assert results[0].mapping == {"train/loss": "loss"}
    assert ledger.steps("chart/giddy-sun-12")["loss"].tolist() == [10.5, 8.2, 7.1]
    assert ledger.steps("chart/frosty-cloud-3")["step"].tolist() == [10, 20]  # no row where it has no point
    assert any("4 __MIN/__MAX column(s)" in w for w in results[0].warnings)
    # a chart of one run is that run, under --run
    path.write_text("Step,giddy-sun-12 - train/loss\n0,10.5\n10,8.2\n")
    (one,) = import_run(ledger, kind, [str(path)], ImportOptions(run="one"))
    assert one.run == "one" and one.source.endswith("(giddy-sun-12)")


def test_a_gzipped_csv(ledger, tmp_path):
    import gzip

    path = tmp_path / "metrics.csv.gz"
    path.write_bytes(gzip.compress(b"step,loss\n1,3.0\n2,2.5\n"))
    import_run(ledger, "table", [str(path)], ImportOptions(run="gz"))
    assert ledger.steps("gz")["loss"].tolist() == [3.0, 2.5]


def test_runs_lists_a_run_without_evals_beside_one_with(cli, tmp_path):
    chart, log = tmp_path / "chart.csv", tmp_path / "train.log"
    chart.write_text(CHART)
    log.write_text(LOG)
    cli("import", "table", str(chart), "--run", "chart")
    cli("import", "textlog", str(log), "--run", "log", "--pattern", PATTERN)
    out = cli("runs").stdout
    assert "None" not in out and "8.1" in out and "@4 " in out


def test_a_clock_of_date_times_or_unix_times_counts_seconds_from_the_first_row(ledger, tmp_path):
    path = tmp_path / "log.csv"
    path.write_text(
        "timestamp,global_step,loss\n2024-01-01 12:00:00,1,3.2\n2024-01-01 12:00:10,2,3.1\n"
        "2024-01-01 12:01:00.5,3,3.0\n"
    )
    (res,) = import_run(ledger, "table", [str(path)], ImportOptions(run="dt"))
    assert res.mapping["timestamp"] == "wall_s" and ledger.steps("dt")["wall_s"].tolist() == [0, 10, 60.5]
    for unit, scale in (("ms", 1e3), ("us", 1e6), ("ns", 1e9)):  # Unix times in ms, µs, ns
        path.write_text(f"timestamp,step,loss\n{1714564800.5 * scale:.0f},1,3.2\n{1714564802.5 * scale:.0f},2,3.1\n")
        import_run(ledger, "table", [str(path)], ImportOptions(run=unit))
        assert ledger.steps(unit)["wall_s"].tolist() == pytest.approx([0, 2]), unit
    path.write_text("timestamp,step,loss\n2024-01-01 12:00:00,1,3.2\nyesterday-ish,2,3.1\n")
    with pytest.raises(InputError, match=r"log.csv:3: column 'timestamp': expected a date-time or Unix time"):
        import_run(ledger, "table", [str(path)], ImportOptions(run="bad"))
    assert "bad" not in ledger.runs()["name"].tolist()


def test_map_overrides_the_guess(ledger, tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame({"iteration": [1, 2], "ce": [2.0, 1.5], "seen": [10, 20]}).to_csv(path, index=False)
    (res,) = import_run(
        ledger, "table", [str(path)], ImportOptions(run="m", map=["step=iteration", "val/loss=ce", "tokens=seen"])
    )
    assert res.mapping == {"ce": "val/loss (eval)", "seen": "tokens"}
    assert ledger.evals("m")["value"].tolist() == [2.0, 1.5]
    assert ledger.evals("m")["tokens"].tolist() == [10.0, 20.0]
    with pytest.raises(InputError, match="no metric 'nope'"):
        import_run(ledger, "table", [str(path)], ImportOptions(run="m2", map=["step=iteration", "loss=nope"]))


# A training log in modded-nanogpt's format: train lines, and validation lines every 2 steps.
LOG = """\
running with 8 GPUs
step:0/6 val_loss:10.8258 train_time:0ms step_avg:nanms
step:1/6 train_loss:10.8251 train_time:310ms step_avg:nanms
step:2/6 train_loss:9.1234 train_time:620ms step_avg:nanms
step:2/6 val_loss:9.2001 train_time:621ms step_avg:310.50ms
step:3/6 train_loss:8.5000 train_time:930ms step_avg:310.00ms
step:4/6 train_loss:8.0000 train_time:1240ms step_avg:310.00ms
step:4/6 val_loss:8.1000 train_time:1241ms step_avg:310.25ms
"""
PATTERN = (
    r"step:(?P<step>\d+)/\d+ (?:val_loss:(?P<val_loss>\S+) )?(?:train_loss:(?P<loss>\S+) )?"
    r"train_time:(?P<wall_ms>\d+)ms"
)


def _textlog(ledger, tmp_path, text, run="log"):
    path = tmp_path / "train.log"
    path.write_text(text)
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run=run, patterns=[PATTERN], tokens_per_step=100))
    return path, res, ledger.steps(run, nullable=True), ledger.evals(run)


def test_textlog_reads_train_and_validation_lines_with_one_pattern(ledger, tmp_path):
    path, res, steps, evals = _textlog(ledger, tmp_path, LOG)
    assert res.mapping == {"val_loss": "val/loss (eval)", "wall_ms": "wall_s (x0.001)", "loss": "loss"}
    assert steps["step"].tolist() == [0, 1, 2, 3, 4]
    # a step keeps its training line's clock; the validation line after it (1 ms later) gives its eval's
    assert steps["wall_s"].tolist() == [0.0, 0.31, 0.62, 0.93, 1.24]
    assert steps["loss"].isna().tolist() == [True, False, False, False, False]
    assert evals["step"].tolist() == [0, 2, 4] and evals["value"].tolist() == [10.8258, 9.2001, 8.1]
    assert evals["wall_s"].tolist() == [0.0, 0.621, 1.241]
    assert res.warnings == [f"{path}: 1 line(s) matched no pattern and were skipped (first: line 1)"]


def test_textlog_messy_lines_are_kept_sound_and_reported(ledger, tmp_path):
    lines = LOG.splitlines(keepends=True)
    # A timer reset (the clock restarts after warm-up), a nan loss, a repeated line, a truncated last line.
    lines[5] = "step:3/6 train_loss:nan train_time:30ms step_avg:310.00ms\n"
    lines[6] = lines[6].replace("1240ms", "340ms")
    lines[7] = lines[7].replace("1241ms", "341ms")
    messy = "".join(lines[:4] + [lines[3]] + lines[4:]) + "step:5/6 train_loss:7.9 train_ti"
    path, res, steps, evals = _textlog(ledger, tmp_path, messy)
    assert steps["step"].tolist() == [0, 1, 2, 3, 4]
    assert steps["wall_s"].tolist() == pytest.approx([0.0, 0.31, 0.62, 0.621, 0.621 + 0.31])
    # (after the reset the clock counts on from 0.621 s: 30 ms -> 0.621, 340 ms -> 0.931; steps 2 and 4 keep
    # their training lines' clocks, not their validation lines')
    assert math.isnan(steps["loss"].array._data[3]) and not steps["loss"].isna().iloc[3]
    assert steps["tokens"].tolist() == [0, 100, 200, 300, 400]
    assert evals["value"].tolist() == [10.8258, 9.2001, 8.1]
    assert res.warnings == [
        f"{path}:10: last line has no line end (truncated write?); skipped: 'step:5/6 train_loss:7.9 train_ti'",
        f"{path}: 1 line(s) matched no pattern and were skipped (first: line 1)",
        f"{path}:5: 1 repeated row(s) (same step, same values) dropped",
        f"{path}:7: wall_s went back from 0.621 to 0.03 (timer reset or resumed run); later values offset by 0.591",
        f"{path}:7: loss is nan/inf on 1 row(s); kept as recorded",
    ]


def test_textlog_errors_are_one_line(ledger, tmp_path):
    path = tmp_path / "x.log"
    path.write_text("loss 3\n")
    with pytest.raises(InputError, match="no named groups"):
        import_run(ledger, "textlog", [str(path)], ImportOptions(run="x", patterns=[r"loss (\d+)"]))
    with pytest.raises(InputError, match="not a regular expression"):
        import_run(ledger, "textlog", [str(path)], ImportOptions(run="x", patterns=[r"(?P<loss"]))
    with pytest.raises(InputError, match="no line matched any patterns"):
        import_run(ledger, "textlog", [str(path)], ImportOptions(run="x", patterns=[r"step (?P<step>\d+)"]))
    with pytest.raises(InputError, match="no step column"):
        import_run(ledger, "textlog", [str(path)], ImportOptions(run="x", patterns=[r"loss (?P<loss>\d+)"]))
    assert ledger.runs().empty


def test_cli_import_prints_mapping_and_warnings(cli, tmp_path):
    path = tmp_path / "train.log"
    path.write_text(LOG)
    out = cli("import", "textlog", str(path), "--run", "t", "--pattern", PATTERN, "--tokens-per-step", "100").stdout
    assert "t: 5 step rows, 3 evals" in out and "val/loss (eval)" in out and "matched no pattern" in out
    again = cli.json("import", "textlog", str(path), "--run", "t", "--pattern", PATTERN, "--tokens-per-step", "100")
    assert again[0]["unchanged"] is True
    bad = cli("import", "table", str(tmp_path / "none.csv"), "--run", "x", code=2)
    assert "none.csv: no such file" in bad.stderr
    assert np.isfinite(cli.json("yield", "t")[0]["yield_per_btok"])


def test_llamafactory_trainer_log_epochs_and_keras_names(ledger, tmp_path):
    """LLaMA-Factory's trainer_log.jsonl (step `current_steps`, `elapsed_time` as H:MM:SS, `total_tokens` 0 when not
    counted), a per-epoch table with no step column (Keras' CSVLogger), and the `epoch/val_loss` names Keras' W&B
    callback writes."""
    import json

    log = tmp_path / "trainer_log.jsonl"
    log.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in (
                {
                    "current_steps": 10,
                    "total_steps": 30,
                    "loss": 2.4977,
                    "learning_rate": 1e-5,
                    "epoch": 0.1,
                    "percentage": 33.3,
                    "elapsed_time": "0:00:24",
                    "remaining_time": "0:00:48",
                    "total_tokens": 0,
                },
                {
                    "current_steps": 20,
                    "total_steps": 30,
                    "loss": 1.5,
                    "learning_rate": 1e-5,
                    "epoch": 0.2,
                    "percentage": 66.7,
                    "elapsed_time": "1 day, 5:39:46",
                    "remaining_time": "0:00:24",
                    "total_tokens": 0,
                },
            )
        )
    )
    (res,) = import_run(ledger, "table", [str(log)], ImportOptions(run="lf"))
    steps = ledger.steps("lf")
    assert steps["step"].tolist() == [10, 20] and steps["loss"].tolist() == [2.4977, 1.5]
    assert steps["wall_s"].tolist() == [24.0, 86400 + 5 * 3600 + 39 * 60 + 46]
    assert steps["tokens"].isna().all() and any("tokens is 0 on every row" in w for w in res.warnings)
    keras = tmp_path / "training.log"
    keras.write_text("epoch,accuracy,loss,val_accuracy,val_loss\n0,0.5,1.2,0.55,1.1\n1,0.6,0.9,0.6,1.0\n")
    keras = keras.rename(tmp_path / "training.csv")
    (res,) = import_run(ledger, "table", [str(keras)], ImportOptions(run="keras"))
    assert ledger.steps("keras")["step"].tolist() == [0, 1]
    assert any("each row is an epoch" in w for w in res.warnings)
    evals = ledger.evals("keras")
    assert sorted(set(zip(evals["task"], evals["metric"], strict=True))) == [("val", "acc"), ("val", "loss")]
    wb = tmp_path / "wandb_export.csv"
    wb.write_text('"Step","epoch/epoch","epoch/loss","epoch/val_loss"\n"0","0","1.2","1.1"\n"1","1","0.9","1.0"\n')
    import_run(ledger, "table", [str(wb)], ImportOptions(run="wbk"))
    assert ledger.evals("wbk")["value"].tolist() == [1.1, 1.0] and ledger.steps("wbk")["loss"].tolist() == [1.2, 0.9]


def test_yolo_results_scores_are_evaluations_and_the_loss_is_its_terms(ledger, tmp_path):
    """Ultralytics' results.csv: `metrics/mAP50(B)` and the like are the validation set's scores (higher is
    better), the training loss is logged only as its terms (their sum is the loss), `lr/pg0` is the lr."""
    path = tmp_path / "results.csv"
    path.write_text(
        "epoch,time,train/box_loss,train/cls_loss,metrics/precision(B),metrics/mAP50-95(B),val/box_loss,"
        "lr/pg0,lr/pg1\n1,597.18,1.5,2.5,0.74,0.14,1.24,0.0005,0.0005\n"
        "2,1257.6,1.25,1.5,0.68,0.43,1.31,0.001,0.001\n"
    )
    (res,) = import_run(ledger, "table", [str(path)], ImportOptions(run="yolo"))
    steps, evals = ledger.steps("yolo"), ledger.evals("yolo")
    assert steps["loss"].tolist() == [4.0, 2.75] and steps["lr"].tolist() == [0.0005, 0.001]
    scores = evals[evals["metric"] == "mAP50-95(B)"]
    assert scores["task"].tolist() == ["val", "val"] and scores["higher_is_better"].all()
    assert scores["value"].tolist() == [0.14, 0.43]
    assert evals[evals["metric"] == "precision(B)"]["higher_is_better"].all()
    assert not evals[evals["metric"] == "box_loss"]["higher_is_better"].any()
    assert any("loss = train/box_loss + train/cls_loss" in w for w in res.warnings)
