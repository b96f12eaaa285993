"""The TensorBoard importer, on event files written by torch's own SummaryWriter (both scalar encodings)."""

from __future__ import annotations

import numpy as np
import pytest

from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ingest.tensorboard import event_files, read_scalars
from yieldgate.ingest.types import Warnings


def _write(log, steps=range(1, 11), new_style=False, evals_every=5):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log)
    for s in steps:
        writer.add_scalar("train/loss", 4.0 - s / 10, s, new_style=new_style)
        writer.add_scalar("train/learning_rate", 1e-3, s, new_style=new_style)
        writer.add_scalar("train/num_input_tokens_seen", 512 * s, s, new_style=new_style)
        if s % evals_every == 0:
            writer.add_scalar("eval/loss", 4.2 - s / 10, s, new_style=new_style)
    writer.add_histogram("weights", np.array([1.0, 2.0, 3.0]), 1)  # not a scalar: skipped
    writer.add_text("note", "hello", 1)
    writer.close()
    return log


@pytest.mark.parametrize("new_style", [False, True], ids=["simple_value", "tensor"])
def test_summarywriter_log_imports_with_mapping_and_yield(ledger, cli, tmp_path, new_style):
    log = _write(tmp_path / "tb", new_style=new_style)
    (res,) = import_run(ledger, "tensorboard", [str(log)], ImportOptions(run="tb"))
    assert res.mapping == {
        "wall_time": "wall_s",
        "train/loss": "loss",
        "train/learning_rate": "lr",
        "train/num_input_tokens_seen": "tokens",
        "eval/loss": "val/loss (eval)",
    }
    steps = ledger.steps("tb")
    assert steps["step"].tolist() == list(range(1, 11))
    assert steps["loss"].tolist() == pytest.approx([4.0 - s / 10 for s in range(1, 11)], rel=1e-6)
    assert (steps["wall_s"].diff().dropna() >= 0).all() and 0 <= steps["wall_s"].iloc[0] < 1
    start = ledger.meta("tb")["start_unix"]  # the first event's Unix time: telemetry joins on it
    assert abs(start - log.stat().st_mtime) < 60
    evals = ledger.evals("tb")
    assert evals["step"].tolist() == [5, 10] and evals["value"].tolist() == pytest.approx([3.7, 3.2], rel=1e-6)
    assert res.warnings == []


def test_token_column_and_yield(ledger, cli, tmp_path):
    log = _write(tmp_path / "tb")
    import_run(ledger, "tensorboard", [str(log)], ImportOptions(run="tb"))
    assert ledger.steps("tb")["tokens"].tolist() == [512.0 * s for s in range(1, 11)]
    (tranche,) = cli.json("yield", "tb")
    assert tranche["start_tokens"] == 2560 and tranche["end_tokens"] == 5120
    assert tranche["yield_per_btok"] == pytest.approx(0.5 / 2560 * 1e9, rel=1e-5)


@pytest.mark.slow
def test_resumed_run_in_a_second_events_file(ledger, tmp_path):
    import time

    log = _write(tmp_path / "tb", steps=range(1, 8))
    time.sleep(1.1)  # event file names carry the second they were opened
    _write(log, steps=range(6, 11))  # resumed from step 5's checkpoint: steps 6 and 7 again
    assert len(event_files(log)) == 2
    (res,) = import_run(ledger, "tensorboard", [str(log)], ImportOptions(run="tb"))
    assert ledger.steps("tb")["step"].tolist() == list(range(1, 11))
    assert ledger.evals("tb")["step"].tolist() == [5, 10]
    # Steps 6 and 7 repeat every value but the wall time: logged again, the later kept (one warning each).
    second = event_files(log)[1]
    *relogged, restart = res.warnings
    assert restart.startswith(f"{second}: offset 88: the steps go back from 7 to 6 (a restart from a checkpoint, or a")
    assert [w.split(" with ")[0] for w in relogged] == [
        f"{second}: offset 88: step 6 logged again",
        f"{second}: offset 258: step 7 logged again",
    ]
    assert all(w.endswith("the later values are kept") for w in relogged)
    # The restart is a resume event: the checkpoint's step 5, steps 6 and 7 done twice (goodput counts them).
    (event,) = ledger.events("tb", kind="resume")["body"]
    assert event["old"] == {"step": 7} and event["resume"] == {"step": 5} and event["source"] == "import"


