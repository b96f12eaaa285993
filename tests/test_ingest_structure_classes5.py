"""Logs read by their structure (issue 45), the fifth set of classes seen in real public logs that were misread or
refused. Each on a small file written here (no real log), each rule on generated cases (hypothesis), and beside each a
file that is not the class and is not read as it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.ingested import FAST as _FAST
from tests.support.ingested import column, evals_at, imported, write
from yieldgate.ingest.textlog.kv import read_counted

# -- 1. tab-separated `Name value (running mean)` segments: PyTorch's ImageNet example and its copies ------------------


@dataclass
class _Meters:
    """A loop printing as pytorch/examples' imagenet/main.py does (ProgressMeter, AverageMeter)."""

    epochs: int = 3
    size: int = 250  # batches an epoch (the total it prints)
    every: int = 10  # a line every this many batches, from batch 0
    tests: int = 40  # batches of the evaluation loop after each epoch
    padded: bool = False  # the newer layout: `[  10/5005]`, `Time  1.154 ( 1.408)`, `Loss 6.9e+00 (6.9e+00)`
    name: str = "Acc"  # `Prec` in older copies
    data: bool = True  # a `Data` meter


def _meters(m: _Meters) -> tuple[str, dict[int, float], dict[tuple[str, int], float]]:
    """The log, {step: the batch's loss} and {(task/metric, step): summary value}: the step counts batches from 0
    (epoch x size + batch), the summary after an epoch's evaluation loop is at that epoch's last training line."""
    lines = ["=> creating model 'resnet18'", "Namespace(arch='resnet18', epochs=90, lr=0.1)"]
    losses: dict[int, float] = {}
    evals: dict[tuple[str, int], float] = {}
    width = len(str(m.size))
    at = f"{m.name.lower()}@1"
    for epoch in range(m.epochs):
        for i in range(0, m.size, m.every):
            step = epoch * m.size + i
            loss = round(7.0 / (1 + step / 100) + 0.01 * (i % 3), 4)
            mean = round(loss + 0.5, 4)  # the running mean is never the value
            losses[step] = loss
            count = f"[{i:>{width}}/{m.size}]" if m.padded else f"[{i}/{m.size}]"
            if m.padded:
                segments = ["Time  1.154 ( 1.408)", "Data  0.371 ( 0.374)", f"Loss {loss:.4e} ({mean:.4e})"]
                segments += [f"{m.name}@1  12.50 ( 10.31)", f"{m.name}@5  30.00 ( 28.13)"]
            else:
                segments = ["Time 1.154 (1.408)", "Data 0.371 (0.374)", f"Loss {loss:.4f} ({mean:.4f})"]
                segments += [f"{m.name}@1 12.500 (10.312)", f"{m.name}@5 30.000 (28.125)"]
            if not m.data:
                segments.pop(1)
            lines.append("\t".join([f"Epoch: [{epoch}]{count}", *segments]))
        for i in range(0, m.tests, m.every):
            lines.append(f"Test: [{i}/{m.tests}]\tTime 0.500 (0.510)\tLoss 5.1234 (5.4321)\t{m.name}@1 50.0 (51.0)")
        top1, top5 = round(40 + 10 * epoch + 0.125, 3), round(70 + 5 * epoch + 0.25, 3)
        lines.append(f" * {m.name}@1 {top1:.3f} {m.name}@5 {top5:.3f}")
        last = epoch * m.size + (m.size - 1) // m.every * m.every
        evals[(f"val/{at}", last)] = top1
        evals[(f"val/{m.name.lower()}@5", last)] = top5
    return "\n".join(lines) + "\n", losses, evals


@pytest.mark.parametrize("padded", [False, True])
def test_imagenet_example_s_meters_read_the_batch_s_values_and_the_summary_as_evaluations(tmp_path, padded):
    text, losses, evals = _meters(_Meters(padded=padded))
    steps, got, _ = imported(write(tmp_path, "train.log", text))
    assert column(steps, "loss") == pytest.approx(losses)  # the batch's loss, not the running mean in brackets
    assert set(steps["step"]) == set(losses)  # the evaluation loop's batches are not training rows
    assert set(column(steps, "step_s").values()) == {1.154}  # `Time`: the batch's time, not a clock
    assert set(column(steps, "data_wait_s").values()) == {0.371}
    assert evals_at(got) == pytest.approx(evals)  # the training line's Acc@1 is the batch's: no evaluation
    assert got["higher_is_better"].all()


@pytest.mark.slow
@_FAST
@given(
    epochs=st.integers(2, 4),
    size=st.integers(30, 400),
    every=st.sampled_from([5, 10, 20]),
    tests=st.integers(10, 60),
    padded=st.booleans(),
    name=st.sampled_from(["Acc", "Prec"]),
    data=st.booleans(),
)
def test_meter_logs_read_whatever_their_sizes_layout_and_names(
    tmp_path_factory, epochs, size, every, tests, padded, name, data
):
    text, losses, evals = _meters(_Meters(epochs, size, every, tests, padded, name, data))
    steps, got, _ = imported(write(tmp_path_factory.mktemp("m"), "train.log", text))
    assert column(steps, "loss") == pytest.approx(losses)
    assert evals_at(got) == pytest.approx(evals)


def test_what_is_not_a_meter_s_segment_or_summary_is_not_read_as_one(tmp_path):
    # a summary with words between its pairs (a variant's qualifier), and a bullet of prose: not evaluations
    assert read_counted(" * Prec@1   k 49.206 Prec@5 001 78.840") is None
    assert read_counted(" * Saved checkpoint 3") is None
    # an evaluation loop's progress is not a training record
    assert read_counted("Test: [10/242]\tTime 0.633 (0.641)\tLoss 7.2757 (6.5367)") is None
    # a tab-separated `time` without a running mean keeps its own name (a clock, the mapping's `wall_s`)
    plain = read_counted("step 10\ttime 12.5\tloss 2.3") or {}
    assert {k: plain.get(k) for k in ("step", "time", "loss", "step_s")} == {
        "step": 10.0,
        "time": 12.5,
        "loss": 2.3,
        "step_s": None,
    }
    # an epoch and a count apart from brackets still read as before
    assert read_counted("Epoch [3/300] Iter [20/500] loss: 2.3")["#epoch"] == 3.0
    text, _, _ = _meters(_Meters(epochs=2))
    kept = "\n".join(line for line in text.splitlines() if not line.startswith(" * ")) + "\n"
    steps, got, _ = imported(write(tmp_path, "train.log", kept))
    assert got.empty  # no summary, no evaluation: the loop's running means are not one
    assert len(steps) == 2 * 25
