from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.helpers import CFG, batch
from yieldgate.analysis.diagnose import diagnose
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger
from yieldgate.probe.model import GPT
from yieldgate.track.batch_check import BatchConfig, batch_size_check
from yieldgate.track.tracker import Tracker

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


def test_a_diverged_training_is_refused_not_judged():
    """A candidate whose LR blows the weights up has no finite learning per token: the check says so, where it
    used to crash on a missing interval (every seed diverged) or judge NaN "within noise" (some did)."""
    torch.manual_seed(0)

    def sample(rng, n):
        x = torch.tensor(rng.normal(size=(n, 4)), dtype=torch.float32)
        return x, x.sum(dim=1, keepdim=True)

    with pytest.raises(InputError, match=r"candidate's held-out loss is not finite after training in 2 of 2 seeds"):
        batch_size_check(
            torch.nn.Linear(4, 1),
            make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
            sample=sample,
            loss_fn=lambda m, x, y: ((m(x) - y) ** 2).mean(),
            eval_batch=sample(np.random.default_rng(99), 16),
            baseline=BatchConfig(batch_size=2),
            candidate=BatchConfig(batch_size=8, lr=1e30),
            tokens=64,
            lr=0.01,
            seeds=2,
            grad_draws=2,
        )


def test_yield_puts_the_batch_beside_the_gradient_noise_scale(tmp_path):
    """Two real probes of one recipe and budget: a batch of 8 sequences sits below the noise scale its run
    measures (~2,600 tokens), one of 64 far above its run's (~430 tokens: fewer steps leave the model less
    trained, where the noise scale is smaller), where `yield` says the tokens/s are bought with data."""
    from yieldgate.analysis.runs import yield_report
    from yieldgate.data.recipe import resolve
    from yieldgate.manifest import parse_manifest
    from yieldgate.probe.config import ProbeConfig
    from yieldgate.probe.trainer import train_probe

    recipe = resolve(
        parse_manifest({"data": {"sources": [{"name": "milton"}]}}).data, seed=0, max_chars_per_source=200_000
    )
    db = str(tmp_path / "b.db")
    for batch_size in (8, 64):
        train_probe(
            recipe,
            ProbeConfig(
                tokens=160_000,
                seed=0,
                layers=1,
                width=32,
                heads=2,
                evals=4,
                threads=1,
                eval_sequences=16,
                batch_size=batch_size,
            ),
            run=f"b{batch_size}",
            ledger=db,
        )
    with Ledger(db, readonly=True) as led:
        small, big = yield_report(led, "b8").batch, yield_report(led, "b64")
    assert small["batch_tokens"] == 8 * 64 and big.batch["batch_tokens"] == 64 * 64
    assert small["ratio"] < 1 and big.batch["ratio"] >= 4, (small, big.batch)
    assert "bought with data" not in (small["advice"] or "") and "bought with data" in big.batch["advice"]
    assert any(n.startswith("batch: the batch (4,096 tokens) is x") for n in big.notes)


def test_a_batch_far_above_the_noise_scale_is_throughput_bought_with_data():
    import pandas as pd

    from yieldgate.analysis.batch import batch_advice

    steps = pd.DataFrame({"step": range(1, 101), "tokens": [s * 65536.0 for s in range(1, 101)]})
    gns = pd.DataFrame({"step": range(1, 101), "value": [4096.0] * 100})
    advice = batch_advice(steps, gns, None)
    assert advice["ratio"] == 16 and advice["tokens_factor"] == 8.5 and advice["steps_factor"] == pytest.approx(0.53125)
    assert advice["advice"].startswith("the batch (65,536 tokens) is x16 the gradient noise scale")
    assert "throughput bought with data" in advice["advice"] and "heuristic" in advice["advice"]
    assert batch_advice(steps, gns.iloc[:50], None) is None  # no noise scale over the last half: no advice
