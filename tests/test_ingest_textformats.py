"""Known trainers' text logs, read without a pattern: each sample in tests/data/textlogs is laid out as the
trainer prints it (headers, banners, dumped source code, colour codes included)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from yieldgate.aliases import guess
from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ingest.textlog import FORMATS, read_pairs, strip_ansi

LOGS = Path(__file__).parent / "data" / "textlogs"
LN2 = math.log(2)


def _import(ledger, name, **options):
    (res,) = import_run(ledger, "textlog", [str(LOGS / name)], ImportOptions(run=name, **options))
    return res, ledger.steps(name, nullable=True), ledger.evals(name)


def _extra(ledger, run, key):
    extras = ledger.extras(run, [key])
    return extras["value"].tolist()


def _evals(evals, key):
    task, metric = key.rsplit("/", 1)
    rows = evals[(evals["task"] == task) & (evals["metric"] == metric)]
    return dict(zip(rows["step"].tolist(), rows["value"].tolist(), strict=True))


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("nanogpt.log", "nanogpt"),
        ("modded-nanogpt.log", "modded-nanogpt"),
        ("llmc-main.log", "llm.c"),
        ("llmc-stdout.log", "llm.c"),
        ("megatron.log", "megatron"),
        ("fairseq.log", "fairseq"),
        ("torchtitan.log", "kv"),
        ("nanotron.log", "kv"),
        ("olmo.log", "kv"),
        ("composer.log", "kv"),
        ("lightning-tqdm.log", "tqdm"),
        ("hf-printed.log", "hf-printed"),
    ],
)
def test_each_trainers_log_is_detected(ledger, name, fmt):
    res, steps, _ = _import(ledger, name)
    assert res.source.endswith(f"(read as {fmt})")
    assert len(steps) > 0


def test_nanogpt_train_and_eval_lines(ledger):
    res, steps, evals = _import(ledger, "nanogpt.log", tokens_per_step=16384)
    assert steps["step"].tolist() == [0, 10, 20, 30, 40, 50, 60]
    assert steps["loss"].tolist() == [4.2649, 3.2202, 2.786, 2.6184, 2.5302, 2.4783, 2.4412]
    assert steps["step_s"].tolist()[:2] == pytest.approx([29.92734, 0.01985])
    # -100% is nanoGPT's "not measured yet": absent, not a negative MFU
    assert steps["mfu"].isna().tolist()[:2] == [True, False] and steps["mfu"].iloc[1] == pytest.approx(0.1876)
    assert _evals(evals, "val/loss") == {0: 4.2823, 50: 2.5012}
    # nanoGPT's estimate of the loss on the training split is not a validation source
    assert _evals(evals, "train_split/loss") == {0: 4.2874, 50: 2.4821}
    # no clock in the log: wall_s is the printed time per iteration times the iterations between lines; the
    # first iteration (compilation and the step-0 evaluation: 29.9 s) is one iteration, and iteration 50's
    # 3.0 s (it ran the evaluation) is counted once, its interval's other 9 iterations at the median 20.07 ms
    assert steps["wall_s"].tolist() == pytest.approx(
        [29.92734, 30.12584, 30.32564, 30.52634, 30.72544, 33.91271, 34.11381]
    )
    assert evals.sort_values("step")["wall_s"].tolist() == pytest.approx([29.92734] * 2 + [33.91271] * 2)
    assert any("wall_s estimated" in w and "2 slow iteration(s)" in w for w in res.warnings)
    # an eval line and a train line at one step are one step, not a step logged twice
    assert not any("again" in w for w in res.warnings)


def test_modded_nanogpt_skips_the_dumped_source_code(ledger):
    res, steps, evals = _import(ledger, "modded-nanogpt.log")
    assert steps["step"].tolist() == [0, 1, 2, 3, 4, 125]
    assert steps["wall_s"].tolist() == pytest.approx([0, 25.876, 26.135, 26.398, 26.66, 58.123])
    assert _evals(evals, "val/loss") == {0: 10.8258, 125: 4.3877}
    assert any("are not modded-nanogpt log lines" in w for w in res.warnings)
    assert not any("wall_s estimated" in w for w in res.warnings)  # it logs its own clock


def test_llmc_main_log_and_stdout(ledger):
    _, steps, evals = _import(ledger, "llmc-main.log")
    assert steps["loss"].tolist() == [11.010921, 10.542131, 10.101232, 9.76442, 9.412318]
    assert _evals(evals, "val/loss") == {0: 10.981525, 4: 9.310021}
    assert _evals(evals, "hellaswag/acc_norm") == {4: 0.2535}
    _, steps, _ = _import(ledger, "llmc-stdout.log")
    assert steps["mfu"].tolist() == pytest.approx([0.423, 0.835, 0.837])
    assert steps["tokens_per_s"].tolist() == [241137, 476084, 477110]
    assert steps["grad_norm"].tolist() == [15.4035, 10.8126, 8.0012] and steps["lr"].iloc[0] == 8.57e-06


def test_megatron_iterations_and_validation(ledger):
    res, steps, evals = _import(ledger, "megatron.log")
    assert steps["step"].tolist() == [10, 20, 30]
    assert steps["loss"].tolist() == [10.76923, 9.123456, 8.012345]
    assert steps["step_s"].tolist() == pytest.approx([1.5234, 1.4981, 1.5017])
    # its clock: each line's timestamp, from the log's first (the `datetime:` mark of a start-up phase)
    assert steps["wall_s"].tolist() == [100, 115, 130]
    assert steps["samples"].tolist() == [5120, 10240, 15360] and steps["lr"].tolist() == [3e-5, 6e-5, 9e-5]
    assert _extra(ledger, "megatron.log", "signals/loss_scale") == [4096.0] * 3
    assert _evals(evals, "val/loss") == {30: 7.912345}
    assert res.mapping["throughput_per_gpu_tflop_per_s_per_gpu"].startswith("imported/")


def test_megatron_tokens_from_consumed_samples(ledger):
    # a batch-size ramp makes tokens = step x N wrong; samples x sequence length stays right
    _, steps, evals = _import(ledger, "megatron.log", tokens_per_sample=2048)
    assert steps["tokens"].tolist() == [5120 * 2048, 10240 * 2048, 15360 * 2048]
    assert evals[evals["metric"] == "loss"]["tokens"].tolist() == [15360 * 2048]
    with pytest.raises(InputError, match="needs logged samples"):
        _import(ledger, "nanogpt.log", tokens_per_sample=256)


def test_fairseq_losses_are_bits_and_the_epoch_summary_is_not_a_step(ledger):
    _, steps, evals = _import(ledger, "fairseq.log")
    assert steps["step"].tolist() == [100, 200]
    # the epoch's mean (10.9 bits) must not overwrite update 200's own loss (9.876 bits)
    assert steps["loss"].tolist() == pytest.approx([12.105 * LN2, 9.876 * LN2])
    assert steps["tokens_per_s"].tolist() == [45123.4, 45500.1] and steps["wall_s"].tolist() == [75, 147]
    assert _evals(evals, "val/loss") == pytest.approx({200: 7.123 * LN2})


def test_torchtitan_colours_and_thousands_separators(ledger):
    res, steps, _ = _import(ledger, "torchtitan.log")
    assert steps["step"].tolist() == [1, 10]
    # TorchTitan's tps is one device's: with no device count it is not the job's tokens/s
    assert "tokens_per_s" not in steps or steps["tokens_per_s"].isna().all()
    assert _extra(ledger, "torchtitan.log", "imported/tokens_per_s_per_device") == [1249, 7845]
    assert any("tokens/s is logged per device and the device count is unknown" in w for w in res.warnings)
    assert steps["mfu"].tolist() == pytest.approx([0.2321, 0.4583])
    assert _extra(ledger, "torchtitan.log", "imported/memory_gib") == [34.86, 41.47]


def test_nanotron_suffixed_numbers_and_logger_tags(ledger):
    res, steps, _ = _import(ledger, "nanotron.log")
    assert steps["tokens"].tolist() == [5.24e6, 10.5e6]
    assert steps["step_s"].tolist() == pytest.approx([1.23, 1.21])
    assert steps["tokens_per_s"].tolist() == [426e3, 433e3]
    assert not {"dp", "pp", "tp"} & set(res.mapping)  # `[INFO|DP=0|PP=0|TP=0]` is the logger's, not a metric


def test_olmo_blocks_under_a_step_line(ledger):
    res, steps, evals = _import(ledger, "olmo.log")
    assert steps["step"].tolist() == [100, 101]
    assert steps["loss"].tolist() == [4.123, 4.101] and steps["tokens"].tolist() == [419430400, 423624704]
    assert steps["grad_norm"].tolist() == [0.456, 0.448] and steps["lr"].tolist() == [3e-4, 3e-4]
    assert _evals(evals, "val/c4_en_validation/loss") == {101: 4.2}
    assert _evals(evals, "val/c4_en_validation/ppl") == {101: 66.7}
    # the logger's `olmo.train:967` and `jupiter-cs-aus-157:0` are where it logged from, not metrics
    assert not any("olmo" in k or "jupiter" in k for k in res.mapping)
    assert any("1 line(s) are not kv log lines" in w for w in res.warnings)  # "Checkpoint successfully saved"


def test_a_python_logging_log_reads_only_its_steps(ledger):
    # `__main__:88` is where the line was logged, `Namespace(... steps=5000 ...)` and `max iteration: 5000` are
    # settings, `eta: 0:12:30` a clock; a NaN loss is a value worth keeping, not a reason to drop the line
    res, steps, _ = _import(ledger, "python-logging.log")
    assert res.source.endswith("(read as kv)")
    assert steps["step"].tolist() == [10, 20] and steps["lr"].tolist() == [1e-4, 2e-4]
    assert steps["loss"].iloc[0] == 4.5 and math.isnan(steps["loss"].iloc[1])
    assert not any("main" in k or "eta" in k for k in res.mapping)


def test_composer_blocks(ledger):
    _, steps, evals = _import(ledger, "composer.log")
    assert steps["step"].tolist() == [1, 2]
    assert steps["loss"].tolist() == [11.2345, 10.5012] and steps["tokens"].tolist() == [0, 524288]
    assert _evals(evals, "val/loss") == {2: 10.4}


def test_a_gzipped_log_reads_as_the_plain_one(ledger, tmp_path):
    import gzip

    path = tmp_path / "train.log.gz"
    path.write_bytes(gzip.compress((LOGS / "nanogpt.log").read_bytes()))
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="gz"))
    assert res.source.endswith("(read as nanogpt)") and len(ledger.steps("gz")) == 7
    path.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(InputError, match="train.log.gz: not a readable gzip file"):
        import_run(ledger, "textlog", [str(path)], ImportOptions(run="bad"))


def test_hugging_face_printed_dicts_point_to_trainer_state(ledger):
    with pytest.raises(InputError, match="trainer_state.json"):
        _import(ledger, "hf-stdout.log")
    assert ledger.runs().empty


def test_format_option(ledger, tmp_path):
    # forced: the generic pairs read a Megatron log too, its validation line included
    _, steps, evals = _import(ledger, "megatron.log", log_format="kv")
    assert steps["step"].tolist() == [10, 20, 30] and _evals(evals, "val/loss") == {30: 7.912345}
    with pytest.raises(InputError, match=r"^log_format must be one of auto, nanogpt, .*, got 'tensorflow'$"):
        _import(ledger, "nanogpt.log", log_format="tensorflow")
    with pytest.raises(InputError, match="exclude each other"):
        _import(ledger, "nanogpt.log", log_format="nanogpt", patterns=[r"iter (?P<step>\d+)"])
    with pytest.raises(InputError, match="no line reads as a nanogpt log line"):
        _import(ledger, "fairseq.log", log_format="nanogpt")
    path = tmp_path / "notes.txt"
    path.write_text("dear diary\nthe loss went down\n")
    with pytest.raises(InputError, match="no line reads as a known training log"):
        import_run(ledger, "textlog", [str(path)], ImportOptions(run="x"))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("INFO step=10 train loss=3.2", {"step": 10, "train_loss": 3.2}),  # the logger's word before the step key
        ("step 5 | lr: 1e-4, eval time: 12s", {"step": 5, "lr": 1e-4, "eval_time_s": 12}),  # step without a colon
        ("it=7 gpu util: 93%", {"step": 7, "gpu_util_pct": 93}),  # only MFU is read as a fraction
        ("global_step: 3 dt: 250ms", {"step": 3, "step_s": 0.25}),  # a per-step time in ms
        ("epoch 1 step: 12", None),  # a step and nothing measured
        ("loss: 3.1 lr: 0.1", None),  # values without a step
        ("completed step: 4, seconds: 1.5, loss: 9.9", {"step": 4, "step_s": 1.5, "loss": 9.9}),  # MaxText
        # DeepSpeed: its throughput line, and its optimizer line with the learning rate of each group
        (
            "steps: 100 loss: 3.4567 iter time (s): 1.234 samples/sec: 12.3",
            {"step": 100, "loss": 3.4567, "step_s": 1.234, "samples/sec": 12.3},
        ),
        ("[Rank 0] step=100, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]", {"step": 100, "skipped": 0, "lr": 1e-4}),
        ("trainer.py:212 host-3:0 step: 9 loss: 2.5", {"step": 9, "loss": 2.5}),  # file:line and host:rank skipped
        ("step: 2.5 loss: 1.0", {"step": 2.5, "loss": 1.0}),  # read; LogFormat.read refuses a step that is not whole
        ("word " * 800 + "step: 1 loss: 2", {"step": 1, "loss": 2}),  # a long run of words costs one pass, not n^2
        ("step: 1 " + "x=1 " * 2000, None),  # past 4,096 characters a line is a dump, not a step's metrics
        # a logger's name with its line number is where the line came from; a dotted or numbered key is a value
        ("2024-01-01 12:00:00,123 - INFO - __main__:45 - step: 5 loss: 2.0", {"step": 5, "loss": 2.0}),
        ("step: 3 train.loss: 2.5 top-1: 71.2", {"step": 3, "train.loss": 2.5, "top_1": 71.2}),
        ("2024-01-01 12:00:00,123 INFO loss: 2.3 step: 10", {"loss": 2.3, "step": 10}),  # the level is no part of a key
        # clocks and dates are not numbers: `eta: 0` and `time: 12` (read as wall clock) were
        ("step: 10, loss: 2.3, eta: 0:01:23, time: 12:00:01", {"step": 10, "loss": 2.3}),
        ("step: 7 loss: 2.0 datetime: 2024-05-01 12:00:00", {"step": 7, "loss": 2.0}),
        # a tqdm bar's share done is not a metric called `training`
        ("Training:  10%|#    | 100/1000 [00:10<01:30, 9.87it/s, step=100, loss=2.3]", {"step": 100, "loss": 2.3}),
        # settings are not a step: an object's repr, a count of steps, a bound on the iterations
        ("Namespace(batch_size=32, lr=0.001, step=0, log_interval=10)", None),
        ("train: steps: 100000 lr: 0.001", None),
        ("max iteration: 5000, lr: 0.001", None),
        ("Step 100/1000, Loss: 2.3456, LR: 1e-4", {"step": 100, "loss": 2.3456, "lr": 1e-4}),  # a capital S
        ("Iteration 100: loss: 2.3", {"step": 100, "loss": 2.3}),
        ("step=10 loss=2.3 tok/s=12.3k", {"step": 10, "loss": 2.3, "tokens_per_s": 12300}),  # a lower-case thousand
    ],
)
def test_pairs(line, expected):
    assert read_pairs(line) == expected


@pytest.mark.parametrize("text", ["NaN", "nan", "-nan", "Inf"])
def test_a_nonfinite_loss_is_read_in_any_case(text):
    values = read_pairs(f"step: 10, loss: {text}")
    assert values is not None and not math.isfinite(values["loss"])


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # llm.c's train_gpt2.cu since its outlier z-scores: `loss`, not `train loss`, each followed by `(..z)`
        (
            "step    1/74 | loss 11.010921 (+nanz)| norm 15.4035 (+nanz)| lr 8.57e-06 | 2174.40 ms | 42.3% bf16 MFU "
            "| 241137 tok/s",
            {
                "step": 1,
                "loss": 11.010921,
                "grad_norm": 15.4035,
                "lr": 8.57e-06,
                "step_s": 2.1744,
                "mfu": 0.423,
                "tokens_per_s": 241137,
            },
        ),
        (
            "step    2/74 | loss 10.542131 (-0.71z)| norm 10.8126 (+1.20z)| lr 1.71e-05 | 1101.27 ms | 476084 tok/s",
            {
                "step": 2,
                "loss": 10.542131,
                "grad_norm": 10.8126,
                "lr": 1.71e-05,
                "step_s": 1.10127,
                "tokens_per_s": 476084,
            },
        ),
        ("step 0: train loss 5.356086 (took 1452.121 ms)", {"step": 0, "loss": 5.356086, "step_s": 1.452121}),  # CPU
    ],
)
def test_llmc_printed_lines(line, expected):
    assert FORMATS["llm.c"].read(line) == pytest.approx(expected)


def test_a_run_of_spaces_is_read_in_one_pass():
    # `\s*\|?\s*` split a run of n spaces n^2 ways: 4,000 spaces took 2.7 s, these 8,000 would take ~11 s;
    # one pass takes well under a millisecond, so the bound only catches the quadratic pattern coming back
    start = time.perf_counter()
    assert FORMATS["llm.c"].read("step 1/2 | train loss 1.0" + " " * 8000 + "x") == {"step": 1, "loss": 1.0}
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("prefix", ["[default0]:", "[rank3]:", "0: "])
def test_a_launchers_rank_prefix_is_not_part_of_the_line(prefix):
    # torchrun --tee and srun --label put the rank before every line; the anchored formats must still read it
    assert FORMATS["nanogpt"].read(strip_ansi(prefix + "iter 10: loss 3.2202, time 19.85ms, mfu 18.76%"))["step"] == 10


def test_olmo_core_names_and_a_second_fairseq_validation_set():
    # the reader names each value as printed; the mapping, shared by every importer, says what it is
    for line, target in (
        ("    train/CE loss=3.45", "loss"),
        ("    optim/LR (group 0)=3e-4", "lr"),
        ("    eval/lm/c4_en-validation/CE loss=3.5", "val/lm/c4_en_validation/loss"),
    ):
        ((name, _),) = read_pairs(line, step=False).items()
        assert guess(name).key == target, line
    line = (
        "2021-05-10 10:03:39 | INFO | valid_wiki | epoch 001 | valid on 'valid_wiki' subset | loss 7.0 "
        "| num_updates 200"
    )
    assert FORMATS["fairseq"].read(line) == pytest.approx({"step": 200, "val/wiki/loss": 7.0 * LN2})


def test_a_step_that_is_not_whole_is_not_a_step_line():
    assert FORMATS["kv"].read("step: 2.5 loss: 1.0") is None and FORMATS["kv"].read("step: 2 loss: 1.0")


def test_every_format_says_what_it_reads():
    for fmt in FORMATS.values():
        assert "`" in fmt.about and (fmt.lines or fmt.reader or fmt.scan)


def test_cli_reads_a_known_log_without_a_pattern(cli):
    (out,) = cli.json("import", "textlog", str(LOGS / "nanogpt.log"), "--run", "n", "--tokens-per-step", "16384")
    assert (out["steps"], out["evals"]) == (7, 4) and out["source"].endswith("(read as nanogpt)")
    bad = cli("import", "textlog", str(LOGS / "hf-stdout.log"), "--run", "h", code=2)
    assert "trainer_state.json" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_megatron_each_evaluation_set_is_its_own_task(ledger, tmp_path):
    """Megatron-LM prints the periodic validation, then at the end `on validation set` and `on test set` for
    the same iteration; Megatron-DeepSpeed prints `at the end of training for test data`, multi-set runs
    `[name]`. A test-set loss never becomes the validation loss; a second value of one task is a warning."""
    head = (LOGS / "megatron.log").read_text()
    tail = (
        " validation loss at iteration 30 on validation set | lm loss value: 7.95E+00 | lm loss PPL: 2.8E+03 |\n"
        " validation loss at iteration 30 on test set | lm loss value: 8.25E+00 | lm loss PPL: 3.8E+03 |\n"
        "0: validation loss at iteration 30 [wiki-en] | lm loss value: 7.5E+00 |\n"
        " validation loss at the end of training for test data | lm loss value: 8.5E+00 | lm loss PPL: 4.9E+03 |\n"
    )
    path = tmp_path / "megatron-sets.log"
    path.write_text(head + tail)
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="m"))
    evals = ledger.evals("m")
    assert _evals(evals, "val/loss") == {30: 7.95}
    assert _evals(evals, "test/loss") == {30: 8.5}
    assert _evals(evals, "val/wiki_en/loss") == {30: 7.5}
    assert _evals(evals, "test/ppl") == {30: 4900.0}
    conflicts = [w for w in res.warnings if "two values" in w]
    assert conflicts == [
        f"{path} (read as megatron): task 'val' metric 'loss' has two values at step 30 (7.91235, "
        "then 7.95); the later is kept",
        f"{path} (read as megatron): task 'val' metric 'ppl' has two values at step 30 (2731.23, "
        "then 2800); the later is kept",
        f"{path} (read as megatron): task 'test' metric 'loss' has two values at step 30 (8.25, "
        "then 8.5); the later is kept",
        f"{path} (read as megatron): task 'test' metric 'ppl' has two values at step 30 (3800, "
        "then 4900); the later is kept",
    ]


def test_line_timestamps_give_the_clock_and_the_log_gives_the_device_count(ledger, tmp_path):
    """Timestamps that start a log's lines are its wall clock, from its first timestamped line (setup
    included); the device count comes from what the trainer prints, or from devices=."""
    path = tmp_path / "train.log"
    path.write_text(
        "2024-01-02 10:00:00,000 - INFO - Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16\n"
        "2024-01-02 10:00:30,500 - INFO - step: 10 loss: 5.25 lr: 0.0003\n"
        "2024-01-02 10:01:00,500 - INFO - step: 20 loss: 4.75 lr: 0.0003\n"
        "2024-01-02 10:01:31,000 - INFO - step: 30 loss: 4.5 lr: 0.0003 val_loss: 4.625\n"
    )
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="ts"))
    steps = ledger.steps("ts")
    assert steps["wall_s"].tolist() == [30.5, 60.5, 91.0]
    assert ledger.evals("ts")["wall_s"].tolist() == [91.0]
    assert not any("estimated" in w for w in res.warnings)
    assert ledger.meta("ts")["devices"] == {"count": 16, "from": f"{path}:1 (distributed members)"}
    iso = tmp_path / "iso.log"
    iso.write_text(
        "[2024-01-02T10:00:00.000Z] using world size: 8, data-parallel size: 2, tensor-model-parallel "
        "size: 4\n[2024-01-02T10:00:10.250Z] step=1 loss=9.0\n[2024-01-02T10:00:12.750Z] step=2 loss=8.5\n"
    )
    import_run(ledger, "textlog", [str(iso)], ImportOptions(run="iso", devices=4))
    assert ledger.steps("iso")["wall_s"].tolist() == [10.25, 12.75]
    assert ledger.meta("iso")["devices"] == {"count": 4, "from": "given"}
    import_run(ledger, "textlog", [str(iso)], ImportOptions(run="iso8"))
    assert ledger.meta("iso8")["devices"]["count"] == 8


def test_a_resumed_logs_clock_starts_at_its_first_step(ledger, tmp_path):
    """A log that starts at step 19,072 (resumed from a checkpoint) does not count 19,071 iterations it never
    ran: its estimated clock starts with its first logged iteration."""
    path = tmp_path / "resumed.log"
    path.write_text("".join(f"step {s:5d} | loss: 3.0 | dt: 1760.00ms\n" for s in range(19072, 19082)))
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="r"))
    assert ledger.steps("r")["wall_s"].tolist() == pytest.approx([1.76 * k for k in range(1, 11)])
    assert any("the log starts at step 19072" in w for w in res.warnings)


def test_torchtitan_numbers_with_separators_and_an_impossible_mfu(ledger, tmp_path):
    """TorchTitan prints `tflops: 4,700.89` and, with a peak table that does not know the device, an MFU of
    15,131%: the separator is a thousands mark, and an MFU past 100% is not stored as a fraction of peak."""
    path = tmp_path / "titan.log"
    path.write_text(
        "".join(
            f"[rank0]:[titan] 2025-05-01 10:00:{s:02d},000 - root - INFO - "
            f"\x1b[31mstep: {s:2d}  \x1b[32mloss:  {9 - s / 10:.4f}  "
            f"\x1b[33mmemory: 12.50GiB(15.81%)  \x1b[34mtps: 3,198  \x1b[36mtflops: 4,700.89  "
            f"\x1b[35mmfu: 15131.59%\x1b[39m\n"
            for s in range(1, 6)
        )
    )
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="titan", devices=4))
    steps = ledger.steps("titan", nullable=True)
    assert steps["tokens_per_s"].tolist() == [4 * 3198.0] * 5  # tps is per device
    assert _extra(ledger, "titan", "imported/tflops") == [4700.89] * 5
    assert "mfu" not in steps or steps["mfu"].isna().all()
    assert _extra(ledger, "titan", "imported/mfu_as_logged") == pytest.approx([151.3159] * 5)
    assert any("MFU above 100% of peak on 5 row(s) (up to 15132%)" in w for w in res.warnings)
    assert steps["wall_s"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]  # the logger's timestamps, after the rank prefix


def test_a_wandb_chart_export_keeps_its_last_row(ledger, tmp_path):
    """W&B writes its CSV exports without a final line end: a last row with every field quoted is whole."""
    path = tmp_path / "wandb_export.csv"
    path.write_text(
        '"Step","run-a - train/loss","run-a - train/loss__MIN","run-a - train/loss__MAX"\n'
        '"0","4.5","4.5","4.5"\n"1","4.25","4.25","4.25"\n"2","4.125","4.125","4.125"'
    )
    (res,) = import_run(ledger, "table", [str(path)], ImportOptions(run="wb"))
    assert ledger.steps("wb")["loss"].tolist() == [4.5, 4.25, 4.125]
    assert not any("truncated" in w for w in res.warnings)
    path.write_text("step,loss\n0,4.5\n1,4.25\n2,4.1")  # unquoted: the last number may have lost digits
    (res,) = import_run(ledger, "table", [str(path)], ImportOptions(run="cut"))
    assert ledger.steps("cut")["loss"].tolist() == [4.5, 4.25]
    assert any("truncated" in w for w in res.warnings)


def test_energy_printed_in_a_log_becomes_cumulative_joules(ledger, tmp_path):
    """Joules, kWh or an average power per interval, printed in the log, give energy_j (cumulative J)."""
    path = tmp_path / "e.log"
    path.write_text("".join(f"step={s} loss=3.0 energy_kwh={0.001 * s:.3f} wall={10 * s}\n" for s in range(1, 4)))
    import_run(ledger, "textlog", [str(path)], ImportOptions(run="kwh"))
    assert ledger.steps("kwh")["energy_j"].tolist() == pytest.approx([3600.0, 7200.0, 10800.0])
    # joules per interval (they fall from one line to the next): summed
    path.write_text(
        "".join(f"step={s} loss=3.0 energy (J): {j} wall={10 * s}\n" for s, j in ((1, 101), (2, 99), (3, 103)))
    )
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="interval"))
    assert ledger.steps("interval")["energy_j"].tolist() == pytest.approx([101.0, 200.0, 303.0])
    assert any("read as each line's interval and summed" in w for w in res.warnings)
    path.write_text(
        "".join(f"step={s} loss=3.0 avg_power_w={300 + 100 * (s % 2)} wall={10 * s}\n" for s in range(1, 4))
    )
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="watts"))
    assert ledger.steps("watts")["energy_j"].tolist() == pytest.approx([0.0, 3000.0, 7000.0])
    assert any("integrated from the logged average power" in w for w in res.warnings)


def test_a_cumulative_energy_counter_that_restarts_keeps_counting(ledger, tmp_path):
    """A resumed job's energy counter starts again from 0: the later values continue from where it stood, instead
    of the whole column being read as per-interval amounts and summed."""
    path = tmp_path / "e.log"
    joules = (100, 200, 300, 400, 500, 600, 10, 110, 210, 310, 410, 510)
    path.write_text("".join(f"step={s} loss=3.0 energy (J): {j}\n" for s, j in enumerate(joules, start=1)))
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="restart"))
    assert ledger.steps("restart")["energy_j"].tolist() == [
        100,
        200,
        300,
        400,
        500,
        600,
        610,
        710,
        810,
        910,
        1010,
        1110,
    ]
    assert any("restarts 1 time(s)" in w for w in res.warnings)


def test_torchtitan_validation_mesh_and_batch(ledger, tmp_path):
    """TorchTitan's `validate step: N  loss: X` is an evaluation, not the training loss of step N; its device
    mesh gives the device count (tps is per device); its printed global batch x sequence length gives tokens."""
    path = tmp_path / "titan.log"
    t = "[rank0]:[titan] 2026-05-12 23:{} - root - INFO - "
    path.write_text(
        t.format("29:47,151") + "Building device mesh with parallelism: pp=1, dp_replicate=1, dp_shard=8, cp=1, tp=1, "
        "ep=1, etp=1\n"
        + t.format("29:52,631")
        + "Trainer is initialized with local batch size 4, global batch size 384, gradient "
        "accumulation steps 12, sequence length 2048, total steps 12750 (warmup 1000)\n"
        + t.format("30:38,590")
        + "step:  1  loss: 12.20778  grad_norm:  0.1159  memory: 23.97GiB(76.44%)  tps: 2,127  "
        "tflops: 16.11  mfu: N/A\n"
        + t.format("32:26,394")
        + "validate step:  1  loss: 12.2079  memory: 23.97GiB(76.45%)  tps: 7,599\n"
        + t.format("36:35,049")
        + "step: 10  loss: 12.12004  grad_norm:  0.1212  memory: 25.28GiB(80.62%)  tps: 3,558  "
        "tflops: 26.95  mfu: N/A\n"
    )
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="titan"))
    steps, evals = ledger.steps("titan", nullable=True), ledger.evals("titan")
    assert steps["loss"].tolist() == [12.20778, 12.12004]
    assert _evals(evals, "val/loss") == {1: 12.2079}
    assert ledger.meta("titan")["devices"] == {"count": 8, "from": f"{path}:1 (device mesh)"}
    assert steps["tokens_per_s"].tolist() == [8 * 2127.0, 8 * 3558.0]
    assert steps["tokens"].tolist() == [384 * 2048, 10 * 384 * 2048]
    # step 1 ends at 23:30:38.590 (51.439 s after the first line); its validation ended at 23:32:26.394
    assert steps["wall_s"].tolist() == pytest.approx([51.439, 407.898])
    assert evals["wall_s"].tolist() == pytest.approx([159.243])
    assert any("tokens = step x 786,432" in w for w in res.warnings)
    import_run(ledger, "textlog", [str(path)], ImportOptions(run="titan2", tokens_per_step=1000.0))
    assert ledger.steps("titan2")["tokens"].tolist() == [1000, 10000]  # what the user gives wins
    older = tmp_path / "older.log"
    older.write_text(
        "[rank0]:2024-05-01 12:00:00,123 - root - INFO - Building 2-D device mesh with "
        "['dp_shard', 'tp'], [4, 2]\n"
        "[rank0]:2024-05-01 12:00:05,123 - root - INFO - step:  1  loss: 12.2504  tps: 1,249\n"
    )
    import_run(ledger, "textlog", [str(older)], ImportOptions(run="older"))
    assert ledger.meta("older")["devices"]["count"] == 8


def test_keras_fit_output_of_both_generations(ledger, tmp_path):
    """Keras' model.fit prints an `Epoch N/M` header and then the epoch's line: one step per epoch, `val_*`
    evaluations, the epoch's seconds as its step time; a second fit starting at epoch 1 again is counted on."""
    keras2 = tmp_path / "keras2.log"
    keras2.write_text(
        "Train on 400000 samples, validate on 10000 samples\nEpoch 1/2\n"
        "3083s - loss: 1.7197 - acc: 0.5893 - val_loss: 0.3504 - val_acc: 0.8959\nEpoch 2/2\n"
        "Epoch 00001: early stopping\n"
        "3086s - loss: 0.6644 - acc: 0.8074 - val_loss: 0.2832 - val_acc: 0.9182\nEpoch 1/2\n"
        "60000/60000 [==============================] - 3s 50us/step - loss: 0.1369 - acc: 0.9600 - "
        "val_loss: 0.0778 - val_acc: 0.9810\n"
    )
    (res,) = import_run(ledger, "textlog", [str(keras2)], ImportOptions(run="k2"))
    steps, evals = ledger.steps("k2", nullable=True), ledger.evals("k2")
    assert res.source.endswith("(read as keras)")
    assert steps["step"].tolist() == [1, 2, 3] and steps["loss"].tolist() == [1.7197, 0.6644, 0.1369]
    assert steps["step_s"].tolist() == [3083.0, 3086.0, 3.0]
    assert _evals(evals, "val/loss") == {1: 0.3504, 2: 0.2832, 3: 0.0778}
    assert _evals(evals, "val/acc") == {1: 0.8959, 2: 0.9182, 3: 0.981}
    assert any("steps in this run count epochs" in w for w in res.warnings)
    assert ledger.meta("k2")["step_unit"] == "epoch"  # what `yield` labels its tranches by
    keras3 = tmp_path / "keras3.log"
    keras3.write_text(
        "Epoch 1/2\n7/7 ━━━━━━━━━━━━━━━━━━━━ 7s 1s/step - accuracy: 0.5672 - loss: 0.6807 - "
        "val_accuracy: 0.5179 - val_loss: 0.6897\nEpoch 2/2\n7/7 ━━━━━━━━━━━━━━━━━━━━ 789ms 113ms/step - "
        "accuracy: 0.6 - loss: 0.6 - val_accuracy: 0.55 - val_loss: 0.65\n"
    )
    import_run(ledger, "textlog", [str(keras3)], ImportOptions(run="k3"))
    steps, evals = ledger.steps("k3", nullable=True), ledger.evals("k3")
    assert steps["step_s"].tolist() == [7.0, 0.789] and steps["loss"].tolist() == [0.6807, 0.6]
    assert _evals(evals, "val/acc") == {1: 0.5179, 2: 0.55}


