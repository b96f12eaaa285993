"""`yieldgate diagnose`: tell data exhaustion and overfitting apart from a bad schedule, a damaged update or an
infrastructure stall, with evidence.

`diagnose(ledger, run)` reads the run (tracked or imported), runs every detector of `DETECTORS` on it,
records which could not run and why, and stores the findings as open `diagnosis` events (re-running
replaces what changed and leaves identical open findings alone, so nothing is duplicated). The detectors
are pure functions over plain data (`detectors.py`, `data_detectors.py`, `overfitting.py`, `learning_detectors.py`).

Online use (the Tracker): `online_findings(window)` runs the cheap detectors (spikes, non-finite values and
skipped steps, stalls) on a trailing window of step records, a DataFrame with `step` and the core columns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from yieldgate.analysis.data_detectors import (
    data_exhaustion,
    duplicated_stream,
    mixture_drift,
    non_iid_stream,
)
from yieldgate.analysis.detectors import (
    CAUSES,
    LOW_CONFIDENCE,
    Finding,
    NotRun,
    RunSignals,
    nonfinite_and_skipped,
    stall,
)
from yieldgate.analysis.learning_detectors import early_warnings, schedule, throughput_altered_learning, undertrained
from yieldgate.analysis.objective import not_cross_entropy
from yieldgate.analysis.overfitting import overfitting
from yieldgate.analysis.records import RunRecords, read_records, signals
from yieldgate.analysis.spikes import eval_spikes, loss_spikes
from yieldgate.ledger import Ledger
from yieldgate.manifest import Manifest
from yieldgate.util.hashing import content_hash

__all__ = [
    "DETECTORS",
    "ONLINE_DETECTORS",
    "Diagnosis",
    "diagnose",
    "diagnose_run",
    "load_signals",
    "cooldown_runs",
    "online_findings",
    "run_detectors",
    "data_order",
    "peer_losses",
    "CAUSES",
    "Finding",
    "LOW_CONFIDENCE",
]

Detector = Callable[[RunSignals], list[Finding]]

DETECTORS: dict[str, Detector] = {
    "loss_spikes": loss_spikes,
    "eval_spikes": eval_spikes,
    "nonfinite_and_skipped": nonfinite_and_skipped,
    "stall": stall,
    "schedule": schedule,
    "data_exhaustion": data_exhaustion,
    "overfitting": overfitting,
    "duplicated_stream": duplicated_stream,
    "non_iid_stream": non_iid_stream,
    "mixture_drift": mixture_drift,
    "undertrained": undertrained,
    "throughput_altered_learning": throughput_altered_learning,
    "early_warnings": early_warnings,
}
"""Every detector, by name (the name `not_run` entries use)."""

ONLINE_DETECTORS = ("loss_spikes", "nonfinite_and_skipped", "stall")
"""Cheap detectors that need only a trailing window of core step columns."""

MERGE_GAP = 10
"""Findings of one cause whose spans lie within this many steps are one finding (a NaN step and the skipped step
the loss scaler records for it)."""


@dataclass
class Diagnosis:
    """What `diagnose` found: findings (most confident first) and the detectors that could not run."""

    run: str
    findings: list[Finding] = field(default_factory=list)
    not_run: list[dict[str, str]] = field(default_factory=list)
    unmeasured: dict[str, str] = field(default_factory=dict)
    """Signals the run's Tracker could not record, with why (the run's `unmeasured` meta)."""
    notes: list[str] = field(default_factory=list)
    """What a reader of the findings must know of the run: its loss is not a cross-entropy (`objective`)."""

    def top(self, above: float = LOW_CONFIDENCE) -> Finding | None:
        """The most confident finding above `above` (default: above low confidence), or None."""
        return next((f for f in self.findings if f.confidence > above), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "findings": [f.to_dict() for f in self.findings],
            "not_run": list(self.not_run),
            "unmeasured": dict(self.unmeasured),
            "notes": list(self.notes),
        }


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per cause and nearby span: the most confident one's advice, every detector's evidence."""
    out: list[Finding] = []
    for f in sorted(findings, key=lambda f: (f.cause, f.start_step)):
        last = out[-1] if out else None
        if last is not None and last.cause == f.cause and f.start_step - last.end_step <= MERGE_GAP:
            lead, other = (last, f) if last.confidence >= f.confidence else (f, last)
            evidence = {
                **({lead.detector: lead.evidence} if "+" not in lead.detector else lead.evidence),
                **({other.detector: other.evidence} if "+" not in other.detector else other.evidence),
            }
            out[-1] = Finding(
                cause=f.cause,
                start_step=min(last.start_step, f.start_step),
                end_step=max(last.end_step, f.end_step),
                confidence=lead.confidence,
                evidence=evidence,
                advice=lead.advice,
                detector=f"{lead.detector}+{other.detector}",
            )
        else:
            out.append(f)
    return sorted(out, key=lambda f: (-f.confidence, f.start_step))


def run_detectors(sig: RunSignals, names: tuple[str, ...] | None = None, *, run: str = "") -> Diagnosis:
    """Run the named detectors (default: all) on plain data; pure (nothing is read or written)."""
    result = Diagnosis(run=run)
    found: list[Finding] = []
    for name in names or tuple(DETECTORS):
        try:
            found += DETECTORS[name](sig)
        except NotRun as why:
            result.not_run.append({"detector": name, "reason": str(why)})
    # A cause found by another detector (a plateau's cooldown naming the data) is not also "not run": the finding
    # keeps why its own detector could not run, and not_run lists only what nothing else answered.
    for f in found:
        for entry in [e for e in result.not_run if e["detector"] == f.cause]:
            f.evidence.setdefault("not_run", {})[entry["detector"]] = entry["reason"]
    answered = {f.cause for f in found}
    result.not_run = [e for e in result.not_run if e["detector"] not in answered]
    result.findings = _merge(found)
    return result


