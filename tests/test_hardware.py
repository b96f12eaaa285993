from __future__ import annotations

import os
import sys
import types
import uuid
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import fake_nvml
from tests.support.fake_nvml import FakeGpu
from yieldgate.track import hardware
from yieldgate.track.hardware import SLOWDOWN_REASONS, Telemetry, dtype_name, peak_flops, peak_table


@pytest.mark.parametrize(
    ("name", "dtype", "flops"),
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 9.894e14),
        ("NVIDIA H100 PCIe", "bf16", 7.56e14),
        ("NVIDIA H200", "fp8", 1.9789e15),
        ("NVIDIA A100-SXM4-80GB", "tf32", 1.56e14),
        ("NVIDIA L4", "fp16", 1.21e14),
        ("Tesla V100-SXM2-16GB", "fp16", 1.25e14),
        ("TPU v4", "bf16", 2.75e14),
    ],
)
def test_peak_lookup_by_reported_name(name, dtype, flops):
    row = peak_flops(name, dtype)
    assert row is not None and row.flops == flops and row.source


def test_unknown_device_or_precision_and_the_override():
    assert peak_flops("cpu", "fp32") is None
    assert peak_flops("NVIDIA H100 PCIe", "int4") is None
    row = peak_flops("cpu", "fp32", override=1.5e12)
    assert row.flops == 1.5e12 and "override" in row.source


def test_every_row_has_a_source_and_a_known_dtype():
    for _, row in peak_table():
        assert row.source and row.flops > 0 and row.dtype in {"fp8", "bf16", "fp16", "tf32", "fp32"}


def test_dtype_names():
    assert dtype_name(torch.bfloat16) == "bf16"
    assert dtype_name(torch.float16) == "fp16"
    assert dtype_name(torch.float32) == "fp32"
    assert dtype_name(torch.float32, tf32=True) == "tf32"


def test_telemetry_on_a_cpu_machine_samples_without_failing():
    tel = Telemetry()
    tel.sample()
    sample = tel.sample()
    assert "device/cpu_util" in sample and sample["device/cpu_util"] >= 0
    assert sample["host/load_1m"] == pytest.approx(os.getloadavg()[0], abs=2.0)  # the host's, sampled a moment apart
    assert 0 < sample["device/rss_gib"] < 64
    assert ("energy_j" in sample) == ("rapl" in tel.sources)


# -- NVML, through a stand-in driver (tests/support/fake_nvml.py): the GPU read, the units, what is left out --------

ALL_GPUS = [f"GPU-{i:08x}-0000-0000-0000-000000000000" for i in range(3)]


@pytest.fixture
def nvml(monkeypatch):
    """Install a fake `pynvml` over the GPUs given; torch's device i is `visible[i]` (its UUID, as torch reports it:
    without the `GPU-` prefix). No RAPL, so `energy_j` is the GPUs' alone."""

    def install(gpus: list[FakeGpu], visible: list[str] | None) -> None:
        monkeypatch.setitem(sys.modules, "pynvml", fake_nvml.module(gpus))
        monkeypatch.setattr(hardware, "_RAPL", Path("/nonexistent/powercap"))
        if visible is None:  # a torch that cannot say (no CUDA, or no `uuid` on its device properties)
            props = lambda i: (_ for _ in ()).throw(AssertionError("Torch not compiled with CUDA enabled"))  # noqa: E731
        else:
            props = lambda i: types.SimpleNamespace(uuid=uuid.UUID(visible[i].removeprefix("GPU-")))  # noqa: E731
        monkeypatch.setattr(torch.cuda, "get_device_properties", props)

    return install


