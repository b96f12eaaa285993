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

from tests.integration.test_probe import RECIPE
from yieldgate.data.recipe import resolve
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.manifest import parse_manifest
from yieldgate.probe.config import ProbeConfig
from yieldgate.probe.trainer import train_probe
from yieldgate.report.console import clean, evidence_lines
from yieldgate.report.figures.base import MAX_POINTS, downsample, metric_title, smoothed
from yieldgate.report.figures.runs import build_figures, tranche_yields_figure
from yieldgate.report.figures.training import PANEL_POINTS
from yieldgate.report.sections import collect

EVIL = "<script>alert(1)</script>"
EVIDENCE_HTML = "<img src=x onerror=window.__pwned=1>"
PATTERNS = ["probe/*", "<script>*", "costed/*"]


def _probe(data, ledger: Path, run: str, *, seed: int, batch: int) -> None:
    cfg = ProbeConfig(tokens=16_384, batch_size=batch, context=64, evals=4, eval_sequences=16, threads=2, seed=seed)
    train_probe(data, cfg, run=run, ledger=str(ledger))


def _costed_run(led: Ledger, run: str, seed: int) -> None:
    """A run recorded through the API with a cost column and no signals (what an import of a GPU run gives)."""
    led.create_run(
        run,
        manifest=parse_manifest(
            {"hardware": {"device_kind": "H100-SXM", "device_count": 8, "price_per_device_hour": 2.5}, "seed": seed}
        ),
    )
    step = np.arange(1, 101)
    loss = 7.0 - np.log(step) + 0.01 * seed
    led.append_steps(
        run,
        {
            "step": step,
            "tokens": step * 256.0,
            "wall_s": step * 0.05,
            "tokens_per_s": np.full(100, 5120.0),
            "cost_usd": step * 0.05 / 3600 * 8 * 2.5,
            "loss": loss,
        },
    )
    led.append_evals(
        run,
        [
            EvalRecord(step=s, tokens=s * 256.0, task="val", metric="loss", value=loss[s - 1])
            for s in (1, 25, 50, 75, 100)
        ],
    )


@pytest.fixture(scope="module")
def runs_db(tmp_path_factory) -> Path:
    """Two real probes (batch 8, and batch 16 under a hostile name), two seeds of a costed API run, a
    diagnosis with a span and a gate decision."""
    path = tmp_path_factory.mktemp("report") / "runs.db"
    recipe = parse_manifest({"data": RECIPE}).data
    assert recipe is not None
    data = resolve(recipe, seed=0, max_chars_per_source=400_000)
    _probe(data, path, "probe/s0", seed=0, batch=8)
    _probe(data, path, EVIL, seed=0, batch=16)
    with Ledger(path) as led:
        _costed_run(led, "costed/s0", 0)
        _costed_run(led, "costed/s1", 1)
        led.add_event(
            "probe/s0",
            "diagnosis",
            {
                "cause": "schedule",
                "confidence": 0.7,
                "advice": "lower the LR",
                "evidence": {"grad_norm_jump": 3.2, "note": EVIDENCE_HTML},
            },
            start_step=10,
            end_step=20,
        )
        led.add_decision(
            EVIL,
            "hold",
            evidence={"marginal_yield": 0.01, "why": EVIDENCE_HTML},
            rationale="yield below the <b>policy</b> bar",
            stage="s1",
            policy_hash="abc123",
        )
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

    if series.startswith(("loss@", "loss:ema@")):  # the training loss: each logged step, downsampled min/max
        column = series.partition("@")[2]
        return min(int(steps[[column, "loss"]].dropna().shape[0]), PANEL_POINTS)
    if series == "val/loss@step":
        return len(evals_of("val/loss"))
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
    if series == "clipped_share":  # one point per logged step, downsampled min/max
        return min(int(steps["clipped"].notna().sum()), MAX_POINTS)
    if series == "signals/loss_scale":
        return min(int((extras.key == "signals/loss_scale").sum()), MAX_POINTS)
    if series == "signals/update_ratio/<median>":
        return extras[extras.key.str.startswith("signals/update_ratio/")]["step"].nunique()
    if series.startswith(("signals/gns/", "signals/update_ratio/")):  # one layer's line of the per-layer panel
        return min(int((extras.key == series).sum()), MAX_POINTS)
    raise AssertionError(f"unknown series {series}")


