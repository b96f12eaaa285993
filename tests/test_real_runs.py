"""yieldgate on the real public runs of tests/data/real, driven as a user would: each file imports without
a pattern or a hint beyond what a user knows (`--step` for a released model's evaluation), reads what the
independent parsers of tests/test_real_sources.py read, and every analysis command ends in a result (exit 0)
or one clear line (exit 2), never a traceback."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.real_logs import REAL_LOGS, SHARED_LOGS
from tests.test_real_sources import SHARED_ROOT
from yieldgate.cli import app
from yieldgate.ledger import Ledger

pytestmark = pytest.mark.slow  # real trainings, probes or processes: `make test-all`

ROOT = Path(__file__).parent / "data" / "real"
# What a user adds on the command line, by file: only what the file cannot say.
EXTRA_ARGS = {"lmeval-v04-llama3-8b-mmlu.json": ["--step", "1"], "lmeval-v04-llama3-8b-gsm8k.json": ["--step", "1"]}
ANALYSES = {"yield": [], "forecast": ["--next-tokens", "1e9", "--next-steps", "1000"], "diagnose": [], "show": []}


def _run_name(entry: dict) -> str:
    return Path(entry["path"]).name.split(".")[0]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Every real log imported into one ledger: {run name: (entry, the CLI's result)}."""
    ledger = tmp_path_factory.mktemp("real") / "real.db"
    runner = CliRunner()
    out = {}
    for entry in [*REAL_LOGS, *SHARED_LOGS]:
        path = (ROOT if entry in REAL_LOGS else SHARED_ROOT) / entry["path"]
        if not path.exists():  # a binary or fetched log the steering repo may place in shared/real
            continue
        name = _run_name(entry)
        result = runner.invoke(app, ["--ledger", str(ledger), "import", entry["kind"], str(path), "--run", name,
                                     *EXTRA_ARGS.get(path.name, [])])
        out[name] = (entry, result)
    return ledger, out


def _ok(result) -> bool:
    """Exit 0, or exit 2 with one line on stderr; never an exception."""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return False
    return result.exit_code == 0 or (result.exit_code == 2 and result.stderr.count("\n") == 1)


def test_every_real_log_imports(imported):
    _, results = imported
    failed = {name: (r.exit_code, r.stderr.strip()[:300], repr(r.exception)) for name, (_, r) in results.items()
              if r.exit_code != 0}
    assert not failed
    assert len(results) >= 15


@pytest.mark.parametrize("command", [*ANALYSES, "report", "compare"])
def test_every_analysis_ends_in_a_result_or_one_line(imported, tmp_path, command):
    ledger, results = imported
    runner = CliRunner()
    names = sorted(results)
    bad = {}
    for k, name in enumerate(names):
        if command == "report":
            args = ["report", name, "--output", str(tmp_path / f"{name}.html")]
        elif command == "compare":
            args = ["compare", name, names[(k + 1) % len(names)]]
        else:
            args = [command, name, *ANALYSES[command]]
        result = runner.invoke(app, ["--ledger", str(ledger), *args])
        if not _ok(result):
            bad[name] = (result.exit_code, result.stderr.strip()[-300:], repr(result.exception))
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())


def _series(ledger: Ledger, run: str, what: str):
    """[(step, value)] of a core column (`loss`) or an eval key (`val/loss`), in step order."""
    if "/" not in what:
        steps = ledger.steps(run, nullable=True).dropna(subset=[what])
        return list(zip(steps["step"].tolist(), steps[what].astype(float).tolist()))
    task, metric = what.rsplit("/", 1)
    evals = ledger.evals(run)
    rows = evals[(evals["task"] == task) & (evals["metric"] == metric)].sort_values("step")
    return list(zip(rows["step"].tolist(), rows["value"].tolist()))


