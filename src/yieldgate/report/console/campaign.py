"""A probe campaign on the console: its rankings per budget, decision accuracy, rank transfer, forecasts and
L(N, D) laws, as `yieldgate probe` and `yieldgate campaign` print them (and the demo)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from yieldgate.report.console.decisions import decision_figures, pct
from yieldgate.report.console.tables import print_table
from yieldgate.report.format import fmt

__all__ = [
    "accuracy_lines",
    "metric_lines",
    "forecast_lines",
    "ranking_tables",
    "render_campaign",
    "render_campaigns",
    "scaling_lines",
    "transfer_lines",
    "with_interval",
]


def ranking_tables(summary: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """A campaign summary's rankings (`analysis.campaign.summarise`, as stored): per budget, smallest first, a
    title, the headers and the rows (rank, recipe, seeds, bpb with its interval, yield, hard slices, ties)."""
    level, out = summary["level"], []
    metric = (summary.get("rank_by") or {}).get("metric", "bpb")
    for budget, scores in sorted(summary["rankings"].items(), key=lambda item: int(item[0])):
        bpb = scores.get(metric)
        if bpb is None:
            continue
        slices = [k for k in scores if k.startswith("hard/")]
        names = [s.removeprefix("hard/").removesuffix("/bpb") for s in slices]
        # A clause only with something in it: no "(bpb of hard slices: none)".
        hard = f" (bpb of hard slices: {', '.join(names)})" if names else ""
        title = f"{summary['campaign']}: {int(budget):,} tokens per probe{hard}"
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
        out.append(
            (title, ["rank", "recipe", "seeds", f"{metric} ± ({level:.0%})", "yield/Btok", *names, "ties"], rows)
        )
    return out


def accuracy_lines(summary: dict[str, Any]) -> list[str]:
    """A campaign's decision accuracy, one line per smaller budget: how often it orders recipe pairs as the
    largest budget does (`decision_figures`), what it cost, and how the largest budget's firm pairs fare."""
    lines = []
    rank_by = summary.get("rank_by")  # none in a summary stored before rank_by
    if rank_by:
        way = "higher" if rank_by["higher_is_better"] else "lower"
        lines.append(f"ranked by {rank_by['metric']} ({way} is better), each probe scored by {summary['scored_by']}")
    for entry in sorted(summary["decision_accuracy"].values(), key=lambda e: e["budget"]):
        cost = (
            f", {entry['seeds']} seed(s): {entry['compute_share']:.1%} of one largest-budget probe"
            if "compute_share" in entry  # a summary stored before compute was counted has none
            else ""
        )
        line = (
            f"decision accuracy at {entry['budget']:,} tokens ({entry['share_of_largest']:.0%} of the largest "
            f"budget{cost}) against the largest: {decision_figures(entry)}"
        )
        if entry.get("decided_pairs") is not None:
            line += " (it decides the pairs its ranking does not tie)"
        if entry["accuracy_resolved"] is not None:
            line += f"; {entry['accuracy_resolved']:.0%} of the {entry['resolved_pairs']} the largest resolves"
        lines.append(line)
    return lines + metric_lines(summary) + adaptive_lines(summary)


def adaptive_lines(summary: dict[str, Any]) -> list[str]:
    """An adaptive campaign's seeds at its budget, the compute spent and whether every pair is decided."""
    a = summary.get("adaptive")
    if not a:
        return []
    state = {
        "decided": "every pair decided",
        "compute": f"the compute spent with {len(a['close'])} recipe(s) still close ({', '.join(a['close'])})",
        "open": f"{len(a['close'])} recipe(s) still close ({', '.join(a['close'])}): run yieldgate probe again",
    }[a["state"]]
    seeds = ", ".join(f"{r} {n}" for r, n in sorted(a["seeds"].items()))
    return [
        f"adaptive seeds at {a['budget']:,} tokens: {seeds}; {a['compute_share']:.1%} of one largest-budget probe a "
        f"recipe spent of {a['compute']:.1%}; {state}"
    ]


SHOWN_METRICS = 6
"""Candidate metrics shown on the console (the best signal-to-noise first; `--json` has every one)."""


def metric_lines(summary: dict[str, Any]) -> list[str]:
    """The candidate metrics' signal-to-noise (and decision accuracy against the largest budget's ranking), the best
    first, and the one recommended (`analysis.metric_choice`); none in a summary stored before they were measured."""
    report = summary.get("metrics") or {}
    if not report.get("metrics"):
        return []
    rows = sorted(report["metrics"].items(), key=lambda kv: -(kv[1]["snr_mean"] or -1.0))
    where = ", ".join(f"{int(b):,}" for b in report["budgets"])
    lines = [
        f"signal-to-noise (spread between recipes over spread between seeds, mean at {where} tokens): "
        f"recommended {report['recommended'] or '- (no budget with two seeds a recipe)'}"
        + ("" if report["recommended"] in (None, report["rank_by"]) else f", not {report['rank_by']}")
    ]
    for key, row in rows[:SHOWN_METRICS]:
        accuracy = ", ".join(f"{pct(a)} at {int(b):,}" for b, a in row["accuracy"].items())
        lines.append(
            f"  {key} ({'higher' if row['higher_is_better'] else 'lower'} is better): signal-to-noise "
            f"{fmt(row['snr_mean'], 2)}"
            + (f"; orders as the largest budget's {report['rank_by']}: {accuracy}" if accuracy else "")
        )
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
                else f"; {e['accuracy_resolved']:.0%} of the {e['resolved_pairs']} {e['largest']} resolves"
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
            "E ~ 0 (at its bound)"
            if k == "E" and law.get("e_at_bound")
            else f"{k} = {fmt(law[k], 3)} [{fmt(iv[k][0], 3)}, {fmt(iv[k][1], 3)}]"
            for k in ("E", "A", "alpha", "B", "beta")
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


def render_campaign(summary: dict[str, Any], console: Console) -> None:
    """A campaign summary (`analysis.campaign.summarise`, as stored) as tables and lines; an imported results
    campaign's (`analysis.results.summarise_results`) as `report.console.results` writes it."""
    if summary.get("kind") == "results":
        from yieldgate.report.console.results import render_results

        render_results(summary, console)
        return
    for title, headers, rows in ranking_tables(summary):
        table = Table(*headers, title=title)
        for row in rows:
            table.add_row(*row)
        print_table(console, table)
    lines = accuracy_lines(summary) + transfer_lines(summary) + forecast_lines(summary) + scaling_lines(summary)
    for line in lines + [f"note: {n}" for n in summary["notes"]]:
        console.print(line, markup=False, highlight=False)
    if summary.get("attribution"):  # none in a summary stored before attribution, or without two recipes
        from yieldgate.report.console.attribution import render_attribution

        render_attribution(summary["attribution"], console)


def with_interval(entry: dict[str, Any]) -> str:
    if entry["interval"] is None:
        return fmt(entry["mean"])
    return f"{fmt(entry['mean'])} ± {fmt((entry['interval'][1] - entry['interval'][0]) / 2, 2)}"


def render_campaigns(names: list[str], console: Console) -> None:
    """`yieldgate campaign` without a name: the ledger's campaigns, one a line."""
    console.print("\n".join(names) or "no campaigns in this ledger", markup=False, highlight=False)
