"""Runs on the console: the runs table and its records (`runs --json`, `--csv`, the dashboard's runs page), a
run shown whole (`yieldgate show`), and what removing and tagging runs did."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from yieldgate.ledger.pg import masked
from yieldgate.report.console.lines import say
from yieldgate.report.console.tables import fits, print_table
from yieldgate.report.format import fmt
from yieldgate.util.jsonsafe import json_safe

__all__ = [
    "TABLE_COLUMNS",
    "duration",
    "render_no_runs",
    "render_removed",
    "render_runs",
    "render_show",
    "render_tags",
    "run_record",
    "steps_taken",
    "when",
    "write_table",
]


def when(ts: float) -> str:
    """A timestamp as the runs table shows it: `2026-12-01 10:18` (UTC)."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M")


def steps_taken(row: dict[str, Any]) -> int | None:
    """A run's steps as every listing shows them: its last step, not the number of step records it logged (an
    imported log that kept every 25th step has 200 records of a 5,000-step run). 0 for a run without steps; None
    where the totals were not read (`Ledger.run_records(totals=False)`)."""
    if row["last_step"] is not None:
        return int(row["last_step"])
    return None if row["steps"] is None else 0


def run_record(row: dict[str, Any]) -> dict[str, Any]:
    """One row of `Ledger.runs` as `yieldgate runs --json` and the dashboard's runs page give it: `steps` is the
    last step (`steps_taken`), `step_records` the step records logged."""
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
            "steps": steps_taken(row),
            "step_records": row["steps"],
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


def duration(seconds: float | None) -> str:
    """`2h05m`, `3m20s`, `45s`; `-` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


# The columns of `runs --csv/--tsv`: one row per run, times in ISO 8601 UTC, durations in seconds, tags joined
# by spaces (a tag holds none), steps the last step (`steps_taken`) beside the step records logged.
TABLE_COLUMNS = (
    "name",
    "status",
    "source",
    "created_at",
    "updated_at",
    "duration_s",
    "steps",
    "step_records",
    "last_step",
    "tokens",
    "last_eval_task",
    "last_eval_metric",
    "last_eval_value",
    "last_eval_step",
    "tags",
    "note",
    "manifest_hash",
)


def write_table(rows: list[dict[str, Any]], out: TextIO, sep: str) -> None:
    """Rows of `Ledger.runs` as CSV (`sep` ",") or TSV ("\\t") with `TABLE_COLUMNS`, written to `out`."""
    iso = lambda ts: datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")  # noqa: E731
    writer = csv.writer(out, delimiter=sep, lineterminator="\n")
    writer.writerow(TABLE_COLUMNS)
    for row in rows:
        row = json_safe(row)
        row["step_records"], row["steps"] = row["steps"], steps_taken(row)
        row.update(created_at=iso(row["created_at"]), updated_at=iso(row["updated_at"]), tags=" ".join(row["tags"]))
        if sep == "\t":  # TSV has no quoting: a tab or line break inside a note would split the row
            row["note"] = None if row["note"] is None else " ".join(row["note"].split())
        writer.writerow(["" if row[c] is None else row[c] for c in TABLE_COLUMNS])


RUNS_DROP = ("tags", "created", "duration")
"""The runs table's columns left out, in this order, to keep every run name whole on one line (`show`, `--json` and
a wider terminal have them)."""


def render_runs(
    records: list[dict[str, Any]], console: Console, *, matched: int, sort: str | None, spills: Sequence[Any] = ()
) -> None:
    """`yieldgate runs`: the records (`run_record`) as a table, how many of the `matched` runs it shows, and the
    spill files a killed Tracker left waiting (`ledger.spills.WaitingSpill`). A run name is never broken across
    lines: the columns of `RUNS_DROP` go first, and where the names are still too long for the terminal, each run is
    printed as a block (its name on a line of its own, then the rest)."""
    # Borderless, so that the name and last eval keep room on an 80-column terminal; the creation time wraps after
    # its date, a last eval or tag list folds onto more lines. The manifest hash is in --json, --csv and `show`.
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("run", no_wrap=True)
    for header in ("status", "tokens", "steps"):
        table.add_column(header, no_wrap=True)
    table.add_column("created", min_width=10, max_width=10)
    table.add_column("duration", no_wrap=True)
    table.add_column("last eval", overflow="fold", min_width=8)
    tagged = any(r["tags"] for r in records)
    if tagged:
        table.add_column("tags", overflow="fold", min_width=8)
    rows = [_run_cells(r) for r in records]
    for cells in rows:
        # Text cells, shown as written: a plain string goes through rich's highlighter, a regex pass per cell (about
        # 0.05 s of a 100-run listing).
        table.add_row(*map(Text, cells[: len(table.columns)]))
    if fits(table, console, drop=RUNS_DROP):
        print_table(console, table, drop=RUNS_DROP)
    else:
        for cells in rows:
            name, status, tokens, steps, created, took, last, tags = cells
            say(console, name, soft_wrap=True)  # whole: a name wider than the terminal is its to wrap
            details = [status, f"{tokens} tokens", f"{steps} steps", f"created {created}", took, f"last eval {last}"]
            say(console, "  " + " · ".join(details + ([f"tags {tags}"] if tags else [])))
    if matched > len(records):
        which = f"the first by {sort}" if sort else "the most recently updated"
        say(console, f"{len(records):,} of {matched:,} runs: {which} (--limit 0 shows all)")
    for spill in spills:
        say(console, f"{'missing' if spill.gone else 'waiting'}: {spill.hint}")


def _run_cells(r: dict[str, Any]) -> list[str]:
    """One run's cells of the runs table: name, status, tokens, steps, created, duration, last eval, tags."""
    ev = r["last_eval"]
    last = f"{ev['task']}/{ev['metric']} {fmt(ev['value'])} @{ev['step']}" if ev else "-"
    cells = [r["name"], r["status"], fmt(r["tokens"]), fmt(r["steps"]), r["created_at"], duration(r["duration_s"])]
    return [*cells, last, " ".join(r["tags"])]


