"""The writer's pure part, without a thread or a ledger: a packet in, the step records' columns out, every value
worked out by hand below."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from yieldgate.ledger import EvalRecord
from yieldgate.manifest import parse_manifest
from yieldgate.track.config import TrackerConfig
from yieldgate.track.derive import Derivation, Frame, Start, clipped, cost_usd, counters, joined, totals
from yieldgate.track.packet import Pending, StepRow, TensorRef, Timer

MANIFEST = parse_manifest(
    {
        "hardware": {"price_per_device_hour": 3.6, "device_count": 2},
        "optimisation": {"grad_clip": 1.0},
        "evals": {"name": "core", "version": "2"},
    },
    origin="test",
)
# A run resumed at step 10 with 1000 tokens, 10 samples and 100 s behind it; the Tracker's clock read 50.0 then.
START = Start(step=10, tokens=1000.0, samples=10.0, wall_s=100.0)


def derivation(faults: list[str] | None = None, *, full_signals: bool = True, **config) -> Derivation:
    config = {"throughput_window": 3, "throughput_skip": 0, "loss_var_window": 3, "repeat_window": 4, **config}
    return Derivation(
        TrackerConfig(**config),
        start=START,
        t0=50.0,
        manifest=MANIFEST,
        world=1,
        layer_names=("emb", "head"),
        full_signals=full_signals,
        mfu=lambda rate: rate / 1000.0,
        on_fault=lambda where, exc: (faults if faults is not None else []).append(str(exc)),
    )


def packet(later: int = 0):
    """Steps 11, 12, 13 of 100 tokens and 1 sample each, ending at clock 51, 52 and 54 (`later`: the `later`-th
    packet after this one, as many steps and seconds on)."""
    pending = Pending()
    for i, (t_end, ids, loss) in enumerate([(51.0, [1, 2], 3.0), (52.0, [2, 3], 2.0), (54.0, [1, 1], 2.5)]):
        pending.rows.append(
            StepRow(
                11 + i + 3 * later,
                100.0,
                1.0,
                t_end + 10.0 * later,
                1.0,
                0.125,
                lr=0.5,
                clipped=1.0 if i == 2 else None,
                sources={"web": 100.0 * (i + 1)},
                sample_ids=ids,
                values={"loss": loss},
                tokens_total=100.0 * (i + 1 + 3 * later),
                samples_total=1.0 * (i + 1 + 3 * later),
            )
        )
    for i, (norm, scale) in enumerate([(0.5, 1024.0), (2.0, 512.0), (math.nan, 512.0)]):
        pending.keep_step("grad_norm", i, torch.tensor(norm))
        pending.keep_step("signals/loss_scale", i, torch.tensor(scale))
    pending.keep_layers("signals/grad_norm", 1, torch.tensor([0.25, 4.0]))
    pending.keep_entropy("blocks.0", 2, torch.tensor(0.75))
    pending.timers.append(Timer(0, "time/optimizer_s", 1.0, 1.25))
    pending.evals.append((12, {"val/loss": pending.eval_value(torch.tensor(2.25)), "val/acc": 0.5}))
    pending.evals.append((99, {"val/acc": 0.75}))  # a step no row of the run has reached
    return pending.take(cuda=False)


def frame_of(d: Derivation, p) -> Frame:
    local = counters(p.rows)
    tokens, samples, spread = totals(local, None)
    return d.frame(p, local[2].tolist(), tokens.tolist(), samples.tolist(), spread)


def test_a_packet_becomes_its_step_columns():
    faults: list[str] = []
    d = derivation(faults)
    frame = frame_of(d, packet())
    c = frame.columns
    assert frame.steps == [11, 12, 13]
    # tokens and samples continue the stored run's counters; wall time its 100 s, from clock 50
    assert c["tokens"] == [1100.0, 1200.0, 1300.0] and c["samples"] == [11.0, 12.0, 13.0]
    assert c["wall_s"] == [101.0, 102.0, 104.0]
    # tokens/s over a window of 3 (no warm-up skipped): one point has no rate; then 100/1 s and 200/3 s
    assert c["tokens_per_s"] == [None, 100.0, 200 / 3]
    assert c["mfu"] == [None, 0.1, 200 / 3 / 1000]  # the plan's MFU of each rate
    # 2 devices at 3.6 USD an hour: 101 s cost 101 / 3600 h x 2 x 3.6 = 0.202 USD
    assert c["cost_usd"] == pytest.approx([0.202, 0.204, 0.208], rel=1e-12)
    assert c["step_s"] == [1.0, 1.0, 1.0] and c["data_wait_s"] == [0.125] * 3 and c["lr"] == [0.5] * 3
    assert c["time/optimizer_s"] == [0.25, None, None]
    assert c["loss"] == [3.0, 2.0, 2.5] and c["tokens/web"] == [100.0, 200.0, 300.0]
    # clip at 1.0: 0.5 was not clipped, 2.0 was; a NaN norm says nothing, but the loop said step 13 was
    assert c["grad_norm"][:2] == [0.5, 2.0] and math.isnan(c["grad_norm"][2])
    assert c["clipped"] == [0.0, 1.0, 1.0]
    # GradScaler halved its scale at step 12: one skipped step from there on
    assert c["signals/loss_scale"] == [1024.0, 512.0, 512.0] and c["signals/skipped_steps"] == [0.0, 1.0, 1.0]
    # losses 3, 2, 2.5: differences -1, 0.5, their variance 0.5625, halved: 0.28125 (a full window only)
    assert c["signals/loss_var"] == [None, None, 0.28125]
    # ids [1, 2], [2, 3], [1, 1]: none seen, one of two, both (1 from step 11, then from this batch)
    assert c["stream/repeat_rate"] == [0.0, 0.5, 1.0]
    # per-layer signals and entropy go apart (written less often), one column per layer
    assert frame.layers == {
        "signals/grad_norm/emb": [None, 0.25, None],
        "signals/grad_norm/head": [None, 4.0, None],
        "signals/act_entropy/blocks.0": [None, None, 0.75],
    }
    held = frame.held()
    assert held is not None and held.steps == [12, 13]
    assert held.columns["signals/grad_norm/emb"] == [0.25, None]
    assert faults == []


def test_evals_take_their_steps_tokens_and_wall_time_and_the_portfolio():
    d = derivation()
    p = packet()
    frame_of(d, p)
    assert d.evals(p) == [
        EvalRecord(
            step=12,
            tokens=1200.0,
            wall_s=102.0,
            task="val",
            metric="loss",
            value=2.25,
            portfolio="core",
            portfolio_version="2",
        ),
        EvalRecord(
            step=12,
            tokens=1200.0,
            wall_s=102.0,
            task="val",
            metric="acc",
            value=0.5,
            portfolio="core",
            portfolio_version="2",
        ),
        EvalRecord(
            step=99,
            tokens=None,
            wall_s=None,
            task="val",
            metric="acc",
            value=0.75,
            portfolio="core",
            portfolio_version="2",
        ),
    ]
    assert d.last_step == 13


def test_a_rebase_continues_from_the_stored_record():
    d = derivation()
    d.rebase(10, 5000.0, 40.0)  # the ledger's record at step 10, before the packet's first step
    frame = frame_of(d, packet())
    assert frame.columns["tokens"] == [5100.0, 5200.0, 5300.0] and frame.columns["samples"] == [41.0, 42.0, 43.0]
    assert d.last_step == 13 and d.evals(packet())[0].tokens == 5200.0


def test_a_key_that_may_not_be_stored_is_left_out_and_reported_once():
    faults: list[str] = []
    d = derivation(faults)
    for later in range(2):
        p = packet(later)
        p.rows[0].values = {"loss": 1.0, "oops": 2.0}
        frame = frame_of(d, p)
        assert "oops" not in frame.columns and frame.columns["loss"][0] == 1.0
    assert len(faults) == 1 and "'oops' needs a namespace" in faults[0]


def test_loss_variance_is_left_to_full_signals():
    d = derivation(full_signals=False)
    assert "signals/loss_var" not in frame_of(d, packet()).columns


def test_ranks_counters_sum_and_spread():
    # two ranks, two steps: rank 0 took 100 tokens in 1 s and 2 s, rank 1 50 tokens in 0.25 s and 1 s
    rank0 = np.array([[100, 100], [1, 1], [1.0, 2.0], [100, 200], [1, 2]], dtype=np.float64)
    rank1 = np.array([[50, 50], [1, 1], [0.25, 1.0], [50, 100], [1, 2]], dtype=np.float64)
    tokens, samples, spread = totals(rank0, np.stack([rank0, rank1]))
    assert tokens.tolist() == [150.0, 300.0] and samples.tolist() == [2.0, 4.0]
    assert spread["dist/tokens_per_s/min"].tolist() == [100.0, 50.0]
    assert spread["dist/tokens_per_s/max"].tolist() == [200.0, 50.0]
    assert spread["dist/step_s/max"].tolist() == [1.0, 2.0]
    alone = totals(rank0, None)
    assert alone[0].tolist() == [100.0, 200.0] and alone[2] == {}


def test_clipped_and_cost_alone():
    assert clipped([None, None, 0.0, None], [0.5, 1.5, 3.0, None], 1.0) == [0.0, 1.0, 0.0, None]
    assert clipped([None, 1.0], [5.0, None], None) == [None, 1.0]  # no threshold: only what the loop said
    assert cost_usd([3600.0, 1800.0], 4, 2.0) == [8.0, 4.0]


def test_joined_masks_what_was_not_recorded_and_keeps_a_recorded_nan():
    a, b = Frame([1, 2]), Frame([3])
    a.put("loss", [1.5, math.nan])
    b.put("grad_norm", [0.5])
    out = joined([a, b])
    assert out["step"].tolist() == [1, 2, 3]
    assert out["loss"].mask.tolist() == [False, False, True] and out["loss"][0] == 1.5
    assert math.isnan(out["loss"].data[1])
    assert out["grad_norm"].mask.tolist() == [True, True, False] and out["grad_norm"][2] == 0.5


def test_an_eval_value_given_as_a_tensor_is_read_by_its_reference():
    p = Pending()
    p.evals.append((10, {"val/loss": p.eval_value(torch.tensor([1.75])), "val/ppl": TensorRef(0)}))
    d = derivation()
    records = d.evals(p.take(cuda=False))
    assert [(r.metric, r.value, r.tokens) for r in records] == [("loss", 1.75, 1000.0), ("ppl", 1.75, 1000.0)]
