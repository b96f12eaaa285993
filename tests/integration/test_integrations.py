"""The framework adapters: a real Trainer / Lightning run of a tiny model on real text, and the ledger's rows
equal the framework's own record of the same run, row for row."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.support.helpers import stdlib_corpus
from yieldgate.ledger import Ledger
from yieldgate.track.integrations import TokenCounter, batch_counts

pytestmark = pytest.mark.slow  # real trainings, probes or processes: `make test-all`

CONTEXT = 32


@pytest.fixture(scope="module")
def corpus() -> tuple[np.ndarray, np.ndarray]:
    train, held, _ = stdlib_corpus(300_000)
    return train, held


@pytest.fixture(autouse=True)
def two_threads():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


def windows(text: np.ndarray, n: int, seed: int, t: int = CONTEXT + 1) -> torch.Tensor:
    """n random windows of t bytes (token ids < 256), as int64 (n, t)."""
    starts = np.random.default_rng(seed).integers(0, len(text) - t, size=n)
    return torch.from_numpy(np.stack([text[s : s + t] for s in starts]).astype(np.int64))


def read_csv_log(path: Path) -> dict[int, dict[str, float]]:
    """A Lightning CSVLogger file as {logged step: {column: value}}, merging the rows of one step. Parsed with
    float(), which round-trips the logger's repr exactly."""
    merged: dict[int, dict[str, float]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            step = merged.setdefault(int(row.pop("step")), {})
            step.update({k: float(v) for k, v in row.items() if v != ""})
    return merged


# -- shared pieces ------------------------------------------------------------------------------------------


def test_importing_yieldgate_imports_no_framework():
    code = (
        "import sys, yieldgate, yieldgate.track, yieldgate.track.integrations; "
        "print(sorted(m for m in ('transformers', 'accelerate', 'lightning', 'pytorch_lightning') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_batch_counts_from_shapes_and_masks():
    ids = torch.zeros(4, 16, dtype=torch.long)
    mask = torch.ones(4, 16, dtype=torch.long)
    mask[1, 10:] = 0
    assert batch_counts({"input_ids": ids}) == (64, 4)
    tokens, samples = batch_counts({"input_ids": ids, "attention_mask": mask})
    assert isinstance(tokens, torch.Tensor) and int(tokens) == 58 and samples == 4
    assert batch_counts((ids, ids)) == (64, 4) and batch_counts(ids) == (64, 4)
    assert batch_counts({"inputs_embeds": torch.zeros(2, 8, 5)}) == (16, 2)
    assert batch_counts({"labels": ids}) is None and batch_counts("text") is None
    counter = TokenCounter()
    counter.add(64)
    counter.add(tokens)
    assert counter.take() == 122 and counter.take() == 0


def test_hf_eval_metric_names():
    from yieldgate.track.integrations.hf import eval_metrics

    single = {
        "eval_loss": 2.5,
        "eval_accuracy": 0.4,
        "eval_runtime": 1.0,
        "eval_samples_per_second": 9.0,
        "eval_steps_per_second": 3.0,
        "epoch": 0.5,
    }
    assert eval_metrics(single) == {"val/loss": 2.5, "val/accuracy": 0.4}
    per_source = {"eval_code_loss": 2.0, "eval_code_runtime": 1.0, "eval_code_steps_per_second": 1.0, "epoch": 1.0}
    assert eval_metrics(per_source) == {"val/code/loss": 2.0}
    assert eval_metrics({"test_loss": 1.5, "test_runtime": 0.1}) == {"test/loss": 1.5}


def test_lightning_validation_metric_names():
    from yieldgate.track.integrations.lightning import val_metrics

    one = torch.tensor(1.0)
    metrics = {
        "val/loss": one,
        "val_acc": one,
        "valid_bpb": one,
        "val/code/loss": one,
        "train/loss": one,
        "epoch": one,
        "value": one,
        "val_loss/dataloader_idx_1": one,
    }
    assert set(val_metrics(metrics)) == {"val/loss", "val/acc", "val/bpb", "val/code/loss", "val/dataloader_idx_1/loss"}


# -- Hugging Face Trainer -----------------------------------------------------------------------------------


def _hf_examples(text: np.ndarray, n: int, seed: int, pad: bool) -> list[dict[str, torch.Tensor]]:
    """Byte sequences of CONTEXT tokens; with `pad`, about half are cut to 12..31 tokens and right-padded (mask 0,
    labels -100), so padding is there to be left out of the token count."""
    rng = np.random.default_rng(seed + 1)
    out = []
    for row in windows(text, n, seed, CONTEXT):
        length = int(rng.integers(12, CONTEXT)) if pad and rng.random() < 0.5 else CONTEXT
        mask = (torch.arange(CONTEXT) < length).long()
        ids = torch.where(mask.bool(), row, 0)
        out.append({"input_ids": ids, "attention_mask": mask, "labels": torch.where(mask.bool(), row, -100)})
    return out


def test_hf_trainer_rows_equal_log_history(corpus, tmp_path, ledger_location):
    transformers = pytest.importorskip("transformers")
    from yieldgate.track.integrations.hf import YieldgateCallback

    train, held = corpus
    transformers.set_seed(0)
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=256, n_positions=CONTEXT)
    )
    steps, accumulate, batch = 30, 2, 8
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        max_steps=steps,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=accumulate,
        per_device_eval_batch_size=32,
        learning_rate=3e-3,
        lr_scheduler_type="linear",
        logging_steps=5,
        eval_strategy="steps",
        eval_steps=10,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        dataloader_num_workers=0,
        seed=0,
        # The Trainer's own token count, the reference for ours (it costs a sync per microbatch; ours does not).
        include_num_input_tokens_seen="non_padding",
    )
    path = ledger_location  # a SQLite file, and a PostgreSQL schema (the team ledger)
    callback = YieldgateCallback("hf-gpt2", ledger=path)
    trainer = transformers.Trainer(
        model=model,
        args=args,
        callbacks=[callback],
        train_dataset=_hf_examples(train, steps * accumulate * batch, seed=0, pad=True),
        eval_dataset=_hf_examples(held, 32, seed=1, pad=False),
    )
    trainer.train()
    assert callback.tracker.stats["faults"] == 0

    logged = [r for r in trainer.state.log_history if "loss" in r]
    evals = [r for r in trainer.state.log_history if "eval_loss" in r]
    assert [r["step"] for r in logged] == [5, 10, 15, 20, 25, 30] and [r["step"] for r in evals] == [10, 20, 30]
    with Ledger(path, readonly=True) as led:
        assert led.run_info("hf-gpt2")["status"] == "finished"
        rows = led.steps("hf-gpt2").set_index("step")
        val = led.evals("hf-gpt2").query("task == 'val' and metric == 'loss'")
    assert rows.index.tolist() == list(range(1, steps + 1))  # every optimizer step, not every microbatch
    assert rows["samples"].tolist() == [accumulate * batch * s for s in range(1, steps + 1)]
    at = rows.loc[[r["step"] for r in logged]]
    assert at["loss"].tolist() == [r["loss"] for r in logged]
    assert at["tokens"].tolist() == [r["num_input_tokens_seen"] for r in logged]
    assert at["grad_norm"].tolist() == [r["grad_norm"] for r in logged]
    assert at["lr"].tolist() == [r["learning_rate"] for r in logged]
    # The Trainer reports no loss between its logging steps; neither does the ledger.
    assert rows.drop(at.index)["loss"].isna().all() and rows["lr"].notna().all()
    # Padding was left out: fewer tokens than sequences x context, and still the Trainer's own count.
    assert rows["tokens"].iloc[-1] < steps * accumulate * batch * CONTEXT
    assert val["step"].tolist() == [r["step"] for r in evals]
    assert val["value"].tolist() == [r["eval_loss"] for r in evals]
    assert val["tokens"].tolist() == rows.loc[val["step"], "tokens"].tolist()
    assert evals[-1]["eval_loss"] < math.log(256) - 1.0  # it learned: real training, not a stand-in


