"""Constructed ledgers for the gate's fast tests: probes of known curves, written as `yieldgate probe` stores them
(a manifest with the model's parameters and each source's unique tokens, probe meta with the budget), so that each
rule of the gate has a case whose answer flips when the rule is mutated (issue #44, items 2, 5, 6 and 11).

A probe's validation loss is `curve(tokens)` plus a fixed wobble of +-`noise` that differs by seed and evaluation
(no random draws: the cases are the same on every machine), its training loss the same 0.05 higher, at 1,024 tokens
and 0.05 s per step."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from yieldgate import EvalRecord, Ledger, Manifest

TOKENS_PER_STEP = 1024
SECONDS_PER_STEP = 0.05
POLICY = Path(__file__).parents[2] / "examples" / "policy.yaml"


def warmed(step: int, steps: int, peak: float = 3e-3) -> float:
    """A linear warm-up over the first 5% of the steps, then constant at `peak`."""
    return peak * min(1.0, (step + 1) / max(1, round(0.05 * steps)))


def no_warmup(step: int, steps: int) -> float:
    """The schedule fault of issue #44 item 2: the peak LR from the first step."""
    return 3e-3


def turning(drop: float = 180.0, floor: float = 1.6, beta: float = 0.5, at: float = 60_000, rise: float = 2e-6):
    """A loss that stops falling and turns up after `at` tokens (a source repeated past what it holds)."""
    base = power_law(drop, floor, beta)
    return lambda tokens: base(min(tokens, at)) + rise * max(0.0, tokens - at)


def power_law(drop: float = 180.0, floor: float = 1.6, beta: float = 0.5) -> Callable[[float], float]:
    """A validation loss that keeps falling: floor + drop * (tokens + 2000)^-beta."""
    return lambda tokens: floor + drop * (tokens + 2000.0) ** -beta


@dataclass(kw_only=True)
class Probe:
    """One probe of a constructed campaign."""

    curve: Callable[[float], float]
    train: Callable[[float], float] | None = None
    """The training loss's curve (None: `curve` + 0.05); with batch noise of 0.05 on top."""
    tokens: int = 150_000
    evals: int = 12
    noise: float = 0.004
    lr: Callable[[int, int], float] = lambda step, steps: warmed(step, steps)
    """The LR at a step of `steps`: by default a warm-up over 5% of the steps, then constant (the stable phase)."""
    nan_from: int | None = None
    """The step from which the training loss is NaN (a diverged update); evaluations after it are NaN too."""
    nan_evals_only: bool = False
    """NaN in the held-out evaluations from `nan_from` on, the training loss finite."""
    hard: Callable[[float], float] | None = None
    """A hard slice's bits per byte at tokens (`hard/archaic`), for the regression check."""
    manifest: dict[str, Any] = field(default_factory=dict)
    """Manifest fields over the default's (`manifest_of`)."""
    scale: float = 1.0
    """Every loss multiplied by this (1 / ln 2: the same run in bits instead of nats)."""
    phase: int | None = None
    """What draws the probe's evaluation wobble and batch noise (None: its seed): a probe renamed or given another seed
    number keeps its numbers when its phase is kept."""


def manifest_of(recipe: str, seed: int, extra: dict[str, Any]) -> Manifest:
    base: dict[str, Any] = {
        "data": {
            "sources": [{"name": f"{recipe}-text", "weight": 1.0, "unique_tokens": 5_000_000}],
            "tokenizer": {"name": "bpe-512", "vocab_size": 512},
        },
        "model": {"name": "probe-gpt", "params": 31_000, "non_embedding_params": 12_000, "layers": 1, "width": 32},
        "optimisation": {"optimizer": "adamw", "lr": 3e-3, "schedule": "wsd", "batch_size": 16},
        "hardware": {"device_kind": "cpu", "device_count": 1, "price_per_device_hour": 0.5},
        "seed": seed,
    }
    for key, value in extra.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return Manifest.model_validate(base)


def wobble(seed: int, k: int, noise: float) -> float:
    return noise * ((7 * k + 3 * seed) % 5 - 2) / 2


def write_probe(led: Ledger, run: str, recipe: str, seed: int, probe: Probe, campaign: str = "camp") -> None:
    steps = probe.tokens // TOKENS_PER_STEP
    step = np.arange(steps + 1)
    tokens = step * float(TOKENS_PER_STEP)
    phase = seed if probe.phase is None else probe.phase
    batch = np.random.default_rng(phase).normal(0.0, 0.05, len(step))  # PCG64: the same on every machine
    train = probe.train or (lambda t: probe.curve(t) + 0.05)
    loss = (np.array([train(t) for t in tokens]) + batch) * probe.scale
    if probe.nan_from is not None and not probe.nan_evals_only:
        loss[probe.nan_from :] = math.nan
    led.create_run(run, manifest=manifest_of(recipe, seed, probe.manifest), source="probe")
    led.set_meta(run, "probe", {"campaign": campaign, "recipe": recipe, "seed": seed, "tokens": probe.tokens})
    led.append_steps(
        run,
        {
            "step": step.tolist(),
            "tokens": tokens.tolist(),
            "wall_s": (step * SECONDS_PER_STEP).tolist(),
            "loss": loss.tolist(),
            "lr": [probe.lr(int(s), steps) for s in step],
        },
    )
    records = []
    for k in range(probe.evals + 1):
        at = round(k * steps / probe.evals)
        value = (probe.curve(at * TOKENS_PER_STEP) + wobble(phase, k, probe.noise)) * probe.scale
        if probe.nan_from is not None and at >= probe.nan_from:
            value = math.nan
        records.append(EvalRecord(step=at, tokens=at * TOKENS_PER_STEP, task="val", metric="loss", value=value))
        if probe.hard is not None:
            records.append(
                EvalRecord(
                    step=at, tokens=at * TOKENS_PER_STEP, task="hard/archaic", metric="bpb", value=probe.hard(at)
                )
            )
    led.append_evals(run, records)
    led.set_status(run, "finished")


def campaign(path: Path, recipes: dict[str, Probe | Sequence[Probe]], seeds: int = 3, name: str = "camp") -> Path:
    """A ledger at `path` holding `seeds` probes of each recipe (`{name}/{recipe}/s{seed}`); a sequence of probes
    gives each seed its own."""
    with Ledger(path) as led:
        for recipe, probes in recipes.items():
            for seed in range(seeds):
                probe = probes if isinstance(probes, Probe) else probes[seed]
                write_probe(led, f"{name}/{recipe}/s{seed}", recipe, seed, probe, name)
    return path
