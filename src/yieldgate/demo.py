"""`yieldgate demo` (foundation version): two real trainings that differ only in batch size, into the ledger.

The probe GPT is trained on real text (Python's own standard-library source, split by file into training
and held-out sets) with batch 8 and with batch 32 for the same token budget. The bigger batch moves more
tokens per second; whether it learns as much per token is what the ledger then shows. Every number comes
from the runs just made. The campaign-and-gate demo of the probe issue replaces this one.
"""

from __future__ import annotations

import math
import sys
import sysconfig
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from yieldgate.data import corpus
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.manifest import (
    EvalPortfolio,
    Hardware,
    Manifest,
    ModelConfig,
    Optimisation,
    Recipe,
    Source,
    Tokenizer,
    diff,
)
from yieldgate.probe.model import GPT, GPTConfig

__all__ = ["run_demo", "stdlib_corpus"]

LOG_EVERY = 10  # steps per ledger write


def stdlib_corpus(max_bytes: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Bytes of the standard library's modules: (train, held-out, modules used), split by module."""
    works = corpus.stdlib_works(max_bytes)
    train, held = corpus.split_by_work(works, held_out=0.1, seed=0)
    as_bytes = lambda ws: np.frombuffer("\n".join(w.text for w in ws).encode(), dtype=np.uint8)  # noqa: E731
    return as_bytes(train), as_bytes(held), len(works)


@dataclass(frozen=True)
class _Plan:
    name: str
    batch: int
    tokens: int


def _train(ledger: Ledger, plan: _Plan, cfg: GPTConfig, train: np.ndarray, held: np.ndarray, manifest: Manifest,
           progress: Progress, evals: int, lr: float) -> None:
    torch.manual_seed(0)
    gen = np.random.default_rng(0)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    t = cfg.context
    # Fixed held-out batch: the same sequences for every evaluation of every run.
    starts = np.random.default_rng(1).integers(0, len(held) - t - 1, size=64)
    xv = torch.from_numpy(np.stack([held[s : s + t] for s in starts]).astype(np.int64))
    yv = torch.from_numpy(np.stack([held[s + 1 : s + t + 1] for s in starts]).astype(np.int64))
    ledger.create_run(plan.name, manifest=manifest, source="demo", if_exists="replace")
    steps_total = math.ceil(plan.tokens / (plan.batch * t))
    eval_every = max(1, steps_total // evals)
    task = progress.add_task(plan.name, total=steps_total)
    rows: list[dict[str, Any]] = []
    tokens = samples = 0
    t_start = time.perf_counter()

    def evaluate(step: int) -> None:
        model.eval()
        with torch.no_grad():
            _, loss = model(xv, yv)
        model.train()
        value = float(loss)
        wall = time.perf_counter() - t_start
        ledger.append_evals(plan.name, [
            EvalRecord(step=step, tokens=tokens, wall_s=wall, task="val", metric="loss", value=value,
                       portfolio="demo", portfolio_version="1"),
            # Byte-level tokens: bits per byte is the loss in bits.
            EvalRecord(step=step, tokens=tokens, wall_s=wall, task="val", metric="bpb", value=value / math.log(2),
                       portfolio="demo", portfolio_version="1"),
        ])

    evaluate(0)
    for step in range(1, steps_total + 1):
        t0 = time.perf_counter()
        idx = gen.integers(0, len(train) - t - 1, size=plan.batch)
        x = torch.from_numpy(np.stack([train[s : s + t] for s in idx]).astype(np.int64))
        y = torch.from_numpy(np.stack([train[s + 1 : s + t + 1] for s in idx]).astype(np.int64))
        t1 = time.perf_counter()
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += plan.batch * t
        samples += plan.batch
        t2 = time.perf_counter()
        rows.append({"step": step, "tokens": tokens, "samples": samples, "wall_s": t2 - t_start,
                     "step_s": t2 - t0, "data_wait_s": t1 - t0, "loss": float(loss.detach()), "lr": lr,
                     "grad_norm": float(grad_norm), "clipped": float(grad_norm > 1.0),
                     "tokens_per_s": plan.batch * t / (t2 - t0)})
        if step % LOG_EVERY == 0 or step == steps_total:
            ledger.append_steps(plan.name, rows)
            rows.clear()
        if step % eval_every == 0 or step == steps_total:
            evaluate(step)
        progress.advance(task)
    ledger.set_status(plan.name, "finished")


def run_demo(location: str, *, quick: bool, console: Console | None = None) -> dict[str, Any]:
    """Run the demo into the ledger at `location`; return what it measured (also printed)."""
    console = console or Console()
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    budget = 120_000 if quick else 1_000_000
    train, held, files = stdlib_corpus(3_000_000 if quick else 12_000_000)
    cfg = GPTConfig(vocab_size=256, context=64, layers=2, width=64, heads=4)
    lr = 3e-3
    plans = [_Plan("demo/batch-8", 8, budget), _Plan("demo/batch-32", 32, budget)]
    model = GPT(cfg)
    manifests = {}
    for plan in plans:
        manifests[plan.name] = Manifest(
            data=Recipe(
                sources=[Source(name="python-stdlib", path=sysconfig.get_paths()["stdlib"], domain="code",
                                unique_tokens=int(len(train)))],
                tokenizer=Tokenizer(name="bytes", vocab_size=256, bytes_per_token=1.0),
                sequence_length=cfg.context,
                accepted_tokens=plan.tokens,
            ),
            model=ModelConfig(name="probe-gpt", params=sum(p.numel() for p in model.parameters()),
                              non_embedding_params=model.non_embedding_params(), layers=cfg.layers, width=cfg.width,
                              heads=cfg.heads, head_dim=cfg.width // cfg.heads, context=cfg.context, vocab_size=256),
            optimisation=Optimisation(optimizer="adamw", lr=lr, schedule="constant", warmup_steps=0,
                                      batch_size=plan.batch, microbatch_size=plan.batch, grad_clip=1.0),
            hardware=Hardware(device_kind="cpu", device_count=1),
            evals=EvalPortfolio(name="demo", version="1", tasks=["val/loss", "val/bpb"]),
            library_versions={"torch": torch.__version__, "python": sys.version.split()[0]},
            seed=0,
        )
    console.print(f"Corpus: {files} files of Python's standard library, {len(train):,} training bytes, "
                  f"{len(held):,} held-out bytes (split by file). Budget: {budget:,} tokens per run.", highlight=False)
    with Ledger(location) as ledger:
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} steps"),
                      TimeRemainingColumn(), console=console) as progress:
            for plan in plans:
                _train(ledger, plan, cfg, train, held, manifests[plan.name], progress, evals=6 if quick else 10, lr=lr)
        result = _summarise(ledger, plans)
    result["confounders"] = [d.model_dump() for d in diff(manifests[plans[0].name], manifests[plans[1].name])]
    _render(console, result, location)
    return result


def _summarise(ledger: Ledger, plans: list[_Plan]) -> dict[str, Any]:
    """Validation loss at the shared eval points (equal tokens) and throughput of each run, from the ledger."""
    out: dict[str, Any] = {"runs": {}}
    curves = {}
    for plan in plans:
        steps = ledger.steps(plan.name, ["tokens", "wall_s", "tokens_per_s"])
        ev = ledger.evals(plan.name)
        ev = ev[(ev.task == "val") & (ev.metric == "loss")]
        curves[plan.name] = ev
        out["runs"][plan.name] = {
            "batch": plan.batch,
            "steps": len(steps),
            "tokens": float(steps["tokens"].iloc[-1]),
            "wall_s": float(steps["wall_s"].iloc[-1]),
            "tokens_per_s": float(steps["tokens"].iloc[-1] / steps["wall_s"].iloc[-1]),
            "final_val_loss": float(ev["value"].iloc[-1]),
        }
    a, b = (curves[p.name] for p in plans)
    # Both runs are evaluated at token counts on their own grids: compare where both have an eval,
    # interpolating B's curve at A's eval tokens (never extrapolating).
    grid = a["tokens"].to_numpy()
    grid = grid[(grid >= b["tokens"].min()) & (grid <= b["tokens"].max())]
    out["at_equal_tokens"] = [
        {"tokens": float(x), plans[0].name: float(np.interp(x, a["tokens"], a["value"])),
         plans[1].name: float(np.interp(x, b["tokens"], b["value"]))}
        for x in grid
    ]
    return out


def _render(console: Console, result: dict[str, Any], location: str) -> None:
    from rich.table import Table

    names = list(result["runs"])
    table = Table("run", "batch", "steps", "tokens", "tokens/s", "final val loss")
    for name, r in result["runs"].items():
        table.add_row(name, str(r["batch"]), f"{r['steps']:,}", f"{r['tokens']:,.0f}", f"{r['tokens_per_s']:,.0f}",
                      f"{r['final_val_loss']:.4f}")
    console.print(table)
    table = Table("tokens", *[f"val loss {n}" for n in names], title="Validation loss at equal tokens")
    for p in result["at_equal_tokens"]:
        table.add_row(f"{p['tokens']:,.0f}", *[f"{p[n]:.4f}" for n in names])
    console.print(table)
    ra, rb = (result["runs"][n] for n in names)
    faster = names[1] if rb["tokens_per_s"] > ra["tokens_per_s"] else names[0]
    learns = names[1] if rb["final_val_loss"] < ra["final_val_loss"] else names[0]
    console.print(f"Throughput: {faster} moves {max(ra['tokens_per_s'], rb['tokens_per_s']) / min(ra['tokens_per_s'], rb['tokens_per_s']):.2f}x "
                  f"the tokens/s. Learning: at {ra['tokens']:,.0f} tokens {learns} reaches the lower validation loss "
                  f"({min(ra['final_val_loss'], rb['final_val_loss']):.4f} vs {max(ra['final_val_loss'], rb['final_val_loss']):.4f}).",
                  highlight=False)
    console.print("Confounders (manifest diff): " + ", ".join(d["field"] for d in result["confounders"]), highlight=False)
    console.print(f"Recorded in {location}: try `yieldgate --ledger {location} runs` and "
                  f"`yieldgate --ledger {location} manifest diff {names[0]} {names[1]}`.", highlight=False)
