"""The HTML report: real probe runs into a ledger, `yieldgate report` as a user runs it, and the page opened in
headless Chromium (Debian's `chromium`, the `chromium` fixture of conftest.py) with the network cut off."""

from __future__ import annotations

import html
import json
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from yieldgate.data.recipe import resolve
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.manifest import parse_manifest
from yieldgate.probe.trainer import ProbeConfig, train_probe
from yieldgate.report.console import evidence_lines
from yieldgate.report.figures import MAX_POINTS, downsample, metric_title
from yieldgate.report.sections import collect

from .test_probe import RECIPE

EVIL = "<script>alert(1)</script>"
EVIDENCE_HTML = "<img src=x onerror=window.__pwned=1>"
PATTERNS = ["probe/*", "<script>*", "costed/*"]


def _probe(data, ledger: Path, run: str, *, seed: int, batch: int) -> None:
    cfg = ProbeConfig(tokens=16_384, batch_size=batch, context=64, evals=4, eval_sequences=16, threads=2, seed=seed)
    train_probe(data, cfg, run=run, ledger=str(ledger))


def _costed_run(led: Ledger, run: str, seed: int) -> None:
    """A run recorded through the API with a cost column and no signals (what an import of a GPU run gives)."""
    led.create_run(run, manifest=parse_manifest({"hardware": {"device_kind": "H100-SXM", "device_count": 8,
                                                              "price_per_device_hour": 2.5}, "seed": seed}))
    step = np.arange(1, 101)
    loss = 7.0 - np.log(step) + 0.01 * seed
    led.append_steps(run, {"step": step, "tokens": step * 256.0, "wall_s": step * 0.05,
                           "tokens_per_s": np.full(100, 5120.0), "cost_usd": step * 0.05 / 3600 * 8 * 2.5, "loss": loss})
    led.append_evals(run, [EvalRecord(step=s, tokens=s * 256.0, task="val", metric="loss", value=loss[s - 1])
                           for s in (1, 25, 50, 75, 100)])


@pytest.fixture(scope="module")
def runs_db(tmp_path_factory) -> Path:
    """Two real probes (batch 8, and batch 16 under a hostile name), two seeds of a costed API run, a
    diagnosis with a span and a gate decision."""
    path = tmp_path_factory.mktemp("report") / "runs.db"
    data = resolve(parse_manifest({"data": RECIPE}).data, seed=0, max_chars_per_source=400_000)
    _probe(data, path, "probe/s0", seed=0, batch=8)
    _probe(data, path, EVIL, seed=0, batch=16)
    with Ledger(path) as led:
        _costed_run(led, "costed/s0", 0)
        _costed_run(led, "costed/s1", 1)
        led.add_event("probe/s0", "diagnosis", {"cause": "schedule", "confidence": 0.7, "advice": "lower the LR",
                                                "evidence": {"grad_norm_jump": 3.2, "note": EVIDENCE_HTML}},
                      start_step=10, end_step=20)
        led.add_decision(EVIL, "hold", evidence={"marginal_yield": 0.01, "why": EVIDENCE_HTML},
                         rationale="yield below the <b>policy</b> bar", stage="s1", policy_hash="abc123")
    return path


@pytest.fixture(scope="module")
def written(runs_db, chromium, tmp_path_factory):
    """`yieldgate report` run once as a user runs it, with --png (kaleido draws with the same Chromium)."""
    from .conftest import Cli

    out = tmp_path_factory.mktemp("out")
    result = Cli(runs_db).json("report", *PATTERNS, "-o", str(out / "report.html"), "--png", str(out / "png"))
    return out, result


def _expected_points(led: Ledger, run: str, series: str) -> int:
    """How many points a trace of `series` for `run` must have, counted from the ledger directly."""
    steps, evals = led.steps(run), led.evals(run)

    def evals_of(key: str) -> pd.DataFrame:
        task, _, metric = key.rpartition("/")
        return evals[(evals.task == task) & (evals.metric == metric)]

    if series.startswith("val/loss@"):  # the eval record's tokens and wall time, else the step table's
        column = series.partition("@")[2]
        ev = evals_of("val/loss").set_index("step")
        at = steps.set_index("step").reindex(ev.index)[column]
        return int((ev[column].fillna(at) if column in ev else at).notna().sum())
    if series == "tokens_per_s":
        return min(int(steps[["wall_s", "tokens_per_s"]].dropna().shape[0]), MAX_POINTS)
    if series in ("yield_per_btok:val/loss", "tranche_yield:val/loss"):
        return len(evals_of("val/loss")) - 1
    if series.startswith("per_source:"):
        return len(evals_of(f"val/{series.partition(':')[2]}/loss")) - 1
    if series.startswith("capability:"):
        return len(evals_of(series.partition(":")[2])) - 1
    extras = led.extras(run).dropna(subset=["value"])
    if series == "signals/gns":
        return int((extras.key == "signals/gns").sum())
    if series == "signals/update_ratio/<median>":
        return extras[extras.key.str.startswith("signals/update_ratio/")]["step"].nunique()
    raise AssertionError(f"unknown series {series}")


