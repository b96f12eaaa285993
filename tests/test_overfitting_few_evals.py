"""Issue 45, item 12: judgements on runs read from real logs. With only 2-4 held-out evaluations (a fine-tune evaluated
once an epoch), a held-out rise while the training loss falls is overfitting at a lower confidence, not a
`damaged_update` pinned on a one-batch blip that recovered five steps later; and a `stalled` finding never takes its
start from rows of an abandoned attempt or another run that the log mixes in. Rules tested on generated runs (the
answer flips when the rule is broken) and on the real Whisper fine-tunes of the corpus."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yieldgate.analysis.detectors import OVERFIT_MIN_EVALS, RunSignals
from yieldgate.analysis.learning_detectors import schedule
from yieldgate.analysis.overfitting import FEW_EVALS_RISE, overfitting
from yieldgate.analysis.spikes import loss_spikes
from yieldgate.ingest import ImportOptions, import_run

REAL = Path(__file__).parent / "data" / "real"


def _run(prop, n: int) -> None:
    settings(max_examples=n, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))(prop)()


def _evals(points: list[tuple[int, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        {"step": [p[0] for p in points], "task": "val", "metric": "loss", "value": [p[1] for p in points]}
    )


def _fine_tune(seed: int, steps: int, *, blip_at: int | None = None, fall: float = 0.6) -> pd.DataFrame:
    """A training loss that falls by `fall` over the run (noise 0.02), with a one-batch blip that is back at its
    level two steps later."""
    rng = np.random.default_rng(seed)
    step = np.arange(1, steps + 1)
    loss = 1.0 + fall * (1 - step / steps) + rng.normal(0, 0.02, steps)
    if blip_at is not None:
        loss[blip_at - 1] += 0.8
    return pd.DataFrame({"step": step, "loss": loss})


@st.composite
def few_evaluation_runs(draw) -> tuple[pd.DataFrame, list[tuple[int, float]], int]:
    """2-4 evaluations, evenly spaced; the best one before the last, each after it higher by 3-20%."""
    n = draw(st.integers(2, OVERFIT_MIN_EVALS - 1))
    best = draw(st.integers(0, n - 2))
    steps = 100 * n
    at = [100 * (i + 1) for i in range(n)]
    base = draw(st.floats(0.3, 2.0))
    values = [base * (1 + 0.05 * (best - i)) for i in range(best + 1)]  # falling to the best
    for _ in range(n - best - 1):
        values.append(values[best] * (1 + draw(st.floats(0.03, 0.2))))
    return _fine_tune(draw(st.integers(0, 99)), steps), list(zip(at, values, strict=True)), at[best]


@pytest.mark.parametrize("n", [10, pytest.param(300, marks=pytest.mark.slow)])
def test_a_rise_after_the_best_of_few_evaluations_while_training_falls_is_overfitting_at_lower_confidence(n):
    @given(few_evaluation_runs())
    def prop(run):
        steps, points, best = run
        (f,) = overfitting(RunSignals(steps=steps, evals=_evals(points)))
        assert (f.cause, f.detector, f.start_step) == ("overfitting", "heldout_rise_few", best)
        assert f.confidence <= 0.5 and "evaluate more often" in f.advice

    _run(prop, n)


@pytest.mark.parametrize("n", [10, pytest.param(300, marks=pytest.mark.slow)])
def test_no_few_evaluation_finding_without_the_rise_or_without_the_training_fall(n):
    """Each half of the rule flips the answer: a rise below the floor, or a training loss that did not fall."""

    @given(few_evaluation_runs(), st.booleans())
    def prop(run, flat_training):
        steps, points, best = run
        if flat_training:
            steps = _fine_tune(0, len(steps), fall=0.0)
        else:  # every evaluation after the best within the floor of it
            value = dict(points)[best]
            points = [(s, v if s <= best else value * (1 + FEW_EVALS_RISE / 2)) for s, v in points]
        assert overfitting(RunSignals(steps=steps, evals=_evals(points))) == []

    _run(prop, n)


def test_a_blip_that_recovered_is_not_blamed_for_the_held_out_rise_of_a_run_that_overfits():
    steps = _fine_tune(3, 300, blip_at=150)
    evals = _evals([(100, 1.00), (200, 1.05), (300, 1.10)])
    (spike,) = loss_spikes(RunSignals(steps=steps, evals=evals))
    assert (spike.cause, spike.start_step) == ("transient_spike", 150)
    assert spike.evidence["recovered_at"] is not None and spike.evidence["val_worse"] is False
    assert "overfitting" in spike.evidence["val_note"]
    (f,) = overfitting(RunSignals(steps=steps, evals=evals))
    assert (f.cause, f.start_step) == ("overfitting", 100)
    # The same held-out rise with a training loss that rose too is the spike's damage: the rule flips.
    rising = steps.assign(loss=steps["loss"] + np.where(steps["step"] > 150, 0.3, 0.0))
    (spike,) = [f for f in loss_spikes(RunSignals(steps=rising, evals=evals)) if f.start_step == 150]
    assert spike.cause == "damaged_update"


def _whisper_small_hi(ledger, evaluations: int) -> RunSignals:
    from yieldgate.analysis.diagnose import load_signals

    import_run(ledger, "hf-trainer", [str(REAL / "hf-whisper-small-hi-trainer_state.json")], ImportOptions(run="w"))
    sig = load_signals(ledger, "w")
    first = sorted(sig.evals["step"].unique())[:evaluations]
    return RunSignals(steps=sig.steps, evals=sig.evals[sig.evals["step"].isin(first)])


@pytest.mark.parametrize("evaluations", [2, 3, 4])
def test_the_real_whisper_fine_tune_evaluated_two_to_four_times_is_read_as_overfitting(ledger, evaluations):
    """The corpus' Whisper-small Hindi fine-tune overfits from its first evaluation (0.3075 at step 1000, then
    0.3558, 0.4214, 0.4519, 0.4679): cut to its first 2-4 evaluations it still reads as overfitting from step 1000."""
    (f,) = overfitting(_whisper_small_hi(ledger, evaluations))
    assert (f.detector, f.start_step) == ("heldout_rise_few", 1000)


def _consecutive_rises(name: str) -> list[float]:
    history = json.loads((REAL / name).read_text())["log_history"]
    values = [row["eval_loss"] for row in history if "eval_loss" in row]
    return [b / a - 1 for a, b in zip(values, values[1:], strict=False)]


def test_the_rise_floor_sits_between_a_plateau_and_a_run_that_overfits():
    """FEW_EVALS_RISE's evidence, recomputed from the raw files: the Whisper-tiny Norwegian fine-tune on its plateau
    (100 evaluations) never rises by as much from one evaluation to the next; the overfitting Whisper-small always
    does."""
    plateau = max(_consecutive_rises("hf-whisper-tiny-nb-trainer_state.json"))
    turned = _consecutive_rises("hf-whisper-small-hi-trainer_state.json")
    assert round(plateau, 4) == 0.0054 and plateau < FEW_EVALS_RISE
    assert all(r > FEW_EVALS_RISE for r in turned) and round(min(turned), 3) == 0.035


def _launch(rng: np.random.Generator, steps: int, peak: float, floor: float) -> list[str]:
    lines = []
    for s in range(1, steps + 1):
        loss = floor + 3.0 * np.exp(-s / 40) + rng.normal(0, 0.02)
        lines.append(f"step={s} loss={loss:.4f} lr={peak * min(1.0, s / 20):.6g}")
    return lines


def test_a_stalled_finding_never_starts_in_rows_another_launch_left_behind(ledger, tmp_path):
    """A log that holds a run to step 300 and, appended, a new launch from step 1 to 150 (another LR): the stored
    steps 151-300 are the first launch's. The plateau read on the spliced curve started at step 166."""
    from yieldgate.analysis.diagnose import load_signals

    rng = np.random.default_rng(0)
    log = tmp_path / "mixed.log"
    log.write_text("\n".join(_launch(rng, 300, 1e-3, 2.0) + _launch(rng, 150, 3e-4, 2.5)) + "\n")
    import_run(ledger, "textlog", [str(log)], ImportOptions(run="m"))
    sig = load_signals(ledger, "m")
    assert sig.final_step() == 150 and sig.steps["step"].max() == 300
    found = [f for f in schedule(sig) if f.cause == "stalled"]
    assert all(f.start_step <= 150 and f.end_step <= 150 for f in found)
    spliced = RunSignals(steps=sig.steps, evals=sig.evals)  # the same rows without the restart's record
    assert any(f.start_step > 150 for f in schedule(spliced) if f.cause == "stalled")  # what was read before
