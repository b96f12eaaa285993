"""The held run behind docs/gate.md's "The gate inside the run": the reference GPT (~31k parameters) trained by a plain
loop on Milton alone, cut to what 450k tokens pass 40 times, under a policy of four stages (150k, 225k, 300k and 450k
tokens; a bar of 250 per billion tokens; $2 a device-hour). The gate inside the run holds it once its held-out loss
has turned up, and the loop stops. About 15 s on 2 cores.

    python docs/examples/governed_run.py governed.db
    yieldgate --ledger governed.db runs
    yieldgate --ledger governed.db decisions milton-40x
    yieldgate --ledger governed.db gate milton-40x --policy docs/examples/governed-policy.yaml
"""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path

import numpy as np
import torch

from yieldgate.data.recipe import resolve
from yieldgate.manifest import parse_manifest
from yieldgate.probe.config import Faults, ProbeConfig
from yieldgate.probe.model import GPT, GPTConfig
from yieldgate.probe.parts import Portfolio, Sampler
from yieldgate.probe.trainer import probe_manifest
from yieldgate.track import Tracker

POLICY = Path(__file__).with_name("governed-policy.yaml")
TOKENS, BATCH, CONTEXT, LR = 450_000, 16, 64, 3e-3


def lr_at(step: int, steps: int) -> float:
    """Warm-up over 5% of the steps, constant, then a cooldown over the last 20% (warmup-stable-decay)."""
    warm, decay = max(1, round(0.05 * steps)), round(0.2 * steps)
    if step <= warm:
        return LR * step / warm
    if step > steps - decay:
        return LR * (1.0 - 0.9 * (step - (steps - decay)) / decay)
    return LR


def main(ledger: str) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    recipe = parse_manifest(
        {"data": {"sources": [{"name": "milton"}], "tokenizer": {"name": "bpe-512", "vocab_size": 512}}}
    ).data
    assert recipe is not None
    data = resolve(recipe, seed=0, max_chars_per_source=600_000)
    cfg = ProbeConfig(
        tokens=TOKENS, layers=1, width=32, heads=2, evals=30, threads=1, faults=Faults(repeat_source=("milton", 40.0))
    )
    steps = math.ceil(TOKENS / (BATCH * CONTEXT))
    model = GPT(GPTConfig(vocab_size=data.tokenizer.get_vocab_size(), context=CONTEXT, layers=1, width=32, heads=2))
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    sampler, portfolio = Sampler(data, cfg, steps), Portfolio(data, cfg)
    unique = {"milton": len(sampler.windows["milton"]) * CONTEXT}
    manifest = probe_manifest(data, cfg, model, portfolio, unique_tokens=unique)
    eval_at = set(np.linspace(0, steps, cfg.evals + 1).round().astype(int).tolist())
    with Tracker("milton-40x", ledger=ledger, manifest=manifest, model=model, optimizer=opt, policy=POLICY) as tr:
        for step in range(1, steps + 1):
            x, y, counts, _ = sampler.batch()
            for group in opt.param_groups:
                group["lr"] = lr_at(step, steps)
            opt.zero_grad(set_to_none=True)
            _, loss = model(x, y)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            tr.step(tokens=BATCH * CONTEXT, samples=BATCH, loss=loss.detach(), grad_norm=norm, sources=counts)
            if step in eval_at:
                tr.eval({"val/loss": portfolio.evaluate(model)["val/loss"]})
            if tr.should_stop:  # the one line the loop adds
                break
    print(f"stopped at step {step} of {steps}: {tr.decision.rationale if tr.decision else 'not held'}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "governed.db")
