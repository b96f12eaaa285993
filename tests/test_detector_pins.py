"""The diagnosis detectors' findings pinned whole (issue #44 item 11): cause, span, confidence, detector, every key of
the evidence and the advice, on small step records built here whose numbers can be worked out by hand (each test says
how). Mutation testing (`make mutation-sample`) found the detectors the least pinned part of the code that decides:
a change to a message, an evidence key or a rounding passed every test that read the cause alone."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from yieldgate.analysis.data_detectors import data_exhaustion, duplicated_stream, mixture_drift
from yieldgate.analysis.detectors import (
    NotRun,
    RunSignals,
    effective_tokens,
    nonfinite_and_skipped,
    repeat_worth,
    stall,
)
from yieldgate.analysis.learning_detectors import early_warnings, schedule, throughput_altered_learning, undertrained
from yieldgate.manifest import Manifest


def _manifest(**sections: Any) -> Manifest:
    return Manifest.model_validate(sections)


def _steps(n: int, **columns: Any) -> pd.DataFrame:
    return pd.DataFrame({"step": np.arange(n), **columns})


def _evals(rows: list[tuple[str, str, int, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["task", "metric", "step", "value"])


# -- damaged update --------------------------------------------------------------------------------------------


def test_non_finite_evaluations_are_one_finding_per_task_and_metric():
    """val/loss NaN at steps 30 and 40, acc/arc infinite at 40 alone; the finite ones are not read."""
    evals = _evals(
        [
            ("val", "loss", 20, 2.0),
            ("val", "loss", 30, math.nan),
            ("val", "loss", 40, math.nan),
            ("arc", "acc", 30, 0.3),
            ("arc", "acc", 40, math.inf),
        ]
    )
    found = nonfinite_and_skipped(RunSignals(steps=_steps(50), evals=evals))
    assert [f.to_dict() for f in found] == [
        {
            "cause": "damaged_update",
            "start_step": 40,
            "end_step": 40,
            "confidence": 0.95,
            "severity": "high",
            "evidence": {"eval": "arc/acc", "nonfinite_evaluations": 1},
            "advice": "arc/acc evaluated to NaN or infinity at step 40: the weights went non-finite; find the update "
            "that overflowed, guard it (skip it) and check precision and LR",
            "detector": "nonfinite_eval",
        },
        {
            "cause": "damaged_update",
            "start_step": 30,
            "end_step": 40,
            "confidence": 0.95,
            "severity": "high",
            "evidence": {"eval": "val/loss", "nonfinite_evaluations": 2},
            "advice": "val/loss evaluated to NaN or infinity at 2 evaluations, steps 30-40: the weights went "
            "non-finite; find the update that overflowed, guard it (skip it) and check precision and LR",
            "detector": "nonfinite_eval",
        },
    ]


def test_non_finite_losses_are_spans_of_logged_steps():
    """A loss logged every 10 steps: infinite at 100, recorded NaN at 110 (neighbours among the logged steps: one span
    of two), and infinite again at 300 alone. The gradient norm is infinite at 5."""
    steps = np.arange(0, 400, 10)
    loss = np.full(len(steps), 2.0)
    loss[steps == 100] = math.inf
    loss[steps == 110] = math.nan
    loss[steps == 300] = -math.inf
    grad = np.ones(len(steps))
    grad[0] = math.inf
    sig = RunSignals(
        steps=pd.DataFrame({"step": steps, "loss": loss, "grad_norm": grad}),
        recorded_nan={"loss": np.array([110])},
    )
    found = [(f.detector, f.start_step, f.end_step, f.evidence, f.advice) for f in nonfinite_and_skipped(sig)]
    tail = "guard the update (skip it) and check precision and LR"
    assert found == [
        (
            "nonfinite_loss",
            100,
            110,
            {"signal": "loss", "nonfinite_steps": 2},
            f"non-finite loss at 2 logged steps, 100-110: find the batch or layer that overflowed; {tail}",
        ),
        (
            "nonfinite_loss",
            300,
            300,
            {"signal": "loss", "nonfinite_steps": 1},
            f"non-finite loss at step 300: find the batch or layer that overflowed; {tail}",
        ),
        (
            "nonfinite_grad_norm",
            0,
            0,
            {"signal": "grad_norm", "nonfinite_steps": 1},
            f"non-finite grad_norm at step 0: find the batch or layer that overflowed; {tail}",
        ),
    ]


def test_skipped_steps_are_counted_with_the_loss_scale_around_them():
    """The skipped-step counter goes 0 -> 3 over steps 20-22 (one span: rises within 5 steps merge) and 3 -> 4 at 60;
    the loss scale halves at each skip. Confidence 0.6 + 0.1 per skipped step."""
    skipped = np.zeros(100)
    skipped[20:] = 1
    skipped[21:] = 2
    skipped[22:] = 3
    skipped[60:] = 4
    scale = np.full(100, 65536.0)
    scale[20:] = 32768.0
    scale[21:] = 16384.0
    scale[22:] = 8192.0
    scale[60:] = 4096.0
    sig = RunSignals(steps=_steps(100, **{"signals/skipped_steps": skipped, "signals/loss_scale": scale}))
    found = [f.to_dict() for f in nonfinite_and_skipped(sig)]
    advice = (
        "the loss scaler skipped steps on inf/NaN gradients and backed its scale off: find the overflowing layer; "
        "bf16 or a lower LR avoids fp16 overflow"
    )
    base = {"cause": "damaged_update", "severity": "high", "advice": advice, "detector": "skipped_steps"}
    assert found == [
        {
            **base,
            "start_step": 20,
            "end_step": 22,
            "confidence": 0.9,
            "evidence": {"skipped_steps": 3, "loss_scale_before": 65536.0, "loss_scale_after": 8192.0},
        },
        {
            **base,
            "start_step": 60,
            "end_step": 60,
            "confidence": 0.7,
            "evidence": {"skipped_steps": 1, "loss_scale_before": 8192.0, "loss_scale_after": 4096.0},
        },
    ]


def test_a_skip_counter_already_counting_at_the_first_step_counts_its_rises_alone():
    """A resumed run's counter starts at 2: the skips before it are not this log's; the rise to 3 at step 5 is one
    skipped step (confidence 0.7), and without a loss-scale column the evidence has no scale keys."""
    skipped = np.array([2.0] * 5 + [3.0] * 45)
    found = nonfinite_and_skipped(RunSignals(steps=_steps(50, **{"signals/skipped_steps": skipped})))
    assert [(f.start_step, f.end_step, f.evidence, f.confidence) for f in found] == [(5, 5, {"skipped_steps": 1}, 0.7)]


def test_vanishing_gradients_need_ten_steps_below_a_ten_millionth_per_parameter():
    """10,000 parameters: a gradient norm of 5e-6 is an RMS of 5e-8 per parameter (below 1e-7), 2e-5 is 2e-7 (not).
    Ten such steps are a finding; nine are not."""
    grad = np.full(60, 2e-5)
    grad[40:50] = 5e-6
    grad[45] = 1e-6  # the smallest: 1e-8 per parameter
    sig = RunSignals(steps=_steps(60, grad_norm=grad), manifest=_manifest(model={"name": "m", "params": 10_000}))
    (found,) = nonfinite_and_skipped(sig)
    assert found.to_dict() == {
        "cause": "damaged_update",
        "start_step": 40,
        "end_step": 49,
        "confidence": 0.7,
        "severity": "high",
        "evidence": {"grad_rms_min": pytest.approx(1e-8), "steps": 10},
        "advice": "gradients vanish toward the optimizer's epsilon: updates are noise; check the loss scale, "
        "initialisation and normalisation",
        "detector": "vanishing_gradients",
    }
    grad[49] = 2e-5
    assert (
        nonfinite_and_skipped(
            RunSignals(steps=_steps(60, grad_norm=grad), manifest=_manifest(model={"name": "m", "params": 10_000}))
        )
        == []
    )


def test_nothing_to_read_is_not_run_with_the_signals_named():
    with pytest.raises(NotRun, match=r"^no loss, grad_norm or loss-scale columns recorded$"):
        nonfinite_and_skipped(RunSignals(steps=_steps(50, lr=np.ones(50))))


# -- infrastructure stall ---------------------------------------------------------------------------------------


def _timed(n: int, wait: np.ndarray, step_s: np.ndarray) -> pd.DataFrame:
    return _steps(n, tokens=np.arange(n) * 1000.0, step_s=step_s, data_wait_s=wait)


def test_a_data_wait_stall_is_found_from_its_onset_with_the_shares_before_and_during():
    """200 steps of 0.1 s; from step 120 the loader waits 0.06 s of each (a share of 0.6, from 0.05). The rolling
    median flags it five steps late; the onset is walked back to 120. No evaluations: no learning ratio."""
    wait = np.full(200, 0.005)
    wait[120:] = 0.06
    (found,) = stall(RunSignals(steps=_timed(200, wait, np.full(200, 0.1))))
    assert found.to_dict() == {
        "cause": "infrastructure_stall",
        "start_step": 120,
        "end_step": 199,
        "confidence": 0.9,
        "severity": "high",
        "evidence": {
            "wait_fraction_early": 0.05,
            "tokens_per_s_early": 10_000.0,
            "signal": "data_wait",
            "wait_fraction_during": 0.6,
            "tokens_per_s_during": 10_000.0,
            "learning_per_token_ratio": None,
        },
        "advice": "the input pipeline stalled, not learning: the data-wait share of step time rose; add loader "
        "workers/prefetch and check storage; changing the data or the schedule will not help",
        "detector": "stall_data_wait",
    }


def test_slower_steps_without_more_wait_are_a_note_unless_the_device_throttled():
    """Steps 100-149 take 0.3 s instead of 0.1 (3,333 tokens/s, a third of 10,000: below half), the wait unchanged;
    the rate recovers after them. The span ends where the 10-step rolling median recovers: at 153 six of its ten steps
    are slow, at 154 five (median 6,667, above half). A note at 0.3; the device's throttle reasons make it 0.8."""
    step_s = np.full(200, 0.1)
    step_s[100:150] = 0.3
    steps = _timed(200, np.full(200, 0.005), step_s)
    (note,) = stall(RunSignals(steps=steps))
    during = round(1000 / 0.3, 1)
    assert note.to_dict() == {
        "cause": "infrastructure_stall",
        "start_step": 100,
        "end_step": 153,
        "confidence": 0.3,
        "severity": "high",
        "evidence": {
            "wait_fraction_early": 0.05,
            "tokens_per_s_early": 10_000.0,
            "signal": "throughput",
            "wait_fraction_during": round(0.005 / 0.3, 4),
            "tokens_per_s_during": during,
            "learning_per_token_ratio": None,
            "device_throttled": False,
        },
        "advice": "steps got slower while the data-wait share went from 5% to 2%: the compute side slowed, not the "
        "loader; a note: on a shared host this is contention as often as a fault; check what else ran",
        "detector": "stall_throughput",
    }
    throttle = np.zeros(200)
    throttle[130] = 4
    (hot,) = stall(RunSignals(steps=steps.assign(**{"device/throttle_reasons": throttle})))
    assert (hot.confidence, hot.evidence["device_throttled"]) == (0.8, True)
    assert hot.advice.endswith("the loader; the device reports throttling: check its cooling and power limits")


