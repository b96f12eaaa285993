"""The Hugging Face Trainer's console: its progress bar, then each log as a printed dict."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence

from yieldgate.ingest.textlog.base import Record, clock_seconds

__all__ = ["scan"]

# The Hugging Face Trainer's console: its progress bar, then each log as a printed dict, usually on the bar's own
# line: `  2%|▏   | 500/22184 [01:40<1:12:54,  4.96it/s]{'loss': 2.5609, 'learning_rate': 1.96e-05, 'epoch': 0.05}`
# (newer versions quote the values: `{'loss': '1.178', ...}`). An evaluation draws a bar of its own (its batches)
# before `{'eval_loss': ...}`; `{'train_runtime': ..., 'train_loss': ...}` at the end is the run's summary.
_HF_BAR = re.compile(
    r"(?<!\d)(?P<n>\d{1,15})/(?P<total>\d{1,15})\s*\[(?P<elapsed>\d+(?::\d+){1,2})<"
)  # once per digit run
_HF_LOG = re.compile(r"\{'(?P<first>loss|eval_[^']+|train_runtime)':[^{}]*\}")


def scan(lines: Sequence[str]) -> Iterator[Record]:
    """Each printed training log at the step its bar shows before it (the bar's elapsed time as wall_s), and each
    evaluation at the training bar's step: the bar whose total the first training log was printed under (an
    evaluation's own bar counts its batches). A log cut by a redrawn bar, and the summary, are not read."""
    total: int | None = None  # the training bar's total, once a training log told it apart
    last: re.Match[str] | None = None  # the last bar drawn
    trained: re.Match[str] | None = None  # the training bar's last state
    for i, line in enumerate(lines):
        log = _HF_LOG.search(line) if "{'" in line else None
        if log is None and "/" not in line:
            continue
        for bar in _HF_BAR.finditer(line, 0, log.start() if log else len(line)):
            last = bar
            if total is not None and int(bar["total"]) == total:
                trained = bar
        if log is None or last is None or log["first"] == "train_runtime":
            continue
        if log["first"] == "loss" and total is None:
            total, trained = int(last["total"]), last
        if trained is None:
            continue
        try:
            record = ast.literal_eval(log.group(0))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        values = {"step": float(trained["n"])}
        for key, value in record.items():
            try:
                values[str(key)] = float(value)
            except (TypeError, ValueError):
                continue
        if log["first"] == "loss":
            values["wall_s"] = clock_seconds(trained["elapsed"])
        yield i, 1, values
