"""Security: the HTML report escapes every user string; nothing listens on a network port; no credential
reaches the ledger or the report; nothing is ever unpickled. Each test keeps its Reliability row (docs)
true (tests/support/reliability.py)."""

from __future__ import annotations

import ast
import json
import os
import pickle
import sqlite3
from html import escape
from pathlib import Path

import numpy as np
import psutil
import pytest
from typer.testing import CliRunner

from tests.support.digest import ledger_digest
from tests.support.reliability import check
from yieldgate.cli import app
from yieldgate.ingest import KINDS
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.manifest import parse_manifest
from yieldgate.track.tracker import Tracker, TrackerConfig

SRC = Path(__file__).resolve().parents[1] / "src" / "yieldgate"

# One hostile string per place a user's words reach the report, each tagged so a leak says where it came from.
HOSTILE = {
    "run name": "<script>alert('run')</script>",
    "second run name": "<img src=x onerror=alert('run2')>",
    "manifest source name": "<script>alert('source')</script>",
    "manifest code version": "\"><svg onload=alert('code')>",
    "eval task": "<b onmouseover=alert('task')>",
    "diagnosis advice": "<script>alert('advice')</script>",
    "diagnosis evidence": "<iframe src=javascript:alert('evidence')>",
    "decision rationale": "</td><script>alert('rationale')</script>",
    "decision evidence": "<a href=javascript:alert('why')>x</a>",
    "decision stage": "<style>body{display:none}</style>",
}


def _invoke(ledger: Path, *args: str, code: int = 0):
    result = CliRunner().invoke(app, ["--ledger", str(ledger), *args])
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


def _api_run(led: Ledger, run: str, seed: int) -> None:
    # The report shows the fields where the runs' manifests differ: the hostile ones on seed 0 only.
    manifest = parse_manifest(
        {
            "data": {"sources": [{"name": HOSTILE["manifest source name"] if seed == 0 else "web"}]},
            "code_version": HOSTILE["manifest code version"] if seed == 0 else "v1",
            "seed": seed,
        }
    )
    led.create_run(run, manifest=manifest)
    step = np.arange(1, 101)
    loss = 7.0 - np.log(step) + 0.01 * seed
    led.append_steps(
        run,
        {
            "step": step,
            "tokens": step * 256.0,
            "wall_s": step * 0.05,
            "loss": loss,
            "tokens_per_s": np.full(100, 5120.0),
        },
    )
    led.append_evals(
        run,
        [
            EvalRecord(step=s, tokens=s * 256.0, task=task, metric="loss", value=loss[s - 1])
            for s in (1, 25, 50, 75, 100)
            for task in ("val", HOSTILE["eval task"])
        ],
    )


@pytest.mark.slow
def test_the_report_escapes_every_user_string(tmp_path):
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        _api_run(led, HOSTILE["run name"], 0)
        _api_run(led, HOSTILE["second run name"], 1)
        led.add_event(
            HOSTILE["run name"],
            "diagnosis",
            {
                "cause": "schedule",
                "confidence": 0.7,
                "advice": HOSTILE["diagnosis advice"],
                "evidence": {"note": HOSTILE["diagnosis evidence"]},
            },
            start_step=10,
            end_step=20,
        )
        led.add_decision(
            HOSTILE["run name"],
            "hold",
            evidence={"why": HOSTILE["decision evidence"]},
            rationale=HOSTILE["decision rationale"],
            stage=HOSTILE["decision stage"],
            policy_hash="p1",
        )
    out = tmp_path / "report.html"
    _invoke(path, "report", HOSTILE["run name"], HOSTILE["second run name"], "-o", str(out))
    page = out.read_text()
    leaked = [where for where, s in HOSTILE.items() if s in page]
    # Shown, not dropped: each string is on the page in an escaped form (HTML entities, or JSON's \u003c
    # inside the plots' data).
    shown = [
        where
        for where, s in HOSTILE.items()
        if escape(s) in page
        or json.dumps(s)[1:-1].replace("<", "\\u003c").replace(">", "\\u003e") in page
        or escape(s, quote=False) in page
    ]
    assert leaked == [], leaked
    assert shown == list(HOSTILE), set(HOSTILE) - set(shown)
    check(
        "HTML in run names, manifest values, eval tasks, diagnosis and decision text",
        f"report shows all {len(shown)} as text (escaped); {len(leaked)} reach the page as markup",
        "0",
    )


def _listening(proc: psutil.Process) -> list[str]:
    """Listening TCP/UDP sockets of a process and its children, as `pid addr:port`."""
    found = []
    for p in [proc, *proc.children(recursive=True)]:
        try:
            conns = p.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        found += [
            f"{p.pid} {c.laddr.ip}:{c.laddr.port}"
            for c in conns
            if c.status == psutil.CONN_LISTEN or (c.type == 2 and c.laddr and not c.raddr)
        ]
    return found