def test_a_stall_needs_forty_steps_of_timing():
    with pytest.raises(NotRun, match=r"^39 steps recorded; a stall needs at least 40$"):
        stall(RunSignals(steps=_timed(39, np.zeros(39), np.full(39, 0.1))))
    with pytest.raises(NotRun, match=r"^no timing recorded \(step_s with data_wait_s, or tokens_per_s\)$"):
        stall(RunSignals(steps=_steps(100, loss=np.ones(100))))


def test_the_learning_ratio_is_the_loss_drop_per_token_after_the_stall_over_before():
    """Evaluations at steps 0, 60, 120, 160, 199 (tokens = 1,000 x step): 3.0, 2.4, 1.8 before the stall at 120 (0.01
    per 1,000 tokens), 1.8, 1.4, 1.01 after (0.79 over 79,000 tokens: 0.01 per 1,000). Ratio 1.0."""
    wait = np.full(200, 0.005)
    wait[120:] = 0.06
    evals = _evals([("val", "loss", s, v) for s, v in ((0, 3.0), (60, 2.4), (120, 1.8), (160, 1.4), (199, 1.01))])
    (found,) = stall(RunSignals(steps=_timed(200, wait, np.full(200, 0.1)), evals=evals))
    assert found.evidence["learning_per_token_ratio"] == 1.0