def check_frontier(traces: list[dict]) -> None:
    """A frontier plot: one point per run, and the Pareto front's line through at least one and at most all of them."""
    points = [t for t in traces if t["series"] == "frontier:point"]
    (front,) = [t for t in traces if t["series"] == "frontier:front"]
    assert front["name"] == "Pareto front" and all(t["n"] == 1 for t in points) and 1 <= front["n"] <= len(points)


@pytest.mark.slow
def test_report_json_and_png_files(written):
    out, result = written
    assert result["path"] == str(out / "report.html") and Path(result["path"]).stat().st_size > 1_000_000
    assert result["runs"] == ["probe/s0", EVIL, "costed/s0", "costed/s1"]
    assert result["figures"] == [
        "loss-tokens",
        "loss-time",
        "loss-cost",
        "train-loss",
        "throughput-learning",
        "tranche-yields",
        "yield-per-source",
        "yield-capability",
        "frontier",
        "signals-gns",
        "signals-update-ratio",
        "signals-layers",
        "signals-clipping",
    ]
    assert [Path(p).name for p in result["pngs"]] == [f"{f}.png" for f in result["figures"][:9]]
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
        page.route(
            "**/*",
            lambda route: (
                (requests.append(route.request.url), route.abort())
                if not route.request.url.startswith("file:")
                else route.continue_()
            ),
        )
        page.goto(page_path.as_uri(), wait_until="load")
        plots = page.evaluate("""[...document.querySelectorAll('.js-plotly-plot')].map(div => ({
            id: div.id,
            traces: div._fullData.map(t => ({
                name: t.name, run: t.meta.run, series: t.meta.series, n: t._length}))}))""")
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

    # The per-layer panel names its lines after layers, and carries each one's run beside its series.
    runs = {f["id"]: {html.unescape(t.get("run") or t["name"]) for t in f["traces"]} for f in plots}
    everyone, probes, costed = (
        {"probe/s0", EVIL, "costed/s0", "costed/s1"},
        {"probe/s0", EVIL},
        {"costed/s0", "costed/s1"},
    )
    assert runs == {
        "loss-tokens": everyone,
        "loss-time": everyone,
        "loss-cost": costed,
        "train-loss": everyone,
        "frontier": everyone | {"Pareto front"},
        "throughput-learning": everyone,
        "tranche-yields": everyone,
        "yield-per-source": probes,
        "yield-capability": probes,
        "signals-gns": probes,
        "signals-update-ratio": probes,
        "signals-layers": probes,
        "signals-clipping": probes,
    }
    checked = 0
    with Ledger(runs_db, readonly=True) as led:
        for figure in plots:
            if figure["id"].endswith("frontier"):
                check_frontier(figure["traces"])
                continue
            for t in figure["traces"]:
                expected = _expected_points(led, html.unescape(t.get("run") or t["name"]), t["series"])
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
    assert evidence_lines(body) == [
        "yield.low: 0.25",
        "yield.high: -",
        "seeds: 0, 1, 2",
        "curve: 50 values",
        "ok: true",
    ]
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
    assert out.startswith(f"wrote {tmp_path / 'one.html'}: 1 run, 6 plots")
    assert json.loads(cli_for(runs_db)("report", "costed/s0", "-o", str(tmp_path / "two.html"), "--json").stdout)[
        "figures"
    ] == ["loss-tokens", "loss-time", "loss-cost", "train-loss", "throughput-learning", "tranche-yields"]


def test_a_run_without_evaluations_still_gets_a_page_that_says_so(cli, ledger_path, tmp_path):
    with Ledger(ledger_path) as led:
        led.create_run("bare")
        led.append_steps(
            "bare",
            {
                "step": [1, 2, 3],
                "tokens": [10.0, 20.0, 30.0],
                "wall_s": [1.0, 2.0, 3.0],
                "tokens_per_s": [10.0, 10.0, 10.0],
            },
        )
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