def test_glog_and_month_first_timestamps_are_a_clock(ledger, tmp_path):
    """MaxText's absl lines (`I0317 10:00:13.224641 ...`, no year) and nanotron's `08/31/2024 14:37:31` start
    each line with the time: the log's clock, not step_s x steps."""
    maxtext = tmp_path / "maxtext.log"
    maxtext.write_text(
        "I0317 10:00:13.224641 140234 max_utils.py:84] System Information: Jax Version: 0.4.35\n"
        "I0317 10:00:15.500000 140234 train.py:123] completed step: 0, seconds: 1.500, TFLOP/s/device: 10.0, "
        "Tokens/s/device: 1000.0, total_weights: 27633, loss: 10.500\n"
        "I0317 10:00:20.140000 140234 train.py:123] completed step: 1, seconds: 0.400, TFLOP/s/device: 40.0, "
        "Tokens/s/device: 4000.0, total_weights: 32387, loss: 9.750\n"
    )
    (res,) = import_run(ledger, "textlog", [str(maxtext)], ImportOptions(run="mt", devices=4))
    steps = ledger.steps("mt")
    assert steps["wall_s"].tolist() == pytest.approx([2.275359, 6.915359])
    assert not any("estimated" in w for w in res.warnings)
    assert steps["tokens_per_s"].tolist() == [4000.0, 16000.0]  # Tokens/s/device x 4 devices
    nanotron = tmp_path / "nanotron.log"
    nanotron.write_text(
        "08/31/2024 14:37:30 [INFO|DP=0|PP=0|TP=0]: Config: train_steps=15\n"
        "08/31/2024 14:37:31 [INFO|DP=0|PP=0|TP=0]: iteration: 1 / 15 | consumed_tokens: 1.02K | "
        "elapsed_time_per_iteration_ms: 4.71K | tokens_per_sec: 217 | lm_loss: 5.32\n"
        "08/31/2024 14:37:32 [INFO|DP=0|PP=0|TP=0]: iteration: 2 / 15 | consumed_tokens: 2.05K | "
        "elapsed_time_per_iteration_ms: 90.1 | tokens_per_sec: 11.4K | lm_loss: 5.31\n"
    )
    (res,) = import_run(ledger, "textlog", [str(nanotron)], ImportOptions(run="nt"))
    assert ledger.steps("nt")["wall_s"].tolist() == [1.0, 2.0]
    assert not any("estimated" in w for w in res.warnings)


