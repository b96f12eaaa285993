"""`yieldgate batch-check`: the small-batch baseline check on the reference GPT and the built-in corpus, driven as a
user runs it, at token budgets that train in seconds."""

from __future__ import annotations

import pytest

from yieldgate.ledger import Ledger

TINY = ("--tokens", "4096", "--seeds", "2")


@pytest.mark.slow  # trains or runs a real trainer: the full tier (make test-all)
def test_accumulating_to_the_same_batch_learns_the_same(cli):
    """Two microbatches of 4 draw the same sequences as one batch of 8 and average the same loss: the candidate's
    learning matches the baseline's seed by seed (float summation order aside), so nothing is altered."""
    out = cli.json("batch-check", "--baseline-batch", "8", "--candidate-batch", "8", "--accumulation", "2", *TINY)
    assert out["altered"] is False and out["verdict"].startswith("learning per token is within 15%")
    assert out["candidate_learning"] == pytest.approx(out["baseline_learning"], rel=1e-4)
    assert abs(out["relative_loss"]) < 1e-4 and out["baseline_learning"][0] > 0.5  # it did learn
    assert out["setup"]["accumulation"] == 2 and out["run"] is None
    assert "noise_corrected_sq" not in out["grad_norms"]  # the candidate's microbatch is the smaller: no estimate


@pytest.mark.slow  # trains or runs a real trainer: the full tier (make test-all)
def test_a_much_bigger_batch_at_the_same_lr_is_altered_and_kept_with_the_run(cli, ledger_path):
    """A batch 16x the baseline's at the same learning rate takes 16x fewer steps over the same tokens and learns
    far less per token: altered, beyond the seed noise. Kept with a run (read back here for the figures the table
    printed), `diagnose` finds it."""
    table = cli(
        "batch-check",
        "--baseline-batch",
        "4",
        "--candidate-batch",
        "64",
        "--tokens",
        "8192",
        "--seeds",
        "3",
        "--run",
        "bs64",
    ).stdout
    with Ledger(ledger_path, readonly=True) as led:
        out = led.meta("bs64")["batch_check"]
        manifest = led.manifest("bs64")
    assert out["altered"] is True and out["relative_loss"] > 0.5, out["verdict"]
    assert "altered learning" in out["verdict"] and "over 3 seeds" in out["verdict"]
    assert out["candidate_learning_per_token"] < out["baseline_learning_per_token"]
    norms = out["grad_norms"]
    assert (norms["b_tokens"], norms["B_tokens"]) == (4 * 64, 64 * 64) and norms["raw_sq_b"] > norms["raw_sq_B"]
    # E|g_b|^2 = |G|^2 + tr(Sigma)/b: the two measured norms are what the noise-corrected estimate predicts
    assert norms["expected_raw_sq_b"] == pytest.approx(norms["raw_sq_b"], rel=1e-5)
    assert out["setup"]["candidate_batch"] == 64 and manifest.optimisation.batch_size == 64
    assert "learning per token over 8,192 tokens" in table and "noise-corrected |G|^2" in table
    assert " ".join(out["verdict"].split()) in " ".join(table.split()) and "kept with run 'bs64'" in table
    (finding,) = [f for f in cli.json("diagnose", "bs64")["findings"] if f["cause"] == "throughput_altered_learning"]
    assert finding["evidence"]["relative_loss"] == pytest.approx(out["relative_loss"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--candidate-batch", "64", "--accumulation", "3"],
            "batch_check.candidate_batch (64) must be a multiple of accumulation (3)",
        ),
        (["--precision", "fp8"], "batch_check.precision must be one of fp32, bf16, fp16, got 'fp8'"),
        (["--seeds", "1"], "batch_check.seeds must be >= 2"),
        (["--source", "nope"], "batch_check.source must be one of"),
        (["--lr", "0"], "batch_check.lr must be > 0, got 0.0"),
    ],
)
def test_bad_settings_are_one_line_and_exit_2_before_any_training(cli, args, message):
    err = cli("batch-check", *args, code=2).stderr
    assert err.startswith(f"error: {message}") and err.count("\n") == 1
