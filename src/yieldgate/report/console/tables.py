"""Tables that fit the terminal without cutting a number.

rich fits a table to the console by narrowing its columns, and a column narrower than a cell cuts it with `…` (or,
past the console's edge, crops the line): an 80-column terminal read `23,2…` for a yield and `pipeline…` for both
pipelines of the demo. `print_table` prints a table so that no number is ever cut: every column folds what does not
fit onto more lines (a long run name wraps, whole), a column is never narrower than the longest number in it, and
when the numbers alone are wider than the console, the columns a renderer names as the ones to leave out go, in its
order (a column with nothing to show first), and a line says which.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.table import Column, Table

from yieldgate.report.console.lines import say

__all__ = ["fit", "fits", "print_table"]

NUMBER = re.compile(r"[-+.,:;%x~±@\[\]()]*\d[-+.,:;%xe~±@\[\]()\d]*")
"""A word that is a number: digits with their separators, sign, exponent, unit sign or brackets (`23,244`,
`-1.5e-05`, `0.99x`, `[0.042,`, `0-24,576`, `@300`, `80.0%`), not a name with a digit in it (`t150000`)."""
TEXT_FLOOR = 8
"""The narrowest a column of words may be: a longer word (a run name, a source) folds onto more lines."""
WORD_ROOM = 12
"""How long a word every column is widened for first; longer ones (a path, a dotted key) get what is left."""
_EMPTY = {"", "-", "?"}


def print_table(console: Console, table: Table, *, drop: Sequence[str] = ()) -> None:
    """Print `table` fitted to `console` (`fit`), and say which columns it left out, if any. A table that still
    does not fit is printed at the narrowest it can be, wider than the console, never cropped at its edge nor its
    numbers cut (the terminal wraps its lines)."""
    left_out = fit(table, console, drop=drop)
    least = sum(map(narrowest, table.columns)) + _overhead(table)
    # Past the console's width rich would narrow every column evenly, numbers too: wider lines, whole numbers.
    console.print(table, crop=False, width=max(console.width, least))
    if left_out:
        say(
            console,
            f"left out to fit {console.width} columns: {', '.join(left_out)} (a wider terminal or --json shows "
            f"{'them' if len(left_out) > 1 else 'it'})",
        )


def fit(table: Table, console: Console, *, drop: Sequence[str] = ()) -> list[str]:
    """Make `table` fit `console`'s width without cutting a number. Every column folds; while the narrowest the
    table can be (each column at `narrowest`) is wider than the console, the columns headed `drop` are left out
    (those with nothing but `-` first, then in `drop`'s order); a table wider than the console then gets each
    column's width: its narrowest, and the room left shared out to whole words, then whole lines. Returns the
    headers left out."""
    for column in table.columns:
        column.overflow = "fold"
    order = sorted((h for h in drop if _column(table, h) is not None), key=lambda h: not _empty(_column(table, h)))
    left_out: list[str] = []
    room = console.width - _overhead(table)
    while order and sum(map(narrowest, table.columns)) > room:
        header = order.pop(0)
        table.columns.remove(_column(table, header))  # type: ignore[arg-type]
        # rich finds a column's cells and padding by its place (`_index`, set by add_column): renumber after it.
        for index, column in enumerate(table.columns):
            column._index = index
        left_out.append(header)
        room = console.width - _overhead(table)
    widths = [narrowest(c) for c in table.columns]
    most = [max(widest(c), n) for c, n in zip(table.columns, widths, strict=True)]
    if sum(most) <= room:
        return left_out  # rich prints it at its natural width
    # The room left goes to whole words (no `overfitt`/`ing`): first every column's up to WORD_ROOM in proportion,
    # then longer ones from the left (a row's name or cause, before a path or a dotted key to its right); what is
    # left, to whole lines in proportion.
    longest = [min(max(w, _longest_word(c)), m) for c, w, m in zip(table.columns, widths, most, strict=True)]
    widths = _share(widths, [min(n, max(w, WORD_ROOM)) for n, w in zip(longest, widths, strict=True)], room)
    for i, want in enumerate(longest):
        widths[i] += max(0, min(want - widths[i], room - sum(widths)))
    widths = _share(widths, most, room)
    for column, width in zip(table.columns, widths, strict=True):
        column.width = width
    return left_out


def fits(table: Table, console: Console, *, drop: Sequence[str] = ()) -> bool:
    """Whether `table` fits `console`'s width once the columns headed `drop` are left out, each column at its
    narrowest (`narrowest`: a no-wrap column at its widest line). A renderer whose names must stay whole (no-wrap)
    asks this before `print_table`, and prints its rows another way when the answer is no."""
    kept = [c for c in table.columns if str(c.header) not in drop]
    return sum(map(narrowest, kept)) + _overhead(table, len(kept)) <= console.width


def _share(widths: list[int], target: list[int], room: int) -> list[int]:
    """`widths` grown toward `target` by what `room` leaves, each in proportion to what it lacks."""
    wants = [t - w for t, w in zip(target, widths, strict=True)]
    spare = max(0, room - sum(widths))
    share = 1.0 if sum(wants) <= spare else spare / sum(wants)
    grown = [w + int(x * share) for w, x in zip(widths, wants, strict=True)]
    for i in sorted(range(len(grown)), key=lambda i: grown[i] - target[i])[: max(0, room - sum(grown))]:
        grown[i] += grown[i] < target[i]  # what rounding down left over
    return grown


def narrowest(column: Column) -> int:
    """The narrowest `column` may be: its longest number, a no-wrap column's widest line, its longest word up to
    `TEXT_FLOOR`, and the width its renderer set as its least."""
    cells = _cells(column)
    words = [word for cell in [*cells, str(column.header)] for word in cell.split()]
    width = max((cell_len(w) for w in words if NUMBER.fullmatch(w)), default=0)
    width = max(width, min(max(map(cell_len, words), default=1), TEXT_FLOOR), column.min_width or 0)
    if column.no_wrap:
        width = max(width, widest(column))
    return width


def widest(column: Column) -> int:
    """The widest line of `column`'s cells and header (no wider than the renderer allows)."""
    lines = [line for cell in [*_cells(column), str(column.header)] for line in cell.splitlines()]
    width = max(map(cell_len, lines), default=1)
    return width if column.max_width is None else min(width, column.max_width)


def _longest_word(column: Column) -> int:
    return max((cell_len(w) for cell in [*_cells(column), str(column.header)] for w in cell.split()), default=1)


def _overhead(table: Table, n: int | None = None) -> int:
    """The padding of `n` columns (default: the table's) and the rules between and around them."""
    n = len(table.columns) if n is None else n
    _, right, _, left = table.padding
    padding = (left + right) * n - (0 if table.pad_edge else left + right)
    rules = (n - 1 + (2 if table.show_edge else 0)) if table.box else 0
    return padding + rules


def _cells(column: Column) -> list[str]:
    return [str(cell) for cell in column.cells]


def _column(table: Table, header: str) -> Column | None:
    return next((c for c in table.columns if str(c.header) == header), None)


def _empty(column: Column | None) -> bool:
    return column is not None and all(cell.strip() in _EMPTY for cell in _cells(column))
