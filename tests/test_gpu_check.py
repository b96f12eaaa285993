"""The GPU check (`benchmarks/gpu_check.py`, issue #49) where there is no GPU: it says so in one line, runs the parts
that need none, and exits 0; a dry run on the CPU takes every part through the script (slow); the Makefile's targets."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def _load(monkeypatch):
    """The script as a module; what its import adds to sys.path and PYTHONPATH is taken back after the test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_cuda_it_says_so_in_one_line_runs_what_needs_no_gpu_and_exits_0(monkeypatch, tmp_path, capsys):
    check = _load(monkeypatch)
    out = tmp_path / "check.json"
    args = ["--out", str(out)] + (
        ["--no-gpu"] if torch.cuda.is_available() else []
    )  # a GPU here: as if there were none
    assert check.main(args) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "CUDA" in line]
    assert said == [
        "no CUDA device here: parts 1-3, part 4 on the device and part 5's campaigns need one; ran the rest"
    ]
    result = json.loads(out.read_text())
    verdicts = {(row["part"], row["what"].split(" at ")[0]): row["verdict"] for row in result["rows"]}
    assert verdicts == {
        ("4", "MFU formula and NVIDIA H100 80GB HBM3's bf16 row"): "PASS",  # the Tracker's MFU = the hand computation
        ("5", "built-in trainer with trainer.gpus: 1"): "FINDING",  # the campaign file gives the built-in trainer none
    }
    formula = result["formula"]
    assert formula["row"] == [9.894e14, "H100-SXM"] and formula["tracker"] == formula["hand"]


def test_the_hand_computation_is_the_published_formula(monkeypatch):
    """6N + 12·L·H·Q·T with N counted from the model itself (tied head once, position table out), and the peak read
    from the table by name, as the check does it without the Tracker's code."""
    check = _load(monkeypatch)
    from yieldgate.probe.model import GPT, GPTConfig

    model = GPT(GPTConfig(vocab_size=256, context=64, layers=2, width=64, heads=4))
    n = model.non_embedding_params()
    assert check.counted_n(model) == n
    assert check.hand_flops_per_token(n, model.cfg) == 6 * n + 12 * 2 * 4 * 16 * 64
    assert check.peak_row("NVIDIA H100 PCIe", "bf16") == (7.56e14, "H100-PCIe")
    assert check.peak_row("NVIDIA H200", "bf16") == (9.894e14, "H200")
    assert check.peak_row("cpu", "bf16") is None


def _gpu_run(parts, telemetry: dict) -> object:
    """A check holding what a GPU run's telemetry part would have gathered, to read its verdicts on a CPU."""
    check = parts.Check(torch.device("cpu"), parts.GPU, Path("."), False, [], {"telemetry": telemetry}, 0.0)
    parts.telemetry_rows(check)
    return {r.what: (r.verdict, r.measured) for r in check.rows}


def test_the_telemetry_verdicts_read_a_gpu_run_s_figures(monkeypatch):
    """Part 3's verdicts on figures a GPU run gathers (they run only there): each reading recorded, the GPU NVML reads,
    the ledger's joules within the check's own NVML window, the per-kWh column printed; and each one failing."""
    _load(monkeypatch)
    parts = importlib.import_module("gpu_parts")
    header = "┃ tokens ┃ loss start ┃ per kWh ┃"
    good = {
        "samples": {k: 25 for k in (*parts.TELEMETRY_KEYS, parts.SLOWDOWN)},
        "ledger_j": 9_500.0,
        "nvml_j": 10_000.0,
        "sources": ["nvml", "nvml-energy"],
        "gpus": ["GPU-1"],
        "torch_gpu": "GPU-1",
        "yield_per_kwh": [12.5, 3.0],
        "yield_text": f"{header}\nyield_per_dollar: unknown",
        "raw_reasons": [0x1, 0x4, None],
    }
    verdicts = _gpu_run(parts, good)
    assert {what: v for what, (v, _) in verdicts.items()} == {
        "NVML readings recorded (samples)": "PASS",
        "NVML reads the GPU torch trains on": "PASS",
        "energy per run": "PASS",
        "yield per kWh (yieldgate yield)": "PASS",
        "throttle: slowed samples in the ledger / raw reads here": "INFO",
    }
    assert "1 of 3 raw reads slowed" in verdicts["throttle: slowed samples in the ledger / raw reads here"][1]
    bad = {
        **good,
        "samples": {**good["samples"], "device/sm_clock_mhz": 1},
        "gpus": ["GPU-0"],
        "ledger_j": 5_000.0,
        "yield_text": "left out to fit 80 columns: per kWh, per $\nyield_per_kwh: unknown (no energy recorded)",
    }
    assert [v for v, _ in _gpu_run(parts, bad).values()] == ["FAIL", "FAIL", "FAIL", "FAIL", "INFO"]


