"""The discriminating experiment of a plateau, runnable: continue a probe from its last state with the learning rate
cooled down linearly to 0, as a new run linked to the original.

A loss that plateaus at a constant learning rate has stalled either at the noise floor that LR sets (a lower LR would
go lower: the schedule is the limit) or because the data has no more to teach the model. Cooling the LR down from
the plateau tells them apart: a drop beyond noise means the schedule, no drop the data (`diagnose` reads the
cooldown run's result when it judges the original's plateau, `learning_detectors._plateau`).

**Cooldown run.** `cooldown_probe` loads the checkpoint, checks that the data resolves to the same tokenizer,
and trains `cooldown_tokens` more tokens from the same stream, the LR falling linearly from the original's last
LR to 0. The new run continues the original's step and token counts (its first step is the original's last + 1),
evaluates at its start and a few times on the way, and carries meta `cooldown_of` (the original's name) and
`cooldown` (from which step and LR, over how many tokens).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from yieldgate.errors import InputError
from yieldgate.ledger import Ledger
from yieldgate.probe.checkpoint import data_fingerprint
from yieldgate.probe.config import Faults, ProbeConfig
from yieldgate.probe.model import GPT, GPTConfig
from yieldgate.probe.parts import Parts, Portfolio, Sampler
from yieldgate.probe.trainer import probe_manifest, run_steps
from yieldgate.track import Tracker, TrackerConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from yieldgate.data.recipe import ResolvedRecipe

__all__ = ["cooldown_probe", "cooldown_lr"]


def cooldown_lr(step: int, first: int, steps: int, start_lr: float) -> float:
    """Linear cooldown: `start_lr` falling to 0 over `steps` steps, the `first` of them at `start_lr`·(1 - 1/steps)."""
    return start_lr * max(0.0, 1.0 - (step - first + 1) / steps)


def _config(saved: dict[str, Any]) -> ProbeConfig:
    faults = dict(saved["faults"])
    for key in ("inf_at_steps", "repeat_source"):  # JSON-like round trip: tuples come back as lists
        if isinstance(faults.get(key), list):
            faults[key] = tuple(faults[key])
    fields: dict[str, Any] = {k: tuple(v) if k == "eval_sources" else v for k, v in saved.items() if k != "faults"}
    return ProbeConfig(**fields, faults=Faults(**faults))


def cooldown_probe(
    data: ResolvedRecipe,
    *,
    source_run: str,
    cooldown_tokens: int,
    run: str,
    ledger: str,
    evals: int = 4,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Continue probe `source_run` from its checkpoint for `cooldown_tokens` tokens, the LR cooled down linearly from
    its last value to 0, into the ledger as `run` (meta `cooldown_of`), with `evals` evaluations after the one at
    its start; return the final evaluation. `data` must resolve to the original's tokenizer."""
    if cooldown_tokens < 1:
        raise InputError(f"cooldown_tokens must be >= 1, got {cooldown_tokens}")
    state = _checkpoint(ledger, source_run, data)
    cfg = replace(_config(state["config"]), evals=evals)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed + 1)
    steps = max(1, math.ceil(cooldown_tokens / (cfg.batch_size * cfg.context)))
    parts = _restored(state, cfg, data)
    manifest = probe_manifest(data, cfg, parts.model, parts.portfolio, schedule="linear-cooldown", lr=state["lr"])
    first = state["step"] + 1
    numbers = range(first, first + steps)
    eval_at = set((state["step"] + np.linspace(0, steps, evals + 1).round()).astype(int).tolist()[1:])
    with Tracker(
        run,
        ledger=ledger,
        manifest=manifest,
        model=parts.model,
        optimizer=parts.opt,
        scaler=parts.scaler,
        signals="full",
        config=TrackerConfig(log_every_s=5.0),
        step=state["step"],
        tokens=state["tokens"],
        samples=state["samples"],
    ) as tr:
        tr.note("cooldown_of", source_run)
        tr.note(
            "cooldown",
            {
                "from_step": state["step"],
                "from_tokens": state["tokens"],
                "start_lr": state["lr"],
                "tokens": steps * cfg.batch_size * cfg.context,
                "steps": steps,
                "to_lr": 0.0,
            },
        )
        tr.eval(parts.portfolio.evaluate(parts.model), step=state["step"])
        return run_steps(
            tr, parts, cfg, numbers, lambda step: cooldown_lr(step, first, steps, state["lr"]), eval_at, progress
        )


def _checkpoint(ledger: str, source_run: str, data: ResolvedRecipe) -> dict[str, Any]:
    """The state `source_run` saved at its end, refused where there is none or `data` does not resolve as the run's
    did (another tokenizer, other training or held-out sizes)."""
    with Ledger(ledger, readonly=True) as led:
        meta = led.meta(source_run)
    saved_at = (meta.get("checkpoint") or {}).get("path")
    if not saved_at or not Path(saved_at).exists():
        why = (meta.get("checkpoint") or {}).get("reason") or (
            f"no checkpoint file at {saved_at}"
            if saved_at
            else "the run saved no checkpoint (not a probe, or a "
            "probe trained with checkpoint=False or before probes saved one)"
        )
        raise InputError(f"run {source_run!r} cannot be continued: {why}")
    state: dict[str, Any] = torch.load(saved_at, weights_only=True)  # tensors and plain values only: no pickled code
    if state["tokenizer_hash"] != data.tokenizer_hash:
        raise InputError(
            f"the data given resolves to tokenizer {data.tokenizer_hash[:12]}, but run "
            f"{source_run!r} was trained with {state['tokenizer_hash'][:12]}: give the same recipe"
        )
    if state["data"] != data_fingerprint(data):
        raise InputError(
            f"the data given does not resolve as run {source_run!r}'s did (training and held-out sizes "
            f"per source {data_fingerprint(data)} against {state['data']}): give the same recipe and seed"
        )
    return state


def _restored(state: dict[str, Any], cfg: ProbeConfig, data: ResolvedRecipe) -> Parts:
    """The model, optimizer, loss scaler and sampler as the checkpoint left them, and the eval portfolio."""
    model = GPT(
        GPTConfig(
            vocab_size=data.tokenizer.get_vocab_size(),
            context=cfg.context,
            layers=cfg.layers,
            width=cfg.width,
            heads=cfg.heads,
        )
    )
    model.load_state_dict(state["model"])
    opt = torch.optim.AdamW(model.parameters(), lr=state["lr"], weight_decay=0.0)
    opt.load_state_dict(state["optimizer"])
    scaler = torch.amp.GradScaler("cpu") if cfg.loss_scaler else None
    if scaler is not None and state["scaler"]:
        scaler.load_state_dict(state["scaler"])
    sampler = Sampler(data, cfg, math.ceil(cfg.tokens / (cfg.batch_size * cfg.context)))
    sampler.load_state(state["sampler"])
    return Parts(model=model, opt=opt, scaler=scaler, sampler=sampler, portfolio=Portfolio(data, cfg))
