"""Issue 45, the fourth wave of real logs (tests/support/real_wave4.py): every command a user runs after importing one
(import, show, yield, compare, diagnose, report, export) exits 0 or 2 with one line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.real_wave4 import WAVE4_LOGS
from yieldgate.cli import app

ROOT = Path(__file__).parent / "data" / "real"


@pytest.mark.slow  # every command on every log
@pytest.mark.parametrize("name", sorted(e["path"] for e in WAVE4_LOGS))
def test_every_command_exits_0_or_2_on_the_fourth_wave(name, ledger_path, tmp_path):
    runner = CliRunner()
    base = ["--ledger", str(ledger_path)]
    for run in ("a", "b"):
        result = runner.invoke(app, [*base, "import", "auto", str(ROOT / name), "--run", run])
        assert result.exit_code == 0, result.output
    for args in (
        ["show", "a"],
        ["yield", "a"],
        ["compare", "a", "b"],
        ["diagnose", "a"],
        ["report", "a", "--output", str(tmp_path / "r.html")],
        ["export", "a", str(tmp_path / "a.csv"), "--to", "table"],
    ):
        result = runner.invoke(app, [*base, *args])
        assert result.exit_code in (0, 2), (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
        assert "Usage:" not in result.output, (args, result.output)  # the command ran: its arguments were read
