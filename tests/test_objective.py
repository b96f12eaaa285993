"""A loss that is not a cross-entropy (preference and RL fine-tuning) is told apart, and no command turns it into bits
per byte or reads its fall as learning per token."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from yieldgate.analysis.objective import not_cross_entropy

REAL = Path(__file__).parent / "data" / "real"


def test_what_trainers_log_beside_an_objective_names_it():
    dpo = ["imported/rewards/margins", "imported/rewards/chosen", "imported/logps/chosen", "imported/epoch"]
    said = "it logs logps/chosen, rewards/chosen, rewards/margins: preference or RL fine-tuning"
    assert not_cross_entropy(dpo) == said
    assert not_cross_entropy(["imported/objective/kl", "imported/ppo/loss/policy"]) is not None
    assert not_cross_entropy(["imported/train/grpo_loss"]) is not None
    # a pre-training run's extras, and its positive loss, say nothing
    pretraining = ["signals/gns", "tokens/web", "imported/epoch", "device/power_w", "val/loss", "hellaswag/acc_norm"]
    assert not_cross_entropy(pretraining, np.array([10.9, 3.2, np.nan])) is None
    assert not_cross_entropy([], np.array([0.69, -0.2, -0.5])) == (
        "its training loss is negative at 2 logged steps (down to -0.5)"
    )


def test_a_real_grpo_run_gets_no_bits_per_byte_and_says_its_loss_is_its_objective(cli, monkeypatch):
    """TRL's GRPOTrainer state (a real run, its loss negative at 18 of 40 steps beside `kl` and `reward`): `yield` on
    its loss says what the loss is, in place of nats/token; `--per byte` is one line; `diagnose` says it too. A real
    cross-entropy fine-tune (Whisper) gets no such note."""

    monkeypatch.setenv("COLUMNS", "400")  # one line per note
    cli("import", "hf-trainer", str(REAL / "trl-grpo-chaos-economy-trainer_state.json"), "--run", "grpo")
    cli("import", "hf-trainer", str(REAL / "hf-whisper-large-v2-ja-trainer_state.json"), "--run", "whisper")
    out = cli("yield", "grpo", "--metric", "loss").stdout
    assert "yield of training loss (the objective as logged, not nats/token)" in out
    assert "grpo's loss is not a cross-entropy (it logs frac_reward_zero_std, kl, reward and 11 more" in out
    assert "not learning per token" in out
    err = cli("yield", "grpo", "--metric", "loss", "--per", "byte", code=2).stderr
    assert err.count("\n") == 1 and "not a cross-entropy" in err and "no bits per byte" in err
    (note,) = cli.json("diagnose", "grpo")["notes"]
    assert note.startswith("the loss is not a cross-entropy (it logs ")
    assert cli.json("diagnose", "whisper")["notes"] == []
    assert "cross-entropy" not in cli("yield", "whisper").stdout
