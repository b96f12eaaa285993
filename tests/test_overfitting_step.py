"""Overfitting at an epoch boundary (issue #35, item 10): a multi-epoch fine-tune whose training loss drops where the
data repeats while its held-out loss jumps and stays up, with few evaluations after the best. `diagnose` and `yield`
read the step against the same evaluation noise, so they agree; the training loss's fall is judged on its smoothed
level, not against one batch's noise. Runs that do not overfit get no finding."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from yieldgate.analysis.detectors import RunSignals
from yieldgate.analysis.diagnose import DETECTORS

overfitting = DETECTORS["overfitting"]


def epoch_run(
    seed: int = 0,
    *,
    epochs: int = 2,
    per_epoch: int = 400,
    evals_per_epoch: int = 4,
    batch_noise: float = 0.08,
    train_step: float = 0.3,
    val_step: float = 0.1,
    val_noise: float = 0.004,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Training rows every 10 steps and held-out evaluations `evals_per_epoch` times an epoch. Each new epoch lowers
    the training loss by `train_step` (the repeated data is memorised) and lifts the held-out loss by `val_step`,
    which then stays flat: best at the end of the first epoch."""
    rng = np.random.default_rng(seed)
    total = epochs * per_epoch
    step = np.arange(10, total + 1, 10)
    epoch = (step - 1) // per_epoch
    loss = 1.2 + 0.6 * np.exp(-step / 100) - train_step * epoch + rng.normal(0, batch_noise, len(step))
    lr = 2e-4 * (1 - step / total) + 1e-7
    at = np.arange(per_epoch // evals_per_epoch, total + 1, per_epoch // evals_per_epoch)
    val = 1.3 + 0.5 * np.exp(-at / 100) + val_step * ((at - 1) // per_epoch) + rng.normal(0, val_noise, len(at))
    steps = pd.DataFrame({"step": step, "loss": loss, "lr": lr, "imported/epoch": step / per_epoch})
    evals = pd.DataFrame({"step": at, "task": "val", "metric": "loss", "value": val})
    return steps, evals


def _trainer_state(path: Path, steps: pd.DataFrame, evals: pd.DataFrame) -> Path:
    """The run as a Hugging Face Trainer writes it (`trainer_state.json`'s log_history), for the CLI."""
    rows = [
        {"epoch": e, "learning_rate": lr, "loss": loss, "step": int(s)}
        for s, loss, lr, e in zip(steps["step"], steps["loss"], steps["lr"], steps["imported/epoch"], strict=True)
    ]
    epoch_at = dict(zip(steps["step"], steps["imported/epoch"], strict=True))
    rows += [
        {"epoch": epoch_at[s], "eval_loss": v, "step": int(s)}
        for s, v in zip(evals["step"], evals["value"], strict=True)
    ]
    rows.sort(key=lambda r: (r["step"], "eval_loss" in r))
    path.write_text(json.dumps({"global_step": int(steps["step"].max()), "log_history": rows}))
    return path


def test_a_held_out_step_at_an_epoch_boundary_is_overfitting_where_yield_calls_it_a_loss(cli, tmp_path):
    """Two epochs evaluated four times each: the held-out loss is best at the end of the first (step 400), jumps by
    ~0.08 at the next evaluation and stays there; the training loss drops by 0.3 at the boundary. `yield` calls the
    tranche after the best negative beyond its noise band; `diagnose` says overfitting from step 400."""
    steps, evals = epoch_run()
    cli("import", "hf-trainer", str(_trainer_state(tmp_path / "trainer_state.json", steps, evals)), "--run", "ft")
    tranches = {t["start_step"]: t for t in cli.json("yield", "ft")}
    after_best = tranches[400]
    assert after_best["loss_end"] > after_best["loss_start"] and after_best["within_noise"] is False
    assert after_best["band"][1] < 0  # the improvement's band lies below zero: a loss beyond noise
    found = [f for f in cli.json("diagnose", "ft")["findings"] if f["cause"] == "overfitting"]
    assert len(found) == 1, found
    (f,) = found
    assert f["detector"] == "heldout_step" and f["start_step"] == 400 and f["end_step"] == 800
    ev = f["evidence"]
    assert ev["best_step"] == 400 and ev["evaluations_after_best"] == 4 and ev["epochs"] == 2.0
    # The step is read in yield's own terms: the same noise and level, hence the same band on the jump.
    assert np.allclose(ev["val_jump_band"], [-after_best["band"][1], -after_best["band"][0]], atol=1e-4)
    assert ev["level"] == 0.9 and ev["train_loss_drop_after_best"] > 3 * ev["train_drop_se"]
    assert "step 400" in f["advice"] and "stayed up" in f["advice"]
    assert f["confidence"] >= 0.6  # two epochs: the data repeated


def test_the_training_loss_fall_is_judged_on_its_smoothed_level_not_one_batch(tmp_path):
    """Three epochs, the held-out loss rising a step each epoch, the training loss falling 0.3 per epoch under 0.3 of
    per-batch scatter: the means of the logged loss before the best and at the end tell the fall (0.6, many standard
    errors), which two rolling medians of six values each, set against one batch's noise, did not."""
    for seed in range(3):
        steps, evals = epoch_run(seed, epochs=3, batch_noise=0.3)
        (f,) = overfitting(RunSignals(steps=steps, evals=evals))
        assert f.start_step == 400 and f.evidence["train_loss_drop_after_best"] > 0.45, f.evidence
        assert f.evidence["train_loss_drop_after_best"] > 3 * f.evidence["train_drop_se"]


def test_runs_that_do_not_overfit_get_no_overfitting_finding():
    """The boundary: no held-out step (the held-out loss keeps falling slowly), a single bad evaluation after the
    best (a spike, not a step: every evaluation after the best must stay up), and a held-out step that the training
    loss shares (an instability, not memorisation)."""
    for seed in range(10):
        steps, evals = epoch_run(seed, val_step=0.0)
        assert overfitting(RunSignals(steps=steps, evals=evals)) == [], seed
    # One bad evaluation after the best (a spike), the curve back on its way down after it: no step, no turn.
    for seed in range(10):
        steps, evals = epoch_run(seed, val_step=0.0)
        evals.loc[4, "value"] += 0.1
        assert overfitting(RunSignals(steps=steps, evals=evals)) == [], seed
    # The training loss jumps up with the held-out loss at the boundary: the run broke, it did not memorise.
    steps, evals = epoch_run(train_step=-0.3)
    assert overfitting(RunSignals(steps=steps, evals=evals)) == []
