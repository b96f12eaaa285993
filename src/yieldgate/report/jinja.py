"""The one Jinja2 environment of the report's, the notebook's and the dashboard's pages (`templates/`), and what its
macros draw: table cells, tables and plots (`templates/_macros.html`).

Autoescape is on and an undefined name is an error. A value reaches the HTML as text unless it is `Markup`, and
only three things are: plotly's output (`plot`, here), plotly.js and our own style sheets (where a page is
rendered), each with a comment that says why it is safe.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

import jinja2
import numpy as np
import plotly.io as pio
from markupsafe import Markup

from yieldgate.report.figures.base import Figure, figure_dict
from yieldgate.report.format import evidence_lines, fmt

__all__ = ["ENV", "render", "Cell", "Table", "cell", "table", "Plot", "plot", "PLOT_CONFIG"]

PLOT_CONFIG = {"displaylogo": False, "responsive": True}


def _compact_json(value: Any) -> str:
    """A stored body (evidence, policy) as one line of JSON for a table cell."""
    return json.dumps(value, sort_keys=True, default=str)


def _escaped(value: Any) -> Any:
    """The environment's `finalize`: every value a template prints, escaped as the standard library spells it
    (`&#x27;`, `&quot;`: what these pages have always written, and what their tests and readers search for).
    Autoescape then leaves the `Markup` it gets alone; a value already HTML (a macro's output, `Markup`) passes."""
    return value if hasattr(value, "__html__") else Markup(html.escape(str(value)))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("yieldgate.report", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        finalize=_escaped,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,  # a page file ends with a newline
    )
    env.filters["num"] = fmt
    env.filters["pretty_json"] = lambda value: json.dumps(value, indent=2, sort_keys=True)
    return env


ENV = _environment()
"""The one environment of the report's, the notebook's and the dashboard's pages (`templates/`): autoescape on,
an undefined name an error rather than an empty string."""


def render(template: str, **values: Any) -> str:
    """`templates/<template>` filled in with `values`, each escaped unless it is `Markup`."""
    return ENV.get_template(template).render(**values)


@dataclass(frozen=True)
class Cell:
    """One table cell as `_macros.html` draws it: text, with a class (`num`, a verdict), a link, or a structure's
    readable `lines` with its JSON (`text`) one click away. The templates escape all of it."""

    text: str
    cls: str = ""
    href: str = ""
    lines: list[str] | None = None


@dataclass(frozen=True)
class Table:
    """A table for `_macros.html`'s `table`: headings, rows of cells, the table's class."""

    headers: list[str]
    rows: list[list[Cell]]
    cls: str = ""


def cell(value: Any) -> Cell:
    """One table cell: numbers formatted (right-aligned), structures as readable lines with their JSON one click
    away, anything else as its text; a `Cell` as given."""
    if isinstance(value, Cell):
        return value
    if isinstance(value, bool):
        return Cell(str(value).lower())
    if value is None or isinstance(value, (int, float, np.integer, np.floating)):
        return Cell(fmt(value), cls="num")
    if isinstance(value, (dict, list)):
        return Cell(_compact_json(value), cls="json", lines=evidence_lines(value))
    return Cell(str(value))


def table(headers: list[str], rows: list[list[Any]], cls: str = "") -> Table:
    """A table for `_macros.html`'s `table`: each value made a `cell`."""
    return Table(list(headers), [[cell(v) for v in row] for row in rows], cls)


@dataclass(frozen=True)
class Plot:
    """A figure for `_macros.html`'s `plot`: its heading, the plot, its notes."""

    title: str
    div: Markup
    notes: list[str]


def plot(fig: Figure, div_id: str | None = None) -> Plot:
    """`fig` as a div that draws it with the page's plotly.js (`div_id`: its element id; None: a fresh one)."""
    div = pio.to_html(
        figure_dict(fig), include_plotlyjs=False, full_html=False, div_id=div_id, config=PLOT_CONFIG, validate=False
    )
    # Safe as HTML: plotly writes the div and its script; every user string in the figure was escaped when it was
    # built (`figures.base.esc`), and plotly's JSON writes `<` and `>` as \u003c and \u003e.
    return Plot(fig.title, Markup(div), fig.notes)
