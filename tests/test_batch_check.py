from __future__ import annotations

import numpy as np
import pytest
import torch

from yieldgate.analysis.diagnose import diagnose
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger
from yieldgate.probe.model import GPT
from yieldgate.track.batch_check import BatchConfig, batch_size_check
from yieldgate.track.tracker import Tracker

from .helpers import CFG, batch

pytestmark = pytest.mark.slow  # real trainings, probes or processes: `make test-all`


def _check(text, candidate: BatchConfig, tokens: int = 24_576):
    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = GPT(CFG)
    held = batch(text[-200_000:], np.random.default_rng(99), 64)
    return batch_size_check(
        model,
        make_optimizer=lambda params, lr: torch.optim.AdamW(params, lr=lr),
        sample=lambda rng, n: batch(text[:-200_000], rng, n),
        loss_fn=lambda m, x, y: m(x, y)[1],
        eval_batch=held,
        baseline=BatchConfig(batch_size=4),
        candidate=candidate,
        tokens=tokens,
        lr=3e-3,
        seeds=3,
    )


def test_a_much_bigger_batch_at_the_same_lr_is_flagged(text, tmp_path):
    result = _check(text, BatchConfig(batch_size=96))
    assert result.altered, result.verdict
    assert result.relative_loss > 0.15
    assert "altered learning" in result.verdict
    # Raw squared norms fall with batch size; the noise-corrected |G|^2 explains both within the model.
    norms = result.grad_norms
    assert norms["raw_sq_b"] > norms["raw_sq_B"]
    assert norms["expected_raw_sq_b"] == pytest.approx(norms["raw_sq_b"], rel=1e-6)
    # Kept with the run, the check becomes a diagnosis.
    with Tracker("bs96", ledger=tmp_path / "c.db") as tr:
        tr.record_batch_check(result)
        for _ in range(3):
            tr.step(tokens=96 * 64, samples=96, loss=1.0)
    with Ledger(tmp_path / "c.db") as ledger:
        findings = diagnose(ledger, "bs96").findings
    found = [f for f in findings if f.cause == "throughput_altered_learning"]
    assert found and found[0].evidence["relative_loss"] == pytest.approx(result.relative_loss)


def test_accumulation_to_the_same_batch_is_not_flagged(text):
    result = _check(text, BatchConfig(batch_size=4, accumulation=2))
    assert not result.altered, result.verdict
    assert abs(result.relative_loss) < 0.15


def test_config_validation():
    with pytest.raises(InputError, match="multiple of accumulation"):
        BatchConfig(batch_size=6, accumulation=4)
