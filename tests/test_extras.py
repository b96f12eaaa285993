"""A missing optional dependency is named with the extra that installs it, in one line, not a traceback from deep
inside an import (issue #36, item 2). Each case runs in its own interpreter with the module made unimportable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from yieldgate.util.extras import EXTRA_OF


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_tracker_without_torch_names_the_torch_extra():
    result = _run(
        "import sys; sys.modules['torch'] = None\n"
        "try:\n"
        "    from yieldgate import Tracker\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    assert result.stdout.strip() == (
        "MissingExtra yieldgate.Tracker needs torch, which is not installed: pip install 'yieldgate[torch]'"
    ), result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "argv"),
    [
        ("wandb", ["export", "a", "out", "--to", "wandb"]),
        ("mlflow", ["import", "mlflow", "0123", "--run", "x"]),
    ],
)
def test_an_importer_or_exporter_without_its_extra_is_one_line_naming_it(tmp_path, module, argv):
    from yieldgate import Ledger

    with Ledger(tmp_path / "l.db") as led:  # a run to export
        led.create_run("a")
        led.append_steps("a", {"step": [1, 2], "loss": [3.0, 2.9]})
    result = _run(
        f"import sys, os; sys.modules[{module!r}] = None; os.chdir({str(tmp_path)!r})\n"
        "from yieldgate.cli import app\n"
        f"sys.argv = ['yieldgate', '--ledger', {str(tmp_path / 'l.db')!r}, *{argv!r}]\n"
        "app()\n"
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and f"pip install 'yieldgate[{EXTRA_OF[module]}]'" in result.stderr, (
        result.stderr
    )
