"""The Reliability table of the docs (docs/reliability.md), kept equal to what the tests measure.

Each reliability test ends with `check(fault, outcome, rows_lost)`. Normally that asserts the table's row
for `fault` says exactly this; with YIELDGATE_WRITE_RELIABILITY=1 (`make reliability-table`) the rows are
collected and the table is rewritten at the end of the session instead.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
START, END = "<!-- reliability:start -->", "<!-- reliability:end -->"
HEADER = "| fault or bad input | outcome | rows lost |\n|---|---|---|\n"
WRITE = os.environ.get("YIELDGATE_WRITE_RELIABILITY") == "1"
measured: dict[str, tuple[str, str]] = {}


def page_rows() -> dict[str, tuple[str, str]]:
    text = PAGE.read_text()
    table = text[text.index(START) + len(START) : text.index(END)]
    rows = {}
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = (cells[1], cells[2])
    return rows


def check(fault: str, outcome: str, rows_lost: str) -> None:
    measured[fault] = (outcome, rows_lost)
    if WRITE:
        return
    assert page_rows().get(fault) == (outcome, rows_lost), (
        f"docs/reliability.md's row for {fault!r} is {page_rows().get(fault)}, the test measured "
        f"{(outcome, rows_lost)}: run `make reliability-table`"
    )


def write_table() -> None:
    """Rows measured this session replace theirs; rows of faults not run this session are kept."""
    rows = {**page_rows(), **measured} if START in PAGE.read_text() else dict(measured)
    body = "".join(f"| {f} | {o} | {lost} |\n" for f, (o, lost) in rows.items())
    text = PAGE.read_text()
    new = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: f"{START}\n{HEADER}{body}{END}", text, flags=re.S)
    PAGE.write_text(new)
