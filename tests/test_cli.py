from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from yieldgate.cli import app
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.manifest import parse_manifest

from .test_manifest import BASE


def test_runs_json_on_an_empty_ledger_is_an_empty_list(cli, ledger_path):
    assert cli.json("runs") == []
    assert not ledger_path.exists()  # listing does not create a ledger


def test_runs_lists_a_run_written_through_the_api(cli, ledger_path):
    with Ledger(ledger_path) as led:
        led.create_run("bs64-fp16", manifest=parse_manifest(BASE))
        led.append_steps("bs64-fp16", {"step": [1, 2, 3], "tokens": [2048.0, 4096.0, 6144.0], "loss": [3, 2.5, 2.2]})
        led.append_evals("bs64-fp16", [EvalRecord(step=3, tokens=6144, task="val", metric="loss", value=2.4)])
    (run,) = cli.json("runs")
    assert run["name"] == "bs64-fp16"
    assert run["tokens"] == 6144
    assert run["steps"] == 3
    assert run["status"] == "running"
    assert run["last_eval"] == {"task": "val", "metric": "loss", "value": 2.4, "step": 3}
    assert run["manifest_hash"] == parse_manifest(BASE).content_hash()
    table = cli("runs").stdout
    assert "bs64-fp16" in table and "6,144" in table and "val/loss 2.4 @3" in table


def test_show(cli, ledger_path):
    with Ledger(ledger_path) as led:
        led.create_run("r", manifest=parse_manifest(BASE))
        led.append_steps("r", [{"step": 1, "tokens": 10, "loss": 2.0, "signals/gns": 5.0}, {"step": 2, "tokens": 20}])
        led.append_evals("r", [EvalRecord(step=2, task="val", metric="loss", value=1.5)])
        led.add_event("r", "warning", {"message": "x"})
    shown = cli.json("show", "r")
    assert shown["run"]["name"] == "r"
    assert shown["step_columns"] == {"tokens": 2, "loss": 1}
    assert shown["column_stats"]["tokens"] == {
        "first": [1, 10.0],
        "last": [2, 20.0],
        "min": [1, 10.0],
        "max": [2, 20.0],
    }
    assert shown["extras"] == ["signals/gns"]
    assert shown["evals"][0]["task"] == "val" and shown["evals"][0]["last_value"] == 1.5
    assert shown["events"] == {"open": 1, "resolved": 0}
    assert shown["manifest"]["seed"] == 3
    assert "signals/gns" in cli("show", "r").stdout


def test_manifest_validate_and_diff(cli, tmp_path, ledger_path):
    a = tmp_path / "a.yaml"
    a.write_text(yaml.safe_dump(BASE))
    changed = json.loads(json.dumps(BASE))
    changed["optimisation"]["batch_size"] = 256
    b = tmp_path / "b.json"
    b.write_text(json.dumps(changed))
    assert cli.json("manifest", "validate", str(a)) == {
        "file": str(a),
        "valid": True,
        "hash": parse_manifest(BASE).content_hash(),
    }
    out = cli.json("manifest", "diff", str(a), str(b))
    assert out["differences"] == [{"field": "optimisation.batch_size", "a": 64, "b": 256}]
    with Ledger(ledger_path) as led:
        led.create_run("run-b", manifest=parse_manifest(changed))
    assert cli.json("manifest", "diff", str(a), "run-b")["differences"] == out["differences"]
    assert cli.json("manifest", "diff", str(a), str(a))["differences"] == []
    assert "optimisation.batch_size" in cli("manifest", "diff", str(a), str(b)).stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "missing-run"], "no run named 'missing-run'"),
        (["manifest", "validate", "nope.yaml"], "nope.yaml: no such file"),
        (["manifest", "diff", "nope.yaml", "other"], "neither a manifest file nor a run"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, args, message):
    result = cli(*args, code=2)
    assert result.stderr.count("\n") == 1 and message in result.stderr and result.stderr.startswith("error: ")
    assert result.stdout == ""


