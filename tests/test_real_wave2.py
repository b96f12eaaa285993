"""Issue 35, logs of any shape: the second wave of real logs (tests/data/real, facts in tests/support/real_wave2.py,
recomputed there from the raw files without yieldgate's code) read right by content, by the new formats and by a
declared mapping; the lm-eval aggregate in shared/real; and the classes of misreading each fixed here.

Items covered: 1 (content, not name: JSON lines named metrics.json / log.txt, `import auto`, refusals that say what
the content looked like), 2 (a declared mapping: YAML or --map, computed steps, loss, evals and directions, time
fields; docs/importing.md's worked example run as written), 3 (OpenMMLab's text log, YOLOv5's results.txt),
9 (the LR's names; a TensorBoard log stepped by epochs says so), and the lm-eval aggregate.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.real_wave2 import WAVE2_LOGS, WAVE2_PARSERS, YOLOV5_TXT
from tests.support.real_wave3 import WAVE3_LOGS
from yieldgate.aliases import guess
from yieldgate.cli import app
from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run

ROOT = Path(__file__).parent / "data" / "real"
# OpenMMLab logs as MMEngine and MMCV print them (the lines of their docs and issues, shortened to a few steps)
LOGS = Path(__file__).parent / "data" / "textlogs_wave2"
REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("YIELDGATE_SHARED_REAL") or REPO.parent / "shared" / "real")
ENTRY = {e["path"]: e for e in WAVE2_LOGS}


def _facts(name: str) -> dict:
    """The registered facts of a file, checked against its raw text first (never against yieldgate)."""
    entry = ENTRY[name]
    assert WAVE2_PARSERS[entry["parser"]](ROOT / name, entry["params"]) == entry["facts"]
    return entry["facts"]["series"]


def _import(ledger, kind: str, path: Path, run: str, **options):
    (res,) = import_run(ledger, kind, [str(path)], ImportOptions(run=run, **options))
    return res, ledger.steps(run, nullable=True), ledger.evals(run)


def _eval_series(evals, task: str, metric: str) -> list[tuple[int, float]]:
    rows = evals[(evals["task"] == task) & (evals["metric"] == metric)]
    return list(zip(rows["step"].tolist(), rows["value"].tolist(), strict=True))


def _at(steps, column: str, step: int) -> float:
    return float(steps.loc[steps["step"] == step, column].iloc[0])


# --- item 1: the content decides ---------------------------------------------------------------------------


def test_a_json_lines_log_named_log_txt_imports_as_a_table(ledger):
    facts = _facts("deit-tiny-log.txt")
    for kind in ("auto", "textlog"):  # the table kind reads it too: `textlog` hands JSON lines to it
        res, steps, evals = _import(ledger, kind, ROOT / "deit-tiny-log.txt", f"deit-{kind}")
        loss = facts["train_loss"]
        assert _at(steps, "loss", loss["last"][0]) == loss["last"][1]
        acc = dict(_eval_series(evals, "test", "acc1"))
        assert acc[facts["test_acc1"]["max"][0]] == facts["test_acc1"]["max"][1]
        assert _at(steps, "lr", facts["train_lr"]["max"][0]) == facts["train_lr"]["max"][1]


def test_a_refusal_says_what_the_content_looked_like(ledger, tmp_path):
    printed = tmp_path / "metrics.json"
    printed.write_text("iter 1 something happened\niter 2 again\n")
    with pytest.raises(InputError, match=r"not a table: its content is plain text \(first line 'iter 1 something"):
        import_run(ledger, "table", [str(printed)], ImportOptions(run="x"))
    doc = tmp_path / "config.json"
    doc.write_text(json.dumps({"model": "resnet", "lr": 0.1}))
    with pytest.raises(InputError, match=r"one JSON object \(keys model, lr\)"):
        import_run(ledger, "auto", [str(doc)], ImportOptions(run="x"))
    assert ledger.runs().empty


# --- item 2: a declared mapping ------------------------------------------------------------------------------


def _docs_example(tmp_path: Path) -> tuple[str, list[str]]:
    """docs/importing.md's worked mapping: its YAML block and its command line, as written."""
    text = (REPO / "docs" / "importing.md").read_text()
    section = text[text.index("**Worked mapping, on a real log**") :]
    yaml_found = re.search(r"```yaml\n(.*?)```", section, re.S)
    command_found = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert yaml_found and command_found, "docs/importing.md's worked mapping has a yaml and a sh block"
    yaml_block, command = yaml_found[1], command_found[1]
    (tmp_path / "detectron2.yaml").write_text(yaml_block)
    return yaml_block, command.split()


