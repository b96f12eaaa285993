"""yieldgate on the real public runs of tests/data/real, driven as a user would: each file imports without
a pattern or a hint beyond what a user knows (`--step` for a released model's evaluation), reads what the
independent parsers of tests/test_real_sources.py read, and every analysis command ends in a result (exit 0)
or one clear line (exit 2), never a traceback."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.real_logs import REAL_LOGS, SHARED_LOGS
from tests.test_real_sources import SHARED_ROOT
from yieldgate.cli import app
from yieldgate.ledger import Ledger

pytestmark = pytest.mark.slow  # real trainings, probes or processes: `make test-all`

ROOT = Path(__file__).parents[1] / "data" / "real"
# What a user adds on the command line, by file: only what the file cannot say.
EXTRA_ARGS = {
    "lmeval-v04-llama3-8b-mmlu.json": ["--step", "1"],
    "lmeval-v04-llama3-8b-gsm8k.json": ["--step", "1"],
    # the readme it comes from runs `torchrun --nproc_per_node=8`
    "olmo-1b-azure-nccl-sharp-10steps.log": ["--devices", "8"],
}
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
        result = runner.invoke(
            app,
            [
                "--ledger",
                str(ledger),
                "import",
                entry["kind"],
                str(path),
                "--run",
                name,
                *EXTRA_ARGS.get(path.name, []),
            ],
        )
        out[name] = (entry, result)
    return ledger, out


def _ok(result) -> bool:
    """Exit 0, or exit 2 with one line on stderr; never an exception."""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return False
    return result.exit_code == 0 or (result.exit_code == 2 and result.stderr.count("\n") == 1)


def test_every_real_log_imports(imported):
    _, results = imported
    failed = {
        name: (r.exit_code, r.stderr.strip()[:300], repr(r.exception))
        for name, (_, r) in results.items()
        if r.exit_code != 0
    }
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
        return list(zip(steps["step"].tolist(), steps[what].astype(float).tolist(), strict=True))
    task, metric = what.rsplit("/", 1)
    evals = ledger.evals(run)
    rows = evals[(evals["task"] == task) & (evals["metric"] == metric)].sort_values("step")
    return list(zip(rows["step"].tolist(), rows["value"].tolist(), strict=True))


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
        assert _series(ledger, "torchtitan-kimi-447m-fp8-c4-killed", "val/loss") == [
            tuple(entry["facts"]["validate"][0])
        ]
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


def _entry(path: str) -> dict:
    return next(e for e in [*REAL_LOGS, *SHARED_LOGS] if e["path"] == path)


def test_real_olmo_blocks_read_with_their_commas_and_the_jobs_throughput(imported):
    """OLMo's `[step=N/M]` blocks of `name=value` lines, thousands written with commas; its throughput is one
    device's, so the job's tokens/s is 8 x that (the device count the run's readme gives)."""
    ledger_path, results = imported
    run = "olmo-1b-azure-nccl-sharp-10steps"
    entry, result = results[run]
    assert result.exit_code == 0, result.stderr
    series = entry["facts"]["series"]
    with Ledger(ledger_path, readonly=True) as ledger:
        loss, tokens = _series(ledger, run, "loss"), _series(ledger, run, "tokens")
        tokens_per_s = _series(ledger, run, "tokens_per_s")
        extras = ledger.extras(run)
    facts = series["train/CrossEntropyLoss"]
    assert len(loss) == facts["count"] and [list(loss[0]), list(loss[-1])] == [facts["first"], facts["last"]]
    total = series["throughput/total_tokens"]
    assert [list(tokens[0]), list(tokens[-1])] == [total["first"], total["last"]]
    per_device = series["throughput/device/tokens_per_second"]
    assert len(tokens_per_s) == per_device["count"] and tokens_per_s[0] == (2, per_device["first"][1] * 8)
    perplexity = extras[extras["key"] == "imported/train/perplexity"]["value"].tolist()
    assert perplexity[0] == series["train/Perplexity"]["first"][1]  # 76,631, not 76 or 631


PYTHIA_160M_5SHOT = [f"lmeval-v03-pythia-160m-5shot-step{step}.json" for step in (3000, 13000, 33000, 143000)]
PYTHIA_TOKENS_PER_STEP = 2_097_152  # Pythia's batch: 1024 sequences of 2048 tokens


def test_real_pythia_checkpoints_give_capability_yield_per_billion_tokens(tmp_path):
    """Four checkpoints of one model, each its own lm-eval file (the step only in config.model_args): one run
    of 4 x 128 evaluations, and `yield` over a task is its change per B tokens between checkpoints."""
    ledger = str(tmp_path / "pythia.db")
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "--ledger",
            ledger,
            "import",
            "lm-eval",
            *(str(ROOT / p) for p in PYTHIA_160M_5SHOT),
            "--run",
            "pythia-160m",
            "--tokens-per-step",
            str(PYTHIA_TOKENS_PER_STEP),
        ],
    )
    assert result.exit_code == 0, result.stderr
    steps = [3000, 13000, 33000, 143000]
    acc = [_entry(p)["facts"]["values"]["lambada_openai|acc"] for p in PYTHIA_160M_5SHOT]
    with Ledger(ledger, readonly=True) as led:
        evals = led.evals("pythia-160m")
        assert evals.groupby("step").size().to_dict() == dict.fromkeys(steps, 128)
        assert evals["stderr"].notna().all()  # every metric here has its *_stderr
        lam = evals[(evals["task"] == "lambada_openai") & (evals["metric"] == "acc")].sort_values("step")
        assert lam["value"].tolist() == acc and lam["tokens"].tolist() == [s * PYTHIA_TOKENS_PER_STEP for s in steps]
        ppl = evals[(evals["task"] == "lambada_openai") & (evals["metric"] == "ppl")]
        assert not ppl["higher_is_better"].any()
    result = runner.invoke(
        app, ["--ledger", ledger, "yield", "pythia-160m", "--metric", "lambada_openai/acc", "--json"]
    )
    assert result.exit_code == 0, result.stderr
    tranches = json.loads(result.stdout)
    assert [(t["start_step"], t["end_step"]) for t in tranches] == list(zip(steps, steps[1:], strict=False))
    for t, a, b, s0, s1 in zip(tranches, acc, acc[1:], steps, steps[1:], strict=False):
        assert t["yield_per_btok"] == pytest.approx((b - a) / ((s1 - s0) * PYTHIA_TOKENS_PER_STEP / 1e9), rel=1e-9)
    # The noise bands come from the standard errors the files report, each tranche's ± 1.645 sqrt(se0^2 + se1^2)
    # at 90%: lambada's rise of 0.075 (about ten standard errors) is beyond noise, not "within noise" as the
    # curve's own noise estimate (two degrees of freedom through four points) had it; the last tranche's 0.002
    # is within. No MMLU subtask is listed as worsening: none moves beyond its errors held over all 127 others.
    se = [json.loads((ROOT / p).read_text())["results"]["lambada_openai"]["acc_stderr"] for p in PYTHIA_160M_5SHOT]
    for t, a, b, e0, e1 in zip(tranches, acc, acc[1:], se, se[1:], strict=False):
        half = 1.6448536269514722 * math.hypot(e0, e1)
        assert t["band_from"] == "reported" and t["band"] == pytest.approx([b - a - half, b - a + half], rel=1e-9)
    assert [t["within_noise"] for t in tranches] == [False, False, True]
    assert all(
        not d.startswith("lambada_openai/acc improved while hendrycksTest")
        for t in tranches
        for d in t["disagreements"]
    )


