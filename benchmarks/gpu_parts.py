"""Parts 3 and 5 of the GPU check (`gpu_check.py`: telemetry with energy and yield per kWh; the probe campaigns), and
what every part shares: the sizes, the table's rows, the check's state."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from gpu_loop import LoopShape

from yieldgate.probe.model import GPT, GPTConfig


@dataclass(frozen=True, kw_only=True)
class Sizes:
    loop: LoopShape
    telemetry_s: float
    """Seconds of part 3's run."""
    text_gpt: GPTConfig
    text_rows: int
    budget: int
    """Tokens per probe (part 5)."""
    probe_model: dict[str, int]
    probe_context: int


GPU = Sizes(
    loop=LoopShape(
        gpt=GPTConfig(vocab_size=16384, context=1024, layers=12, width=512, heads=8),
        rows=8,
        micro=2,
        warmup=30,
        block=20,
        rounds=10,
        contiguous=150,
    ),
    telemetry_s=25.0,
    text_gpt=GPTConfig(vocab_size=256, context=512, layers=8, width=512, heads=8),
    text_rows=16,
    budget=262_144,
    probe_model={"layers": 2, "width": 128, "heads": 4},
    probe_context=128,
)
QUICK = replace(GPU, loop=replace(GPU.loop, warmup=15, rounds=4, contiguous=100), telemetry_s=12.0, budget=65_536)
DRY = Sizes(
    loop=LoopShape(
        gpt=GPTConfig(vocab_size=256, context=32, layers=2, width=32, heads=2),
        rows=2,
        micro=2,
        warmup=2,
        block=2,
        rounds=2,
        contiguous=22,
    ),
    telemetry_s=1.0,
    text_gpt=GPTConfig(vocab_size=256, context=32, layers=1, width=32, heads=2),
    text_rows=2,
    budget=4096,
    probe_model={"layers": 1, "width": 32, "heads": 2},
    probe_context=32,
)


@dataclass
class Row:
    """One line of the table."""

    part: str
    what: str
    measured: str
    target: str
    verdict: str
    """PASS, FAIL, FINDING (a defect found and not fixed here), INFO, SKIPPED or ERROR."""


@dataclass
class Check:
    """What the parts share: where they run, what they found."""

    device: torch.device
    sizes: Sizes
    work: Path
    dry_run: bool
    rows: list[Row]
    data: dict[str, Any]
    started: float

    def row(self, part: str, what: str, measured: str, target: str, verdict: str) -> None:
        self.rows.append(Row(part, what, measured, target, verdict))


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


# -- part 3: telemetry, energy, yield per kWh -------------------------------------------------------------------------

TELEMETRY_KEYS = ("device/power_w", "device/gpu_util", "device/sm_clock_mhz", "device/mem_used_gib")
SLOWDOWN = "device/throttle_reasons"


