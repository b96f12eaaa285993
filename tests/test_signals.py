from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tests.support.helpers import CFG, batch
from yieldgate.ledger import Ledger
from yieldgate.probe.model import GPT
from yieldgate.track import Tracker, TrackerConfig
from yieldgate.track.signals import (
    GradientSignals,
    activation_entropy,
    gns_estimate,
    layer_groups,
    loss_variance,
    sample_layers,
)
from yieldgate.track.tracker import matmul_params


def test_gns_formulas_exactly():
    est = gns_estimate(torch.tensor([5.0]), torch.tensor([2.0]), b=1.0, big_b=4.0)
    # |G|^2 = (4*2 - 1*5)/3 = 1; tr(Σ) = (5 - 2)/(1 - 1/4) = 4
    assert est.g2.tolist() == [1.0] and est.trace.tolist() == [4.0]
    with pytest.raises(ValueError, match="0 < b < B"):
        gns_estimate(torch.tensor(1.0), torch.tensor(1.0), b=4.0, big_b=4.0)


def test_layers_group_parameters_and_tied_weights_count_once():
    model = GPT(CFG)
    names, params, layer_of = layer_groups(model)
    assert names[0] == "tok" and "head" not in names  # the head's weight is the token embedding's
    assert len(params) == len({id(p) for p in model.parameters()})
    assert max(layer_of) == len(names) - 1
    assert matmul_params(model) == model.non_embedding_params()


@pytest.mark.slow
def test_gradient_hooks_match_direct_norms_and_undo_clipping(text):
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sig = GradientSignals(model, opt, sampled_microbatches=3)
    rng = np.random.default_rng(0)
    micro = [batch(text, rng, 4) for _ in range(3)]
    grads = []
    for x, y in micro:  # each microbatch's own gradient, by hand
        model.zero_grad()
        model(x, y)[1].backward()
        grads.append([p.grad.clone() for p in sig.params])
    sig.collect()  # discard what the hooks saw during the manual pass
    model.zero_grad()
    for x, y in micro:
        (model(x, y)[1] / 3).backward()
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)  # clips hard
    sig.want_update_ratio(True)
    before = [p.detach().clone() for p in sig.params]
    opt.step()
    out = sig.collect(grad_norm=total)
    assert out["microbatches"] == 3 and not out["skipped"]
    idx = torch.tensor(sig.layer_of)
    small = torch.zeros(len(sig.names)).index_add_(
        0, idx, torch.stack([sum(g[i].square().sum() for g in grads) / 3 for i in range(len(sig.params))])
    )
    mean_grad = [sum(g[i] for g in grads) / 3 for i in range(len(sig.params))]
    big = torch.zeros(len(sig.names)).index_add_(0, idx, torch.stack([g.square().sum() for g in mean_grad]))
    torch.testing.assert_close(out["small_sq"], small, rtol=1e-4, atol=1e-10)
    torch.testing.assert_close(out["big_sq"], big, rtol=1e-3, atol=1e-10)  # pre-clip, though clipped 100x
    delta = torch.zeros(len(sig.names)).index_add_(
        0, idx, torch.stack([(p.detach() - b).square().sum() for p, b in zip(sig.params, before, strict=True)])
    )
    weight = torch.zeros(len(sig.names)).index_add_(0, idx, torch.stack([b.square().sum() for b in before]))
    torch.testing.assert_close(out["update_ratio"], delta.sqrt() / weight.sqrt(), rtol=1e-4, atol=1e-12)
    # Measuring one microbatch of three: the first one's squared norms, unscaled by k^2.
    sig.sampled_microbatches = 1
    model.zero_grad()
    model(*micro[0])[1].backward()
    first = torch.zeros(len(sig.names)).index_add_(0, idx, torch.stack([p.grad.square().sum() for p in sig.params]))
    sig.collect()
    model.zero_grad()
    for x, y in micro:
        (model(x, y)[1] / 3).backward()
    torch.testing.assert_close(sig.collect()["small_sq"], first, rtol=1e-4, atol=1e-10)
    sig.remove()


