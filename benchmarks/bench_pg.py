"""The PostgreSQL ledger beside the SQLite one, in one run: the same work on both, and PostgreSQL's figure as a ratio
of SQLite's.

- append, bulk: core columns in batches of 10,000 steps, as an importer writes them (values/s; issue #20: >= 1M);
- append, Tracker-like: one transaction per flush (heartbeat, 10 steps of 10 columns, an eval every 10th), as the
  Tracker's writer thread does (rows/s, and each flush's milliseconds: the writer's cost, off the training loop);
- Tracker foreground: a real Tracker's own time on the training thread per step (issue #20: <= 0.05 ms on both);
- read: one run's core columns, 100,000 and --steps steps (issue #20: 1M steps < 2 s);
- `runs`: listing --runs runs, in process (Ledger.runs()) and as `yieldgate runs` in a new process (< 1 s).

    .venv/bin/python benchmarks/bench_pg.py --url postgresql://USER@HOST:PORT/DB [--steps 1000000] [--runs 10000]

The URL defaults to $YIELDGATE_TEST_PG_URL (`make pg-start`); the run works in a schema of its own, dropped after.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from bench_ledger import list_runs  # benchmarks/ is the script's folder, first on sys.path

from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.ledger.owners import Owner
from yieldgate.names import STEP_VALUE_COLUMNS

BATCH = 10_000
FLUSH_ROWS = 10


@contextmanager
def pg_schema(url: str) -> Iterator[str]:
    import psycopg

    schema = f"yieldgate_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(f"DROP SCHEMA {schema} CASCADE")


def append_bulk(location: str, n: int, rng: np.random.Generator) -> dict[str, float]:
    core = {name: rng.random(n) for name in STEP_VALUE_COLUMNS}
    steps = np.arange(n, dtype=np.int64)
    with Ledger(location) as led:
        led.create_run("bulk")
        t0 = time.perf_counter()
        for start in range(0, n, BATCH):
            sl = slice(start, start + BATCH)
            led.append_steps("bulk", {"step": steps[sl], **{k: v[sl] for k, v in core.items()}})
        seconds = time.perf_counter() - t0
        reads = {}
        for count in sorted({min(100_000, n), n}):
            led.create_run(f"read{count}")
            for start in range(0, count, BATCH):
                sl = slice(start, min(start + BATCH, count))
                led.append_steps(f"read{count}", {"step": steps[sl], **{k: v[sl] for k, v in core.items()}})
    with Ledger(location, readonly=True) as led:
        for count in sorted({min(100_000, n), n}):
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                frame = led.steps(f"read{count}")
                times.append(time.perf_counter() - t0)
            assert len(frame) == count and np.array_equal(frame["loss"].to_numpy(), core["loss"][:count])
            reads[f"read_{count}_steps_s"] = float(np.median(times))
    return {"append_bulk_values_per_s": n * len(STEP_VALUE_COLUMNS) / seconds, **reads}


def append_like_a_tracker(location: str, flushes: int, rng: np.random.Generator) -> dict[str, float]:
    columns = [
        "tokens",
        "samples",
        "wall_s",
        "step_s",
        "data_wait_s",
        "loss",
        "lr",
        "grad_norm",
        "tokens_per_s",
        "signals/gns",
    ]
    owner = Owner.this_process()
    times = []
    with Ledger(location, busy_timeout_s=1.0, durable=True) as led:
        led.claim_run("tracked", owner=owner)
        t0 = time.perf_counter()
        for f in range(flushes):
            steps = np.arange(f * FLUSH_ROWS, (f + 1) * FLUSH_ROWS)
            t = time.perf_counter()
            with led.transaction():
                led.heartbeat("tracked", owner)
                led.append_steps("tracked", {"step": steps, **{c: rng.random(FLUSH_ROWS) for c in columns}})
                if f % 10 == 9:
                    led.append_evals("tracked", [EvalRecord(step=int(steps[-1]), task="val", metric="loss", value=1.0)])
            times.append(time.perf_counter() - t)
        seconds = time.perf_counter() - t0
        assert len(led.steps("tracked")) == flushes * FLUSH_ROWS
    return {
        "append_tracker_rows_per_s": flushes * FLUSH_ROWS / seconds,
        "flush_ms_median": 1e3 * float(np.median(times)),
        "flush_ms_p95": 1e3 * float(np.percentile(times, 95)),
    }


def tracker_foreground(location: str, steps: int) -> dict[str, float]:
    from yieldgate.track.tracker import Tracker, TrackerConfig

    tr = Tracker("foreground", ledger=location, config=TrackerConfig(log_every_steps=10))
    for i in range(1, steps + 1):
        tr.step(tokens=2048, samples=4, loss=1.0 / i)
        time.sleep(0.001)  # a (very) fast training step: the writer keeps up with its 1 s flushes
    busy = tr.stats["busy_s"]
    tr.close()
    assert tr.stats["written_rows"] == steps and tr.stats["faults"] == 0, tr.stats
    return {"tracker_foreground_ms_per_step": 1e3 * busy / steps}


def measure(make: Callable[[], Any], args: argparse.Namespace) -> dict[str, float]:
    rng = np.random.default_rng(0)
    out: dict[str, float] = {}
    for step in (
        lambda loc: append_bulk(loc, args.steps, rng),
        lambda loc: append_like_a_tracker(loc, args.flushes, rng),
        lambda loc: tracker_foreground(loc, args.tracker_steps),
        lambda loc: list_runs(loc, args.runs),
    ):
        with make() as location:
            out.update(step(location))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("YIELDGATE_TEST_PG_URL"))
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--flushes", type=int, default=1000)
    parser.add_argument("--tracker-steps", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.url:  # `make bench` on a machine that cannot start the test server
        print(
            "bench_pg: skipped, no PostgreSQL server: give --url postgresql://... (or `make pg-start`, which sets "
            "YIELDGATE_TEST_PG_URL)"
        )
        return

    @contextmanager
    def sqlite_file() -> Iterator[str]:
        with tempfile.TemporaryDirectory() as tmp:
            yield str(Path(tmp) / "bench.db")

    result = {"sqlite": measure(sqlite_file, args), "postgresql": measure(lambda: pg_schema(args.url), args)}
    if args.json:
        print(json.dumps(result))
        return
    rows = [
        ("append, bulk (values/s)", "append_bulk_values_per_s", "{:,.0f}"),
        (f"append, Tracker-like flushes of {FLUSH_ROWS} steps (rows/s)", "append_tracker_rows_per_s", "{:,.0f}"),
        ("  one flush, median (ms)", "flush_ms_median", "{:.2f}"),
        ("  one flush, p95 (ms)", "flush_ms_p95", "{:.2f}"),
        ("Tracker, training thread per step (ms)", "tracker_foreground_ms_per_step", "{:.4f}"),
        *[
            (f"read core columns, {k.split('_')[1]} steps (s)", k, "{:.3f}")
            for k in result["sqlite"]
            if k.startswith("read_")
        ],
        (f"runs(), {args.runs:,} runs, in process (s)", "runs_ledger_s_median", "{:.3f}"),
        (f"`yieldgate runs`, {args.runs:,} runs, new process (s)", "runs_cli_s_median", "{:.3f}"),
    ]
    print(f"{'':56} {'SQLite':>12} {'PostgreSQL':>12} {'PG / SQLite':>12}")
    for label, key, fmt in rows:
        a, b = result["sqlite"][key], result["postgresql"][key]
        print(f"{label:56} {fmt.format(a):>12} {fmt.format(b):>12} {b / a:>12.2f}")


if __name__ == "__main__":
    main()
