"""Which data is paying, on the console: a campaign's recipe x capability table with its displacement marks, each
source's leave-one-out effect and the mixture regression's beside it (`analysis.attribution`), as `yieldgate
campaign` and `yieldgate probe --ablate-sources` print them."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from yieldgate.report.format import fmt

__all__ = ["attribution_table", "cells_line", "effect_lines", "render_attribution", "weights_clause"]

MARKS = {"better": "▲", "worse": "▼"}
"""A cell of a row that displaces: better (▲) or worse (▼) than the base beyond its interval."""


def _label(column: str) -> str:
    return column.removeprefix("val/").removesuffix("/bpb")


def _cell(cell: dict[str, Any] | None, base: bool) -> str:
    if cell is None:
        return "-"
    if base:
        if cell["interval"] is None:
            return fmt(cell["mean"])
        return f"{fmt(cell['mean'])} ± {fmt((cell['interval'][1] - cell['interval'][0]) / 2, 2)}"
    if cell["diff"] is None:
        return f"{fmt(cell['mean'])} (no pair)"
    lo, hi = cell["diff_interval"]
    mark = MARKS.get(cell.get("mark") or "", "")
    return f"{cell['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]{(' ' + mark) if mark else ''}"


def attribution_table(result: dict[str, Any]) -> tuple[str, list[str], list[list[str]]]:
    """The recipe x capability table: title, headers and rows (recipe, then a cell per column)."""
    columns = [result["followed"], *result["capabilities"]]
    left_out = {v["recipe"]: s for s, v in result["sources"].items()}
    title = (
        f"{result['campaign']}: recipe x capability, bits per byte at {result['budget']:,} tokens ({result['model']})"
    )
    headers = ["recipe", *[f"{_label(c)} (followed)" if c == result["followed"] else _label(c) for c in columns]]
    rows = []
    for row in result["table"]:
        name = row["recipe"] + (" (base)" if row["base"] and row["recipe"] != "base" else "")
        if row["recipe"] in left_out:
            source = left_out[row["recipe"]]
            by = result["sources"][source].get("by")
            name += f" (without {source}" + (f", its weight to {by})" if by else ")")
        if row["displaces"]:
            name += " displaces"
        rows.append([name, *[_cell(row["cells"].get(c), row["base"]) for c in columns]])
    return title, headers, rows


def cells_line(result: dict[str, Any]) -> str:
    """What the table's cells are: which interval, at which level."""
    level, columns = f"{result['level']:.0%}", 1 + len(result["capabilities"])
    return (
        f"cells: {result['base']}: its mean over seeds ± its {level} t interval; every other recipe: minus "
        f"{result['base']}, paired by seed, [its {level} t interval, family-wise over the row's {columns} columns]; "
        "▲ better / ▼ worse beyond it, marked where a recipe is better on one capability and worse on another"
    )


def weights_clause(source: str, entry: dict[str, Any]) -> str:
    """The weights the base and the leave-one-out recipe trained on, as changed: every share that moved, before ->
    after (the left-out source first, then by name), and how (the rest renormalised, or the source's weight moved to a
    baseline)."""
    weights = entry.get("weights")
    if not weights:
        return "weights not recorded"
    before, after = weights["before"], weights["after"]
    moved = [
        f"{name} {before.get(name, 0.0):.3g} -> {after.get(name, 0.0):.3g}"
        for name in [source, *sorted({*before, *after} - {source})]  # one order, fresh or read back from storage
        if abs(before.get(name, 0.0) - after.get(name, 0.0)) > 1e-12
    ]
    how = (
        f"{source}'s weight moved to {entry['by']}, the rest as they were"
        if entry.get("by")
        else "the rest renormalised"
    )
    return f"weights {', '.join(moved)} ({how})"


def effect_lines(result: dict[str, Any]) -> list[str]:
    """Each source's marginal effect per column: the leave-one-out one, and the regression's beside it."""
    lines = [cells_line(result)]
    regression = result["regression"]
    columns = [result["followed"], *result["capabilities"]]
    for source, entry in result["sources"].items():
        parts = []
        for column in columns:
            e = entry["effects"].get(column)
            if e is None:
                parts.append(f"{_label(column)}: no paired seeds")
                continue
            text = f"{_label(column)} {e['estimate']:+.3f} [{e['low']:+.3f}, {e['high']:+.3f}] {e['verdict']}"
            fit = regression.get("columns", {}).get(column, {}) if regression["available"] else {}
            if fit.get("available") and source in fit["effects"]:
                r = fit["effects"][source]
                lo, hi = r["interval"]
                text += f" (regression {r['estimate']:+.3f} [{lo:+.3f}, {hi:+.3f}], d/dw {r['derivative']:+.3f})"
            parts.append(text)
        lines.append(
            f"source {source}: {result['base']} minus {entry['recipe']} ({weights_clause(source, entry)}; "
            f"{result['level']:.0%}, paired by seed, family-wise over {len(columns)} columns; negative bpb: it "
            "helps): " + "; ".join(parts)
        )
    if result["sources"]:
        if regression["available"]:
            fits = [
                f"{_label(c)}: {f['fit']['model']}, cv rmse {fmt(f['fit']['cv_rmse'], 3)}"
                for c, f in regression["columns"].items()
                if f.get("available")
            ]
            lines.append(
                f"mixture regression over {regression['probes']} probes of {regression['mixtures']} mixtures "
                f"({', '.join(fits)}); its intervals: {regression['interval']}, {regression['level']:.0%}"
            )
        else:
            lines.append(f"mixture regression: none ({regression['reason']})")
    else:
        lines.append(
            "no leave-one-out probes: run `yieldgate probe CAMPAIGN_FILE --ablate-sources` for each source's effect "
            "(`--recipe NAME` to ablate another recipe, `--ablate-by SOURCE` to move each weight to a baseline)"
        )
    return lines


def render_attribution(result: dict[str, Any] | None, console: Console) -> None:
    """`analysis.attribution.attribution`'s result as a table and lines (nothing for None)."""
    if result is None:
        return
    title, headers, rows = attribution_table(result)
    table = Table(*headers, title=title)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for line in effect_lines(result):
        console.print(line, markup=False, highlight=False)
