"""Peak FLOP/s by (device, dtype), and device telemetry (NVML where present, RAPL and /proc on CPUs).

The peak table is data (`peak_flops.csv`, one source per row, dense figures), not code: a device is
recognised by the row's regular expression on its reported name. A user's `Hardware.peak_flops` overrides it.
"""

from __future__ import annotations

import csv
import functools
import operator
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from yieldgate.track.host import HostContention

__all__ = [
    "PeakFlops",
    "SLOWDOWN_REASONS",
    "Telemetry",
    "device_name",
    "dtype_name",
    "nvml_uuid",
    "peak_flops",
    "peak_table",
]


@dataclass(frozen=True)
class PeakFlops:
    """One row of the peak table: a device's dense peak at one precision, and where it comes from."""

    device: str
    dtype: str
    flops: float
    source: str


@cache
def peak_table() -> tuple[tuple[re.Pattern[str], PeakFlops], ...]:
    text = resources.files("yieldgate.track").joinpath("peak_flops.csv").read_text()
    return tuple(
        (
            re.compile(row["match"], re.IGNORECASE),
            PeakFlops(row["device"], row["dtype"], float(row["peak_flops"]), row["source"]),
        )
        for row in csv.DictReader(text.splitlines())
    )


def peak_flops(device: str, dtype: str, *, override: float | None = None) -> PeakFlops | None:
    """Peak FLOP/s of one `device` (a reported name such as "NVIDIA H100 80GB HBM3") at `dtype`.

    `override` (the manifest's `hardware.peak_flops`) wins. None when the device or precision is unknown.
    """
    if override is not None:
        return PeakFlops(device, dtype, float(override), "user override (manifest hardware.peak_flops)")
    for pattern, row in peak_table():
        if row.dtype == dtype and pattern.search(device):
            return row
    return None


def dtype_name(dtype: Any, *, tf32: bool = False) -> str:
    """`torch.bfloat16` -> "bf16", etc.; fp32 matmuls that run as TF32 are "tf32"."""
    name = str(dtype).removeprefix("torch.")
    mapping = {
        "bfloat16": "bf16",
        "float16": "fp16",
        "half": "fp16",
        "float32": "fp32",
        "float": "fp32",
        "float8_e4m3fn": "fp8",
        "float8_e5m2": "fp8",
    }
    out = mapping.get(name, name)
    return "tf32" if out == "fp32" and tf32 else out


def device_name(device: Any) -> str:
    """Reported name of a torch device: the CUDA product name, or "cpu"."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


# -- telemetry ------------------------------------------------------------------------------------------

_RAPL = Path("/sys/class/powercap")

# NVML's clock-event reasons (nvml.h `nvmlClocksEventReason*`, "clocks throttle reasons" before driver 535) that hold
# the clocks below what the work asks for. Left out: GpuIdle (0x1: nothing to run, as while a step waits for its data),
# ApplicationsClocksSetting (0x2: clocks an operator set), SyncBoost (0x10: clocks held equal across a group of GPUs)
# and DisplayClockSetting (0x100). Any bit read as throttling, an idle moment between steps counted as throttled.
SLOWDOWN_REASONS: dict[str, int] = {
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
}
SLOWDOWN_MASK = sum(SLOWDOWN_REASONS.values())
# How one reading of each GPU becomes the run's: a total only where every GPU answered (a sum over some would pass
# for the whole), else the mean, lowest, highest or any of those that did.
_TOTALS = ("device/power_w", "device/mem_used_gib", "device/pcie_tx_mb_s", "device/pcie_rx_mb_s", "energy_j")
_OVER_GPUS: dict[str, Callable[[list[float]], float]] = {
    "device/gpu_util": lambda v: sum(v) / len(v),
    "device/sm_clock_mhz": min,
    "device/temp_c": max,
    "device/throttle_reasons": lambda v: float(functools.reduce(operator.or_, (int(x) for x in v))),
}


def _energy_j(nv: Any, handle: Any) -> float:
    """The GPU's energy counter in joules (NVML counts millijoules since the driver loaded)."""
    return float(nv.nvmlDeviceGetTotalEnergyConsumption(handle)) / 1e3


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value  # bytes from nvidia-ml-py before 11.515


