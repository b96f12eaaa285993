"""The Tracker on a real GPU (issue #49): one check of each claim a CPU cannot test, in one run of at most 4 minutes.

1. No host syncs: a ~47M-parameter GPT (bf16 autocast, eager and `torch.compile`d) trains a few hundred steps in
   three copies, untracked and with the Tracker in `throughput` and `full` mode, under torch's sync debug mode after
   warm-up; any synchronising call is named with its call site (`gpu_loop.SyncRecorder`). Target: none added.
2. Overhead at a realistic step time: whole-step time of the three copies in interleaved blocks (`gpu_loop`), median
   and spread over rounds. Targets: <= 1% (`throughput`), <= 3% (`full`).
3. Telemetry: a run on real text (Python's standard library as bytes) with telemetry every second; NVML power,
   utilisation, SM clock, memory and the reasons that slow the clocks recorded per interval; the energy counter into
   joules per run beside the check's own NVML reading; `yieldgate yield` printing yield per kWh from it; the GPU
   NVML reads is the GPU torch trains on.
4. MFU: the Tracker's figure on a contiguous stretch beside the one computed here by hand (6N + 12·L·H·Q·T from the
   model's own parameters, the peak from peak_flops.csv's row for the device, tokens over the stretch's measured
   time). Target: within 2%.
5. A probe campaign on the GPU: two recipes, one seed, with the built-in trainer and `trainer.gpus: 1` (what the
   campaign file accepts), then the same with a team-style command trainer (`gpu_trainer.py`), each probe seeing
   only its own device.

On a machine without CUDA it says so in one line, runs what needs no GPU (part 4's formula and table row, part 5's
campaign file) and exits 0. It runs from a source checkout with the machine's own python3 and torch (no dependency on
.venv): `make gpu-wheels` fetches, where there is a network, the wheels such a machine lacks into build/gpu-wheels/;
`make gpu-check` there installs them into build/gpu-site/ and runs

    python3 benchmarks/gpu_check.py [--quick] [--out FILE]

`--cpu-dry-run` runs every part on the CPU with a tiny model, to test the script itself (its figures mean nothing).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "build" / "gpu-site"  # the wheels `make gpu-check` installs from build/gpu-wheels/


def _bootstrap() -> None:
    """Import yieldgate from this checkout, and the prepared wheels; the campaign's worker processes too."""
    paths = [str(p) for p in (SITE, ROOT / "src", Path(__file__).parent) if p.is_dir()]
    sys.path[:0] = [p for p in paths if p not in sys.path]
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths[:2], *filter(None, [os.environ.get("PYTHONPATH")])])


_bootstrap()

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import asdict  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
from gpu_loop import run_variant  # noqa: E402
from gpu_parts import DRY, GPU, QUICK, Check, campaign_part, device_name, spec_part, telemetry_part  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from yieldgate.probe.model import GPT, GPTConfig  # noqa: E402
from yieldgate.util.jsonsafe import json_safe  # noqa: E402

PEAKS = ROOT / "src" / "yieldgate" / "track" / "peak_flops.csv"
TARGETS = {"throughput": 0.01, "full": 0.03}
MFU_TOLERANCE = 0.02


# -- part 4 by hand: the formula and the table's row, read here without the Tracker's code -------------------------


def peak_row(device_name: str, dtype: str) -> tuple[float, str] | None:
    """peak_flops.csv's row for `device_name` at `dtype`, read with csv and re (the Tracker's lookup not used)."""
    with PEAKS.open() as f:
        for row in csv.DictReader(f):
            if row["dtype"] == dtype and re.search(row["match"], device_name, re.IGNORECASE):
                return float(row["peak_flops"]), row["device"]
    return None


def counted_n(model: GPT) -> int:
    """N of 6N, counted here: every parameter once (the tied head with the token table), less the position table,
    whose lookup is no matmul."""
    return sum({id(p): p.numel() for p in model.parameters()}.values()) - model.pos.weight.numel()


