"""What the HTML report shows, as plain data: the runs it covers and its tables.

`collect` reads the ledger once per run; the figures (`figures/`) and the page (`html.py`) only render
what it returns. Nothing here writes to the ledger.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis.compare import Comparison, RunData, compare, run_curve
from yieldgate.analysis.confounders import unit_for
from yieldgate.analysis.diagnose import diagnose
from yieldgate.analysis.frontier import Frontier, frontier
from yieldgate.analysis.listing import match_runs
from yieldgate.analysis.load import default_metric, load_run, metric_key
from yieldgate.analysis.runs import yield_report
from yieldgate.analysis.waste import Waste, waste
from yieldgate.analysis.yields import YieldReport
from yieldgate.errors import InputError, RunNotFound
from yieldgate.ledger import Ledger
from yieldgate.manifest import diff

__all__ = ["RunView", "ReportData", "ReportResult", "collect", "tokens_at_steps"]


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
    """Learning-signal extras in long form (step, key, value): `signals/gns`, `signals/gns/<layer>`,
    `signals/update_ratio/<layer>`, `signals/loss_scale`."""
    diagnoses: pd.DataFrame
    """The run's diagnosis events (the ledger's `events` frame)."""
    waste: Waste | None = None
    """What the run spent on work that bought no learning (`yieldgate waste`); None without a clock or yields."""
    found: list[dict[str, Any]] | None = None
    """What `yieldgate diagnose` finds on the run now (`Finding.to_dict`, the detectors run without storing); None
    where `collect` was not asked to run them (the dashboard's live pages)."""

    @property
    def diagnosis_count(self) -> int:
        """The run's diagnoses as `yieldgate diagnose` would leave them open: what its detectors find now, and the
        open ones it does not manage (the Tracker's online detectors', an import's); the stored open ones where the
        detectors were not run. A run never diagnosed counted 0 while `diagnose` found it overfitting."""
        events = self.diagnoses
        is_open = events["state"] == "open" if len(events) else pd.Series(dtype=bool)
        if self.found is None:
            return int(is_open.sum())
        others = [b for b, o in zip(events["body"], is_open, strict=True) if o and _source(b) != "diagnose"]
        return len(self.found) + len(others)

    def unstored(self) -> list[dict[str, Any]]:
        """The findings of `found` that no open stored diagnosis holds (same cause and steps): found now, never kept."""
        events = self.diagnoses
        held = (
            {
                (_body(b).get("cause"), _int(a), _int(z))
                for b, a, z, state in zip(
                    events["body"], events["start_step"], events["end_step"], events["state"], strict=True
                )
                if state == "open"
            }
            if len(events)
            else set()
        )
        return [f for f in self.found or [] if (f["cause"], f["start_step"], f["end_step"]) not in held]


def _body(body: Any) -> dict[str, Any]:
    return body if isinstance(body, dict) else {}


def _source(body: Any) -> Any:
    return _body(body).get("source")


def _int(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


@dataclass
class ReportResult:
    """What `write_report` wrote: the file, the runs it covers, its plots, and any PNG files."""

    path: str
    runs: list[str]
    figures: list[str]
    pngs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    per: str = "token"
    """The unit the report drew in: `token`, or `byte` (bits per byte)."""
    frontier: dict[str, Any] | None = None
    """With two runs or more: each run's tokens/s and tokens to target, the Pareto front (`Frontier.to_dict`)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ReportData:
    """Everything the report renders: runs, comparisons, diagnoses, decisions, manifest diff, notes."""

    patterns: list[str]
    metric: str
    """The metric drawn: the one asked for, in bits per byte (`val/bpb`) when `per` is `byte`."""
    runs: list[RunView]
    comparisons: list[Comparison] = field(default_factory=list)
    decisions: pd.DataFrame | None = None
    manifest_diff: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    per: str = "token"
    """`token`, or `byte`: losses in bits per byte and the token axes in bytes (`analysis.points.to_per_byte`)."""
    frontier: Frontier | None = None
    """With two runs or more: tokens/s against tokens to the target, the Pareto front (`analysis.frontier`)."""

    @property
    def amount(self) -> str:
        """What the token axes count: `tokens`, or `bytes` per byte."""
        return "bytes" if self.per == "byte" else "tokens"


def tokens_at_steps(steps: pd.DataFrame, at: Any) -> np.ndarray:
    """Accepted tokens at these steps, linear between recorded steps (a diagnosis span, an extra's step)."""
    known = steps[["step", "tokens"]].dropna()
    at = np.asarray(at, dtype=float)
    if known.empty:
        return np.full(at.shape, np.nan)
    return np.interp(at, known["step"].to_numpy(dtype=float), known["tokens"].to_numpy(dtype=float))


def _signals(ledger: Ledger, run: str) -> pd.DataFrame:
    keys = [
        k
        for k in ledger.extra_keys(run)
        if k in ("signals/gns", "signals/loss_scale") or k.startswith(("signals/update_ratio/", "signals/gns/"))
    ]
    return ledger.extras(run, keys or ["signals/gns"])  # an absent key reads as an empty frame


LOSSES = ("val/loss", "val/bpb")
"""The metrics whose yields the report's waste section reads (`yieldgate waste` follows the validation loss)."""


def _view(ledger: Ledger, data: RunData, metric: str, per: str, notes: list[str], detect: bool) -> RunView:
    """One run read once: its curve, its yields (`yield_report`, what `yieldgate yield` prints), signals, diagnoses,
    and with `detect` what `yieldgate diagnose` finds now. `metric` as drawn (`val/bpb` per byte)."""
    task, metric_name = metric_key(metric, per)
    curve = run_curve(data, task, metric_name)
    yields = None
    if len(curve) >= 2:
        yields = yield_report(ledger, data.name, metric=metric, per=per, data=data)
    else:
        notes.append(f"run {data.name!r} has {len(curve)} evaluation(s) of {metric}: no curve or yields drawn for it")
    return RunView(
        name=data.name,
        data=data,
        curve=curve,
        yields=yields,
        waste=None
        if yields is None or metric not in ("val/loss", "val/bpb")
        else waste(ledger, data.name, report=yields),
        signals=_signals(ledger, data.name),
        diagnoses=ledger.events(data.name, kind="diagnosis"),
        found=[f.to_dict() for f in diagnose(ledger, data.name, store=False).findings] if detect else None,
    )


def _comparisons(
    groups: list[tuple[str, list[RunView]]], task: str, metric_name: str, notes: list[str]
) -> list[Comparison]:
    """Every later group against the first (the reference), where both sides have curves to align."""
    (ref_name, ref), out = groups[0], []
    for name, group in groups[1:]:
        try:
            out.append(
                compare(
                    [v.data for v in ref],
                    [v.data for v in group],
                    names=(ref_name, name),
                    task=task,
                    metric=metric_name,
                )
            )
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


def _matching(ledger: Ledger, pattern: str) -> list[str]:
    """`match_runs`, without listing every run of the ledger when `pattern` is a run's exact name (a run page:
    0.13 s at 1,000 runs)."""
    try:
        ledger.run_id(pattern)
    except RunNotFound:
        return match_runs(ledger, pattern)
    return [pattern]


def collect(
    ledger: Ledger,
    patterns: list[str],
    *,
    metric: str = "val/loss",
    per: str | None = None,
    target: float | None = None,
    detect: bool = False,
) -> ReportData:
    """Read what the report shows of the runs matching `patterns` (names or globs; each pattern is one group
    of seeds, and every later group is compared with the first), each run once. `per`: `token` or `byte`; None
    chooses (`confounders.unit_for`): bytes when the runs' tokenizers differ. `target`: the metric's value the frontier
    measures tokens to (None: the worst best across the runs). `detect`: also run `diagnose`'s detectors on each run
    (without storing), so the page counts what `yieldgate diagnose` finds, not only what was stored."""
    if not patterns:
        raise InputError("give at least one run name or pattern, e.g. `yieldgate report 'bs64-seed*'`")
    notes: list[str] = []
    names = {p: _matching(ledger, p) for p in dict.fromkeys(patterns)}
    everyone = list(dict.fromkeys(n for found in names.values() for n in found))
    if per is None:
        per, note = unit_for({n: ledger.manifest(n) for n in everyone})
        notes += [note] if note else []
    loaded = {n: load_run(ledger, n, per=per) for n in everyone}
    metric, note = default_metric(loaded[everyone[0]], metric, per)
    if note:  # a run without val/loss: its held-out loss, a capability, or its training loss, said so
        notes.append(note)
    task, metric_name = metric_key(metric, per)
    shown = f"{task}/{metric_name}" if task else metric_name
    views = {n: _view(ledger, loaded[n], shown, per, notes, detect) for n in everyone}
    groups = [(p, [views[n] for n in names[p]]) for p in patterns]
    runs = list(views.values())
    comparisons = _comparisons(groups, task, metric_name, notes) if len(groups) > 1 else []
    front = None
    if len(runs) > 1:
        try:
            front = frontier([v.data for v in runs], target=target, task=task, metric=metric_name)
        except InputError as exc:
            notes.append(f"no frontier: {exc}")
    return ReportData(
        patterns=list(patterns),
        metric=shown,
        runs=runs,
        comparisons=comparisons,
        decisions=_decisions(ledger, patterns, everyone),
        manifest_diff=_manifest_diff(runs, notes),
        notes=notes,
        per=per,
        frontier=front,
    )
