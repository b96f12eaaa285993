"""The probe trainer: a small real training of the reference GPT on a resolved recipe, into the ledger.

Warmup-stable-decay schedule (constant learning rate, then a short cooldown: within-run yields stay
readable), the Tracker with full learning signals, fixed seeds (deterministic for a seed and thread count),
and a versioned eval portfolio: per source held-out loss, bits per byte and next-token accuracy, and two
hard slices, the held-out sequences of rarest tokens (top decile by mean token rarity) and the Folio-spelling
passages, because the first thing a faster pipeline breaks is the tail.

Fault hooks for the diagnosis work (all off by default) live in `Faults`.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from yieldgate.data.recipe import ResolvedRecipe
from yieldgate.manifest import EvalPortfolio, Hardware, Manifest, ModelConfig, Optimisation
from yieldgate.probe.checkpoint import save_checkpoint
from yieldgate.probe.config import PORTFOLIO, Faults, ProbeConfig, wsd
from yieldgate.probe.model import GPT, GPTConfig
from yieldgate.probe.parts import Parts, Portfolio, Sampler
from yieldgate.track import Tracker, TrackerConfig

__all__ = ["Faults", "ProbeConfig", "ProbeTraining", "train_probe", "run_steps", "probe_manifest", "PORTFOLIO"]


def probe_manifest(
    data: ResolvedRecipe,
    cfg: ProbeConfig,
    model: GPT,
    portfolio: Portfolio,
    *,
    schedule: str = "wsd",
    lr: float | None = None,
    unique_tokens: dict[str, int] | None = None,
) -> Manifest:
    """The probe's manifest; `schedule` and `lr` (default `cfg.lr`) name a cooldown's own; `unique_tokens`
    replaces the recipe's count of the sources named (a repeat fault's window)."""
    recipe = data.recipe.model_copy(deep=True)
    recipe.sequence_length = cfg.context
    for s in recipe.sources:
        if unique_tokens and s.name in unique_tokens:
            s.unique_tokens = unique_tokens[s.name]
    return Manifest(
        data=recipe,
        model=ModelConfig(
            name="probe-gpt",
            params=sum(p.numel() for p in model.parameters()),
            non_embedding_params=model.non_embedding_params(),
            layers=cfg.layers,
            width=cfg.width,
            heads=cfg.heads,
            head_dim=cfg.width // cfg.heads,
            context=cfg.context,
            vocab_size=model.cfg.vocab_size,
        ),
        optimisation=Optimisation(
            optimizer="adamw",
            lr=cfg.lr if lr is None else lr,
            schedule=schedule,
            batch_size=cfg.batch_size,
            microbatch_size=cfg.batch_size // cfg.microbatches,
            grad_accumulation=cfg.microbatches,
            grad_clip=1.0,
            precision="fp32",
        ),
        hardware=Hardware(device_kind="cpu", device_count=1),
        evals=EvalPortfolio(
            name=PORTFOLIO[0] if cfg.eval_documents is None else f"{PORTFOLIO[0]}-documents",
            version=PORTFOLIO[1],
            tasks=portfolio.tasks(),
        ),
        library_versions={"torch": torch.__version__, "python": sys.version.split()[0]},
        seed=cfg.seed,
    )


@dataclass(frozen=True)
class ProbeTraining:
    """A probe trained into the ledger (`yieldgate train`, a cooldown too): its run and its final evaluation."""

    run: str
    final: dict[str, Any]
    """Eval key (`val/loss`, `val/milton/bpb`, ...) -> its value at the last step."""

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "final": self.final}


def train_probe(
    data: ResolvedRecipe,
    cfg: ProbeConfig,
    *,
    run: str,
    ledger: str,
    progress: Callable[[int, int], None] | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Train one probe into the ledger as `run`; return its final evaluation. `resume`: the run may exist
    already (empty, made by the caller with its meta)."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    steps = math.ceil(cfg.tokens / (cfg.batch_size * cfg.context))
    model = GPT(
        GPTConfig(
            vocab_size=data.tokenizer.get_vocab_size(),
            context=cfg.context,
            layers=cfg.layers,
            width=cfg.width,
            heads=cfg.heads,
        )
    )
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    sampler = Sampler(data, cfg, steps)
    portfolio = Portfolio(data, cfg)
    repeated = cfg.faults.repeat_source[0] if cfg.faults.repeat_source is not None else None
    manifest = probe_manifest(
        data,
        cfg,
        model,
        portfolio,
        unique_tokens=None if repeated is None else {repeated: len(sampler.windows[repeated]) * cfg.context},
    )
    scaler = torch.amp.GradScaler("cpu") if cfg.loss_scaler else None
    eval_at = set(np.linspace(0, steps, cfg.evals + 1).round().astype(int).tolist())
    eval_at |= {max(1, round(share * steps)) for share in cfg.eval_at}  # an evaluation draws on no training state
    parts = Parts(model=model, opt=opt, scaler=scaler, sampler=sampler, portfolio=portfolio)
    with Tracker(
        run,
        ledger=ledger,
        manifest=manifest,
        model=model,
        optimizer=opt,
        scaler=scaler,
        signals="full",
        config=TrackerConfig(log_every_s=5.0),
        resume=resume,
    ) as tr:
        tr.note("recipe", data.stats)  # what filters and dedup removed, per source
        tr.eval(portfolio.evaluate(model), step=0)
        final = run_steps(tr, parts, cfg, range(1, steps + 1), lambda step: wsd(step, steps, cfg), eval_at, progress)
        if cfg.checkpoint:
            tr.note(
                "checkpoint",
                save_checkpoint(parts, cfg, data, ledger=ledger, run=run, step=steps, lr=wsd(steps, steps, cfg)),
            )
    return final


def run_steps(
    tr: Tracker,
    parts: Parts,
    cfg: ProbeConfig,
    numbers: range,
    lr_of: Callable[[int], float],
    eval_at: set[int],
    progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    """Train the steps `numbers` (LR `lr_of(step)`), evaluating at the steps of `eval_at`; return the last
    evaluation. Shared by a probe and its cooldown (`probe.cooldown`)."""
    model, opt, scaler, sampler, portfolio = parts.model, parts.opt, parts.scaler, parts.sampler, parts.portfolio
    vocab = model.cfg.vocab_size
    final: dict[str, Any] = {}
    for done, step in enumerate(numbers, start=1):
        start = time.perf_counter()
        if cfg.faults.sleep_loader_s and step >= cfg.faults.sleep_from_step:
            time.sleep(cfg.faults.sleep_loader_s)
        x, y, counts, ids = sampler.batch()
        wait = time.perf_counter() - start
        if cfg.faults.corrupt_at_step == step:
            noise = torch.randint(0, vocab, (x.shape[0], x.shape[1] + 1), generator=torch.Generator().manual_seed(step))
            x, y = noise[:, :-1], noise[:, 1:]
        for group in opt.param_groups:
            group["lr"] = lr_of(step)
        opt.zero_grad(set_to_none=True)
        loss = torch.zeros(())
        for xm, ym in zip(x.chunk(cfg.microbatches), y.chunk(cfg.microbatches), strict=True):
            _, part = model(xm, ym)
            part_loss = part / cfg.microbatches
            (scaler.scale(part_loss) if scaler else part_loss).backward()
            loss += part.detach() / cfg.microbatches
        diverge = cfg.faults.diverge_at_step == step
        bad = (
            float("nan")
            if cfg.faults.nan_at_step == step or diverge
            else float("inf")
            if step in cfg.faults.inf_at_steps
            else None
        )
        if bad is not None:
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.fill_(bad)
        if scaler:
            scaler.unscale_(opt)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if scaler:  # skips the step on inf/NaN gradients and backs the scale off
            scaler.step(opt)
            scaler.update()
        # A guarded trainer skips a non-finite update. This is a host sync on purpose: probes are small.
        elif torch.isfinite(grad_norm) or diverge:
            opt.step()
        tr.step(
            tokens=cfg.batch_size * cfg.context,
            samples=cfg.batch_size,
            loss=loss,
            grad_norm=grad_norm,
            sources=counts,
            sample_ids=ids,
            data_wait_s=wait,
        )
        if step in eval_at:
            final = portfolio.evaluate(model)
            tr.eval(final)
        if progress is not None:
            progress(done, len(numbers))
        if tr.should_stop:  # the gate inside the run held it (`YIELDGATE_POLICY`)
            break
    return final