SENTINELS = {
    "WANDB_API_KEY": "wandb-sentinel-7f3a9c",
    "MLFLOW_TRACKING_TOKEN": "mlflow-sentinel-51be02",
    "HF_TOKEN": "hf-sentinel-c0ffee",
    "MLFLOW_TRACKING_PASSWORD": "mlflow-password-sentinel-9d1",
    "AWS_SECRET_ACCESS_KEY": "aws-sentinel-4411",
}


@pytest.mark.slow
def test_console_markup_in_run_names_and_tasks_is_printed_as_written(tmp_path):
    """rich reads `[...]` in a printed string as style markup: a run named `a[/]b` made `yieldgate runs` crash
    with a MarkupError traceback, and `[red]x` lost its brackets. Every command prints user strings verbatim."""
    ledger = tmp_path / "markup.db"
    names = ["a[/]b", "[red]x[/red]"]
    with Ledger(ledger) as led:
        for seed, run in enumerate(names):
            step = np.arange(1, 101)
            led.create_run(run, manifest=parse_manifest({"seed": seed}))
            led.append_steps(
                run,
                {
                    "step": step,
                    "tokens": step * 256.0,
                    "wall_s": step * 0.05,
                    "loss": 7.0 - np.log(step) + 0.01 * seed,
                    "signals/[b]k": np.ones(100),
                },
            )
            led.append_evals(
                run,
                [
                    EvalRecord(step=s, tokens=s * 256.0, task=t, metric="loss", value=7.0 - np.log(s))
                    for s in (1, 25, 50, 75, 100)
                    for t in ("val", "[bold]t")
                ],
            )
    shown = {
        ("runs",): names,
        ("show", names[0]): [names[0], "signals/[b]k"],
        ("yield", names[1], "--metric", "[bold]t/loss"): [names[1], "[bold]t/loss"],
        ("compare", names[0], names[1]): names,
        ("diagnose", names[0]): [names[0]],
        ("forecast", names[1], "--next-tokens", "10000"): ["fit: loss"],
    }
    for args, words in shown.items():
        out = _invoke(ledger, *args).stdout
        assert all(w in out for w in words), (args, out)
    check(
        "rich markup (`[/]`, `[red]`) in run names, eval tasks and metric keys",
        "printed as written by every command, never styled or a traceback",
        "0",
    )


def test_no_port_opened_and_no_credential_stored(tmp_path, monkeypatch):
    """A tracked run, an import and a report, with credentials in the environment as a user's shell has
    them: no socket listens at any point, and no credential is in the ledger's bytes or the report."""
    for name, value in SENTINELS.items():
        monkeypatch.setenv(name, value)
    me = psutil.Process()
    before = _listening(me)
    path = tmp_path / "l.db"
    seen = []
    tracker = Tracker(
        "tracked",
        ledger=path,
        config=TrackerConfig(log_every_steps=5, flush_every_s=0.1),
        manifest={"data": {"sources": [{"name": "web"}]}, "seed": 0},
    )
    for step in range(1, 201):
        tracker.step(tokens=256, samples=2, loss=3.0 / step**0.3)
        if step % 50 == 0:
            tracker.eval({"val/loss": 3.1 / step**0.3})
            seen += _listening(me)  # while the writer thread and telemetry run
    tracker.close()
    csv = tmp_path / "m.csv"
    csv.write_text(
        "step,tokens,loss,val_loss\n"
        + "".join(f"{s},{s * 100},{3 / s},{3.1 / s if s % 5 == 0 else ''}\n" for s in range(1, 41))
    )
    _invoke(path, "import", "table", str(csv), "--run", "imported")
    seen += _listening(me)
    out = tmp_path / "report.html"
    _invoke(path, "report", "tracked", "imported", "-o", str(out))
    seen += _listening(me)
    assert before == [] and seen == [], (before, seen)

    stored = b"".join(p.read_bytes() for p in tmp_path.glob("l.db*")) + out.read_bytes()
    found = [name for name, value in SENTINELS.items() if value.encode() in stored]
    assert found == [], found
    # The ledger's text, decoded, the same way (a value stored in JSON or compressed would hide from bytes).
    db = sqlite3.connect(path)
    text = " ".join(
        str(cell)
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        for row in db.execute(f'SELECT * FROM "{table}"')
        for cell in row
    )
    db.close()
    assert not any(value in text for value in SENTINELS.values())
    check(
        "a tracked run, an import and a report (network and credentials)",
        f"{len(seen)} sockets listen at any point; {len(found)} of {len(SENTINELS)} credentials in the environment "
        "(W&B, MLflow, HF, AWS) reach the ledger or the report",
        "0",
    )


