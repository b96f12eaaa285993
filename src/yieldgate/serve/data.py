"""What the dashboard shows, as JSON-ready data, read from the ledger by the same functions as the CLI.

Nothing here computes a result of its own: the runs table is `Ledger.runs`, a run's plots are the report's
(`sections.collect` + `figures.build_figures`), a comparison is `api.compare` (what
`yieldgate compare` calls). Every value is JSON-safe (`util.jsonsafe.json_safe`: NaN and inf become null).
"""

from __future__ import annotations

import base64
import json
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd

from yieldgate.analysis.compare import run_curve
from yieldgate.analysis.load import comparison_unit, load_run, metric_key
from yieldgate.ledger import Ledger
from yieldgate.report.console import decision_record, run_record
from yieldgate.report.figures.base import MAX_POINTS, Figure, downsample, figure_dict, smoothed
from yieldgate.report.figures.runs import build_figures
from yieldgate.report.sections import collect
from yieldgate.serve.limits import Work
from yieldgate.util.jsonsafe import json_safe

__all__ = [
    "paged",
    "runs_page",
    "run_record",
    "encode",
    "computations",
    "run_figures",
    "FigureCache",
    "live_points",
    "comparison_unit",
    "comparison_figures",
    "decision_records",
    "campaign_records",
]

T = TypeVar("T")

LIVE_COLUMNS = ("tokens", "wall_s", "tokens_per_s")
"""The step columns a live poll reads (the throughput trace grows from them between full redraws)."""
CURVE_COLUMNS = ("step", "tokens", "wall_s", "cost_usd", "loss")
"""The columns of a metric's curve a live poll sends: the axes of the loss plots, and the metric's value."""


PAGE = 500
"""Items in a page of a list (`/api/runs`, `/api/decisions`, `/api/campaigns`) asked for without its `limit`."""
MAX_PAGE = 1000
"""The most items one request for a list gets."""
PAGE_RUNS = PAGE
ORDERS = ("oldest", "newest")
"""The orders a page of runs may be listed in: the ledger's (oldest first, as `yieldgate runs`), or its reverse."""

computations: Counter[str] = Counter()
"""How many times each computation below ran in this process (`run_figures`, `curve`): a reload that hits the
cache, or a request that shares another's computation, adds nothing."""
_counting = threading.Lock()


def _computed(what: str) -> None:
    with _counting:
        computations[what] += 1


def encode(payload: Any) -> bytes:
    """JSON as the API sends it (what Starlette's JSONResponse writes): compact UTF-8, no NaN (`json_safe` first)."""
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def paged(items: list[Any], offset: int, limit: int, key: str) -> dict[str, Any]:
    """`limit` of `items` from the `offset`-th on, with their count: `{"total", "offset", "limit", key: [...]}`."""
    return {"total": len(items), "offset": offset, "limit": limit, key: items[offset : offset + limit]}


def runs_page(ledger: Ledger, offset: int, limit: int, *, order: str = "oldest") -> dict[str, Any]:
    """`limit` runs from the `offset`-th on, in `order` (`ORDERS`), as `yieldgate runs --json` lists each, with
    `total`, the ledger's count of runs: the steps and evaluations of the page's runs alone are read."""
    # The page's records alone are read and checked: a 10,000-run ledger's first page costs what a 500-run one does.
    page = ledger.run_records(totals=True, offset=offset, limit=limit, newest=order == "newest")
    return {
        "total": ledger.run_count(),
        "offset": offset,
        "limit": limit,
        "order": order,
        "runs": [run_record(r) for r in page],
    }


def _plain(value: Any) -> Any:
    """Arrays as plain lists (NaN as null, where the browser draws a gap), plotly's typed-array encoding
    (`{"dtype", "bdata"}`) decoded: the page appends live points to the traces, and `Plotly.extendTraces` only
    extends plain arrays."""
    if isinstance(value, dict) and "bdata" in value and "dtype" in value:  # plotly's encoding of a numpy array
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        value = array.reshape([int(n) for n in str(shape).split(",")]) if shape else array
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return json_safe(value)


