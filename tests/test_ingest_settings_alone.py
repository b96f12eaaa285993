"""A text log from which only counters and settings are read (an epoch and the learning rate the trainer prints at
its start) is refused in one line naming them, never imported as a run of learning rates (issue #45: a real
ImageNet-style log whose training lines no reader took imported 80 learning rates and nothing else, exit 0)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.ingested import column, imported, write
from yieldgate.errors import InputError

NOISE = "Namespace(lr=0.001, momentum=0.9)\n=> no checkpoint found at 'ckpt/best.pth'\n"


def _log(epochs: int, setting: str, value_name: str | None = None) -> str:
    lines = [NOISE]
    for e in range(epochs):
        extra = f", {value_name}={2.0 / (e + 1):.4f}" if value_name else ""
        lines.append(f"Start epoch {e} ==========,{setting}={0.001 * 0.9**e:.6f}{extra}\n")
        lines.append("\tsome line the readers skip\n")
    return "".join(lines)


def test_an_epoch_and_its_learning_rate_alone_are_refused_naming_them(tmp_path):
    path = write(tmp_path, "train.log", _log(6, "lr"))
    with pytest.raises(InputError) as refused:
        imported(path)
    said = str(refused.value)
    assert "only counters and settings were read (epoch, lr) on 6 line(s)" in said and "\n" not in said


def test_a_value_of_training_beside_them_is_read(tmp_path):
    """The near miss: the same lines with a loss are a training log (its loss, and the learning rate kept)."""
    steps, _, _ = imported(write(tmp_path, "train.log", _log(6, "lr", "loss")))
    assert column(steps, "loss") == {e: pytest.approx(2.0 / (e + 1), abs=1e-4) for e in range(6)}
    assert len(column(steps, "lr")) == 6


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    setting=st.sampled_from(["lr", "learning_rate", "base_lr", "lr_group0", "momentum", "weight_decay", "LR"]),
    epochs=st.integers(3, 12),
    value=st.sampled_from([None, "loss", "acc", "train_loss", "tokens_per_s"]),
)
def test_settings_never_stand_for_a_value_of_training(tmp_path, setting, epochs, value):
    """Whatever the setting's spelling: with no other value the log is refused; with one it is imported (a name
    yieldgate does not know, `acc`, is kept as an extra with a warning, as in any log)."""
    path = write(tmp_path, f"{setting}-{epochs}-{value}.log", _log(epochs, setting, value))
    if value is None:
        with pytest.raises(InputError, match="only counters and settings"):
            imported(path)
    else:
        steps, evals, warnings = imported(path)
        assert len(steps) + len(evals) >= epochs or any("kept as extras" in w for w in warnings)