# -- Lightning ----------------------------------------------------------------------------------------------


def _lightning_module(cfg, record: list | None = None, fail_at: int | None = None):
    import lightning.pytorch as L

    from yieldgate.probe.model import GPT

    class Module(L.LightningModule):
        flops_per_batch = None  # ThroughputMonitor asks; FLOPs are not what it is used for here

        def __init__(self) -> None:
            super().__init__()
            self.model = GPT(cfg)

        def training_step(self, batch, batch_idx):
            if batch_idx == fail_at:
                raise RuntimeError("a failure inside training")
            x, y = batch
            loss = self.model(x, y)[1]
            self.log("train/loss", loss, on_step=True, on_epoch=False)
            if record is not None:
                record.append(loss.detach().clone())
            return loss

        def validation_step(self, batch, batch_idx):
            self.log("val/loss", self.model(*batch)[1])

        def configure_optimizers(self):
            opt = torch.optim.AdamW(self.parameters(), lr=3e-3)
            decay = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / 100)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": decay, "interval": "step"}}

    return Module()


def _loaders(corpus, n_train: int, batch: int):
    from torch.utils.data import DataLoader, TensorDataset

    train, held = corpus
    w, v = windows(train, n_train, seed=0), windows(held, 32, seed=1)
    return (
        DataLoader(TensorDataset(w[:, :-1], w[:, 1:]), batch_size=batch),
        DataLoader(TensorDataset(v[:, :-1], v[:, 1:]), batch_size=32),
    )