def stdlib_bytes(max_bytes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Python's standard library as bytes, split by module: (train, held out). Real text on any machine."""
    from yieldgate.data import corpus

    train, held = corpus.split_by_work(corpus.stdlib_works(max_bytes), held_out=0.1, seed=0)
    return tuple(  # type: ignore[return-value]
        torch.frombuffer(bytearray("\n".join(w.text for w in ws).encode()), dtype=torch.uint8).long()
        for ws in (train, held)
    )


class Nvml:
    """The check's own NVML readings of the device, by the UUID torch gives it: the energy counter (J) and the raw
    clock-event reasons, independent of the Tracker's."""

    def __init__(self, device: torch.device) -> None:
        self.handle: Any = None
        self.uuid: str | None = None
        if device.type != "cuda":
            return
        import pynvml

        pynvml.nvmlInit()
        self.nv = pynvml
        uuid = str(torch.cuda.get_device_properties(device).uuid)
        self.uuid = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
        self.handle = pynvml.nvmlDeviceGetHandleByUUID(self.uuid)

    def _read(self, name: str, *fallbacks: str) -> float | None:
        """One reading by the first of the functions pynvml has; None without a handle or where it is unsupported."""
        if self.handle is None:
            return None
        call = next(getattr(self.nv, n) for n in (name, *fallbacks) if hasattr(self.nv, n))
        try:
            return float(call(self.handle))
        except self.nv.NVMLError:
            return None

    def joules(self) -> float | None:
        mj = self._read("nvmlDeviceGetTotalEnergyConsumption")
        return None if mj is None else mj / 1e3

    def reasons(self) -> int | None:
        bits = self._read("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
        return None if bits is None else int(bits)


def train_on_text(check: Check, ledger: Path, nvml: Nvml) -> list[int | None]:
    """The telemetry run: full signals, telemetry every second, nine evaluations over `telemetry_s` seconds. Returns
    the raw clock-event reasons the check read at each evaluation."""
    from yieldgate.track import Tracker, TrackerConfig

    dev, sizes = check.device, check.sizes
    train, held = (t.to(dev) for t in stdlib_bytes(200_000 if check.dry_run else 4_000_000))
    torch.manual_seed(0)
    model = GPT(sizes.text_gpt).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=dev.type == "cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    context = sizes.text_gpt.context
    offsets = torch.arange(context + 1, device=dev)

    def window(data: torch.Tensor, n: int) -> torch.Tensor:
        return data[torch.randint(0, len(data) - context - 1, (n, 1), generator=gen, device=dev) + offsets]

    held_batch = window(held, 4 * sizes.text_rows)
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    manifest = {"optimisation": {"precision": "bf16" if dev.type == "cuda" else "fp32"}}
    reasons, start = [], time.perf_counter()
    with Tracker(
        "telemetry",
        ledger=str(ledger),
        manifest=manifest,
        signals="full",
        model=model,
        optimizer=opt,
        config=TrackerConfig(telemetry_every_s=1.0),
        suffix_if_taken=False,
    ) as tr:
        for k in range(9):
            while time.perf_counter() < start + k * check.sizes.telemetry_s / 8:
                x = window(train, sizes.text_rows)
                opt.zero_grad(set_to_none=True)
                with autocast:
                    _, loss = model(x[:, :-1], x[:, 1:])
                loss.backward()
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                tr.step(tokens=sizes.text_rows * context, samples=sizes.text_rows, loss=loss.detach(), grad_norm=norm)
            with torch.no_grad(), autocast:
                _, val = model(held_batch[:, :-1], held_batch[:, 1:])
            tr.eval({"val/loss": val.float(), "val/bpb": val.float() / math.log(2)})
            reasons.append(nvml.reasons())
    return reasons


def yieldgate_cli(ledger: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A yieldgate command on a terminal 200 columns wide (at 80, `yield` leaves its per-kWh column out and says so)."""
    command = [sys.executable, "-m", "yieldgate", "--ledger", str(ledger), *args]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=env)


def telemetry_part(check: Check) -> None:
    from yieldgate.ledger import Ledger

    ledger = check.work / "telemetry.db"
    nvml = Nvml(check.device)
    before = nvml.joules()
    raw = train_on_text(check, ledger, nvml)
    after = nvml.joules()
    with Ledger(str(ledger), readonly=True) as led:
        steps, extras, meta = led.steps("telemetry"), led.extras("telemetry"), led.meta("telemetry")
    counts = {k: int((extras["key"] == k).sum()) for k in (*TELEMETRY_KEYS, SLOWDOWN)}
    energy = steps["energy_j"].dropna()
    ledger_j = float(energy.iloc[-1]) if len(energy) else None
    direct_j = None if before is None or after is None else after - before
    as_json, as_text = (
        yieldgate_cli(ledger, "yield", "telemetry", "--json"),
        yieldgate_cli(ledger, "yield", "telemetry"),
    )
    tranches = json.loads(as_json.stdout) if as_json.returncode == 0 else []
    per_kwh = [t["yield_per_kwh"] for t in tranches if t.get("yield_per_kwh") is not None]
    telemetry = meta.get("telemetry", {})
    check.data["telemetry"] = {
        "samples": counts,
        "ledger_j": ledger_j,
        "nvml_j": direct_j,
        "sources": telemetry.get("sources"),
        "gpus": telemetry.get("gpus"),
        "torch_gpu": nvml.uuid,
        "missing": telemetry.get("missing"),
        "yield_per_kwh": per_kwh,
        "yield_text": as_text.stdout[-2000:],
        "yield_errors": as_json.stderr[-500:],
        "raw_reasons": raw,
        "steps": len(steps),
    }
    telemetry_rows(check)


def telemetry_rows(check: Check) -> None:
    t = check.data["telemetry"]
    gpu = "nvml" in (t["sources"] or [])
    enough = all(t["samples"][k] >= 3 for k in TELEMETRY_KEYS)
    short = ", ".join(f"{k.split('/')[1]} {n}" for k, n in t["samples"].items())
    check.row(
        "3",
        "NVML readings recorded (samples)",
        short,
        ">= 3 each",
        ("PASS" if enough else "FAIL") if gpu else "SKIPPED",
    )
    same = t["gpus"] == [t["torch_gpu"]]
    check.row(
        "3",
        "NVML reads the GPU torch trains on",
        f"{t['gpus']} / {t['torch_gpu']}",
        "same UUID",
        ("PASS" if same else "FAIL") if gpu else "SKIPPED",
    )
    if t["ledger_j"] is not None and t["nvml_j"]:
        ratio = t["ledger_j"] / t["nvml_j"]
        rapl = "rapl" in (t["sources"] or [])
        measured = f"{t['ledger_j']:.0f} J in the ledger, {t['nvml_j']:.0f} J by NVML here ({ratio:.3f})" + (
            " + RAPL" if rapl else ""
        )
        verdict = "INFO" if rapl else ("PASS" if 0.9 <= ratio <= 1.0 else "FAIL")
        check.row("3", "energy per run", measured, "0.9-1.0 of NVML's", verdict)
    else:
        check.row(
            "3",
            "energy per run",
            f"ledger {t['ledger_j']}, NVML {t['nvml_j']}",
            "recorded",
            "FAIL" if gpu else "SKIPPED",
        )
    # the column's header, not the note that a narrow terminal left it out, nor the one that it is unknown
    printed = any("kWh" in line and "left out" not in line and ":" not in line for line in t["yield_text"].splitlines())
    shown = (
        f"{len(t['yield_per_kwh'])} tranches, first {t['yield_per_kwh'][0]:.4g}/kWh" if t["yield_per_kwh"] else "none"
    )
    check.row(
        "3",
        "yield per kWh (yieldgate yield)",
        shown,
        "printed",
        ("PASS" if t["yield_per_kwh"] and printed else "FAIL") if gpu else "SKIPPED",
    )
    slowed = sum(1 for r in t["raw_reasons"] if r and r & 0xEC)
    check.row(
        "3",
        "throttle: slowed samples in the ledger / raw reads here",
        f"{t['samples'][SLOWDOWN]} recorded; {slowed} of {len(t['raw_reasons'])} raw reads slowed",
        "seen as such",
        "INFO",
    )


# -- part 5: probe campaigns ---------------------------------------------------------------------------------------


def team_data(folder: Path, max_bytes: int) -> None:
    """The campaign's data: the standard library's modules as JSON-lines, split by module."""
    from yieldgate.data import corpus

    train, held = corpus.split_by_work(corpus.stdlib_works(max_bytes), held_out=0.1, seed=0)
    for name, works in (("code.jsonl", train), ("heldout.jsonl", held)):
        (folder / name).write_text("".join(json.dumps({"text": w.text}) + "\n" for w in works))


def campaign_file(check: Check, name: str, trainer: dict[str, Any] | None) -> Path:
    sizes, data = check.sizes, check.work / "code.jsonl"
    spec: dict[str, Any] = {
        "name": name,
        "recipes": {
            "code": {"sources": [{"name": "code", "path": str(data)}]},
            "shuffled": {"sources": [{"name": "code", "path": str(data), "shuffled_share": 1.0}]},
        },
        "seeds": [0],
        "budgets": [sizes.budget],
        "models": [sizes.probe_model],
        "probe": {"context": sizes.probe_context, "batch_size": 16, "microbatches": 2, "evals": 4},
    }
    if trainer is not None:
        spec["trainer"] = trainer
    path = check.work / f"{name}.json"
    path.write_text(json.dumps(spec))
    return path


def spec_part(check: Check) -> None:
    """Part 5 without a GPU: does the campaign file take `trainer.gpus` for the built-in trainer?"""
    from yieldgate.errors import YieldgateError
    from yieldgate.probe.campaign import load_campaign

    try:
        load_campaign(campaign_file(check, "gpu-builtin-gpus", {"gpus": 1}))
        said, verdict = "accepted", "INFO"
    except YieldgateError as exc:
        said, verdict = f"refused: {str(exc).splitlines()[0][:160]}", "FINDING"
    check.data["spec_builtin_gpus"] = said
    check.row("5", "built-in trainer with trainer.gpus: 1", said, "accepted", verdict)


def campaign_part(check: Check) -> None:
    """Part 5: the built-in campaign (where did its probes train?), then the command trainer's, one GPU per probe."""
    from yieldgate import api
    from yieldgate.ledger import Ledger

    team_data(check.work, 300_000 if check.dry_run else 3_000_000)
    ledger = check.work / "campaign.db"
    builtin = api.probe(campaign_file(check, "gpu-builtin", None), ledger=str(ledger), workers=1)
    gpus = 1 if check.device.type == "cuda" else 0
    script, held = Path(__file__).with_name("gpu_trainer.py"), check.work / "heldout.jsonl"
    command = f"{{python}} {script} --data {{recipe_file}} --tokens {{tokens}} --seed {{seed}} --eval {held}"
    own = api.probe(
        campaign_file(check, "gpu-own", {"command": command, "gpus": gpus, "timeout": 300}),
        ledger=str(ledger),
        workers=2,
    )
    with Ledger(str(ledger), readonly=True) as led:
        where = {run: led.meta(run).get("telemetry", {}) for run in builtin.run.finished}
        seen = {
            run: (led.meta(run).get("devices_seen"), led.meta(run).get("telemetry", {})) for run in own.run.finished
        }
    check.data["campaigns"] = {
        "builtin": builtin.run.to_dict(),
        "builtin_devices": where,
        "own": own.run.to_dict(),
        "own_devices": seen,
    }
    devices = sorted({t.get("device", "?") for t in where.values()})
    ran = f"{len(builtin.run.finished)} finished, {len(builtin.run.failed)} failed; trained on {devices}"
    on_gpu = devices == [device_name(check.device)] and check.device.type == "cuda"
    check.row(
        "5", "built-in trainer's probes", ran, "on the GPU", "PASS" if on_gpu else ("FINDING" if gpus else "INFO")
    )
    own_rows(check, own.run, seen, gpus)


def own_rows(check: Check, run: Any, seen: dict[str, Any], gpus: int) -> None:
    ok = len(run.finished) == 2 and not run.failed
    check.row(
        "5",
        "command trainer's probes",
        f"{len(run.finished)} finished, {len(run.failed)} failed {list(run.failed.values())[:1]}",
        "2 finished",
        "PASS" if ok else "FAIL",
    )
    alone = [
        note is not None
        and note.get("count") == 1
        and note.get("cuda_visible_devices") is not None
        and telemetry.get("gpus") == [f"GPU-{note['uuid']}" if not note["uuid"].startswith("GPU-") else note["uuid"]]
        for note, telemetry in seen.values()
    ]
    shown = "; ".join(f"{(n or {}).get('cuda_visible_devices')}:{(n or {}).get('count')}" for n, _ in seen.values())
    check.row(
        "5",
        "each probe sees only its GPU (CUDA_VISIBLE_DEVICES:count)",
        shown or "no probe",
        "one each, NVML on it",
        ("PASS" if alone and all(alone) else "FAIL") if gpus else "SKIPPED",
    )