@pytest.mark.slow
def test_a_loss_summed_over_microbatches_gives_the_mean_gradients_norm(text):
    """loss_averaged=False: each microbatch's loss is not divided by k, so the accumulated gradient is k times the
    mean gradient; |g_B|^2 (per layer and in total, also from a passed pre-clip norm) is that of the mean."""
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    sig = GradientSignals(model, opt, loss_averaged=False)
    rng = np.random.default_rng(0)
    micro = [batch(text, rng, 4) for _ in range(3)]
    grads = []
    for x, y in micro:
        model.zero_grad()
        model(x, y)[1].backward()
        grads.append([p.grad.clone() for p in sig.params])
    sig.collect()
    model.zero_grad()
    for x, y in micro:
        model(x, y)[1].backward()  # summed: not divided by 3
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
    opt.step()
    out = sig.collect(grad_norm=total)
    idx = torch.tensor(sig.layer_of)
    mean_grad = [sum(g[i] for g in grads) / 3 for i in range(len(sig.params))]
    big = torch.zeros(len(sig.names)).index_add_(0, idx, torch.stack([g.square().sum() for g in mean_grad]))
    small = torch.zeros(len(sig.names)).index_add_(
        0, idx, torch.stack([sum(g[i].square().sum() for g in grads) / 3 for i in range(len(sig.params))])
    )
    torch.testing.assert_close(out["big_sq"], big, rtol=1e-3, atol=1e-10)
    torch.testing.assert_close(out["big_total"], big.sum(), rtol=1e-3, atol=1e-10)
    torch.testing.assert_close(out["small_sq"], small, rtol=1e-4, atol=1e-10)
    sig.remove()


@pytest.mark.slow
@pytest.mark.parametrize("loss_averaged", [True, False])
def test_gns_agrees_with_brute_force_at_frozen_weights(text, tmp_path, loss_averaged):
    """B_simple (in tokens) from 4 microbatches per step, EMA-smoothed, vs the sample mean and variance of many
    independent small-batch gradients at the same weights (McCandlish et al. 2018); with the loss averaged over
    the microbatches (divided by 4) and summed (not divided: the accumulated gradient is 4x the mean)."""
    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = GPT(CFG)
    rng = np.random.default_rng(0)
    warm = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(60):  # a real, partly trained state, not the random init
        x, y = batch(text, rng, 16)
        warm.zero_grad()
        model(x, y)[1].backward()
        warm.step()
    seqs = 4
    b_tokens = seqs * CFG.context
    params = [p for p in model.parameters()]
    flat = []
    for _ in range(600):
        x, y = batch(text, rng, seqs)
        model.zero_grad()
        model(x, y)[1].backward()
        flat.append(torch.cat([p.grad.flatten() for p in params]).double())
    g = torch.stack(flat)
    mean, var = g.mean(0), g.var(0)
    trace_cov = var.sum().item()  # tr Cov(g_b) = tr(Σ)/b
    g2 = mean.square().sum().item() - trace_cov / len(flat)  # unbiased |G|^2
    brute = b_tokens * trace_cov / g2

    frozen = torch.optim.SGD(model.parameters(), lr=0.0)
    path = tmp_path / "gns.db"
    with Tracker(
        "gns",
        ledger=path,
        signals="full",
        model=model,
        optimizer=frozen,
        config=TrackerConfig(gns_ema=0.99, gns_every=1, loss_averaged=loss_averaged),
    ) as tr:
        for _ in range(300):
            frozen.zero_grad()
            for _ in range(4):
                x, y = batch(text, rng, seqs)
                (model(x, y)[1] / (4 if loss_averaged else 1)).backward()
            frozen.step()
            tr.step(tokens=4 * b_tokens, samples=4 * seqs)
    with Ledger(path, readonly=True) as led:
        gns = led.extras("gns", ["signals/gns"])["value"].to_numpy()
    assert len(gns) == 300
    assert abs(gns[-1] / brute - 1) < 0.25, (gns[-1], brute)


