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

    @classmethod
    def read(cls, ledger: Ledger, target: str, policy: Policy, metric: str = "val/loss") -> TargetEvidence:
        listing = ledger.runs()
        runs, left_out = target_runs(ledger, target, listing)
        records = {run: read_records(ledger, run) for run in runs}
        tokens = dict(zip(listing["name"], listing["tokens"], strict=True))
        data = {run: run_data(r) for run, r in records.items()}
        manifests = {run: r.manifest for run, r in records.items()}
        exception = None
        if policy.exception is not None:
            level = policy.requirements.level
            exception = hardware_exception(ledger, list(data.values()), manifests, policy.exception, metric, level)
        return cls(
            target=target,
            runs=runs,
            left_out=left_out,
            groups=budgets(tokens, {run: r.meta for run, r in records.items()}),
            records=records,
            data=data,
            findings=target_findings(ledger, records),
            shared=shared_conditions(ledger, records, USABLE, listing),
            approvals=[row for row in ledger.decisions(target).to_dict("records") if row["decision"] == "approve"],
            exception=exception,
            citation=mixture_citation(ledger, {run: r.meta for run, r in records.items()}, metric),
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
