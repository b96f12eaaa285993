"""A gate decision as it is made: `Draft` (the checks so far and the context every outcome shares), what it becomes
(`Decision`, with each `Check`) and the forecast's bounds against the threshold (`Bounds`); the evidence it is made on
is `target.TargetEvidence`. `gate.py` decides; `requirements.py` checks what the evidence must show."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from yieldgate.gate.policy import Policy, Stage

__all__ = ["Check", "Decision", "RecordedDecision", "Draft", "Bounds"]


@dataclass
class Check:
    """One requirement: passed (True/False), or None where it is a note (not applicable, not asked)."""

    name: str
    passed: bool | None
    detail: str


@dataclass
class Decision:
    """A gate decision with its evidence; `record` stores it in the ledger."""

    target: str
    decision: Literal["approve", "hold", "reject"]
    stage: str | None
    """The largest stage the evidence reached (None: not even the first)."""
    next_stage: str
    """The stage decided on."""
    rationale: str
    """One line: the decision and its main reason."""
    axis: Literal["learning", "throughput"]
    """The axis that decided (throughput only under the new-hardware exception)."""
    evidence: dict[str, Any]
    """The numbers, runs, manifest hashes, open diagnoses and forecast behind the decision."""
    checks: list[Check] = field(default_factory=list)
    what_to_run_next: str | None = None
    """For a hold: what would settle it."""
    policy: str = ""
    """Policy name@version."""
    policy_hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RecordedDecision(Decision):
    """A decision with the id the ledger keeps it under (`yieldgate gate`; None: not recorded)."""

    id: int | None = None

    @classmethod
    def of(cls, decision: Decision, id: int | None) -> RecordedDecision:
        return cls(**{f.name: getattr(decision, f.name) for f in fields(Decision)}, id=id)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, **super().to_dict()}


@dataclass
class Draft:
    """A decision being made: the checks so far, and the context every outcome shares."""

    target: str
    policy: Policy
    current: Stage | None
    next: Stage
    evidence: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    suffix: str = ""
    """Appended to every rationale (the end of the new-hardware exception)."""

    def check(self, name: str, passed: bool | None, detail: str) -> bool | None:
        self.checks.append(Check(name, passed, detail))
        return passed

    def decide(
        self,
        decision: Literal["approve", "hold", "reject"],
        why: str,
        *,
        run_next: str | None = None,
        axis: Literal["learning", "throughput"] = "learning",
    ) -> Decision:
        head = f"{decision} {self.next.name} ({self.next.token_budget:,} tokens)"
        return Decision(
            target=self.target,
            decision=decision,
            stage=self.current.name if self.current else None,
            next_stage=self.next.name,
            rationale=f"{head}: {why}{self.suffix}",
            axis=axis,
            evidence=self.evidence,
            checks=self.checks,
            what_to_run_next=run_next,
            policy=f"{self.policy.name}@{self.policy.version}",
            policy_hash=self.policy.content_hash(),
        )


@dataclass(frozen=True)
class Bounds:
    """The forecast yield per billion tokens and its interval, discounted for repetition, against the threshold."""

    point: float
    lo: float
    hi: float
    threshold: float
    factor: float
    """The repetition discount (`_supply`); 1: none."""

    @property
    def discounted(self) -> str:
        return " (discounted for repetition)" if self.factor < 1 else ""
