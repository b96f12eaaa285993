"""The dashboard as an ASGI app (Starlette): JSON under /api, pages that draw it, assets from installed packages.

Read-only: every route is a GET and each request opens the ledger with `Ledger(readonly=True)` for itself, so a
Tracker writing in another process is seen at the next request and nothing here can write. With a token
(`create_app(token=...)`, always when bound beyond loopback: `server.py`) every request must carry it: as
`Authorization: Bearer <token>` (scripts), or as the cookie that a visit to an address ending in `?token=<token>`
sets before it redirects to the same address without the token (browsers); without it the answer is 401. Every
response carries a Content-Security-Policy that allows scripts from this server only (plotly.js from the installed
`plotly` package: the page works offline). The heavy reads (a run's plots, a live poll's curve, a comparison) go
through the app's `limits.Work`: one computation for the requests asking for the same thing at once, and a bounded
number of steps read at once; a request that finds no room within `ServeLimits.wait_s` is answered 503 with
Retry-After.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import anyio.to_thread
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yieldgate import api
from yieldgate.errors import InputError, RunNotFound, YieldgateError
from yieldgate.ledger import Ledger
from yieldgate.ledger.pg import masked
from yieldgate.serve import data, views
from yieldgate.serve.limits import Busy, ServeLimits, Work
from yieldgate.util.jsonsafe import json_safe

__all__ = ["create_app", "CSP", "TOKEN_COOKIE"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
"""Scripts only from this server (no inline script, no eval); plotly sets inline styles, so styles may be inline."""

HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
TOKEN_COOKIE = "yieldgate_token"
N = TypeVar("N", int, float)
STATIC = Path(__file__).with_name("static")


class _Guard:
    """Token check (when there is a token) and the security headers on every response, 401s included."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app, self.token = app, token

    def _matches(self, given: str | None) -> bool:
        return given is not None and self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
                if not scope["path"].startswith("/static/"):
                    headers["cache-control"] = "no-store"
            await send(message)

        if self.token is not None:
            request = Request(scope)
            bearer = request.headers.get("authorization", "")
            if self._matches(request.query_params.get("token")):
                # The token came in the URL (the one `yieldgate serve` printed): keep it in a cookie and drop it from
                # the address, so it is not left in the history or shown on screen.
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                path = "/" + scope["path"].lstrip("/")  # `//host/x` would send the browser to another host
                response: Response = RedirectResponse(path + ("?" + urlencode(rest) if rest else ""), 303)
                response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
                await response(scope, receive, send_with_headers)
                return
            scheme, _, given = bearer.strip().partition(" ")
            if not (
                self._matches(request.cookies.get(TOKEN_COOKIE))
                # RFC 7235: the scheme is case-insensitive (`bearer` from a script was a 401)
                or (scheme.lower() == "bearer" and self._matches(given.strip()))
            ):
                response = PlainTextResponse(
                    "401 unauthorized: this dashboard needs its token; open the address `yieldgate serve` printed "
                    "(it ends in ?token=...) or send the header `Authorization: Bearer <token>`\n",
                    401,
                    headers={"www-authenticate": "Bearer"},
                )
                await response(scope, receive, send_with_headers)
                return
        await self.app(scope, receive, send_with_headers)


class _NotFound(YieldgateError):
    """What a page asks for (a campaign, a decision) is not in the ledger: 404."""


def _campaign(led: Ledger, name: str) -> dict[str, Any]:
    if name not in led.campaigns():
        known = ", ".join(led.campaigns()) or "none (`yieldgate probe CAMPAIGN.yaml` runs one)"
        raise _NotFound(f"no campaign named {name!r} in this ledger; campaigns: {known}")
    return led.campaign(name)


