"""The packet the Tracker's training thread hands its writer: typed slots, one Timer type, emptied on take."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from yieldgate.track.packet import Pending, StepRow, TensorRef, Timer

TRACK = Path(__file__).resolve().parents[1] / "src" / "yieldgate" / "track"


def row(step: int) -> StepRow:
    return StepRow(step, 8.0, 1.0, float(step), 0.5, None)


def test_take_puts_each_value_in_its_slot_and_empties_the_pending():
    pending = Pending()
    pending.rows += [row(1), row(2), row(3)]
    pending.keep_step("loss", 0, torch.tensor(2.5))
    pending.keep_step("loss", 2, torch.tensor(1.5))
    pending.keep_layers("signals/grad_norm", 1, torch.tensor([0.25, 4.0]))
    pending.keep_entropy("blocks.0", 2, torch.tensor(0.75))
    pending.timers.append(Timer(1, "time/optimizer_s", 10.0, 10.25))
    ref = pending.eval_value(torch.tensor([3.0]))
    pending.evals.append((3, {"val/loss": ref, "val/acc": 0.5}))

    packet = pending.take(cuda=False)

    assert [r.step for r in packet.rows] == [1, 2, 3]
    assert list(packet.steps) == ["loss"] and packet.steps["loss"].rows == [0, 2]
    assert packet.steps["loss"].values.tolist() == [2.5, 1.5]
    assert list(packet.layers) == ["signals/grad_norm"] and packet.layers["signals/grad_norm"].rows == [1]
    assert packet.layers["signals/grad_norm"].values.tolist() == [[0.25, 4.0]]  # [rows, layers]
    assert list(packet.entropy) == ["blocks.0"] and packet.entropy["blocks.0"].values.tolist() == [0.75]
    assert [(t.row, t.key, t.seconds()) for t in packet.timers] == [(1, "time/optimizer_s", 0.25)]
    assert ref == TensorRef(0) and packet.eval_tensors is not None and packet.eval_tensors.tolist() == [3.0]
    assert packet.evals == [(3, {"val/loss": TensorRef(0), "val/acc": 0.5})]
    assert packet.event is None  # CPU: nothing to wait for
    # emptied: the next packet starts from nothing
    assert pending.rows == [] and not (pending.steps or pending.layers or pending.entropy or pending.timers)
    assert pending.evals == [] and pending.take(cuda=False).eval_tensors is None


def test_the_tracker_and_its_writer_share_no_name_prefix_contract():
    # Per-layer signals and activation entropy used to travel as "layers:<key>" and "entropy:<layer>" names that
    # the writer parsed back with startswith(); the slots say it now.
    sources = {p.name: p.read_text() for p in TRACK.glob("*.py")}
    pattern = re.compile(r"""["'](layers|entropy):|startswith\(["'](layers|entropy)""")
    assert {name: pattern.findall(text) for name, text in sources.items() if pattern.search(text)} == {}