def _tokenized_run(
    led: Ledger, run: str, *, tokenizer: str, bytes_per_token: float | None, seed: int = 0, slope: float = 1.0
) -> None:
    """A run with a tokenizer in its manifest (content hash `tokenizer`), logged per token."""
    tok = {
        "name": tokenizer,
        "content_hash": tokenizer,
        **({"bytes_per_token": bytes_per_token} if bytes_per_token else {}),
    }
    led.create_run(
        run, manifest=parse_manifest({"data": {"sources": [{"name": "web"}], "tokenizer": tok}, "seed": seed})
    )
    step = np.arange(1, 201)
    loss = 6.0 - slope * np.log(step) / 2 + 0.01 * seed
    led.append_steps(
        run,
        {
            "step": step,
            "tokens": step * 512.0,
            "wall_s": step * 0.1,
            "loss": loss,
            "tokens_per_s": 5120.0 + 100 * np.sin(step),
        },
    )
    led.append_evals(
        run,
        [
            EvalRecord(step=s, tokens=s * 512.0, task="val", metric="loss", value=loss[s - 1])
            for s in range(20, 201, 20)
        ],
    )


def _axis_titles(figure: dict) -> list[str]:
    layout = figure["layout"]
    return [
        layout[k]["title"]["text"]
        for k in sorted(layout)
        if k[:5] in ("xaxis", "yaxis") and layout[k].get("title", {}).get("text")
    ]


@pytest.mark.slow
def test_a_report_over_different_tokenizers_is_in_bits_per_byte_as_compare_per_byte(cli, ledger_path, tmp_path):
    with Ledger(ledger_path) as led:
        for seed in (0, 1):
            _tokenized_run(led, f"bpe4k/s{seed}", tokenizer="bpe4k", bytes_per_token=3.0, seed=seed)
            _tokenized_run(led, f"bpe32k/s{seed}", tokenizer="bpe32k", bytes_per_token=4.2, seed=seed, slope=1.1)
        _tokenized_run(led, "unknown-bytes", tokenizer="bpe8k", bytes_per_token=None)
    result = cli.json("report", "bpe4k/*", "bpe32k/*", "-o", str(tmp_path / "r.html"))
    assert result["per"] == "byte"
    with Ledger(ledger_path, readonly=True) as led:
        data = collect(led, ["bpe4k/*", "bpe32k/*"])
        plots = {f.id: f for f in build_figures(data)}
    figures = {k: f.figure.to_dict() for k, f in plots.items()}
    assert data.per == "byte" and data.metric == "val/bpb"
    assert "the runs' tokenizers differ: losses in bits per byte" in data.notes[0]
    # The comparison is `yieldgate compare --per byte`, to the number.
    (comparison,) = data.comparisons
    assert json.loads(json.dumps(clean(comparison.to_dict()))) == cli.json(
        "compare", "bpe4k/*", "bpe32k/*", "--per", "byte"
    )
    assert _axis_titles(figures["loss-tokens"]) == ["accepted bytes (bytes)", "val/bpb (bits/byte)"]
    trace = plots["loss-tokens"].figure.data[0]
    assert trace.x[0] == 20 * 512.0 * 3.0  # bytes: tokens x bytes per token
    assert trace.y[0] == pytest.approx((6.0 - np.log(20) / 2) / np.log(2) / 3.0)  # nats/token -> bits/byte
    page = (tmp_path / "r.html").read_text()
    assert "<th>bytes to target</th>" not in page and "<td>bytes to target</td>" in page
    # Asked per token, it stays per token (and the comparison says why it should not be).
    assert cli.json("report", "bpe4k/*", "bpe32k/*", "--per", "token", "-o", str(tmp_path / "t.html"))["per"] == "token"
    # A run without bytes per token cannot be converted: per token, and the note says so.
    with Ledger(ledger_path, readonly=True) as led:
        data = collect(led, ["bpe4k/s0", "unknown-bytes"])
    assert data.per == "token" and "'unknown-bytes' record(s) no data.tokenizer.bytes_per_token" in data.notes[0]
    # One tokenizer: per token, no note.
    with Ledger(ledger_path, readonly=True) as led:
        data = collect(led, ["bpe4k/*"])
    assert data.per == "token" and data.notes == []


