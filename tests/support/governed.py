"""Real tiny trainings under the gate inside the run (issue #48), shared by tests/integration/test_governor.py and
benchmarks/bench_governor.py: the reference GPT on the built-in corpus (Shakespeare and Milton, byte-pair tokens),
trained by a plain loop that reads `tr.should_stop`, as a user's loop would.

The cases: a corpus small enough to repeat many times (Milton cut to a few thousand tokens: the held-out loss stops
falling, then turns up), a healthy run on the whole two-source recipe, a constant-LR run of a model too high an LR
keeps at its noise floor and its decaying-LR twin, and a run whose update goes NaN (an unguarded trainer applies it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from tests.support import gate_cases
from yieldgate.data.recipe import ResolvedRecipe
from yieldgate.probe.config import Faults, ProbeConfig
from yieldgate.probe.model import GPT, GPTConfig
from yieldgate.probe.parts import Portfolio, Sampler
from yieldgate.probe.trainer import probe_manifest
from yieldgate.track import Tracker, TrackerConfig

CONTEXT = 64
"""Tokens per sequence."""


def policy(tmp: Path, *, bar: float, stages: tuple[int, ...], on_hold: str | None = None, **more: Any) -> Path:
    """A policy file of `stages` (tokens) with the forecast yield bar `bar` per billion tokens; the shares are even.
    `more`: requirements over the defaults."""
    spec: dict[str, Any] = {
        "name": "governed",
        "version": 1,
        "stages": [
            {"name": f"s{i}", "tokens": t, "compute_share": round(1 / len(stages), 6)} for i, t in enumerate(stages)
        ],
        "requirements": {"min_yield_per_btok": bar, "min_seeds": 3, "level": 0.8, **more},
        "prices": {"per_device_hour": 2.0, "per_kwh": 0.2},
    }
    if on_hold is not None:
        spec["on_hold"] = on_hold
    path = tmp / f"policy-{len(list(tmp.glob('policy-*')))}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@dataclass(kw_only=True)
class Case:
    """One governed training: the recipe, its budget, the LR schedule and the faults."""

    recipe: dict[str, Any] = field(default_factory=lambda: gate_cases.TWO)
    tokens: int = 450_000
    seed: int = 0
    evals: int = 30
    lr: float = 3e-3
    schedule: str = "wsd"
    """`wsd` (warm-up, stable, 20% cooldown), `constant` (warm-up, then the peak to the end), or `cosine` (warm-up,
    then a cosine decay to 10% of the peak)."""
    width: int = 32
    layers: int = 1
    batch: int = 16
    """Sequences a step."""
    faults: Faults = field(default_factory=Faults)

    def config(self) -> ProbeConfig:
        base = gate_cases.probe_config(self.seed, self.tokens, **dataclasses.asdict(self.faults))
        return dataclasses.replace(
            base, evals=self.evals, lr=self.lr, width=self.width, layers=self.layers, batch_size=self.batch
        )


_resolved: dict[str, ResolvedRecipe] = {}


def resolved(recipe: dict[str, Any]) -> ResolvedRecipe:
    key = repr(recipe)
    if key not in _resolved:
        _resolved[key] = gate_cases.resolve_recipe(recipe)
    return _resolved[key]


def lr_at(case: Case, step: int, steps: int) -> float:
    warm = max(1, round(0.05 * steps))
    if step <= warm:
        return case.lr * step / warm
    if case.schedule == "constant":
        return case.lr
    frac = (step - warm) / max(steps - warm, 1)
    if case.schedule == "cosine":
        return case.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * frac)))
    if case.schedule == "linear":
        return case.lr * (1.0 - 0.99 * frac)
    if case.schedule == "halving":  # halves every 15 steps down to 3e-3, the healthy runs' LR
        return max(min(case.lr, 3e-3), case.lr * 0.5 ** ((step - warm) / 15))
    decay = round(0.2 * steps)
    if step > steps - decay:
        return case.lr * (1.0 - 0.9 * (step - (steps - decay)) / max(decay, 1))
    return case.lr


@dataclass
class Trained:
    """What a governed loop did: the steps it ran of those planned, and the Tracker's last decision."""

    run: str
    steps: int
    planned: int
    stopped: bool
    decision: Any
    faults: int


