"""A TensorBoard log directory holding several runs imports as several runs, one per run folder (issue #36 item
10); one run's own folders (train/ and eval/, Keras' train/ and validation/) stay one run."""

from __future__ import annotations

from pathlib import Path

import pytest

import yieldgate
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ingest.tensorboard import event_files, run_folders


def _run(log: Path, scale: float, steps=range(1, 6), eval_log: Path | None = None) -> None:
    """One run as `SummaryWriter(log_dir=...)` writes it; its evaluations in `eval_log` when given."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log)
    evals = SummaryWriter(eval_log) if eval_log is not None else writer
    for s in steps:
        writer.add_scalar("loss", scale * (4.0 - s / 10), s)
        writer.add_scalar("tokens", 256.0 * s, s)
        evals.add_scalar("eval_loss" if eval_log is None else "loss", scale * (4.2 - s / 10), s)
    writer.close()
    evals.close()


def test_run_folders_import_as_runs_named_after_them(ledger, tmp_path):
    _run(tmp_path / "runs" / "lr_1e-3", 1.0)
    _run(tmp_path / "runs" / "lr_3e-4", 2.0, steps=range(1, 4))
    results = import_run(ledger, "tensorboard", [str(tmp_path / "runs")], ImportOptions(run="sweep"))
    assert [r.run for r in results] == ["sweep/lr_1e-3", "sweep/lr_3e-4"]
    assert [r.steps for r in results] == [5, 3]
    assert ledger.steps("sweep/lr_1e-3")["loss"].tolist() == pytest.approx([4.0 - s / 10 for s in range(1, 6)])
    assert ledger.steps("sweep/lr_3e-4")["loss"].tolist() == pytest.approx([2 * (4.0 - s / 10) for s in range(1, 4)])
    # No run folder's values were merged into another's (today: one run, each step's values in conflict).
    assert not any("conflict" in w or "differ" in w for r in results for w in r.warnings), results[0].warnings
    assert str(tmp_path / "runs" / "lr_1e-3") in results[0].source


def test_the_api_and_cli_import_several_runs(cli, ledger_path, tmp_path):
    for name in ("a", "b"):
        _run(tmp_path / "tb" / name, 1.0)
    results = yieldgate.import_run("tensorboard", str(tmp_path / "tb"), run="x", ledger=ledger_path)
    assert sorted(r.run for r in results) == ["x/a", "x/b"]
    for name in ("c", "d"):
        _run(tmp_path / "tb2" / name, 1.0)
    out = cli("import", "tensorboard", str(tmp_path / "tb2"), "--run", "y").stdout
    assert "y/c" in out and "y/d" in out


def test_one_runs_train_and_eval_folders_stay_one_run(ledger, tmp_path):
    _run(tmp_path / "log" / "train", 1.0, eval_log=tmp_path / "log" / "eval")
    (res,) = import_run(ledger, "tensorboard", [str(tmp_path / "log")], ImportOptions(run="one"))
    assert res.run == "one" and res.steps == 5
    assert ledger.evals("one").query("metric == 'loss'")["value"].tolist() == pytest.approx(
        [4.2 - s / 10 for s in range(1, 6)]
    )


def test_split_folders_of_several_runs_stay_with_their_run(tmp_path):
    for name in ("a", "b"):
        _run(tmp_path / name / "train", 1.0, eval_log=tmp_path / name / "validation")
    _run(tmp_path / "c", 1.0)
    root = tmp_path
    runs = run_folders(root, event_files(root))
    assert sorted(runs) == ["a", "b", "c"] and [len(runs[k]) for k in ("a", "b", "c")] == [2, 2, 1]


def test_a_folder_with_event_files_of_its_own_is_one_run(tmp_path):
    _run(tmp_path / "log", 1.0)
    _run(tmp_path / "log" / "loss_train", 1.0)  # add_scalars' sub-writers sit inside their run's folder
    _run(tmp_path / "log" / "loss_val", 1.0)
    assert list(run_folders(tmp_path / "log", event_files(tmp_path / "log"))) == [""]


@pytest.mark.parametrize("name", ["hf-t5-summarization-tb", "keras-tf2-cbam-noise-tb", "lightning-l1trigger-vqvae-tb"])
def test_real_single_run_directories_stay_one_run(name):
    root = Path(__file__).resolve().parents[2] / "shared" / "real" / name
    if not root.is_dir():
        root = Path("/work/shared/real") / name
    if not root.is_dir():
        pytest.skip(f"{name}: not in shared/real")
    assert list(run_folders(root, event_files(root))) == [""]


def test_fairseq_validation_subsets_of_any_name_stay_with_their_run(tmp_path):
    for folder in ("train_inner", "train", "valid", "wiki"):
        _run(tmp_path / "log" / folder, 1.0)
    assert list(run_folders(tmp_path / "log", event_files(tmp_path / "log"))) == [""]