def online_findings(window: pd.DataFrame) -> list[Finding]:
    """The cheap detectors on a trailing window of step records (`step` and core columns such as loss,
    grad_norm, step_s, data_wait_s, tokens_per_s): what the Tracker can check while the run is going."""
    return run_detectors(RunSignals(steps=window.reset_index(drop=True)), ONLINE_DETECTORS).findings


def data_order(manifest: Manifest | None) -> str | None:
    """What fixes the order a run reads its data in: the manifest's data recipe and seed, hashed (None: no recipe or
    no seed, so the order is unknown)."""
    if manifest is None or manifest.data is None or manifest.seed is None:
        return None
    return content_hash({"data": manifest.data.model_dump(mode="json"), "seed": manifest.seed}, spaced=True)


def peer_losses(
    ledger: Ledger, run: str, against: Sequence[str] = (), manifest: Manifest | None = None
) -> dict[str, pd.Series]:
    """Training loss by step of the runs that read `run`'s data in the same order: those named in `against`, and
    those whose manifest has the same data recipe and seed (`data_order`; `manifest`: `run`'s, where read)."""
    names = set(against)
    order = data_order(manifest if manifest is not None else ledger.manifest(run))
    if order is not None:
        names |= {n for n in ledger.runs()["name"] if n != run and data_order(ledger.manifest(n)) == order}
    for name in names:
        ledger.run_id(name)  # an unknown run fails with its name
    return {n: ledger.steps(n, ["loss"]).set_index("step")["loss"] for n in sorted(names - {run})}


def cooldown_runs(ledger: Ledger, run: str) -> dict[str, pd.DataFrame]:
    """Step records (step, loss, lr) of the runs that continue `run` with the LR cooled down (meta `cooldown_of`)."""
    metas = ledger.run_metas()
    names = [n for n, meta in zip(metas["name"], metas["meta"], strict=True) if meta.get("cooldown_of") == run]
    return {n: ledger.steps(n, ["loss", "lr"]) for n in names}


def load_signals(ledger: Ledger, run: str, against: Sequence[str] = ()) -> RunSignals:
    """A run's steps (extras pivoted into columns), evals, manifest and notes, the training loss of the runs
    that read its data in the same order (`peer_losses`) and the runs that cool it down (`cooldown_runs`)."""
    return signals_of(ledger, read_records(ledger, run), against)


def signals_of(ledger: Ledger, records: RunRecords, against: Sequence[str] = ()) -> RunSignals:
    """`load_signals` of a run whose records are read (`records.read_records`): only its peers and cooldowns are."""
    run = records.name
    return signals(records, peer_losses(ledger, run, against, records.manifest), cooldown_runs(ledger, run))


def _key(body: dict[str, Any], start: Any, end: Any) -> tuple[Any, ...]:
    return (
        body.get("cause"),
        body.get("detector"),
        body.get("confidence"),
        None if start is None else int(start),
        None if end is None else int(end),
    )


def diagnose_signals(sig: RunSignals, run: str) -> Diagnosis:
    """Every detector on a run's signals, with what it did not measure and a note where its loss is not a
    cross-entropy: `diagnose` without reading or storing (pure)."""
    result = run_detectors(sig, run=run)
    result.unmeasured = dict(sig.meta.get("unmeasured", {}))
    logged = [*sig.steps.columns, *(f"{t}/{m}" for t, m in zip(sig.evals["task"], sig.evals["metric"], strict=True))]
    objective = not_cross_entropy(logged, sig.steps["loss"].to_numpy(dtype=float) if "loss" in sig.steps else None)
    if objective is not None:
        result.notes.append(
            f"the loss is not a cross-entropy ({objective}): it is the fine-tuning objective, which may fall or rise "
            "as the policy moves; read the findings on it as on that objective, not as learning per token"
        )
    return result


def diagnose(ledger: Ledger, run: str, *, against: Sequence[str] = (), store: bool = True) -> Diagnosis:
    """Diagnose `run` and (with `store`) keep its findings as open `diagnosis` events: an open finding that is
    found again is left as it is, one no longer found is resolved, a new one is added. `against`: other runs known
    to read the same data in the same order (runs with the same data recipe and seed are found without it); loss
    spikes they share at the same steps are put down to the data."""
    sig = load_signals(ledger, run, against)
    result = diagnose_signals(sig, run)
    if not store:
        return result
    with ledger.transaction():
        events = ledger.events(run, kind="diagnosis", state="open")
        open_by_key = {
            _key(b, s, e): int(i)
            for i, b, s, e in zip(events["id"], events["body"], events["start_step"], events["end_step"], strict=True)
            if b.get("source") == "diagnose"
        }
        for f in result.findings:
            body = {"source": "diagnose", **f.to_dict()}
            key = _key(body, f.start_step, f.end_step)
            if open_by_key.pop(key, None) is None:
                ledger.add_event(run, "diagnosis", body, start_step=f.start_step, end_step=f.end_step)
        for event_id in open_by_key.values():
            ledger.resolve_event(event_id)
    return result


def diagnose_run(location: str, run: str, *, against: Sequence[str] = (), store: bool = True) -> Diagnosis:
    """`diagnose` on the ledger at `location`."""
    with Ledger(location) as ledger:
        return diagnose(ledger, run, against=against, store=store)
