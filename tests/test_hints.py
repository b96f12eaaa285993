"""Hints name the input actually missing (issue #36 item 8): a Tracker handed a model on a device of unknown peak
FLOP/s is told to give the peak, not to hand over the model it was handed."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from yieldgate import Tracker
from yieldgate.ledger import Ledger
from yieldgate.track.mfu import MFU_LOGGER, plan_mfu


def _mlp() -> nn.Module:
    """A model with no transformer config: its FLOPs per token are only known by counting them."""
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))


def test_a_handed_model_on_an_unknown_device_is_told_the_peak(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger=MFU_LOGGER)
    with Tracker("h", ledger=tmp_path / "h.db", model=_mlp()) as tr:
        tr.step(tokens=10)
    said = [r.getMessage() for r in caplog.records if r.name == MFU_LOGGER]
    assert len(said) == 1, said
    assert "hand the model" not in said[0]
    assert "hardware.peak_flops" in said[0] and "'cpu'" in said[0] and "fp32" in said[0]
    with Ledger(tmp_path / "h.db", readonly=True) as led:
        why = led.meta("h")["unmeasured"]["mfu"]
    assert "hand the model" not in why and "hardware.peak_flops" in why


def test_no_model_and_no_peak_names_both():
    why = plan_mfu(None, None, torch.device("cpu"), world=1, run="r").why
    assert why is not None
    assert "hand the model to the Tracker" in why and "model.flops_per_token" in why
    assert "hardware.peak_flops" in why and "'cpu'" in why


@pytest.mark.slow
def test_the_lightning_callback_gets_the_peak_hint(tmp_path, caplog):
    pytest.importorskip("lightning")
    import lightning.pytorch as L

    from yieldgate.track.integrations.lightning import YieldgateCallback

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = _mlp()

        def training_step(self, batch, _):
            (x,) = batch
            loss = self.net(x).pow(2).mean()
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(16, 8)), batch_size=4)
    caplog.set_level(logging.WARNING, logger=MFU_LOGGER)
    trainer = L.Trainer(
        max_steps=2,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[YieldgateCallback("lit", ledger=tmp_path / "l.db")],
        default_root_dir=tmp_path,
    )
    trainer.fit(Module(), data)
    said = [r.getMessage() for r in caplog.records if r.name == MFU_LOGGER]
    assert len(said) == 1, said
    assert "hand the model" not in said[0] and "hardware.peak_flops" in said[0]