def test_composer_hours_throughput_and_devices(ledger, tmp_path):
    """Composer's SpeedMonitor logs `time/train` in hours and the job's `throughput/tokens_per_sec`; its banner
    prints GPUs per node and nodes (the ROCm MPT-30B blog run: 8 x 2)."""
    path = tmp_path / "composer.log"
    path.write_text(
        "******************************\nConfig:\nnum_gpus_per_node: 8\nnum_nodes: 2\n"
        "time/remaining_estimate_unit: hours\n\n******************************\n[epoch=1][batch=5/5]:\n"
        "\t Train time/batch: 4\n\t Train time/token: 29254495\n\t Train loss/train/total: 8.4213\n"
        "\t Train throughput/tokens_per_sec: 20082.8418\n"
        "\t Train throughput/device/tokens_per_sec: 1255.1776\n\t Train time/train: 0.5249\n"
    )
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="c"))
    steps = ledger.steps("c")
    assert steps["loss"].tolist() == [8.4213] and steps["tokens"].tolist() == [29254495]
    assert steps["tokens_per_s"].tolist() == [20082.8418]
    assert steps["wall_s"].tolist() == pytest.approx([0.5249 * 3600])
    assert ledger.meta("c")["devices"] == {"count": 16, "from": f"{path}:3 (GPUs per node x nodes)"}


