"""What the HTML report shows, as plain data: the runs it covers and its tables.

`collect` reads the ledger once per run; the figures (`figures.py`) and the page (`html.py`) only render
what it returns. Nothing here writes to the ledger.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis.compare import Comparison, RunData, compare, run_curve
from yieldgate.analysis.runs import default_metric, load_run, match_runs, metric_key, yield_report
from yieldgate.analysis.yields import YieldReport
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger
from yieldgate.manifest import diff

__all__ = ["RunView", "ReportData", "collect", "tokens_at_steps"]

@dataclass
class RunView:
    """One run as the report draws it, read once from the ledger."""

    name: str
    data: RunData
    """Steps, evals, manifest and FLOPs/token (what the analysis functions take)."""
    curve: pd.DataFrame
    """The run's evaluations of the report's metric with every axis (tokens, wall_s, cost_usd, ...)."""
    yields: YieldReport | None
    """Tranche, per-source and capability yields; None when the run has too few evaluations."""
    signals: pd.DataFrame
    """Learning-signal extras in long form (step, key, value): `signals/gns`, `signals/update_ratio/<layer>`."""
    diagnoses: pd.DataFrame
    """The run's diagnosis events (the ledger's `events` frame)."""


@dataclass
class ReportData:
    """Everything the report renders: runs, comparisons, diagnoses, decisions, manifest diff, notes."""

    patterns: list[str]
    metric: str
    runs: list[RunView]
    comparisons: list[Comparison] = field(default_factory=list)
    decisions: pd.DataFrame | None = None
    manifest_diff: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def tokens_at_steps(steps: pd.DataFrame, at: Any) -> np.ndarray:
    """Accepted tokens at these steps, linear between recorded steps (a diagnosis span, an extra's step)."""
    known = steps[["step", "tokens"]].dropna()
    at = np.asarray(at, dtype=float)
    if known.empty:
        return np.full(at.shape, np.nan)
    return np.interp(at, known["step"].to_numpy(dtype=float), known["tokens"].to_numpy(dtype=float))


def _signals(ledger: Ledger, run: str) -> pd.DataFrame:
    keys = [k for k in ledger.extra_keys(run) if k == "signals/gns" or k.startswith("signals/update_ratio/")]
    return ledger.extras(run, keys or ["signals/gns"])  # an absent key reads as an empty frame


def _view(ledger: Ledger, name: str, metric: str, notes: list[str]) -> RunView:
    data = load_run(ledger, name)
    task, metric_name = metric_key(metric, "token")
    curve = run_curve(data, task, metric_name)
    yields = None
    if len(curve) >= 2:
        yields = yield_report(ledger, name, metric=metric)
    else:
        notes.append(f"run {name!r} has {len(curve)} evaluation(s) of {metric}: no curve or yields drawn for it")
    return RunView(name=name, data=data, curve=curve, yields=yields, signals=_signals(ledger, name),
                   diagnoses=ledger.events(name, kind="diagnosis"))


def _comparisons(groups: list[tuple[str, list[RunView]]], metric: str, notes: list[str]) -> list[Comparison]:
    """Every later group against the first (the reference), where both sides have curves to align."""
    task, metric_name = metric_key(metric, "token")
    (ref_name, ref), out = groups[0], []
    for name, group in groups[1:]:
        try:
            out.append(compare([v.data for v in ref], [v.data for v in group], names=(ref_name, name),
                               task=task, metric=metric_name))
        except InputError as exc:
            notes.append(f"no comparison of {name!r} with {ref_name!r}: {exc}")
    return out


def _manifest_diff(runs: list[RunView], notes: list[str]) -> list[dict[str, Any]]:
    """The fields in which any run's manifest differs from the first run's: one row per field, one value per run."""
    with_manifest = [v for v in runs if v.data.manifest is not None]
    lacking = [v.name for v in runs if v.data.manifest is None]
    if lacking:
        notes.append(f"no manifest for {', '.join(map(repr, lacking))}: left out of the manifest diff")
    if len(with_manifest) < 2:
        return []
    ref = with_manifest[0]
    per_run = {v.name: {d.field: d for d in diff(ref.data.manifest, v.data.manifest)} for v in with_manifest[1:]}  # type: ignore[arg-type]
    fields = sorted({f for diffs in per_run.values() for f in diffs})
    rows = []
    for f in fields:
        ref_value = next(d[f].a for d in per_run.values() if f in d)
        values = {ref.name: ref_value}
        values.update({name: (d[f].b if f in d else ref_value) for name, d in per_run.items()})
        rows.append({"field": f, "values": values})
    return rows


def _decisions(ledger: Ledger, patterns: list[str], names: list[str]) -> pd.DataFrame:
    """Gate decisions whose target is one of the runs or matches one of the patterns."""
    frame = ledger.decisions()
    keep = [t in names or any(fnmatch.fnmatchcase(t, p) or t == p for p in patterns) for t in frame["target"]]
    return frame[keep].reset_index(drop=True) if len(frame) else frame


def collect(ledger: Ledger, patterns: list[str], *, metric: str = "val/loss") -> ReportData:
    """Read what the report shows of the runs matching `patterns` (names or globs; each pattern is one group
    of seeds, and every later group is compared with the first)."""
    if not patterns:
        raise InputError("give at least one run name or pattern, e.g. `yieldgate report 'bs64-seed*'`")
    notes: list[str] = []
    groups: list[tuple[str, list[RunView]]] = []
    seen: dict[str, RunView] = {}
    metric, note = default_metric(load_run(ledger, match_runs(ledger, patterns[0])[0]), metric)
    if note:  # a run without val/loss: its held-out loss, a capability, or its training loss, said so
        notes.append(note)
    for pattern in patterns:
        views = []
        for name in match_runs(ledger, pattern):
            if name not in seen:
                seen[name] = _view(ledger, name, metric, notes)
            views.append(seen[name])
        groups.append((pattern, views))
    runs = list(seen.values())
    comparisons = _comparisons(groups, metric, notes) if len(groups) > 1 else []
    return ReportData(patterns=list(patterns), metric=metric, runs=runs, comparisons=comparisons,
                      decisions=_decisions(ledger, patterns, list(seen)), manifest_diff=_manifest_diff(runs, notes),
                      notes=notes)