def test_truncated_tail_keeps_the_records_before_it(ledger, tmp_path):
    log = _write(tmp_path / "tb")
    (path,) = event_files(log)
    whole = read_scalars([path], Warnings())
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # the last record (the text summary) loses its tail
    warnings = Warnings()
    cut = read_scalars([path], warnings)
    assert len(cut) == len(whole)  # the cut record was the text summary, not a scalar
    (line,) = warnings.summary()
    assert line.startswith(f"{path}: offset ") and "last record cut off" in line
    path.write_bytes(data[: len(data) // 2])
    warnings = Warnings()
    half = read_scalars([path], warnings)
    assert 0 < len(half) < len(whole) and "cut off" in warnings.summary()[0]
    assert half.equals(whole.iloc[: len(half)].reset_index(drop=True))


def test_damaged_bytes_are_one_error_with_offset_and_nothing_is_written(ledger, tmp_path):
    log = _write(tmp_path / "tb")
    (path,) = event_files(log)
    data = bytearray(path.read_bytes())
    data[200] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=rf"{path}: offset \d+: record (payload|length) fails its CRC"):
        import_run(ledger, "tensorboard", [str(log)], ImportOptions(run="tb"))
    path.write_bytes(b"this is not an event file at all\n" * 3)
    with pytest.raises(InputError, match="offset 0: record length fails its CRC"):
        import_run(ledger, "tensorboard", [str(log)], ImportOptions(run="tb"))
    with pytest.raises(InputError, match="no TensorBoard event files"):
        (tmp_path / "empty").mkdir()
        import_run(ledger, "tensorboard", [str(tmp_path / "empty")], ImportOptions(run="tb"))
    assert ledger.runs().empty


def _megatron(log, sections: bool, gbs=512, seq=2048):
    """What Megatron's training_log writes: each metric at the iteration, then again against consumed samples
    (and tokens, in Megatron-DeepSpeed); Megatron-DeepSpeed puts each tag under a section of its own name."""
    from torch.utils.tensorboard import SummaryWriter

    def tag(section, name):
        return f"{section}/{name}" if sections else name

    writer = SummaryWriter(log)
    for it in range(10, 101, 10):
        samples, loss = it * gbs, 10 / (1 + it / 50)
        writer.add_scalar(tag("learning-rate", "learning-rate"), 1e-4, it)
        writer.add_scalar(tag("learning-rate", "learning-rate vs samples"), 1e-4, samples)
        writer.add_scalar(tag("lm-loss-training", "lm loss"), loss, it)
        writer.add_scalar(tag("lm-loss-training", "lm loss vs samples"), loss, samples)
        writer.add_scalar(tag("lm-loss-training", "lm loss vs tokens"), loss, samples * seq)
        writer.add_scalar(tag("loss-scale", "loss-scale"), 4096, it)
        writer.add_scalar(tag("grad-norm", "grad-norm"), 1.5, it)
        writer.add_scalar(tag("iteration-time", "iteration-time"), 1.25, it)
        if it % 50 == 0:
            writer.add_scalar(tag("lm-loss-validation", "lm loss validation"), loss + 0.1, it)
            writer.add_scalar(tag("lm-loss-validation", "lm loss validation vs samples"), loss + 0.1, samples)
            writer.add_scalar(tag("lm-loss-validation", "lm loss validation ppl"), 2.0, it)
    writer.close()
    return log


@pytest.mark.parametrize("sections", [False, True], ids=["megatron-lm", "megatron-deepspeed"])
def test_megatron_tags_and_their_other_x_axes(ledger, tmp_path, sections):
    log = _megatron(tmp_path / "tb", sections)
    (res,) = import_run(ledger, "tensorboard", [str(log)], ImportOptions(run="m"))
    steps = ledger.steps("m")
    # `... vs samples` events sit at step = samples consumed: read as metrics they were rows at step 51,200
    assert steps["step"].tolist() == list(range(10, 101, 10))
    assert steps["samples"].tolist() == [it * 512 for it in range(10, 101, 10)]
    assert steps["tokens"].tolist() == [it * 512 * 2048 for it in range(10, 101, 10)]
    assert steps["loss"].tolist() == pytest.approx([10 / (1 + it / 50) for it in range(10, 101, 10)], rel=1e-6)
    assert steps["lr"].tolist() == pytest.approx([1e-4] * 10) and (steps["grad_norm"] == 1.5).all()
    assert (steps["step_s"] == 1.25).all()
    assert ledger.extras("m", ["signals/loss_scale"])["value"].tolist() == [4096.0] * 10
    evals = ledger.evals("m")
    val = evals[evals["metric"] == "loss"]
    assert val["step"].tolist() == [50, 100] and val["tokens"].tolist() == [50 * 512 * 2048, 100 * 512 * 2048]
    assert set(evals["metric"]) == {"loss", "ppl"} and set(evals["task"]) == {"val"}
    assert not any(t.startswith("imported/") for t in res.mapping.values())
    assert any("logged against samples or tokens" in w for w in res.warnings)


def _bench_import():
    """benchmarks/bench_import.py, whose event-file writer (TFRecord frames written by hand) the tests share."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_import.py"
    spec = importlib.util.spec_from_file_location("bench_import", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_event_files_are_streamed_memory_does_not_grow_with_file_size(tmp_path, monkeypatch):
    # An event file of histograms runs to gigabytes: the reader holds a chunk of it at a time (made 1 MiB
    # here, so that files of a few MB stand for GBs), never the file. benchmarks/bench_import.py --memory
    # measures a 2 GB file end to end.
    import tracemalloc

    import yieldgate.ingest.tensorboard as tb

    bench = _bench_import()
    monkeypatch.setattr(tb, "_CHUNK", 1 << 20)
    peaks, rows = {}, {}
    for size in (4, 16):
        path = tmp_path / f"events.out.tfevents.{size}mb"
        steps = bench.write_event_file(path, size << 20)
        tracemalloc.start()
        scalars = read_scalars([path], Warnings())
        peaks[size] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rows[size] = (len(scalars), steps)
        assert len(scalars) == 3 * steps and scalars["step"].iloc[-1] == steps
    assert peaks[16] < 2 * peaks[4] and peaks[16] < (16 << 20) / 2, peaks


def test_records_across_chunk_boundaries_read_as_one_file(tmp_path, monkeypatch):
    import yieldgate.ingest.tensorboard as tb

    log = _write(tmp_path / "tb", steps=range(1, 201))
    (path,) = event_files(log)
    whole = read_scalars([path], Warnings())
    for chunk in (1, 7, 100, 4096):  # smaller than a header, than a record, and a few records
        monkeypatch.setattr(tb, "_CHUNK", chunk)
        assert read_scalars([path], Warnings()).equals(whole), chunk
    data = path.read_bytes()
    path.write_bytes(data[:-5])  # cut off: the last record is dropped with a warning, in every chunking
    cut = None
    for chunk in (1, 7, 4096, 1 << 20):
        monkeypatch.setattr(tb, "_CHUNK", chunk)
        warnings = Warnings()
        scalars = read_scalars([path], warnings)
        cut = scalars if cut is None else cut
        assert scalars.equals(cut) and "last record cut off" in warnings.summary()[0], chunk
    assert len(cut) == len(whole)  # the cut record was the text summary, not a scalar


def _keras_log(log, epochs=4, batches_per_epoch=0):
    """The layout of Keras' TensorBoard callback: `train/` and `validation/` folders of one run, the same tags
    in both (`epoch_loss` at step = epoch; with `update_freq='batch'` also `batch_loss` at step = batch and,
    since TF 2.2, `evaluation_loss_vs_iterations` at step = batches trained)."""
    from torch.utils.tensorboard import SummaryWriter

    SummaryWriter(log / "train").close()  # a file with no scalars first, as the profiler's `.profile-empty`
    train, val = SummaryWriter(log / "train"), SummaryWriter(log / "validation")
    for e in range(epochs):
        for b in range(batches_per_epoch):
            done = e * batches_per_epoch + b + 1  # the batches trained: Keras' step of a batch's values
            train.add_scalar("batch_loss", 3.0 - done / 100, done)
        train.add_scalar("epoch_loss", 2.0 - e / 10, e, new_style=True)
        train.add_scalar("epoch_accuracy", 0.5 + e / 10, e, new_style=True)
        val.add_scalar("epoch_loss", 2.5 - e / 20, e, new_style=True)
        val.add_scalar("epoch_accuracy", 0.4 + e / 20, e, new_style=True)
        if batches_per_epoch:
            val.add_scalar("evaluation_loss_vs_iterations", 2.5 - e / 20, (e + 1) * batches_per_epoch)
    train.close()
    val.close()
    return log


def test_keras_train_and_validation_folders_are_one_run_counted_in_epochs(ledger, cli, tmp_path):
    """Read file by file, the validation folder restarted the run at step 0 over the training values (a resume
    event, the training loss lost); a real Keras log read so: shared/real's keras-tf2-cbam-noise-tb."""
    (res,) = import_run(ledger, "tensorboard", [str(_keras_log(tmp_path / "fit"))], ImportOptions(run="k"))
    steps = ledger.steps("k")
    assert steps["step"].tolist() == [0, 1, 2, 3]
    assert steps["loss"].tolist() == pytest.approx([2.0, 1.9, 1.8, 1.7])
    evals = ledger.evals("k")
    assert set(evals["task"] + "/" + evals["metric"]) == {"val/loss", "val/acc"}
    val = evals[evals["metric"] == "loss"].sort_values("step")
    assert val["step"].tolist() == [0, 1, 2, 3] and val["value"].tolist() == pytest.approx([2.5, 2.45, 2.4, 2.35])
    assert ledger.events("k", kind="resume").empty
    assert ledger.meta("k")["step_unit"] == "epoch"
    assert any("steps in this run count epochs" in w for w in res.warnings)


def test_a_fairseq_logdir_reads_as_its_text_log_does(ledger, tmp_path):
    """fairseq's --tensorboard-logdir: `train_inner/`, `train/` (each epoch's means) and one folder per validation
    subset, the same names in each, at step = num_updates, losses in bits. Read as they were, the validation's and
    the epoch means' `loss` were merged into the training rows of their steps, and the validation folders, read after
    the training, turned the clock back (every later time offset)."""
    from torch.utils.tensorboard import SummaryWriter

    ln2 = np.log(2.0)
    log = tmp_path / "tb"
    inner, epoch, valid, wiki = (SummaryWriter(log / k) for k in ("train_inner", "train", "valid", "valid_wiki"))
    for step in range(100, 1001, 100):
        inner.add_scalar("loss", 10 - step / 200, step, walltime=1000.0 + step)
        inner.add_scalar("wps", 5000.0, step, walltime=1000.0 + step)
        inner.add_scalar("gnorm", 1.5, step, walltime=1000.0 + step)
    for step in (550, 1000):  # an epoch's last update: not one --log-interval logs
        epoch.add_scalar("loss", 11.0, step, walltime=1000.0 + step + 1)
        valid.add_scalar("loss", 9.0 - step / 200, step, walltime=1000.0 + step + 5)
        valid.add_scalar("ppl", 2 ** (9.0 - step / 200), step, walltime=1000.0 + step + 5)
        valid.add_scalar("best_loss", 9.0 - step / 200, step, walltime=1000.0 + step + 5)
        wiki.add_scalar("loss", 9.5 - step / 200, step, walltime=1000.0 + step + 6)
    for w in (inner, epoch, valid, wiki):
        w.close()
    (res,) = import_run(ledger, "tensorboard", [str(log)], ImportOptions(run="fs"))
    everything = ledger.steps("fs")
    steps = everything[everything["loss"].notna()]
    assert steps["step"].tolist() == list(range(100, 1001, 100))
    assert steps["loss"].tolist() == pytest.approx([(10 - s / 200) * ln2 for s in range(100, 1001, 100)])
    assert steps["tokens_per_s"].tolist() == [5000.0] * 10 and steps["grad_norm"].tolist() == [1.5] * 10
    assert steps["wall_s"].tolist() == pytest.approx(list(range(0, 901, 100)))
    # Step 550 was validated, not logged: its row holds the time the last validation ended, and nothing else.
    assert everything["step"].tolist() == [*range(100, 501, 100), 550, *range(600, 1001, 100)]
    assert everything.set_index("step").loc[550].dropna().to_dict() == {"wall_s": 456.0}
    evals = ledger.evals("fs").sort_values(["task", "metric", "step"])
    got = {(t, m): v for (t, m), v in evals.groupby(["task", "metric"])["value"].agg(list).items()}
    assert got == {
        ("val", "loss"): pytest.approx([(9 - 2.75) * ln2, 4 * ln2]),
        ("val", "ppl"): pytest.approx([76.1093, 16]),  # a perplexity: 2 ** bits, as logged
        ("val/wiki", "loss"): pytest.approx([(9.5 - 2.75) * ln2, 4.5 * ln2]),
    }
    assert sorted(evals["wall_s"]) == pytest.approx([455, 455, 456, 905, 905, 906])  # each its own clock
    assert ledger.events("fs", kind="resume").empty and not any("went back" in w for w in res.warnings)
    assert any("train/ (each epoch's means) skipped" in w and "valid/best_loss" in w for w in res.warnings)


def test_a_loops_own_train_and_val_folders_are_one_run_with_its_evaluations(ledger, tmp_path):
    """`SummaryWriter(log / "train")` beside `SummaryWriter(log / "val")` and `(log / "test")`, the same tags in
    each: the validation's `loss` was merged into the training row of its step, `accuracy` lost as an extra, and
    the test folder, read after the training, turned the clock back."""
    from torch.utils.tensorboard import SummaryWriter

    log = tmp_path / "runs" / "exp1"
    train, val, test = (SummaryWriter(log / k) for k in ("train", "val", "test"))
    for step in range(1, 41):
        train.add_scalar("loss", 4.0 - step / 20, step, walltime=100.0 + step)
        if step % 10 == 0:
            val.add_scalar("loss", 4.2 - step / 25, step, walltime=100.0 + step + 0.5)
            val.add_scalar("accuracy", step / 50, step, walltime=100.0 + step + 0.5)
    test.add_scalar("loss", 2.8, 40, walltime=150.0)
    for w in (train, val, test):
        w.close()
    (res,) = import_run(ledger, "tensorboard", [str(log)], ImportOptions(run="exp1"))
    steps = ledger.steps("exp1")
    assert steps["loss"].tolist() == pytest.approx([4.0 - s / 20 for s in range(1, 41)])
    assert steps["wall_s"].tolist() == pytest.approx(range(0, 40))
    evals = ledger.evals("exp1").sort_values(["task", "metric", "step"])
    got = {(t, m): v for (t, m), v in evals.groupby(["task", "metric"])["value"].agg(list).items()}
    assert got == {
        ("val", "loss"): pytest.approx([3.8, 3.4, 3.0, 2.6]),
        ("val", "acc"): pytest.approx([0.2, 0.4, 0.6, 0.8]),
        ("test", "loss"): pytest.approx([2.8]),
    }
    assert ledger.events("exp1", kind="resume").empty and not any("went back" in w for w in res.warnings)
    assert any("evaluations beside a train/ folder" in w for w in res.warnings)


def test_deepspeed_monitors_sample_axis_becomes_steps_and_samples(ledger, tmp_path):
    """DeepSpeed's Monitor logs `Train/Samples/train_loss` at x = samples trained: read as steps, a 32-sample batch
    made 32 steps of each step (and the loss an extra). As its engine writes them: the loss in `backward()`, before
    the step's samples are counted (x = 0 for the first step), the LR in `step()`, after (x = 32)."""
    from torch.utils.tensorboard import SummaryWriter

    regular, odd = SummaryWriter(tmp_path / "ds"), SummaryWriter(tmp_path / "odd")
    for step in range(1, 51):
        regular.add_scalar("Train/Samples/train_loss", 5.0 - step / 20, (step - 1) * 32, walltime=100.0 + step)
        regular.add_scalar("Train/Samples/lr", step * 1e-5, step * 32, walltime=100.0 + step)
    for samples in (32, 64, 100, 132):  # no batch size divides them all
        odd.add_scalar("Train/Samples/train_loss", 4.0, samples, walltime=100.0 + samples)
    regular.close()
    odd.close()
    (res,) = import_run(ledger, "tensorboard", [str(tmp_path / "ds")], ImportOptions(run="ds"))
    steps = ledger.steps("ds")
    assert steps["step"].tolist() == list(range(1, 51))
    assert steps["samples"].tolist() == [32.0 * s for s in range(1, 51)]
    assert steps["loss"].tolist() == pytest.approx([5.0 - s / 20 for s in range(1, 51)])  # each step's own LR beside
    assert steps["lr"].tolist() == pytest.approx([s * 1e-5 for s in range(1, 51)])
    assert any("step = samples / 32" in w for w in res.warnings)
    (res,) = import_run(ledger, "tensorboard", [str(tmp_path / "odd")], ImportOptions(run="odd"))
    assert ledger.steps("odd")["step"].tolist() == [32, 64, 100, 132]
    assert any("the steps of this run count samples" in w for w in res.warnings)


def test_an_estimators_eval_folders_are_evaluations_not_the_training_loss(ledger, tmp_path):
    """TF Estimator writes its evaluations into `eval/` (and `eval_<name>/`) of the model directory under the
    training's tag names at the global step. Read as they were, an evaluation's `loss` was merged into the training
    row of its step (the training loss lost there), `accuracy` became an extra, and an evaluator running behind
    the training turned the step clock back (a spurious timer reset offsetting every later time)."""
    from torch.utils.tensorboard import SummaryWriter

    model_dir = tmp_path / "model"
    train = SummaryWriter(model_dir)
    for step in range(0, 3001, 100):
        train.add_scalar("loss", 3.0 - step / 1000, step, walltime=1000.0 + step)
        train.add_scalar("global_step/sec", 10.0, step, walltime=1000.0 + step)
    train.close()
    evaluator, holdout = SummaryWriter(model_dir / "eval"), SummaryWriter(model_dir / "eval_holdout")
    for step in (1000, 2000, 3000):
        # An evaluator beside the training: checkpoint N evaluated while the training is 50 steps on, or before.
        evaluator.add_scalar("loss", 3.5 - step / 1000, step, walltime=1000.0 + step + 50)
        evaluator.add_scalar("accuracy", step / 4000, step, walltime=1000.0 + step + 50)
        holdout.add_scalar("loss", 3.7 - step / 1000, step, walltime=900.0)
    evaluator.close()
    holdout.close()
    (res,) = import_run(ledger, "tensorboard", [str(model_dir)], ImportOptions(run="est"))
    steps = ledger.steps("est")
    assert steps["step"].tolist() == list(range(0, 3001, 100))
    assert steps["loss"].tolist() == pytest.approx([3.0 - s / 1000 for s in range(0, 3001, 100)])
    assert steps["wall_s"].tolist() == pytest.approx(list(range(0, 3001, 100)))
    evals = ledger.evals("est").sort_values(["task", "metric", "step"])
    got = {(t, m): v for (t, m), v in evals.groupby(["task", "metric"])["value"].agg(list).items()}
    assert got == {
        ("val", "loss"): pytest.approx([2.5, 1.5, 0.5]),
        ("val", "acc"): pytest.approx([0.25, 0.5, 0.75]),
        ("val/holdout", "loss"): pytest.approx([2.7, 1.7, 0.7]),
    }
    assert ledger.events("est", kind="resume").empty
    assert any("TF Estimator layout" in w for w in res.warnings) and not any("went back" in w for w in res.warnings)


def test_keras_batch_logs_count_batches_and_validate_against_iterations(ledger, tmp_path):
    log = _keras_log(tmp_path / "fit", epochs=3, batches_per_epoch=5)
    (res,) = import_run(ledger, "tensorboard", [str(log)], ImportOptions(run="k"))
    steps = ledger.steps("k")
    assert steps["step"].tolist() == list(range(1, 16))
    assert steps["loss"].tolist() == pytest.approx([3.0 - b / 100 for b in range(1, 16)])
    val = ledger.evals("k").sort_values("step")
    assert val["step"].tolist() == [5, 10, 15] and val["metric"].unique().tolist() == ["loss"]
    assert "step_unit" not in ledger.meta("k")
    assert any("left out" in w and "epoch_loss" in w for w in res.warnings)
