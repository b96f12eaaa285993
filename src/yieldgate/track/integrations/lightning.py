"""Lightning -> `Tracker`: a `Callback` that records every optimizer step and validation.

    from yieldgate.track.integrations.lightning import YieldgateCallback

    trainer = L.Trainer(max_steps=10_000, accumulate_grad_batches=4, val_check_interval=500,
                        callbacks=[YieldgateCallback("gpt-lr3e-4", ledger="yieldgate.db", manifest="manifest.yaml")])
    trainer.fit(module, train_loader, val_loader)

What each step record holds, and where it comes from:

- **step**: one record per optimizer step, i.e. each time `trainer.global_step` advances; with
  `accumulate_grad_batches=k`, one record per k batches. With `resume=True` and a `ckpt_path`, the run
  continues from the checkpoint's `global_step`: records the ledger holds after it are set apart, not
  continued, and tokens continue from the ledger's record at that step (Lightning keeps no token count).
- **tokens, samples**: counted from each batch in `on_train_batch_start` (on the device, before its forward is
  queued) and summed over the step's batches, per process (the Tracker sums the processes). By default
  (`batch_counts`): a dict's `attention_mask` sum, else B x T of its `input_ids`; a tuple's first tensor; a tensor.
  Pass `counts=` for other batches: a function from a batch to (tokens, samples).
- **loss**: the mean of the step's batch losses, from each `on_train_batch_end`'s `outputs["loss"]`, kept as a
  device tensor (no `.item()`: the Tracker moves it to the host off the training thread). In automatic
  optimization Lightning hands back the loss divided by `accumulate_grad_batches`; that division is undone, so
  the record is the training loss as `training_step` returned it. (`self.log(..., on_step=True)` with
  accumulation logs the step's *last* batch only; this is the mean over all of them.)
- **lr**: the optimizer's first group at `on_before_optimizer_step`, the rate the step uses (Lightning steps its
  schedulers before `on_train_batch_end`).
- **grad_norm**: the global 2-norm of the gradients at `on_before_optimizer_step`: after accumulation and AMP
  unscaling, before clipping; one fused reduction on the device (`grad_norm=False` skips it). Under FSDP it is
  this rank's shard's norm.
- **evals**: `trainer.callback_metrics` at `on_validation_end` (not during the sanity check), the keys that
  start with `val`, `valid` or `validation` followed by `/` or `_`: `val/loss` and `val_loss` -> `val/loss`,
  `val_acc` -> `val/acc`, `val/code/loss` -> task `val/code`, metric `loss`; Lightning's suffix for several
  loaders, `val/loss/dataloader_idx_1`, -> `val/dataloader_idx_1/loss`.

- **hyper-parameters** (the manifest's `config`, `lightning_hparams`): the LightningModule's `hparams` (what its
  `save_hyperparameters()` kept), and the datamodule's under `datamodule` when it saved any; merged over a
  `config` the manifest passed has.

`policy=` governs the run (`Tracker(policy=...)`, docs/gate.md "The gate inside the run"): when the gate inside it
holds, the callback sets `trainer.should_stop` after the next optimizer step and Lightning stops as it does for
`EarlyStopping`.

The run is named `run`, or `run-2`, `run-3`, ... when the script is run again and an earlier run took the name
(`resume=True` continues that run instead); without `run`, a readable unique name. `callback.tracker.run` says
which. The Tracker is created at `on_train_start` (with the LightningModule, its first optimizer and the AMP
GradScaler when there is one), closed `finished` at `on_train_end`, or `failed` (`killed` on Ctrl-C) at
`on_exception`. Every rank runs the callback; the Tracker reduces counts across ranks and rank 0 writes.

The class subclasses the `Callback` of each Lightning package installed (`lightning.pytorch`, and
`pytorch_lightning` when present), so one callback serves either package's `Trainer`.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import torch

from yieldgate.manifest import Manifest, plain_config
from yieldgate.track.integrations import TokenCounter, TrackerArgs, batch_counts
from yieldgate.track.tracker import Tracker, TrackerConfig

__all__ = ["YieldgateCallback", "val_metrics", "lightning_hparams"]

log = logging.getLogger("yieldgate.track")


def _callback_bases() -> tuple[type, ...]:
    """The `Callback` class of each Lightning package installed: a Trainer accepts only its own package's."""
    bases = []
    for package in ("lightning.pytorch", "pytorch_lightning"):
        try:
            bases.append(importlib.import_module(package).Callback)
        except ImportError:
            continue
    if not bases:
        raise ImportError("yieldgate's Lightning callback needs Lightning: pip install 'yieldgate[lightning]'")
    return tuple(bases)


def _total_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """Global 2-norm of the gradients, on their device (fused where torch has `get_total_norm`, 2.6+)."""
    fused = getattr(torch.nn.utils, "get_total_norm", None)
    if fused is not None:
        return fused(grads)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))


_VAL_PREFIXES = ("validation", "valid", "val")
_LOADER = "/dataloader_idx_"


