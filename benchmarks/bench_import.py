"""Importing a TensorBoard log into the ledger vs tbparse reading it into a DataFrame, side by side.

The log: 10 tags x 100,000 steps = 1,000,000 scalars, written once by torch's SummaryWriter (cached in
--dir). Each side runs --repeats times, alternating; the medians are printed.

    .venv/bin/python benchmarks/bench_import.py            # the README's figure
    .venv/bin/python benchmarks/bench_import.py --steps 10000   # a quick look
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

TAGS = ["train/loss", "train/lr", "train/grad_norm", "eval/loss", "tokens", "throughput/tokens_per_s",
        "train/perplexity", "signals/a", "signals/b", "signals/c"]


def write_log(folder: Path, steps: int) -> Path:
    """The event log (written once per size; later runs reuse it)."""
    from torch.utils.tensorboard import SummaryWriter

    log = folder / f"tb-{steps}"
    if log.exists() and any(log.iterdir()):
        return log
    writer = SummaryWriter(log, max_queue=10_000, flush_secs=3600)
    for step in range(steps):
        for j, tag in enumerate(TAGS):
            writer.add_scalar(tag, 1.0 / (step + 1) + j, step)
    writer.close()
    return log


def time_yieldgate(log: Path, folder: Path, i: int) -> tuple[float, int]:
    from yieldgate.ingest import ImportOptions, import_run
    from yieldgate.ledger import Ledger

    path = folder / f"bench-{i}.db"
    start = time.perf_counter()
    with Ledger(path) as ledger:
        (result,) = import_run(ledger, "tensorboard", [str(log)], ImportOptions(run="bench"))
    elapsed = time.perf_counter() - start
    path.unlink()
    return elapsed, result.steps


def time_tbparse(log: Path) -> tuple[float, int]:
    from tbparse import SummaryReader

    start = time.perf_counter()
    frame = SummaryReader(str(log)).scalars
    return time.perf_counter() - start, len(frame)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "yieldgate-bench-import")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    log = write_log(args.dir, args.steps)
    ours, theirs = [], []
    for i in range(args.repeats):
        t, steps = time_yieldgate(log, args.dir, i)
        ours.append(t)
        t, scalars = time_tbparse(log)
        theirs.append(t)
    print(f"{len(TAGS)} tags x {args.steps:,} steps = {scalars:,} scalars ({steps:,} step rows imported)")
    print(f"{'reader':<44}{'median s':>10}{'runs':>30}")
    print(f"{'yieldgate import tensorboard (into ledger)':<44}{statistics.median(ours):>10.2f}"
          f"{', '.join(f'{t:.2f}' for t in ours):>30}")
    print(f"{'tbparse SummaryReader(...).scalars':<44}{statistics.median(theirs):>10.2f}"
          f"{', '.join(f'{t:.2f}' for t in theirs):>30}")
    print(f"speedup: {statistics.median(theirs) / statistics.median(ours):.1f}x")


if __name__ == "__main__":
    main()
