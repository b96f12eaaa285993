"""Importing a TensorBoard log into the ledger vs tbparse reading it into a DataFrame, side by side; and the
memory an import of a multi-GB event file takes.

Speed. The log: 10 tags x 100,000 steps = 1,000,000 scalars, written once by torch's SummaryWriter (cached
in --dir). Each side runs --repeats times, alternating; the medians are printed.

Memory (--memory). An event file of --size-gb GB, written here frame by frame (TFRecord framing, masked
CRC-32C) as a training job with histograms writes it: per step three scalars and one 2,048-bucket histogram
(~33 KB), so that most of the file is what an import skips. `yieldgate import tensorboard` runs on it in a
subprocess and its peak resident memory (the kernel's ru_maxrss) is printed, beside the same command's on a
file of a few steps (the interpreter and libraries alone).

    .venv/bin/python benchmarks/bench_import.py            # the README's figure
    .venv/bin/python benchmarks/bench_import.py --steps 10000   # a quick look
    .venv/bin/python benchmarks/bench_import.py --memory   # peak memory importing a 2 GB event file

Against another version of yieldgate (--against, a checkout's src/ folder): both import the same log, each in its
own interpreter, alternating, and the ratio of the medians is printed (issue #35 asks the import to stay within 10%
of the speed it had when it was filed, f1717c6):

    git worktree add /tmp/yg-f1717c6 f1717c6
    .venv/bin/python benchmarks/bench_import.py --against /tmp/yg-f1717c6/src
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TAGS = [
    "train/loss",
    "train/lr",
    "train/grad_norm",
    "eval/loss",
    "tokens",
    "throughput/tokens_per_s",
    "train/perplexity",
    "signals/a",
    "signals/b",
    "signals/c",
]


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


SCALARS = ("train/loss", "train/lr", "train/grad_norm")


def _frame(payload: bytes) -> bytes:
    """One TFRecord frame: length, masked CRC-32C of the length, payload, masked CRC-32C of the payload."""
    import google_crc32c

    def masked(data: bytes) -> bytes:
        crc = google_crc32c.value(data)
        return struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)

    length = struct.pack("<Q", len(payload))
    return length + masked(length) + payload + masked(payload)


def write_event_file(path: Path, size: int, buckets: int = 2048) -> int:
    """An event file of about `size` bytes: per step, three scalar events and one histogram event of `buckets`
    buckets. Returns the steps written."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary

    histo = HistogramProto(
        min=-1.0,
        max=1.0,
        num=1e6,
        sum=0.0,
        sum_squares=1e3,
        bucket_limit=[-1.0 + 2.0 * (i + 1) / buckets for i in range(buckets)],
        bucket=[float(i % 97) for i in range(buckets)],
    )
    # Serialized protobuf messages merge when concatenated: the bulky part is serialized once.
    bulk = Event(summary=Summary(value=[Summary.Value(tag="weights/histogram", histo=histo)])).SerializeToString()
    step, written = 0, 0
    with open(path, "wb") as fh:
        written += fh.write(_frame(Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString()))
        while written < size:
            step += 1
            wall = 1.7e9 + step * 0.5
            for j, tag in enumerate(SCALARS):
                event = Event(
                    wall_time=wall,
                    step=step,
                    summary=Summary(value=[Summary.Value(tag=tag, simple_value=1.0 / step + j)]),
                )
                written += fh.write(_frame(event.SerializeToString()))
            written += fh.write(_frame(Event(wall_time=wall, step=step).SerializeToString() + bulk))
    return step


