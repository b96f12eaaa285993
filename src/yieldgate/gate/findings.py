"""The gate's own diagnosis of the target's runs: nothing is approved undiagnosed.

The gate does not trust that someone ran `yieldgate diagnose`. It runs the same detectors on each of the target's
runs (`diagnose(store=False)`) and reads them beside the diagnoses already stored:

- a stored open diagnosis counts, as before;
- a finding of the detectors counts unless the team has answered it: a stored `diagnosis` event of the same cause
  over overlapping steps, marked resolved (`Ledger.resolve_event`), says the cause was looked at and set aside;
- the findings are kept in the decision's evidence (`diagnosed`), found or not, so the decision shows what was
  checked.

Detection is kept by the run's content (its steps, last step, tokens, last evaluation and update time, as the runs
listing reads them without loading a block): a second gate on unchanged runs, under another policy or after a hold,
runs no detector again.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from yieldgate.analysis.diagnose import diagnose_signals, signals_of
from yieldgate.analysis.records import RunRecords, read_records
from yieldgate.ledger import Ledger

__all__ = ["Findings", "run_findings", "target_findings"]

CACHE_RUNS = 256
"""Runs whose findings are kept in this process."""
_cache: OrderedDict[tuple[Any, ...], list[dict[str, Any]]] = OrderedDict()
_cache_lock = threading.Lock()

Findings = list[dict[str, Any]]
"""One dict per finding: run, cause, confidence, steps, advice, detector, evidence, and `event` (the stored
diagnosis event's id) or `source` "gate" (found by the gate's own run of the detectors)."""


def _content_key(ledger: Ledger, run: str) -> tuple[Any, ...] | None:
    """What changes when the run's records change (None: the run has no record to key on)."""
    records = ledger.run_records(run)
    if not records:
        return None
    r = records[0]
    where = ledger.location if not os.path.exists(str(ledger.location)) else os.path.realpath(str(ledger.location))
    fields = ("created_at", "updated_at", "steps", "last_step", "tokens", "last_eval_step", "last_eval_value")
    return (where, run, *(r[f] for f in fields))


def run_findings(ledger: Ledger, run: str, records: RunRecords | None = None, upto: int | None = None) -> Findings:
    """The detectors' findings on `run` (`diagnose` on its records, nothing stored), each as a plain dict, kept by
    the run's content; `records`: the run as read already (None: read here, only where the findings are not kept).
    `upto`: the run as it stood at that step (`RunRecords.upto`; `records`, where given, are cut there already)."""
    key = _content_key(ledger, run)
    key = None if key is None else (*key, upto)
    with _cache_lock:
        if key is not None and key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    read = records if records is not None else read_records(ledger, run)
    if upto is not None and records is None:
        read = read.upto(upto)
    diagnosis = diagnose_signals(signals_of(ledger, read), run)
    found = [{"run": run, "source": "gate", **f.to_dict()} for f in diagnosis.findings]
    if key is not None:
        with _cache_lock:
            _cache[key] = found
            while len(_cache) > CACHE_RUNS:
                _cache.popitem(last=False)
    return found


def _step(value: Any) -> int | None:
    """A stored start or end step: None where none was stored (NaN once pandas has read the column)."""
    return None if value is None or value != value else int(value)


def _steps(start: Any, end: Any) -> tuple[float, float]:
    lo, hi = _step(start), _step(end)
    return float("-inf") if lo is None else float(lo), float("inf") if hi is None else float(hi)


def _answered(finding: dict[str, Any], resolved: list[tuple[str, tuple[float, float]]]) -> bool:
    """A stored diagnosis of the same cause over overlapping steps was marked resolved."""
    lo, hi = _steps(finding.get("start_step"), finding.get("end_step"))
    return any(cause == finding["cause"] and a <= hi and lo <= b for cause, (a, b) in resolved)


def target_findings(ledger: Ledger, runs: Mapping[str, RunRecords | None], upto: int | None = None) -> Findings:
    """Every diagnosis of `runs` (run -> its records where read already, else None) that stands: the stored open
    ones, and the detectors' own findings that no stored diagnosis answers (neither an open one of the same cause and
    steps, nor a resolved one). `upto`: the runs as they stood at that step: diagnoses stored of later steps are left
    out (whether stored ones were resolved is read as it is now)."""
    out: Findings = []
    for run, read in runs.items():
        events = ledger.events(run, kind="diagnosis")
        if upto is not None:
            events = events[~(events["start_step"] > upto)]  # a diagnosis without a start step stands
        stored = list(
            zip(events["id"], events["body"], events["start_step"], events["end_step"], events["state"], strict=True)
        )
        resolved = [(b.get("cause"), _steps(s, e)) for _, b, s, e, state in stored if state != "open"]
        opened = set()
        for eid, body, start, end, state in stored:
            if state != "open" or "cause" not in body:
                continue
            opened.add((body["cause"], _step(start), _step(end)))
            out.append(
                {
                    "run": run,
                    "event": int(eid),
                    "cause": body["cause"],
                    "confidence": body.get("confidence"),
                    "start_step": _step(start),
                    "end_step": _step(end),
                    "detector": body.get("detector"),
                    "advice": body.get("advice", ""),
                    "evidence": body.get("evidence", {}),
                }
            )
        for f in run_findings(ledger, run, read, upto):
            if (f["cause"], f.get("start_step"), f.get("end_step")) in opened or _answered(f, resolved):
                continue
            out.append(f)
    return out
