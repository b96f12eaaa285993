"""The three figures of every decision on the console, a probe campaign's (`report.console.campaign`) and a replayed
table's (`report.console.results`) alike: accuracy over all pairs, accuracy over the pairs decided beyond noise, and
coverage (the share of pairs decided)."""

from __future__ import annotations

from typing import Any

__all__ = ["decision_figures", "pct"]


def pct(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"


def decision_figures(e: dict[str, Any]) -> str:
    """A `ranking.decision_accuracy` entry's three figures: accuracy over all pairs (with its standard error over
    pairs where stored), over the pairs decided beyond noise, and coverage; `decided pairs: none` where no noise was
    measured (a summary stored before coverage was has its abstention, read as 1 - coverage)."""
    se = e.get("accuracy_stderr")
    line = f"all pairs {pct(e['accuracy'])}" + (f" ± {se:.1%}" if se is not None else "") + f" of {e['pairs']:,}"
    coverage = e.get("coverage", None if e.get("abstained") is None else 1 - e["abstained"])
    if e.get("decided_pairs") is None or coverage is None:
        return line + "; decided pairs: none (no noise measured); coverage -"
    return line + f"; decided pairs {pct(e['accuracy_decided'])} of {e['decided_pairs']:,}; coverage {coverage:.0%}"
