"""Conditions every recipe of a campaign shares: stated once, never a reason to decide one recipe apart from another.

All twelve probes of one campaign ran the same constant LR with no warm-up. `diagnose` gave the schedule finding 0.30
on some probes and 0.85 on others, and the gate approved one recipe and held another "the yield says nothing about
the data": opposite decisions for one fault they all had. A gate on a recipe compares its data with its siblings'
at equal settings; a fault of those settings that every sibling has moves them all alike, so it cannot tell them
apart. Here a finding is **shared** when its cause and detector are found (at any confidence) on at least one probe
of every recipe of the campaign the target's probes come from (`probe` meta: campaign and recipe; two recipes or
more). The gate leaves shared findings out of the faults that hold, says once that they are shared, and keeps them
in the decision's evidence: the next stage's run must still fix them, but the data decision does not rest on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from yieldgate.analysis.records import RunRecords
from yieldgate.gate.findings import Findings, target_findings
from yieldgate.ledger import Ledger

__all__ = ["Shared", "shared_conditions", "is_shared"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Shared:
    """The findings every recipe of the target's campaign has, by (cause, detector)."""

    campaign: str | None
    """The campaign the target's probes come from; None when they are not one campaign's recipe."""
    recipes: tuple[str, ...]
    """The campaign's recipes that were read."""
    keys: frozenset[tuple[str, str]]
    """(cause, detector) found on every recipe."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "recipes": list(self.recipes),
            "conditions": [{"cause": c, "detector": d} for c, d in sorted(self.keys)],
        }


def _keys(finding: dict[str, Any]) -> set[tuple[str, str]]:
    """(cause, detector) of each detector a finding merges (`nonfinite_loss+nonfinite_eval`)."""
    detector = finding.get("detector") or ""
    return {(finding["cause"], part) for part in detector.split("+")}


def is_shared(finding: dict[str, Any], shared: Shared) -> bool:
    """Every detector behind `finding` found its cause on every recipe."""
    return bool(shared.keys) and _keys(finding) <= shared.keys


def _probe(meta: dict[str, Any]) -> tuple[str, str] | None:
    probe = meta.get("probe")
    if not isinstance(probe, dict) or not probe.get("campaign") or not probe.get("recipe"):
        return None
    return str(probe["campaign"]), str(probe["recipe"])


def shared_conditions(
    ledger: Ledger, known: dict[str, RunRecords], usable: tuple[str, ...], listing: pd.DataFrame
) -> Shared:
    """The conditions shared by every recipe of the campaign the `known` runs (read: run -> records) are
    probes of (module docstring); the other recipes' runs are read here, each once, where their findings are not kept.
    `usable`: the run statuses whose findings are read (the gate's own); `listing`: `ledger.runs()`."""
    found = {_probe(r.meta) for r in known.values()}
    one = next(iter(found)) if len(found) == 1 else None
    if one is None:
        return Shared(campaign=None, recipes=(), keys=frozenset())
    campaign = one[0]
    by_recipe: dict[str, dict[str, RunRecords | None]] = {}
    for name, status in zip(listing["name"], listing["status"], strict=True):
        if not str(name).startswith(f"{campaign}/") or status not in usable:
            continue
        read = known.get(str(name))
        of = _probe(read.meta if read is not None else ledger.meta(str(name)))
        if of is not None and of[0] == campaign:
            by_recipe.setdefault(of[1], {})[str(name)] = read
    if len(by_recipe) < 2:
        return Shared(campaign=campaign, recipes=tuple(sorted(by_recipe)), keys=frozenset())
    each: list[set[tuple[str, str]]] = []
    for recipe in sorted(by_recipe):
        findings: Findings = target_findings(ledger, by_recipe[recipe])
        each.append(set().union(*(_keys(f) for f in findings)) if findings else set())
    return Shared(campaign=campaign, recipes=tuple(sorted(by_recipe)), keys=frozenset(set.intersection(*each)))
