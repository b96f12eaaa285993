"""Every command's table at 80 columns (issue #36 item 5): on an 80-column terminal the Quickstart's `yield` table cut
its headline number (`23,2…`) and the demo printed both pipelines as `pipeline…`.

Each command of the golden cases (tests/test_golden_cli.py: its fixed ledger, fixture and cases, reused) runs as a
user types it, without `--json`, at `COLUMNS=80`: no line is wider than 80 columns and nothing is cut with `…`. The
prose lines a renderer prints whole so that a command or path can be copied (the terminal wraps them) are the one
exception, named in `WHOLE`. The demo's pipelines table is drawn from real comparisons on the same ledger.

Issue #43 items 6 and 7: `runs` never breaks a run name across lines, `diagnose` prints its findings as blocks below
100 columns, and a run's steps are its last step, not the step records it logged.
"""

from __future__ import annotations

import io
import shutil
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from tests.test_golden_cli import CASES, REPO, data  # noqa: F401 - `data`: the fixed ledger, a fixture
from yieldgate import api
from yieldgate.analysis.detectors import Finding
from yieldgate.analysis.diagnose import Diagnosis
from yieldgate.cli import app
from yieldgate.ledger import Ledger
from yieldgate.report.console import evidence_lines, render_diagnosis, render_pipelines, render_runs, run_record
from yieldgate.report.console.probe import BLOCKS_BELOW
from yieldgate.report.format import fmt

WIDTH = 80
WHOLE = ("#", "next: ", "check it: ", "wrote ")
"""Lines printed whole (`soft_wrap`): a gate's rationale and next step, a command to copy, a file written."""
PROSE = ("campaign-list", "check", "export", "ledger-copy", "manifest-validate", "merge", "note", "rename", "rm")
SKIPPED = {
    "report": "writes an HTML page (3 s) and prints prose lines only; the newcomer test runs it at 80 columns",
    **dict.fromkeys((*PROSE, "tag", "untag"), "prints lines, no table"),
}


def too_wide(out: str) -> list[str]:
    return [line for line in out.splitlines() if len(line) > WIDTH and not line.startswith(WHOLE)]


