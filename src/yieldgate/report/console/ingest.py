"""Runs in and out on the console: what `yieldgate import` brought in and under which names, and what
`yieldgate export` wrote where."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from yieldgate.report.console.lines import say
from yieldgate.report.console.tables import print_table

if TYPE_CHECKING:
    from yieldgate.ingest.explain import Explanation
    from yieldgate.ingest.types import ImportResult
    from yieldgate.report.export import ExportResult

__all__ = ["render_explanations", "render_export", "render_imports"]


def render_imports(results: list[ImportResult], console: Console) -> None:
    """`yieldgate import`: per run imported, its rows and the source metric each canonical name came from; then
    the warnings (the first run's: one source, said once)."""
    for r in results:
        what = "already imported, nothing changed" if r.unchanged else f"{r.steps:,} step rows, {r.evals:,} evals"
        say(console, f"{r.run}: {what} from {r.source}")
        table = Table("source metric", "imported as")
        for name, target in r.mapping.items():
            table.add_row(name, target)
        print_table(console, table)
    for line in results[0].warnings if results else []:
        say(console, f"warning: {line}")


def render_explanations(explanations: list[Explanation], console: Console) -> None:
    """`yieldgate import --explain`: per run, how the source would be read, one aspect a row; nothing is stored."""
    for e in explanations:
        say(console, f"{e.run}: {e.source} would be read as follows (nothing stored)")
        table = Table("", "", show_header=False, box=None, padding=(0, 1))
        table.add_row("format", e.format)
        table.add_row("step", e.step)
        table.add_row("clock", e.clock)
        table.add_row("training loss", e.loss or "none")
        evaluations = [f"{v.key} ({v.source}, {v.direction}: {v.direction_from})" for v in e.evaluations]
        table.add_row("evaluations", "; ".join(evaluations) or "none")
        table.add_row("extras", "; ".join(e.extras) or "none")
        restarts = [
            f"{r['where']}: from step {r['from_step']:,} to {r['to_step']:,}, {r['redone_steps']:,} done again"
            for r in e.restarts
        ]
        table.add_row("restarts", "; ".join(restarts) or "none")
        table.add_row("writers", e.writers)
        table.add_row("rows", f"{e.steps:,} steps, {e.evals:,} evaluations")
        if e.implausible is not None:
            table.add_row("implausible", f"{e.implausible}: an import refuses this reading unless told to accept it")
        print_table(console, table)
    for line in explanations[0].warnings if explanations else []:
        say(console, f"warning: {line}")


def render_export(result: ExportResult, console: Console, run: str) -> None:
    """`yieldgate export`: what was written (rows, columns, yields, diagnoses), to which tool and where."""
    say(
        console,
        f"{run}: {result.rows:,} rows, {len(result.columns) - 1} columns, {result.yields} yields, "
        f"{result.diagnoses} diagnoses -> {result.to} {result.dest} (x-axis: {result.x_axis})",
    )
    for note in result.notes:
        say(console, f"note: {note}")
