"""A missing warm-up is not a cause by itself (issue #35, item 11): a fine-tune whose learning rate starts at its peak
and whose loss shows no early instability gets at most a low-confidence note, not a finding advising a warm-up. A
missing warm-up with early instability, or at the start of a run from random weights, keeps its finding."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from yieldgate.analysis.detectors import LOW_CONFIDENCE, RunSignals
from yieldgate.analysis.diagnose import DETECTORS
from yieldgate.manifest import parse_manifest

REAL = Path(__file__).parent / "data" / "real"
schedule = DETECTORS["schedule"]


def _no_warmup(findings: list) -> list:
    return [f for f in findings if getattr(f, "detector", None) == "no_warmup"]


def test_a_real_fine_tune_without_warm_up_and_without_early_instability_gets_a_note(cli):
    """The t5-small summarisation fine-tune (tests/data/real): its first logged LR is its peak (linear decay from
    5e-5, no warm-up), and over the first tenth of its 430 logged losses no step rises by more than three times the
    median step-to-step change (the loss starts at 2.00, far below an untrained model's). A note at most, and the
    run's top cause is not the schedule."""
    rows = json.loads((REAL / "hf-t5-summarization-trainer_state.json").read_text())["log_history"]
    train = [r for r in rows if "loss" in r and "learning_rate" in r]
    lrs = [r["learning_rate"] for r in train]
    assert len(train) == 430 and lrs[0] == max(lrs)
    early = np.array([r["loss"] for r in train[: len(train) // 10]])
    assert np.diff(early).max() <= 3 * np.median(np.abs(np.diff(early)))
    cli("import", "hf-trainer", str(REAL / "hf-t5-summarization-trainer_state.json"), "--run", "t5")
    findings = cli.json("diagnose", "t5")["findings"]
    (note,) = [f for f in findings if f["detector"] == "no_warmup"]
    assert note["confidence"] <= LOW_CONFIDENCE and note["evidence"]["early_loss_jump"] is False
    assert "warm up over" not in note["advice"] and "no early instability" in note["advice"]
    assert not [f for f in findings if f["cause"] == "schedule" and f["confidence"] > LOW_CONFIDENCE], findings


def _run(loss: np.ndarray, lr: np.ndarray, manifest=None) -> RunSignals:
    return RunSignals(
        steps=pd.DataFrame({"step": np.arange(1, len(loss) + 1), "loss": loss, "lr": lr}), manifest=manifest
    )


def _descent(n: int, start: float, end: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return end + (start - end) * np.exp(-np.arange(n) / (n / 4)) + rng.normal(0, 0.01, n)


def test_no_warm_up_keeps_its_finding_where_the_loss_was_unstable_early_or_the_model_started_untrained():
    """The boundary: the same fine-tune with a jump in its loss in the first tenth is a finding at 0.85; a run from
    random weights (its first losses at ln(vocabulary size)) without warm-up keeps its 0.6; a run that warms up
    gets nothing."""
    n = 400
    decay = np.linspace(2e-4, 1e-6, n)
    (quiet,) = _no_warmup(schedule(_run(_descent(n, 2.0, 1.4), decay)))
    assert quiet.confidence <= LOW_CONFIDENCE and quiet.evidence["untrained_loss"] is None
    jumpy = _descent(n, 2.0, 1.4)
    jumpy[10:14] += 0.8  # the first updates at the peak LR throw the loss up
    (unstable,) = _no_warmup(schedule(_run(jumpy, decay)))
    assert unstable.confidence == 0.85 and unstable.evidence["early_loss_jump"] is True
    assert "warm up over the first" in unstable.advice
    vocab = parse_manifest({"model": {"vocab_size": 320}})
    (scratch,) = _no_warmup(schedule(_run(_descent(n, math.log(320), 3.7), decay, vocab)))
    assert scratch.confidence == 0.6 and "warm up over the first" in scratch.advice
    # The same fine-tune under a manifest that names its vocabulary: it starts far below ln(32000), still a note.
    (tuned,) = _no_warmup(
        schedule(_run(_descent(n, 2.0, 1.4), decay, parse_manifest({"model": {"vocab_size": 32000}})))
    )
    assert tuned.confidence <= LOW_CONFIDENCE and tuned.evidence["untrained_loss"] == round(math.log(32000), 4)
    warmed = np.r_[np.linspace(1e-6, 2e-4, 20), decay[20:]]
    assert _no_warmup(schedule(_run(_descent(n, 2.0, 1.4), warmed))) == []
