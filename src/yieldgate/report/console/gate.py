"""The gate on the console: a decision with its checks, the trail of decisions, and a policy's data-supply plan
with its model sizing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from yieldgate.report.console.campaign import scaling_lines
from yieldgate.report.console.tables import print_table
from yieldgate.report.format import fmt

__all__ = [
    "CHECK_RESULT",
    "decision_record",
    "policy_label",
    "render_decision",
    "render_decisions",
    "render_plan",
    "sizing_lines",
]


CHECK_RESULT = {True: "pass", False: "FAIL", None: "note"}
"""How a gate check's `passed` reads: True, False, or None (a note: not applicable, not asked)."""


def render_decision(decision: Any, console: Console, decision_id: int) -> None:
    """A gate decision (`gate.gate.Decision`): its rationale, each check, and what to run next."""
    console.print(f"#{decision_id} {decision.rationale}", markup=False, highlight=False, soft_wrap=True)
    table = Table(
        "check",
        "result",
        "detail",
        title=f"{decision.target} under {decision.policy} ({decision.policy_hash[:12]}), decided on {decision.axis}",
    )
    for c in decision.checks:
        table.add_row(c.name, CHECK_RESULT[c.passed], c.detail)
    print_table(console, table)
    if decision.what_to_run_next:
        console.print(f"next: {decision.what_to_run_next}", markup=False, highlight=False, soft_wrap=True)


def render_plan(plan: dict[str, Any], console: Console) -> None:
    """`yieldgate plan` (`gate.plan.plan_target`): each stage's data supply per source, and which sources to
    grow."""
    limit, target, policy = plan["max_epochs"], plan["target"], plan["policy"]
    table = Table(
        "stage",
        "tokens",
        "source",
        "unique",
        "drawn",
        "epochs",
        "effective",
        "worth of new",
        title=f"Data supply of {target} under {policy} (max epochs: {'off' if limit is None else fmt(limit)})",
    )
    for stage in plan["stages"]:
        for i, r in enumerate(stage["sources"]):
            epochs = "?" if r["epochs"] is None else f"{r['epochs']:.3g}" + (" OVER" if r["over_limit"] else "")
            table.add_row(
                stage["stage"] if i == 0 else "",
                f"{stage['tokens']:,}" if i == 0 else "",
                r["source"],
                "?" if r["unique_tokens"] is None else f"{r['unique_tokens']:,}",
                f"{r['drawn_tokens']:,.0f}",
                epochs,
                "?" if r["effective_tokens"] is None else f"{r['effective_tokens']:,.0f}",
                "?" if r["stage_worth"] is None else f"{r['stage_worth']:.3f}",
            )
        table.add_section()
    print_table(console, table, drop=("unique",))  # a source's unique tokens: the same at every stage
    for stage in plan["stages"]:
        if stage["tokens_per_param"] is not None:
            console.print(
                f"{stage['stage']}: {stage['tokens_per_param']:.3g} tokens per parameter", markup=False, highlight=False
            )
    for g in plan["grow"]:
        console.print(
            f"grow {g['source']}: {g['stage']} passes it {g['epochs']:.3g} times; it needs at least "
            f"{g['needed_unique_tokens']:,.0f} unique tokens (holds {g['unique_tokens']:,}), or a lower "
            "weight",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if any(r["unique_tokens"] is None for s in plan["stages"] for r in s["sources"]):
        console.print(
            "?: unique tokens not recorded (manifest data.sources[].unique_tokens)", markup=False, highlight=False
        )
    if "sizing" in plan:
        for line in sizing_lines(plan["sizing"]):
            console.print(line, markup=False, highlight=False, soft_wrap=True)


def sizing_lines(sizing: dict[str, Any]) -> list[str]:
    """`yieldgate plan`'s model-size section (`gate.sizing.sizing`): the law, each stage's predicted loss and
    tokens per parameter against the fitted optimum, and the compute-optimal N and D of a FLOP budget."""
    law = sizing["law"]
    lines = scaling_lines({"scaling": {sizing["scaling"]: {"available": True, **law}}})
    if sizing["params"] is not None:
        lines.append(f"planned model: N = {sizing['params']:,} non-embedding parameters")
    for s in sizing["stages"]:
        p = s["prediction"]
        lines.append(
            f"{s['stage']}: predicted loss {fmt(p['loss'])} [{fmt(p['interval'][0])}, {fmt(p['interval'][1])}] at "
            f"{s['tokens']:,} tokens (constant LR); {s['tokens_per_param']:.3g} tokens per parameter, fitted "
            f"optimum {s['optimal_tokens_per_param']:.3g}" + (f"; {s['advice']}" if s["advice"] else "")
        )
    f = sizing["flops"]
    if f is not None:
        iv, p = f["intervals"], f["prediction"]
        lines.append(
            f"compute-optimal at {f['flops']:.3g} FLOPs: N = {f['params']:,.0f} [{iv['params'][0]:,.0f}, "
            f"{iv['params'][1]:,.0f}], D = {f['tokens']:,.0f} [{iv['tokens'][0]:,.0f}, {iv['tokens'][1]:,.0f}] tokens "
            f"({f['tokens_per_param']:.3g} per parameter), predicted loss {fmt(p['loss'])} [{fmt(p['interval'][0])}, "
            f"{fmt(p['interval'][1])}]"
        )
        if f["advice"]:
            lines.append(("undertrained for the token supply: " if f["undertrained"] else "") + f["advice"])
    return lines + [f"note: {n}" for n in sizing["notes"]]


def decision_record(row: dict[str, Any]) -> dict[str, Any]:
    """One row of `Ledger.decisions` as `yieldgate decisions --json` prints it: the time as ISO 8601 (UTC)."""
    return {**row, "created_at": datetime.fromtimestamp(row["created_at"], tz=UTC).isoformat(timespec="seconds")}


def policy_label(row: dict[str, Any]) -> str:
    """A stored decision's policy as the decisions table names it: `name@version#hash` (12 hex digits); `-` for a
    decision recorded without one."""
    policy = row["policy"] or {}
    if not policy and not row["policy_hash"]:
        return "-"
    return f"{policy.get('name', '?')}@{policy.get('version', '?')}#{(row['policy_hash'] or '-')[:12]}"


def render_decisions(rows: list[dict[str, Any]], console: Console, target: str | None = None) -> None:
    """`yieldgate decisions`: the trail (`decision_record` rows), oldest first, or that there is none."""
    if not rows:
        console.print("No decisions" + (f" on {target}" if target else "") + ".", markup=False, highlight=False)
        return
    table = Table("id", "when (UTC)", "target", "stage", "decision", "policy", "rationale")
    for r in rows:
        when = r["created_at"][:16].replace("T", " ")
        table.add_row(
            str(r["id"]), when, r["target"], r["stage"] or "-", r["decision"], policy_label(r), r["rationale"]
        )
    print_table(console, table)