def test_build_nanogpt_printed_evaluations_belong_to_the_next_step(ledger, tmp_path):
    """build-nanogpt prints `validation loss: X` and `HellaSwag accuracy: a/b=acc` with no step, before the line
    of the step they evaluate (its log.txt writes them at that step): they are evals there, not dropped."""
    path = tmp_path / "stdout.log"
    path.write_text(
        "step 19079 | loss: 3.235010 | lr 3.3796e-04 | norm: 0.8756 | dt: 798.53ms | tok/sec: 656570.47\n"
        "validation loss: 3.2034\nHellaSwag accuracy: 3049/10042=0.3036\n"
        "rank 0 sample 0: Hello, I'm a language model, and I would like\n"
        "step 19080 | loss: 3.285733 | lr 3.3794e-04 | norm: 0.8137 | dt: 19807.22ms | tok/sec: 26469.54\n"
    )
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="bn"))
    steps, evals = ledger.steps("bn"), ledger.evals("bn")
    assert res.source.endswith("(read as build-nanogpt)")
    assert steps["loss"].tolist() == [3.23501, 3.285733] and steps["tokens_per_s"].tolist() == [656570.47, 26469.54]
    assert steps["step_s"].tolist() == pytest.approx([0.79853, 19.80722])
    assert _evals(evals, "val/loss") == {19080: 3.2034}
    assert _evals(evals, "hellaswag/acc_norm") == {19080: 0.3036}


