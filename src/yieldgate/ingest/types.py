"""What the importers hand each other and what an import returns: a source's rows before mapping (`Rows`), what
an import found on the way (`Warnings`), a run's records on canonical names (`Mapped`) and what one import did
(`ImportResult`). Types only, importing no other importer: every importer and the guard read them from here (they
lived in clean.py and core.py, which import the modules that annotate with them, a type-only import circle)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.ledger import EvalRecord

__all__ = ["Rows", "Warnings", "Mapped", "ImportResult"]

# Warnings of one kind past this many are counted, not listed: a 1M-line log with a bad column must not
# print a million lines.
_LISTED = 5


@dataclass
class Warnings:
    """What an import found and did about it: one line each, the first few of each kind, then a count."""

    lines: list[str] = field(default_factory=list)
    _counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    restarts: list[dict[str, Any]] = field(default_factory=list)
    """Where the steps go back in file order (a run restarted from a checkpoint): the bodies of the `resume`
    events the import records (`_restarts`)."""
    reading: dict[str, str] = field(default_factory=dict)
    """How the source was read, by what was read (`step`, `clock`, `writers`, `restarts`): what `explain` shows."""

    def add(self, kind: str, message: str) -> None:
        """Record one finding of `kind`; beyond the first few of a kind only the count grows."""
        self._counts[kind] += 1
        if self._counts[kind] <= _LISTED:
            self.lines.append(message)

    def count(self, kind: str) -> int:
        """How many findings of `kind` were recorded (listed or not)."""
        return self._counts.get(kind, 0)

    def summary(self) -> list[str]:
        """The listed warnings, plus one line per kind that had more than could be listed."""
        more = [
            f"... and {n - _LISTED} more of the same kind ({kind})" for kind, n in self._counts.items() if n > _LISTED
        ]
        return self.lines + more


@dataclass
class Rows:
    """A run's records in file order, before mapping: one row per log line / record.

    `values[name]` holds floats and `present[name]` says where the source had the metric at all, so a
    recorded NaN stays apart from "not logged on this line".
    """

    source: str
    """The file (or store) read, for messages."""
    step: np.ndarray
    """int64 step of each row."""
    where: list[str]
    """Where each row came from (`train.log:17`, `events...:offset 1024`), for warnings."""
    values: dict[str, np.ndarray] = field(default_factory=dict)
    present: dict[str, np.ndarray] = field(default_factory=dict)
    epochs: bool = False
    """The steps count epochs, not optimizer steps: a per-epoch table (Keras' CSVLogger, YOLO's results.csv), a
    Keras `model.fit` log."""
    launch: np.ndarray | None = None
    """The launch (0, 1, ...) each row belongs to, where the source marks its launches (a banner a text log prints at
    each start, `textlog.launches`); None where it does not."""

    def __len__(self) -> int:
        return len(self.step)

    @classmethod
    def from_records(
        cls, source: str, steps: Sequence[int], where: Sequence[str], records: Sequence[dict[str, float]]
    ) -> Rows:
        """Rows from one {metric: value} dict per record (a metric missing from a dict is absent there)."""
        rows = cls(source, np.array(steps, dtype=np.int64), list(where))
        for name in dict.fromkeys(k for r in records for k in r):
            rows.present[name] = np.array([name in r for r in records], dtype=bool)
            rows.values[name] = np.array([r.get(name, np.nan) for r in records], dtype=np.float64)
        return rows

    def take(self, keep: np.ndarray) -> Rows:
        """The rows where `keep` (a bool mask or index array) selects."""
        where = [self.where[i] for i in np.arange(len(self))[keep]]
        return Rows(
            self.source,
            self.step[keep],
            where,
            {k: v[keep] for k, v in self.values.items()},
            {k: p[keep] for k, p in self.present.items()},
            self.epochs,
            self.launch[keep] if self.launch is not None else None,
        )


@dataclass
class Mapped:
    """A run's records on canonical names, ready for the ledger."""

    steps: pd.DataFrame
    """`step` plus core columns and extras, as nullable floats (<NA>: not logged; NaN: logged as nan)."""
    evals: list[EvalRecord]
    mapping: dict[str, str] = field(default_factory=dict)
    """Source name -> where it went (`loss`, `val/loss (eval)`, `imported/epoch`)."""
    restarts: list[dict[str, Any]] = field(default_factory=list)
    """The bodies of the `resume` events of this run's restarts (`stepback.restarts`)."""


@dataclass
class ImportResult:
    """What one import did: per run, rows and evals written, the mapping used and the warnings."""

    kind: str
    source: str
    run: str
    steps: int
    evals: int
    mapping: dict[str, str]
    warnings: list[str]
    unchanged: bool = False
    """True when this very source was already imported into the run: nothing was written."""
    set_apart: dict[str, int] | None = None
    """With `replace`: the run's records that the import set apart as superseded (`steps`, `extra_values`,
    `evals`; kept, read with `Ledger.superseded`); None when nothing was replaced."""
    kept: int = 0
    """With `attach`: values the run already held for a column at a step, kept instead of the imported ones."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