def peak_rss_mb(*args: str) -> tuple[float, float]:
    """Peak resident memory (MB) and seconds of `python -m yieldgate ARGS` in a child process."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the import's own report is not the benchmark's
        os.execv(sys.executable, [sys.executable, "-m", "yieldgate", *args])
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"yieldgate {' '.join(args)} failed")
    return usage.ru_maxrss / 1024, time.perf_counter() - start  # ru_maxrss is in KiB on Linux


def measure_memory(folder: Path, size_gb: float) -> None:
    big = folder / f"events.out.tfevents.{size_gb:g}gb.bench"
    if not big.exists() or big.stat().st_size < size_gb * 1e9:
        steps = write_event_file(big, int(size_gb * 1e9))
    else:
        steps = None
    small = folder / "events.out.tfevents.small.bench"
    write_event_file(small, 200_000)
    results = {}
    for name, path in (("small", small), ("big", big)):
        ledger = folder / f"memory-{name}.db"
        ledger.unlink(missing_ok=True)
        results[name] = peak_rss_mb(
            "--ledger", str(ledger), "import", "tensorboard", str(path), "--run", name, "--json"
        )
        ledger.unlink(missing_ok=True)
    print(
        f"event file: {big.stat().st_size / 1e9:.2f} GB"
        + (f", {steps:,} steps" if steps else "")
        + " (3 scalars and one 2,048-bucket histogram per step)"
    )
    print(f"{'import of':<40}{'peak RSS MB':>12}{'seconds':>10}")
    print(f"{'a file of a few steps (baseline)':<40}{results['small'][0]:>12.0f}{results['small'][1]:>10.1f}")
    print(f"{f'the {big.stat().st_size / 1e9:.1f} GB file':<40}{results['big'][0]:>12.0f}{results['big'][1]:>10.1f}")


def time_yieldgate(log: Path | str, folder: Path | str, i: int) -> tuple[float, int]:
    from yieldgate.ingest import ImportOptions, import_run
    from yieldgate.ledger import Ledger

    path = Path(folder) / f"bench-{i}.db"
    start = time.perf_counter()
    with Ledger(path) as ledger:
        (result,) = import_run(ledger, "tensorboard", [str(log)], ImportOptions(run="bench"))
    elapsed = time.perf_counter() - start
    path.unlink()
    return elapsed, result.steps


def time_yieldgate_in(src: Path, log: Path, folder: Path, i: int) -> tuple[float, int]:
    """`time_yieldgate` in a fresh interpreter that finds yieldgate in `src` first (a checkout of any version)."""
    code = f"from bench_import import time_yieldgate; print(*time_yieldgate({str(log)!r}, {str(folder)!r}, {i}))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(Path(__file__).parent)])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    elapsed, steps = out.stdout.split()
    return float(elapsed), int(steps)


def compare_versions(log: Path, folder: Path, other: Path, repeats: int) -> None:
    here = Path(__file__).resolve().parents[1] / "src"
    ours, theirs = [], []
    for i in range(repeats):
        t, steps = time_yieldgate_in(here, log, folder, i)
        ours.append(t)
        t, other_steps = time_yieldgate_in(other.resolve(), log, folder, i)
        theirs.append(t)
    assert steps == other_steps, f"the two versions imported {steps:,} and {other_steps:,} step rows"
    print(f"{steps:,} step rows imported by each")
    print(f"{'yieldgate import tensorboard':<44}{'median s':>10}  runs")
    for name, times in ((f"this tree ({here})", ours), (f"--against ({other})", theirs)):
        print(f"{name[:43]:<44}{statistics.median(times):>10.2f}  {', '.join(f'{t:.2f}' for t in times)}")
    print(f"this tree takes {statistics.median(ours) / statistics.median(theirs):.2f}x the time of --against")


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
    parser.add_argument("--memory", action="store_true", help="measure the peak memory of importing a large file")
    parser.add_argument("--size-gb", type=float, default=2.0, help="--memory: size of the event file")
    parser.add_argument("--against", type=Path, help="another checkout's src/ folder: time both versions' import")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.memory:
        measure_memory(args.dir, args.size_gb)
        return
    log = write_log(args.dir, args.steps)
    if args.against is not None:
        compare_versions(log, args.dir, args.against, args.repeats)
        return
    ours, theirs = [], []
    for i in range(args.repeats):
        t, steps = time_yieldgate(log, args.dir, i)
        ours.append(t)
        t, scalars = time_tbparse(log)
        theirs.append(t)
    print(f"{len(TAGS)} tags x {args.steps:,} steps = {scalars:,} scalars ({steps:,} step rows imported)")
    print(f"{'reader':<44}{'median s':>10}{'runs':>30}")
    print(
        f"{'yieldgate import tensorboard (into ledger)':<44}{statistics.median(ours):>10.2f}"
        f"{', '.join(f'{t:.2f}' for t in ours):>30}"
    )
    print(
        f"{'tbparse SummaryReader(...).scalars':<44}{statistics.median(theirs):>10.2f}"
        f"{', '.join(f'{t:.2f}' for t in theirs):>30}"
    )
    print(f"speedup: {statistics.median(theirs) / statistics.median(ours):.1f}x")


if __name__ == "__main__":
    main()