def train(
    case: Case,
    *,
    run: str,
    ledger: str | Path,
    policy: Any = None,
    config: TrackerConfig | None = None,
    before_eval: Callable[[int], None] | None = None,
) -> Trained:
    """Train `case` under `policy` with a plain loop (one thread) that stops when the Tracker says so."""
    torch.set_num_threads(1)
    torch.manual_seed(case.seed)
    cfg, data = case.config(), resolved(case.recipe)
    per_step = cfg.batch_size * CONTEXT
    steps = math.ceil(cfg.tokens / per_step)
    model = GPT(
        GPTConfig(
            vocab_size=data.tokenizer.get_vocab_size(), context=CONTEXT, layers=cfg.layers, width=cfg.width, heads=2
        )
    )
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    sampler, portfolio = Sampler(data, cfg, steps), Portfolio(data, cfg)
    repeated = cfg.faults.repeat_source
    manifest = probe_manifest(
        data,
        cfg,
        model,
        portfolio,
        schedule=case.schedule,
        unique_tokens=None if repeated is None else {repeated[0]: len(sampler.windows[repeated[0]]) * CONTEXT},
    )
    eval_at = set(np.linspace(0, steps, cfg.evals + 1).round().astype(int).tolist())
    done, stopped = 0, False
    with Tracker(
        run,
        ledger=str(ledger),
        manifest=manifest,
        model=model,
        optimizer=opt,
        config=config or TrackerConfig(flush_every_s=0.2),
        policy=policy,
    ) as tr:
        tr.eval({"val/loss": portfolio.evaluate(model)["val/loss"]}, step=0)
        for step in range(1, steps + 1):
            x, y, counts, _ = sampler.batch()
            for group in opt.param_groups:
                group["lr"] = lr_at(case, step, steps)
            opt.zero_grad(set_to_none=True)
            _, loss = model(x, y)
            loss.backward()
            if cfg.faults.diverge_at_step == step:  # an unguarded trainer applies a NaN update
                for p in model.parameters():
                    p.grad.fill_(float("nan"))  # type: ignore[union-attr]
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            tr.step(tokens=per_step, samples=cfg.batch_size, loss=loss.detach(), grad_norm=norm, sources=counts)
            done = step
            if step in eval_at:
                if before_eval is not None:
                    before_eval(step)
                tr.eval({"val/loss": portfolio.evaluate(model)["val/loss"]})
            if tr.should_stop:  # the one line a loop adds: the gate inside the run held it
                stopped = True
                break
        decision, faults = tr.decision, tr.stats["faults"]
    return Trained(run=run, steps=done, planned=steps, stopped=stopped, decision=decision, faults=faults)


def corpus(case: Case) -> tuple[ProbeConfig, int, int, list[torch.Tensor], list[torch.Tensor], int]:
    """The training windows of a whole run in the order the plain loop draws them, as (context + 1)-token rows, and
    the held-out ones; with the config, the steps planned, the tokens a step and the vocabulary."""
    cfg, data = case.config(), resolved(case.recipe)
    per_step = cfg.batch_size * CONTEXT
    steps = math.ceil(cfg.tokens / per_step)
    sampler, portfolio = Sampler(data, cfg, steps), Portfolio(data, cfg)
    rows = []
    for _ in range(steps):
        x, y, _, _ = sampler.batch()
        rows += list(torch.cat([x, y[:, -1:]], dim=1))
    held = [torch.from_numpy(s.ids.astype(np.int64)) for n in portfolio.common for s in portfolio.sets[n]]
    return cfg, steps, per_step, rows, held, data.tokenizer.get_vocab_size()


