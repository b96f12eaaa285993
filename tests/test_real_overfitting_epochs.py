"""Issue 35 item 10 on a real log: a multi-epoch fine-tune whose held-out loss jumps at each epoch boundary after its
best (tests/data/real/hf-bert-taami-checkpoint-5000-trainer_state.json: a BERT token classifier, 5 epochs of ~1052
steps, an evaluation every 50 steps). `diagnose` flags the overfitting from the best evaluation, and `yield` agrees:
the spans across the epoch boundaries after the best are negative beyond their noise band. The best step and the
boundaries are read from the raw file, never from yieldgate.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

STATE = Path(__file__).parent / "data" / "real" / "hf-bert-taami-checkpoint-5000-trainer_state.json"


def _raw() -> tuple[int, list[tuple[int, int]]]:
    """The step of the lowest eval_loss, and the first evaluation interval of each epoch after the first."""
    evals = [r for r in json.loads(STATE.read_text())["log_history"] if "eval_loss" in r]
    best = min(evals, key=lambda r: r["eval_loss"])["step"]
    # the evaluation that opens each epoch (the data repeats from there) and the one after it
    crossings = [
        (b["step"], c["step"])
        for a, b, c in zip(evals, evals[1:], evals[2:], strict=False)
        if math.floor(b["epoch"]) > math.floor(a["epoch"])
    ]
    return best, crossings


@pytest.mark.slow  # 100 evaluations imported, diagnosed and cut into tranches
def test_diagnose_and_yield_agree_on_overfitting_at_epoch_boundaries(cli):
    best, crossings = _raw()
    after = [c for c in crossings if c[0] >= best]
    assert best == 2000 and len(after) == 3  # epochs 3, 4 and 5 start after the best
    cli("import", "hf-trainer", str(STATE), "--run", "taami")
    (found,) = [f for f in cli.json("diagnose", "taami")["findings"] if f["cause"] == "overfitting"]
    assert found["evidence"]["best_step"] == best
    tranches = {(t["start_step"], t["end_step"]): t for t in cli.json("yield", "taami")}
    for span in after:  # the held-out loss jumps when the data repeats: a negative tranche
        assert tranches[span]["loss_end"] > tranches[span]["loss_start"] and tranches[span]["yield_per_kstep"] < 0
    # beyond the noise band at the starts of epochs 3 and 4; the smaller jump into epoch 5 is within it
    assert [tranches[span]["within_noise"] for span in after] == [False, False, True]