def test_every_axis_says_its_unit(cli, ledger_path):
    with Ledger(ledger_path) as led:
        _tokenized_run(led, "a", tokenizer="t", bytes_per_token=3.0)
        _costed_run(led, "costed/s0", 0)
        led.append_steps(
            "a",
            {
                "step": np.arange(10, 201, 10),
                "signals/gns": np.full(20, 400.0),
                "signals/update_ratio/h.0": np.full(20, 1e-3),
                "signals/loss_scale": np.full(20, 1024.0),
                "clipped": np.arange(20) % 2,
            },
        )
        led.append_evals(
            "a",
            [
                EvalRecord(step=s, tokens=s * 512.0, task="arc_easy", metric="acc", value=0.3 + s / 1e3)
                for s in range(20, 201, 20)
            ],
        )
        figures = build_figures(collect(led, ["a", "costed/s0"]))
    assert [f.id for f in figures] == [
        "loss-tokens",
        "loss-time",
        "loss-cost",
        "train-loss",
        "throughput-learning",
        "tranche-yields",
        "yield-capability",
        "frontier",
        "signals-gns",
        "signals-update-ratio",
        "signals-layers",
        "signals-clipping",
    ]
    for f in figures:
        titles = _axis_titles(f.figure.to_plotly_json())
        assert titles and all(t.endswith(")") or t.endswith("/s") for t in titles), (f.id, titles)
    assert "B_simple (tokens, log)" in _axis_titles(figures[-4].figure.to_plotly_json())
    assert _axis_titles(figures[-1].figure.to_plotly_json())[-2:] == [
        "clipped, of the last 100 logged steps (%)",
        "loss scale (factor, log)",
    ]


def test_throughput_smoothing_is_a_moving_average_that_keeps_every_point(ledger_path, cli, tmp_path):
    with Ledger(ledger_path) as led:
        _tokenized_run(led, "a", tokenizer="t", bytes_per_token=3.0)
        data = collect(led, ["a"])
    raw = data.runs[0].data.steps["tokens_per_s"].to_numpy()
    expected, s = [], raw[0]
    for y in raw:
        s = 0.9 * s + 0.1 * y
        expected.append(s)
    (plain,) = [f for f in build_figures(data) if f.id == "throughput-learning"]
    (smooth,) = [f for f in build_figures(data, smooth=0.9) if f.id == "throughput-learning"]
    assert list(plain.figure.data[0].y) == list(raw)
    assert np.allclose(smooth.figure.data[0].y, expected, rtol=1e-12) and len(smooth.figure.data[0].y) == len(raw)
    assert smooth.notes[0].startswith("left: tokens/s smoothed, a moving average of weight 0.9")
    # A live page continues the average from the last value it drew: the same line as drawing it whole.
    series = pd.Series(raw)
    whole = smoothed(series, 0.9)
    assert np.allclose(smoothed(series[150:], 0.9, start=whole.iloc[149]), whole[150:], rtol=1e-12)
    for bad in ("1", "-0.1"):
        result = cli("report", "a", "--smooth", bad, "-o", str(tmp_path / "r.html"), code=2)
        assert result.stderr.startswith(f"error: smooth must be at least 0 and below 1, got {float(bad)}")


@pytest.mark.slow
def test_no_section_heading_without_content_and_manifest_values_read_as_values(cli, ledger_path, tmp_path):
    with Ledger(ledger_path) as led:
        led.create_run("bare")
        led.append_steps("bare", {"step": [1, 2, 3], "tokens": [10.0, 20.0, 30.0]})
        _tokenized_run(led, "a", tokenizer="bpe-" + "x" * 300, bytes_per_token=3.0)
        _tokenized_run(led, "b", tokenizer="bpe-y", bytes_per_token=3.0, seed=1)
    cli.json("report", "bare", "-o", str(tmp_path / "bare.html"))
    page = (tmp_path / "bare.html").read_text()
    assert "<h2>Runs</h2>" in page
    for heading in ("Learning against", "Throughput and learning", "Yields", "Learning signals", "Diagnoses"):
        assert f"<h2>{heading}" not in page, heading
    cli.json("report", "a", "b", "-o", str(tmp_path / "ab.html"))
    page = (tmp_path / "ab.html").read_text()
    for at in (i for i in range(len(page)) if page.startswith("</h2>", i)):
        assert not page.startswith("<h2", at + 5) and not page.startswith("</body>", at + 5)
    # The manifest diff and the confounders: one row per field, text as text (no JSON quotes), long values wrap.
    assert "<td>data.tokenizer.content_hash</td><td>bpe-" + "x" * 300 + "</td><td>bpe-y</td>" in page
    assert (
        'class="confounders"' in page and "table.manifest td, table.confounders td { overflow-wrap: anywhere;" in page
    )


