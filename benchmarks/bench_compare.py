"""`yieldgate compare` over two seed groups of 5 runs x 100,000 step records each.

Target (issue "Yield and honest comparison"): returns in < 3 s on a 2-core machine. Timed end to end as a
user runs it (a fresh `yieldgate compare ... --json` process: start-up, imports, ledger reads, analysis),
median of 3.

    .venv/bin/python benchmarks/bench_compare.py [--steps 100000] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from yieldgate.ledger import EvalRecord, Ledger


def build(path: Path, steps: int) -> None:
    with Ledger(path) as ledger:
        for side, slope in (("a", 1.0), ("b", 1.2)):
            for seed in range(5):
                name = f"{side}-seed{seed}"
                rng = np.random.default_rng(seed)
                step = np.arange(1, steps + 1)
                tokens = step * 4096.0
                loss = 2.0 + 8.0 * (tokens / 1e6) ** -0.3 * slope + rng.normal(0, 0.01, steps)
                ledger.create_run(name)
                ledger.append_steps(
                    name,
                    {
                        "step": step,
                        "tokens": tokens,
                        "samples": step * 16.0,
                        "wall_s": step * 0.25 * slope,
                        "step_s": np.full(steps, 0.25 * slope),
                        "loss": loss,
                        "lr": np.full(steps, 3e-4),
                        "grad_norm": rng.random(steps),
                        "tokens_per_s": np.full(steps, 4096 / 0.25 / slope),
                    },
                )
                every = step[:: steps // 100]
                ledger.append_evals(
                    name,
                    [
                        EvalRecord(
                            step=int(s),
                            tokens=float(s * 4096),
                            task="val",
                            metric="loss",
                            value=float(loss[s - 1] + 0.05),
                        )
                        for s in every
                    ],
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        build(path, args.steps)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-m", "yieldgate", "--ledger", str(path), "compare", "a-seed*", "b-seed*", "--json"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            times.append(time.perf_counter() - start)
        result = json.loads(out)
    figures = {
        "compare_s_median": float(np.median(times)),
        "runs_per_side": 5,
        "steps_per_run": args.steps,
        "speedup_time": result["speedup"]["time"],
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"yieldgate compare, 2 groups x 5 runs x {args.steps:,} steps: {figures['compare_s_median']:.2f} s "
        f"median of 3, end to end (target < 3 s)"
    )


if __name__ == "__main__":
    main()
