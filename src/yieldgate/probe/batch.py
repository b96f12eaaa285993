"""`yieldgate batch-check`: the small-batch baseline check (`track.batch_check.batch_size_check`) on the reference
GPT and a source of the built-in corpus, so a team can ask "does this batch, accumulation or precision change
what is learned per token?" before paying for it at scale.

The model is the probe GPT (`probe.model`) over raw bytes (vocabulary 256: no tokenizer to train), the text one
corpus source split by work (`corpus.split_by_work`, as the probes split it): training windows are drawn from
the training works, and the fixed held-out batch every run is scored on comes from the held-out works. The
baseline trains at a small batch in fp32 without accumulation; the candidate at its batch, accumulation and
precision. Both see the same tokens, from the same initial model, seed by seed (the check pairs them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import torch

from yieldgate.data import corpus
from yieldgate.errors import InputError, RunNotFound
from yieldgate.manifest import Manifest, ModelConfig, Optimisation, Recipe, Source
from yieldgate.probe.model import GPT, GPTConfig
from yieldgate.track.batch_check import BatchCheckResult, BatchConfig, batch_size_check

__all__ = ["BatchCheckSetup", "BatchCheckReport", "run_batch_check", "record_batch_check", "META_KEY"]

META_KEY = "batch_check"
"""The run meta key a check is kept under (`Tracker.record_batch_check` writes the same; `yieldgate diagnose`
reads it: cause `throughput_altered_learning`)."""

Precision = Literal["fp32", "bf16", "fp16"]


@dataclass(frozen=True, kw_only=True)
class BatchCheckSetup:
    """What to train in the check; every field has a default that runs in well under a minute on two CPU cores."""

    baseline_batch: int = 8
    """Sequences per step of the small-batch baseline (fp32, no accumulation)."""
    candidate_batch: int = 64
    """Sequences per step of the candidate (all microbatches together)."""
    accumulation: int = 1
    """The candidate's microbatches per step."""
    precision: Precision = "fp32"
    """The candidate's autocast precision."""
    lr: float = 3e-3
    """AdamW learning rate of the baseline, and of the candidate unless `candidate_lr` is set."""
    candidate_lr: float | None = None
    """The candidate's learning rate (None: `lr`); a bigger batch is often run at a bigger one."""
    seeds: int = 3
    """Seeds: each trains both configurations from the same initial model on its own draws."""
    tokens: int = 65_536
    """Tokens each training sees."""
    source: str = "shakespeare-modern"
    """The built-in corpus source (`corpus.SOURCES`) the text comes from."""
    context: int = 64
    """Tokens (bytes) per sequence."""
    layers: int = 2
    width: int = 64
    heads: int = 4
    eval_sequences: int = 64
    """Held-out sequences in the fixed evaluation batch."""
    threshold: float = 0.15
    """Share of the baseline's learning per token the candidate may lose before the change counts as altered."""
    threads: int | None = 1
    """torch threads (None: leave as is). One by default: matmuls this small gain little from more, and on a busy
    2-core machine two threads ran a step 8x slower than one (measured)."""

    def __post_init__(self) -> None:
        for name in ("baseline_batch", "candidate_batch", "accumulation", "tokens", "context", "eval_sequences"):
            if getattr(self, name) < 1:
                raise InputError(f"batch_check.{name} must be >= 1, got {getattr(self, name)}")
        if self.seeds < 2:
            raise InputError(f"batch_check.seeds must be >= 2 (a noise floor needs two), got {self.seeds}")
        if self.candidate_batch % self.accumulation:
            raise InputError(
                f"batch_check.candidate_batch ({self.candidate_batch}) must be a multiple of accumulation "
                f"({self.accumulation})"
            )
        if self.precision not in get_args(Precision):
            raise InputError(f"batch_check.precision must be one of fp32, bf16, fp16, got {self.precision!r}")
        for name in ("lr", "candidate_lr"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise InputError(f"batch_check.{name} must be > 0, got {value}")
        if self.source not in corpus.SOURCES:
            raise InputError(f"batch_check.source must be one of {', '.join(corpus.SOURCES)}, got {self.source!r}")
        try:
            GPTConfig(context=self.context, layers=self.layers, width=self.width, heads=self.heads)
        except ValueError as exc:
            raise InputError(f"batch_check: {exc}") from None

    def manifest(self) -> Manifest:
        """The candidate's configuration as a manifest (for a run the check creates)."""
        return Manifest(
            data=Recipe(sources=[Source(name=self.source)]),
            model=ModelConfig(layers=self.layers, width=self.width, heads=self.heads, context=self.context),
            optimisation=Optimisation(
                optimizer="adamw",
                lr=self.candidate_lr or self.lr,
                batch_size=self.candidate_batch,
                grad_accumulation=self.accumulation,
                precision=self.precision,
            ),
        )


@dataclass(frozen=True)
class BatchCheckReport:
    """`yieldgate batch-check`'s result: what was trained, the verdict with its numbers, and the run it was kept
    with (None: none)."""

    setup: BatchCheckSetup
    result: BatchCheckResult
    run: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"setup": dataclasses.asdict(self.setup), "run": self.run, **dataclasses.asdict(self.result)}


