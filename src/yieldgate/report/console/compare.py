"""Comparisons on the console: two runs or seed groups point by point with the speedup split and the confounders
(`yieldgate compare`), two manifests field by field (`manifest diff`), what `yieldgate report` wrote, and the
demo's two pipelines side by side."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from yieldgate.report.console.lines import say
from yieldgate.report.console.tables import print_table
from yieldgate.report.format import fmt

if TYPE_CHECKING:
    from yieldgate.analysis.compare import Comparison
    from yieldgate.manifest import ManifestCheck
    from yieldgate.report.sections import ReportResult

__all__ = ["render_comparison", "render_manifest_check", "render_manifest_diff", "render_pipelines", "render_report"]


def render_comparison(result: Comparison, console: Console, *, check_flags: dict[str, str] | None = None) -> None:
    """`yieldgate compare`: the aligned points with their intervals, time and tokens to target, the speedup split
    into throughput x sample efficiency (steps/s x step efficiency where the runs count no tokens), the confounders,
    the notes, the batch check to run (`check_flags`: each of `result.batch_check`'s arguments spelled as its
    command-line flag) and the verdict."""
    a, b = result.a, result.b
    # A and B named once above the table: two run names as headers leave no room for the numbers at 80 columns.
    say(console, f"A: {a}  B: {b}")
    table = Table(result.aligned_on, "A", "B", "B - A", "interval", "within noise")
    for p in result.points:
        interval = "-" if p["interval"] is None else f"[{fmt(p['interval'][0])}, {fmt(p['interval'][1])}]"
        noise = "-" if p["within_noise"] is None else ("yes" if p["within_noise"] else "no")
        table.add_row(fmt(p[result.aligned_on]), fmt(p["a"]), fmt(p["b"]), fmt(p["diff"]), interval, noise)
    print_table(console, table)
    s = result.speedup
    # Without token counts the time speedup splits on steps (epochs): steps/s x steps to target.
    on_steps = s.get("step_efficiency") is not None
    unit = ("epochs" if result.aligned_on == "epochs" else "steps") if on_steps else "tokens"
    need = result.steps_to_target if on_steps else result.tokens_to_target
    cost = result.cost_to_target_usd
    dollars = f", cost ${fmt(cost[a])} vs ${fmt(cost[b])}" if None not in (cost[a], cost[b]) else ""
    say(
        console,
        f"target {result.metric} {fmt(result.target_loss)}: {unit} {fmt(need[a])} vs {fmt(need[b])}, time "
        f"{fmt(result.time_to_target_s[a])} s vs {fmt(result.time_to_target_s[b])} s{dollars}",
    )
    split = (
        f"{unit}/s {fmt(s['steps_per_s'])} x {unit[:-1]} efficiency {fmt(s['step_efficiency'])}"
        if on_steps
        else f"throughput {fmt(s['throughput'])} x sample efficiency {fmt(s['sample_efficiency'])}"
    )
    cheaper = "" if s.get("cost") is None else f"cost {fmt(s['cost'])}; "
    say(
        console,
        f"speedup (B over A): time {fmt(s['time'])} = {split}; {cheaper}effective token multiplier "
        f"{fmt(result.effective_token_multiplier)}",
    )
    for c in result.confounders:
        say(console, f"confounder: {c['field']}: {json.dumps(c['a'])} vs {json.dumps(c['b'])}")
    for line in result.warnings + result.notes:
        say(console, f"note: {line}")
    if check_flags is not None:
        flags = " ".join(f"{flag} {value}" for flag, value in check_flags.items())
        say(console, f"check it: yieldgate batch-check {flags} --run {result.runs[b][0]}", soft_wrap=True)
    say(console, result.verdict)


def render_manifest_check(result: ManifestCheck, console: Console) -> None:
    """`yieldgate manifest validate`: the file, valid, with its content hash."""
    say(console, f"{result.file}: valid, hash {result.hash}")


def render_manifest_diff(result: dict[str, Any], console: Console) -> None:
    """`yieldgate manifest diff`: the fields in which the two manifests differ (`result` as `--json` prints it)."""
    a, b = result["a"], result["b"]
    if not result["differences"]:
        console.print(f"{a} and {b}: identical manifests", markup=False)
        return
    say(console, f"A: {a}  B: {b}")  # named once: two file paths as headers would squeeze the fields
    table = Table("field", "A", "B")
    for d in result["differences"]:
        table.add_row(d["field"], json.dumps(d["a"]), json.dumps(d["b"]))
    print_table(console, table)


def render_report(result: ReportResult, console: Console, png_dir: object = None) -> None:
    """`yieldgate report`: the file written with its runs, plots and PNG files (in `png_dir`, as given), the
    frontier and the notes."""
    n = len(result.runs)
    pngs = f", {len(result.pngs)} PNG files in {png_dir}" if result.pngs else ""
    say(console, f"wrote {result.path}: {n} run{'s' * (n != 1)}, {len(result.figures)} plots{pngs}", soft_wrap=True)
    if result.frontier is not None:
        say(
            console,
            f"frontier (tokens/s against tokens to {result.frontier['metric']} {fmt(result.frontier['target'])}): "
            f"on the Pareto front: {', '.join(result.frontier['front']) or 'no run'}",
        )
        for run, why in result.frontier["unplaced"].items():
            say(console, f"not on the frontier plot: {run}: {why}")
    for note in result.notes:
        say(console, f"note: {note}")


def render_pipelines(
    runs: dict[str, Any], console: Console, by_tokens: Comparison, by_time: Comparison, confounders: list[str]
) -> None:
    """The demo's worked example: seed 0 of each pipeline (batch, training data kept, throughput, final bits per
    byte overall and per hard slice), both comparisons' points in bits per byte, the speedup split, the verdict
    and the confounders."""
    hard = sorted({k for r in runs.values() for k in r["hard"]})
    table = Table(
        "pipeline",
        "batch",
        "training MB kept",
        "tokens/s",
        "final val bpb",
        *[h.removeprefix("hard/").removesuffix("/bpb") + " bpb" for h in hard],
        title="Seed 0 of each pipeline",
    )
    for name, r in runs.items():
        table.add_row(
            name,
            str(r["batch"]),
            f"{r['train_mb']:.2f}",
            fmt(r["tokens_per_s"]),
            fmt(r["val_bpb"]),
            *[fmt(r["hard"].get(h)) for h in hard],
        )
    print_table(console, table)
    for comparison in (by_tokens, by_time):
        points = Table(
            comparison.aligned_on,
            "A bpb",
            "B bpb",
            "B - A",
            "within seed noise",
            title=f"Bits per byte at equal {comparison.aligned_on}",
        )
        for p in comparison.points:
            points.add_row(
                fmt(p[comparison.aligned_on]),
                fmt(p["a"]),
                fmt(p["b"]),
                fmt(p["diff"]),
                "-" if p["within_noise"] is None else "yes" if p["within_noise"] else "no",
            )
        print_table(console, points)
    sp = by_tokens.speedup
    console.print(
        f"Speedup of B over A to A's and B's common target (bpb {fmt(by_tokens.target_loss)}): time "
        f"{fmt(sp['time'])}x = throughput {fmt(sp['throughput'])}x x sample efficiency "
        f"{fmt(sp['sample_efficiency'])}x.",
        markup=False,
        highlight=False,
    )
    console.print(by_tokens.verdict, markup=False, highlight=False)
    console.print("Confounders (manifest diff): " + ", ".join(confounders), markup=False, highlight=False)
