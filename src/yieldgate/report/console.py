"""Console rendering shared by the CLI and the demo: the campaign tables and the lines of results, numbers formatted by
`report.format.fmt`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from yieldgate.report.format import fmt
from yieldgate.util.jsonsafe import json_safe

clean = json_safe  # the name cli.py imports it by

__all__ = [
    "clean",
    "evidence_lines",
    "fmt",
    "render_campaign",
    "render_decision",
    "with_interval",
    "ranking_tables",
    "accuracy_lines",
    "forecast_lines",
    "scaling_lines",
    "sizing_lines",
    "transfer_lines",
    "CHECK_RESULT",
    "decision_record",
    "policy_label",
]


def evidence_lines(body: Any, limit: int = 10) -> list[str]:
    """A stored body (a diagnosis's or a decision's evidence) as `name: value` lines for a table cell:
    nested fields dotted, numbers formatted, a long list counted; past `limit` lines, how many more."""
    lines: list[str] = []

    def walk(name: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for key, v in value.items():
                walk(f"{name}.{key}" if name else str(key), v)
        elif isinstance(value, (list, tuple)) and (len(value) > 4 or any(isinstance(v, (dict, list)) for v in value)):
            lines.append(f"{name}: {len(value)} values")
        elif isinstance(value, (list, tuple)):
            lines.append(f"{name}: {', '.join(fmt(v) for v in value) or '-'}")
        else:
            lines.append(f"{name}: {fmt(value)}" if name else fmt(value))

    walk("", json_safe(body))
    return lines[:limit] + ([f"... {len(lines) - limit} more"] if len(lines) > limit else [])


def ranking_tables(summary: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """A campaign summary's rankings (`analysis.campaign.summarise`, as stored): per budget, smallest first, a
    title, the headers and the rows (rank, recipe, seeds, bpb with its interval, yield, hard slices, ties)."""
    level, out = summary["level"], []
    for budget, scores in sorted(summary["rankings"].items(), key=lambda item: int(item[0])):
        bpb = scores.get("bpb")
        if bpb is None:
            continue
        slices = [k for k in scores if k.startswith("hard/")]
        names = [s.removeprefix("hard/").removesuffix("/bpb") for s in slices]
        title = (
            f"{summary['campaign']}: {int(budget):,} tokens per probe (bpb of hard slices: "
            f"{', '.join(names) or 'none'})"
        )
        by = {key: {e["recipe"]: e for e in scores[key]["order"]} for key in scores}
        rows = [
            [
                str(e["rank"]),
                e["recipe"],
                str(e["seeds"]),
                with_interval(e),
                fmt(by.get("yield_per_btok", {}).get(e["recipe"], {}).get("mean")),
                *[fmt(by[s].get(e["recipe"], {}).get("mean")) for s in slices],
                ", ".join(e["ties"]) or "-",
            ]
            for e in bpb["order"]
        ]
        out.append((title, ["rank", "recipe", "seeds", f"bpb ± ({level:.0%})", "yield/Btok", *names, "ties"], rows))
    return out


def accuracy_lines(summary: dict[str, Any]) -> list[str]:
    """A campaign's decision accuracy, one line per smaller budget: how often it orders recipe pairs as the
    largest budget does."""
    lines = []
    for entry in sorted(summary["decision_accuracy"].values(), key=lambda e: e["budget"]):
        share = "-" if entry["accuracy"] is None else f"{entry['accuracy']:.0%}"
        firm = (
            ""
            if entry["accuracy_resolved"] is None
            else (f"; {entry['accuracy_resolved']:.0%} of the {entry['resolved_pairs']} it resolves")
        )
        line = (
            f"decision accuracy at {entry['budget']:,} tokens ({entry['share_of_largest']:.0%} of the "
            f"largest budget): {share} of {entry['pairs']} recipe pairs ordered as at the largest{firm}"
        )
        if "compute_share" in entry:  # a summary stored before compute and abstention were counted has neither
            line += f"; {entry['seeds']} seed(s) cost {entry['compute_share']:.1%} of one largest-budget probe"
        if "abstained" in entry:  # none with one seed: no spread to abstain by
            decided = "-" if entry["accuracy_decided"] is None else f"{entry['accuracy_decided']:.0%}"
            line += (
                f"; abstains on {entry['abstained']:.0%} (within its seeds' noise), {decided} of the "
                f"{entry['decided_pairs']} it decides"
            )
        lines.append(line)
    return lines


def forecast_lines(summary: dict[str, Any]) -> list[str]:
    """A campaign's forecasts, one line per recipe: the next budget's gain and yield with intervals, or why none."""
    lines = []
    for recipe, f in summary["forecasts"].items():
        if f["available"]:
            lo, hi = f["yield_interval"]
            lines.append(
                f"forecast {recipe}: {f['from_tokens']:,.0f} -> {f['to_tokens']:,.0f} tokens gains "
                f"{fmt(f['gain'])} val loss [{fmt(f['gain_interval'][0])}, {fmt(f['gain_interval'][1])}], "
                f"{fmt(f['yield_per_btok'])} per billion tokens [{fmt(lo)}, {fmt(hi)}]"
            )
        else:
            lines.append(f"forecast {recipe}: none ({f['reason']})")
    return lines


def transfer_lines(summary: dict[str, Any]) -> list[str]:
    """Rank transfer, one line per budget and smaller model size: how often it orders recipe pairs as the largest
    size does (a summary stored before rank transfer existed has none)."""
    lines = []
    for budget, by_size in sorted(summary.get("rank_transfer", {}).items(), key=lambda item: int(item[0])):
        for e in sorted(by_size.values(), key=lambda e: e["params"]):
            share = "-" if e["accuracy"] is None else f"{e['accuracy']:.0%}"
            firm = (
                ""
                if e["accuracy_resolved"] is None
                else f"; {e['accuracy_resolved']:.0%} of the {e['resolved_pairs']} it resolves"
            )
            lines.append(
                f"rank transfer at {int(budget):,} tokens: {e['size']} (N = {e['params']:,}, "
                f"{e['share_of_largest']:.0%} of {e['largest']}) orders {share} of {e['pairs']} recipe pairs as "
                f"{e['largest']} does{firm}"
            )
    return lines


def scaling_lines(summary: dict[str, Any]) -> list[str]:
    """Each recipe's L(N, D) law with its intervals and its prediction, or why there is none."""
    lines = []
    for recipe, law in summary.get("scaling", {}).items():
        if not law["available"]:
            lines.append(f"L(N, D) {recipe}: none ({law['reason']})")
            continue
        iv = law["intervals"]
        terms = ", ".join(
            f"{k} = {fmt(law[k], 3)} [{fmt(iv[k][0], 3)}, {fmt(iv[k][1], 3)}]" for k in ("E", "A", "alpha", "B", "beta")
        )
        lines.append(
            f"L(N, D) {recipe} = E + A/N^alpha + B/D^beta over {len(law['sizes'])} sizes, {law['probes']} probes, "
            f"{law['points']} stable-phase evaluations: {terms} ({law['level']:.0%}, {law['boots']} refits resampling "
            f"{law['resampled']}; residual {fmt(law['noise'], 2)} in log loss)"
        )
        p = law.get("prediction")
        if p:
            lines.append(
                f"L(N, D) {recipe} predicts {fmt(p['loss'])} [{fmt(p['interval'][0])}, {fmt(p['interval'][1])}] "
                f"(one probe: [{fmt(p['measured_interval'][0])}, {fmt(p['measured_interval'][1])}]) at N = "
                f"{p['params']:,.0f}, D = {p['tokens']:,.0f} tokens, at constant LR"
            )
        lines += [f"L(N, D) {recipe}: {n}" for n in law["notes"]]
    return lines


