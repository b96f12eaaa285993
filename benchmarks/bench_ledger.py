"""Ledger speed: batched appends (values/s), reading one run's core columns for 1,000,000 steps, and listing
10,000 runs.

Targets (issue "Foundation"): append >= 1,000,000 values/s in batches from one process; read 1,000,000
steps of core columns into a DataFrame in < 2 s on a 2-core machine. Issue #18: `yieldgate runs` over 10,000
runs in < 1 s, timed as a user runs it (a new process: interpreter start and imports included).

    .venv/bin/python benchmarks/bench_ledger.py [--steps 1000000] [--json]
"""

from __future__ import annotations

import argparse
import compileall
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import yieldgate
from yieldgate.ledger import Ledger
from yieldgate.names import STEP_VALUE_COLUMNS

BATCH = 10_000  # steps per append_steps call, as an importer would write them


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--extras-steps", type=int, default=100_000, help="steps x 4 namespaced extras")
    parser.add_argument("--runs", type=int, default=10_000, help="runs listed by `yieldgate runs`")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.steps
    core = {name: rng.random(n) for name in STEP_VALUE_COLUMNS}
    core["tokens"] = np.arange(1, n + 1, dtype=np.float64) * 2048
    steps = np.arange(n, dtype=np.int64)
    extra_names = ["signals/gns", "signals/loss_var", "tokens/web", "stream/repeat_rate"]
    m = args.extras_steps
    extras = {name: rng.random(m) for name in extra_names}

    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp) / "bench.db")
        ledger.create_run("core")
        t0 = time.perf_counter()
        for start in range(0, n, BATCH):
            sl = slice(start, start + BATCH)
            ledger.append_steps("core", {"step": steps[sl], **{k: v[sl] for k, v in core.items()}})
        core_s = time.perf_counter() - t0
        core_values = n * len(STEP_VALUE_COLUMNS)

        ledger.create_run("extras")
        t0 = time.perf_counter()
        for start in range(0, m, BATCH):
            sl = slice(start, start + BATCH)
            ledger.append_steps("extras", {"step": steps[sl], **{k: v[sl] for k, v in extras.items()}})
        extras_s = time.perf_counter() - t0
        extras_values = m * len(extra_names)
        ledger.close()

        reader = Ledger(Path(tmp) / "bench.db", readonly=True)
        reads = []
        for _ in range(3):
            t0 = time.perf_counter()
            frame = reader.steps("core")
            reads.append(time.perf_counter() - t0)
        assert len(frame) == n and np.array_equal(frame["loss"].to_numpy(), core["loss"])
        reader.close()
        listing = list_runs(str(Path(tmp) / "runs.db"), args.runs)

    result = {
        "append_core_values_per_s": core_values / core_s,
        "append_extras_values_per_s": extras_values / extras_s,
        "read_core_steps": n,
        "read_core_s_median": float(np.median(reads)),
        **listing,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"append, core columns : {result['append_core_values_per_s']:>14,.0f} values/s "
        f"({core_values:,} values in batches of {BATCH:,} steps; target >= 1,000,000)"
    )
    print(
        f"append, extras       : {result['append_extras_values_per_s']:>14,.0f} values/s "
        f"({extras_values:,} values, long table; target >= 1,000,000)"
    )
    print(f"read core, {n:,} steps: {result['read_core_s_median']:>10.3f} s median of 3 (target < 2 s)")
    print(
        f"runs, {args.runs:,} runs  : {result['runs_cli_s_median']:>10.3f} s median of 3, `yieldgate runs` in a new "
        f"process (target < 1 s; of it, Ledger.runs() {result['runs_ledger_s_median']:.3f} s and starting Python "
        f"with yieldgate's CLI imported {result['cli_start_s_median']:.3f} s)"
    )


def list_runs(path: str, count: int) -> dict[str, float]:
    """`count` runs of 10 steps and one evaluation each, listed by `yieldgate runs` in a new process (`path`: a
    ledger file or URL; benchmarks/bench_pg.py lists both backends with it)."""
    with Ledger(path) as ledger, ledger.transaction():
        for i in range(count):
            name = f"sweep/lr{i % 100}/s{i // 100}"
            ledger.create_run(name)
            ledger.append_steps(
                name,
                {
                    "step": np.arange(1, 11),
                    "tokens": np.arange(1, 11) * 1000.0,
                    "loss": np.linspace(3, 2, 10),
                    "wall_s": np.arange(1, 11) * 0.5,
                },
            )
            ledger.append_evals(name, [{"step": 10, "task": "val", "metric": "loss", "value": 2.5}])
            ledger.set_status(name, "finished")
    in_process, cli, start = [], [], []
    with Ledger(path, readonly=True) as reader:
        for _ in range(3):
            t0 = time.perf_counter()
            assert len(reader.runs()) == count
            in_process.append(time.perf_counter() - t0)
    # As `pip install` leaves a package: compiled to bytecode (a source checkout under PYTHONDONTWRITEBYTECODE would
    # compile the command line's modules at every start instead).
    compileall.compile_dir(Path(yieldgate.__file__).parent, quiet=1)
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "yieldgate", "--ledger", path, "runs"], check=True, stdout=subprocess.DEVNULL
        )
        cli.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import yieldgate.cli"], check=True)
        start.append(time.perf_counter() - t0)
    return {
        "runs_ledger_s_median": float(np.median(in_process)),
        "runs_cli_s_median": float(np.median(cli)),
        "cli_start_s_median": float(np.median(start)),
    }


if __name__ == "__main__":
    main()