def hand_flops_per_token(n: int, cfg: GPTConfig) -> float:
    """6N + 12·L·H·Q·T (PaLM, appendix B)."""
    return 6.0 * n + 12.0 * cfg.layers * cfg.heads * (cfg.width // cfg.heads) * cfg.context


def formula_part(check: Check, device_name: str) -> None:
    """Part 4 without a GPU: the Tracker's MFU plan for a small GPT on the device's row, beside the hand figure at one
    rate (exact equality: the same formula and row; the shape does not matter, and a small one builds at once)."""
    from yieldgate.manifest import Hardware, Manifest, Optimisation
    from yieldgate.track.mfu import plan_mfu

    model = GPT(DRY.loop.gpt)
    manifest = Manifest(hardware=Hardware(device_kind=device_name), optimisation=Optimisation(precision="bf16"))
    plan = plan_mfu(model, manifest, torch.device("cpu"), world=1, run="formula")
    row = peak_row(device_name, "bf16")
    rate = 1e5  # tokens/s: any rate; the two figures are the same function of it
    hand = None if row is None else rate * hand_flops_per_token(counted_n(model), model.cfg) / row[0]
    tracker = plan(rate) if plan.flops_per_token else None
    ok = hand is not None and tracker is not None and math.isclose(tracker, hand, rel_tol=1e-12)
    check.data["formula"] = {"device": device_name, "row": row, "hand": hand, "tracker": tracker, "meta": plan.meta}
    shown = f"{tracker:.6g} vs {hand:.6g}" if hand is not None and tracker is not None else f"row {row}"
    check.row("4", f"MFU formula and {device_name}'s bf16 row at 1e5 tok/s", shown, "equal", "PASS" if ok else "FAIL")


# -- parts 1, 2 and 4 on the device ----------------------------------------------------------------------------------


def loop_part(check: Check, compiled: bool) -> None:
    """One variant (eager or compiled) of the interleaved loop: syncs, overhead, MFU."""
    tag = "compiled" if compiled else "eager"
    manifest: dict[str, Any] = {"optimisation": {"precision": "bf16" if check.device.type == "cuda" else "fp32"}}
    if check.dry_run:  # a made-up peak, so that the MFU path runs on a CPU: the figure means nothing
        manifest["hardware"] = {"peak_flops": 1e12}
    # A dry run compiles with dynamo alone: inductor's C++ build on a CPU takes minutes, and the GPU runs inductor.
    backend = ("eager" if check.dry_run else "inductor") if compiled else None
    result = run_variant(
        check.sizes.loop, check.device, backend=backend, ledger=check.work / "loop.db", tag=tag, manifest=manifest
    )
    check.data[f"loop_{tag}"] = result
    loop_rows(check, tag, result)


def loop_rows(check: Check, tag: str, result: dict[str, Any]) -> None:
    """The verdicts of parts 1, 2 and 4 on one variant's figures."""
    syncs = result["syncs"]
    added, sites = syncs["added_by_tracker"], syncs["tracker_call_sites"]
    clean = not sites and not any(added.values())
    measured = "not counted (no CUDA)" if not syncs["counted"] else f"added {added}; {sites or 'none by yieldgate'}"
    check.row(
        "1", f"host syncs added, {tag}", measured, "0", ("PASS" if clean else "FAIL") if syncs["counted"] else "SKIPPED"
    )
    faults = result["tracker_faults"]
    if syncs["tracker_background_sites"]:
        check.row("1", f"syncs on the Tracker's own threads, {tag}", str(syncs["tracker_background_sites"]), "", "INFO")
    check.row("1", f"Tracker faults, {tag}", str(faults), "0", "PASS" if not any(faults.values()) else "FAIL")
    if result["compiled"]:
        n = result["graphs_compiled_while_measured"]
        check.row("1", "graphs compiled during the rounds", str(n), "0", "PASS" if n == 0 else "FAIL")
    base = result["step_ms"]["none"]
    for arm, limit in TARGETS.items():
        s = result["overhead"][arm]
        measured = f"{s['median']:+.2%} (IQR {s['q1']:+.2%}..{s['q3']:+.2%}, n={s['n']}; step {base['median']:.1f} ms)"
        check.row(
            "2", f"{arm} overhead, {tag}", measured, f"<= {limit:.0%}", "PASS" if s["median"] <= limit else "FAIL"
        )
    mfu_row(check, tag, result)


def mfu_row(check: Check, tag: str, result: dict[str, Any]) -> None:
    """Part 4 on the device: the Tracker's MFU over the stretch beside the hand figure."""
    stretch, tracked = result["stretch"], result["tracked_rows"]
    n = result["params_unique"] - result["params_position"]  # counted on the trained copy
    row = peak_row(device_name(check.device), "bf16") if not check.dry_run else (1e12, "dry-run peak")
    fpt = hand_flops_per_token(n, check.sizes.loop.gpt)
    hand = None if row is None else stretch["tokens"] / stretch["seconds"] * fpt / row[0]
    ours = tracked["mfu_median"]
    result["mfu_hand"] = hand
    if hand is None or ours is None or math.isnan(ours):
        check.row("4", f"MFU, Tracker vs by hand, {tag}", f"{ours} vs {hand}", f"within {MFU_TOLERANCE:.0%}", "FAIL")
        return
    gap = ours / hand - 1.0
    measured = f"{ours:.2%} vs {hand:.2%} ({gap:+.2%}; {tracked['rows']} rows)"
    verdict = "PASS" if abs(gap) <= MFU_TOLERANCE else "FAIL"
    check.row("4", f"MFU, Tracker vs by hand, {tag}", measured, f"within {MFU_TOLERANCE:.0%}", verdict)


# -- running it all --------------------------------------------------------------------------------------------------


def attempt(check: Check, part: str, name: str, fn: Callable[[], None], budget_s: float) -> None:
    """Run one part; a failure is recorded (its last line and the traceback in the JSON) and the next part runs."""
    if time.perf_counter() - check.started > budget_s:
        check.row(part, name, "over the time budget", "", "SKIPPED")
        return
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - a check reports what broke and goes on to the next part
        check.data.setdefault("errors", {})[name] = traceback.format_exc()[-4000:]
        check.row(
            part, name, f"{type(exc).__name__}: {str(exc).splitlines()[0][:150] if str(exc) else ''}", "", "ERROR"
        )
    if check.device.type == "cuda":
        torch.cuda.empty_cache()


def render(check: Check, out: Path) -> None:
    dry = " (a CPU dry run: its figures mean nothing)" if check.dry_run else ""
    table = Table(title=f"yieldgate on {device_name(check.device)}{dry}")
    for column in ("part", "what", "measured", "target", "verdict"):
        table.add_column(column, overflow="fold")
    for r in check.rows:
        table.add_row(r.part, r.what, r.measured, r.target, r.verdict)
    Console(width=160).print(table)
    print(f"JSON: {out}")


def environment(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": device_name(device),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(cuda=torch.version.cuda, sms=props.multi_processor_count, memory_gib=props.total_memory / 2**30)
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, a shorter telemetry run, smaller probes")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-check" / "gpu-check.json")
    parser.add_argument("--budget-s", type=float, default=240.0, help="parts not started by then are skipped")
    parser.add_argument(
        "--only", default="1,2,3,4,5", help="the parts to run, e.g. 3,5 (parts 1, 2 and 4 run together)"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--no-gpu", action="store_true", help="run only the parts that need no GPU")
    mode.add_argument("--cpu-dry-run", action="store_true", help="every part on the CPU with a tiny model (tests)")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.no_gpu and not args.cpu_dry_run
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    sizes = DRY if args.cpu_dry_run else QUICK if args.quick else GPU
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        check = Check(
            device, sizes, Path(tmp), args.cpu_dry_run, [], {"environment": environment(device)}, time.perf_counter()
        )
        run_parts(check, cuda or args.cpu_dry_run, args.budget_s, set(args.only.split(",")))
    check.data.update(
        rows=[asdict(r) for r in check.rows],
        elapsed_s=time.perf_counter() - check.started,
        quick=args.quick,
        dry_run=args.cpu_dry_run,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(json_safe(check.data), indent=1, default=str, allow_nan=False) + "\n")
    render(check, args.out)
    return 0


def run_parts(check: Check, device_parts: bool, budget_s: float, only: set[str]) -> None:
    """The parts in `only` ("1", "2" and "4" run together in the loop), the ones that need no GPU first."""
    name = device_name(check.device) if check.device.type == "cuda" else "NVIDIA H100 80GB HBM3"
    loop = bool(only & {"1", "2", "4"})
    steps: list[tuple[bool, str, str, Callable[[], None]]] = [
        ("4" in only, "4", "MFU formula", lambda: formula_part(check, name)),
        ("5" in only, "5", "campaign file", lambda: spec_part(check)),
    ]
    if not device_parts:
        print("no CUDA device here: parts 1-3, part 4 on the device and part 5's campaigns need one; ran the rest")
    else:
        steps += [
            (loop, "1-2", "eager loop", lambda: loop_part(check, compiled=False)),
            (loop, "1-2", "compiled loop", lambda: loop_part(check, compiled=True)),
            ("3" in only, "3", "telemetry", lambda: telemetry_part(check)),
            ("5" in only, "5", "campaigns", lambda: campaign_part(check)),
        ]
    for wanted, part, what, fn in steps:
        if wanted:
            attempt(check, part, what, fn, budget_s)


if __name__ == "__main__":
    sys.exit(main())
