"""The W&B importer, on an offline run written by `wandb.init(mode="offline")` + `wandb.log`."""

from __future__ import annotations

import math
import shutil
import time

import pandas as pd
import pytest

from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ingest.types import Warnings
from yieldgate.ingest.wandb import finished, read_log, run_logs


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory):
    wandb = pytest.importorskip("wandb")
    tmp = tmp_path_factory.mktemp("wandb")
    mp = pytest.MonkeyPatch()
    mp.setenv("WANDB_SILENT", "true")
    mp.setenv("WANDB_MODE", "offline")
    run = wandb.init(mode="offline", dir=str(tmp), project="yieldgate", name="r1")
    for s in range(1, 9):
        wandb.log({"train/loss": 4.0 - s / 10, "train/lr": 1e-3, "train/tokens": 256 * s}, step=s)
        if s % 4 == 0:
            wandb.log({"val/loss": 4.1 - s / 10, "samples": wandb.Table(columns=["a"], data=[[1]])}, step=s)
    wandb.log({"train/loss": math.nan}, step=9)
    run.finish()
    mp.undo()
    (folder,) = (tmp / "wandb").glob("offline-run-*")
    (log,) = run_logs(folder)
    for _ in range(600):  # wandb's core process finishes writing the log after finish() returns
        if finished(log):
            break
        time.sleep(0.05)
    return folder


@pytest.mark.slow  # trains or runs a real trainer: the full tier (make test-all)
def test_offline_run_folder_imports_steps_and_evals(ledger, cli, offline_run):
    (res,) = import_run(ledger, "wandb", [str(offline_run)], ImportOptions(run="wb"))
    assert res.mapping == {
        "train/loss": "loss",
        "train/lr": "lr",
        "train/tokens": "tokens",
        "_runtime": "wall_s",
        "val/loss": "val/loss (eval)",
    }
    steps = ledger.steps("wb")
    assert steps["step"].tolist() == list(range(1, 10))
    assert steps["loss"].tolist()[:8] == pytest.approx([4.0 - s / 10 for s in range(1, 9)])
    assert math.isnan(steps["loss"].iloc[8])
    assert steps["tokens"].tolist()[:8] == [256.0 * s for s in range(1, 9)]
    assert (steps["wall_s"].diff().dropna() >= 0).all()
    assert ledger.evals("wb")["value"].tolist() == pytest.approx([3.7, 3.3])
    (log,) = run_logs(offline_run)
    assert len(res.warnings) == 1 and res.warnings[0].startswith(f"{log}: offset ")
    assert res.warnings[0].endswith("loss is nan/inf on 1 row(s); kept as recorded")
    (tranche,) = cli.json("yield", "wb")
    assert tranche["yield_per_btok"] == pytest.approx(0.4 / 1024 * 1e9)


@pytest.mark.slow  # trains or runs a real trainer: the full tier (make test-all)
def test_truncated_and_damaged_logs(ledger, offline_run, tmp_path):
    (log,) = run_logs(offline_run)
    whole = read_log(log, Warnings(), "_step")
    data = log.read_bytes()
    cut = tmp_path / "cut.wandb"
    cut.write_bytes(data[: len(data) * 2 // 3])
    warnings = Warnings()
    part = read_log(cut, warnings, "_step")
    assert 0 < len(part) < len(whole) and part.step.tolist() == whole.step.tolist()[: len(part)]
    (line,) = warnings.summary()
    assert line.startswith(f"{cut}: offset ") and "cut off" in line
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF
    cut.write_bytes(bytes(damaged))
    with pytest.raises(InputError, match=rf"{cut}: offset \d+: record fails its CRC"):
        import_run(ledger, "wandb", [str(cut)], ImportOptions(run="bad"))
    cut.write_bytes(b"garbage" * 10)
    with pytest.raises(InputError, match="not a W&B transaction log"):
        import_run(ledger, "wandb", [str(cut)], ImportOptions(run="bad"))
    assert ledger.runs().empty


@pytest.mark.slow  # trains or runs a real trainer: the full tier (make test-all)
def test_history_export_and_step_override(ledger, offline_run, tmp_path):
    # A history export has W&B's own columns (`_step`, `_runtime`, `_timestamp`); written here by pandas, as
    # `wandb.Api().run(path).history().to_csv(...)` does.
    export = tmp_path / "history.csv"
    pd.DataFrame(
        {
            "_step": [0, 1, 2],
            "_runtime": [1.0, 2.0, 3.0],
            "_timestamp": [1.7e9, 1.7e9 + 1, 1.7e9 + 2],
            "trainer/global_step": [10, 20, 30],
            "train/loss": [3.0, 2.5, 2.2],
        }
    ).to_csv(export, index=False)
    import_run(ledger, "wandb", [str(export)], ImportOptions(run="csv"))
    assert ledger.steps("csv")["step"].tolist() == [0, 1, 2]
    import_run(ledger, "wandb", [str(export)], ImportOptions(run="gs", map=["step=trainer/global_step"]))
    assert ledger.steps("gs")["step"].tolist() == [10, 20, 30]
    copy = tmp_path / "run"
    shutil.copytree(offline_run, copy)
    (res,) = import_run(ledger, "wandb", [str(copy)], ImportOptions(run="tok", map=["step=train/tokens"]))
    assert ledger.steps("tok")["step"].tolist() == [256 * s for s in range(1, 9)]
    assert res.warnings[0].endswith("history row without 'train/tokens'; skipped")


@pytest.mark.slow
def test_a_log_read_in_chunks_reads_as_one_piece(tmp_path, monkeypatch):
    # The log is read a chunk of whole 32 KiB blocks at a time (a run's log can run to GBs): records split
    # over blocks (FIRST/MIDDLE/LAST) and over chunks come back as read whole.
    import yieldgate.ingest.wandb as wb
    from tests.test_bad_input import _wandb_log

    values = [{"loss": repr(1.0 / s), "note": '"' + "x" * (s * 997 % 50_000) + '"'} for s in range(1, 200)]
    path = _wandb_log("run-x.wandb", values)(tmp_path)
    assert path.stat().st_size > 8 * wb._BLOCK
    whole = read_log(path, Warnings(), "_step")
    for chunk in (wb._BLOCK, 3 * wb._BLOCK):
        monkeypatch.setattr(wb, "_CHUNK", chunk)
        rows = read_log(path, Warnings(), "_step")
        assert rows.step.tolist() == whole.step.tolist() == list(range(1, 200))
        assert rows.values["loss"].tolist() == whole.values["loss"].tolist()
