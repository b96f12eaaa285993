"""Keras' `model.fit` output, Keras 2's and Keras 3's: one line per epoch under an `Epoch N/M` header."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from yieldgate.ingest.textlog.base import NUM, Record, number

__all__ = ["scan"]

# Keras' `model.fit` output: an `Epoch 3/10` header, then the epoch's line: Keras 2 `3083s - loss: 1.7197 - acc:
# 0.5893 - val_loss: 0.3504 - val_acc: 0.8959` (or after a `[=====]` bar), Keras 3 `7/7 ━━━━━━━━━━━━━━━━━━━━ 7s
# 1s/step - accuracy: 0.5672 - loss: 0.6807 - val_accuracy: 0.5179 - val_loss: 0.6897`. The time before the first
# pair is the epoch's (per-batch times, `50us/step`, are left out); a bar still running (`ETA: 12s`) is not
# the epoch's line.
_KERAS_EPOCH = re.compile(r"^\s*Epoch (?P<epoch>\d+)/(?P<epochs>\d+)\s*$")
_KERAS_LINE = re.compile(
    rf"(?:^|\s)(?P<time>\d+(?:\.\d+)?)(?P<unit>ms|s)(?:\s+\S+/step)?\s+-\s+"
    rf"(?P<pairs>\w+: (?:{NUM})(?:\s+-\s+\w+: (?:{NUM}))*)\s*$"
)
_KERAS_PAIR = re.compile(rf"(\w+): ((?:{NUM}))")


def scan(lines: Sequence[str]) -> Iterator[Record]:
    """Each epoch's line, at step = the epochs run so far: a fit that starts again at `Epoch 1/N` (a second
    `fit` call, training on) is counted on from the last epoch of the one before."""
    epoch, offset, last, start = 0, 0, 0, 0  # epoch 0: no header yet
    for i, line in enumerate(lines):
        if (head := _KERAS_EPOCH.match(line)) is not None:
            if epoch and int(head["epoch"]) <= epoch:
                offset += last
            epoch, start = int(head["epoch"]), i
            continue
        m = _KERAS_LINE.search(line) if epoch and " - " in line and "ETA" not in line else None
        if m is None:
            continue
        values = {name: number(text) for name, text in _KERAS_PAIR.findall(m["pairs"])}
        if not any("loss" in name for name in values):
            continue
        values["step_s"] = number(m["time"]) * (1e-3 if m["unit"] == "ms" else 1.0)
        values["step"] = float(offset + epoch)
        last = epoch
        yield start, i - start + 1, values  # the header, what Keras printed under it, the epoch's line