@pytest.mark.slow
def test_gns_is_measured_every_gns_every_steps_and_on_every_layer_step(text, tmp_path):
    """The default cadence: the microbatches' norms (one fused pass per backward, the costly part) are taken on every
    5th step and on every layer step (the per-layer GNS), and only there; the steps between are counted only."""
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    path = tmp_path / "cadence.db"
    with Tracker(
        "cadence",
        ledger=path,
        signals="full",
        model=model,
        optimizer=opt,
        config=TrackerConfig(gns_every=5, layer_every=4),
    ) as tr:
        grads = tr._grad
        passes = []  # the optimizer step's pass over the accumulated gradients, by step

        def layer_sq(tensors, real=grads._layer_sq):
            if tensors and tensors[0] is grads.params[0].grad:
                passes.append(tr._step + 1)
            return real(tensors)

        grads._layer_sq = layer_sq
        for _ in range(20):
            opt.zero_grad()
            for _ in range(2):
                x, y = batch(text, rng, 2)
                (model(x, y)[1] / 2).backward()
            opt.step()
            tr.step(tokens=2 * 2 * CFG.context, samples=4)
    with Ledger(path, readonly=True) as led:
        gns = led.extras("cadence")
    assert gns[gns["key"] == "signals/gns"]["step"].tolist() == [4, 5, 8, 10, 12, 15, 16, 20]
    # No pre-clip norm is passed here, so the GNS steps need |g_B|^2 from the gradients too; the steps between do not.
    assert passes == [4, 5, 8, 10, 12, 15, 16, 20]
    layer_key = next(k for k in gns["key"].unique() if k.startswith("signals/gns/"))
    assert gns[gns["key"] == layer_key]["step"].tolist() == [4, 8, 12, 16, 20]
    assert np.isfinite(gns[gns["key"] == "signals/gns"]["value"]).all()


def test_activation_entropy_hooks_are_removed(text):
    model = GPT(CFG)
    layers = sample_layers(model, 4)
    assert list(layers) == ["blocks.0", "blocks.1"]
    x, y = batch(text, np.random.default_rng(0), 2)
    with activation_entropy(layers) as stores:
        model(x, y)
    assert all(len(v) == 1 for v in stores.values())
    value = stores["blocks.0"][0].item()
    assert 0 < value <= math.log(CFG.width) + 1e-6
    assert all(not m._forward_hooks for m in layers.values())


def test_activation_entropy_is_what_its_documentation_says_scale_included():
    """The entropy of softmax over the output features: ln(features) for equal features, and it falls when the same
    output is only scaled up (not scale-invariant), as the docstring, the Tracker page and the names table say."""
    from yieldgate.names import EXTRA_KEYS

    scale = nn.Identity()
    h = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(0))
    values = []
    for c in (0.0, 1.0, 10.0):
        with activation_entropy({"x": scale}) as stores:
            scale(c * h)
        values.append(stores["x"][0].item())
    p = torch.softmax(h, -1)
    assert values[0] == pytest.approx(math.log(16))
    assert values[1] == pytest.approx(float(-(p * p.log()).sum(-1).mean()), rel=1e-6)
    assert values[0] > values[1] > values[2]  # the same features, only larger: lower entropy
    assert "falls with scale" in EXTRA_KEYS["signals/act_entropy/<layer>"]
    assert "not scale-invariant" in activation_entropy.__doc__


def test_sample_layers_without_blocks():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    assert list(sample_layers(model, 2)) == ["0", "2"]


def test_loss_variance_removes_the_trend():
    t = np.arange(200, dtype=float)
    smooth = 5 - 0.01 * t
    assert loss_variance(smooth) == pytest.approx(0.0, abs=1e-20)
    noisy = smooth + np.random.default_rng(0).normal(0, 0.1, size=200)
    assert loss_variance(noisy) == pytest.approx(0.01, rel=0.25)
    assert math.isnan(loss_variance(np.array([1.0, np.nan])))


@contextlib.contextmanager
def _host_data() -> Iterator[list[int]]:
    """Counts, into the list it yields, the tensors made from host data on this thread (`aten::lift_fresh`:
    `torch.tensor` or `as_tensor` of a number or a list, indexing by a Python list). On a GPU each is a copy from
    pageable host memory, which synchronises the training thread with the device: the CPU-side mark of a sync that
    `torch.cuda.set_sync_debug_mode` would name. Read off torch's profiler (a dispatch mode imports dynamo: 3 s)."""
    found: list[int] = []
    with torch.autograd.profiler.profile() as prof:
        yield found
    found.append(sum(e.name == "aten::lift_fresh" for e in prof.function_events))


