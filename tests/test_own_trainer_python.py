"""The interpreter of a campaign's own trainer (issue #43 item 8): on Ray and Slurm the command runs in each node's
environment, where `python` may be an interpreter without yieldgate; every probe then trained and failed at its end,
its Tracker never imported. `{python}` names the worker's own interpreter (the one running yieldgate), and before a
probe trains, the command's interpreter is checked to import the Tracker: refused in one line (exit 2) before any
probe on the local executor, and each probe failed at once with that line on a worker that lacks it.

A `python` on PATH that is the system's Python (no yieldgate) stands in for a node's environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from yieldgate.cli import app
from yieldgate.probe.campaign.own_spec import FIELDS, ProbeJob, command_interpreter, render, tracker_import_problem

BARE = shutil.which("python3", path="/usr/bin:/bin")
"""An interpreter without yieldgate: the system's."""


def bare_python(folder: Path) -> Path:
    """A folder whose `python` is the system's Python, which cannot import yieldgate."""
    if BARE is None or subprocess.run([BARE, "-c", "import yieldgate"], capture_output=True).returncode == 0:
        pytest.skip("no system Python 3 without yieldgate to stand in for a node's interpreter")
    folder.mkdir()
    (folder / "python").symlink_to(BARE)
    return folder


@pytest.mark.parametrize(
    ("command", "interpreter"),
    [
        ("python train.py --data {recipe_file}", "python"),
        ("env OMP_NUM_THREADS=1 python3.11 -u train.py", "python3.11"),
        ("/opt/venv/bin/python train.py", "/opt/venv/bin/python"),
        ("{python} train.py --seed {seed}", sys.executable),
        ("bash run.sh {recipe_file}", None),
        ("{workdir}/run.sh", None),
    ],
)
def test_the_interpreter_a_command_starts(command, interpreter):
    assert command_interpreter(command) == interpreter


def test_a_launcher_starts_the_interpreter_of_its_shebang(tmp_path, monkeypatch):
    launcher = tmp_path / "torchrun"
    launcher.write_text("#!/opt/team/venv/bin/python3.11\nprint('launch')\n")
    launcher.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert command_interpreter("torchrun --nproc-per-node {gpus} train.py") == "/opt/team/venv/bin/python3.11"


def test_python_is_a_field_naming_the_worker_s_interpreter():
    assert "python" in FIELDS
    job = ProbeJob(
        recipe_file="r.json",
        recipe="a",
        tokens=100,
        seed=0,
        run="c/a/s0/t100",
        model={"layers": 2, "width": 64, "heads": 4},
        gpus=0,
        workdir="/w",
        probe_dir="/w/p",
        campaign="c",
        ledger="/w/y.db",
        manifest_file="/w/p/m.json",
    )
    assert render("{python} train.py", job, quote=False) == f"{sys.executable} train.py"


def test_an_interpreter_without_yieldgate_is_said_in_one_line_with_the_fix(tmp_path):
    folder = bare_python(tmp_path / "node")
    env = {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}
    said = tracker_import_problem("python train.py", env, str(tmp_path))
    assert said is not None and "\n" not in said
    assert "'python'" in said and "cannot import yieldgate's Tracker (ModuleNotFoundError" in said
    assert "full path" in said and "{python}" in said and sys.executable in said
    assert tracker_import_problem(f"{sys.executable} train.py", env, str(tmp_path)) is None
    assert tracker_import_problem("{python} train.py", env, str(tmp_path)) is None


def test_the_local_executor_refuses_such_a_command_before_any_probe(tmp_path):
    folder = bare_python(tmp_path / "node")
    (tmp_path / "train.py").write_text("from yieldgate import Tracker\n")
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    spec = {
        "name": "own",
        "recipes": {"a": {"sources": [{"name": "a", "path": "a.jsonl"}]}},
        "seeds": 1,
        "budgets": [100],
        "trainer": {
            "command": "python train.py --data {recipe_file}",
            "env": {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"},
        },
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(spec))
    db = tmp_path / "y.db"
    result = CliRunner().invoke(app, ["--ledger", str(db), "probe", str(path)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: trainer.command's interpreter 'python'") and "{python}" in line, line
    assert not db.exists()  # refused before anything was written


def test_a_worker_whose_interpreter_lacks_yieldgate_fails_each_probe_at_once_with_that_line(tmp_path, monkeypatch):
    """On a worker (here: `run_own_probe` as Ray and Slurm call it), the probe fails before it trains, the line
    kept as its error."""
    from yieldgate.ledger import Ledger
    from yieldgate.probe.campaign import Campaign, plan
    from yieldgate.probe.campaign.own import run_own_probe

    folder = bare_python(tmp_path / "node")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("raise SystemExit('trained: the check should have stopped it')\n")
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    campaign = Campaign.model_validate(
        {
            "name": "own",
            "recipes": {"a": {"sources": [{"name": "a", "path": "a.jsonl"}]}},
            "seeds": 1,
            "budgets": [100],
            "trainer": {
                "command": "python train.py --data {recipe_file}",
                "env": {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"},
            },
        }
    )
    db = str(tmp_path / "y.db")
    with Ledger(db) as led:
        led.put_campaign(campaign.name, campaign.model_dump(mode="json"), campaign.content_hash())
    (spec,) = plan(campaign)
    result = run_own_probe(spec, db)
    assert result["status"] == "failed" and "cannot import yieldgate's Tracker" in result["error"], result
    assert "trained:" not in result.get("tail", "")
