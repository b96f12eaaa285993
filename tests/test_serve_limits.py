"""`yieldgate serve` under concurrency (issue #32 item 5): requests for one run's plots at once share one
computation, a request that finds the computations at their bound is answered 503 with Retry-After, the figure
cache is bounded by bytes, and /api/runs pages. The computations are counted by `serve.data.computations`, which
the real `run_figures` increments; the gate is held by the test through the app's own `Gate`."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import anyio.to_thread
import numpy as np
import pytest
from starlette.testclient import TestClient

from tests.support.reliability import check
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.serve import data
from yieldgate.serve.app import create_app
from yieldgate.serve.limits import ServeLimits

RUNS = ("a", "b", "c", "d", "e")


def _short(text: str) -> str:
    return text if len(text) <= 110 else text[:109] + "…"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    step = np.arange(1, 201)
    with Ledger(path) as led:
        for k, name in enumerate(RUNS):
            led.create_run(name)
            led.append_steps(
                name,
                {
                    "step": step,
                    "tokens": step * 256.0,
                    "wall_s": step * 0.05,
                    "loss": 6.0 - np.log(step) * (0.5 + 0.01 * k),
                    "tokens_per_s": np.full(len(step), 5120.0),
                },
            )
            led.append_evals(
                name,
                [
                    EvalRecord(step=int(s), tokens=s * 256.0, task="val", metric="loss", value=5.0 - s / 100)
                    for s in (50, 100, 200)
                ],
            )
    return path


def _until(condition, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.slow
def test_requests_at_once_for_one_run_share_one_computation(db):
    # No cache, so only the single flight can spare the second computation; one step of room: one at a time.
    app = create_app(str(db), limits=ServeLimits(steps_at_once=1, wait_s=30, cache_bytes=0))
    client, work = TestClient(app), app.state.work
    before = data.computations["run_figures"]
    answers: list = [None, None]

    def ask(i: int) -> None:
        answers[i] = client.get("/api/run/figures", params={"name": "a"})

    with work.gate.hold(1, "the test"):  # the computations are at their bound: the first request waits at the gate
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        _until(lambda: work.flights.waiting() == 1)  # one leads (waiting at the gate), the other waits for it
    for t in threads:
        t.join(30)
    shared = data.computations["run_figures"] - before
    assert [a.status_code for a in answers] == [200, 200] and answers[0].content == answers[1].content
    assert shared == 1 and work.flights.shared == 1 and work.gate.in_use == 0
    check(
        "`yieldgate serve`: two requests at once for one run's plots",
        f"{shared} computation answers both, the same bytes to each",
        "0",
    )


def test_a_full_gate_answers_503_with_retry_after(db):
    # The gate full for longer than a request waits: 503, with Retry-After and one line; room again afterwards.
    app = create_app(str(db), limits=ServeLimits(steps_at_once=1, wait_s=0.2, cache_bytes=0))
    client, work = TestClient(app), app.state.work
    before = data.computations["run_figures"]
    with work.gate.hold(1, "the test"):
        busy = client.get("/api/run/figures", params={"name": "b"})
        page = client.get("/compare", params={"a": "a", "b": "b"})
        live = client.get("/api/run/live", params={"name": "b", "after": 200, "evals": 0})
    message = busy.json()["error"]
    assert busy.status_code == 503 and busy.headers["retry-after"] == "1" and "\n" not in message
    assert message.startswith("the dashboard is busy: 1 computation(s) reading 1 steps run now")
    assert page.status_code == live.status_code == 503 and page.headers["retry-after"] == "1"
    assert work.gate.refused == 3 and work.gate.in_use == 0 and data.computations["run_figures"] == before
    check(
        "`yieldgate serve`: a request while the computations are at their bound (steps_at_once=1)",
        f"waits 0.2 s, then {busy.status_code} with `Retry-After: {busy.headers['retry-after']}` and one line: "
        f"`{_short(message)}`",
        "0",
    )


@pytest.mark.slow
def test_the_figure_cache_is_bounded_by_the_bytes_it_keeps(db):
    app = create_app(str(db))
    client, cache = TestClient(app), app.state.figures
    before = data.computations["run_figures"]
    assert client.get("/api/run/figures", params={"name": "a"}).status_code == 200
    one = cache.bytes  # one run's plots, as sent
    cache.capacity = int(one * 1.5)  # room for one run's plots, not two
    for name in ("a", "b", "a"):  # a from the cache, b pushes a out, a drawn again
        assert client.get("/api/run/figures", params={"name": name}).status_code == 200
    assert data.computations["run_figures"] - before == 3 and cache.hits == 1
    assert 0 < cache.bytes <= int(one * 1.5) and len(cache._items) == 1


def test_the_runs_list_pages_with_its_total(db, cli_for):
    client = TestClient(create_app(str(db)))
    every = client.get("/api/runs").json()["runs"]
    assert every == cli_for(db).json("runs") and [r["name"] for r in every] == list(RUNS)
    page = client.get("/api/runs", params={"offset": 1, "limit": 2}).json()
    assert (page["total"], page["offset"], page["limit"], page["order"]) == (5, 1, 2, "oldest")
    assert page["runs"] == every[1:3]
    newest = client.get("/api/runs", params={"order": "newest", "limit": 2}).json()
    assert newest["runs"] == every[::-1][:2] and newest["offset"] == 0
    assert client.get("/api/runs", params={"offset": 5}).json() == {
        "total": 5,
        "offset": 5,
        "limit": data.PAGE,
        "order": "oldest",
        "runs": [],
    }
    for query, says in (
        ({"offset": -1}, "offset must be a whole number >= 0 (the runs to skip), got -1"),
        ({"limit": 0}, "limit must be a whole number from 1 to 1000 (the runs in a page), got 0"),
        ({"limit": "ten"}, "limit must be a whole number from 1 to 1000 (the runs in a page), got 'ten'"),
        ({"limit": 1001}, "limit must be a whole number from 1 to 1000 (the runs in a page), got 1001"),
        ({"order": "sideways"}, "order must be one of oldest, newest, got 'sideways'"),
    ):
        response = client.get("/api/runs", params=query)
        assert (response.status_code, response.json()) == (400, {"error": says})


DIGITS = "9" * 40


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/api/runs", {"offset": DIGITS}),
        ("/api/runs", {"limit": DIGITS}),
        ("/api/decisions", {"offset": DIGITS}),
        ("/api/campaigns", {"offset": "-" + DIGITS}),
        ("/api/run/live", {"name": "a", "after": DIGITS}),
        ("/api/run/live", {"name": "a", "after": "1", "curve_after": DIGITS, "evals": "0"}),
        ("/decision", {"id": DIGITS}),
    ],
)
def test_a_40_digit_number_in_a_query_is_a_400_naming_it(db, path, query):
    """Issue #46, item 8: `serve` answered 500 (SQLite's OverflowError) to a 40-digit offset or after."""
    response = TestClient(create_app(str(db)), raise_server_exceptions=False).get(path, params=query)
    assert response.status_code == 400, (response.status_code, response.text[:300])
    said = response.json()["error"] if path.startswith("/api/") else response.text
    assert "past the largest number the ledger holds" in said and "999999" in said, said
    if (path, list(query)) == ("/api/runs", ["offset"]):
        check(
            "`yieldgate serve`: a 40-digit `offset` or `after` in a query",
            f"400 with one line: `{_short(said)}` (before: 500, SQLite's OverflowError)",
            "0",
        )