def _lightning_trainer(tmp_path, callback, **kwargs):
    import lightning.pytorch as L
    from lightning.pytorch.callbacks import LearningRateMonitor, ThroughputMonitor
    from lightning.pytorch.loggers import CSVLogger

    # The framework's own records: loss and val/loss from self.log, lr from LearningRateMonitor, cumulative tokens
    # and samples from ThroughputMonitor (Lightning's own counters), all written by the CSVLogger.
    monitor = ThroughputMonitor(batch_size_fn=lambda b: b[0].shape[0], length_fn=lambda b: b[0].numel())
    return L.Trainer(
        accelerator="cpu",
        devices=1,
        log_every_n_steps=1,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        logger=CSVLogger(tmp_path, name="csv", version=0),
        callbacks=[callback, monitor, LearningRateMonitor(logging_interval="step")],
        **kwargs,
    )


@pytest.fixture
def gpt_cfg():
    from yieldgate.probe.model import GPTConfig

    return GPTConfig(vocab_size=256, context=CONTEXT, layers=2, width=32, heads=2)


def test_lightning_rows_equal_its_csv_log(corpus, gpt_cfg, tmp_path, ledger_location):
    pytest.importorskip("lightning")
    from yieldgate.track.integrations.lightning import YieldgateCallback

    torch.manual_seed(0)
    steps, batch = 40, 8
    path = ledger_location  # a SQLite file, and a PostgreSQL schema (the team ledger)
    callback = YieldgateCallback("lightning-gpt", ledger=path, signals="full")
    trainer = _lightning_trainer(tmp_path, callback, max_steps=steps, val_check_interval=10, gradient_clip_val=0.5)
    trainer.fit(_lightning_module(gpt_cfg), *_loaders(corpus, steps * batch, batch))
    assert callback.tracker.stats["faults"] == 0

    # Lightning logs optimizer step k (k = 1, 2, ...) under step k - 1 (`_batches_that_stepped` before it advances).
    logged = read_csv_log(Path(trainer.logger.log_dir) / "metrics.csv")
    train_rows = {s + 1: r for s, r in logged.items() if "train/loss" in r}
    val_rows = {s + 1: r for s, r in logged.items() if "val/loss" in r}
    assert sorted(train_rows) == list(range(1, steps + 1)) and sorted(val_rows) == [10, 20, 30, 40]
    with Ledger(path, readonly=True) as led:
        assert led.run_info("lightning-gpt")["status"] == "finished"
        rows = led.steps("lightning-gpt").set_index("step")
        val = led.evals("lightning-gpt").query("task == 'val' and metric == 'loss'")
    assert rows.index.tolist() == sorted(train_rows)
    assert rows["loss"].tolist() == [train_rows[s]["train/loss"] for s in rows.index]
    assert rows["tokens"].tolist() == [train_rows[s]["train/lengths"] for s in rows.index]
    assert rows["samples"].tolist() == [train_rows[s]["train/samples"] for s in rows.index]
    assert rows["lr"].tolist() == [train_rows[s]["lr-AdamW"] for s in rows.index]
    # Pre-clipping: Lightning clips to 0.5 after the callback reads the norm, and the Tracker's per-layer norms
    # (taken from the clipped gradients the optimizer sees, then unclipped with this norm) add up to it.
    assert (rows["grad_norm"] > 0.5).any()
    with Ledger(path, readonly=True) as led:
        layers = led.extras("lightning-gpt").query("key.str.startswith('signals/grad_norm/')")
    total = np.sqrt(layers.assign(sq=layers["value"] ** 2).groupby("step")["sq"].sum())
    assert total.index.tolist() == [10, 20, 30, 40]
    np.testing.assert_allclose(total.to_numpy(), rows.loc[total.index, "grad_norm"].to_numpy(), rtol=1e-5)
    assert val["step"].tolist() == sorted(val_rows)
    assert val["value"].tolist() == [val_rows[s]["val/loss"] for s in sorted(val_rows)]
    assert val["value"].iloc[-1] < math.log(256) - 1.0  # it learned


@pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no `val_dataloader`")
def test_lightning_accumulation_records_optimizer_steps(corpus, gpt_cfg, tmp_path):
    pytest.importorskip("lightning")
    from yieldgate.track.integrations.lightning import YieldgateCallback

    torch.manual_seed(0)
    steps, accumulate, batch = 6, 2, 8
    path = tmp_path / "acc.db"
    losses: list[torch.Tensor] = []
    trainer = _lightning_trainer(
        tmp_path,
        YieldgateCallback("acc", ledger=path),
        max_steps=steps,
        accumulate_grad_batches=accumulate,
        limit_val_batches=0,
    )
    trainer.fit(_lightning_module(gpt_cfg, record=losses), _loaders(corpus, steps * accumulate * batch, batch)[0])

    assert trainer.global_step == steps and len(losses) == steps * accumulate
    logged = {
        s + 1: r for s, r in read_csv_log(Path(trainer.logger.log_dir) / "metrics.csv").items() if "train/lengths" in r
    }
    with Ledger(path, readonly=True) as led:
        rows = led.steps("acc").set_index("step")
    assert rows.index.tolist() == list(range(1, steps + 1))
    assert rows["tokens"].tolist() == [logged[s]["train/lengths"] for s in rows.index]
    assert rows["tokens"].tolist() == [accumulate * batch * CONTEXT * s for s in rows.index]
    # A step's loss is the mean of its batches' losses (Lightning's own on_step log keeps only the last one).
    means = [float(torch.stack(losses[i : i + accumulate]).mean()) for i in range(0, len(losses), accumulate)]
    assert rows["loss"].tolist() == means


@pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no `val_dataloader`")
def test_lightning_failure_marks_the_run_failed(corpus, gpt_cfg, tmp_path):
    pytest.importorskip("lightning")
    from yieldgate.track.integrations.lightning import YieldgateCallback

    path = tmp_path / "f.db"
    trainer = _lightning_trainer(tmp_path, YieldgateCallback("fails", ledger=path), max_steps=20, limit_val_batches=0)
    with pytest.raises(RuntimeError, match="a failure inside training"):
        trainer.fit(_lightning_module(gpt_cfg, fail_at=5), _loaders(corpus, 160, 8)[0])
    with Ledger(path, readonly=True) as led:
        assert led.run_info("fails")["status"] == "failed"
        assert led.steps("fails")["step"].tolist() == [1, 2, 3, 4, 5]  # the steps before the failure are kept


def test_one_callback_serves_pytorch_lightning_too(corpus, gpt_cfg, tmp_path):
    pl = pytest.importorskip("pytorch_lightning")
    from yieldgate.track.integrations.lightning import YieldgateCallback

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            from yieldgate.probe.model import GPT

            self.model = GPT(gpt_cfg)

        def training_step(self, batch, batch_idx):
            return self.model(*batch)[1]

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e-2)

    path = tmp_path / "pl.db"
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=3,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        callbacks=[YieldgateCallback("pl", ledger=path)],
    )
    trainer.fit(Module(), _loaders(corpus, 24, 8)[0])
    with Ledger(path, readonly=True) as led:
        assert led.run_info("pl")["status"] == "finished"
        assert led.steps("pl")["tokens"].tolist() == [256.0, 512.0, 768.0]