def test_every_page_renders_through_one_escaping_environment():
    """The report's, the notebook's and the dashboard's templates render through `jinja.ENV`: a value is escaped
    (as the standard library spells it: `&#x27;`, `&quot;`) in text and in attributes alike, whatever kind of cell
    it is; an undefined name is an error, never an empty string; no template turns escaping off, and `Markup` is
    made only where the code vouches for it (plotly's output, plotly.js, our style sheets, the escaper itself)."""
    import jinja2

    from yieldgate.report.jinja import ENV, Cell, render, table

    macros = ENV.get_template("_macros.html").module
    q = 'it\'s "q" & <b>'
    drawn = str(macros.table(table([EVIL], [[EVIL, Cell(q, cls=q, href=q), {"note": EVIL}, 3.5, True, None]], q)))
    e, eq = html.escape(EVIL), html.escape(q)
    assert drawn == (
        f'<table class="{eq}"><thead><tr><th>{e}</th></tr></thead><tbody><tr><td>{e}</td>'
        f'<td class="{eq}"><a href="{eq}">{eq}</a></td>'
        f'<td class="json">note: {e}<details><summary>JSON</summary>{html.escape(json.dumps({"note": EVIL}))}</details>'
        '</td><td class="num">3.5</td><td>true</td><td class="num">-</td></tr></tbody></table>'
    )
    with pytest.raises(jinja2.UndefinedError, match="message"):
        render("dashboard/error.html", scripts=(), preload=None, version="0", css="")
    names = ENV.list_templates()
    assert "report.html" in names and "notebook.html" in names and "dashboard/decision.html" in names
    for name in names:
        text, _, _ = ENV.loader.get_source(ENV, name)
        assert "|safe" not in text.replace(" ", "") and "autoescape" not in text, name
    src = Path(__file__).parents[1] / "src" / "yieldgate"
    made = {str(f.relative_to(src)): f.read_text().count("Markup(") for f in src.rglob("*.py")}
    assert {f: n for f, n in made.items() if n} == {
        "report/jinja.py": 2,
        "report/html.py": 2,
        "report/notebook.py": 2,
        "serve/views.py": 1,
    }


def test_png_figures_carry_their_title_escaped(ledger_path):
    from yieldgate.report.html import PNG_TITLE_PX, _titled

    with Ledger(ledger_path) as led:
        _tokenized_run(led, EVIL, tokenizer="t", bytes_per_token=3.0)
        led.append_evals(
            EVIL,
            [
                EvalRecord(step=s, tokens=s * 512.0, task="<b>x</b>", metric="loss", value=1.0 / s)
                for s in range(20, 201, 20)
            ],
        )
        figures = build_figures(collect(led, [EVIL], metric="<b>x</b>/loss"))
    for f in figures:
        layout = _titled(f)["layout"]
        assert layout["title"]["text"] == html.escape(f.title) and layout["margin"]["t"] == 40 + PNG_TITLE_PX
    assert _titled(figures[0])["layout"]["title"]["text"] == "&lt;b&gt;x&lt;/b&gt;/loss vs tokens"


