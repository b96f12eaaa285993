"""The docs' Quickstart, run as written, from a wheel in a fresh virtual environment, and a newcomer's path after it.

A wheel of this tree (or the one `YIELDGATE_WHEEL` names: `make quickstart` passes dist/'s) is installed with its
`[torch]` extra into a new venv, and every command of docs/quickstart.md runs there in order, in an empty folder
holding the page's `train.py`: the page's own `pip install` line (the package name swapped for the wheel's path),
then the script and the `yieldgate` commands. A green run from a source checkout can hide a file the wheel lacks
(the peak FLOP/s table was, until declared as package data); this cannot, and the page cannot drift from what works.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.test_columns80 import too_wide
from tests.test_docs import DOCS, ROOT, quickstart

pytestmark = pytest.mark.slow

TORCH = "torch==2.13.0"  # as the Makefile: the CPU build on disk here, so the [torch] extra pulls no CUDA build
CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
INSTALL = "pip install '.[torch]'"
WHEEL = 'make wheel && pip install "$(ls dist/yieldgate-*.whl)[torch]"'


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


@dataclass
class Newcomer:
    """The fresh virtual environment with the wheel installed and the Quickstart run in `work`, as a newcomer has
    it after the page: the environment to run in and what each command printed."""

    venv: Path
    work: Path
    env: dict[str, str]
    whl: Path
    outputs: dict[str, str]


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory) -> Newcomer:
    """The Quickstart as written, at `COLUMNS=80` (an 80-column terminal): built once for this module's tests."""
    tmp_path = tmp_path_factory.mktemp("quickstart")
    files, commands = quickstart((DOCS / "quickstart.md").read_text())
    assert commands[:3] == [CPU_TORCH, INSTALL, WHEEL], f"the Quickstart's install lines are {commands[:3]!r}"
    whl = wheel(tmp_path)

    venv, work = tmp_path / "venv", tmp_path / "work"
    work.mkdir()
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=dict(os.environ))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "YIELDGATE_LEDGER", "PYTHONHOME")}
    env |= {"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(venv), "COLUMNS": "80"}
    for name, body in files.items():
        (work / name).write_text(body)
    outputs = {}
    for command in commands:
        if command == CPU_TORCH:  # the CPU build: here the one on disk (the PyTorch index is not reachable)
            command = f"pip install --quiet {TORCH}"
        elif command == INSTALL:  # the checkout's package: this tree's wheel, so that a file it lacks shows
            command = f"pip install --quiet {shlex.quote(f'{whl}[torch]')}"
        elif command == WHEEL:  # the other way to the same install, done by the line before
            continue
        outputs[command] = run(command, cwd=work, env=env)
    return Newcomer(venv, work, env, whl, outputs)


def _resolved(report: Path) -> list[str]:
    return sorted(item["metadata"]["name"] for item in json.loads(report.read_text())["install"])


def test_the_install_lines_bring_no_cuda_package_to_a_cpu_machine(newcomer: Newcomer, tmp_path: Path):
    """Issue #43 item 3: `pip install '.[torch]'` after torch's CPU build resolves no `nvidia-*` package (pip's own
    resolver, `--dry-run --report`), and the CPU line itself brings none where its index is reachable."""
    report = tmp_path / "checkout.json"
    run(
        f"pip install --quiet --dry-run --report {report} {shlex.quote(f'{ROOT}[torch]')}",
        cwd=tmp_path,
        env=newcomer.env,
    )
    brought = _resolved(report)
    assert not [p for p in brought if p.startswith("nvidia-") or p == "torch"], brought
    try:
        urllib.request.urlopen("https://download.pytorch.org/whl/cpu/torch/", timeout=10).close()
    except OSError as exc:
        pytest.skip(f"the PyTorch CPU index is not reachable from here ({exc}): its own line was not resolved")
    report = tmp_path / "cpu.json"
    run(
        f"pip install --quiet --dry-run --ignore-installed --report {report} {CPU_TORCH[len('pip install ') :]}",
        cwd=tmp_path,
        env=newcomer.env,
    )
    brought = _resolved(report)
    assert "torch" in brought and not [p for p in brought if p.startswith("nvidia-")], brought


def test_quickstart_as_written_from_the_wheel(newcomer: Newcomer):
    venv, work, env, outputs = newcomer.venv, newcomer.work, newcomer.env, newcomer.outputs

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


def shown(out: str, command: str) -> None:
    """What an 80-column terminal shows of `command`: no traceback, no line past 80 columns, no number cut."""
    assert "Traceback" not in out, (command, out)
    assert too_wide(out) == [], (command, out)
    assert "…" not in out, (command, out)


def test_a_newcomer_s_path_at_80_columns(newcomer: Newcomer):
    """Issue #36's newcomer, after the Quickstart (from the wheel, at 80 columns): the same script run again makes a
    second run, `compare` and `report` take both, and `serve` (its extra installed when it asks for it) shows the
    runs and a run's page. Every command's output, the Quickstart's included, reads whole at 80 columns."""
    work, env = newcomer.work, newcomer.env

    def cli(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(["yieldgate", *args], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == code, (args, result.stdout, result.stderr[-3000:])
        shown(result.stdout, " ".join(args))
        assert "Traceback" not in result.stderr, (args, result.stderr)  # a one-line error is the terminal's to wrap
        return result

    for command, out in newcomer.outputs.items():
        if command.startswith("yieldgate"):
            shown(out, command)
    second = subprocess.run(["python", "train.py"], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "quickstart-2" in second.stdout + second.stderr
    assert {r["name"] for r in json.loads(cli("runs", "--json").stdout)} == {"quickstart", "quickstart-2"}
    cli("runs")
    cli("compare", "quickstart", "quickstart-2")
    cli("diagnose", "quickstart-2")  # below 100 columns, its findings as blocks (issue #43 item 6)
    assert "wrote report2.html" in cli("report", "quickstart", "quickstart-2", "-o", "report2.html").stdout

    # `serve` without its extra names it in one line; with it, it serves the runs and a run's page.
    refused = cli("serve", "--port", "0", code=2).stderr
    assert "serve" in refused and len(refused.strip().splitlines()) == 1, refused
    run(f"pip install --quiet {shlex.quote(f'{newcomer.whl}[serve]')}", cwd=work, env=env)
    server = subprocess.Popen(
        ["yieldgate", "serve", "--port", "0"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stderr is not None
        line = server.stdout.readline()
        found = re.search(r"http://\S+", line)
        assert found, (line, server.stderr.read() if server.poll() is not None else "")
        base = found.group(0).rstrip("/")
        with urllib.request.urlopen(f"{base}/", timeout=30) as page:  # the runs table, filled from /api/runs
            assert page.status == 200 and "yieldgate: runs" in page.read().decode()
        with urllib.request.urlopen(f"{base}/api/runs", timeout=30) as page:
            listed = json.loads(page.read())["runs"]  # a page of runs, with its total
            assert {r["name"] for r in listed} == {"quickstart", "quickstart-2"}
        with urllib.request.urlopen(f"{base}/run?name=quickstart-2", timeout=30) as page:
            assert page.status == 200 and "quickstart-2" in page.read().decode()
    finally:
        server.send_signal(signal.SIGINT)  # Ctrl-C, as the banner says
        _, err = server.communicate(timeout=30)
    assert "Traceback" not in err, err


STAMP = re.compile(r"^\[(\d+)m(\d\d)s\] ", re.MULTILINE)


def _documents(*pages: str) -> str:
    """JSON lines of real text: each paragraph of the named docs pages a document."""
    paragraphs = [p for page in pages for p in (DOCS / page).read_text().split("\n\n") if len(p) > 80]
    return "".join(json.dumps({"text": p}) + "\n" for p in paragraphs)


def test_a_newcomer_s_own_trainer_campaigns_at_80_columns(newcomer: Newcomer):
    """Issue #43's newcomer turns a script into probes: docs/own-trainer.md's script and campaign (its command starts
    with `{python}`, the worker's interpreter), as three recipes and as one, run from the wheel's environment with
    the output going to a pipe (as in CI or a Slurm log). Each `probe` prints a line as each probe ends and names
    `yieldgate serve`, no two of its lines are more than a silent half minute apart, and `campaign` reads whole at
    80 columns."""
    from yieldgate.report.console.progress import EVERY_S

    files, _ = quickstart((DOCS / "own-trainer.md").read_text())
    own = newcomer.work / "own"
    (own / "data").mkdir(parents=True)
    (own / "train.py").write_text(files["train.py"])
    (own / "data" / "plays.jsonl").write_text(_documents("concepts.md", "probes.md"))
    (own / "data" / "poems.jsonl").write_text(_documents("report.md", "diagnosis.md"))
    (own / "heldout.jsonl").write_text(_documents("gate.md"))
    three = yaml.safe_load(files["campaign.yaml"])
    assert three["trainer"]["command"].startswith("{python} ") and len(three["recipes"]) == 3
    one = {**three, "name": "own-one", "recipes": {"clean": three["recipes"]["clean"]}}
    for name, spec in (("three.yaml", three), ("one.yaml", one)):
        (own / name).write_text(yaml.safe_dump(spec))
    for file, campaign in (("three.yaml", three), ("one.yaml", one)):
        done = subprocess.run(
            ["yieldgate", "probe", file, "--workers", "2"], cwd=own, env=newcomer.env, capture_output=True, text=True
        )
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
        shown(done.stdout, f"yieldgate probe {file}")
        assert "Traceback" not in done.stderr, done.stderr
        assert "serve` shows the runs live" in done.stderr, done.stderr
        for recipe in campaign["recipes"]:
            assert f"{campaign['name']}/{recipe}/s0/t8192: finished" in done.stderr, (recipe, done.stderr)
        stamps = [int(m) * 60 + int(s) for m, s in STAMP.findall(done.stderr)]
        assert stamps and max(b - a for a, b in zip([0, *stamps], stamps, strict=False)) <= EVERY_S + 5, stamps
        listed = subprocess.run(
            ["yieldgate", "campaign", campaign["name"]], cwd=own, env=newcomer.env, capture_output=True, text=True
        )
        assert listed.returncode == 0, listed.stderr[-2000:]
        shown(listed.stdout, f"yieldgate campaign {campaign['name']}")
        assert f"{campaign['name']}: 8,192 tokens per probe" in listed.stdout and "none)" not in listed.stdout
