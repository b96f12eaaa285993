"""A stand-in for the `pynvml` module (nvidia-ml-py) over GPUs described as data, for testing on a machine with no
GPU what `track.hardware.Telemetry` does with NVML's answers: which GPU it reads, in what units, what it records when
a GPU does not support a reading. Only the driver is fake; every computation on its answers is the Tracker's own.

The function names, constants and units are nvidia-ml-py's (`nvmlDeviceGetPowerUsage` in milliwatts,
`nvmlDeviceGetTotalEnergyConsumption` in millijoules, `nvmlDeviceGetPcieThroughput` in KB/s).
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED
NOT_FOUND = 6  # NVML_ERROR_NOT_FOUND
READINGS = (
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetPcieThroughput",
)
"""The per-GPU readings Telemetry takes; a `FakeGpu` may refuse any of them (`unsupported`)."""


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class FakeGpu:
    """One GPU as NVML would report it."""

    uuid: str
    power_mw: int = 300_000
    energy_mj: int = 1_000_000
    util: int = 90
    mem_used: int = 40 * 2**30
    sm_clock_mhz: int = 1980
    temp_c: int = 60
    reasons: int = 0
    pcie_kb_s: int = 2_000
    unsupported: set[str] = field(default_factory=set)
    """Names in READINGS this GPU answers with NVML_ERROR_NOT_SUPPORTED."""


def module(gpus: list[FakeGpu]) -> types.ModuleType:
    """A `pynvml` module whose devices are `gpus`, in NVML's order (index 0 first)."""
    nv = types.ModuleType("pynvml")

    def reading(name: str, value: Any) -> Any:
        def call(h: FakeGpu, *_: Any) -> Any:
            if name in h.unsupported:
                raise NVMLError(NOT_SUPPORTED)
            return value(h)

        return call

    def by_uuid(uuid: str | bytes) -> FakeGpu:
        text = uuid.decode() if isinstance(uuid, bytes) else uuid
        for gpu in gpus:
            if gpu.uuid == text:
                return gpu
        raise NVMLError(NOT_FOUND)

    event_reasons = "nvmlDeviceGetCurrentClocksEventReasons"
    functions: dict[str, Any] = {
        "nvmlInit": lambda: None,
        "nvmlDeviceGetHandleByIndex": lambda i: gpus[i],
        "nvmlDeviceGetHandleByUUID": by_uuid,
        "nvmlDeviceGetUUID": lambda h: h.uuid,
        "nvmlDeviceGetUtilizationRates": reading("nvmlDeviceGetUtilizationRates", lambda h: _Util(h.util)),
        "nvmlDeviceGetPowerUsage": reading("nvmlDeviceGetPowerUsage", lambda h: h.power_mw),
        "nvmlDeviceGetMemoryInfo": reading("nvmlDeviceGetMemoryInfo", lambda h: _Memory(h.mem_used)),
        "nvmlDeviceGetTotalEnergyConsumption": reading("nvmlDeviceGetTotalEnergyConsumption", lambda h: h.energy_mj),
        "nvmlDeviceGetClockInfo": reading("nvmlDeviceGetClockInfo", lambda h: h.sm_clock_mhz),
        "nvmlDeviceGetTemperature": reading("nvmlDeviceGetTemperature", lambda h: h.temp_c),
        event_reasons: reading(event_reasons, lambda h: h.reasons),
        "nvmlDeviceGetPcieThroughput": reading("nvmlDeviceGetPcieThroughput", lambda h: h.pcie_kb_s),
        "NVMLError": NVMLError,
        "NVML_CLOCK_SM": 1,
        "NVML_TEMPERATURE_GPU": 0,
        "NVML_PCIE_UTIL_TX_BYTES": 0,
        "NVML_PCIE_UTIL_RX_BYTES": 1,
    }
    for name, value in functions.items():
        setattr(nv, name, value)
    return nv


@dataclass
class _Util:
    gpu: int


@dataclass
class _Memory:
    used: int