def train_hf(case: Case, *, run: str, ledger: str | Path, policy: Any, out: Path) -> Trained:
    """`case` through the Hugging Face `Trainer`: a GPT-2 of the probe's size built from a `GPT2Config` in code, the
    same windows and LR schedule, an evaluation every 1/`evals` of the run; the callback stops the Trainer when the
    gate holds."""
    import transformers

    from yieldgate.track.integrations.hf import YieldgateCallback

    torch.set_num_threads(1)
    transformers.set_seed(case.seed)
    cfg, steps, _, rows, held, vocab = corpus(case)
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(
            n_layer=cfg.layers,
            n_head=2,
            n_embd=cfg.width,
            vocab_size=vocab,
            n_positions=CONTEXT,
            resid_pdrop=0.0,  # no dropout, as the probe's GPT
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
    )
    args = transformers.TrainingArguments(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=64,
        learning_rate=cfg.lr,
        max_grad_norm=1.0,
        logging_steps=5,
        eval_strategy="steps",
        eval_steps=max(1, steps // case.evals),
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        dataloader_num_workers=0,
        seed=case.seed,
    )
    diverge = cfg.faults.diverge_at_step

    class Diverge(transformers.TrainerCallback):
        """Turns the weights NaN after step `diverge`, as an unguarded update of NaN gradients does (the Trainer goes
        on, every loss and evaluation NaN)."""

        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            if state.global_step == diverge and model is not None:
                with torch.no_grad():
                    for p in model.parameters():
                        p.fill_(float("nan"))

    callback = YieldgateCallback(run, ledger=str(ledger), policy=policy, config=TrackerConfig(flush_every_s=0.2))
    extra = [Diverge()] if diverge else []
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    scale = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(case, s + 1, steps) / cfg.lr)  # the loop's LR
    trainer = transformers.Trainer(
        model=model,
        args=args,
        optimizers=(opt, scale),
        callbacks=[callback, *extra],
        train_dataset=[{"input_ids": r[:-1], "labels": r[:-1]} for r in rows],
        eval_dataset=[{"input_ids": r[:-1], "labels": r[:-1]} for r in held],
    )
    trainer.train()
    assert callback.tracker is not None
    done = trainer.state.global_step
    tr = callback.tracker
    return Trained(run=tr.run, steps=done, planned=steps, stopped=done < steps, decision=tr.decision, faults=tr.faults)


def train_lightning(case: Case, *, run: str, ledger: str | Path, policy: Any) -> Trained:
    """`case` through Lightning: the probe's GPT in a LightningModule, the same windows and LR schedule, an
    evaluation every 1/`evals` of the run; the callback stops the Trainer when the gate holds."""
    import lightning.pytorch as L
    from torch.utils.data import DataLoader, TensorDataset

    from yieldgate.track.integrations.lightning import YieldgateCallback

    torch.set_num_threads(1)
    torch.manual_seed(case.seed)
    cfg, steps, _, rows, held, vocab = corpus(case)
    diverge = cfg.faults.diverge_at_step

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = GPT(GPTConfig(vocab_size=vocab, context=CONTEXT, layers=cfg.layers, width=cfg.width, heads=2))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self.model(*batch)[1]

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val/loss", self.model(*batch)[1])

        def on_before_optimizer_step(self, optimizer: Any) -> None:
            if diverge is not None and self.trainer.global_step + 1 == diverge:  # an unguarded NaN update
                for p in self.parameters():
                    if p.grad is not None:
                        p.grad.fill_(float("nan"))

        def configure_optimizers(self) -> Any:
            opt = torch.optim.AdamW(self.parameters(), lr=cfg.lr, weight_decay=0.0)
            scale = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(case, s + 1, steps) / cfg.lr)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": scale, "interval": "step"}}

    train, val = torch.stack(rows), torch.stack(held)
    callback = YieldgateCallback(run, ledger=str(ledger), policy=policy, config=TrackerConfig(flush_every_s=0.2))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=steps,
        val_check_interval=max(1, steps // case.evals),
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        gradient_clip_val=1.0,
        callbacks=[callback],
    )
    trainer.fit(
        Module(),
        DataLoader(TensorDataset(train[:, :-1], train[:, 1:]), batch_size=cfg.batch_size),
        DataLoader(TensorDataset(val[:, :-1], val[:, 1:]), batch_size=64),
    )
    assert callback.tracker is not None
    done, tr = trainer.global_step, callback.tracker
    return Trained(run=tr.run, steps=done, planned=steps, stopped=done < steps, decision=tr.decision, faults=tr.faults)
