"""Ledger speed: batched appends (values/s) and reading one run's core columns for 1,000,000 steps.

Targets (issue "Foundation"): append >= 1,000,000 values/s in batches from one process; read 1,000,000
steps of core columns into a DataFrame in < 2 s on a 2-core machine.

    .venv/bin/python benchmarks/bench_ledger.py [--steps 1000000] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from yieldgate.ledger import Ledger
from yieldgate.names import STEP_VALUE_COLUMNS

BATCH = 10_000  # steps per append_steps call, as an importer would write them


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--extras-steps", type=int, default=100_000, help="steps x 4 namespaced extras")
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

    result = {
        "append_core_values_per_s": core_values / core_s,
        "append_extras_values_per_s": extras_values / extras_s,
        "read_core_steps": n,
        "read_core_s_median": float(np.median(reads)),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"append, core columns : {result['append_core_values_per_s']:>14,.0f} values/s "
          f"({core_values:,} values in batches of {BATCH:,} steps; target >= 1,000,000)")
    print(f"append, extras       : {result['append_extras_values_per_s']:>14,.0f} values/s "
          f"({extras_values:,} values, long table; target >= 1,000,000)")
    print(f"read core, {n:,} steps: {result['read_core_s_median']:>10.3f} s median of 3 (target < 2 s)")


if __name__ == "__main__":
    main()