# -- data --------------------------------------------------------------------------------------------------------


def test_a_source_passed_eight_times_is_exhausted_with_its_worth_against_the_decay():
    """1,000 unique tokens drawn 100 per step for 80 steps: 8 epochs at the end, past 4 from step 40 (4,100 drawn).
    Its next token is worth e^(-7/15.4) = 0.635 of a fresh one (Muennighoff et al. 2023); the 8 epochs are worth
    1 + 15.4 (1 - e^(-7/15.4)) = 6.625 fresh ones; confidence 1 - 0.635, +0.1 as the held-out loss of the source
    rose over the second half of its evaluations."""
    worth = math.exp(-7 / 15.4)
    assert repeat_worth(8.0) == pytest.approx(worth) and effective_tokens(8.0, 1.0) == pytest.approx(
        1 + 15.4 * (1 - worth)
    )
    steps = _steps(80, **{"tokens/web": (np.arange(80) + 1) * 100.0})
    evals = _evals([("val/web", "loss", s, v) for s, v in ((10, 3.0), (30, 2.5), (50, 2.6), (79, 2.7))])
    manifest = _manifest(data={"sources": [{"name": "web", "weight": 1.0, "unique_tokens": 1000}]})
    (found,) = data_exhaustion(RunSignals(steps=steps, evals=evals, manifest=manifest))
    assert found.to_dict() == {
        "cause": "data_exhaustion",
        "start_step": 40,
        "end_step": 79,
        "confidence": round(1 - worth + 0.1, 3),
        "severity": "high",
        "evidence": {
            "source": "web",
            "epochs": 8.0,
            "unique_tokens": 1000.0,
            "next_token_worth": 0.635,
            "effective_epochs": round(1 + 15.4 * (1 - worth), 2),
            "val_change_second_half": 0.1,
        },
        "advice": "web was seen 8.0 times: its next token is worth 0.63 of a fresh one; add unique data for it or "
        "lower its weight before buying more compute",
        "detector": "epochs",
    }
    steps4 = _steps(40, **{"tokens/web": (np.arange(40) + 1) * 100.0})  # 4 epochs exactly: fresh enough
    assert data_exhaustion(RunSignals(steps=steps4, manifest=manifest)) == []


