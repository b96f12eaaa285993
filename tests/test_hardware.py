from __future__ import annotations

import os

import pytest
import torch

from yieldgate.track.hardware import Telemetry, dtype_name, peak_flops, peak_table


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
