from __future__ import annotations

import pytest

from yieldgate.track.throughput import Throughput, flops_per_token, mfu


def test_rates_over_the_window_skip_warmup():
    tp = Throughput(window=3, skip=1)
    tp.update(time=0.0, tokens=0, samples=0)  # warm-up: not counted
    assert tp.compute() == {}
    tp.update(time=10.0, tokens=100, samples=1)
    assert tp.compute() == {}
    tp.update(time=11.0, tokens=300, samples=3)
    assert tp.compute() == {"tokens_per_s": 200.0, "samples_per_s": 2.0}
    tp.update(time=12.0, tokens=400, samples=4)
    tp.update(time=14.0, tokens=1000, samples=10)
    # window of 3: points at t = 11, 12, 14
    assert tp.compute() == {"tokens_per_s": 700 / 3, "samples_per_s": 7 / 3}
    tp.reset()
    assert tp.compute() == {}


def test_counters_going_backwards_are_refused_with_the_values():
    tp = Throughput(window=4, skip=0)
    tp.update(time=1.0, tokens=100, samples=1)
    with pytest.raises(ValueError, match="tokens 100 -> 50"):
        tp.update(time=2.0, tokens=50, samples=2)
    with pytest.raises(ValueError, match="window must be >= 2"):
        Throughput(window=1)


def test_palm_540b_published_mfu():
    # PaLM (Chowdhery et al. 2022), appendix B: 540.35B parameters, 118 layers, 48 heads of 256, T = 2048,
    # 238.3k tokens/s on 6,144 TPU v4 chips at 275 TFLOP/s (bf16) -> 46.2% MFU, 45.7% without attention.
    shape = {"non_embedding_params": 540.35e9, "layers": 118, "heads": 48, "head_dim": 256, "context": 2048}
    with_attn = mfu(
        tokens_per_s=238.3e3, flops_per_token=flops_per_token(**shape), peak_flops=275e12, devices=6144, dtype="bf16"
    )
    without = mfu(
        tokens_per_s=238.3e3,
        flops_per_token=flops_per_token(**shape, attention=False),
        peak_flops=275e12,
        devices=6144,
        dtype="bf16",
        attention=False,
    )
    assert round(with_attn.value * 100, 1) == 46.2
    assert round(without.value * 100, 1) == 45.7
    assert with_attn.flag == "ok" and with_attn.formula.startswith("6N + 12*L*H*Q*T")


def test_flops_per_token_formula_exactly():
    assert (
        flops_per_token(non_embedding_params=1000, layers=2, heads=4, head_dim=8, context=16)
        == 6000 + 12 * 2 * 4 * 8 * 16
    )
    assert (
        flops_per_token(non_embedding_params=1000, layers=2, heads=4, head_dim=8, context=16, attention=False) == 6000
    )


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"peak_flops": None}, "unknown_device"),
        ({"flops_per_token": None}, "unknown_model"),
        ({"architecture": "mamba"}, "not_transformer"),
        ({"tokens_per_s": 1e12}, "impossible"),
    ],
)
def test_mfu_is_flagged_not_printed_when_it_would_mislead(kwargs, flag):
    args = {"tokens_per_s": 1000.0, "flops_per_token": 1e9, "peak_flops": 1e14, "devices": 1} | kwargs
    result = mfu(**args)
    assert result.value is None and result.flag == flag
