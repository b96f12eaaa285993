"""The first `Tracker.eval` costs about what later ones cost (issue #32 item 8): nothing is imported on the training
thread at that call. It imported `yieldgate.aliases` there (30-120 ms); the direct timing is
`benchmarks/bench_tracker.py`'s "first tr.eval" line, too noisy on a loaded machine for a test."""

from __future__ import annotations

import sys

from yieldgate.ledger import Ledger
from yieldgate.track.tracker import Tracker


def test_the_first_eval_imports_nothing_on_the_training_thread(tmp_path):
    db = tmp_path / "l.db"
    tr = Tracker(run="r", ledger=db)
    for _ in range(3):
        tr.step(tokens=100, loss=1.0)
    # As in a fresh process: the aliases module not loaded yet (put back afterwards, whatever happens).
    kept = sys.modules.pop("yieldgate.aliases")
    try:
        before = set(sys.modules)
        tr.eval({"val_loss": 2.5, "val/acc": 0.5})  # an alias (read through `guess`) and a plain key
        imported = set(sys.modules) - before
    finally:
        sys.modules["yieldgate.aliases"] = kept
    tr.close()
    assert imported == set(), imported
    with Ledger(db, readonly=True) as led:
        assert sorted(zip(led.evals("r")["task"], led.evals("r")["metric"], strict=True)) == [
            ("val", "acc"),
            ("val", "loss"),
        ]