def test_results_render_in_a_notebook_with_the_reports_figures_and_nothing_fetched(ledger_path):
    """compare, yields, diagnose and forecast results as Jupyter shows them (`notebook.RENDERERS`): the CLI's numbers,
    the report's figures, plotly.js inlined once per process from the installed package, every name escaped."""
    import re

    from plotly.offline import get_plotlyjs

    import yieldgate
    from yieldgate.analysis.fit import forecast as fit_forecast
    from yieldgate.report import notebook
    from yieldgate.report.figures.results import comparison_figure, diagnosis_figure, forecast_figure
    from yieldgate.report.format import fmt as _num

    with Ledger(ledger_path) as led:
        for seed in (0, 1):
            _tokenized_run(led, f"a/s{seed}", tokenizer="t", bytes_per_token=3.0, seed=seed)
            _tokenized_run(led, f"{EVIL}/s{seed}", tokenizer="t", bytes_per_token=3.0, seed=seed, slope=1.2)
        led.append_steps("a/s0", {"step": [201], "tokens": [201 * 512.0], "wall_s": [20.1], "loss": [40.0]})
    notebook._shipped.clear()  # as in a fresh kernel
    comparison = yieldgate.compare("a/*", f"{EVIL}/*", ledger=ledger_path)
    report = yieldgate.yields(f"{EVIL}/s0", ledger=ledger_path)
    diagnosis = yieldgate.diagnose("a/s0", ledger=ledger_path, store=False)
    # `yieldgate forecast`'s own fit, with 40 bootstrap refits instead of 400 (a fast test; the same function)
    tokens = np.arange(20, 201, 20) * 512.0
    forecast = fit_forecast(tokens, 1.5 + 40 * tokens**-0.35 + 0.003 * np.sin(tokens), next_tokens=50_000, boots=40)
    pages = {
        name: notebook.result_html(result)
        for name, result in (
            ("compare", comparison),
            ("yields", report),
            ("diagnose", diagnosis),
            ("forecast", forecast),
        )
    }
    plotly_js = get_plotlyjs()
    assert plotly_js in pages["compare"] and not any(plotly_js in p for k, p in pages.items() if k != "compare")
    for name, page in pages.items():
        assert re.findall(r"<script[^>]*\bsrc=", page) == [] and "<link" not in page, name  # nothing fetched
        assert "Plotly.newPlot" in page and EVIL not in page, name
    # Each shows the numbers the CLI prints, and the figures hold every point of the result.
    assert html.escape(comparison.verdict) in pages["compare"] and "effective token multiplier" in pages["compare"]
    figure = comparison_figure(comparison)
    assert [len(t.x) for t in figure.figure.data] == [len(comparison.points)] * 3
    assert html.escape(f"{EVIL}/s0: yield of val/loss (nats/token)") in pages["yields"]
    assert all(f'<td class="num">{_num(t.yield_per_btok)}</td>' in pages["yields"] for t in report.tranches)
    (trace,) = tranche_yields_figure([report], "val/loss").figure.data  # the report's and the dashboard's figure
    assert len(trace.x) == len(report.tranches) and trace.meta["series"] == "tranche_yield:val/loss"
    spike = [f for f in diagnosis.findings if f.start_step == 201]
    assert spike and html.escape(spike[0].advice) in pages["diagnose"] and "201-201" in pages["diagnose"]
    assert len(diagnosis_figure(diagnosis).figure.data) == len(diagnosis.findings)
    assert "fit: loss = " in pages["forecast"] and f"({forecast.level:.0%} interval" in pages["forecast"]
    assert len(forecast_figure(forecast).figure.data[0].x) == len(forecast.fit.tokens)


