"""Several records of one epoch that print no count within it: the steps count epochs.

A loop that prints its loss a few times an epoch with only the epoch beside it (`Epoch: 3| train loss: 0.41`, ten
times an epoch; `Epoch 3 - Batch loss: 0.52`, every batch) gives each record the epoch as its step, and no count
places the records inside it. Read as they are, each epoch's records are one step logged again and again (hundreds
of warnings, or, where two values repeat, a "second writer"), and the run is said to count optimizer steps while it
counts epochs. Read by the structure (issue #45): such records are the epoch's, in order, and the last is its value
at the epoch's end (a running mean's is the epoch's mean); the steps count epochs, and the import says so once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from yieldgate.ingest.types import Warnings

__all__ = ["last_of_each_epoch"]

Column = tuple[np.ndarray, np.ndarray]

_REPEATED = 0.5  # the share of a kind's consecutive records that repeat their epoch for the epoch to hold several


def _kinds(columns: Mapping[str, Column], n: int) -> np.ndarray:
    """Each record's kind: which columns it has, as one integer."""
    if not columns:
        return np.zeros(n, dtype=np.int64)
    has = np.column_stack([present for _, (_, present) in sorted(columns.items())])
    return np.unique(has, axis=0, return_inverse=True)[1].reshape(-1)


def last_of_each_epoch(
    columns: Mapping[str, Column],
    step_name: str,
    epoch: Column | None,
    where: Sequence[str],
    warnings: Warnings,
) -> np.ndarray | None:
    """Where the step is the epoch (`epoch`: the epoch counter the records printed, None where none did) and most
    records of a kind repeat the epoch of the record of that kind before them: which records to keep (the last of each
    run of one epoch, per kind), said in a warning; None where this is not so."""
    if epoch is None or step_name not in columns:
        return None
    step, placed = columns[step_name]
    values, present = epoch
    if not present.any() or not (present | ~placed).all():
        return None  # a record without the epoch: the epoch is not what places every record
    if not np.array_equal(step[present], values[present]):
        return None  # the step is a count of its own, not the epoch
    kind = _kinds({k: v for k, v in columns.items() if k != step_name}, len(step))
    keep = np.ones(len(step), dtype=bool)
    repeats, pairs, several = 0, 0, 0
    for k in np.unique(kind).tolist():
        rows = np.nonzero(kind == k)[0]
        same = step[rows][1:] == step[rows][:-1]
        repeats, pairs = repeats + int(same.sum()), pairs + len(same)
        keep[rows[:-1][same]] = False
        several = max(several, len(rows))
    if pairs == 0 or repeats < _REPEATED * pairs:
        return None
    epochs = len(np.unique(step[present]))
    warnings.add(
        "epoch-records",
        f"{where[0]}: {several:,} records print the epoch and no count within it (about {round(several / epochs)} an "
        "epoch): each epoch is read at its last record, and the steps count epochs",
    )
    warnings.reading["step"] = "the epoch each record prints (several an epoch, no count within it: each at its last)"
    return keep
