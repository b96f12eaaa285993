"""The evidence one gate call decides on, read once (`TargetEvidence.read`): the target's runs, each read once
(`analysis.records.read_records`) and handed to pure functions as `RunData` and `RunSignals`; their budgets and
manifests; the diagnoses that stand on them, and the conditions every recipe of their campaign shares; the earlier
approvals of the target (the workflow lock); the new-hardware exception's reading and the mixture regression cited.

One gate call went back and forth between `gate/` and `analysis/` and read a run's steps six times (the detectors,
the forecast's stable points, tokens/s, the stage price, joules per token, the regression check); a test counts the
reads now (tests/test_gate_rules.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from yieldgate.analysis.compare import RunData
from yieldgate.analysis.records import RunRecords, read_records, run_data
from yieldgate.errors import RunNotFound
from yieldgate.gate.evidence import USABLE, budgets, hardware_exception, mixture_citation, target_runs
from yieldgate.gate.findings import Findings, target_findings
from yieldgate.gate.policy import Policy
from yieldgate.gate.shared import Shared, shared_conditions
from yieldgate.ledger import Ledger
from yieldgate.manifest import Manifest

__all__ = ["TargetEvidence"]


@dataclass(frozen=True, kw_only=True)
class TargetEvidence:
    """Everything the gate reads about a target, read once."""

    target: str
    runs: list[str]
    left_out: dict[str, str]
    """Runs matched but not finished cleanly: run -> status."""
    groups: list[tuple[float, list[str]]]
    """The runs by budget, smallest first (`evidence.budgets`)."""
    records: dict[str, RunRecords]
    data: dict[str, RunData]
    findings: Findings
    """The diagnoses that stand on the runs (`findings.target_findings`)."""
    shared: Shared
    approvals: list[dict[str, Any]] = field(default_factory=list)
    """Earlier `approve` decisions on the target, oldest first, each with its evidence."""
    exception: dict[str, Any] | None = None
    """The new-hardware exception's reading (`evidence.hardware_exception`), where the policy has one."""
    citation: tuple[dict[str, Any] | None, str | None] = (None, None)
    """The mixture regression cited (`evidence.mixture_citation`)."""
    live: bool = False
    """One run read as its governor reads it (`gate/live.py`): read at a step, or a run its meta says was governed.
    The requirements that need other runs (`min_seeds`; the new-hardware exception's reference where the ledger holds
    none) are not checked live and never hold on their own; a decision that does not approve prices the compute the
    run leaves unspent if it stops there."""
    at_step: int | None = None
    """The step the runs were read at (None: all they recorded)."""

    @classmethod
    def read(
        cls, ledger: Ledger, target: str, policy: Policy, metric: str = "val/loss", *, at_step: int | None = None
    ) -> TargetEvidence:
        """`at_step`: the runs as they stood at that step (`RunRecords.upto`), a run still running included; their
        budget is the tokens they had then (a probe's planned budget is not what it reached). A run its governor held
        is read as it stood when held (its meta's `governor.held.step`) unless `at_step` says otherwise: the steps its
        loop made before it noticed the hold are no evidence the gate weighed."""
        listing = ledger.runs()
        usable = USABLE if at_step is None else (*USABLE, "running")
        runs, left_out = target_runs(ledger, target, listing, usable)
        records = {run: read_records(ledger, run) for run in runs}
        if at_step is None and len(runs) == 1:
            at_step = _held_at(records[runs[0]].meta)
        tokens = dict(zip(listing["name"], listing["tokens"], strict=True))
        metas = {run: r.meta for run, r in records.items()}
        if at_step is not None:
            records = {run: r.upto(at_step) for run, r in records.items()}
            tokens = {run: _tokens_at(r) for run, r in records.items()}
            metas = {run: {k: v for k, v in meta.items() if k != "probe"} for run, meta in metas.items()}
        live = len(runs) == 1 and (at_step is not None or "governor" in records[runs[0]].meta)
        data = {run: run_data(r) for run, r in records.items()}
        manifests = {run: r.manifest for run, r in records.items()}
        groups = budgets(tokens, metas)
        approvals = [row for row in ledger.decisions(target).to_dict("records") if row["decision"] == "approve"]
        if at_step is not None:  # the approvals made by then: those on evidence that had not reached this far
            approvals = [a for a in approvals if (a["evidence"] or {}).get("reached_tokens", 0) < groups[-1][0]]
        return cls(
            target=target,
            runs=runs,
            left_out=left_out,
            groups=groups,
            records=records,
            data=data,
            findings=target_findings(ledger, records, at_step),
            shared=shared_conditions(ledger, records, USABLE, listing),
            approvals=approvals,
            exception=_exception(ledger, data, manifests, policy, metric, live),
            citation=mixture_citation(ledger, {run: r.meta for run, r in records.items()}, metric),
            live=live,
            at_step=at_step,
        )

    @property
    def manifests(self) -> dict[str, Manifest | None]:
        return {run: self.records[run].manifest for run in self.runs}

    @property
    def metas(self) -> dict[str, dict[str, Any]]:
        return {run: self.records[run].meta for run in self.runs}

    @property
    def reached(self) -> float:
        """The largest budget's tokens."""
        return self.groups[-1][0]

    @property
    def last(self) -> list[str]:
        """The largest budget's runs."""
        return self.groups[-1][1]

    def last_data(self) -> list[RunData]:
        return [self.data[run] for run in self.last]

    @property
    def seeds(self) -> int:
        """Seeds behind the forecast: every budget's in a fit over three or more budgets, else the largest's."""
        return min(len(rs) for _, rs in self.groups) if len(self.groups) >= 3 else len(self.last)


def _held_at(meta: dict[str, Any]) -> int | None:
    """The step a run's governor held it at (meta `governor.held.step`, `gate/live.py`), None: not held."""
    governor = meta.get("governor")
    held = governor.get("held") if isinstance(governor, dict) else None
    return int(held["step"]) if isinstance(held, dict) and held.get("step") is not None else None


def _tokens_at(records: RunRecords) -> float:
    """The tokens a run had recorded by the last of its records read (NaN: none recorded)."""
    tokens = records.steps["tokens"].dropna() if "tokens" in records.steps else None
    return float(tokens.iloc[-1]) if tokens is not None and len(tokens) else float("nan")


def _exception(
    ledger: Ledger,
    data: dict[str, RunData],
    manifests: dict[str, Manifest | None],
    policy: Policy,
    metric: str,
    live: bool,
) -> dict[str, Any] | None:
    """The new-hardware exception's reading, where the policy has one (`evidence.hardware_exception`). A run read live
    whose reference the ledger does not hold is not checked against it: the exception does not apply, and says so."""
    if policy.exception is None:
        return None
    try:
        return hardware_exception(
            ledger, list(data.values()), manifests, policy.exception, metric, policy.requirements.level
        )
    except RunNotFound:
        if not live:
            raise
        return {
            "reference": [],
            "applies": False,
            "reason": f"not checked live: no run in the ledger matches the reference {policy.exception.reference!r}",
        }