# -- pickle -----------------------------------------------------------------------------------------------


class _Payload:
    """Unpickling this writes a file: proof that something loaded the pickle."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "pwned"))


@pytest.mark.slow
def test_a_pickle_handed_to_any_importer_is_refused_and_never_loaded(tmp_path):
    path = tmp_path / "l.db"
    csv = tmp_path / "base.csv"
    csv.write_text("step,loss\n1,3.0\n2,2.5\n")
    _invoke(path, "import", "table", str(csv), "--run", "base")
    marker = tmp_path / "pwned"
    refused = []
    for name in (
        "checkpoint.pt",
        "state.pkl",
        "events.out.tfevents.1.host",
        "trainer_state.json",
        "run.wandb",
        "results.json",
        "metrics.parquet",
    ):
        bad = tmp_path / name
        bad.write_bytes(pickle.dumps({"model": _Payload(str(marker)), "step": 1, "loss": 2.0}))
        for kind in KINDS:
            before = ledger_digest(path)
            result = _invoke(path, "import", kind, str(bad), "--run", f"p-{kind}", code=2)
            assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, (kind, result.stderr)
            assert ledger_digest(path) == before and not marker.exists(), (kind, name)
            refused.append((kind, name))
    check(
        "a pickle (checkpoint, .pt, .pkl) handed to each importer",
        f"refused in one line, exit 2, ledger unchanged, payload never run ({len(refused)} of {len(KINDS) * 7} tries)",
        "0",
    )


# Calls that unpickle (or run code from data); none may appear in yieldgate's source.
_UNSAFE = {
    ("torch", "load"),
    ("pickle", "load"),
    ("pickle", "loads"),
    ("pickle", "Unpickler"),
    ("joblib", "load"),
    ("pd", "read_pickle"),
    ("pandas", "read_pickle"),
    ("yaml", "load"),
    ("yaml", "unsafe_load"),
    ("yaml", "full_load"),
    ("dill", "load"),
    ("cloudpickle", "load"),
    ("marshal", "loads"),
    ("shelve", "open"),
}


@pytest.mark.slow
def test_no_code_path_unpickles():
    """An AST scan of every module: no call of a loader that unpickles, no `allow_pickle=True`, no eval/exec.
    (A future `torch.load` must say `weights_only=True`, and this test lets it through only then.)"""
    found = []
    files = sorted(SRC.rglob("*.py"))
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            if not isinstance(node, ast.Call):
                continue
            func, where = node.func, f"{file.relative_to(SRC)}:{node.lineno}"
            kwargs = {k.arg: k.value for k in node.keywords}
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                if (func.value.id, func.attr) in _UNSAFE:
                    safe = (
                        (func.value.id, func.attr) == ("torch", "load")
                        and isinstance(kwargs.get("weights_only"), ast.Constant)
                        and kwargs["weights_only"].value is True
                    )
                    if not safe:
                        found.append(f"{where} {func.value.id}.{func.attr}")
            if isinstance(func, ast.Name) and func.id in ("eval", "exec"):
                found.append(f"{where} {func.id}")
            if isinstance(kwargs.get("allow_pickle"), ast.Constant) and kwargs["allow_pickle"].value is True:
                found.append(f"{where} allow_pickle=True")
    assert len(files) > 40 and found == [], found
    check(
        "source scan: code paths that would unpickle a checkpoint or artifact",
        f"{len(found)} found in every module of src/yieldgate (no torch.load without weights_only=True, pickle, "
        "joblib, yaml.load, eval or exec)",
        "0",
    )


@pytest.mark.slow
@pytest.mark.parametrize("bind", ["report", "import"])
def test_nothing_listens_in_a_cli_subprocess(tmp_path, bind):
    """The CLI as its own process (what a user runs) holds no listening socket while it works."""
    import subprocess
    import sys
    import time

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        _api_run(led, "a", 0)
    csv = tmp_path / "m.csv"
    csv.write_text("step,loss\n" + "".join(f"{s},{3 / s}\n" for s in range(1, 200_001)))  # long enough to watch
    args = (
        ["report", "a", "-o", str(tmp_path / "r.html")]
        if bind == "report"
        else ["import", "table", str(csv), "--run", "b"]
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "yieldgate", "--ledger", str(path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ},
    )
    seen, looks = [], 0
    handle = psutil.Process(proc.pid)
    while proc.poll() is None:
        seen += _listening(handle)
        looks += 1
        time.sleep(0.05)
    assert proc.returncode == 0, proc.stderr.read()
    assert looks >= 3 and seen == [], (looks, seen)