def test_a_repeating_stream_without_declared_data_counts_every_repeat():
    """Half the samples repeat over the last 50 of 100 steps; no unique tokens declared: the trailing fifth's excess
    is 0.5, the confidence (0.5 + 0.5) x 0.7, and the onset the first step whose 10-step mean passes 0.05: at 50 it is
    0.05 exactly, at 51 0.1."""
    rate = np.zeros(100)
    rate[50:] = 0.5
    (found,) = duplicated_stream(RunSignals(steps=_steps(100, **{"stream/repeat_rate": rate})))
    assert found.to_dict() == {
        "cause": "duplicated_stream",
        "start_step": 51,
        "end_step": 99,
        "confidence": 0.7,
        "severity": "high",
        "evidence": {
            "repeat_rate": 0.5,
            "explained_by_epochs": 0.0,
            "excess": 0.5,
            "note": "no unique tokens in the manifest: every repeat counts as excess",
        },
        "advice": "the trainer sees the same samples again and again although the data holds more: check the "
        "sampler/loader (a loop over a small subset, workers with the same seed, a resumed iterator)",
        "detector": "repeat_rate",
    }
    rate[50:] = 0.04  # below the bar of 0.05
    assert duplicated_stream(RunSignals(steps=_steps(100, **{"stream/repeat_rate": rate}))) == []


