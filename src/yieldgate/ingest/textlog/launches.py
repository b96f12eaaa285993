"""Launches appended to one log, told by the lines each launch prints before its first record.

A trainer that appends to its log prints the same start-up lines at every launch: pytorch-CycleGAN's `loss_log.txt`
opens each with `================ Training Loss (Mon Jan  1 00:00:00 2024) ================`. Such a line stands before
the log's first record, is no record itself, and comes again later with only its numbers and date words changed:
each time it does, a new launch begins (issue #45). The step alone tells most restarts (it goes back), but not a
launch that begins at the very step the one before stopped at (a launch that logged once, at the first logging
step, then another from the start): without the banner its record reads as the same step logged again and its
restart is lost. The banner is read only where it does this work; a line that comes again while the step runs on
(`Validation:` before each evaluation) marks nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["launches"]

# Dates change from launch to launch: a banner's numbers and its weekday and month names are masked.
_DATE_WORDS = re.compile(
    r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun|Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b", re.IGNORECASE
)
_NUMBER = re.compile(r"\d+")


def _shape(line: str) -> str:
    """The line with its numbers and date words masked: the same banner at every launch."""
    return " ".join(_NUMBER.sub("0", _DATE_WORDS.sub("D", line)).split())


def launches(
    lines: Sequence[str],
    first_lines: Sequence[int],
    used: np.ndarray,
    context: Callable[[str], object] | None = None,
) -> np.ndarray | None:
    """The launch (0, 1, ...) of each record (`first_lines`: the index of its first line) where the log prints a
    banner at each launch: a line that is no record (`used` false), stands before the first record, and comes again
    after records began; None where there is no such banner. A line that says which epoch begins (`context`) is no
    banner."""
    if not len(first_lines):
        return None
    start = int(first_lines[0])
    before = {
        _shape(line)
        for line in lines[:start]
        if line.strip() and (context is None or context(line.strip()) is None) and _shape(line)
    }
    if not before:
        return None
    again = [i for i in range(start + 1, len(lines)) if not used[i] and lines[i].strip() and _shape(lines[i]) in before]
    if not again:
        return None
    return np.searchsorted(np.array(again), np.asarray(first_lines), side="right").astype(np.int64)