def test_the_loop_verdicts_read_a_gpu_run_s_figures(monkeypatch):
    """Parts 1, 2 and 4 on figures a GPU run gathers: a sync the Tracker added is named with its call site, syncs on
    its own threads are listed apart, each overhead is held to its target, the MFU to the hand figure."""
    check_module = _load(monkeypatch)
    parts = importlib.import_module("gpu_parts")
    check = parts.Check(torch.device("cpu"), parts.GPU, Path("."), False, [], {}, 0.0)
    spread = lambda m: {"median": m, "q1": m - 0.001, "q3": m + 0.001, "min": m - 0.002, "max": m + 0.002, "n": 10}  # noqa: E731
    shape = parts.GPU.loop
    result = {
        "compiled": "inductor",
        "graphs_compiled_while_measured": 0,
        "syncs": {
            "counted": True,
            "added_by_tracker": {"throughput": 0, "full": 20},
            "tracker_call_sites": {"signals.py:240 in collect [MainThread]": 20},
            "tracker_background_sites": {"writer.py:524 in _landed [yieldgate-writer]": 30},
        },
        "tracker_faults": {"throughput": 0, "full": 0},
        "step_ms": {"none": spread(25.0)},
        "overhead": {"throughput": spread(0.004), "full": spread(0.05)},
        "stretch": {"seconds": 3.0, "tokens": shape.tokens * 150},
        "tracked_rows": {"rows": 130, "mfu_median": None},
        "params_unique": 46_742_528,
        "params_position": 524_288,
    }
    fpt = check_module.hand_flops_per_token(46_742_528 - 524_288, shape.gpt)
    result["tracked_rows"]["mfu_median"] = 1.01 * shape.tokens * 150 / 3.0 * fpt / 9.894e14
    monkeypatch.setattr(parts, "device_name", lambda device: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(check_module, "device_name", lambda device: "NVIDIA H100 80GB HBM3")
    check_module.loop_rows(check, "compiled", result)
    rows = {r.what: (r.verdict, r.measured) for r in check.rows}
    assert (
        rows["host syncs added, compiled"][0] == "FAIL"
        and "signals.py:240 in collect" in rows["host syncs added, compiled"][1]
    )
    assert rows["syncs on the Tracker's own threads, compiled"][0] == "INFO"
    assert rows["graphs compiled during the rounds"][0] == rows["Tracker faults, compiled"][0] == "PASS"
    assert rows["throughput overhead, compiled"][0] == "PASS" and rows["full overhead, compiled"][0] == "FAIL"
    assert rows["MFU, Tracker vs by hand, compiled"] == ("PASS", rows["MFU, Tracker vs by hand, compiled"][1])
    assert "+1.00%" in rows["MFU, Tracker vs by hand, compiled"][1]


def test_make_gpu_wheels_fetches_for_the_gpu_machine_s_python_and_gpu_check_installs_them_first():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    plan = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "gpu-wheels",
            "gpu-check",
            "GPU_PYTHON=python3",
            "GPU_CHECK_ARGS=--quick",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    fetch = plan.index("pip download")
    assert (
        "--only-binary=:all: --python-version 3.12" in plan[fetch:]
        and "--dest build/gpu-wheels 'pydantic>=2.6'" in plan
    )
    install, run = plan.index("--target build/gpu-site"), plan.index("python3 benchmarks/gpu_check.py --quick")
    assert fetch < install < run


@pytest.mark.slow  # every part on the CPU with a tiny model: trainings, two campaigns, a minute or two
def test_a_cpu_dry_run_takes_every_part_through_the_script(tmp_path):
    out = tmp_path / "dry.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu-dry-run", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["dry_run"] and "errors" not in result, result.get("errors")
    rows = result["rows"]
    assert {r["part"] for r in rows} == {"1", "2", "3", "4", "5"}
    assert not [r for r in rows if r["verdict"] == "ERROR"]
    verdict = {r["what"]: r["verdict"] for r in rows}
    assert verdict["Tracker faults, eager"] == verdict["Tracker faults, compiled"] == "PASS"
    assert verdict["host syncs added, eager"] == "SKIPPED"  # no device to synchronise with
    assert verdict["command trainer's probes"] == "PASS"
    for tag in ("eager", "compiled"):
        loop = result[f"loop_{tag}"]
        assert loop["tracked_rows"]["rows"] >= 2 and loop["mfu_hand"] > 0
        assert loop["overhead"]["full"]["n"] == 2
    assert result["telemetry"]["steps"] > 0 and "per B tokens" in result["telemetry"]["yield_text"]