@pytest.mark.parametrize("host_norm", [False, True], ids=["tensor norm", "float norm"])
def test_the_gradient_hooks_make_no_tensor_from_host_data(host_norm):
    """The hooks and `collect` alone, on a model with a parameter the step leaves without a gradient, the pre-clip
    norm a tensor or a Python float: no tensor made from host data (the fast variant of the Tracker's test below)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    signals = GradientSignals(model, opt)
    signals.want_update_ratio(True)
    inputs = torch.randn(2, 2, 4)
    with _host_data() as made:
        for x in inputs:  # two microbatches
            model[0](x).square().mean().backward()  # model[1] unused: its gradients stay None
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        out = signals.collect(norm.item() if host_norm else norm)
    assert made == [0]
    assert signals.names == ["0", "1"]  # one layer each, weight and bias
    assert out["small_sq"][1].item() == 0.0 and out["update_ratio"][1].item() == 0.0
    assert float(out["big_total"]) == pytest.approx(float(norm) ** 2, rel=1e-5)


@pytest.mark.slow  # a Tracker and 18 training steps: about a second
@pytest.mark.parametrize("host_norm", [False, True], ids=["tensor norm", "float norm"])
def test_the_learning_signals_make_no_tensor_from_host_data(tmp_path, host_norm):
    """A parameter the step leaves without a gradient, and a pre-clip norm passed as a Python float: the full signals
    made an index tensor from a Python list at every backward pass, and a tensor of the float at every step (two
    syncs a step on a GPU). Counted after the first step over GNS, layer, update-ratio and entropy steps, the tracked
    loop makes as many tensors from host data as the same loop untracked: none."""
    counts = []
    for tracked in (False, True):
        torch.manual_seed(0)
        model = GPT(CFG)
        model.unused = nn.Linear(2, 2)  # its gradient stays None
        opt = torch.optim.SGD(model.parameters(), lr=1e-2)
        ids = torch.randint(0, CFG.vocab_size, (4, 17))
        cfg = TrackerConfig(layer_every=3, gns_every=2, entropy_every=4)
        tr = Tracker("h", ledger=tmp_path / f"{tracked}.db", signals="full", model=model, optimizer=opt, config=cfg)
        made = _host_data()
        for step in range(9):
            if step == 1:
                counted = made.__enter__()
            opt.zero_grad()
            for chunk in ids.chunk(2):
                _, loss = model(chunk[:, :-1], chunk[:, 1:])
                (loss / 2).backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if tracked:
                tr.step(tokens=64, loss=loss.detach(), grad_norm=float(norm) if host_norm else norm)
        made.__exit__(None, None, None)
        tr.close()
        counts += counted
        assert tr.faults == 0
    assert counts == [0, 0]


@settings(max_examples=40, deadline=None)
@given(absent=st.lists(st.booleans(), min_size=1, max_size=12), seed=st.integers(0, 2**16))
def test_per_layer_squared_norms_leave_out_absent_tensors_without_host_data(absent, seed):
    """`_layer_sq` over any pattern of absent gradients: each layer's sum of its present tensors' squared norms, the
    absent ones adding zero; and no tensor made from host data on the way."""
    torch.manual_seed(seed)
    model = nn.Sequential(*(nn.Linear(3, 3, bias=False) for _ in absent))
    signals = GradientSignals(model, None)
    tensors = [None if gone else torch.randn(3, 3) for gone in absent]
    with _host_data() as made:
        got = signals._layer_sq(tensors)
    want = [0.0 if t is None else float(t.square().sum()) for t in tensors]
    assert made == [0]
    assert got.tolist() == pytest.approx(want, rel=1e-5)


@pytest.mark.slow  # torch.compile's first import and trace: a few seconds
def test_a_compiled_model_s_missing_activation_entropy_is_said_not_left_silent(tmp_path):
    """torch.compile runs no module hook added after it compiled: the entropy hooks, armed for one step in
    `entropy_every`, never ran and no entropy was recorded, without a word. The run now says why (its `unmeasured`
    meta), while the gradient signals, hooked on the parameters and the optimizer, are still recorded."""
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    compiled = torch.compile(model, backend="eager")  # dynamo alone: the hooks' fate is decided there, not in inductor
    ids = torch.randint(0, CFG.vocab_size, (4, 17))
    cfg = TrackerConfig(entropy_every=3, layer_every=3)
    with Tracker("c", ledger=tmp_path / "c.db", signals="full", model=model, optimizer=opt, config=cfg) as tr:
        for _ in range(7):
            opt.zero_grad()
            for chunk in ids.chunk(2):
                _, loss = compiled(chunk[:, :-1], chunk[:, 1:])
                (loss / 2).backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            tr.step(tokens=64, loss=loss.detach(), grad_norm=norm)
    with Ledger(tmp_path / "c.db", readonly=True) as led:
        keys = set(led.extras("c")["key"])
        why = led.meta("c")["unmeasured"]
    assert not any(k.startswith("signals/act_entropy") for k in keys)
    assert "signals/gns" in keys and "signals/grad_norm/blocks.0.qkv" in keys
    assert "torch.compile" in why["signals/act_entropy"]
