"""The fault-injection proof of `yieldgate diagnose`: short real probe runs, each with one fault injected
through the trainer's fault hooks, diagnosed and scored.

    python benchmarks/bench_diagnose.py                 # score seeds 100.. (10 per fault, 20 clean)
    python benchmarks/bench_diagnose.py --seeds 0 1 2   # the calibration seeds the thresholds were set on

Prints the confusion matrix (rows: injected fault; columns: the top cause found, or none), each fault's hit
rate, the clean runs' false alarms and the spike-localisation error.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from yieldgate.probe.trainer import Faults, ProbeConfig

RECIPE = {
    "sources": [{"name": "shakespeare-modern", "weight": 0.5}, {"name": "shakespeare-folio", "weight": 0.3},
                {"name": "milton", "weight": 0.2}],
    "tokenizer": {"name": "bpe-320", "vocab_size": 320},
}
MAX_CHARS = 300_000
STEPS = 250


def probe_config(seed: int, faults: Faults) -> ProbeConfig:
    """The suite's probe: ~9k parameters, 250 steps of 16 x 32 tokens (14 tokens per parameter), a loss scaler."""
    return ProbeConfig(tokens=STEPS * 16 * 32, batch_size=16, context=32, layers=1, width=16, heads=2, evals=10,
                       eval_sequences=16, threads=1, loss_scaler=True, seed=seed, faults=faults)


@dataclass(frozen=True)
class Condition:
    """One row of the suite: the cause it should be labelled with (None: clean) and its faults for a seed."""

    cause: str | None
    faults: Any  # (seed, injected step) -> Faults


CONDITIONS: dict[str, Condition] = {
    "clean": Condition(None, lambda seed, at: Faults()),
    "lr_x30": Condition("schedule", lambda seed, at: Faults(lr_multiplier=30.0)),
    "no_warmup": Condition("schedule", lambda seed, at: Faults(no_warmup=True)),
    "lr_div100": Condition("schedule", lambda seed, at: Faults(lr_multiplier=0.01)),
    "nan_grad": Condition("damaged_update", lambda seed, at: Faults(nan_at_step=at)),
    "corrupt_batch": Condition("damaged_update", lambda seed, at: Faults(corrupt_at_step=at)),
    "inf_skipped": Condition("damaged_update", lambda seed, at: Faults(inf_at_steps=tuple(range(at, at + 4)))),
    "sleep_loader": Condition("infrastructure_stall", lambda seed, at: Faults(sleep_loader_s=0.01, sleep_from_step=at)),
    "unshuffled": Condition("non_iid_stream", lambda seed, at: Faults(unshuffled=True)),
    "loop_200": Condition("duplicated_stream", lambda seed, at: Faults(loop_examples=200)),
    "repeat_40_epochs": Condition("data_exhaustion", lambda seed, at: Faults(repeat_source=("milton", 40.0))),
    "mixture_drift": Condition("mixture_drift", lambda seed, at: Faults(
        drift_to={"shakespeare-modern": 0.1, "shakespeare-folio": 0.1, "milton": 0.8})),
}


def injected_step(seed: int) -> int:
    """Where a one-step fault lands for a seed: somewhere in the stable phase."""
    return int(np.random.default_rng(1_000 + seed).integers(60, 180))


_DATA: Any = None


def _data() -> Any:
    global _DATA
    if _DATA is None:
        from yieldgate.data.recipe import resolve
        from yieldgate.manifest import parse_manifest

        _DATA = resolve(parse_manifest({"data": RECIPE}).data, seed=0, max_chars_per_source=MAX_CHARS)
    return _DATA


def run_condition(name: str, seed: int, folder: str) -> dict[str, Any]:
    """Train one probe with the condition's fault into its own ledger, diagnose it, return the outcome."""
    from yieldgate.analysis.diagnose import diagnose_run
    from yieldgate.probe.trainer import train_probe

    at = injected_step(seed)
    cond = CONDITIONS[name]
    ledger = str(Path(folder) / f"{name}-{seed}.db")
    run = f"{name}/s{seed}"
    train_probe(_data(), probe_config(seed, cond.faults(seed, at)), run=run, ledger=ledger)
    report = diagnose_run(ledger, run)
    return {"condition": name, "seed": seed, "at": at, "ledger": ledger, "run": run, **report.to_dict()}