def test_every_list_is_paged_with_a_bounded_limit(db, cli_for):
    """Issue #46, item 9: no list is served whole (the unpaged runs list was 830 MB at a 38.8 s median under
    load): runs, decisions and campaigns come a page at a time, at most `data.MAX_PAGE` a request."""
    client = TestClient(create_app(str(db)))
    with Ledger(db) as led:
        for i in range(7):
            led.add_decision(f"t{i}", "hold", evidence={"runs": ["a"]}, rationale="r")
            led.put_campaign(f"c{i}", {"recipes": ["x"]}, f"h{i}")
    for path, key, total in (
        ("/api/runs", "runs", 5),
        ("/api/decisions", "decisions", 7),
        ("/api/campaigns", "campaigns", 7),
    ):
        whole = client.get(path).json()
        assert (whole["total"], whole["offset"], whole["limit"], len(whole[key])) == (total, 0, data.PAGE, total)
        page = client.get(path, params={"offset": 2, "limit": 3}).json()
        assert page[key] == whole[key][2:5] and (page["offset"], page["limit"]) == (2, 3)
        too_many = client.get(path, params={"limit": data.MAX_PAGE + 1})
        assert too_many.status_code == 400 and f"from 1 to {data.MAX_PAGE}" in too_many.json()["error"]
    check(
        "`yieldgate serve`: a list asked for without a page, or with a limit past 1,000",
        "every list (`/api/runs`, `/api/decisions`, `/api/campaigns`) answers a page of 500 with its total; a limit "
        "past 1,000 is a 400 (before: `/api/runs` sent every run, 830 MB at a 38.8 s median under 50 clients)",
        "0",
    )