def nvml_uuid(index: int) -> str | None:
    """NVML's name (`GPU-<uuid>`) of torch's CUDA device `index`; None where torch cannot say. torch counts the devices
    CUDA_VISIBLE_DEVICES leaves it, NVML every GPU of the host: where a process sees only some (a campaign's probe, one
    rank of a job), the same index names another GPU."""
    import torch

    try:
        uuid = str(torch.cuda.get_device_properties(index).uuid)
    except (AssertionError, RuntimeError, AttributeError):  # no CUDA here, no such device, a torch without `uuid`
        return None
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


class Telemetry:
    """Samples device counters for the confounders a timer cannot see. Call `sample()` from a background
    thread (it may take a millisecond); it returns `device/...` extras and cumulative `energy_j`.

    NVML (the `nvidia-ml-py` package) gives GPU utilisation, power, energy, clocks, temperature, the reasons that
    slow the clocks (`SLOWDOWN_REASONS`) and PCIe traffic, each reading on its own: one a GPU does not support is
    left out, never the others with it. The GPUs are torch's devices `gpu_indices`, found in NVML by their UUID
    (`nvml_uuid`). On CPUs: RAPL package energy where the kernel exposes it readable, and this process's CPU
    utilisation from /proc, and how much the host held it back (`host.HostContention`). `sources` names what is
    read, `missing` why a source is not.
    """

    def __init__(self, gpu_indices: list[int] | None = None) -> None:
        self._cuda = gpu_indices[0] if gpu_indices else None
        self._nv: Any = None
        """The pynvml module, once imported."""
        self._handles: list[Any] = []
        self._energy0: list[float | None] = []
        self._rapl: list[tuple[Path, int]] = []
        self._rapl_last: list[int] = []
        self._rapl_total = 0.0
        self._cpu_last: tuple[float, float] | None = None
        self._host = HostContention()
        self.sources: list[str] = []
        self.missing: dict[str, str] = {}
        self.uuids: list[str] = []
        """The GPUs NVML reads, by UUID, in the order of `gpu_indices`."""
        if gpu_indices:
            self._open_nvml(gpu_indices)
        self._open_rapl()

    def _open_nvml(self, indices: list[int]) -> None:
        try:
            import pynvml
        except ImportError:
            self.missing["nvml"] = "the nvidia-ml-py package is not installed"
            return
        self._nv = pynvml
        uuids = [nvml_uuid(i) for i in indices]
        try:
            pynvml.nvmlInit()
            if None in uuids:
                if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
                    self.missing["nvml"] = (
                        "torch gives no UUID for its device, and CUDA_VISIBLE_DEVICES is set: NVML's device of the "
                        "same index may be another GPU"
                    )
                    return
                # Every GPU visible: torch's and NVML's indices name the same GPUs (on a host of one kind of GPU).
                handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
            else:
                handles = [pynvml.nvmlDeviceGetHandleByUUID(u) for u in uuids]
            self.uuids = [_text(pynvml.nvmlDeviceGetUUID(h)) for h in handles]
        except pynvml.NVMLError as exc:  # no driver, or a device NVML does not know: telemetry is optional
            self.missing["nvml"] = f"NVML: {exc}"
            return
        self._handles = handles
        self._energy0 = [self._read(functools.partial(_energy_j, pynvml, h)) for h in handles]
        self.sources.append("nvml")
        if None in self._energy0:  # older than Volta, or a virtual GPU: power without energy
            self.missing["nvml-energy"] = "a GPU has no total-energy counter"
        else:
            self.sources.append("nvml-energy")

    def _read(self, call: Callable[[], float]) -> float | None:
        """One NVML reading, or None where the GPU does not support it (NVML_ERROR_NOT_SUPPORTED and the like)."""
        try:
            return float(call())
        except self._nv.NVMLError:
            return None

    def _open_rapl(self) -> None:
        for domain in sorted(_RAPL.glob("intel-rapl:*")):
            if domain.name.count(":") != 1:  # packages only; sub-domains are inside them
                continue
            try:
                first = int((domain / "energy_uj").read_text())
                wrap = int((domain / "max_energy_range_uj").read_text())
            except (OSError, ValueError):
                continue
            self._rapl.append((domain / "energy_uj", wrap))
            self._rapl_last.append(first)
        if self._rapl:
            self.sources.append("rapl")

    def sample(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self._handles:
            out.update(self._sample_nvml())
        if self._rapl:
            for i, (path, wrap) in enumerate(self._rapl):
                try:
                    reading = int(path.read_text())
                except (OSError, ValueError):
                    continue
                delta = reading - self._rapl_last[i]
                self._rapl_total += (delta if delta >= 0 else delta + wrap) / 1e6  # counter wraps
                self._rapl_last[i] = reading
            out["energy_j"] = out.get("energy_j", 0.0) + self._rapl_total
        try:
            # resident pages x page size: this process's host memory
            pages = int(Path("/proc/self/statm").read_text().split()[1])
            out["device/rss_gib"] = pages * os.sysconf("SC_PAGE_SIZE") / 2**30
        except (OSError, ValueError, IndexError):
            pass
        if self._cuda is not None:
            import torch

            if torch.cuda.is_initialized():
                # The caching allocator's own counters: host-side, no device sync.
                out["device/mem_peak_gib"] = torch.cuda.max_memory_allocated(self._cuda) / 2**30
        cpu = os.times()
        now = time.monotonic()
        busy = cpu.user + cpu.system
        if self._cpu_last is not None and now > self._cpu_last[0]:
            out["device/cpu_util"] = 100.0 * (busy - self._cpu_last[1]) / (now - self._cpu_last[0])
        self._cpu_last = (now, busy)
        if hasattr(os, "getloadavg"):  # not on Windows
            # Every process on the host, not this one: a neighbour's load slows a run for reasons not its own.
            out["host/load_1m"] = os.getloadavg()[0]
        out.update(self._host.sample())  # run-queue wait, CPU steal, CPU count (`host.HostContention`)
        return out

    def _sample_nvml(self) -> dict[str, float]:
        """Each GPU's readings, then the run's: see `_TOTALS` and `_OVER_GPUS`."""
        gpus = [self._read_gpu(h, self._energy0[i]) for i, h in enumerate(self._handles)]
        out: dict[str, float] = {}
        for key in (*_TOTALS, *_OVER_GPUS):
            values = [g[key] for g in gpus]
            known = [v for v in values if v is not None]
            if key in _TOTALS and known and len(known) == len(values):
                out[key] = sum(known)
            elif key in _OVER_GPUS and known:
                out[key] = _OVER_GPUS[key](known)
        return out

    def _read_gpu(self, h: Any, energy0: float | None) -> dict[str, float | None]:
        nv, read = self._nv, self._read
        # "Clocks event reasons" since driver 535; the older name is deprecated.
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if reasons is None:
            reasons = nv.nvmlDeviceGetCurrentClocksThrottleReasons
        energy = read(functools.partial(_energy_j, nv, h))
        return {
            "device/gpu_util": read(lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu),
            "device/power_w": read(lambda: nv.nvmlDeviceGetPowerUsage(h) / 1e3),  # mW
            "device/mem_used_gib": read(lambda: nv.nvmlDeviceGetMemoryInfo(h).used / 2**30),
            "energy_j": None if energy is None or energy0 is None else energy - energy0,
            "device/sm_clock_mhz": read(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
            "device/temp_c": read(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            "device/throttle_reasons": read(lambda: int(reasons(h)) & SLOWDOWN_MASK),
            # KB/s over a short NVML sampling window
            "device/pcie_tx_mb_s": read(lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES) / 1e3),
            "device/pcie_rx_mb_s": read(lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES) / 1e3),
        }
