"""A probe's saved state, for its cooldown (`probe.cooldown`).

**Checkpoint.** A probe saves its state when it ends (`ProbeConfig.checkpoint`, on by default): one
`torch.save` file in a folder beside the ledger file, `<ledger>.checkpoints/<run>.pt`, holding the model's and
AdamW's state (fp32: the weights and two moments, about 12 bytes per parameter: ~1.5 MB for the default
2-layer, 64-wide probe), the loss scaler's and the sampler's state (generator, cursors), the probe's config and
its last step, tokens and LR. The run's meta `checkpoint` names the file, its size and the step it holds. A
ledger given by URL has no folder to put it beside: no checkpoint is saved, and the meta says so.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from yieldgate.ledger.location import Location

if TYPE_CHECKING:
    from yieldgate.data.recipe import ResolvedRecipe
    from yieldgate.probe.config import ProbeConfig
    from yieldgate.probe.parts import Parts

__all__ = ["checkpoint_path", "save_checkpoint", "data_fingerprint"]

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def checkpoint_path(ledger: str, run: str) -> Path | None:
    """Where a probe's checkpoint lives: `<ledger>.checkpoints/<run>.pt` (None for a ledger given by URL)."""
    if Location.parse(ledger).is_url:
        return None
    return Path(f"{ledger}.checkpoints") / f"{_SAFE.sub('_', run)}.pt"


def save_checkpoint(
    parts: Parts, cfg: ProbeConfig, data: ResolvedRecipe, *, ledger: str, run: str, step: int, lr: float
) -> dict[str, Any]:
    """Write the probe's state beside the ledger (see the module docstring); return the run meta that names it."""
    path = checkpoint_path(ledger, run)
    if path is None:
        return {"path": None, "reason": "the ledger is a URL: no folder beside it to keep a checkpoint in"}
    path.parent.mkdir(parents=True, exist_ok=True)
    config = asdict(cfg)
    config["faults"] = asdict(cfg.faults)
    torch.save(
        {
            "model": parts.model.state_dict(),
            "optimizer": parts.opt.state_dict(),
            "scaler": parts.scaler.state_dict() if parts.scaler else None,
            "sampler": parts.sampler.state(),
            "config": config,
            "step": step,
            "tokens": step * cfg.batch_size * cfg.context,
            "samples": step * cfg.batch_size,
            "lr": lr,
            "tokenizer_hash": data.tokenizer_hash,
            "data": data_fingerprint(data),
        },
        path,
    )
    return {"path": str(path), "bytes": path.stat().st_size, "step": step, "lr": lr}


def data_fingerprint(data: ResolvedRecipe) -> dict[str, list[int]]:
    """Training and held-out sizes per source: a recipe resolved with another seed or prefix differs here."""
    return {name: [len(s.train), len(s.held_out)] for name, s in sorted(data.sources.items())}