def _text(source: str, context: int) -> tuple[np.ndarray, np.ndarray]:
    """The source's training and held-out text as bytes (uint8), split by work as the probes split it."""
    works = corpus.sources(corpus.load_corpus()).get(source, [])
    train, held = corpus.split_by_work(works, held_out=0.1, seed=0)

    def as_bytes(ws: list[corpus.Work]) -> np.ndarray:
        return np.frombuffer("\n".join(w.text for w in ws).encode(), dtype=np.uint8)

    out = as_bytes(train), as_bytes(held)
    if min(len(x) for x in out) <= context + 1:
        raise InputError(f"source {source!r} has too little text for sequences of {context} bytes")
    return out


def _windows(text: np.ndarray, rng: np.random.Generator, n: int, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n random windows of `text`: inputs and next-byte targets, (n, t) each."""
    starts = rng.integers(0, len(text) - t - 1, size=n)
    rows = np.stack([text[s : s + t + 1] for s in starts]).astype(np.int64)  # (n, t + 1)
    both = torch.from_numpy(rows)
    return both[:, :-1], both[:, 1:]


def run_batch_check(
    setup: BatchCheckSetup,
    *,
    ledger: str | Path | None = None,
    run: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BatchCheckResult:
    """`yieldgate batch-check`: train the baseline and the candidate `setup.seeds` times each and judge the
    candidate (`track.batch_check.batch_size_check`); with `run`, keep the result with that run of `ledger`
    (`record_batch_check`). `progress(done, total)` after each training."""
    if setup.threads is not None:
        torch.set_num_threads(setup.threads)
    train, held = _text(setup.source, setup.context)
    torch.manual_seed(0)
    model = GPT(GPTConfig(context=setup.context, layers=setup.layers, width=setup.width, heads=setup.heads))
    result = batch_size_check(
        model,
        make_optimizer=lambda params, lr: torch.optim.AdamW(params, lr=lr),
        sample=lambda rng, n: _windows(train, rng, n, setup.context),
        loss_fn=lambda m, x, y: m(x, y)[1],
        eval_batch=_windows(held, np.random.default_rng(99), setup.eval_sequences, setup.context),
        baseline=BatchConfig(batch_size=setup.baseline_batch),
        candidate=BatchConfig(
            batch_size=setup.candidate_batch,
            accumulation=setup.accumulation,
            precision=setup.precision,
            lr=setup.candidate_lr,
        ),
        tokens=setup.tokens,
        lr=setup.lr,
        seeds=setup.seeds,
        threshold=setup.threshold,
        progress=progress,
    )
    if run is not None:
        record_batch_check(result, run, ledger=ledger, setup=setup)
    return result


def record_batch_check(
    result: BatchCheckResult, run: str, *, ledger: str | Path | None = None, setup: BatchCheckSetup | None = None
) -> bool:
    """Keep `result` with `run` (run meta `META_KEY`, where `yieldgate diagnose` reads it), creating the run, with
    `setup`'s manifest, when the ledger has none of that name; True when it was created."""
    from yieldgate.ledger import Ledger

    with Ledger(ledger) as led, led.transaction():
        created = False
        try:
            led.run_id(run)
        except RunNotFound:
            led.create_run(
                run, manifest=None if setup is None else setup.manifest(), status="finished", source="batch-check"
            )
            created = True
        led.set_meta(run, META_KEY, _record(result, setup))
    return created


def _record(result: BatchCheckResult, setup: BatchCheckSetup | None) -> dict[str, Any]:
    """The result's fields (what `Tracker.record_batch_check` keeps), with the setup that produced it."""
    out = dataclasses.asdict(result)
    if setup is not None:
        out["setup"] = dataclasses.asdict(setup)
    return out