def render_no_runs(location: str, console: Console, *, filtered: bool) -> None:
    """`yieldgate runs` when no run is listed: none in the ledger, or none matching the filters; a file location
    that does not exist yet says so."""
    missing = "://" not in location and location != ":memory:" and not Path(location).exists()
    say(
        console,
        f"No runs {'match' if filtered else 'in'} {'the filters in ' if filtered else ''}"
        f"{masked(location)}{': no ledger file there yet' if missing else ''}.",
    )


def render_removed(removed: list[Any], console: Console) -> None:
    """`yieldgate rm`: each run removed (`api.RemovedRun`) with what went with it."""
    for r in removed:
        say(
            console,
            f"removed {r.name}: {r.steps:,} steps, {r.extra_values:,} extra values, {r.evals:,} evals, "
            f"{r.events:,} events",
        )


def render_tags(tags: dict[str, list[str]], console: Console) -> None:
    """`yieldgate tag` and `untag`: each run's tags after the change."""
    for name, held in tags.items():
        say(console, f"{name}: {' '.join(held) or '(no tags)'}")


def render_show(result: dict[str, Any], console: Console) -> None:
    """`yieldgate show`: one run's summary line, its step columns, extras, goodput, evals, events, tags, config and
    note (`result` as `show --json` prints it)."""
    from yieldgate.analysis.goodput import Goodput  # pandas: not for `yieldgate runs`
    from yieldgate.manifest import flat_config

    info, stats = result["run"], result["column_stats"]
    console.print(
        f"[bold]{escape(info['name'])}[/bold]  status {info['status']}  source {info['source']}  "
        f"steps {fmt(info['steps'])}  tokens {fmt(info['tokens'])}  "
        f"manifest {info['manifest_hash'] or '-'}",
        markup=True,
        highlight=False,
    )
    failure = result.get("failure")
    if failure:  # what ended a failed probe, and the end of its output, where the run is read
        say(console, f"FAILED: {failure['error']}")
        if failure.get("tail"):
            console.print("its output's tail:\n" + str(failure["tail"]).rstrip(), markup=False, highlight=False)
    table = Table("step column", "rows", "first", "last", "min", "max")
    for c, count in result["step_columns"].items():
        s = stats[c]
        table.add_row(c, f"{count:,}", *(f"{fmt(s[k][1])} @{s[k][0]:,}" for k in ("first", "last", "min", "max")))
    print_table(console, table)
    if result["extras"]:
        console.print("extras: " + ", ".join(result["extras"]), markup=False)
    for signal, why in result["unmeasured"].items():
        say(console, f"not recorded: {signal}: {why}")
    if result["goodput"] is not None:
        say(console, Goodput(**result["goodput"]).line())
    for spill in result.get("waiting_spills", []):
        say(console, f"{'missing' if spill.get('gone') else 'waiting'}: {spill['hint']}")
    if result["devices"]:
        console.print(f"devices: {result['devices']['count']} ({result['devices']['from']})", markup=False)
    if result["summary"]:
        console.print("summary: " + ", ".join(f"{k} {fmt(v)}" for k, v in result["summary"].items()), markup=False)
    _render_evals(result["evals"], console)
    console.print(f"events: {result['events']['open']} open, {result['events']['resolved']} resolved")
    if info["tags"]:
        say(console, "tags: " + " ".join(info["tags"]))
    config = (result["manifest"] or {}).get("config")
    if config:
        say(console, "config: " + ", ".join(f"{k}={fmt(v)}" for k, v in flat_config(config).items()))
    if info["note"]:
        say(console, f"note: {info['note']}")


def _render_evals(evals: list[dict[str, Any]], console: Console) -> None:
    if not evals:
        return
    table = Table("eval", "evaluations", "last step", "last value")
    for e in evals:
        stderr = "" if e["last_stderr"] is None else f" ± {fmt(e['last_stderr'])}"
        table.add_row(f"{e['task']}/{e['metric']}", str(e["count"]), str(e["last_step"]), fmt(e["last_value"]) + stderr)
    print_table(console, table)