def test_the_docs_worked_mapping_reads_the_real_detectron2_log(tmp_path, monkeypatch, ledger_path):
    from yieldgate.ledger import Ledger

    facts = _facts("detectron2-fruits-faster-rcnn-metrics.json")
    _, argv = _docs_example(tmp_path)
    assert argv[:3] == ["yieldgate", "import", "auto"]
    argv[3] = str(REPO / argv[3])  # the log's path is relative to the repository root
    monkeypatch.chdir(tmp_path)  # the mapping file's name is relative to where it is run
    result = CliRunner().invoke(app, ["--ledger", str(ledger_path), *argv[1:]])
    assert result.exit_code == 0, result.output
    with Ledger(ledger_path) as led:
        steps, evals = led.steps("d2-fruits", nullable=True), led.evals("d2-fruits")
    loss = facts["total_loss"]
    assert int(steps["loss"].notna().sum()) == loss["count"]
    assert _at(steps, "loss", loss["last"][0]) == loss["last"][1]
    assert _at(steps, "step_s", facts["time"]["max"][0]) == facts["time"]["max"][1]
    ap = facts["bbox/AP"]
    assert _eval_series(evals, "bbox", "AP")[-1] == tuple(ap["last"]) and len(_eval_series(evals, "bbox", "AP")) == 3
    assert evals.loc[evals["task"] == "bbox", "higher_is_better"].all()


def test_a_mapping_file_reads_a_log_no_reader_knows(ledger, tmp_path):
    log = tmp_path / "train.out"
    log.write_text(
        "== run 7 ==\n"
        "[ep 1 | it 50/100] obj=2.50 secs/it=0.20 wait=0.01\n"
        "[ep 1 | it 100/100] obj=2.00 secs/it=0.25 wait=0.02\n"
        "eval ep 1: score=0.40\n"
        "[ep 2 | it 50/100] obj=1.50 secs/it=0.20 wait=0.01\n"
        "[ep 2 | it 100/100] obj=1.20 secs/it=0.20 wait=0.03\n"
        "eval ep 2: score=0.55\n"
    )
    mapping = tmp_path / "mine.yaml"
    mapping.write_text(
        "lines:\n"
        r"  - '^\[ep (?P<ep>\d+) \| it (?P<it>\d+)/(?P<n>\d+)\] obj=(?P<obj>\S+) secs/it=(?P<spi>\S+) wait=(?P<w>\S+)'"
        "\n"
        r"  - '^eval ep (?P<ep>\d+): score=(?P<score>\S+)'"
        "\n"
        "step: {epoch: ep, iter: it, iters_per_epoch: n}\n"
        "loss: obj\n"
        "evals: {score: higher}\n"
        "times: {spi: per_step, w: data_wait}\n"
    )
    # The generic reader reads its structure (the epoch and the count within it, a score printed alone as the
    # evaluation of the step before it), but not the loss's name: an extra, the mapping names it.
    import_run(ledger, "textlog", [str(log)], ImportOptions(run="bare"))
    assert ledger.extras("bare", ["imported/obj"])["step"].tolist() == [50, 100, 150, 200]
    assert ledger.steps("bare")["loss"].isna().all()
    bare_evals = ledger.evals("bare")
    assert list(zip(bare_evals["step"], bare_evals["value"], strict=True)) == [(100, 0.40), (200, 0.55)]
    _, steps, evals = _import(ledger, "textlog", log, "mapped", map=[str(mapping)])
    assert steps["step"].tolist() == [50, 100, 150, 200]  # (epoch - 1) x 100 + iteration
    assert steps["loss"].tolist() == [2.5, 2.0, 1.5, 1.2]
    assert steps["step_s"].tolist() == [0.2, 0.25, 0.2, 0.2] and steps["data_wait_s"].tolist()[-1] == 0.03
    # each evaluation at the end of its epoch, rising
    assert _eval_series(evals, "val", "score") == [(100, 0.4), (200, 0.55)]
    assert evals["higher_is_better"].tolist() == [True, True]


def test_map_options_compute_the_step_of_a_table(ledger, tmp_path):
    table = tmp_path / "scalars.json"  # MMEngine's vis_data/scalars.json shape: epoch and iter, no step
    rows = [{"epoch": e, "iter": i, "loss": 3.0 - 0.1 * (e * 10 + i)} for e in (1, 2) for i in (5, 10)]
    table.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, steps, _ = _import(
        ledger, "table", table, "mm", map=["epoch=epoch", "iter=iter", "iters_per_epoch=10", "loss=loss"]
    )
    assert steps["step"].tolist() == [5, 10, 15, 20]