# MaxText's metric_logger lines as printed in a real run (a custom-Gemma SWA run on TPU, FINDINGS.md's second probe:
# `I0317 10:00:27.827598 125344476638336 metric_logger.py:181] completed step: 34, seconds: 0.426, ...`).
_MAXTEXT = (
    "I0317 10:00:{s:09.6f} 125344476638336 metric_logger.py:181] completed step: {step}, seconds: 0.426, "
    "TFLOP/s/device: 241.075, Tokens/s/device: 9608.302, total_weights: {weights}, loss: {loss}\n"
)


def test_maxtext_total_weights_are_summed_into_tokens(ledger, tmp_path):
    """MaxText prints `total_weights`, the non-padding target tokens of each step, and no token count: the run's
    tokens are their running sum (step 0 is the first step done, so it counts), and the import says so."""
    weights = [27633, 32387, 29331, 31414]
    path = tmp_path / "maxtext.log"
    path.write_text(
        "".join(_MAXTEXT.format(s=13.2 + 0.43 * i, step=i, weights=w, loss=10.5 - i / 4) for i, w in enumerate(weights))
    )
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="mt", devices=4))
    steps = ledger.steps("mt")
    assert steps["tokens"].tolist() == [27633.0, 60020.0, 89351.0, 120765.0]
    assert _extra(ledger, "mt", "imported/total_weights") == [float(w) for w in weights]  # kept as logged
    assert any("tokens = running sum of total_weights" in w for w in res.warnings)
    assert res.mapping["total_weights"].endswith("; tokens (running sum)")