def _figure(fig: Figure) -> dict[str, Any]:
    return {"id": fig.id, "title": fig.title, "notes": fig.notes, "figure": _plain(figure_dict(fig))}


def _cursor(ledger: Ledger, run: str, info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Where the run stands: its status (as `yieldgate runs` computes it), last step and number of evaluations.
    The page compares each poll's cursor with the one it drew. `info`: the run's `Ledger.run_info`, if read."""
    info = ledger.run_info(run) if info is None else info
    last = info["last_step"]
    return {
        "status": info["status"],
        "last_step": None if pd.isna(last) else int(last),
        "evals": len(ledger.evals(run)),
        "updated_at": info["updated_at"],
    }


def run_figures(
    ledger: Ledger, run: str, *, metric: str = "val/loss", smooth: float = 0.0, info: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A run's plots as plotly JSON (the report's figures for this one run), with its notes and cursor. The
    cursor's `curve_step` is the step of the last evaluation drawn (of `metric`, as resolved: a run without
    val/loss is drawn with the metric `default_metric` picks, named in the payload). `smooth`: the throughput's
    moving-average weight (`figures.smoothed`). `info`: the run's `Ledger.run_info`, if read already."""
    _computed("run_figures")
    cursor = _cursor(ledger, run, info)  # before the read: a point written in between shows at the next poll
    data = collect(ledger, [run], metric=metric, per="token")
    curve = data.runs[0].curve
    cursor["curve_step"] = int(curve["step"].max()) if len(curve) else None
    return json_safe(
        {
            "run": run,
            "metric": data.metric,
            "notes": data.notes,
            "cursor": cursor,
            "smooth": smooth,
            "figures": [_figure(f) for f in build_figures(data, smooth=smooth)],
        }
    )


class FigureCache:
    """The drawn plots of recent run pages as the JSON sent (`encode`), and the curves live polls ask for, so a
    reload or a second tab of a big, unchanged run costs a ledger query instead of the analysis (seconds at a million
    steps), and fifty tabs opening one run at once draw it once (`Work.compute`). Bounded by bytes
    (`ServeLimits.cache_bytes`, a curve counted as the JSON it is sent as), the least recently used going first. An
    entry is keyed by everything it is drawn from that can change: the run's `updated_at` (bumped by every write of
    steps, evaluations, status or manifest), and for the plots also the run's status (as computed at read time), its
    events (diagnoses drawn as spans) and its notes."""

    def __init__(self, work: Work | None = None) -> None:
        self.work = work or Work()
        self.capacity = self.work.limits.cache_bytes
        self.hits = 0
        self.bytes = 0
        self._items: OrderedDict[tuple[Any, ...], tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _signature(ledger: Ledger, run: str, info: dict[str, Any]) -> tuple[Any, ...]:
        events = ledger.events(run)
        return (
            info["status"],
            info["updated_at"],
            len(events),
            int(events["id"].max()) if len(events) else None,
            int((events["state"] == "resolved").sum()),
            json.dumps(ledger.meta(run), sort_keys=True, default=str),
        )

    def _keep(self, key: tuple[Any, ...], value: Any, size: int) -> None:
        with self._lock:
            if key in self._items or size > self.capacity:
                return
            self._items[key] = (value, size)
            self.bytes += size
            while self.bytes > self.capacity:
                _, (_, dropped) = self._items.popitem(last=False)
                self.bytes -= dropped

    def cached(self, key: tuple[Any, ...], steps: int, what: str, compute: Callable[[], tuple[T, int]]) -> T:
        """The value kept under `key`; else `compute()` (value, its size in bytes) run once for every request
        asking meanwhile, within the gate's room for `steps`, and kept."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return cast(T, self._items[key][0])

        def computed() -> T:
            value, size = compute()
            self._keep(key, value, size)
            return value

        return self.work.compute(key, steps, what, computed)

    def run_figures(self, ledger: Ledger, run: str, *, metric: str = "val/loss", smooth: float = 0.0) -> bytes:
        """`run_figures` as the JSON sent, from the cache when nothing it is drawn from changed since; else
        computed once for every request asking meanwhile, within the gate's room for the run's steps."""
        info = ledger.run_info(run)  # before the read, as `run_figures`' cursor
        key = ("figures", run, metric, smooth, *self._signature(ledger, run, info))

        def draw() -> tuple[bytes, int]:
            body = encode(run_figures(ledger, run, metric=metric, smooth=smooth, info=info))
            return body, len(body)

        return self.cached(key, int(info["steps"]), f"the plots of run {run!r}", draw)


def live_points(
    ledger: Ledger,
    run: str,
    after: int | None,
    *,
    metric: str = "val/loss",
    evals_seen: int | None = None,
    curve_after: int | None = None,
    smooth: float = 0.0,
    smooth_from: float | None = None,
    cache: FigureCache | None = None,
) -> dict[str, Any]:
    """What a live page needs since its last poll: the cursor; the throughput points of the steps after `after`
    (smoothed as the page draws them, continuing from `smooth_from`, the last value drawn; downsampled like the
    plots, so a page left open on a fast run receives a bounded amount); and, when the run has more evaluations
    than the page's `evals_seen`, the points of `metric`'s curve after step `curve_after` on every axis
    (`compare.run_curve`, what the loss plots draw), so the page shows a new evaluation at once and redraws the
    rest (yields, bands) after. The curve is the run read whole: with a `cache`, computed once for the polls asking
    for it at the same time, within its gate, and kept for the polls after them until the run changes."""
    info = ledger.run_info(run)
    cursor = _cursor(ledger, run, info)
    steps = ledger.steps(run, list(LIVE_COLUMNS), after=cursor["last_step"] if after is None else after)
    if after is None:
        steps = steps.iloc[0:0]  # no cursor yet: the page draws the whole run from `run_figures`
    tps = steps[["step", "wall_s", "tokens_per_s"]].dropna()
    tps = downsample(
        tps.assign(tokens_per_s=smoothed(tps["tokens_per_s"], smooth, smooth_from)),
        "wall_s",
        "tokens_per_s",
        MAX_POINTS,
    )
    out = {
        **cursor,
        "after": after,
        "new_steps": len(steps),
        "curve": None,
        "throughput": {
            "step": tps["step"].tolist(),
            "wall_s": tps["wall_s"].tolist(),
            "tokens_per_s": tps["tokens_per_s"].tolist(),
        },
    }
    if evals_seen is not None and cursor["evals"] != evals_seen:

        def read() -> dict[str, list[Any]]:
            _computed("curve")
            curve = run_curve(load_run(ledger, run), *metric_key(metric, "token"))
            if curve_after is not None:
                curve = curve[curve["step"] > curve_after]
            return json_safe({c: curve[c].tolist() for c in CURVE_COLUMNS})

        def sized() -> tuple[dict[str, list[Any]], int]:
            value = read()
            return value, len(encode(value))

        key = ("curve", run, metric, curve_after, cursor["evals"], info["updated_at"])
        out["curve"] = read() if cache is None else cache.cached(key, int(info["steps"]), f"run {run!r}", sized)
    return json_safe(out)


def comparison_figures(
    ledger: Ledger, a: str, b: str, *, metric: str = "val/loss", per: str | None = None
) -> dict[str, Any]:
    """The plots of both groups' runs together (the report's figures of `yieldgate report A B`)."""
    data = collect(ledger, [a, b], metric=metric, per=per)
    return json_safe(
        {
            "runs": [v.name for v in data.runs],
            "metric": data.metric,
            "notes": data.notes,
            "figures": [_figure(f) for f in build_figures(data)],
        }
    )


def decision_records(ledger: Ledger, target: str | None = None) -> list[dict[str, Any]]:
    """The gate decisions, oldest first, as `yieldgate decisions [TARGET] --json` prints them."""
    return [json_safe(decision_record(r)) for r in ledger.decisions(target).to_dict("records")]


def campaign_records(ledger: Ledger) -> list[dict[str, Any]]:
    """Every campaign's stored record (`Ledger.campaign`: spec, summary, times), oldest first."""
    return [ledger.campaign(name) for name in ledger.campaigns()]