@pytest.mark.slow
def test_import_yieldgate_in_an_ipython_shell_shows_results_as_the_report_draws_them():
    """In a running IPython shell, `import yieldgate` registers the report's renderers with the shell's HTML
    formatter (the analysis types know nothing of the report), and a forecast shows its fit and its figure."""
    pytest.importorskip("IPython")
    script = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "import sys, numpy as np, yieldgate\n"
        "assert 'yieldgate.report.notebook' in sys.modules\n"
        "from yieldgate.analysis.fit import forecast\n"
        "tokens = np.arange(20, 201, 20) * 512.0\n"
        "f = forecast(tokens, 1.5 + 40 * tokens ** -0.35, next_tokens=50_000, boots=20)\n"
        "data, _ = shell.display_formatter.format(f)\n"
        "page = data.get('text/html', '')\n"
        "assert 'fit: loss = ' in page and 'Plotly.newPlot' in page, 'the shell drew no forecast'\n"
        "assert not hasattr(f, '_repr_html_')\n"
        "print('ok')\n"
    )
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    # Outside a shell, `import yieldgate` loads no part of the report.
    plain = "import sys, yieldgate; assert not any(m.startswith('yieldgate.report') for m in sys.modules)"
    done = subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_diagnosis_labels_never_print_over_each_other(ledger_path):
    from yieldgate.report.figures.runs import LABEL_PX_PER_CHAR, PLOT_PX

    with Ledger(ledger_path) as led:
        _tokenized_run(led, "a", tokenizer="t", bytes_per_token=3.0)
        _tokenized_run(led, "b", tokenizer="t", bytes_per_token=3.0, seed=1)
        for run, start in (("a", 20), ("a", 24), ("b", 26), ("a", 30), ("b", 31), ("a", 120), ("b", 190)):
            led.add_event(run, "diagnosis", {"cause": "infrastructure_stall"}, start_step=start, end_step=start + 2)
        (loss,) = [f for f in build_figures(collect(led, ["a", "b"])) if f.id == "loss-tokens"]
    labels = [(a.x, a.yshift) for a in loss.figure.layout.annotations]
    assert len(labels) == 7 and len({y for _, y in labels}) >= 4  # close spans: several lines
    width = (len("infrastructure_stall") * LABEL_PX_PER_CHAR + 8) * (200 * 512 - 20 * 512) / PLOT_PX
    for line in {y for _, y in labels}:
        xs = sorted(x for x, y in labels if y == line)
        assert all(b - a > width for a, b in zip(xs, xs[1:], strict=False)), (line, xs)
    assert sorted(labels)[-1][1] == 0  # far from the others: back on the first line


@pytest.mark.slow  # trains or runs a real trainer: the full tier (make test-all)
def test_the_frontier_of_two_real_probes_agrees_with_the_ledger_rows(cli_for, runs_db, tmp_path):
    """Two real probes (batch 8 and 16): each run's tokens/s to the target and tokens to it, computed here from the
    raw step and eval rows, are the report's points; the front is the runs no other beats on both; a target only one
    run reaches leaves the other listed with the reason, not dropped."""
    from yieldgate.analysis.compare import crossing

    cli = cli_for(runs_db)
    runs = ["probe/s0", EVIL]
    out = cli.json("report", *runs, "-o", str(tmp_path / "f.html"))
    assert "frontier" in out["figures"]
    with Ledger(runs_db, readonly=True) as led:
        rows = {r: (led.steps(r), led.evals(r)) for r in runs}
    val = {r: ev[(ev["task"] == "val") & (ev["metric"] == "loss")].sort_values("step") for r, (_, ev) in rows.items()}
    target = max(v["value"].min() for v in val.values())
    direct = {}
    for r, (steps, _) in rows.items():
        timed = steps.dropna(subset=["tokens", "wall_s"]).sort_values("tokens")
        need = crossing(val[r]["tokens"].to_numpy(float), val[r]["value"].to_numpy(float), target)
        assert need is not None
        # tokens/s to the target: the tokens over the wall clock when the run had them (issue #43 item 5)
        direct[r] = (need / float(np.interp(need, timed["tokens"], timed["wall_s"])), need)
    f = out["frontier"]
    assert f["target"] == pytest.approx(target) and f["unplaced"] == {}
    for r, (rate, need) in direct.items():
        assert f["points"][r] == {"tokens_per_s": pytest.approx(rate), "tokens_to_target": pytest.approx(need)}
    (a, (ra, na)), (b, (rb, nb)) = direct.items()
    beaten = {a: rb >= ra and nb <= na and (rb > ra or nb < na), b: ra >= rb and na <= nb and (ra > rb or na < nb)}
    assert set(f["front"]) == {r for r, lost in beaten.items() if not lost} and f["front"]
    best = {r: v["value"].min() for r, v in val.items()}
    leader = min(best, key=best.get)
    strict = cli.json("report", *runs, "-o", str(tmp_path / "g.html"), "--target-loss", str(best[leader]))["frontier"]
    (other,) = set(runs) - {leader}
    assert list(strict["points"]) == [leader] and strict["front"] == [leader]
    assert strict["unplaced"] == {
        other: f"never reaches the target val/loss {best[leader]:.6g} (its best: {best[other]:.6g})"
    }
    page = (tmp_path / "g.html").read_text()
    assert "Pareto front" in page and "not placed: " in page