def test_step_token_counts_are_not_summed_over_gaps_or_over_a_logged_count(ledger, tmp_path):
    """A log that prints the count on every other step cannot give the tokens of the steps it skipped: no tokens,
    and a warning that says why; a log that also prints a cumulative count keeps that one."""
    gappy = tmp_path / "gappy.log"
    gappy.write_text("".join(_MAXTEXT.format(s=13.2 + i, step=2 * i, weights=30000, loss=10.0) for i in range(3)))
    (res,) = import_run(ledger, "textlog", [str(gappy)], ImportOptions(run="gap"))
    assert "tokens" not in ledger.steps("gap", nullable=True).dropna(axis=1, how="all").columns
    assert any("total_weights" in w and "not summed" in w for w in res.warnings)
    counted = tmp_path / "counted.log"
    counted.write_text(
        "step: 1, total_weights: 100, consumed_tokens: 128, loss: 3.0\n"
        "step: 2, total_weights: 90, consumed_tokens: 256, loss: 2.9\n"
    )
    import_run(ledger, "textlog", [str(counted)], ImportOptions(run="counted"))
    assert ledger.steps("counted")["tokens"].tolist() == [128.0, 256.0]


def test_olmo_per_device_throughput_is_the_jobs_times_the_devices(ledger, tmp_path):
    """OLMo prints `throughput/device/tokens_per_second` (one device's) and no job-wide rate: with the device
    count given it is the job's tokens_per_s, as TorchTitan's `tps`; it was an `imported/` extra nothing read,
    whatever the count (the lines of tests/data/real/olmo-1b-azure-nccl-sharp-10steps.log)."""
    path = tmp_path / "olmo.log"
    path.write_text(
        "[2024-04-17 09:42:26] INFO     [olmo.train:816, rank=0] [step=1/739328]\n"
        "    train/CrossEntropyLoss=11.25\n    throughput/total_tokens=4,194,304\n"
        "[2024-04-17 09:42:38] INFO     [olmo.train:816, rank=0] [step=2/739328]\n"
        "    train/CrossEntropyLoss=10.73\n    throughput/total_tokens=8,388,608\n"
        "    throughput/device/tokens_per_second=45,538\n"
    )
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="o", devices=8))
    steps = ledger.steps("o", nullable=True)
    assert steps["tokens_per_s"].tolist()[1] == 45538 * 8
    assert any("tokens_per_s = tokens/s per device x 8 devices (given)" in w for w in res.warnings)
    (res,) = import_run(ledger, "textlog", [str(path)], ImportOptions(run="o2"))
    assert ledger.steps("o2", nullable=True)["tokens_per_s"].isna().all()
    assert any("kept as tokens_per_s_per_device" in w for w in res.warnings)