def val_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """`<task>/<metric>` keys for the validation entries of `trainer.callback_metrics` (see the module
    docstring); every other entry (training metrics, `epoch`) is left out. Values stay as they are (tensors)."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        name, _, loader = key.partition(_LOADER)
        prefix = next(
            (p for p in _VAL_PREFIXES if name.startswith(p) and name[len(p) : len(p) + 1] in ("/", "_")), None
        )
        rest = name[len(prefix) + 1 :] if prefix else ""
        if not rest or not isinstance(value, (torch.Tensor, int, float)) or isinstance(value, bool):
            continue
        task, _, metric = rest.rpartition("/")
        task = "/".join(p for p in ("val", task, f"dataloader_idx_{loader}" if loader else "") if p)
        out[f"{task}/{metric}"] = value
    return out


def lightning_hparams(module: Any, datamodule: Any = None) -> dict[str, Any]:
    """The run's hyper-parameters as Lightning knows them (see the module docstring), as JSON values."""
    out = dict(getattr(module, "hparams", None) or {})
    data = getattr(datamodule, "hparams", None)
    if data:
        out["datamodule"] = dict(data)
    return plain_config(out, origin="LightningModule.hparams", strict=False)


class YieldgateCallback(*_callback_bases()):  # type: ignore[misc]
    """Records a Lightning run into the ledger through a `Tracker` (see the module docstring for each field)."""

    def __init__(
        self,
        run: str | None = None,
        *,
        ledger: str | Path | None = None,
        manifest: Manifest | str | Path | Mapping[str, Any] | None = None,
        signals: Literal["throughput", "full"] = "throughput",
        config: TrackerConfig | None = None,
        resume: bool = False,
        takeover: bool = False,
        counts: Callable[[Any], tuple[int | torch.Tensor, int] | None] = batch_counts,
        grad_norm: bool = True,
        policy: Any = None,
    ) -> None:
        self.args = TrackerArgs(run, ledger, manifest, signals, config, resume, takeover, policy)
        self.counts = counts
        self.grad_norm = grad_norm
        self.tracker: Tracker | None = None
        self._tokens = TokenCounter()
        self._samples = 0
        self._losses: list[torch.Tensor] = []
        self._lr: float | torch.Tensor | None = None
        self._norm: torch.Tensor | None = None
        self._last_step = 0
        self._warned = False

    # -- lifecycle ------------------------------------------------------------------------------------

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        optimizer = trainer.optimizers[0] if trainer.optimizers else None
        scaler = getattr(trainer.precision_plugin, "scaler", None)  # a GradScaler with 16-mixed, else None
        # A checkpoint given to fit() is restored by now: global_step is its step.
        self.tracker = self.args.open(
            model=pl_module,
            optimizer=optimizer,
            scaler=scaler,
            step=trainer.global_step,
            hparams=lightning_hparams(pl_module, getattr(trainer, "datamodule", None)),
        )
        self._last_step = trainer.global_step

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.tracker is not None:
            self.tracker.close("finished")

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        if self.tracker is not None:
            self.tracker.close("killed" if isinstance(exception, KeyboardInterrupt) else "failed")

    # -- steps ----------------------------------------------------------------------------------------

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self.tracker is None:
            return
        counts = self.counts(batch)
        if counts is None:
            if not self._warned:
                self._warned = True
                log.warning(
                    "yieldgate: cannot count tokens in a batch of type %s; pass counts= to "
                    "YieldgateCallback; tokens recorded as 0",
                    type(batch).__name__,
                )
            return
        self._tokens.add(counts[0])
        self._samples += counts[1]

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: torch.optim.Optimizer) -> None:
        self._lr = optimizer.param_groups[0]["lr"]
        if self.grad_norm:
            grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
            self._norm = _total_norm(grads) if grads else None

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.tracker is None:
            return
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if isinstance(loss, torch.Tensor):
            k = trainer.accumulate_grad_batches
            # Automatic optimization returns loss / accumulate_grad_batches (Lightning's ClosureResult).
            self._losses.append(loss.detach() * k if pl_module.automatic_optimization and k != 1 else loss.detach())
        if trainer.global_step == self._last_step:
            return  # accumulating: no optimizer step yet
        self._last_step = trainer.global_step
        losses, self._losses = self._losses, []
        mean = (losses[0] if len(losses) == 1 else torch.stack(losses).mean()) if losses else None
        self.tracker.step(
            tokens=self._tokens.take(), samples=self._samples, loss=mean, lr=self._lr, grad_norm=self._norm
        )
        self._samples, self._norm = 0, None
        if self.tracker.should_stop:  # the gate inside the run held it (`policy=`): the Trainer stops
            trainer.should_stop = True

    # -- validation -----------------------------------------------------------------------------------

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self.tracker is None or trainer.sanity_checking:
            return
        scores = val_metrics(trainer.callback_metrics)
        if scores:
            self.tracker.eval(scores)
