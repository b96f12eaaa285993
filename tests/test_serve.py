"""`yieldgate serve`: the JSON and pages through Starlette's TestClient (the same numbers as the CLI, escaping,
headers, the token, downsampling of a million-step run), and the real server driven in headless Chromium while a
Tracker writes in another process (slow)."""

from __future__ import annotations

import base64
import html
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pytest
from starlette.testclient import TestClient

from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.manifest import parse_manifest
from yieldgate.report.console import (
    CHECK_RESULT,
    accuracy_lines,
    evidence_lines,
    forecast_lines,
    policy_label,
    ranking_tables,
)
from yieldgate.report.figures.base import MAX_POINTS, smoothed
from yieldgate.serve import open_server
from yieldgate.serve.app import CSP, create_app
from yieldgate.serve.views import DECISION_FIELDS, PLOTLY_JS

EVIL = "<img src=x onerror=alert(1)>"
EVIL_BODY = "<script>window.__pwned=1</script>"
TOKEN = "t0ken-for-the-tests-0123456789"


def _run(led: Ledger, name: str, *, seed: int, n: int = 400, batch: int = 256, evals: int = 8) -> None:
    """A run through the API: steps with throughput and a loss, `evals` evaluations of val/loss, a GNS signal."""
    led.create_run(name, manifest=parse_manifest({"optimisation": {"batch_size": batch}, "seed": seed}))
    step = np.arange(1, n + 1)
    loss = 6.0 - np.log(step) * (0.5 + 0.01 * seed)
    led.append_steps(
        name,
        {
            "step": step,
            "tokens": step * float(batch),
            "wall_s": step * 0.05,
            "loss": loss,
            "tokens_per_s": np.full(n, batch / 0.05) + seed,
            "signals/gns": np.full(n, 300.0),
            "clipped": (step % 7 == 0).astype(float),
        },
    )
    # A loss scale every 10 steps, halved at two overflows.
    led.append_steps(
        name, {"step": step[9::10], "signals/loss_scale": 65536.0 / 2.0 ** np.searchsorted([150, 300], step[9::10])}
    )
    at = np.linspace(n // evals, n, evals).astype(int)
    led.append_evals(
        name,
        [
            EvalRecord(step=int(s), tokens=s * float(batch), task="val", metric="loss", value=float(loss[s - 1]) + 0.05)
            for s in at
        ],
    )


@pytest.fixture
def runs_db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    with Ledger(path) as led:
        _run(led, "base/s0", seed=0)
        _run(led, "base/s1", seed=1)
        _run(led, "big/s0", seed=0, batch=512)
        _run(led, EVIL, seed=2)
        led.add_event(
            "base/s0",
            "diagnosis",
            {"cause": "schedule", "confidence": 0.6, "evidence": {"note": EVIL_BODY}},
            start_step=100,
            end_step=150,
        )
        led.add_event("base/s0", "warning", {"message": EVIL_BODY})
        led.set_status("base/s1", "finished")
        led.tag_run("big/s0", ["bs512"])
    return path


@pytest.fixture
def client(runs_db: Path) -> TestClient:
    return TestClient(create_app(str(runs_db)))


def _values(trace: dict, axis: str = "x") -> np.ndarray:
    """A trace's points as plotly's JSON holds them: a list, or a typed array (`{"dtype", "bdata"}`)."""
    v = trace[axis]
    if isinstance(v, dict):
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
    return np.asarray(v, dtype=float)


def _figures(payload: dict) -> dict[str, dict]:
    return {f["id"]: f for f in payload["figures"]}


def test_the_runs_json_is_what_yieldgate_runs_prints(client, cli_for, runs_db):
    served = client.get("/api/runs").json()["runs"]  # a page: the first 500
    assert served == cli_for(runs_db).json("runs")
    assert [r["name"] for r in served] == ["base/s0", "base/s1", "big/s0", EVIL]
    assert {r["name"]: r["status"] for r in served}["base/s1"] == "finished"


def test_a_run_page_draws_the_report_figures_with_units_and_every_evaluation(client, runs_db):
    payload = client.get("/api/run/figures", params={"name": "base/s0"}).json()
    figs = _figures(payload)
    assert list(figs) == [
        "loss-tokens",
        "loss-time",
        "train-loss",
        "throughput-learning",
        "tranche-yields",
        "signals-gns",
        "signals-clipping",
    ]
    with Ledger(runs_db, readonly=True) as led:
        evals, steps = led.evals("base/s0"), led.steps("base/s0")
    (loss,) = figs["loss-tokens"]["figure"]["data"]
    assert loss["meta"]["series"] == "val/loss@tokens" and loss["name"] == "base/s0"
    assert _values(loss, "x").tolist() == evals["tokens"].tolist()
    assert _values(loss, "y").tolist() == evals["value"].tolist()
    tps = figs["throughput-learning"]["figure"]["data"][0]
    assert tps["meta"]["series"] == "tokens_per_s" and len(_values(tps)) == len(steps)
    yields = figs["tranche-yields"]["figure"]["data"][0]
    assert len(_values(yields)) == len(evals) - 1 and yields["error_y"]["type"] == "data"  # the noise band
    layout = figs["loss-tokens"]["figure"]["layout"]
    assert layout["xaxis"]["title"]["text"] == "accepted tokens (tokens)"
    assert layout["yaxis"]["title"]["text"] == "val/loss (nats/token)"
    assert figs["loss-time"]["figure"]["layout"]["xaxis"]["title"]["text"] == "wall-clock (s)"
    assert figs["signals-gns"]["figure"]["layout"]["yaxis"]["title"]["text"] == "B_simple (tokens, log)"
    clipping = figs["signals-clipping"]["figure"]
    share, scale = clipping["data"]
    assert (share["meta"]["series"], scale["meta"]["series"]) == ("clipped_share", "signals/loss_scale")
    assert len(_values(share)) == len(steps) and _values(share, "y")[-1] == pytest.approx(
        100 * np.mean(steps["clipped"].to_numpy()[-100:])
    )  # the share of the last 100 steps, in %
    assert _values(scale, "y").tolist() == [65536.0] * 15 + [32768.0] * 15 + [16384.0] * 10
    assert clipping["layout"]["yaxis2"]["type"] == "log"
    # The diagnosis is a shaded span over its steps (in tokens: 256 per step), labelled with its cause.
    (span,) = layout["shapes"]
    assert (span["x0"], span["x1"]) == (100 * 256.0, 150 * 256.0)
    assert [a["text"] for a in layout["annotations"]] == ["schedule"]
    assert payload["cursor"] == {
        "status": "running",
        "last_step": 400,
        "evals": 8,
        "curve_step": 400,
        "updated_at": payload["cursor"]["updated_at"],
    }


@pytest.mark.slow
def test_a_runs_plots_are_drawn_again_only_when_what_they_show_changed(runs_db):
    app = create_app(str(runs_db))
    client = TestClient(app)

    def spans() -> list:
        payload = client.get("/api/run/figures", params={"name": "base/s1"}).json()
        return _figures(payload)["loss-tokens"]["figure"]["layout"].get("shapes", [])

    assert spans() == [] and spans() == [] and app.state.figures.hits == 1  # the reload came from the cache
    with Ledger(runs_db) as led:  # an event changes no step, evaluation or status: the plots must still show it
        led.add_event("base/s1", "diagnosis", {"cause": "data_exhaustion"}, start_step=200, end_step=300)
    assert len(spans()) == 1 and app.state.figures.hits == 1
    with Ledger(runs_db) as led:
        led.set_status("base/s1", "failed")
    assert client.get("/api/run/figures", params={"name": "base/s1"}).json()["cursor"]["status"] == "failed"
    assert app.state.figures.hits == 1


def test_a_run_with_only_a_training_loss_or_nothing_yet_gets_a_page(tmp_path):
    """The Hugging Face Trainer's default (steps and a training loss, no tokens, no evaluations) is drawn against
    steps, and says it uses the training loss; a run just created draws nothing and says why."""
    path = tmp_path / "few.db"
    with Ledger(path) as led:
        led.create_run("fresh")
        led.create_run("hf")
        led.append_steps("hf", {"step": list(range(10, 210, 10)), "loss": [3.0 - 0.05 * k for k in range(20)]})
    client = TestClient(create_app(str(path)))
    hf = client.get("/api/run/figures", params={"name": "hf"}).json()
    assert hf["metric"] == "loss" and [f["id"] for f in hf["figures"]] == ["loss-steps"]
    # No token count: the loss is drawn as logged, never labelled nats/token (a classifier's or YOLO's loss is not one).
    assert _figures(hf)["loss-steps"]["figure"]["layout"]["yaxis"]["title"]["text"] == "loss (as logged)"
    assert "hf has no val/loss evaluations; using loss (the training loss) (choose with metric=...)" in hf["notes"]
    fresh = client.get("/api/run/figures", params={"name": "fresh"}).json()
    assert fresh["figures"] == [] and fresh["cursor"]["last_step"] is None
    assert "run 'fresh' has 0 evaluation(s) of val/loss: no curve or yields drawn for it" in fresh["notes"]
    for name in ("hf", "fresh"):
        assert client.get("/run", params={"name": name}).status_code == 200


def test_the_run_page_shows_events_manifest_and_status(client):
    page = client.get("/run", params={"name": "base/s0"}).text
    assert 'data-run="base/s0"' in page and 'class="status status-running">running</span>' in page
    assert "<td>schedule</td>" in page and "<td>warning</td>" in page  # the events table
    assert "optimisation.batch_size" in page and "<td>256</td>" in page  # the manifest, one field per row


@pytest.mark.slow
def test_the_comparison_is_exactly_what_yieldgate_compare_prints(client, cli_for, runs_db):
    cli = cli_for(runs_db)
    for args in ({"a": "base/*", "b": "big/s0"}, {"a": "base/s0", "b": "big/s0", "at": "time"}):
        served = client.get("/api/compare", params=args).json()
        options = ["--at", args["at"]] if "at" in args else []
        assert served == cli.json("compare", args["a"], args["b"], *options)
    page = client.get("/compare", params={"a": "base/*", "b": "big/s0"}).text
    expected = cli.json("compare", "base/*", "big/s0")
    assert f"<strong>{expected['verdict']}</strong>" in page and "effective token multiplier" in page
    figs = _figures(client.get("/api/compare/figures", params={"a": "base/*", "b": "big/s0"}).json())
    assert [t["name"] for t in figs["loss-tokens"]["figure"]["data"]] == ["base/s0", "base/s1", "big/s0"]


@pytest.mark.slow
def test_every_user_string_is_shown_as_text(client):
    page = client.get("/run", params={"name": EVIL}).text
    assert EVIL not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    page = client.get("/run", params={"name": "base/s0"}).text
    assert EVIL_BODY not in page and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    (trace,) = _figures(client.get("/api/run/figures", params={"name": EVIL}).json())["loss-tokens"]["figure"]["data"]
    assert trace["name"] == "&lt;img src=x onerror=alert(1)&gt;"  # plotly draws a subset of HTML in names
    page = client.get("/compare", params={"a": EVIL, "b": "big/s0"}).text
    assert EVIL not in page and "<script>" not in page.replace('<script src="/static/', "")
    missing = client.get("/run", params={"name": EVIL_BODY})
    assert missing.status_code == 404 and EVIL_BODY not in missing.text


def test_every_response_carries_the_security_headers(client):
    for path in ("/", "/run?name=base/s0", "/api/runs", "/static/app.js", "/run?name=nope", "/api/run/live"):
        response = client.get(path)
        assert response.headers["content-security-policy"] == CSP, path
        assert response.headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self';" in CSP and "unsafe-eval" not in CSP and "'unsafe-inline'" not in CSP.split(";")[1]
    plotly = client.get(PLOTLY_JS)
    assert plotly.status_code == 200 and len(plotly.content) > 1_000_000  # from the installed package: offline
    assert plotly.headers["cache-control"] == "public, max-age=31536000, immutable"  # its version is in its address
    assert f'<script src="{PLOTLY_JS}" defer>' in client.get("/run?name=base/s0").text


def test_the_server_is_read_only(client):
    for method in ("post", "put", "delete"):
        assert getattr(client, method)("/api/runs").status_code == 405


def test_bad_queries_are_one_clear_error(client):
    response = client.get("/api/run/live", params={"name": "base/s0", "after": "x"})
    assert response.status_code == 400 and response.json() == {"error": "after must be a step number, got 'x'"}
    response = client.get("/api/run/live", params={"name": "base/s0", "evals": "1.5"})
    assert response.json() == {"error": "evals must be a count of evaluations, got '1.5'"}
    response = client.get("/api/run/figures")
    assert response.status_code == 400 and "the query parameter 'name' is missing" in response.json()["error"]
    response = client.get("/api/compare", params={"a": "base/s0", "b": "nothing*"})
    assert response.status_code == 404 and "no run named or matching 'nothing*'" in response.json()["error"]


def test_a_token_is_required_of_every_request_when_set(runs_db):
    client = TestClient(create_app(str(runs_db), token=TOKEN), follow_redirects=False)
    for path in ("/", "/api/runs", "/static/app.js", "/run?name=base/s0"):
        assert client.get(path).status_code == 401, path
    assert client.get("/api/runs", headers={"Authorization": "Bearer wrong-token-0123456789"}).status_code == 401
    assert client.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    first = client.get("/run", params={"name": "base/s0", "token": TOKEN})  # the printed address
    assert first.status_code == 303 and first.headers["location"] == "/run?name=base%2Fs0"  # the token leaves the URL
    assert "httponly" in first.headers["set-cookie"].lower() and first.headers["content-security-policy"] == CSP
    assert client.get("/api/runs").status_code == 200  # the cookie from now on
    assert (
        client.get(f"http://testserver//example.com/?token={TOKEN}").headers["location"] == "/example.com/"
    )  # not a redirect off-site


def test_beyond_loopback_a_token_is_generated_and_loopback_answers_only_its_names(runs_db):
    server = open_server(str(runs_db), host="0.0.0.0", port=0)
    try:
        assert server.generated and len(server.token) >= 16 and server.url.endswith(f"?token={server.token}")
    finally:
        server.sock.close()
    local = open_server(str(runs_db), host="127.0.0.1", port=0)
    try:
        assert local.token is None and local.url == f"http://127.0.0.1:{local.port}/"
        client = TestClient(local.app, base_url="http://127.0.0.1")
        assert client.get("/api/runs").status_code == 200
        # A web page reaching 127.0.0.1 through its own DNS name (DNS rebinding) is refused.
        assert client.get("/api/runs", headers={"host": "attacker.example"}).status_code == 400
    finally:
        local.sock.close()


def test_the_live_poll_sends_only_what_is_new(runs_db, client):
    first = client.get("/api/run/live", params={"name": "base/s0"}).json()
    assert first["new_steps"] == 0 and first["last_step"] == 400 and first["evals"] == 8
    with Ledger(runs_db) as led:
        led.append_steps(
            "base/s0",
            {
                "step": [401, 402],
                "tokens": [401 * 256.0, 402 * 256.0],
                "wall_s": [20.05, 20.1],
                "tokens_per_s": [5000.0, 5100.0],
            },
        )
        led.append_evals("base/s0", [EvalRecord(step=402, tokens=402 * 256.0, task="val", metric="loss", value=3.0)])
        led.set_status("base/s0", "finished")
    news = client.get("/api/run/live", params={"name": "base/s0", "after": 400, "evals": 8, "curve_after": 400}).json()
    assert news["new_steps"] == 2 and news["last_step"] == 402 and news["evals"] == 9 and news["status"] == "finished"
    assert news["throughput"] == {"step": [401, 402], "wall_s": [20.05, 20.1], "tokens_per_s": [5000.0, 5100.0]}
    # The new evaluation on every axis of the loss plots, as the next full draw will have it.
    assert news["curve"] == {
        "step": [402],
        "tokens": [402 * 256.0],
        "wall_s": [20.1],
        "cost_usd": [None],
        "loss": [3.0],
    }
    drawn = client.get("/api/run/figures", params={"name": "base/s0"}).json()
    assert (
        drawn["cursor"]["curve_step"] == 402
        and _values(_figures(drawn)["loss-tokens"]["figure"]["data"][0])[-1] == 402 * 256.0
    )
    quiet = client.get("/api/run/live", params={"name": "base/s0", "after": 402, "evals": 9, "curve_after": 402}).json()
    assert quiet["new_steps"] == 0 and quiet["curve"] is None and quiet["throughput"]["step"] == []


@pytest.mark.slow
def test_a_million_step_run_page_is_bounded_and_keeps_every_evaluation(tmp_path):
    path, n = tmp_path / "big.db", 1_000_000
    step = np.arange(1, n + 1)
    tps = np.full(n, 1e5)
    tps[654_321] = 3e5  # one fast step: min/max downsampling keeps it
    with Ledger(path) as led:
        led.create_run("huge")
        led.append_steps(
            "huge",
            {
                "step": step,
                "tokens": step * 1024.0,
                "wall_s": step * 0.01,
                "tokens_per_s": tps,
                "loss": 6.0 - np.log(step) / 10,
            },
        )
        led.append_evals(
            "huge",
            [
                EvalRecord(step=int(s), tokens=s * 1024.0, task="val", metric="loss", value=float(6.0 - np.log(s) / 10))
                for s in range(10_000, n + 1, 10_000)
            ],
        )
    client = TestClient(create_app(str(path)))
    response = client.get("/api/run/figures", params={"name": "huge"})
    figs = _figures(response.json())
    assert len(response.content) < 500_000  # the step table alone is ~100 MB as JSON
    assert len(_values(figs["loss-tokens"]["figure"]["data"][0])) == 100  # every evaluation
    throughput = figs["throughput-learning"]["figure"]["data"][0]
    assert len(_values(throughput)) <= MAX_POINTS and _values(throughput, "y").max() == 3e5
    live = client.get("/api/run/live", params={"name": "huge", "after": 0})
    assert live.json()["new_steps"] == n and len(live.content) < 200_000


def test_serve_refuses_bad_input_in_one_line(cli_for, tmp_path, runs_db):
    cli = cli_for(runs_db)
    for args, start in (
        (["--port", "70000"], "error: port must be within 0-65535, got 70000"),
        (["--token", "short"], "error: token must have at least 16 characters, got 5"),
        (["--host", "no-such-host.invalid"], "error: host 'no-such-host.invalid': not an address"),
    ):
        result = cli("serve", *args, code=2)
        assert result.stderr.startswith(start) and result.stderr.count("\n") == 1, result.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        result = cli("serve", "--port", str(taken.getsockname()[1]), code=2)
        assert "cannot listen" in result.stderr and result.stderr.count("\n") == 1
    result = cli_for(tmp_path)("serve", "--port", "0", code=2)  # the ledger is a folder
    assert result.stderr.startswith(f"error: {tmp_path}: is a directory") and result.stderr.count("\n") == 1


# -- campaigns and gate decisions -------------------------------------------------------------------------------

POLICY = Path(__file__).parents[1] / "examples" / "policy.yaml"


def _campaign(led: Ledger, name: str = "mix") -> int:
    """A campaign as `yieldgate probe` leaves one, without training: finished probe runs (meta `probe`) of three
    recipes x 3 seeds x 2 budgets, `three` a hair from `two` (a tie) and `one` clearly worse, the spec, and the
    summary the real `summarise` makes of them (what `yieldgate probe` stores); then the real gate on one seed of
    `two` (a hold: too few seeds), recorded as `yieldgate gate` records it. Returns the decision's id."""
    from yieldgate.analysis.campaign import summarise
    from yieldgate.gate.gate import gate, record
    from yieldgate.gate.policy import load_policy

    recipes = {"two": 0.0, "three": 0.0005, "one": 0.08}
    led.put_campaign(
        name, {"name": name, "recipes": {r: {"sources": [{"name": "web"}]} for r in recipes}, "level": 0.9}, "f" * 64
    )
    for k, (recipe, worse) in enumerate(recipes.items()):
        for budget in (50_000, 100_000):
            for seed in range(3):
                run = f"{name}/{recipe}/s{seed}/t{budget}"
                led.create_run(
                    run, manifest=parse_manifest({"model": {"name": "m", "params": 1000}, "seed": seed}), source="probe"
                )
                led.set_meta(
                    run,
                    "probe",
                    {
                        "campaign": name,
                        "recipe": recipe,
                        "seed": seed,
                        "tokens": budget,
                        "model": {"layers": 1, "width": 32},
                    },
                )
                step = np.arange(1, budget // 1000 + 1)
                loss = 1.5 + 40 * (step * 1000.0) ** -0.35 + worse + 0.002 * np.sin(3 * seed + k + step)
                led.append_steps(run, {"step": step, "tokens": step * 1000.0, "wall_s": step * 0.1, "loss": loss})
                led.append_evals(
                    run,
                    [
                        EvalRecord(step=int(s), tokens=s * 1000.0, task="val", metric=m, value=float(loss[s - 1] * k))
                        for s in step[9::10]
                        for m, k in (("loss", 1.0), ("bpb", 1 / np.log(2) / 3))
                    ],
                )
                led.set_status(run, "finished")
    led.set_campaign_summary(name, summarise(led, name).to_dict())
    policy = load_policy(POLICY)
    return record(led, gate(led, f"{name}/two/s0/*", policy), policy)


def _audit(path: Path) -> tuple[int, int]:
    """Into the ledger at `path`: a campaign with the gate's decision on one of its recipes (`_campaign`), and a
    stored decision whose every string is hostile (the pages must show it as text). Returns both ids."""
    with Ledger(path) as led:
        decided = _campaign(led)
        # With a policy: Ledger.decisions() fails on a decision stored without one (a float NaN reaches json.loads).
        hostile = led.add_decision(
            EVIL,
            "reject",
            rationale=EVIL,
            stage=EVIL_BODY,
            policy={"name": EVIL, "version": 1},
            policy_hash="0" * 64,
            evidence={
                "checks": [{"name": EVIL, "passed": False, "detail": EVIL_BODY}],
                "what_to_run_next": EVIL_BODY,
                "runs": [EVIL],
                "note": EVIL_BODY,
            },
        )
    return decided, hostile


@pytest.fixture
def audit_db(runs_db: Path) -> tuple[Path, int]:
    return runs_db, _audit(runs_db)[0]


def _cells(row: list[str]) -> str:
    """A row of text cells as table_html writes it."""
    return "".join(f"<td>{html.escape(c)}</td>" for c in row)


def test_the_campaign_pages_show_what_yieldgate_campaign_prints(audit_db, cli_for):
    db, decided = audit_db
    client, cli = TestClient(create_app(str(db))), cli_for(db)
    assert client.get("/api/campaigns").json()["campaigns"] == cli.json("campaign") == ["mix"]
    stored = cli.json("campaign", "mix")
    assert client.get("/api/campaign", params={"name": "mix"}).json() == stored
    listing = client.get("/campaigns").text
    assert '<a href="/campaign?name=mix">mix</a>' in listing and "<td>50,000, 100,000</td>" in listing
    page = client.get("/campaign", params={"name": "mix"}).text
    summary = stored["summary"]
    tables = ranking_tables(summary)
    assert [t[0] for t in tables] == [
        "mix: 50,000 tokens per probe",  # no hard slices: no empty clause (issue #43 item 10)
        "mix: 100,000 tokens per probe",
    ]
    for title, headers, rows in tables:
        assert f"<h3>{html.escape(title)}</h3>" in page
        assert "".join(f"<th>{html.escape(h)}</th>" for h in headers) in page
        for row in rows:
            assert f"<tr>{_cells(row)}</tr>" in page, row
    # The ranking as the JSON has it: two and three tie (the seeds do not tell them apart), one is last.
    order = summary["rankings"]["100000"]["bpb"]["order"]
    assert [e["recipe"] for e in order][-1] == "one" and {e["recipe"]: e["ties"] for e in order}["two"] == ["three"]
    for line in accuracy_lines(summary) + forecast_lines(summary):
        assert html.escape(line) in page
    assert "decision accuracy at 50,000 tokens (50% of the largest budget" in page and "all pairs 100.0%" in page
    assert "forecast two: none (2 budget(s) finished; a forecast needs final losses at 3 or more)" in page
    assert f'<a href="/decision?id={decided}">#{decided}</a>' in page  # the gate decision on its recipe
    missing = client.get("/campaign", params={"name": "nope"})
    assert (
        missing.status_code == 404
        and "no campaign named &#x27;nope&#x27; in this ledger; campaigns: mix" in missing.text
    )
    assert client.get("/api/campaign", params={"name": "nope"}).status_code == 404


def test_the_decision_pages_show_each_check_and_the_evidence_with_the_json_one_click_away(audit_db, cli_for):
    db, decided = audit_db
    client, cli = TestClient(create_app(str(db))), cli_for(db)
    assert client.get("/api/decisions").json()["decisions"] == cli.json("decisions")
    assert client.get("/api/decisions", params={"target": "mix/two/s0/*"}).json()["decisions"] == cli.json(
        "decisions", "mix/two/s0/*"
    )
    row = next(r for r in cli.json("decisions") if r["id"] == decided)
    trail = client.get("/decisions").text
    assert f'<a href="/decision?id={decided}">#{decided}</a>' in trail and '<td class="hold">hold</td>' in trail
    assert f"<td>{html.escape(policy_label(row))}</td>" in trail and policy_label(row).startswith("probe-scale@1#")
    page = client.get("/decision", params={"id": decided}).text
    evidence = row["evidence"]
    assert f"<h1>Decision #{decided}: hold</h1>" in page and html.escape(row["rationale"]) in page
    assert [c["name"] for c in evidence["checks"]] == ["no open non-data fault", "no stall of unknown cause", "seeds"]
    for c in evidence["checks"]:
        result = CHECK_RESULT[c["passed"]]
        assert (
            f'<td>{html.escape(c["name"])}</td><td class="check-{result.lower()}">{result}</td>'
            f"<td>{html.escape(c['detail'])}</td>"
        ) in page
    assert html.escape(evidence["what_to_run_next"]) in page and "more seed" in evidence["what_to_run_next"]
    assert '<a href="/run?name=mix%2Ftwo%2Fs0%2Ft50000">mix/two/s0/t50000</a>' in page
    numbers = {k: v for k, v in evidence.items() if k not in (*DECISION_FIELDS, "runs")}
    lines = evidence_lines(numbers, limit=200)  # the evidence, field by field, as the report summarises bodies
    assert len(lines) >= 3 and all("<tr>" + _cells(list(line.partition(": ")[::2])) + "</tr>" in page for line in lines)
    assert html.escape(json.dumps(evidence, indent=2, sort_keys=True)) in page  # the whole of it, one click away
    hostile = client.get("/decision", params={"id": max(r["id"] for r in cli.json("decisions"))}).text
    assert EVIL not in hostile and EVIL_BODY not in hostile and "&lt;img src=x onerror=alert(1)&gt;" in hostile
    assert client.get("/decision", params={"id": 999}).status_code == 404
    bad = client.get("/decision", params={"id": "x"})
    assert bad.status_code == 400 and "id must be a decision number, got &#x27;x&#x27;" in bad.text


@pytest.mark.slow
def test_a_comparison_across_tokenizers_is_in_bits_per_byte_as_compare_per_byte(tmp_path, cli_for):
    from .test_report import _tokenized_run

    path = tmp_path / "tok.db"
    with Ledger(path) as led:
        _tokenized_run(led, "bpe4k", tokenizer="bpe4k", bytes_per_token=3.0)
        _tokenized_run(led, "bpe32k", tokenizer="bpe32k", bytes_per_token=4.2, slope=1.2)
    client, cli = TestClient(create_app(str(path))), cli_for(path)
    served = client.get("/api/compare", params={"a": "bpe4k", "b": "bpe32k"}).json()
    assert served == cli.json("compare", "bpe4k", "bpe32k", "--per", "byte") and served["metric"] == "val/bpb"
    assert client.get("/api/compare", params={"a": "bpe4k", "b": "bpe32k", "per": "token"}).json() == cli.json(
        "compare", "bpe4k", "bpe32k", "--per", "token"
    )
    chosen = cli.json("compare", "bpe4k", "bpe32k")  # the console chooses as the dashboard does, and says so
    assert chosen["metric"] == "val/bpb" and chosen["notes"][0].startswith("the runs' tokenizers differ: losses in")
    page = client.get("/compare", params={"a": "bpe4k", "b": "bpe32k"}).text
    assert "<code>yieldgate compare --per byte</code>" in page and "<td>bytes to target</td>" in page
    assert "the runs&#x27; tokenizers differ: losses in bits per byte" in page
    figs = _figures(client.get("/api/compare/figures", params={"a": "bpe4k", "b": "bpe32k"}).json())
    assert figs["loss-tokens"]["figure"]["layout"]["xaxis"]["title"]["text"] == "accepted bytes (bytes)"
    assert client.get("/api/compare", params={"a": "bpe4k", "b": "bpe32k", "per": "bit"}).status_code == 400


def test_smoothed_throughput_continues_live_as_a_full_redraw_draws_it(client, runs_db):
    payload = client.get("/api/run/figures", params={"name": "base/s0", "smooth": 0.9}).json()
    (tps,) = [
        t for t in _figures(payload)["throughput-learning"]["figure"]["data"] if t["meta"]["series"] == "tokens_per_s"
    ]
    with Ledger(runs_db) as led:
        raw = led.steps("base/s0")["tokens_per_s"]
        assert np.allclose(_values(tps, "y"), smoothed(raw, 0.9)) and payload["smooth"] == 0.9
        led.append_steps(
            "base/s0",
            {
                "step": [401, 402],
                "tokens": [401 * 256.0, 402 * 256.0],
                "wall_s": [20.05, 20.1],
                "tokens_per_s": [9000.0, 1000.0],
            },
        )
    news = client.get(
        "/api/run/live", params={"name": "base/s0", "after": 400, "smooth": 0.9, "smooth_from": _values(tps, "y")[-1]}
    ).json()
    redrawn = client.get("/api/run/figures", params={"name": "base/s0", "smooth": 0.9}).json()
    (full,) = [
        t for t in _figures(redrawn)["throughput-learning"]["figure"]["data"] if t["meta"]["series"] == "tokens_per_s"
    ]
    assert np.allclose(news["throughput"]["tokens_per_s"], _values(full, "y")[-2:], rtol=1e-12)
    page = client.get("/run", params={"name": "base/s0", "smooth": 0.9}).text
    assert '<option value="0.9" selected>0.9</option>' in page
    bad = client.get("/api/run/figures", params={"name": "base/s0", "smooth": 1})
    assert bad.status_code == 400 and bad.json() == {"error": "smooth must be at least 0 and below 1, got 1.0"}


# -- the real server in a real browser ----------------------------------------------------------------------

TRACKER = """
import sys, time
from pathlib import Path
from yieldgate import Tracker
ledger, go, stop = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
with Tracker("live", ledger=ledger) as tr:
    for step in range(1, 100_000):
        tr.step(tokens=512, loss=5.0 / step ** 0.2)
        if step in (5, 10):
            tr.eval({"val/loss": 5.1 / step ** 0.2})
        if go.exists():
            tr.eval({"val/loss": 5.1 / step ** 0.2})
            print(f"eval {step} {time.time()}", flush=True)
            go.unlink()
        if stop.exists():
            break
        time.sleep(0.05)
print(f"closed {time.time()}", flush=True)
"""


def _start_server(db: Path, *args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "yieldgate", "--ledger", str(db), "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    assert line.startswith("yieldgate serve: http://"), (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line.split()[2]


def _wait(predicate, timeout: float, what: str, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _until(page, expression: str, timeout: float = 10.0, what: str = "") -> None:
    """Wait until `expression` is true in the page. Polled from here with `page.evaluate` (DevTools evaluation):
    Playwright's own `wait_for_function` evaluates a string with eval in the page, which our CSP refuses."""
    _wait(lambda: page.evaluate(expression), timeout, what or expression, every=0.02)


def _scroll_through(page) -> None:
    """Bring each plot's box into view in turn, as a reader scrolling down does (a plot below the window is drawn
    when it comes near it), until each is drawn; then back to the top. Scrolled by the page's own `scrollIntoView`:
    Playwright's `scroll_into_view_if_needed` first waits for two animation frames to show the box unmoved, which a
    renderer starved of CPU (CI, a plot drawing) did not give it in 30 s once."""
    for k in range(page.evaluate("document.querySelectorAll('.plot').length")):
        plot = f"document.querySelectorAll('.plot')[{k}]"
        page.evaluate(f"{plot}.scrollIntoView()")
        _until(page, f"{plot}.classList.contains('js-plotly-plot')", 15.0)
    page.evaluate("window.scrollTo(0, 0)")


PLOTS_JS = """[...document.querySelectorAll('.js-plotly-plot')].map(div => ({
    id: div.id, traces: div._fullData.map(t => ({name: t.name, series: t.meta.series, n: t._length}))}))"""
FITS_JS = "document.documentElement.scrollWidth <= window.innerWidth"
"""Nothing on the page is wider than the window (long values wrap)."""


def _check_plots(page, db: Path, names: set[str]) -> int:
    """Every trace of every plot on the page: named after one of `names` (escaped as plotly needs) and holding
    as many points as the ledger has for its series after the documented downsampling (`test_report`'s count)."""
    from .test_report import _expected_points, check_frontier

    checked = 0
    with Ledger(db, readonly=True) as led:
        for plot in page.evaluate(PLOTS_JS):
            if plot["id"].endswith("frontier"):
                check_frontier(plot["traces"])
                assert {html.unescape(t["name"]) for t in plot["traces"]} - {"Pareto front"} <= names
                continue
            for t in plot["traces"]:
                run = html.unescape(t["name"])
                assert run in names and t["name"] == html.escape(run, quote=False), (plot["id"], t)
                assert t["n"] == _expected_points(led, run, t["series"]) > 0, (plot["id"], t)
                checked += 1
    return checked


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """Where the browser tests leave a screenshot of each page for review: $YIELDGATE_SCREENSHOTS, else a folder
    of the test's tmp_path (printed at the end)."""
    folder = Path(os.environ.get("YIELDGATE_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.slow
def test_the_dashboard_in_headless_chromium_with_a_tracker_writing(runs_db, chromium, tmp_path, screenshots):
    from playwright.sync_api import sync_playwright

    go, stop = tmp_path / "go", tmp_path / "stop"
    server, url = _start_server(runs_db)
    base = url.rstrip("/")
    tracker = subprocess.Popen(
        [sys.executable, "-c", TRACKER, str(runs_db), str(go), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    errors, dialogs, outside = [], [], []
    try:
        with Ledger(runs_db, readonly=True) as led:
            _wait(lambda: "live" in set(led.runs()["name"]) and len(led.evals("live")) == 2, 60, "the Tracker's evals")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.route(
                "**/*",
                lambda route: (
                    (outside.append(route.request.url), route.abort())
                    if not route.request.url.startswith(base)
                    else route.continue_()
                ),
            )

            # The runs page: every run, the hostile name as text.
            page.goto(url)
            _until(page, "document.querySelectorAll('#runs tbody tr').length === 5")
            names = page.evaluate(
                "[...document.querySelectorAll('#runs tbody tr td:nth-child(2)')].map(e => e.textContent)"
            )
            assert sorted(names) == sorted(["base/s0", "base/s1", "big/s0", EVIL, "live"])
            page.click("th[data-key=steps]")  # sort by steps, ascending: the live run (fewest so far) first
            _until(page, "document.querySelector('#runs tbody tr td:nth-child(2)').textContent === 'live'")
            page.fill("#filter", "bs512")  # a tag
            _until(page, "document.querySelectorAll('#runs tbody tr').length === 1")
            assert page.evaluate("document.querySelector('#runs tbody tr td:nth-child(4)').textContent") == "bs512"
            page.fill("#filter", "base")
            _until(page, "document.querySelectorAll('#runs tbody tr').length === 2")
            page.check("#runs tbody tr:nth-child(1) input")
            page.check("#runs tbody tr:nth-child(2) input")
            assert page.get_attribute("#compare-link", "href") == "/compare?a=base%2Fs0&b=base%2Fs1"
            assert page.evaluate(FITS_JS)
            page.screenshot(path=str(screenshots / "runs.png"), full_page=True)

            # Each run page: every plot's traces named and counted as the ledger says.
            checked = 0
            for run, shot in (("base/s0", "run.png"), (EVIL, "run-hostile-name.png")):
                page.goto(f"{base}/run?{urlencode({'name': run})}")
                _until(page, "Number(document.body.dataset.draws || 0) >= 1")
                # Drawn at first: the plots near the window; the rest as the reader scrolls to them.
                drawn, boxes = page.evaluate(
                    "[document.querySelectorAll('.js-plotly-plot').length, document.querySelectorAll('.plot').length]"
                )
                assert 0 < drawn < boxes == 7, (drawn, boxes)
                _scroll_through(page)
                assert [p["id"] for p in page.evaluate(PLOTS_JS)] == [
                    "fig-loss-tokens",
                    "fig-loss-time",
                    "fig-train-loss",
                    "fig-throughput-learning",
                    "fig-tranche-yields",
                    "fig-signals-gns",
                    "fig-signals-clipping",
                ]
                checked += _check_plots(page, runs_db, {run})
                assert page.evaluate("document.querySelector('h1').textContent") == run and page.evaluate(FITS_JS)
                page.screenshot(path=str(screenshots / shot), full_page=True)
            assert checked >= 10
            assert page.evaluate("window.__pwned === undefined && document.querySelectorAll('img').length === 0")
            # Throughput smoothing: drawn again at once, every point kept, the choice kept in the address.
            page.select_option("#smooth", "0.9")
            _until(page, "Number(document.body.dataset.draws) >= 2")
            _scroll_through(page)
            assert _check_plots(page, runs_db, {EVIL}) == checked // 2 and "smooth=0.9" in page.url

            # The comparison page: its plots counted the same way.
            page.goto(f"{base}/compare?a=base/*&b=big/s0")
            _until(page, "document.querySelectorAll('.js-plotly-plot').length >= 1")
            _scroll_through(page)
            assert "effective token multiplier" in page.evaluate("document.body.innerText")
            assert _check_plots(page, runs_db, {"base/s0", "base/s1", "big/s0"}) >= 15 and page.evaluate(FITS_JS)
            page.screenshot(path=str(screenshots / "compare.png"), full_page=True)

            # Campaigns and gate decisions (written now: the runs table above counted the runs without them).
            decided, hostile = _audit(runs_db)
            page.goto(f"{base}/campaigns")
            page.click("text=mix")
            _until(page, "document.querySelectorAll('table.ranking').length === 2")
            rows = page.evaluate("[...document.querySelectorAll('table.ranking tbody tr')].map(r => r.textContent)")
            assert len(rows) == 6 and rows[0].startswith("1") and page.evaluate(FITS_JS)
            text = page.evaluate("document.body.innerText")
            assert "decision accuracy at 50,000 tokens" in text and "forecast two: none" in text
            page.screenshot(path=str(screenshots / "campaign.png"), full_page=True)
            page.click(f"text=#{decided}")
            _until(page, "document.querySelectorAll('table.checks tbody tr').length === 3")
            assert not page.evaluate("document.querySelector('details').open")
            page.click("summary >> nth=0")  # the full evidence, one click away
            assert page.evaluate(
                "document.querySelector('details').open && "
                "document.querySelector('details pre').textContent.includes('\"checks\"')"
            )
            assert page.evaluate(FITS_JS)
            page.screenshot(path=str(screenshots / "decision.png"), full_page=True)
            page.goto(f"{base}/decisions")
            _until(page, "document.querySelectorAll('table.decisions tbody tr').length === 2")
            page.screenshot(path=str(screenshots / "decisions.png"), full_page=True)
            page.goto(f"{base}/decision?id={hostile}")
            assert page.evaluate("document.querySelector('h1').textContent") == f"Decision #{hostile}: reject"
            assert EVIL in page.evaluate("document.body.innerText") and page.evaluate(
                "window.__pwned === undefined && document.querySelectorAll('img').length === 0"
            )

            # Live: the open page of a run a Tracker is writing shows its next evaluation within 2 s.
            page.goto(f"{base}/run?name=live")
            _until(page, "Number(document.body.dataset.draws || 0) >= 1")
            _scroll_through(page)
            count = "document.getElementById('fig-loss-tokens')._fullData[0]._length"
            assert (
                page.evaluate(count) == 2
                and page.evaluate("document.getElementById('status').textContent") == "running"
            )
            # Steps between evaluations: the throughput trace grows without a reload.
            grown = (
                "(() => { const d = document.getElementById('fig-throughput-learning'); "
                "return d._fullData.find(t => t.meta.series === 'tokens_per_s')._length; })()"
            )
            before = page.evaluate(grown)
            _until(page, f"{grown} > {before}", 2.0, "new throughput points")
            go.touch()
            written = float(tracker.stdout.readline().split()[2])
            try:
                _until(page, f"{count} === 3", 5.0)
            except AssertionError:
                raise AssertionError(
                    (
                        errors,
                        page.evaluate(
                            "document.getElementById('live').textContent + ' draws ' + document.body.dataset.draws"
                        ),
                    )
                ) from None
            delay = time.time() - written
            print(f"new evaluation on the page {delay:.2f} s after Tracker.eval")
            assert delay < 2.0
            page.screenshot(path=str(screenshots / "live.png"), full_page=True)
            stop.touch()
            _until(page, "document.getElementById('status').textContent === 'finished'", 5.0)
            browser.close()
    finally:
        stop.touch()
        tracker.wait(timeout=60)
        server.terminate()
        server.wait(timeout=30)
    assert errors == [] and dialogs == [] and outside == []
    shots = (
        "runs.png",
        "run.png",
        "run-hostile-name.png",
        "compare.png",
        "campaign.png",
        "decision.png",
        "decisions.png",
        "live.png",
    )
    assert all((screenshots / f).stat().st_size > 20_000 for f in shots)
    print(f"screenshots: {screenshots}")


@pytest.mark.slow
def test_a_server_beyond_loopback_answers_401_without_its_token(runs_db):
    import urllib.error
    import urllib.request

    server, url = _start_server(runs_db, "--host", "0.0.0.0", "--token", TOKEN)
    try:
        port = url.split(":")[2].split("/")[0]
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs", timeout=10)
        assert refused.value.code == 401
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert [r["name"] for r in json.load(response)["runs"]][:1] == ["base/s0"]
    finally:
        server.terminate()
        server.wait(timeout=30)