# Facts of the registry (its parser's names) -> what yieldgate must hold for them.
READS = {
    "hf-whisper-large-v2-ja-trainer_state": {"train": "loss", "eval_loss": "val/loss", "eval_wer": "val/wer"},
    "hf-whisper-tiny-nb-trainer_state": {"train": "loss", "eval_loss": "val/loss", "eval_wer": "val/wer"},
    "hf-t5-summarization-trainer_state": {"train": "loss"},
    "nanogpt-build-gpt2-124m-epoch2-log": {"train": "loss", "val": "val/loss", "hella": "hellaswag/acc_norm"},
    "nanogpt-owt-gpt2-output": {"train": "loss", "val": "val/loss"},
    "llmc-gpt2-124m-main": {"trl": "loss", "tel": "val/loss", "eval": "hellaswag/acc_norm"},
    "megatron-deepspeed-qwen7b-tp4-500it": {"train": "loss", "val": "val/loss"},
    "fairseq-wav2vec2-mandarin-hydra_train": {"train_inner": "loss", "valid": "val/loss"},
    "torchtitan-kimi-linear-436m-c4": {"train": "loss"},
    "torchtitan-kimi-447m-fp8-c4-killed": {"train": "loss"},
    "keras-kanji-cnn-fit-log": {"loss": "loss", "val_loss": "val/loss", "val_acc": "val/acc"},
}


@pytest.mark.parametrize("run", sorted(READS))
def test_real_logs_read_as_their_independent_parsers_read_them(imported, run):
    ledger_path, results = imported
    if run not in results:
        pytest.skip(f"{run}: not in tests/data/real, and shared/real does not hold it")
    entry, result = results[run]
    assert result.exit_code == 0, result.stderr
    with Ledger(ledger_path, readonly=True) as ledger:
        for fact, what in READS[run].items():
            expected = entry["facts"][fact]
            got = _series(ledger, run, what)
            scale = math.log(2) if entry["format"].startswith("fairseq") and what.endswith("loss") else 1.0
            assert len(got) == expected["count"], (fact, what)
            for end, point in (("first", got[0]), ("last", got[-1])):
                assert point[0] == expected[end][0], (fact, end)
                assert point[1] == pytest.approx(expected[end][1] * scale, rel=1e-6), (fact, end)


def test_real_yolo_scores_are_evaluations_that_rise_and_its_loss_is_the_sum_of_its_terms(imported):
    ledger_path, results = imported
    _, result = results["yolo11-seg-gallstone-results"]
    assert result.exit_code == 0, result.stderr
    with Ledger(ledger_path, readonly=True) as ledger:
        evals = ledger.evals("yolo11-seg-gallstone-results")
        scores = evals[evals["metric"] == "mAP50-95(B)"].sort_values("step")
        assert scores["task"].unique().tolist() == ["val"] and scores["higher_is_better"].all()
        assert scores["value"].tolist()[-1] == pytest.approx(0.703)
        steps = ledger.steps("yolo11-seg-gallstone-results")
        # 0.98836 + 1.24258 + 0.85471 + 0.99807 at epoch 10
        assert steps["loss"].tolist()[-1] == pytest.approx(4.08372)


def test_real_torchtitan_validation_is_an_evaluation(imported):
    ledger_path, results = imported
    entry, result = results["torchtitan-kimi-447m-fp8-c4-killed"]
    assert result.exit_code == 0, result.stderr
    with Ledger(ledger_path, readonly=True) as ledger:
        assert _series(ledger, "torchtitan-kimi-447m-fp8-c4-killed", "val/loss") == [tuple(entry["facts"]["validate"][0])]
        assert ledger.meta("torchtitan-kimi-447m-fp8-c4-killed")["devices"]["count"] == entry["facts"]["world_size"]


def test_real_build_nanogpt_printed_evaluations_are_read_at_the_next_step(imported):
    """The 12 stepless `validation loss:` lines: at the step printed next, as the same run's log.txt has them
    (`19080 val 3.2034` in nanogpt-build-gpt2-124m-epoch2-log.txt)."""
    ledger_path, results = imported
    entry, result = results["nanogpt-build-gpt2-124m-stdout"]
    assert result.exit_code == 0, result.stderr
    facts = entry["facts"]
    with Ledger(ledger_path, readonly=True) as ledger:
        val = _series(ledger, "nanogpt-build-gpt2-124m-stdout", "val/loss")
        hella = _series(ledger, "nanogpt-build-gpt2-124m-stdout", "hellaswag/acc_norm")
    assert len(val) == facts["stepless_val_lines"] and len(hella) == facts["stepless_hellaswag_lines"]
    assert val[0] == (19080, facts["val_first"]) and val[-1][1] == facts["val_last"]
    assert hella[-1][1] == facts["hellaswag_last"]
