"""The result objects of `compare`, `yields`, `diagnose` and `forecast` in a notebook: `register` hands IPython an
HTML formatter for each result type (by its module and name: analysis never imports the report), which renders the
numbers the CLI prints (the report's tables, `html.py`) beside the report's figures (`figures/`). `import yieldgate`
calls it when an IPython shell is running.

Nothing is fetched: plotly.js comes from the installed `plotly` package, inlined into the first result shown in a
Python process (as plotly's own offline notebook mode does) and used by every later one. The views render from
`templates/notebook.html` through the report's environment (`jinja.ENV`, autoescape), so every user string is
escaped; the figures escape their own (`figures.base.esc`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from markupsafe import Markup
from plotly.offline import get_plotlyjs

from yieldgate.report.figures.base import Figure
from yieldgate.report.figures.runs import tranche_yields_figure
from yieldgate.report.format import fmt
from yieldgate.report.html import CSS, comparison_view
from yieldgate.report.jinja import plot, render, table

if TYPE_CHECKING:
    from yieldgate.analysis.compare import Comparison
    from yieldgate.analysis.diagnose import Diagnosis
    from yieldgate.analysis.fit import Forecast
    from yieldgate.analysis.yields import YieldReport

__all__ = ["comparison_repr", "yields_repr", "diagnosis_repr", "forecast_repr", "register", "result_html", "RENDERERS"]

_shipped = threading.Event()
"""plotly.js went out with a result already in this process: the next ones use it."""


def _plotly_js() -> Markup | None:
    if _shipped.is_set():
        return None
    _shipped.set()
    return Markup(get_plotlyjs())  # safe as HTML: plotly.js from the installed plotly package


SCOPED_CSS = Markup(
    "".join(
        f".yieldgate {rule.strip()}\n"
        for rule in CSS.strip().splitlines()
        if rule.strip() and not rule.startswith("body")
    )
)
"""The report's style sheet scoped to a result's output, so it does not restyle the notebook around it (safe as HTML:
the report's own CSS)."""


def _page(kind: str, title: str, figures: list[Figure | None], **values: Any) -> str:
    """`templates/notebook.html` for a result of `kind`, with its figures; plotly.js with the first one drawn."""
    drawn = [plot(f) for f in figures if f is not None]
    return render(
        "notebook.html",
        kind=kind,
        title=title,
        plots=drawn,
        plotly_js=_plotly_js() if drawn else None,
        css=SCOPED_CSS,
        **values,
    )


def comparison_repr(c: Comparison) -> str:
    """A comparison as the report shows it (`html.comparison_view`: `yieldgate compare`'s numbers), with its
    aligned points drawn."""
    from yieldgate.report.figures.results import comparison_figure

    return _page("comparison", f"comparison of {c.a} and {c.b}", [comparison_figure(c)], comparison=comparison_view(c))


def yields_repr(r: YieldReport) -> str:
    """The tranche table of `yieldgate yield` and the report's tranche-yield figure with its noise band."""
    by_steps = r.axis != "tokens"
    rows = [
        [
            f"{fmt(t.start_step)}-{fmt(t.end_step)}" if by_steps else f"{fmt(t.start_tokens)}-{fmt(t.end_tokens)}",
            t.loss_start,
            t.loss_end,
            r.rate(t),
            "-" if t.yield_band is None else f"{fmt(t.yield_band[0])} to {fmt(t.yield_band[1])}",
            t.yield_per_device_hour,
            t.yield_per_dollar,
            t.yield_per_kwh,
            ", ".join(w for w, on in (("within noise", t.within_noise), ("LR decay", t.spans_lr_decay)) if on) or "-",
        ]
        for t in r.tranches
    ]
    tranches = table(
        [
            r.axis,
            f"{r.metric} start",
            "end",
            r.per,
            f"noise band ({r.level:.0%})",
            f"per {r.time_unit}",
            "per $",
            "per kWh",
            "note",
        ],
        rows,
        "tranches",
    )
    what = f"{r.task}/{r.metric}" if r.task else f"training {r.metric}"
    notes = r.notes + [f"{k}: unknown ({why})" for k, why in r.missing.items()]
    figure = tranche_yields_figure([r], f"{r.task}/{r.metric}" if r.task else r.metric)
    return _page("yields", f"{r.run}: yield of {what} ({r.unit})", [figure], notes=notes, tranches=tranches)


def diagnosis_repr(d: Diagnosis) -> str:
    """The findings of `yieldgate diagnose` (cause, steps, confidence, evidence with its JSON one click away,
    advice), the detectors that could not run, and the findings drawn over their steps."""
    from yieldgate.report.figures.results import diagnosis_figure

    rows: list[list[Any]] = [
        [f.cause, f"{f.start_step:,}-{f.end_step:,}", round(f.confidence, 3), f.severity, f.evidence, f.advice]
        for f in d.findings
    ]
    return _page(
        "diagnosis",
        f"diagnosis of {d.run}",
        [diagnosis_figure(d)],
        findings=table(["cause", "steps", "confidence", "severity", "evidence", "advice"], rows, "findings")
        if rows
        else None,
        not_run=[f"not run: {n.get('detector', '?')}: {n.get('reason', '')}" for n in d.not_run],
    )


def forecast_repr(f: Forecast) -> str:
    """`yieldgate forecast`'s lines (the law, the next tranche's gain with both intervals, where the marginal
    yield falls below a threshold) and the fit drawn out to the forecast."""
    from yieldgate.report.figures.results import forecast_figure

    law = f.fit
    lines = [
        f"fit: loss = {fmt(law.E)} + {fmt(law.B)} * {f.axis}^-{fmt(law.beta)} (R^2 {fmt(law.r2)}, "
        f"{len(law.tokens)} evaluations)",
        f"next {fmt(f.next_tokens)} {f.axis} after {fmt(f.at_tokens)}: gain {fmt(f.gain)} "
        f"[{fmt(f.interval[0])}, {fmt(f.interval[1])}] ({f.level:.0%} interval, with evaluation noise "
        f"{fmt(f.eval_noise)}; the curve alone [{fmt(f.fit_interval[0])}, {fmt(f.fit_interval[1])}])",
    ]
    if f.axis == "tokens":
        lines.append(
            f"{fmt(f.yield_per_btok)} per billion tokens [{fmt(f.yield_interval[0])}, {fmt(f.yield_interval[1])}]"
        )
    if f.threshold_tokens is not None:
        lines.append(f"marginal yield falls below the threshold at {fmt(f.threshold_tokens)} tokens")
    notes = [*f.notes, *([f"poor fit: {law.poor}"] if law.poor else [])]
    return _page("forecast", "forecast", [forecast_figure(f)], lines=lines, notes=notes)


RENDERERS: dict[tuple[str, str], Callable[[Any], str]] = {
    ("yieldgate.analysis.compare", "Comparison"): comparison_repr,
    ("yieldgate.analysis.yields", "YieldReport"): yields_repr,
    ("yieldgate.analysis.diagnose", "Diagnosis"): diagnosis_repr,
    ("yieldgate.analysis.fit", "Forecast"): forecast_repr,
}
"""Each result type, by the module that defines it and its name, and the function that draws it."""


def result_html(result: Any) -> str:
    """The HTML a notebook shows for `result` (one of `RENDERERS`' types), as IPython's formatter draws it."""
    kind = type(result)
    draw = RENDERERS.get((kind.__module__, kind.__name__))
    if draw is None:
        raise TypeError(f"no notebook view of {kind.__name__}: one of {sorted(n for _, n in RENDERERS)} is shown")
    return draw(result)


def register(shell: Any) -> None:
    """Give IPython's `text/html` formatter a renderer for each result type of `RENDERERS`, by name: the types are
    matched when an object of them is shown, and their modules are not imported here."""
    formatter = shell.display_formatter.formatters["text/html"]
    for (module, name), draw in RENDERERS.items():
        formatter.for_type_by_name(module, name, draw)
