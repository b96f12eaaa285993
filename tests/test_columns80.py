"""Every command's table at 80 columns (issue #36 item 5): on an 80-column terminal the Quickstart's `yield` table cut
its headline number (`23,2…`) and the demo printed both pipelines as `pipeline…`.

Each command of the golden cases (tests/test_golden_cli.py: its fixed ledger, fixture and cases, reused) runs as a
user types it, without `--json`, at `COLUMNS=80`: no line is wider than 80 columns and nothing is cut with `…`. The
prose lines a renderer prints whole so that a command or path can be copied (the terminal wraps them) are the one
exception, named in `WHOLE`. The demo's pipelines table is drawn from real comparisons on the same ledger.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tests.test_golden_cli import CASES, REPO, data  # noqa: F401 - `data`: the fixed ledger, a fixture
from yieldgate import api
from yieldgate.cli import app
from yieldgate.ledger import Ledger
from yieldgate.report.console import render_pipelines
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