def test_nvml_reads_the_gpu_torch_sees_not_nvml_s_gpu_of_the_same_index(nvml, monkeypatch):
    """A probe given GPU 2 alone (CUDA_VISIBLE_DEVICES=2) is torch's device 0; NVML's device 0 is another GPU, whose
    power and energy were recorded as the probe's."""
    gpus = [FakeGpu(ALL_GPUS[i], power_mw=100_000 * (i + 1), energy_mj=10_000 * (i + 1)) for i in range(3)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    nvml(gpus, visible=[ALL_GPUS[2]])
    tel = Telemetry([0])
    assert tel.uuids == [ALL_GPUS[2]] and tel.sources == ["nvml", "nvml-energy"]
    gpus[2].energy_mj += 4_500
    sample = tel.sample()
    assert sample["device/power_w"] == 300.0
    assert sample["energy_j"] == 4.5  # joules since the Telemetry opened, of GPU 2 alone


def test_without_torch_s_uuid_nvml_is_read_by_index_only_when_every_gpu_is_visible(nvml, monkeypatch):
    gpus = [FakeGpu(u, power_mw=100_000 * (i + 1)) for i, u in enumerate(ALL_GPUS)]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml(gpus, visible=None)
    assert Telemetry([1]).sample()["device/power_w"] == 200.0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,1")
    tel = Telemetry([0])
    assert "nvml" not in tel.sources and "CUDA_VISIBLE_DEVICES" in tel.missing["nvml"]
    assert "device/power_w" not in tel.sample()


def test_the_slowdown_reasons_are_recorded_and_idle_or_set_clocks_are_not(nvml):
    """NVML reports GpuIdle (0x1) whenever the GPU waits, ApplicationsClocksSetting (0x2) on GPUs whose clocks an
    operator set: neither slows the work, and both read as throttling before."""
    gpus = [FakeGpu(ALL_GPUS[0])]
    nvml(gpus, visible=ALL_GPUS[:1])
    tel = Telemetry([0])
    recorded = {}
    for reasons in (0x0, 0x1, 0x2, 0x1 | 0x2 | 0x10 | 0x100, 0x4, 0x1 | 0x4, 0x20, 0x40 | 0x8, 0x80):
        gpus[0].reasons = reasons
        recorded[reasons] = tel.sample()["device/throttle_reasons"]
    assert [r for r, bits in recorded.items() if bits] == [0x4, 0x1 | 0x4, 0x20, 0x40 | 0x8, 0x80]
    assert recorded[0x1 | 0x4] == 0x4 and recorded[0x40 | 0x8] == 0x48
    assert set(SLOWDOWN_REASONS.values()) == {0x4, 0x8, 0x20, 0x40, 0x80}


SUMMED = ("device/power_w", "device/mem_used_gib", "device/pcie_tx_mb_s", "device/pcie_rx_mb_s", "energy_j")
READ_BY = {
    "device/gpu_util": "nvmlDeviceGetUtilizationRates",
    "device/power_w": "nvmlDeviceGetPowerUsage",
    "device/mem_used_gib": "nvmlDeviceGetMemoryInfo",
    "energy_j": "nvmlDeviceGetTotalEnergyConsumption",
    "device/sm_clock_mhz": "nvmlDeviceGetClockInfo",
    "device/temp_c": "nvmlDeviceGetTemperature",
    "device/throttle_reasons": "nvmlDeviceGetCurrentClocksEventReasons",
    "device/pcie_tx_mb_s": "nvmlDeviceGetPcieThroughput",
    "device/pcie_rx_mb_s": "nvmlDeviceGetPcieThroughput",
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    refused=st.lists(st.sets(st.sampled_from(fake_nvml.READINGS)), min_size=1, max_size=3),
    power=st.lists(st.integers(0, 700_000), min_size=3, max_size=3),
    clocks=st.lists(st.integers(200, 2000), min_size=3, max_size=3),
)
def test_a_reading_a_gpu_does_not_support_leaves_out_that_reading_alone(nvml, refused, power, clocks):
    """Each reading stands alone: one a GPU refuses (a virtual GPU with no PCIe counters, an old one with no energy
    counter) is left out; before, the first refusal dropped the GPU's later readings, and a missing energy counter
    switched NVML off whole. A total (power, memory, PCIe, energy) is recorded only when every GPU gave its part; a
    mean, lowest or highest over the GPUs that answered."""
    gpus = [
        FakeGpu(ALL_GPUS[i], power_mw=power[i], sm_clock_mhz=clocks[i], temp_c=50 + i, unsupported=no)
        for i, no in enumerate(refused)
    ]
    nvml(gpus, visible=ALL_GPUS[: len(gpus)])
    sample = Telemetry(list(range(len(gpus)))).sample()
    for key, call in READ_BY.items():
        answered = [g for g in gpus if call not in g.unsupported]
        present = len(answered) == len(gpus) if key in SUMMED else bool(answered)
        assert (key in sample) == present, (key, refused)
    answered = [g for g in gpus if "nvmlDeviceGetPowerUsage" not in g.unsupported]
    if len(answered) == len(gpus):
        assert sample["device/power_w"] == pytest.approx(sum(power[: len(gpus)]) / 1e3)
    clocked = [g.sm_clock_mhz for g in gpus if "nvmlDeviceGetClockInfo" not in g.unsupported]
    if clocked:
        assert sample["device/sm_clock_mhz"] == min(clocked)
    if "energy_j" in sample:
        assert sample["energy_j"] == 0.0  # no energy spent since the Telemetry opened