def test_repeats_of_a_source_past_its_epoch_are_explained_by_its_data():
    """100 unique tokens drawn 10 per step: past one epoch from step 10 every sample is a repeat the data explains."""
    manifest = _manifest(data={"sources": [{"name": "web", "weight": 1.0, "unique_tokens": 100}]})
    steps = _steps(
        100, **{"stream/repeat_rate": np.r_[np.zeros(10), np.ones(90)], "tokens/web": (np.arange(100) + 1) * 10.0}
    )
    assert duplicated_stream(RunSignals(steps=steps, manifest=manifest)) == []


def test_a_source_drawn_past_its_weight_has_drifted():
    """Weights 0.5, 0.25, 0.25, 100-token samples, 100 steps of 1,000 tokens: 100,000 tokens, 1,000 samples. `a` draws
    700 of each 1,000 from step 0 (b and c 150 each): z = 0.2 / sqrt(0.25 / 1,000) = 12.6 for a, 0.1 / sqrt(0.1875 /
    1,000) = 7.3 for b and c; a is the worst, confidence 0.3 + 0.03 x 12.6."""
    sources = [{"name": "a", "weight": 0.5}, {"name": "b", "weight": 0.25}, {"name": "c", "weight": 0.25}]
    manifest = _manifest(data={"sources": sources, "sequence_length": 100})
    drawn = {"tokens/a": 700.0, "tokens/b": 150.0, "tokens/c": 150.0}
    steps = _steps(100, **{k: (np.arange(100) + 1) * v for k, v in drawn.items()})
    (found,) = mixture_drift(RunSignals(steps=steps, manifest=manifest))
    z = 0.2 / math.sqrt(0.25 / 1000)
    assert found.to_dict() == {
        "cause": "mixture_drift",
        "start_step": 0,
        "end_step": 99,
        "confidence": round(0.3 + 0.03 * z, 3),
        "severity": "high",
        "evidence": {
            "worst": "a",
            "a": {"weight": 0.5, "realised": 0.7, "z": 12.6},
            "b": {"weight": 0.25, "realised": 0.15, "z": 7.3},
            "c": {"weight": 0.25, "realised": 0.15, "z": 7.3},
        },
        "advice": "the realised share of a drifted from its manifest weight: check the pipeline's per-source "
        "sampling (a filter or loader change) before its effect reaches the evals",
        "detector": "source_shares",
    }


# -- how the run learns ------------------------------------------------------------------------------------------


def test_far_below_ten_tokens_per_parameter_is_undertrained():
    """100,000 tokens on 31,000 parameters: 3.23 per parameter, under 20 / 2; confidence 0.4 + 0.5 (1 - 3.23 x 2 /
    20) = 0.739. At 10 per parameter exactly, nothing; the parameters may come from the Tracker's model meta."""
    steps = _steps(101, tokens=np.arange(101) * 1000.0)
    model = _manifest(model={"name": "m", "params": 31_000})
    (found,) = undertrained(RunSignals(steps=steps, manifest=model))
    per_param = 100_000 / 31_000
    assert found.to_dict() == {
        "cause": "undertrained",
        "start_step": 0,
        "end_step": 100,
        "confidence": round(0.4 + 0.5 * (1 - per_param * 2 / 20), 3),
        "severity": "high",
        "evidence": {"tokens": 100_000.0, "params": 31_000, "tokens_per_param": 3.23},
        "advice": "3.2 tokens per parameter, far below ~20: train longer or use a smaller model before reading its "
        "loss as the data's limit",
        "detector": "tokens_per_param",
    }
    assert undertrained(RunSignals(steps=steps, meta={"model": {"params": 10_000}})) == []
    (meta,) = undertrained(RunSignals(steps=steps, meta={"model": {"params": 10_001}}))
    assert meta.evidence["params"] == 10_001
    with pytest.raises(NotRun, match=r"^no parameter count: the manifest gives no model.params"):
        undertrained(RunSignals(steps=steps))


