"""Cost of the Tracker's durable commits, on its writer thread: a flush (heartbeat + 100 step rows of the
core columns, one transaction) with synchronous=NORMAL (synced only at checkpoints) against
synchronous=FULL (the WAL synced at every commit, what `Ledger(durable=True)` and the Tracker use).

The training thread never waits for a flush (it appends packets to the writer's inbox); this is the writer
thread's time per flush, once per `flush_every_s` (1 s by default).

    .venv/bin/python benchmarks/bench_durability.py [--flushes 200] [--dir FOLDER] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from yieldgate.ledger import Ledger
from yieldgate.ledger.owners import Owner

ROWS = 100  # steps per flush: a loop of 100 steps/s at the default 1 s flush interval


def flush_times(path: Path, *, durable: bool, flushes: int) -> list[float]:
    owner = Owner.this_process()
    out = []
    with Ledger(path, durable=durable) as ledger:
        ledger.claim_run("bench", owner=owner)
        for i in range(flushes):
            steps = np.arange(i * ROWS + 1, (i + 1) * ROWS + 1)
            rows = {
                "step": steps,
                "tokens": steps * 4096.0,
                "samples": steps * 8.0,
                "wall_s": steps * 0.01,
                "step_s": np.full(ROWS, 0.01),
                "loss": 1.0 / steps,
                "lr": np.full(ROWS, 3e-4),
                "grad_norm": np.ones(ROWS),
                "tokens_per_s": np.full(ROWS, 4e5),
            }
            start = time.perf_counter()
            with ledger.transaction():
                ledger.heartbeat("bench", owner)
                ledger.append_steps("bench", rows)
            out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flushes", type=int, default=200)
    parser.add_argument(
        "--dir",
        default=None,
        help="folder for the ledgers (default: a temp folder; put it on the disk the ledger lives on)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for name, durable in (("synchronous=NORMAL", False), ("synchronous=FULL (durable)", True)):
            times = sorted(flush_times(Path(tmp) / f"{durable}.db", durable=durable, flushes=args.flushes))
            result[name] = {
                "median_ms": statistics.median(times) * 1e3,
                "p95_ms": times[int(0.95 * (len(times) - 1))] * 1e3,
            }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"writer-thread time per flush ({ROWS} rows + heartbeat, {args.flushes} flushes):")
    for name, r in result.items():
        print(f"  {name:28s} median {r['median_ms']:6.2f} ms   p95 {r['p95_ms']:6.2f} ms")


if __name__ == "__main__":
    main()
