"""The docs' Quickstart, run as written, from a wheel in a fresh virtual environment.

A wheel of this tree (or the one `YIELDGATE_WHEEL` names: `make quickstart` passes dist/'s) is installed with its
`[torch]` extra into a new venv, and every command of docs/quickstart.md runs there in order, in an empty folder
holding the page's `train.py`: the page's own `pip install` line (the package name swapped for the wheel's path),
then the script and the `yieldgate` commands. A green run from a source checkout can hide a file the wheel lacks
(the peak FLOP/s table was, until declared as package data); this cannot, and the page cannot drift from what works.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docs import DOCS, ROOT, quickstart

pytestmark = pytest.mark.slow

TORCH = "torch==2.13.0"  # as the Makefile: the CPU build on disk here, so the [torch] extra pulls no CUDA build
INSTALL = "pip install 'yieldgate[torch]'"


def run(cmd: list[str] | str, *, cwd: Path, env: dict[str, str], timeout: float = 900) -> str:
    result = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        shell=isinstance(cmd, str),
        executable="/bin/bash" if isinstance(cmd, str) else None,
    )
    assert result.returncode == 0, (
        f"`{cmd}` exited {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    )
    return result.stdout


def wheel(tmp_path: Path) -> Path:
    if os.environ.get("YIELDGATE_WHEEL"):
        return Path(os.environ["YIELDGATE_WHEEL"]).resolve()
    out = tmp_path / "dist"
    run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(ROOT)],
        cwd=tmp_path,
        env=dict(os.environ),
    )
    (built,) = out.glob("yieldgate-*.whl")
    return built


def test_quickstart_as_written_from_the_wheel(tmp_path: Path):
    files, commands = quickstart((DOCS / "quickstart.md").read_text())
    assert commands[0] == INSTALL, f"the Quickstart's first command is {commands[0]!r}; this test expects {INSTALL!r}"
    whl = wheel(tmp_path)

    venv, work = tmp_path / "venv", tmp_path / "work"
    work.mkdir()
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=dict(os.environ))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "YIELDGATE_LEDGER", "PYTHONHOME")}
    env |= {"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(venv), "COLUMNS": "100"}
    run(["pip", "install", "--quiet", TORCH], cwd=work, env=env)

    for name, body in files.items():
        (work / name).write_text(body)
    outputs = {}
    for command in commands:
        if command == INSTALL:
            command = f"pip install --quiet {shlex.quote(f'{whl}[torch]')}"
        outputs[command] = run(command, cwd=work, env=env)

    # The commands ran the installed wheel, not this checkout, and it holds every file of the package's source
    # folder (data files too: package data not declared in pyproject.toml is silently left out of a wheel).
    where = run(["python", "-c", "import yieldgate; print(yieldgate.__file__)"], cwd=work, env=env).strip()
    assert where.startswith(str(venv)), where
    source = ROOT / "src" / "yieldgate"
    installed = Path(where).parent
    wanted = [f.relative_to(source) for f in source.rglob("*") if f.is_file() and "__pycache__" not in f.parts]
    assert [str(f) for f in wanted if not (installed / f).is_file()] == []
    (row,) = json.loads(run(["yieldgate", "runs", "--json"], cwd=work, env=env))
    assert (row["name"], row["status"], row["steps"], row["tokens"]) == ("quickstart", "finished", 300, 307_200)
    assert (row["last_eval"]["task"], row["last_eval"]["metric"], row["last_eval"]["step"]) == ("val", "loss", 300)
    report = (work / "report.html").read_text()
    assert "quickstart" in report and "plotly" in report.lower()
    assert any("wrote report.html" in out for out in outputs.values())