def test_tqdm_bars_count_batches_across_epochs_and_read_each_validation_once(ledger, tmp_path):
    """PyTorch Lightning's console as a file keeps it: each refresh of the bar after a carriage return, the count
    per epoch, `val_loss` shown in the training bar from its validation on. No format read it (an import error)."""
    res, steps, evals = _import(ledger, "lightning-tqdm.log")
    assert steps["step"].tolist() == [100, 200, 300, 400, 500, 600, 700, 800]  # 400 batches an epoch, counted on
    assert steps["loss"].tolist() == [3.91, 3.42, 3.05, 2.87, 2.71, 2.60, 2.52, 2.47]
    assert steps["wall_s"].tolist() == [10, 20, 30, 40, 52, 62, 72, 82]  # epoch 0 took 42 s with its validation
    assert _evals(evals, "val/loss") == {400: 2.91, 800: 2.55}  # each once, though the bar keeps showing it
    assert any("a step here is a batch" in w for w in res.warnings)
    # A loop's own bars: no epoch in the description (each bar counts from 0 again), a validation bar after each.
    log = tmp_path / "train.log"
    log.write_text(
        "100%|██████████| 153/153 [00:03<00:00, 44.53it/s, loss=0.783, metrics={'acc': 0.6151}]\n"
        "valid: 100%|██████████| 39/39 [00:00<00:00, 116.60it/s, loss=0.469, metrics={'acc': 0.6493}]\n"
        " 50%|█████     | 77/153 [00:01<00:01, 47.1it/s, loss=0.61]\r"
        "100%|██████████| 153/153 [00:03<00:00, 47.32it/s, loss=0.529, metrics={'acc': 0.7565}]\n"
        "valid: 100%|██████████| 39/39 [00:00<00:00, 95.90it/s, loss=0.396, metrics={'acc': 0.7}]\n"
    )
    (res,) = import_run(ledger, "textlog", [str(log)], ImportOptions(run="loop"))
    steps, evals = ledger.steps("loop"), ledger.evals("loop")
    assert steps["step"].tolist() == [153, 230, 306] and steps["loss"].tolist() == [0.783, 0.61, 0.529]
    assert steps["wall_s"].tolist() == [3, 4, 6]
    assert _evals(evals, "val/loss") == {153: 0.469, 306: 0.396}