def test_a_batch_check_that_found_learning_altered_is_a_finding_over_the_run():
    check = {
        "altered": True,
        "relative_loss": 0.04,
        "standard_error": 0.01,
        "baseline_learning_per_token": 2.0,
        "candidate_learning_per_token": 1.5,
        "tokens": 1e6,
        "other": "not evidence",
    }
    (found,) = throughput_altered_learning(RunSignals(steps=_steps(30), meta={"batch_check": check}))
    assert found.to_dict() == {
        "cause": "throughput_altered_learning",
        "start_step": 0,
        "end_step": 29,
        "confidence": 0.9,
        "severity": "high",
        "evidence": {k: v for k, v in check.items() if k not in ("altered", "other")},
        "advice": "the throughput change costs learning per token beyond noise: keep the small-batch setting, or "
        "retune LR for the new batch before trusting its tokens/s",
        "detector": "batch_check",
    }
    assert throughput_altered_learning(RunSignals(steps=_steps(30), meta={"batch_check": {"altered": False}})) == []
    with pytest.raises(NotRun, match=r"^no small-batch baseline check recorded for this run"):
        throughput_altered_learning(RunSignals(steps=_steps(30), meta={"batch_check": {"relative_loss": 0.1}}))


HEURISTIC = (
    "a learning signal moving before the validation loss (a falling gradient noise scale, collapsing entropy or "
    "update ratios, more clipping) is a heuristic early warning, not an established cause; its lead is measured on "
    "the fault suite by benchmarks/bench_diagnose.py"
)


def test_a_gradient_noise_scale_that_halves_before_the_validation_loss_turns_is_an_early_warning():
    """The noise scale is 100 to step 59 and 20 after: its second quarter's median 100, its last 20, under half; it
    first crosses 50 at step 60. The validation loss's best is 1.99 at step 60 and 2.1 at 80 is more than 1% above
    it: it turned at 80, 20 steps after the signal (confidence 0.45)."""
    gns = np.where(np.arange(100) < 60, 100.0, 20.0)
    evals = _evals([("val", "loss", s, v) for s, v in ((0, 3.0), (20, 2.5), (40, 2.0), (60, 1.99), (80, 2.1))])
    (found,) = early_warnings(RunSignals(steps=_steps(100, **{"signals/gns": gns}), evals=evals))
    assert found.to_dict() == {
        "cause": "early_warning",
        "start_step": 60,
        "end_step": 99,
        "confidence": 0.45,
        "severity": "low",
        "evidence": {
            "signal": "gns",
            "mid_run": 100.0,
            "last_quarter": 20.0,
            "val_loss_turned_at": 80,
            "lead_steps": 20,
            "heuristic": HEURISTIC,
        },
        "advice": "heuristic early warning: gns fell to under half its mid-run level from step 60, 20 steps before "
        "the validation loss turned; that this signal leads the validation loss is a heuristic, not a verdict: act "
        "on the validation loss, not on it",
        "detector": "early_gns",
    }
    later = _evals([("val", "loss", s, v) for s, v in ((0, 3.0), (20, 2.5), (40, 2.0), (60, 2.01), (80, 2.015))])
    (quiet,) = early_warnings(RunSignals(steps=_steps(100, **{"signals/gns": gns}), evals=later))
    assert (quiet.evidence["val_loss_turned_at"], quiet.evidence["lead_steps"], quiet.confidence) == (None, None, 0.25)
    assert quiet.advice.startswith(
        "heuristic early warning: gns fell to under half its mid-run level from step 60; "
        "the validation loss has not turned; "
    )
    halved = np.where(np.arange(100) < 60, 100.0, 50.0)  # half exactly: not under half
    assert early_warnings(RunSignals(steps=_steps(100, **{"signals/gns": halved}))) == []


def test_a_rising_share_of_clipped_steps_is_an_early_warning():
    """Every step clipped from step 70 of 100: the 20-step clipped share first passes 0.2 at step 74 (5 of 20). The
    share's series starts at step 9 (10 steps at least); its second quarter (steps 32-54) is 0, its last (78-99) has
    median (0.95 + 1.0) / 2."""
    clipped = (np.arange(100) >= 70).astype(float)
    (found,) = early_warnings(RunSignals(steps=_steps(100, clipped=clipped)))
    assert (found.detector, found.start_step, found.end_step, found.confidence) == ("early_clipped_share", 74, 99, 0.25)
    assert found.evidence == {
        "signal": "clipped_share",
        "mid_run": 0.0,
        "last_quarter": pytest.approx(0.975),
        "val_loss_turned_at": None,
        "lead_steps": None,
        "heuristic": HEURISTIC,
    }
    assert found.advice.startswith("heuristic early warning: clipped_share rose from step 74; the validation loss")
    with pytest.raises(
        NotRun, match=r"^no learning signals recorded \(signals/gns, act_entropy, update_ratio, clipped\)$"
    ):
        early_warnings(RunSignals(steps=_steps(100, clipped=clipped)[:39]))