def test_a_bad_mapping_is_one_line_naming_the_key(ledger, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("step: {epoch: ep, iter: it}\n")
    with pytest.raises(InputError, match="iters_per_epoch"):
        import_run(
            ledger, "textlog", [str(ROOT / "yolov5-mushrooms-results.txt")], ImportOptions(run="x", map=[str(bad)])
        )
    bad.write_text("stepp: iteration\n")
    with pytest.raises(InputError, match="unknown key 'stepp'"):
        import_run(ledger, "table", [str(ROOT / "deit-tiny-log.txt")], ImportOptions(run="x", map=[str(bad)]))


# --- item 3: OpenMMLab's text log and YOLOv5's results.txt -------------------------------------------------------

MMENGINE = LOGS / "openmmlab-mmengine-epochs.log"

MMCV = LOGS / "openmmlab-mmcv-epochs.log"

MMSEG_ITER = LOGS / "openmmlab-mmengine-iters.log"


@pytest.mark.parametrize(
    ("text", "steps", "loss", "evals"),
    [
        (
            MMENGINE,
            [50, 100, 150, 200],
            [59.1782, 50.0, 40.0, 35.0],
            {("coco", "bbox_mAP"): [(100, 0.17), (200, 0.25)]},
        ),
        (MMCV, [50, 100], [1.0325, 0.83], {("val", "bbox_mAP"): [(100, 0.101)]}),
        (MMSEG_ITER, [50, 100], [0.9, 0.8], {("val", "mIoU"): [(100, 45.5)]}),
    ],
    ids=["mmengine", "mmcv", "mmengine-iter"],
)
def test_openmmlab_logs_step_by_epoch_and_iteration(ledger, text, steps, loss, evals):
    res, got, ev = _import(ledger, "textlog", text, "mm")
    assert "read as openmmlab" in res.source
    assert got["step"].tolist() == steps
    assert got["loss"].tolist() == loss  # the total, not the sum of its terms
    assert got["step_s"].notna().all() and (got["step_s"] < 1).all()  # time: seconds per iteration, not a clock
    assert got["data_wait_s"].notna().all()
    for (task, metric), series in evals.items():
        assert _eval_series(ev, task, metric) == series  # each evaluation at the end of its epoch


def test_yolov5_results_txt_is_a_format(ledger):
    facts = _facts("yolov5-mushrooms-results.txt")
    res, steps, evals = _import(ledger, "textlog", ROOT / "yolov5-mushrooms-results.txt", "y5")
    assert "read as yolo-txt" in res.source and res.steps == facts["total"]["count"]
    assert _at(steps, "loss", facts["total"]["last"][0]) == facts["total"]["last"][1]
    best = max(_eval_series(evals, "val", "mAP50"), key=lambda p: p[1])
    assert best == tuple(facts["mAP@.5"]["max"])
    assert _eval_series(evals, "val", "box_loss")[-1] == tuple(facts["val_box"]["last"])
    directions = dict(zip(evals["metric"], evals["higher_is_better"], strict=True))
    assert directions["mAP50"] is True and directions["box_loss"] is False
    assert len(YOLOV5_TXT) == 15


def test_the_metriclogger_console_is_a_format(ledger):
    facts = _facts("maskrcnn-benchmark-mask-rcnn-log.txt")
    res, steps, _ = _import(ledger, "auto", ROOT / "maskrcnn-benchmark-mask-rcnn-log.txt", "mrcnn")
    assert "read as metriclogger" in res.source and res.steps == facts["loss"]["count"]
    assert _at(steps, "loss", facts["loss"]["min"][0]) == facts["loss"]["min"][1]  # the value, not the mean
    assert _at(steps, "step_s", facts["time"]["max"][0]) == facts["time"]["max"][1]  # per iteration, no clock
    assert _at(steps, "data_wait_s", facts["data"]["max"][0]) == facts["data"]["max"][1]


# --- item 9: the learning rate's names ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["x/lr0", "lr-Adam", "lr-AdamW", "lr-MyCosineScheduler", "lr-SGD/pg1"])
def test_other_trainers_names_of_the_lr(name):
    assert guess(name).key == "lr"


@pytest.mark.parametrize("name", ["x/lr1", "lr-Adam/pg2", "lr-Adam-momentum", "lr-SGD-weight_decay"])
def test_other_groups_and_momentum_are_not_the_lr(name):
    assert guess(name).key != "lr"


def test_a_padded_early_yolov8_csv_and_its_lr(ledger):
    facts = _facts("yolov8-fire-smoke-results.csv")
    _, steps, evals = _import(ledger, "table", ROOT / "yolov8-fire-smoke-results.csv", "y8")
    assert _at(steps, "lr", facts["lr/pg0"]["first"][0]) == facts["lr/pg0"]["first"][1]
    assert _eval_series(evals, "val", "mAP50-95(B)")[-1] == tuple(facts["metrics/mAP50-95(B)"]["last"])


@pytest.mark.slow  # torch's import
def test_a_tensorboard_log_stepped_by_epochs_says_so(ledger, tmp_path):
    pytest.importorskip("torch.utils.tensorboard", reason="writing event files needs torch's SummaryWriter")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(tmp_path / "tb")
    for epoch in range(1, 6):
        writer.add_scalar("Loss/train", 2.0 / epoch, epoch)
        writer.add_scalar("epoch", epoch, epoch)
    writer.close()
    (res,) = import_run(ledger, "tensorboard", [str(tmp_path / "tb")], ImportOptions(run="tb"))
    assert any("steps in this run count epochs" in w for w in res.warnings)
    assert ledger.meta("tb")["step_unit"] == "epoch"


def test_the_llamafactory_log_reads_its_loss_lr_and_clock(ledger):
    facts = _facts("llamafactory-mistral-translator-trainer_log.jsonl")
    _, steps, _ = _import(ledger, "auto", ROOT / "llamafactory-mistral-translator-trainer_log.jsonl", "lf")
    assert int(steps["loss"].notna().sum()) == facts["loss"]["count"]
    assert _at(steps, "loss", facts["loss"]["min"][0]) == facts["loss"]["min"][1]
    assert _at(steps, "lr", facts["learning_rate"]["max"][0]) == facts["learning_rate"]["max"][1]
    assert _at(steps, "wall_s", 8660) == 5 * 3600 + 39 * 60 + 46  # elapsed_time 5:39:46


# --- the lm-eval aggregate (shared/real) ----------------------------------------------------------------------


@pytest.mark.slow  # 1,428 evaluations imported, and their capability yields
def test_the_lmeval_aggregate_imports_every_task_and_checkpoint(ledger, cli, ledger_path):
    from tests.support.real_wave2 import WAVE2_SHARED, lmeval_aggregate
    from yieldgate.ledger import Ledger

    (entry,) = WAVE2_SHARED
    path = SHARED / entry["path"]
    if not path.exists():
        pytest.skip(f"{path} is absent (shared/real is not committed; see tests/data/real/SOURCES.md)")
    facts = lmeval_aggregate(path, entry["params"])
    assert facts == entry["facts"]
    ledger.close()
    cli("import", "lm-eval", str(path), "--run", "agg")
    with Ledger(ledger_path) as led:
        evals = led.evals("agg")
    assert len(evals) == facts["records"] and int(evals["stderr"].notna().sum()) == facts["with_stderr"]
    assert evals["step"].nunique() == facts["checkpoints"] and evals["task"].nunique() == facts["tasks"]
    for key, (step, tokens, value, stderr) in facts["values"].items():
        task, metric, _ = key.split("|")
        row = evals[(evals["task"] == task) & (evals["metric"] == metric) & (evals["step"] == step)].iloc[0]
        assert (row["tokens"], row["value"], row["stderr"]) == (tokens, value, stderr)
    assert bool(evals.loc[evals["metric"] == "ppl", "higher_is_better"].iloc[0]) is False
    tranches = cli.json("yield", "agg")
    assert tranches and all(len(t["capability"]) >= facts["tasks"] for t in tranches)
    first = tranches[0]["capability"]["arc_easy/acc"]
    assert math.isclose(first["start"], facts["values"]["arc_easy|acc|0"][2])


# --- every command exits 0 or 2 on every new log ---------------------------------------------------------------

_KINDS = {e["path"]: e["kind"] for e in WAVE2_LOGS + WAVE3_LOGS}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_KINDS))
def test_every_command_exits_0_or_2_on_the_new_logs(name, ledger_path, tmp_path):
    runner = CliRunner()
    base = ["--ledger", str(ledger_path)]
    for run in ("a", "b"):
        result = runner.invoke(app, [*base, "import", "auto", str(ROOT / name), "--run", run])
        assert result.exit_code == 0, result.output
    for args in (
        ["yield", "a"],
        ["compare", "a", "b"],
        ["diagnose", "a"],
        ["report", "a", "--output", str(tmp_path / "r.html")],
    ):
        result = runner.invoke(app, [*base, *args])
        assert result.exit_code in (0, 2), (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
        assert "Usage:" not in result.output, (args, result.output)  # the command ran: its arguments were read