def render_campaign(console: Console, summary: dict[str, Any]) -> None:
    """A campaign summary (`analysis.campaign.summarise`, as stored) as tables and lines."""
    for title, headers, rows in ranking_tables(summary):
        table = Table(*headers, title=title)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    lines = accuracy_lines(summary) + transfer_lines(summary) + forecast_lines(summary) + scaling_lines(summary)
    for line in lines + [f"note: {n}" for n in summary["notes"]]:
        console.print(line, markup=False, highlight=False)


def with_interval(entry: dict[str, Any]) -> str:
    if entry["interval"] is None:
        return fmt(entry["mean"])
    return f"{fmt(entry['mean'])} ± {fmt((entry['interval'][1] - entry['interval'][0]) / 2, 2)}"


CHECK_RESULT = {True: "pass", False: "FAIL", None: "note"}
"""How a gate check's `passed` reads: True, False, or None (a note: not applicable, not asked)."""


def render_decision(console: Console, decision_id: int, decision: Any) -> None:
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
    console.print(table)
    if decision.what_to_run_next:
        console.print(f"next: {decision.what_to_run_next}", markup=False, highlight=False, soft_wrap=True)


def render_plan(console: Console, plan: dict[str, Any]) -> None:
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
    console.print(table)
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


def when(ts: float) -> str:
    """A timestamp as the runs table shows it: `2026-12-01 10:18` (UTC)."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M")


def run_record(row: dict[str, Any]) -> dict[str, Any]:
    """One row of `Ledger.runs` as `yieldgate runs --json` and the dashboard's runs page give it."""
    last_eval = None
    if isinstance(row["last_eval_task"], str):  # pandas fills a run without evals with NaN beside one with
        last_eval = {
            "task": row["last_eval_task"],
            "metric": row["last_eval_metric"],
            "value": row["last_eval_value"],
            "step": int(row["last_eval_step"]),
        }
    return json_safe(
        {
            "name": row["name"],
            "status": row["status"],
            "source": row["source"],
            "tokens": row["tokens"],
            "steps": row["steps"],
            "last_step": row["last_step"],
            "last_eval": last_eval,
            "manifest_hash": row["manifest_hash"],
            "created_at": when(row["created_at"]),
            "updated_at": when(row["updated_at"]),
            "duration_s": row["duration_s"],
            "tags": list(row["tags"]),
            "note": row["note"],
        }
    )