def _schedule_run(loss: np.ndarray, **extra: Any) -> RunSignals:
    """A warmed-up run (only its first step below the peak LR of 1e-3: no missing warm-up) with this loss."""
    lr = np.full(len(loss), 1e-3)
    lr[0] = 1e-5
    return RunSignals(steps=_steps(len(loss), loss=loss, lr=lr, **extra))


def _t(values: np.ndarray) -> float:
    """The least-squares slope's t statistic against the index, as scipy computes it."""
    fit = scipy_stats.linregress(np.arange(len(values), dtype=float), values)
    return float(fit.slope / fit.stderr)


def test_a_loss_rising_at_the_peak_lr_is_the_lr_too_high():
    """2.0 + 0.01 per step, +-0.001 alternating: the peak phase (steps 1-99, its first tenth skipped: 10-99) rises
    from a first quarter's mean of 2.21 (steps 10-32) to a last one's of 2.885 (steps 78-99). The run learned nothing
    before it (its start, 2.0202, is below 2.21), so the progress ratio is not a number."""
    steps = np.arange(100)
    loss = 2.0 + 0.01 * steps + 0.001 * (-1.0) ** steps
    found = schedule(_schedule_run(loss))
    assert [(f.detector, f.cause, f.start_step, f.end_step, f.confidence) for f in found] == [
        ("lr_too_high", "schedule", 10, 99, 0.9)
    ]
    ev = dict(found[0].evidence)
    assert math.isnan(ev.pop("progress_ratio"))
    assert ev == {
        "peak_lr": 1e-3,
        "loss_start": 2.0202,
        "peak_phase_first_quarter": 2.21,
        "peak_phase_last_quarter": 2.885,
        "second_half_slope_t": round(_t(loss[55:]), 2),
        "diverging": True,
    }
    assert found[0].advice == "LR too high: the loss rises at the peak LR; lower the peak LR (try /3-/10)"


def test_a_slow_steady_descent_is_the_lr_too_low():
    """3.0 - 0.001 per step, +-0.0005 alternating, 100 steps: the loss falls 3.1% of its start (2.9981 to a last
    tenth's 2.9055), under 10%, while its last quarter still falls (t far below -3). A median update ratio under 2e-3
    raises the confidence from 0.75 to 0.9."""
    steps = np.arange(100)
    loss = 3.0 - 0.001 * steps + 0.0005 * (-1.0) ** steps
    (found,) = schedule(_schedule_run(loss))
    advice = (
        "LR too low: the loss falls slowly and steadily, far from where it could be; raise the peak LR (try x3-x10) "
        "and compare a short probe"
    )
    assert found.to_dict() == {
        "cause": "schedule",
        "start_step": 0,
        "end_step": 99,
        "confidence": 0.75,
        "severity": "high",
        "evidence": {
            "peak_lr": 1e-3,
            "relative_loss_drop": round((2.9981 - 2.9055) / 2.9981, 4),
            "tail_slope_t": round(_t(loss[75:]), 2),
            "update_ratio_median": None,
        },
        "advice": advice,
        "detector": "lr_too_low",
    }
    ratios = {"signals/update_ratio/l0": np.full(100, 1e-3), "signals/update_ratio/l1": np.full(100, 3e-3)}
    (slow,) = schedule(_schedule_run(loss, **ratios))
    assert (slow.confidence, slow.evidence["update_ratio_median"]) == (0.75, 2e-3)  # the median at the bar: not under
    low = {"signals/update_ratio/l0": np.full(100, 1e-3)}
    (lower,) = schedule(_schedule_run(loss, **low))
    assert (lower.confidence, lower.evidence["update_ratio_median"]) == (0.9, 1e-3)
    with pytest.raises(NotRun, match=r"^39 steps with a loss: the schedule needs at least 40$"):
        schedule(_schedule_run(loss[:39]))
