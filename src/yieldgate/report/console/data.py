"""Data pipelines on the console: duplicate clusters (`yieldgate dedup`), a pipeline audited stage by stage
(`audit FILE`), and two pipelines lined up with the hybrid built from them (`audit A B`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from yieldgate.report.console.lines import say
from yieldgate.report.console.tables import print_table
from yieldgate.report.format import fmt

if TYPE_CHECKING:
    from yieldgate.data.pipeline_compare import PipelineComparison

__all__ = ["render_audit", "render_audit_pair", "render_dedup"]


def render_dedup(result: dict[str, Any], console: Console) -> None:
    """`yieldgate dedup`: each cluster's members and similarity, under the share of tokens duplicated."""
    table = Table(
        title=f"{result['documents']:,} documents, {len(result['clusters']):,} clusters, "
        f"{result['duplicate_share']:.1%} of tokens duplicate"
    )
    table.add_column("cluster")
    table.add_column("members", overflow="fold")  # paths in full: they are what the user acts on
    table.add_column("similarity")
    for n, c in enumerate(result["clusters"], start=1):
        table.add_row(str(n), "\n".join(c["members"]), fmt(c["similarity"]))
    print_table(console, table)


def render_audit(result: dict[str, Any], console: Console) -> None:
    """`yieldgate audit FILE`: each stage's documents in and out, rates, retention and drops, then the whole."""
    table = _stage_table("stage")
    for s in result["stages"]:
        table.add_row(s["stage"], *_stage_cells(s))
    print_table(console, table, drop=RATES)
    _summary_table({"all stages": result["summary"]}, console)
    if any(s["drops_tagged_slice"] for s in result["stages"]):
        console.print("! keeps the tagged slice at under half the rate it keeps everything", markup=False)


def render_audit_pair(result: PipelineComparison, console: Console) -> None:
    """`yieldgate audit A B`: both pipelines stage by stage, row by row, the hybrid's choice at each row and why,
    and the three end to end."""
    table = _stage_table("row", "stage")
    table.add_column("hybrid")
    for n, pair in enumerate(result.pairs, start=1):
        for side in ("a", "b"):
            stage = getattr(pair, side)
            if stage is not None:
                taken = "taken" if pair.pick == side else ""
                table.add_row(str(n), f"{side.upper()} {stage['stage']}", *_stage_cells(stage), taken)
        table.rows[-1].end_section = True
    console.print(f"A: {result.a}  B: {result.b}  (each stage in its own pipeline)", markup=False)
    print_table(console, table, drop=RATES)
    for n, (pair, label) in enumerate(zip(result.pairs, result.hybrid, strict=True), start=1):
        say(console, f"row {n}: the hybrid takes {label}: {pair.reason}")
    say(
        console,
        f"hybrid: {' -> '.join(result.hybrid)}, built and run (each row's two stages tried on the hybrid's stream)",
    )
    summaries = result.summaries
    _summary_table({"A": summaries["a"], "B": summaries["b"], "hybrid": summaries["hybrid"]}, console)
    for note in result.notes:
        say(console, f"note: {note}")


RATES = ("docs/s", "MB/s")
"""What a narrow terminal leaves out of the audit tables first: the speeds (measured, not what a pipeline keeps)."""


def _stage_table(*first: str) -> Table:
    table = Table(*first, "docs in", "docs out", "docs/s", "MB/s", "kept", "tagged kept", "drops")
    table.columns[len(first) - 1].no_wrap = True
    return table


def _stage_cells(s: dict[str, Any]) -> list[str]:
    flag = " !" if s["drops_tagged_slice"] else ""
    return [
        fmt(s["docs_in"]),
        fmt(s["docs_out"]),
        _rate(s["docs_per_s"]),
        _rate(s["mb_per_s"]),
        _pct(s["retention"]),
        _pct(s["tagged_retention"]) + flag,
        ", ".join(f"{k} {v:,}" for k, v in s["drops"].items()) or "-",
    ]


def _summary_table(rows: dict[str, dict[str, Any]], console: Console) -> None:
    headers = ("docs in", "docs out", "kept", "bytes kept", "tokens kept", "tagged kept", "docs/s", "MB/s", "seconds")
    table = Table("pipeline", *headers)
    for name, s in rows.items():
        table.add_row(
            name,
            fmt(s["docs_in"]),
            fmt(s["docs_out"]),
            _pct(s["retention"]),
            _pct(s["bytes_retention"]),
            _pct(s["tokens_retention"]),
            _pct(s["tagged_retention"]),
            _rate(s["docs_per_s"]),
            _rate(s["mb_per_s"]),
            fmt(s["seconds"], 3),
        )
    print_table(console, table, drop=(*RATES, "seconds", "bytes kept"))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
