"""The gate: decisions under a policy, the data-supply plan, the trail of decisions."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yieldgate.gate.draft import RecordedDecision
    from yieldgate.gate.plan import SupplyPlan


from yieldgate.api._common import LedgerArg, _open


def gate(
    target: str, policy: str | os.PathLike[str], *, ledger: LedgerArg = None, record: bool = True
) -> RecordedDecision:
    """Approve, hold or reject TARGET's next stage under a policy file (`yieldgate gate`); the decision is kept with
    its evidence unless `record` is off, and carries the id it is kept under (`id`; None: not kept)."""
    from yieldgate.gate import gate as gates
    from yieldgate.gate.draft import RecordedDecision
    from yieldgate.gate.policy import load_policy

    parsed = load_policy(Path(policy))
    with _open(ledger, readonly=True) as led:  # decided on a read-only ledger: a missing run makes no new file
        decision = gates.gate(led, target, parsed)
    kept = None
    if record:
        with _open(ledger, readonly=False) as led:
            kept = gates.record(led, decision, parsed)
    return RecordedDecision.of(decision, kept)


def plan(
    target: str,
    policy: str | os.PathLike[str],
    *,
    ledger: LedgerArg = None,
    flops: float | None = None,
    scaling: str | None = None,
    params: int | None = None,
) -> SupplyPlan:
    """Each stage's data supply under a policy file (`yieldgate plan`): per source its epochs, effective tokens
    and the worth of the stage's new tokens, and the sources to grow; TARGET is a run, seed group or campaign
    recipe, or a recipe or manifest file. With an L(N, D) law (the campaign recipe `scaling`, else the target's
    own campaign of 3 or more sizes): each stage's predicted loss at `params` and the compute-optimal N and D for
    `flops`. Nothing is stored."""
    from yieldgate.gate.plan import plan_target
    from yieldgate.gate.policy import load_policy

    parsed = load_policy(Path(policy))
    with _open(ledger, readonly=True) as led:
        return plan_target(led, target, parsed, flops=flops, scaling=scaling, params=params)


def decisions(target: str | None = None, *, ledger: LedgerArg = None) -> list[dict[str, Any]]:
    """The gate decisions, oldest first, each with its policy and evidence (`yieldgate decisions`): those on
    `target` (as it was gated) when given (`Ledger.decisions`)."""
    with _open(ledger, readonly=True) as led:
        return led.decisions(target).to_dict("records")
