"""Logs read by their structure (issue 45), the third set of classes seen in real public logs that were misread:
metrics printed on the training line beside the loss (PaddleRec's batch AUC) and another program's output appended
after the run (PaddleRec's `infer.py` over the checkpoints). Each on a small file written here (no real log), each
rule on generated cases (hypothesis), and beside each a file that is not the class and is not read as it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ledger import Ledger

_FAST = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def _import(path: Path):
    """(steps, evals, warnings) of `path` imported into a new in-memory ledger."""
    with Ledger(":memory:") as led:
        (res,) = import_run(led, "auto", [str(path)], ImportOptions(run="r"))
        return led.steps("r"), led.evals("r"), res.warnings


def _column(steps, name: str) -> dict[int, float]:
    known = steps[["step", name]].dropna()
    return dict(zip(known["step"].astype(int).tolist(), known[name].tolist(), strict=True))


# -- 4. metrics on the training line; another program's section appended after the run -------------------------------


def _stamp(second: int) -> str:
    return f"2022-04-12 {17 + second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d},000 - INFO - "


def _paddle(losses: list[float], aucs: list[float], metric: str = "AUC", infer: list[int] | None = None) -> str:
    """PaddleRec's trainer.py lines, one an epoch, then perhaps its infer.py over the checkpoints `infer` (the same
    metric without the loss, the epoch counted again)."""
    lines = ["$ python -u ../../tools/trainer.py -m config.yaml"]
    for e, (loss, auc) in enumerate(zip(losses, aucs, strict=True)):
        lines.append(
            _stamp(60 * e) + f"epoch: {e}, batch_id: 0, {metric}:{auc:.6f}, ACC:0.8, loss:{loss:.6f}, ips: 1000.0 ins/s"
        )
    if infer:
        lines.append("$ python -u ../../tools/infer.py -m config.yaml")
        for k, e in enumerate(infer):
            lines.append(_stamp(60 * len(losses) + 600 + 10 * k) + f"load model epoch {e}")
            lines.append(_stamp(60 * len(losses) + 605 + 10 * k) + f"epoch: {e}, batch_id: 0, {metric}: 0.93,ACC: 0.89")
    return "\n".join(lines) + "\n"


def test_paddlerec_s_batch_auc_is_a_training_metric_and_its_infer_section_is_not_the_run(tmp_path):
    losses = [0.5, 0.3, 0.2, 0.15, 0.12, 0.1]
    aucs = [0.6, 0.7, 0.8, 0.85, 0.9, 0.91]
    steps, evals, warnings = _import(_write(tmp_path, "train.log", _paddle(losses, aucs, infer=[3, 4, 5])))
    assert _column(steps, "loss") == dict(enumerate(losses))
    assert evals.empty  # the batch AUC scores the batch trained on: no evaluation
    assert any("another program's output appended" in w and "from 3" in w for w in warnings)
    assert steps["wall_s"].is_monotonic_increasing  # the infer section's later clock is not spliced in


@pytest.mark.slow
@_FAST
@given(
    n=st.integers(3, 12),
    metric=st.sampled_from(["AUC", "auc", "mAP", "map"]),
    back=st.integers(0, 2),
    data=st.data(),
)
def test_a_metric_on_every_training_line_is_an_extra_whatever_its_name(tmp_path_factory, n, metric, back, data):
    losses = data.draw(st.lists(st.floats(0.01, 5.0), min_size=n, max_size=n))
    aucs = data.draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n))
    infer = list(range(back, n - 1))
    path = _write(tmp_path_factory.mktemp("p"), "train.log", _paddle(losses, aucs, metric, infer))
    steps, evals, _ = _import(path)
    assert list(_column(steps, "loss")) == list(range(n))
    assert [round(v, 6) for v in _column(steps, "loss").values()] == [round(v, 6) for v in losses]
    assert evals.empty


def test_a_metric_that_names_its_split_or_a_section_with_its_own_evaluation_is_kept(tmp_path):
    """Near misses: `val_auc` beside the loss is an evaluation (the log names its split), and a trailing evaluation
    at an epoch counted again is not another program's output (it prints a value the training lines do not)."""
    text = _paddle([0.5, 0.3, 0.2], [0.6, 0.7, 0.8], metric="val_auc")
    text += _stamp(900) + "epoch: 1, batch_id: 0, test_loss: 0.41\n"
    steps, evals, warnings = _import(_write(tmp_path, "train.log", text))
    assert sorted(zip(evals["task"], evals["metric"], evals["step"].astype(int), strict=True))[:3] == [
        ("test", "loss", 1),
        ("val", "auc", 0),
        ("val", "auc", 1),
    ]
    assert not any("appended" in w for w in warnings)
    assert _column(steps, "loss") == {0: 0.5, 1: 0.3, 2: 0.2}