@pytest.mark.slow
def test_report_json_and_png_files(written):
    out, result = written
    assert result["path"] == str(out / "report.html") and Path(result["path"]).stat().st_size > 1_000_000
    assert result["runs"] == ["probe/s0", EVIL, "costed/s0", "costed/s1"]
    assert result["figures"] == ["loss-tokens", "loss-time", "loss-cost", "throughput-learning", "tranche-yields",
                                 "yield-per-source", "yield-capability", "signals-gns", "signals-update-ratio"]
    assert [Path(p).name for p in result["pngs"]] == [f"{f}.png" for f in result["figures"][:7]]
    for png in result["pngs"]:
        raw = Path(png).read_bytes()
        assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 20_000, png
        width, height = struct.unpack(">II", raw[16:24])  # the IHDR chunk
        assert width == 1100 and height >= 320


@pytest.mark.slow
def test_the_page_in_headless_chromium(written, runs_db, chromium, tmp_path):
    from playwright.sync_api import sync_playwright

    page_path = written[0] / "report.html"
    source = page_path.read_text()
    assert EVIL not in source and EVIDENCE_HTML not in source  # escaped in tables, plots and JSON alike
    errors, dialogs, requests = [], [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.route("**/*", lambda route: (requests.append(route.request.url), route.abort())
                   if not route.request.url.startswith("file:") else route.continue_())
        page.goto(page_path.as_uri(), wait_until="load")
        plots = page.evaluate("""[...document.querySelectorAll('.js-plotly-plot')].map(div => ({
            id: div.id, traces: div._fullData.map(t => ({name: t.name, series: t.meta.series, n: t._length}))}))""")
        legend = set(page.evaluate("[...document.querySelectorAll('.legendtext')].map(e => e.textContent)"))
        text = page.evaluate("document.body.innerText")
        pwned = page.evaluate("window.__pwned === 1 || document.querySelectorAll('img').length > 0")
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    print(f"screenshot: {shot}")
    assert errors == [] and dialogs == [] and requests == [] and not pwned
    assert shot.stat().st_size > 100_000
    assert EVIL in legend and EVIL in text and EVIDENCE_HTML in text and "yield below the <b>policy</b> bar" in text
    assert "schedule" in text and "lower the LR" in text and "optimisation.batch_size" in text

    runs = {f["id"]: {html.unescape(t["name"]) for t in f["traces"]} for f in plots}
    everyone, probes, costed = {"probe/s0", EVIL, "costed/s0", "costed/s1"}, {"probe/s0", EVIL}, {"costed/s0", "costed/s1"}
    assert runs == {"loss-tokens": everyone, "loss-time": everyone, "loss-cost": costed,
                    "throughput-learning": everyone, "tranche-yields": everyone, "yield-per-source": probes, "yield-capability": probes,
                    "signals-gns": probes, "signals-update-ratio": probes}
    checked = 0
    with Ledger(runs_db, readonly=True) as led:
        for figure in plots:
            for t in figure["traces"]:
                expected = _expected_points(led, html.unescape(t["name"]), t["series"])
                assert t["n"] == expected > 0, (figure["id"], t["name"], t["series"])
                checked += 1
    assert checked > 30


@pytest.mark.slow
def test_sections_hold_the_comparison_diagnosis_decision_and_manifest_diff(runs_db):
    with Ledger(runs_db, readonly=True) as led:
        data = collect(led, PATTERNS)
    assert [(c.a, c.b) for c in data.comparisons] == [("probe/*", "<script>*"), ("probe/*", "costed/*")]
    first = data.comparisons[0]
    assert first.seeds == {"probe/*": 1, "<script>*": 1} and data.comparisons[1].seeds["costed/*"] == 2
    for c in data.comparisons:
        assert c.speedup["time"] == pytest.approx(c.speedup["throughput"] * c.speedup["sample_efficiency"])
    diag = data.runs[0].diagnoses
    assert list(diag["start_step"]) == [10] and diag["body"][0]["cause"] == "schedule"
    assert list(data.decisions["target"]) == [EVIL]
    rows = {r["field"]: r["values"] for r in data.manifest_diff}
    assert rows["optimisation.batch_size"] == {"probe/s0": 8, EVIL: 16, "costed/s0": None, "costed/s1": None}
    assert rows["seed"] == {"probe/s0": 0, EVIL: 0, "costed/s0": 0, "costed/s1": 1}


@pytest.mark.slow
def test_evidence_reads_as_lines_with_the_json_one_click_away(written):
    out, _ = written
    html = (out / "report.html").read_text()
    assert "grad_norm_jump: 3.2<br>" in html and "marginal_yield: 0.01<br>" in html
    assert html.count("<details><summary>JSON</summary>") >= 2


def test_evidence_lines():
    body = {"yield": {"low": 0.25, "high": float("nan")}, "seeds": [0, 1, 2], "curve": list(range(50)), "ok": True}
    assert evidence_lines(body) == ["yield.low: 0.25", "yield.high: -", "seeds: 0, 1, 2", "curve: 50 values",
                                    "ok: true"]
    assert evidence_lines({f"k{i}": i for i in range(15)}, limit=3) == ["k0: 0", "k1: 1", "k2: 2", "... 12 more"]


@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_2(cli_for, runs_db, tmp_path):
    cli = cli_for(runs_db)
    result = cli("report", "probe/*", "nothing-like-this*", "-o", str(tmp_path / "r.html"), code=2)
    assert result.stderr.startswith("error: no run named or matching 'nothing-like-this*'")
    assert result.stderr.count("\n") == 1 and not (tmp_path / "r.html").exists()
    for bad in (tmp_path / "missing-folder" / "r.html", tmp_path):
        result = cli("report", "costed/s0", "-o", str(bad), code=2)
        assert result.stderr.startswith(f"error: -o {bad}: cannot write the report") and result.stderr.count("\n") == 1


def test_axis_titles_carry_the_metrics_unit_and_are_escaped():
    assert metric_title("val/loss") == "val/loss (nats/token)" and metric_title("loss") == "loss (nats/token)"
    assert metric_title("val/web/bpb") == "val/web/bpb (bits/byte)"
    assert metric_title("arc_easy/acc") == "arc_easy/acc (score)"
    assert metric_title("<b>x</b>/loss") == "&lt;b&gt;x&lt;/b&gt;/loss (nats/token)"


def test_downsample_keeps_each_columns_extremes_and_the_ends():
    frame = pd.DataFrame({"x": np.arange(10.0), "y": [5, 1, 9, 4, 4, 0, 7, 3, 8, 6]})
    assert downsample(frame, "x", "y", 20) is frame
    # max_points 6: 2 columns over x in [0, 9] (x < 4.5, x >= 4.5); each keeps its smallest and largest y, plus
    # the first and last rows.
    assert downsample(frame, "x", "y", 6)["x"].tolist() == [0, 1, 2, 5, 8, 9]
    spike = pd.DataFrame({"x": np.arange(100_000.0), "y": np.zeros(100_000)})
    spike.loc[54_321, "y"] = 50.0  # one step in 100,000: an evenly spaced pick would step over it
    small = downsample(spike, "x", "y", 500)
    assert len(small) <= 500 and small["y"].max() == 50.0 and small["x"].iloc[[0, -1]].tolist() == [0, 99_999]


@pytest.mark.slow
def test_report_command_prints_where_it_wrote(cli_for, runs_db, tmp_path):
    out = cli_for(runs_db)("report", "costed/s0", "-o", str(tmp_path / "one.html")).stdout
    assert out.startswith(f"wrote {tmp_path / 'one.html'}: 1 run, 5 plots")
    assert json.loads(cli_for(runs_db)("report", "costed/s0", "-o", str(tmp_path / "two.html"), "--json").stdout)[
        "figures"] == ["loss-tokens", "loss-time", "loss-cost", "throughput-learning", "tranche-yields"]


def test_a_run_without_evaluations_still_gets_a_page_that_says_so(cli, ledger_path, tmp_path):
    with Ledger(ledger_path) as led:
        led.create_run("bare")
        led.append_steps("bare", {"step": [1, 2, 3], "tokens": [10.0, 20.0, 30.0], "wall_s": [1.0, 2.0, 3.0],
                                  "tokens_per_s": [10.0, 10.0, 10.0]})
    result = cli.json("report", "bare", "-o", str(tmp_path / "bare.html"))
    assert result["figures"] == ["throughput-learning"]
    page = (tmp_path / "bare.html").read_text()
    assert "run &#x27;bare&#x27; has 0 evaluation(s) of val/loss" in page


def test_a_run_with_only_training_loss_and_no_tokens_is_drawn_against_steps(cli, ledger_path, tmp_path):
    """The Hugging Face Trainer's default: steps and a training loss, no token counts, no val/loss. The report
    draws the training loss against steps and says it stands in for a held-out loss."""
    with Ledger(ledger_path) as led:
        led.create_run("hf")
        led.append_steps("hf", {"step": list(range(10, 210, 10)), "loss": [3.0 - 0.05 * k for k in range(20)]})
    result = cli.json("report", "hf", "-o", str(tmp_path / "hf.html"))
    assert result["figures"][0] == "loss-steps"
    page = (tmp_path / "hf.html").read_text()
    assert "hf has no val/loss evaluations; using loss (the training loss)" in page
