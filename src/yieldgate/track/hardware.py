"""Peak FLOP/s by (device, dtype), and device telemetry (NVML where present, RAPL and /proc on CPUs).

The peak table is data (`peak_flops.csv`, one source per row, dense figures), not code: a device is
recognised by the row's regular expression on its reported name. A user's `Hardware.peak_flops` overrides it.
"""

from __future__ import annotations

import csv
import os
import re
import time
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from yieldgate.track.host import HostContention

__all__ = ["PeakFlops", "peak_flops", "peak_table", "Telemetry", "device_name", "dtype_name"]


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


class Telemetry:
    """Samples device counters for the confounders a timer cannot see. Call `sample()` from a background
    thread (it may take a millisecond); it returns `device/...` extras and cumulative `energy_j`.

    NVML (the `nvidia-ml-py` package) gives GPU utilisation, power, energy, clocks, temperature, throttle
    reasons and PCIe traffic; on CPUs, RAPL package energy where the kernel exposes it readable, and this
    process's CPU utilisation from /proc, and how much the host held it back (`host.HostContention`).
    """

    def __init__(self, gpu_indices: list[int] | None = None) -> None:
        self._cuda = gpu_indices[0] if gpu_indices else None
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._energy0: list[float] = []
        self._rapl: list[tuple[Path, int]] = []
        self._rapl_last: list[int] = []
        self._rapl_total = 0.0
        self._cpu_last: tuple[float, float] | None = None
        self._host = HostContention()
        self.sources: list[str] = []
        if gpu_indices:
            self._open_nvml(gpu_indices)
        self._open_rapl()

    def _open_nvml(self, indices: list[int]) -> None:
        try:
            import pynvml
        except ImportError:
            return
        try:
            pynvml.nvmlInit()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
            self._energy0 = [pynvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1e3 for h in self._handles]
        except pynvml.NVMLError:  # no driver, or a GPU too old for energy counters: telemetry is optional
            self._handles = []
            return
        self._nvml = pynvml
        self.sources.append("nvml")

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
        if self._nvml is not None:
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
        nv = self._nvml
        sums = {
            "device/gpu_util": 0.0,
            "device/power_w": 0.0,
            "device/mem_used_gib": 0.0,
            "device/pcie_tx_mb_s": 0.0,
            "device/pcie_rx_mb_s": 0.0,
        }
        energy = 0.0
        clocks, temps, throttle = [], [], 0
        for i, h in enumerate(self._handles):
            try:
                sums["device/gpu_util"] += nv.nvmlDeviceGetUtilizationRates(h).gpu
                sums["device/power_w"] += nv.nvmlDeviceGetPowerUsage(h) / 1e3
                sums["device/mem_used_gib"] += nv.nvmlDeviceGetMemoryInfo(h).used / 2**30
                energy += nv.nvmlDeviceGetTotalEnergyConsumption(h) / 1e3 - self._energy0[i]
                clocks.append(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
                temps.append(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
                throttle |= nv.nvmlDeviceGetCurrentClocksThrottleReasons(h)
                # KB/s over a short NVML sampling window
                sums["device/pcie_tx_mb_s"] += nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES) / 1e3
                sums["device/pcie_rx_mb_s"] += nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES) / 1e3
            except nv.NVMLError:
                continue
        n = max(1, len(self._handles))
        out = dict(sums)
        out["device/gpu_util"] /= n  # mean over this process's GPUs; power, memory and PCIe are totals
        if clocks:
            out["device/sm_clock_mhz"] = min(clocks)
            out["device/temp_c"] = max(temps)
            out["device/throttle_reasons"] = float(throttle)
        out["energy_j"] = energy
        return out
