"""Issue 35, third wave: real OpenMMLab logs (an MMPose text log, an MMPretrain `vis_data/scalars.json`) and a second
fine-tuning framework (ms-swift's `logging.jsonl`), each imported and checked against facts recomputed from the raw
file without yieldgate's code (tests/support/real_wave3.py); and the corpus breadth SOURCES.md declares.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.real_logs import REAL_LOGS, SHARED_LOGS
from tests.support.real_wave3 import WAVE3_LOGS, WAVE3_PARSERS
from yieldgate.cli import app
from yieldgate.ingest import ImportOptions, import_run

ROOT = Path(__file__).parent / "data" / "real"
ENTRY = {e["path"]: e for e in WAVE3_LOGS}
MMPOSE = "mmpose-rtmpose-ear-train-log-cut.log"
SCALARS = "mmpretrain-vis-data-scalars.json"
SWIFT = "ms-swift-qwen3-8b-lora-logging.jsonl"


def _facts(name: str) -> dict:
    """The registered facts of a file, checked against its raw text first (never against yieldgate)."""
    entry = ENTRY[name]
    assert WAVE3_PARSERS[entry["parser"]](ROOT / name, entry["params"]) == entry["facts"]
    return entry["facts"]


def _import(ledger, name: str, run: str):
    (res,) = import_run(ledger, "auto", [str(ROOT / name)], ImportOptions(run=run))
    return res, ledger.steps(run, nullable=True), ledger.evals(run)


def _at(steps, column: str, step: int) -> float:
    return float(steps.loc[steps["step"] == step, column].iloc[0])


def _series(evals, task: str, metric: str) -> list[tuple[int, float]]:
    rows = evals[(evals["task"] == task) & (evals["metric"] == metric)]
    return list(zip(rows["step"].tolist(), rows["value"].tolist(), strict=True))


def test_a_real_mmengine_text_log(ledger):
    facts = _facts(MMPOSE)["series"]
    res, steps, evals = _import(ledger, MMPOSE, "mmpose")
    assert "read as openmmlab" in res.source and res.steps == facts["loss"]["count"]
    for column, key in (("loss", "loss"), ("step_s", "time"), ("data_wait_s", "data_time"), ("lr", "lr")):
        for point in ("first", "last", "max"):
            step, value = facts[key][point]
            assert _at(steps, column, step) == pytest.approx(value, rel=1e-9), (column, point)
    # every evaluation at the iteration that ended its epoch, each score with its direction; -1 is no value
    for task, metric, key in (("coco", "AP", "coco/AP"), ("val", "PCK", "PCK"), ("val", "NME", "NME")):
        got = _series(evals, task, metric)
        assert len(got) == facts[key]["count"] and got[0] == tuple(facts[key]["first"])
        assert max(got, key=lambda p: p[1]) == tuple(facts[key]["max"])
    directions = {m: bool(h) for m, h in zip(evals["metric"], evals["higher_is_better"], strict=True)}
    assert directions["AP"] and directions["PCK"] and directions["AUC"] and not directions["NME"]
    assert _facts(MMPOSE)["minus_one_values"] > 0 and (evals["value"] != -1.0).all()


def test_a_real_mmengine_scalars_json(ledger):
    facts = _facts(SCALARS)
    res, steps, evals = _import(ledger, SCALARS, "mmpre")
    assert res.steps == facts["loss"]["count"]  # no phantom training steps at the evaluations' epoch numbers
    assert steps["step"].min() == facts["loss"]["first"][0]
    for point in ("first", "last", "min"):
        assert _at(steps, "loss", facts["loss"][point][0]) == pytest.approx(facts["loss"][point][1], rel=1e-12)
    assert _at(steps, "step_s", facts["time"]["max"][0]) == pytest.approx(facts["time"]["max"][1], rel=1e-12)
    assert facts["eval_steps_are_epochs"]
    got = _series(evals, "accuracy", "top1")  # written bare: `accuracy/top1`, rising
    assert len(got) == facts["eval"]["count"]
    assert got[0] == tuple(facts["eval"]["first"]) and got[-1] == tuple(facts["eval"]["last"])
    assert max(got, key=lambda p: p[1]) == tuple(facts["eval"]["max"])
    assert evals["higher_is_better"].all()


def test_ms_swift_logging_jsonl(ledger):
    facts = _facts(SWIFT)
    res, steps, evals = _import(ledger, SWIFT, "swift")
    loss = steps[steps["loss"].notna()]
    assert len(loss) == facts["loss"]["count"]  # the summary's train_loss (the run's mean) is no training step
    for point in ("first", "last", "min"):
        assert _at(steps, "loss", facts["loss"][point][0]) == pytest.approx(facts["loss"][point][1], rel=1e-12)
    assert _at(steps, "lr", facts["learning_rate"]["last"][0]) == pytest.approx(facts["learning_rate"]["last"][1])
    assert _at(steps, "wall_s", facts["elapsed_s"]["last"][0]) == facts["elapsed_s"]["last"][1]  # `46m 13s`
    assert _at(steps, "wall_s", facts["elapsed_s"]["first"][0]) == facts["elapsed_s"]["first"][1]  # `6s`
    got = _series(evals, "val", "loss")
    assert len(got) == facts["eval_loss"]["count"] and got[-1] == pytest.approx(tuple(facts["eval_loss"]["last"]))
    assert min(got, key=lambda p: p[1]) == pytest.approx(tuple(facts["eval_loss"]["min"]))
    assert not facts["tokens_logged"] and steps["tokens"].isna().all()
    assert any("log_history" in w for w in res.warnings)  # the state dumped at the end, said and not read


def test_a_fraction_step_column_reads_its_count(ledger, tmp_path):
    log = tmp_path / "logging.jsonl"
    log.write_text(
        '{"loss": 2.0, "global_step/max_steps": "5/20", "elapsed_time": "1h 2m 3s"}\n'
        '{"loss": 1.5, "global_step/max_steps": "10/20", "elapsed_time": "1h 4m 0s"}\n'
    )
    (res,) = import_run(ledger, "table", [str(log)], ImportOptions(run="f"))
    steps = ledger.steps("f", nullable=True)
    assert steps["step"].tolist() == [5, 10] and steps["wall_s"].tolist() == [3723.0, 3840.0]


@pytest.mark.slow
@pytest.mark.parametrize("name", [MMPOSE, SCALARS, SWIFT])
def test_the_report_is_written_on_each_new_log(name, ledger_path, tmp_path):
    """test_real_wave2's parametrised run of every command covers import, yield, compare and diagnose on these logs;
    its report call spells no output option the CLI knows (so it exits 2 at once): the report is run here."""
    runner = CliRunner()
    base = ["--ledger", str(ledger_path)]
    result = runner.invoke(app, [*base, "import", "auto", str(ROOT / name), "--run", "a"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "r.html"
    result = runner.invoke(app, [*base, "report", "a", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 0


# --- the corpus' breadth, as SOURCES.md declares it ----------------------------------------------------------------


def _declared() -> list[str]:
    text = (ROOT / "SOURCES.md").read_text()
    block = text[text.index("<!-- corpus-breadth -->") : text.index("<!-- /corpus-breadth -->")]
    return re.findall(r"^- `([^`]+)`", block, re.M)


def test_the_corpus_holds_at_least_25_trainers_or_formats():
    declared = _declared()
    assert len(declared) == len(set(declared)) >= 25, declared
    text = (ROOT / "SOURCES.md").read_text()
    count = re.search(r"corpus-breadth -->\n.*?\*\*(\d+) trainers or formats\*\*", text, re.S)
    assert count and int(count[1]) == len(declared)
    formats = {e["format"] for e in REAL_LOGS + SHARED_LOGS}
    for item in declared:  # each names the registry formats that hold it (and so a test that reads it)
        listed = re.search(rf"^- `{re.escape(item)}`: (.*)$", text, re.M)
        assert listed, item
        named = re.findall(r"`([a-z0-9.-]+)`", listed[1])
        assert named and set(named) <= formats, (item, named)