def test_the_hf_trainers_console_takes_each_logs_step_from_its_progress_bar(ledger, tmp_path):
    """The Trainer prints each log as a dict after its bar (`500/1689 [01:30<03:29, 5.68it/s]{'loss': ...}`), an
    evaluation after a bar of its own batches; no format read it (an error sent the user to trainer_state.json)."""
    res, steps, evals = _import(ledger, "hf-printed.log")
    assert steps["step"].tolist() == [500, 1000]  # the dict cut by a redrawn bar at 1500 is not read
    assert steps["loss"].tolist() == [1.6771, 1.2034] and steps["grad_norm"].tolist() == [3.5, 2.1]
    assert steps["lr"].tolist() == pytest.approx([7.039668442865602e-06, 4.08e-06])  # quoted values too
    assert steps["wall_s"].tolist() == [90, 181]
    assert _evals(evals, "val/loss") == {1000: 1.4121} and _evals(evals, "val/bleu") == {1000: 21.3}  # not step 57
    # Without the bar there is no step: one clear error.
    log = tmp_path / "dicts.log"
    log.write_text("{'loss': 1.6771, 'learning_rate': 7.04e-06, 'epoch': 0.89}\n{'loss': 1.2, 'epoch': 1.78}\n")
    with pytest.raises(InputError, match="printed logs without its progress bar.*hf-trainer"):
        import_run(ledger, "textlog", [str(log)], ImportOptions(run="dicts"))