def _arg(request: Request, name: str, example: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise InputError(f"{request.url.path}: the query parameter {name!r} is missing; e.g. {example}")
    return value


LARGEST = 2**63 - 1
"""The largest whole number a query may give: the ledger's (SQLite's INTEGER); a 40-digit offset was a 500."""


def _number(query: Any, name: str, what: str, kind: Callable[[str], N]) -> N | None:
    """The query parameter `name` read by `kind` (int, float); None when absent or empty; 400 for what is not one,
    or a whole number past what the ledger can hold."""
    value = query.get(name)
    shown = repr(value) if value is None or len(value) <= 40 else f"{value[:20]!r}... ({len(value):,} characters)"
    try:
        number = None if value in (None, "") else kind(value[:4301])
    except ValueError:
        raise InputError(f"{name} must be {what}, got {shown}") from None
    if isinstance(number, int) and not -LARGEST <= number <= LARGEST:
        raise InputError(f"{name} must be {what}, got {shown}: past the largest number the ledger holds (2**63 - 1)")
    return number


def _int(query: Any, name: str, what: str) -> int | None:
    return _number(query, name, what, int)


def _float(query: Any, name: str, what: str) -> float | None:
    return _number(query, name, what, float)


def _smooth(query: Any) -> float:
    return _float(query, "smooth", "a moving-average weight in [0, 1)") or 0.0


def _per(query: Any) -> str | None:
    """`per` as the query sets it (the library checks it); None (not set): chosen by the tokenizers
    (`data.comparison_unit`)."""
    return query.get("per") or None


def _options(request: Request) -> dict[str, Any]:
    """The comparison options a query may set, as `api.compare` takes them (the rest stay the CLI's defaults)."""
    q = request.query_params
    out: dict[str, Any] = {}
    for key in ("at", "metric", "primary"):
        if q.get(key):
            out[key] = q[key]
    if q.get("target_loss"):
        try:
            out["target"] = float(q["target_loss"])
        except ValueError:
            raise InputError(f"target_loss must be a number, got {q['target_loss']!r}") from None
    return out


def _ledger(request: Request) -> Ledger:
    """The app's ledger, opened read-only for this request (a Tracker writing elsewhere is seen at the next one)."""
    return Ledger(request.app.state.location, readonly=True)


def _figures(request: Request) -> data.FigureCache:
    """The app's figure cache, kept across requests (`create_app`)."""
    return request.app.state.figures


def _work(request: Request) -> Work:
    """The app's gate and single flights (`limits.Work`), shared by every request."""
    return request.app.state.work


def _weight(request: Request, led: Ledger, patterns: tuple[str, ...]) -> int:
    """The steps a comparison of `patterns` reads: its runs' when each names one run; a glob's runs are known only
    once matched, so a comparison of globs weighs the gate's whole room (it runs alone)."""
    total = 0
    for pattern in patterns:
        try:
            total += int(led.run_info(pattern)["steps"])
        except RunNotFound:
            return _work(request).limits.steps_at_once
    return total


def _compute(request: Request, led: Ledger, patterns: tuple[str, ...], compute: Callable[[], Any]) -> Any:
    """`compute()` through the app's `Work`, keyed by the request's path and query (requests asking the same at once
    share one), weighed by the steps of the runs `patterns` name."""
    key = (request.url.path, tuple(sorted(request.query_params.multi_items())))
    what = f"{request.url.path} of {' and '.join(map(repr, patterns))}"
    return _work(request).compute(key, _weight(request, led, patterns), what, compute)


def _json(body: bytes) -> Response:
    return Response(body, media_type="application/json")


# -- pages ------------------------------------------------------------------------------------------------------


def runs_page(request: Request) -> HTMLResponse:
    return HTMLResponse(views.runs_page(masked(request.app.state.location)))


def run_page(request: Request) -> HTMLResponse:
    name = _arg(request, "name", "/run?name=bs64-seed0")
    with _ledger(request) as led:
        return HTMLResponse(
            views.run_page(
                led,
                name,
                metric=request.query_params.get("metric") or "val/loss",
                smooth=_smooth(request.query_params),
            )
        )


def compare_page(request: Request) -> HTMLResponse:
    a, b = _arg(request, "a", "/compare?a=base&b=new"), _arg(request, "b", "/compare?a=base&b=new")
    with _ledger(request) as led:
        per, note = data.comparison_unit(led, a, b, _per(request.query_params))
        result = _compute(request, led, (a, b), lambda: api.compare(a, b, ledger=led, per=per, **_options(request)))
    return HTMLResponse(views.compare_page(result, dict(request.query_params), per=per, note=note))


def campaigns_page(request: Request) -> HTMLResponse:
    with _ledger(request) as led:
        return HTMLResponse(views.campaigns_page(data.campaign_records(led)))


def campaign_page(request: Request) -> HTMLResponse:
    name = _arg(request, "name", "/campaign?name=mixtures")
    with _ledger(request) as led:
        record = _campaign(led, name)
        decisions = [d for d in data.decision_records(led) if d["target"].startswith(f"{name}/")]
    return HTMLResponse(views.campaign_page(record, decisions))


def decisions_page(request: Request) -> HTMLResponse:
    target = request.query_params.get("target") or None
    with _ledger(request) as led:
        return HTMLResponse(views.decisions_page(data.decision_records(led, target), target))


def decision_page(request: Request) -> HTMLResponse:
    wanted = _int(request.query_params, "id", "a decision number")
    if wanted is None:
        raise InputError("/decision: the query parameter 'id' is missing; e.g. /decision?id=1")
    with _ledger(request) as led:
        found = [d for d in data.decision_records(led) if d["id"] == wanted]
    if not found:
        raise _NotFound(f"no gate decision #{wanted} in this ledger; /decisions lists them")
    return HTMLResponse(views.decision_page(found[0]))


# -- JSON -------------------------------------------------------------------------------------------------------


def _page(request: Request, what: str) -> tuple[int, int]:
    """The `offset` and `limit` a list's query asks for (defaults: 0 and `data.PAGE`), each bounded: every list the
    dashboard serves is paged, at most `data.MAX_PAGE` items a request."""
    q = request.query_params
    offset = _int(q, "offset", f"a whole number >= 0 (the {what} to skip)")
    limit = _int(q, "limit", f"a whole number from 1 to {data.MAX_PAGE} (the {what} in a page)")
    if offset is not None and offset < 0:
        raise InputError(f"offset must be a whole number >= 0 (the {what} to skip), got {offset}")
    if limit is not None and not 1 <= limit <= data.MAX_PAGE:
        raise InputError(f"limit must be a whole number from 1 to {data.MAX_PAGE} (the {what} in a page), got {limit}")
    return offset or 0, limit or data.PAGE


def api_campaigns(request: Request) -> JSONResponse:
    """The campaigns' names, a page at a time: `{"total", "offset", "limit", "campaigns"}`."""
    offset, limit = _page(request, "campaigns")
    with _ledger(request) as led:
        return JSONResponse(data.paged(led.campaigns(), offset, limit, "campaigns"))


def api_campaign(request: Request) -> JSONResponse:
    name = _arg(request, "name", "/api/campaign?name=mixtures")
    with _ledger(request) as led:
        return JSONResponse(json_safe(_campaign(led, name)))


def api_decisions(request: Request) -> JSONResponse:
    """The gate decisions (of `target`), oldest first, a page at a time: `{"total", "offset", "limit", "decisions"}`."""
    offset, limit = _page(request, "decisions")
    with _ledger(request) as led:
        records = data.decision_records(led, request.query_params.get("target") or None)
        return JSONResponse(data.paged(records, offset, limit, "decisions"))


def api_runs(request: Request) -> Response:
    """A page of the runs, as `yieldgate runs --json` lists each, with the ledger's count (`data.runs_page`):
    `{"total", "offset", "limit", "order", "runs"}`; every run at once was 830 MB and 39 s a request on 10,000 runs
    under load, so there is no unpaged list."""
    offset, limit = _page(request, "runs")
    order = request.query_params.get("order") or "oldest"
    if order not in data.ORDERS:
        raise InputError(f"order must be one of {', '.join(data.ORDERS)}, got {order!r}")
    with _ledger(request) as led:
        return _json(data.encode(data.runs_page(led, offset, limit, order=order)))


def api_run_figures(request: Request) -> Response:
    name = _arg(request, "name", "/api/run/figures?name=bs64-seed0")
    with _ledger(request) as led:
        return _json(
            _figures(request).run_figures(
                led,
                name,
                metric=request.query_params.get("metric") or "val/loss",
                smooth=_smooth(request.query_params),
            )
        )


def api_run_live(request: Request) -> JSONResponse:
    name = _arg(request, "name", "/api/run/live?name=bs64-seed0&after=1200")
    q = request.query_params
    with _ledger(request) as led:
        return JSONResponse(
            data.live_points(
                led,
                name,
                _int(q, "after", "a step number"),
                metric=q.get("metric") or "val/loss",
                evals_seen=_int(q, "evals", "a count of evaluations"),
                curve_after=_int(q, "curve_after", "a step number"),
                smooth=_smooth(q),
                smooth_from=_float(q, "smooth_from", "a number"),
                cache=_figures(request),
            )
        )


def api_compare(request: Request) -> JSONResponse:
    a, b = _arg(request, "a", "/api/compare?a=base&b=new"), _arg(request, "b", "/api/compare?a=base&b=new")
    with _ledger(request) as led:
        per, _ = data.comparison_unit(led, a, b, _per(request.query_params))
        result = _compute(request, led, (a, b), lambda: api.compare(a, b, ledger=led, per=per, **_options(request)))
        return JSONResponse(json_safe(result.to_dict()))


def api_compare_figures(request: Request) -> JSONResponse:
    a, b = _arg(request, "a", "/api/compare/figures?a=x&b=y"), _arg(request, "b", "/api/compare/figures?a=x&b=y")
    metric, per = request.query_params.get("metric") or "val/loss", _per(request.query_params)
    with _ledger(request) as led:
        return JSONResponse(
            _compute(request, led, (a, b), lambda: data.comparison_figures(led, a, b, metric=metric, per=per))
        )


def plotly_js(request: Request) -> FileResponse:
    # The plotly.js bundle the installed plotly package ships (what `plotly.offline.get_plotlyjs` reads). Its
    # address names plotly's version, so a browser may keep it (and its compiled code) for good: parsing it
    # is most of a run page's time in a browser.
    path = resources.files("plotly") / "package_data" / "plotly.min.js"
    return FileResponse(
        str(path), media_type="text/javascript", headers={"cache-control": "public, max-age=31536000, immutable"}
    )


async def failed(request: Request, exc: Exception) -> Response:
    """A library error as the answer: 404 for what is not in the ledger, 503 with Retry-After when the dashboard's
    computations are at their bound (`limits.Busy`), else 400; JSON under /api, else a page."""
    status = 404 if isinstance(exc, (RunNotFound, _NotFound)) else 503 if isinstance(exc, Busy) else 400
    headers = {"retry-after": str(exc.retry_after_s)} if isinstance(exc, Busy) else None
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": str(exc)}, status, headers=headers)
    return HTMLResponse(views.error_page(str(exc)), status, headers=headers)


ROUTES = [
    Route("/", runs_page),
    Route("/run", run_page),
    Route("/compare", compare_page),
    Route("/campaigns", campaigns_page),
    Route("/campaign", campaign_page),
    Route("/decisions", decisions_page),
    Route("/decision", decision_page),
    Route("/api/runs", api_runs),
    Route("/api/run/figures", api_run_figures),
    Route("/api/run/live", api_run_live),
    Route("/api/compare", api_compare),
    Route("/api/compare/figures", api_compare_figures),
    Route("/api/campaigns", api_campaigns),
    Route("/api/campaign", api_campaign),
    Route("/api/decisions", api_decisions),
    Route(views.PLOTLY_JS, plotly_js),
    Mount("/static", StaticFiles(directory=STATIC), name="static"),
]
"""Every address the dashboard answers: its pages, their JSON under /api, and the assets."""


def create_app(
    location: str,
    *,
    token: str | None = None,
    allowed_hosts: list[str] | None = None,
    limits: ServeLimits | None = None,
) -> Starlette:
    """The dashboard over the ledger at `location` (read-only). `token`: required of every request when set.
    `allowed_hosts`: the Host headers answered (a loopback server answers only its own names, so a web page
    cannot reach it through a DNS name that points at 127.0.0.1); None answers any. `limits`: how much it computes
    and keeps at once (`ServeLimits()` when None)."""
    middleware = [Middleware(_Guard, token=token)]
    if allowed_hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts))
    work = Work(limits)

    @asynccontextmanager
    async def threads(app: Starlette) -> AsyncIterator[None]:
        # Every page and API call is a plain function run on anyio's threads: as many as the limits allow.
        anyio.to_thread.current_default_thread_limiter().total_tokens = work.limits.requests_at_once
        yield

    app = Starlette(routes=ROUTES, middleware=middleware, exception_handlers={YieldgateError: failed}, lifespan=threads)
    app.state.location = location
    app.state.work = work
    app.state.figures = data.FigureCache(app.state.work)
    return app
