"""Tracker cost: the yieldgate Tracker beside TensorBoard, MLflow and W&B, on one training loop.

Every tracker logs the same six scalars per optimizer step (loss, lr, grad norm, tokens/s, step time,
tokens) from the same loop: the reference GPT at ~0.84M parameters, batches of 16 x 128 random token ids
(a cost benchmark, not a learning claim), AdamW, CPU, two threads. Each configuration gets a fresh model
and temp dir, one after another in this process; the set is repeated and the median kept. Measured
directly, per step, since these machines wander 10-15% from run to run:

- foreground ms/step: wall time on the training thread inside the tracker's calls (for yieldgate also
  its optimizer hooks, by its own `busy_s` count);
- total CPU ms/step: the tracker's CPU wherever it runs: its calls on the training thread, its background
  threads, the processes it starts (W&B's service) and its close/finish/flush;
- loop CPU - baseline: the process's CPU over loop and close minus the untracked loop's, for reference;
  its run-to-run noise (ms per step) is far above the targets.

Part two: yieldgate with signals="full" (model and optimizer given, 4 accumulation microbatches of 4 x 128
per step): the share of the loop's wall time spent in the Tracker (its `busy_s`).

Part three, the Tracker's cost as a user feels it, measured from outside: two copies of the model and
optimizer, one handed to a full-signals Tracker (2 microbatches of 8 x 128 per step, default cadences), the
other untracked, trained in alternating blocks of 20 steps; the cost is the median over block pairs of the
tracked block's wall time over the untracked one's, less 1. It holds what `busy_s` cannot see: the writer
thread competing with torch's threads for the two cores and the interpreter lock, the hooks' side effects.

Part four: the first `tr.eval` on the training thread, in a fresh interpreter (nothing of yieldgate's warmed by
the parts above), against the median of 20 later ones; each eval one key the importers' aliases read
(`val_loss`) and one plain (`val/acc`).

Targets: yieldgate signals="throughput": foreground <= 0.05 ms/step, total CPU <= 0.15 ms/step, and the
lowest of all trackers on both; signals="full": <= 3% of step time, by its own count and from outside; the first
`tr.eval` < 5 ms.
`make bench` runs:

    .venv/bin/python benchmarks/bench_tracker.py [--steps 300] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import psutil
import torch
from rich.console import Console
from rich.table import Table

from yieldgate.probe.model import GPT, GPTConfig
from yieldgate.track.tracker import Tracker

CFG = GPTConfig(vocab_size=256, context=128, layers=4, width=128, heads=4)
BATCH, LR, CLIP, WARMUP = 16, 3e-4, 1.0, 20
TOKENS = BATCH * CFG.context


@dataclass
class Step:
    step: int
    host: dict[str, float]  # the six scalars as Python floats, for the peers
    loss: torch.Tensor
    grad_norm: torch.Tensor


@dataclass
class Peer:
    log: Callable[[Step], object]  # what the tracker's call returns is dropped
    close: Callable[[], None]
    busy: Callable[[], float] = lambda: 0.0  # yieldgate: its own count of training-thread seconds, hooks too
    after: Callable[[], None] = lambda: None  # after the measurement (W&B: stop its service)


# -- the peers: each sets up in its own fresh temp dir, before the measurement ---------------------------


def no_tracker(tmp: Path, model: GPT, opt: torch.optim.Optimizer) -> Peer:
    return Peer(lambda s: None, lambda: None)


def tensorboard(tmp: Path, model: GPT, opt: torch.optim.Optimizer) -> Peer:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tmp))

    def log(s: Step) -> None:
        for key, value in s.host.items():
            writer.add_scalar(key, value, s.step)

    return Peer(log, writer.close)


def mlflow_peer(tmp: Path, model: GPT, opt: torch.optim.Optimizer, *, uri: str, synchronous: bool) -> Peer:
    import mlflow

    mlflow.set_tracking_uri(uri.format(tmp=tmp))
    mlflow.start_run()

    def close() -> None:
        mlflow.flush_async_logging()
        mlflow.end_run()

    return Peer(lambda s: mlflow.log_metrics(s.host, step=s.step, synchronous=synchronous), close)


def wandb_offline(tmp: Path, model: GPT, opt: torch.optim.Optimizer) -> Peer:
    import wandb

    for var in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR"):
        os.environ[var] = str(tmp)
    run = wandb.init(mode="offline", dir=str(tmp), project="bench-tracker")
    return Peer(lambda s: run.log(s.host, step=s.step), run.finish, after=wandb.teardown)


def yieldgate(tmp: Path, model: GPT, opt: torch.optim.Optimizer, *, signals: Literal["throughput", "full"]) -> Peer:
    tr = Tracker(
        "bench", ledger=tmp / "b.db", signals=signals, optimizer=opt, model=model if signals == "full" else None
    )
    # Tensors, not floats: the Tracker never syncs. It reads lr from the optimizer and measures tokens/s and
    # step time itself.
    log = lambda s: tr.step(tokens=TOKENS, samples=BATCH, loss=s.loss, grad_norm=s.grad_norm)  # noqa: E731
    return Peer(log, tr.close, busy=lambda: tr.stats["busy_s"])


Make = Callable[[Path, GPT, torch.optim.Optimizer], Peer]
SETTLE_S = 0.5
BASELINE, OURS, FULL = "no tracker (baseline)", "yieldgate throughput", "yieldgate full, 4 microbatches"
PEERS: dict[str, Make] = {
    BASELINE: no_tracker,
    "tensorboard SummaryWriter": tensorboard,
    "mlflow file store, sync": partial(mlflow_peer, uri="file:{tmp}/mlruns", synchronous=True),
    "mlflow file store, async": partial(mlflow_peer, uri="file:{tmp}/mlruns", synchronous=False),
    "mlflow sqlite store, sync": partial(mlflow_peer, uri="sqlite:///{tmp}/mlflow.db", synchronous=True),
    "wandb offline": wandb_offline,
    OURS: partial(yieldgate, signals="throughput"),
}
# (name, peer, microbatches per step): the peers on one batch of 16 x 128, then signals="full" on 4 x (4 x 128).
CONFIGS: list[tuple[str, Make, int]] = [
    *((name, make, 1) for name, make in PEERS.items()),
    (FULL, partial(yieldgate, signals="full"), 4),
]


# -- measuring ------------------------------------------------------------------------------------------


def thread_cpu() -> dict[int, float]:
    """CPU seconds of each Python thread but the training thread (torch's OpenMP workers are not Python threads)."""
    out = {}
    for t in threading.enumerate():
        if t is not threading.main_thread() and t.ident is not None and t.native_id is not None:
            with contextlib.suppress(OSError):  # the thread ended meanwhile
                out[t.native_id] = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
    return out


def descendant_cpu() -> float:
    """CPU seconds of this process's descendants: the living ones (with what they reaped) and those reaped here."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            c = child.cpu_times()
            total += c.user + c.system + c.children_user + c.children_system
    return total


def train_step(
    model: GPT, opt: torch.optim.Optimizer, ids: torch.Tensor, micro: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer step over `ids` (batch, context + 1) split into `micro` accumulation microbatches."""
    opt.zero_grad(set_to_none=True)
    loss_sum = torch.zeros(())
    for chunk in ids.chunk(micro):
        _, loss = model(chunk[:, :-1], chunk[:, 1:])
        (loss / micro).backward()  # the common practice: TrackerConfig.loss_averaged
        loss_sum += loss.detach() / micro
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
    opt.step()
    return loss_sum, grad_norm


def measure(make: Make, steps: int, micro: int = 1) -> dict[str, float]:
    """Run WARMUP + `steps` steps logging through one tracker; figures per measured step."""
    torch.manual_seed(0)
    data = torch.randint(0, CFG.vocab_size, (8, BATCH, CFG.context + 1))  # random token ids, cycled
    model = GPT(CFG)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    with tempfile.TemporaryDirectory(prefix="bench-tracker-") as tmp:
        peer = make(Path(tmp), model, opt)
        clocks = lambda: (time.perf_counter(), time.process_time(), descendant_cpu(), peer.busy())  # noqa: E731
        gc.collect()
        fg = fg_cpu = busy_in_calls = tokens = 0.0
        for i in range(WARMUP + steps):
            if i == WARMUP:  # set-up and warm-up are not billed
                wall0, cpu0, kids0, busy0, threads0 = *clocks(), thread_cpu()
                fg = fg_cpu = busy_in_calls = 0.0
            t = time.perf_counter()
            loss, grad_norm = train_step(model, opt, data[i % len(data)], micro)
            step_s = time.perf_counter() - t
            tokens += TOKENS
            # .item() is a device sync (a real cost on GPUs); done here, outside the timed region, so the
            # peers, which need Python floats, are not charged for it. yieldgate gets the tensors.
            host = {
                "loss": loss.item(),
                "lr": opt.param_groups[0]["lr"],
                "grad_norm": grad_norm.item(),
                "tokens_per_s": TOKENS / step_s,
                "step_s": step_s,
                "tokens": tokens,
            }
            b0 = peer.busy()
            c0, t0 = time.thread_time(), time.perf_counter()
            peer.log(Step(i, host, loss, grad_norm))
            t1, c1 = time.perf_counter(), time.thread_time()
            fg, fg_cpu = fg + t1 - t0, fg_cpu + c1 - c0
            busy_in_calls += peer.busy() - b0
        wall1, busy1 = time.perf_counter(), peer.busy()
        # torch's OpenMP workers spin-wait for a while after the last parallel region (~3 ms of CPU here):
        # that is torch's, and a tracker whose close takes a few ms would be billed for it while the
        # baseline's instant close is not. Let them go idle first; the trackers' own threads run on
        # meanwhile and are billed as background below.
        time.sleep(SETTLE_S)
        threads1, cpu1 = thread_cpu(), time.process_time()
        peer.close()  # billed: a tracker that defers its work to close must not look free
        cpu2, kids2 = time.process_time(), descendant_cpu()
        peer.after()
    busy = busy1 - busy0
    hooks = busy - busy_in_calls  # yieldgate's optimizer hooks run on the training thread outside log()
    background = sum(v - threads0.get(k, 0.0) for k, v in threads1.items())
    total = fg_cpu + hooks + background + (cpu2 - cpu1) + (kids2 - kids0)
    ms = 1e3 / steps
    return {
        "foreground_ms": (fg + hooks) * ms,
        "total_cpu_ms": total * ms,
        "foreground_cpu_ms": fg_cpu * ms,
        "hooks_ms": hooks * ms,
        "background_cpu_ms": background * ms,
        "close_cpu_ms": (cpu2 - cpu1) * ms,
        "children_cpu_ms": (kids2 - kids0) * ms,
        "loop_cpu_ms": (cpu2 - cpu0 + kids2 - kids0) * ms,
        "step_ms": (wall1 - wall0) * ms,
        "busy_share": busy / (wall1 - wall0),
    }


def outside(blocks: int, block: int = 20, micro: int = 2) -> dict[str, float]:
    """Whole-step wall time with and without a full-signals Tracker, in alternating blocks of `block` steps on
    two copies of one model (`blocks` pairs after one warm-up pair): the cost the training loop feels."""
    torch.manual_seed(0)
    data = torch.randint(0, CFG.vocab_size, (8, BATCH, CFG.context + 1))
    tracked = GPT(CFG)
    plain = GPT(CFG)
    plain.load_state_dict(tracked.state_dict())
    opts = {m: torch.optim.AdamW(m.parameters(), lr=LR) for m in (tracked, plain)}
    ratios, writer_cpu, steps_on = [], 0.0, 0
    with tempfile.TemporaryDirectory(prefix="bench-tracker-") as tmp:
        tr = Tracker("outside", ledger=Path(tmp) / "b.db", signals="full", model=tracked, optimizer=opts[tracked])
        threads0 = thread_cpu()
        for pair in range(blocks + 1):
            times = {}
            for model in (tracked, plain) if pair % 2 else (plain, tracked):  # each goes first half the time
                t0 = time.perf_counter()
                for i in range(block):
                    loss, grad_norm = train_step(model, opts[model], data[i % len(data)], micro)
                    if model is tracked:
                        tr.step(tokens=TOKENS, samples=BATCH, loss=loss, grad_norm=grad_norm)
                times[model] = time.perf_counter() - t0
            if pair == 0:  # warm-up pair: allocator, caches, the Tracker's first flush
                threads0 = thread_cpu()
                continue
            ratios.append(times[tracked] / times[plain] - 1.0)
            steps_on += block
        threads1 = thread_cpu()
        tr.close()
    writer_cpu = sum(v - threads0.get(k, 0.0) for k, v in threads1.items())
    return {
        "outside_cost": statistics.median(ratios),
        "outside_cost_mean": statistics.fmean(ratios),
        "outside_pairs": len(ratios),
        "writer_cpu_ms_per_step": writer_cpu * 1e3 / steps_on,
    }


def summarise(runs: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Medians over the repeats, the prescribed whole-loop subtraction beside them, and the targets."""
    base = runs[BASELINE]
    for name, samples in runs.items():
        for sample, b in zip(
            samples, base if name != FULL else [], strict=False
        ):  # each repeat against its own baseline
            sample["loop_cpu_minus_baseline_ms"] = sample["loop_cpu_ms"] - b["loop_cpu_ms"]
    figures = {
        name: {k: statistics.median(s[k] for s in samples) for k in samples[0]} for name, samples in runs.items()
    }
    targets = {}
    if OURS in figures:  # --only may leave a configuration out: its targets are then not judged
        ours = figures[OURS]
        peers = [f for name, f in figures.items() if name not in (BASELINE, OURS, FULL)]
        targets.update(
            {
                "yieldgate throughput: foreground <= 0.05 ms/step": ours["foreground_ms"] <= 0.05,
                "yieldgate throughput: total CPU <= 0.15 ms/step": ours["total_cpu_ms"] <= 0.15,
                "yieldgate throughput: lowest foreground of all": all(
                    ours["foreground_ms"] < f["foreground_ms"] for f in peers
                ),
                "yieldgate throughput: lowest total CPU of all": all(
                    ours["total_cpu_ms"] < f["total_cpu_ms"] for f in peers
                ),
            }
        )
    if FULL in figures:
        targets["yieldgate full signals: <= 3% of step time"] = figures[FULL]["busy_share"] <= 0.03
    return {
        "trackers": figures,
        "baseline_step_ms": figures[BASELINE]["step_ms"],
        "baseline_cpu_spread_ms": max(b["loop_cpu_ms"] for b in base) - min(b["loop_cpu_ms"] for b in base),
        "targets": targets,
    }


FIRST_EVAL = """
import json, sys, tempfile, time
from pathlib import Path
from yieldgate.track.tracker import Tracker
with tempfile.TemporaryDirectory() as tmp:
    tr = Tracker(run="r", ledger=Path(tmp) / "l.db")
    times = []
    for k in range(21):
        for _ in range(5):
            tr.step(tokens=100, loss=1.0)
        start = time.perf_counter()
        tr.eval({"val_loss": 2.0 - k / 100, "val/acc": 0.5})
        times.append(time.perf_counter() - start)
    tr.close()
print(json.dumps(times))
"""


def first_eval(repeats: int) -> dict[str, float]:
    """The first `tr.eval`'s time on the training thread (each in a fresh interpreter, median of `repeats`) and the
    median of the later ones, in ms."""
    firsts, later = [], []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-c", FIRST_EVAL], capture_output=True, text=True, check=True)
        times = json.loads(done.stdout.strip().splitlines()[-1])
        firsts.append(times[0] * 1e3)
        later.append(statistics.median(times[1:]) * 1e3)
    return {"first_eval_ms": statistics.median(firsts), "later_eval_ms": statistics.median(later)}


def render(result: dict[str, Any]) -> None:
    table = Table(
        title=f"Tracker cost per step: GPT {result['params'] / 1e6:.2f}M params, batch {BATCH} x "
        f"{CFG.context}, CPU x2 threads, median of {result['repeats']} x {result['steps']} steps"
    )
    for column in (
        "tracker",
        "foreground ms/step",
        "total CPU ms/step",
        "(close)",
        "(child procs)",
        "loop CPU - baseline",
    ):
        table.add_column(column, justify="left" if column == "tracker" else "right")
    for name, f in result["trackers"].items():
        if name != FULL:
            table.add_row(
                name,
                *(f"{f[k]:.4f}" for k in ("foreground_ms", "total_cpu_ms", "close_cpu_ms", "children_cpu_ms")),
                f"{f['loop_cpu_minus_baseline_ms']:+.2f}",
            )
    console = Console(width=130)
    console.print(table)
    console.print(
        f"baseline step time {result['baseline_step_ms']:.1f} ms; its loop CPU varied by "
        f"{result['baseline_cpu_spread_ms']:.2f} ms/step between repeats: the floor of the last column"
    )
    full = result["trackers"].get(FULL)
    if full is not None:
        console.print(
            f"{FULL}: {full['step_ms']:.1f} ms/step; the Tracker busy {full['busy_share']:.2%} of it, "
            f"{full['foreground_ms']:.3f} ms/step (its gradient and optimizer hooks {full['hooks_ms']:.3f})"
        )
    out = result.get("outside")
    if out is not None:
        console.print(
            f"from outside (full signals, 2 microbatches, blocks of 20 steps alternating with an untracked "
            f"copy, {out['outside_pairs']} pairs): {out['outside_cost']:+.2%} median, "
            f"{out['outside_cost_mean']:+.2%} mean; the writer thread {out['writer_cpu_ms_per_step']:.3f} "
            "ms CPU/step"
        )
    first = result["first_eval"]
    console.print(
        f"first tr.eval on the training thread: {first['first_eval_ms']:.2f} ms (later ones "
        f"{first['later_eval_ms']:.3f} ms, median; each in a fresh interpreter, median of {result['repeats']})"
    )
    for target, ok in result["targets"].items():
        console.print(f"{'PASS' if ok else 'FAIL'}  {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help=f"measured steps per tracker, after {WARMUP} warm-up")
    parser.add_argument("--repeats", type=int, default=3, help="runs of the whole set; the median is reported")
    parser.add_argument(
        "--only",
        help="run only trackers whose name contains one of these comma-separated words "
        "(the baseline always runs; the 'lowest of all' targets then compare fewer peers)",
    )
    parser.add_argument(
        "--outside-blocks", type=int, default=30, help="block pairs of the outside measure (0: skip it)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configs = [
        c for c in CONFIGS if c[0] == BASELINE or not args.only or any(word in c[0] for word in args.only.split(","))
    ]
    # Nothing may reach a server: W&B offline, MLflow on local stores (its file store, in maintenance mode
    # since MLflow 3, needs the opt-in).
    os.environ.update(
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        WANDB_ERROR_REPORTING="false",
        MLFLOW_ALLOW_FILE_STORE="true",
        MLFLOW_LOGGING_LEVEL="WARNING",
    )
    torch.set_num_threads(2)
    params = sum(p.numel() for p in GPT(CFG).parameters())
    assert 0.8e6 <= params <= 1.2e6, f"the benchmark model should have ~1M parameters, has {params:,}"
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in configs}
    for r in range(args.repeats):
        r %= len(configs)  # each repeat starts one later, so a slow spell of the machine hits a different tracker
        for name, make, micro in configs[r:] + configs[:r]:
            runs[name].append(measure(make, args.steps, micro))
    result = {"params": params, "steps": args.steps, "repeats": args.repeats, **summarise(runs)}
    if args.outside_blocks:
        result["outside"] = outside(args.outside_blocks)
        result["targets"]["yieldgate full signals: <= 3% from outside"] = result["outside"]["outside_cost"] <= 0.03
    result["first_eval"] = first_eval(args.repeats)
    result["targets"]["the first tr.eval: < 5 ms on the training thread"] = result["first_eval"]["first_eval_ms"] < 5
    if args.json:
        print(json.dumps(result))
    else:
        render(result)


if __name__ == "__main__":
    main()