@pytest.mark.slow
def test_malformed_manifest_and_corrupt_ledger(cli, tmp_path, ledger_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("data:\n  sources:\n    - name: web\n      weight: -0.5\n")
    result = cli("manifest", "validate", str(bad), code=2)
    assert result.stderr == f"error: {bad}: data.sources[0].weight: must be >= 0.0, got -0.5\n"
    ledger_path.write_bytes(b"\x00not sqlite" * 50)
    result = cli("runs", code=2)
    assert "not a usable yieldgate ledger" in result.stderr and result.stderr.count("\n") == 1


def test_newer_ledger_is_refused_by_every_reader(cli, ledger_path):
    with Ledger(ledger_path) as led:
        led.create_run("r")
    db = sqlite3.connect(ledger_path)
    db.execute("INSERT INTO schema_migrations VALUES ('0099_future', 0)")
    db.commit()
    db.close()
    for args in (["runs"], ["show", "r"]):
        assert "newer yieldgate" in cli(*args, code=2).stderr


def test_ledger_from_environment(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    path = tmp_path / "env.db"
    with Ledger(path) as led:
        led.create_run("from-env")
    monkeypatch.setenv("YIELDGATE_LEDGER", str(path))
    result = CliRunner().invoke(app, ["runs", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)[0]["name"] == "from-env"


# The public command surface: a new command or flag is a decision, made here.
COMMANDS = {
    "runs": {"--json", "--csv", "--tsv", "--limit", "--tag", "--status", "--sort", "--reverse"},
    "rm": {"--json", "--yes"},
    "rename": {"--json"},
    "tag": {"--json"},
    "untag": {"--json"},
    "note": {"--json"},
    "show": {"--json"},
    "manifest validate": {"--json"},
    "manifest diff": {"--json"},
    "demo": {"--quick", "--output"},
    "yield": {"--json", "--tranche-tokens", "--metric", "--per", "--expected-from"},
    "waste": {"--json"},
    "compare": {"--json", "--at", "--target-loss", "--primary", "--metric", "--per"},
    "forecast": {"--json", "--next-tokens", "--next-steps", "--threshold", "--level", "--metric"},
    "train": {"--json", "--tokens", "--seed", "--run", "--resume-from", "--cooldown-tokens"},
    "merge": {"--json", "--run", "--replace"},
    "check": {"--json"},
    "ledger copy": {"--json", "--replace"},
    "report": {"--json", "--output", "--png", "--metric", "--per", "--smooth", "--target-loss"},
    "serve": {"--host", "--port", "--token"},
    "dedup": {"--json", "--near", "--shingle", "--chunk-chars"},
    "audit": {"--json", "--run"},
    "batch-check": {
        "--json",
        "--baseline-batch",
        "--candidate-batch",
        "--accumulation",
        "--precision",
        "--lr",
        "--candidate-lr",
        "--seeds",
        "--tokens",
        "--source",
        "--run",
    },
    "import": {
        "--json",
        "--run",
        "--map",
        "--manifest",
        "--tokens-per-step",
        "--tokens-per-sample",
        "--pattern",
        "--format",
        "--step-pattern",
        "--step",
        "--experiment",
        "--tracking-uri",
        "--join-on",
        "--devices",
        "--replace",
        "--append",
        "--campaign",
        "--higher-is-better",
        "--lower-is-better",
        "--noise",
        "--exponent",
        "--explain",
        "--accept-implausible",
    },
    "export": {"--json", "--to"},
    "diagnose": {"--json", "--against"},
    "probe": {"--json", "--executor", "--workers", "--address", "--ablate-sources", "--recipe", "--ablate-by"},
    "campaign": {"--json", "--propose"},
    "gate": {"--json", "--policy", "--strict"},
    "plan": {"--json", "--policy", "--flops", "--scaling", "--params"},
    "decisions": {"--json"},
}


def _commands(group, prefix=""):
    for name, command in group.commands.items():
        full = f"{prefix}{name}"
        if hasattr(command, "commands"):
            yield from _commands(command, full + " ")
        else:
            yield full, command


def test_command_surface_is_deliberate():
    import typer

    root = typer.main.get_command(app)
    found = {name: {o for p in cmd.params for o in p.opts if o.startswith("--")} for name, cmd in _commands(root)}
    assert found == COMMANDS
    assert {o for p in root.params for o in p.opts} == {"--ledger", "--version"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help_with_an_example(cli, command):
    out = cli(*command.split(), "--help").stdout
    assert "Example: yieldgate" in out


@pytest.mark.slow
def test_console_script_runs_as_a_process(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "yieldgate", "--ledger", str(tmp_path / "x.db"), "runs", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
    result = subprocess.run(
        [sys.executable, "-m", "yieldgate", "show", "x", "--json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 2 and result.stderr.startswith("error: no run named 'x'")
    assert "Traceback" not in result.stderr


def test_ledger_is_accepted_after_the_command_too(tmp_path):
    from typer.testing import CliRunner

    from yieldgate.cli import app

    csv = tmp_path / "a.csv"
    csv.write_text("step,loss\n1,3.0\n2,2.5\n")
    db = str(tmp_path / "l.db")
    runner = CliRunner()
    assert runner.invoke(app, ["import", "table", str(csv), "--run", "a", "--ledger", db]).exit_code == 0
    after = runner.invoke(app, ["runs", "--json", f"--ledger={db}"])
    before = runner.invoke(app, ["--ledger", db, "runs", "--json"])
    assert after.exit_code == 0 and after.stdout == before.stdout and json.loads(after.stdout)[0]["name"] == "a"


def test_plan_without_a_data_section_is_bad_input_not_a_crash(cli, ledger, tmp_path):
    """A manifest that declares a model but no data recipe (a run's, or a file's `data: null`) has no supply to
    plan: one line and exit status 2, where `plan` used to crash with AttributeError."""
    ledger.create_run("r1", manifest=parse_manifest({"model": {"name": "m", "params": 1000}}))
    ledger.append_steps("r1", [{"step": 1, "tokens": 1000, "loss": 1.0}])
    ledger.set_status("r1", "finished")
    policy = str(Path(__file__).parents[1] / "examples" / "policy.yaml")
    out = cli("plan", "r1", "--policy", policy, code=2)
    assert "r1: its runs have no manifest with a data recipe; pass a recipe file" in out.stderr
    (tmp_path / "m.yaml").write_text("data: null\nmodel: {name: m}\n")
    out = cli("plan", str(tmp_path / "m.yaml"), "--policy", policy, code=2)
    assert "the manifest has no data recipe" in out.stderr