def run80(ledger: Path, args: list[str]) -> str:
    result = CliRunner().invoke(app, ["--ledger", str(ledger), *args], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0 and result.exception is None, (args, result.stderr)
    return result.stdout


@pytest.mark.parametrize("case", sorted(set(CASES) - set(SKIPPED)))
def test_every_table_fits_80_columns_without_a_cut(case, data, tmp_path):  # noqa: F811 - the fixture imported
    ledger = tmp_path / "ledger.db"
    shutil.copy(data / "fixed.db", ledger)
    fill = {"repo": REPO, "data": data, "tmp": tmp_path, "ledger": ledger}
    for args in CASES[case].before:
        run80(ledger, [a.format(**fill) for a in args])
    out = run80(ledger, [a.format(**fill) for a in CASES[case].args])
    assert too_wide(out) == [], out
    assert "…" not in out, out


def test_the_yield_table_shows_each_tranche_s_yield_whole(data, tmp_path):  # noqa: F811
    """The headline numbers themselves: each tranche's yield per billion tokens appears as `fmt` writes it, and the
    columns left out to make room are named."""
    ledger = tmp_path / "ledger.db"
    shutil.copy(data / "fixed.db", ledger)
    run = "camp/base/s0/t150000"
    tranches = api.yields(run, ledger=str(ledger)).tranches
    out = run80(ledger, ["yield", run])
    cells = {cell.strip() for line in out.splitlines() for cell in line.split("│")}
    assert {fmt(t.yield_per_btok) for t in tranches} <= cells, out
    assert "left out to fit 80 columns: per kWh" in out  # no energy recorded: the empty column goes first


def test_a_wide_terminal_keeps_every_column(data, tmp_path):  # noqa: F811
    ledger = tmp_path / "ledger.db"
    shutil.copy(data / "fixed.db", ledger)
    result = CliRunner().invoke(app, ["--ledger", str(ledger), "yield", "camp/base/s0/t150000"], env={"COLUMNS": "200"})
    assert "per kWh" in result.stdout and "left out to fit" not in result.stdout


def test_the_demo_s_pipelines_table_fits_80_columns(data):  # noqa: F811
    """render_pipelines as the demo calls it: seed 0's figures of two pipelines with their hard slices, and the
    comparisons at equal tokens and time (real ones, of the fixed ledger's two recipes)."""
    with Ledger(data / "fixed.db", readonly=True) as led:
        by_tokens = api.compare("camp/base/s*/t150000", "camp/wide/s*/t150000", ledger=led, at="tokens", per="byte")
        by_time = api.compare("camp/base/s*/t150000", "camp/wide/s*/t150000", ledger=led, at="time", per="byte")
    hard = {"hard/folio/bpb": 2.779, "hard/rare/bpb": 2.938}
    runs = {
        name: {"batch": batch, "train_mb": mb, "tokens_per_s": tps, "val_bpb": 2.84, "hard": hard}
        for name, batch, mb, tps in (("pipeline-a", 16, 1.82, 68_112.4), ("pipeline-b", 64, 3.0, 107_124.9))
    }
    printed = io.StringIO()
    render_pipelines(runs, Console(width=WIDTH, file=printed), by_tokens, by_time, ["optimisation.batch_size"])
    out = printed.getvalue()
    assert too_wide(out) == [], out
    assert "…" not in out, out
    assert "pipeline-a" in out and "pipeline-b" in out and "68,112" in out and "107,125" in out


# -- issue #43 item 6: names never split, diagnose findings as blocks ------------------------------------------------

NAME = st.text(alphabet=string.ascii_letters + string.digits + "/-_.", min_size=1, max_size=70)


def record(name: str, *, steps: int = 5000, tags: tuple[str, ...] = ()) -> dict:
    """A runs-table record (`run_record`'s fields) of a finished run."""
    last_eval = {"task": "val", "metric": "loss", "value": 0.9406, "step": steps}
    return {
        "name": name,
        "status": "finished",
        "tokens": 149_504.0,
        "steps": steps,
        "created_at": "2026-12-07 14:16",
        "duration_s": 34_020.0,
        "last_eval": last_eval,
        "tags": list(tags),
    }


def printed(width: int, draw) -> str:
    out = io.StringIO()
    draw(Console(width=width, file=out, emoji=False))  # as the command line prints (cli/common.py)
    return out.getvalue()


@settings(max_examples=60, deadline=None)
@given(names=st.lists(NAME, min_size=1, max_size=4, unique=True), width=st.integers(40, 160), tagged=st.booleans())
def test_runs_prints_every_name_whole_on_one_line_at_any_width(names, width, tagged):
    """Whatever the names and the terminal, each run's name stands whole on one line (a table row, or a block's first
    line), and no other line is wider than the terminal."""
    records = [record(n, tags=("baseline",) if tagged else ()) for n in names]
    out = printed(width, lambda c: render_runs(records, c, matched=len(records), sort=None))
    lines = out.splitlines()
    for name in names:
        assert any(name in line for line in lines), (name, out)
    assert [line for line in lines if len(line) > width and line.strip() not in names] == [], out


def test_runs_keeps_the_names_of_a_campaign_whole_at_80_columns(data):  # noqa: F811
    """The fixed ledger's runs (`camp/base/s0/t150000` and the like) at 80 columns: a table, each name whole on its
    row, the creation time left out (said so) to make room; before, each name folded after `camp/base/s0/t`."""
    out = run80(data / "fixed.db", ["runs"])
    rows = [line.split() for line in out.splitlines()]
    names = [row[0] for row in rows if row and row[0].startswith(("camp/", "mitos"))]
    assert len(names) == 16 and "camp/base/s0/t150000" in names, out
    assert "left out to fit 80 columns: created" in out


def test_diagnose_prints_findings_as_blocks_below_100_columns(data, tmp_path):  # noqa: F811
    """`diagnose` of the imported nanoGPT run (it overfits): below 100 columns each finding is a block, its advice
    whole in lines of words and its evidence one line each; at 100 and over, the five-column table."""
    ledger = tmp_path / "ledger.db"
    shutil.copy(data / "fixed.db", ledger)
    (finding,) = api.diagnose("mitos-char", ledger=str(ledger)).findings
    out = run80(ledger, ["diagnose", "mitos-char"])
    assert "┃" not in out and f"{finding.cause}: steps {finding.start_step}-{finding.end_step}, confidence" in out
    assert " ".join(out.split("advice: ")[1].split("evidence:")[0].split()) == finding.advice
    assert out.count("\n    ") >= 5  # the evidence, one indented line each
    wide = CliRunner().invoke(app, ["--ledger", str(ledger), "diagnose", "mitos-char"], env={"COLUMNS": "100"})
    assert "┃ cause" in wide.stdout and "advice: " not in wide.stdout


@settings(max_examples=40, deadline=None)
@given(
    advice=st.lists(st.text(alphabet=string.ascii_lowercase + ",;:()", min_size=1, max_size=24), min_size=1),
    evidence=st.dictionaries(st.from_regex(r"[a-z_]{1,30}", fullmatch=True), st.floats(-1e6, 1e6), max_size=8),
    width=st.integers(40, BLOCKS_BELOW - 1),
)
def test_diagnose_blocks_keep_every_word_and_fit_the_terminal(advice, evidence, width):
    """A finding's block at any width under 100: every word of the advice, in order, and every evidence line, with no
    line wider than the terminal."""
    finding = Finding(
        cause="overfitting",
        start_step=1000,
        end_step=5000,
        confidence=0.75,
        evidence=evidence,
        advice=" ".join(advice),
        detector="overfitting",
    )
    out = printed(width, lambda c: render_diagnosis(Diagnosis(run="r", findings=[finding]), c, "r"))
    said = out.split("advice: ")[1].split("\n  evidence:")[0]
    assert said.split() == " ".join(advice).split(), out
    for line in evidence_lines(evidence):
        assert f"    {line}" in out.splitlines() or len(line) > width - 4, out
    assert [line for line in out.splitlines() if len(line) > width] == [], out


# -- issue #43 item 7: a run's steps are its last step ---------------------------------------------------------------


def test_an_imported_run_s_steps_are_its_last_step_not_its_rows(data):  # noqa: F811
    """The nanoGPT log kept every 10th step (501 records of a 5,000-step run): `runs` and `show` say 5,000 steps, and
    --json keeps both (`steps`, `step_records`)."""
    (row,) = [r for r in api.list_runs([], ledger=str(data / "fixed.db")).rows if r["name"] == "mitos-char"]
    record = run_record(row)
    assert (record["steps"], record["step_records"], record["last_eval"]["step"]) == (5000, 501, 5000)
    table = run80(data / "fixed.db", ["runs", "mitos-char"])
    assert "5,000" in table and "501" not in table
    assert "steps 5,000" in run80(data / "fixed.db", ["show", "mitos-char"])


@settings(max_examples=25, deadline=None)
@given(
    first=st.integers(0, 50),
    stride=st.integers(1, 40),
    n=st.integers(1, 60),
)
def test_steps_shown_are_the_last_step_whatever_the_logging_cadence(first, stride, n):
    """Steps logged every `stride` from `first`: the run's steps are its last step, `step_records` their count."""
    steps = [first + stride * i for i in range(n)]
    with Ledger(":memory:") as led:
        led.create_run("r")
        led.append_steps("r", {"step": steps, "loss": [1.0] * n})
        record = run_record(led.run_records("r")[0])
    assert (record["steps"], record["step_records"]) == (steps[-1], n)


def test_runs_sort_by_steps_and_the_run_page_read_the_last_step(tmp_path):
    """A run logged at steps 0 and 1,000 (2 records) has more steps than one logged at every step to 9 (10 records):
    `--sort steps` puts it first reversed, and the dashboard's run page says 1,000 steps."""
    pytest.importorskip("plotly")
    from yieldgate.serve.views import run_page

    ledger = tmp_path / "ledger.db"
    with Ledger(ledger) as led:
        for run, steps in (("sparse", [0, 1000]), ("dense", list(range(10)))):
            led.create_run(run)
            led.append_steps(run, {"step": steps, "loss": [1.0] * len(steps)})
        page = run_page(led, "sparse")
    rows = api.list_runs([], ledger=str(ledger), sort="steps", reverse=True).rows
    assert [r["name"] for r in rows] == ["sparse", "dense"]
    assert '<span id="steps">1,000</span> steps' in page


def test_the_command_line_prints_emoji_codes_as_written():
    """A run name or an advice holding `:v:` (hypothesis found one) is printed as written, not as a picture."""
    from yieldgate.cli.common import console

    with console.capture() as captured:
        console.print("advice: :v: run :thumbs_up:")
    assert captured.get().strip() == "advice: :v: run :thumbs_up:"