def test_the_bearer_scheme_is_matched_whatever_its_case(db):
    """RFC 7235: an auth scheme is case-insensitive; a lowercase `bearer` got 401."""
    token = "t0k3n-0123456789abcdef"
    client = TestClient(create_app(str(db), token=token))
    for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
        assert client.get("/api/runs", headers={"Authorization": f"{scheme} {token}"}).status_code == 200, scheme
    for wrong in (f"Basic {token}", f"Bearer{token}", f"bearer {token}x", "bearer"):
        assert client.get("/api/runs", headers={"Authorization": wrong}).status_code == 401, wrong
    check(
        "`yieldgate serve` with a token: `Authorization: bearer TOKEN` (lowercase scheme)",
        "200, as `Bearer` (RFC 7235: the scheme is case-insensitive); a wrong token or scheme is still 401 "
        "(before: 401)",
        "0",
    )


def test_computations_at_once_bound_light_computations_too(db):
    """Issue #46 item 9: small runs' plots, each light in steps, all ran at once under 50 clients and held a page of
    the runs list behind them for the interpreter (1.2 s for 0.05 s of work). One computation at a time by default:
    with one running, another waits its time and is answered 503, though the steps it reads would fit."""
    app = create_app(str(db), limits=ServeLimits(wait_s=0.2, cache_bytes=0))
    client, work = TestClient(app), app.state.work
    assert work.limits.computations_at_once == 1 and work.limits.steps_at_once >= 1000
    with work.gate.hold(1, "the test"):
        busy = client.get("/api/run/figures", params={"name": "b"})
        page = client.get("/api/runs", params={"limit": 2})  # no computation: answered at once
    assert busy.status_code == 503 and "1 computation(s) reading 1 steps" in busy.json()["error"]
    assert page.status_code == 200 and [r["name"] for r in page.json()["runs"]] == ["a", "b"]
    roomy = create_app(str(db), limits=ServeLimits(wait_s=0.2, cache_bytes=0, computations_at_once=2))
    with roomy.state.work.gate.hold(1, "the test"):
        assert TestClient(roomy).get("/api/run/figures", params={"name": "b"}).status_code == 200
    with pytest.raises(ValueError, match="computations_at_once must be >= 1, got 0"):
        ServeLimits(computations_at_once=0)


def test_a_live_polls_curve_is_computed_once_until_the_run_changes(db):
    """Issue #46 item 9: every live poll of a page that had not drawn the run's evaluations read the whole run again
    for its curve (a million steps each, 3.4 s p50 under 50 clients). The curve is kept like the plots, keyed by the
    run's evaluations and its last write: the same poll again is answered from it, and a new evaluation is read."""
    client = TestClient(create_app(str(db)))
    ask = {"name": "c", "after": 200, "evals": 0}
    before = data.computations["curve"]
    first, again = (client.get("/api/run/live", params=ask).json() for _ in range(2))
    assert first["curve"]["step"] == [50, 100, 200] and first["curve"]["loss"] == [4.5, 4.0, 3.0]
    assert again == first and data.computations["curve"] - before == 1
    with Ledger(db) as led:
        led.append_evals("c", [EvalRecord(step=150, tokens=150 * 256.0, task="val", metric="loss", value=3.5)])
    later = client.get("/api/run/live", params=ask).json()
    assert later["evals"] == 4 and later["curve"]["loss"] == [4.5, 4.0, 3.5, 3.0]
    assert data.computations["curve"] - before == 2


def test_the_server_answers_on_as_many_threads_as_its_limits_allow(db):
    """Issue #46 item 9: a request waiting for a computation holds one of the server's threads; with anyio's default
    40, fifty clients left cheap requests queued for a thread. The app's lifespan sets the count from its limits."""
    app = create_app(str(db), limits=ServeLimits(requests_at_once=123))
    with TestClient(app) as client:
        tokens = client.portal.call(lambda: anyio.to_thread.current_default_thread_limiter().total_tokens)
        assert tokens == 123 and client.get("/api/runs", params={"limit": 1}).status_code == 200
    assert ServeLimits().requests_at_once == 200
    with pytest.raises(ValueError, match="requests_at_once must be >= 1, got 0"):
        ServeLimits(requests_at_once=0)