def test_real_keras_tensorboard_folders_read_as_one_run_in_epochs(imported):
    """Keras' train/ and validation/ folders hold the same tags at step = epoch: one run, its loss the training
    folder's and val/loss the validation folder's, never a restart (shared/real; skipped where absent)."""
    ledger_path, results = imported
    run = "keras-tf2-cbam-noise-tb"
    if run not in results:
        pytest.skip(f"{run}: not in shared/real")
    entry, result = results[run]
    assert result.exit_code == 0, result.stderr
    series = entry["facts"]["series"]
    with Ledger(ledger_path, readonly=True) as ledger:
        for key, what in (("train/epoch_loss", "loss"), ("validation/epoch_loss", "val/loss")):
            got = _series(ledger, run, what)
            assert len(got) == series[key]["count"], key
            assert [list(got[0]), list(got[-1])] == [series[key]["first"], series[key]["last"]], key
            assert max(got, key=lambda p: p[1]) == tuple(series[key]["max"]), key
        assert ledger.events(run, kind="resume").empty
        assert ledger.meta(run)["step_unit"] == "epoch"


def test_real_hf_trainer_tensorboard_and_state_file_read_as_the_same_curve(imported):
    """One t5-small run written twice by the HF Trainer, as trainer_state.json and through its TensorBoardCallback
    (torch's SummaryWriter, rank-0 tensors): the same 430 training losses (to float32), and the TensorBoard
    directory's second file holds the run's only evaluation (shared/real; skipped where absent)."""
    ledger_path, results = imported
    if "hf-t5-summarization-tb" not in results:
        pytest.skip("hf-t5-summarization-tb: not in shared/real")
    with Ledger(ledger_path, readonly=True) as ledger:
        tb = _series(ledger, "hf-t5-summarization-tb", "loss")
        state = _series(ledger, "hf-t5-summarization-trainer_state", "loss")
        val = _series(ledger, "hf-t5-summarization-tb", "val/loss")
    assert [s for s, _ in tb] == [s for s, _ in state] and len(tb) == 430
    assert [v for _, v in tb] == pytest.approx([v for _, v in state], rel=1e-6)
    assert val == [(215337, pytest.approx(1.6339, abs=1e-4))]
