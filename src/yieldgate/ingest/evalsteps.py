"""Evaluation rows of a log, put where they belong before the rows are cleaned: at the training step they followed
when they count epochs, and without the -1 an evaluator writes for a score it did not compute.

OpenMMLab's `scalars.json` (MMEngine's LoggerHook) gives a training row `step` = the iteration and an evaluation row
`step` = the epoch: read as they are, the evaluations of epochs 1, 2, 3 land at steps 1, 2, 3, at the start of the
run, and the evaluation loop's own `time` / `data_time` make steps there that were never trained.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from yieldgate.aliases import IMPORTED
from yieldgate.ingest.types import Rows, Warnings
from yieldgate.names import cannot_be_negative

__all__ = ["epoch_evals", "not_computed"]

# What a row times, not what it learned: the evaluation loop's timing is not a training step's.
_TIMING = ("wall_s", "step_s", "data_wait_s")
_EPOCH = f"{IMPORTED}/epoch"


def _any(rows: Rows, names: Sequence[str]) -> np.ndarray:
    out = np.zeros(len(rows), dtype=bool)
    for name in names:
        out |= rows.present[name]
    return out


def epoch_evals(canon: Rows, eval_keys: Sequence[str], warnings: Warnings) -> None:
    """Evaluation rows (evaluations and timing only) that each step back from the training row before them in file
    order count epochs, not iterations: each is moved to that training row's step (the iteration that ended its
    epoch), and its timing columns are dropped (the evaluation loop's). Only when every such row steps back, and
    the training rows' `epoch` (where logged) is the evaluation's step, or else the evaluations' steps rise one by
    one; said in a warning."""
    if not eval_keys or len(canon) < 2:
        return
    others = [name for name in canon.values if name not in eval_keys and name not in _TIMING]
    trained = _any(canon, others)
    evaluated = _any(canon, eval_keys) & ~trained
    # the last training row before each row in file order (-1: none yet)
    last = np.maximum.accumulate(np.where(trained, np.arange(len(canon)), -1))
    before = np.concatenate([[-1], last[:-1]])
    at = np.nonzero(evaluated & (before >= 0))[0]
    if not len(at):
        return
    prev = before[at]
    epochs = canon.step[at]
    if not (epochs < canon.step[prev]).all():
        return
    if _EPOCH in canon.values and canon.present[_EPOCH][prev].all():
        if not (np.ceil(canon.values[_EPOCH][prev] - 1e-9) == epochs).all():
            return
    elif not (np.diff(epochs) > 0).all():
        return
    canon.step = canon.step.copy()
    canon.step[at] = canon.step[prev]
    for name in _TIMING:
        if name in canon.present:
            canon.present[name] = canon.present[name].copy()
            canon.present[name][at] = False
    warnings.add(
        "epoch-evals",
        f"{canon.where[at[0]]}: {len(at)} evaluation row(s) give their step in epochs (epoch {epochs[0]} after "
        f"training step {canon.step[prev[0]]}): each placed at the last training step before it, the iteration "
        "that ended its epoch; their own timing is the evaluation's, not a training step's",
    )


def not_computed(canon: Rows, eval_keys: Sequence[str], warnings: Warnings) -> None:
    """A -1 of a score that cannot be negative (AP, AR, accuracy, PCK, ...) is an evaluator's "not computed"
    (pycocotools' AP of an area range without objects, which OpenMMLab logs as `coco/bbox_mAP_s: -1.0`): absent
    there, one warning per metric."""
    for key in eval_keys:
        if not cannot_be_negative(key.rpartition("/")[2]):
            continue
        minus = canon.present[key] & (canon.values[key] == -1.0)
        if minus.any():
            canon.present[key] = canon.present[key] & ~minus
            warnings.add(
                "not-computed",
                f"{canon.where[int(np.argmax(minus))]}: {key} is -1 on {int(minus.sum())} row(s), an evaluator's "
                "'not computed' (e.g. no objects of that size): read as missing there",
            )
