"""The stream-duplicate monitor's pure counter: how often the trainer sees a sample it saw recently.

A pipeline that loops over 200 examples still shows full GPU utilisation; only the sample ids (or content
hashes) the trainer actually receives reveal it. Used by the Tracker (`stream/repeat_rate`) and by diagnosis.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Hashable, Iterable

__all__ = ["RepeatCounter"]


class RepeatCounter:
    """Share of each batch's samples already seen among the last `window` samples.

    `update(ids)` returns the repeat rate of that batch (0 = all fresh, 1 = all seen in the window); a
    sample repeated inside the batch counts as seen from its second occurrence on.
    """

    def __init__(self, window: int = 100_000) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        self._order: deque[Hashable] = deque()
        self._counts: Counter[Hashable] = Counter()

    def update(self, ids: Iterable[Hashable]) -> float:
        seen = total = 0
        for sample in ids:
            total += 1
            if self._counts[sample]:
                seen += 1
            self._counts[sample] += 1
            self._order.append(sample)
            if len(self._order) > self.window:
                old = self._order.popleft()
                self._counts[old] -= 1
                if not self._counts[old]:
                    del self._counts[old]
        return seen / total if total else 0.0

    def reset(self) -> None:
        self._order.clear()
        self._counts.clear()
