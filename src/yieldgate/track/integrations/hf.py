"""Hugging Face `Trainer` -> `Tracker`: a `TrainerCallback` that records every optimizer step and evaluation.

    from yieldgate.track.integrations.hf import YieldgateCallback

    args = TrainingArguments("out", logging_steps=10, eval_strategy="steps", eval_steps=200, report_to="none")
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=held,
                      callbacks=[YieldgateCallback("gpt2-lr3e-4", ledger="yieldgate.db", manifest="manifest.yaml")])
    trainer.train()

What each step record holds, and where it comes from:

- **step**: one record per optimizer step, numbered like `state.global_step` (from 1). With `resume=True` and
  `resume_from_checkpoint`, the run continues from the checkpoint's `global_step`: records the ledger holds
  after it (work done after the checkpoint, thrown away by the restart) are set apart, not continued, and
  tokens continue from the checkpoint's `num_input_tokens_seen` when the Trainer counts them, else from the
  ledger's record at that step. A restart after a crash also passes `takeover=True`: the crashed process
  never closed the run, and one writer owns a run at a time (`yieldgate.ledger.owners`).
- **tokens, samples**: counted from each training microbatch as the model receives it (a forward pre-hook on
  the model, training mode only), summed over the step's microbatches, per process (the Tracker sums the
  processes). Tokens are the attention mask's sum (padding left out) or, without a mask, B x T of the inputs.
  The Trainer's own `state.num_input_tokens_seen` (`include_num_input_tokens_seen`) is not used: it costs a
  host sync (`.item()`) and an all-gather on every microbatch, while counting from shapes costs nothing and a
  mask's sum is read without draining the device's queue (`TokenCounter`). On the same batches both counts
  agree (`tests/integration/test_integrations.py` checks it).
- **loss, grad_norm**: the Trainer moves them to the host only at its logging steps (`logging_steps`), where
  they reach `on_log` as floats; they are recorded at those steps and left empty at the others. So the ledger's
  rows equal `state.log_history`'s at every logging step. The Trainer's `loss` there is *the mean over the
  optimizer steps since the previous log* of each step's training loss (a step's loss: the token-weighted mean
  over its microbatches when the model takes `num_items_in_batch`, else the mean of the microbatch losses),
  averaged over processes; with `logging_nan_inf_filter` (the default) a NaN or inf step loss is replaced by
  the running mean. `grad_norm` is the last step's pre-clipping norm. Set `logging_steps=1` for per-step values.
- **lr**: every step, the learning rate the step used (read after `optimizer.step()`, before the scheduler
  moves on); at logging steps, the Trainer's logged `learning_rate`.
- **evals**: from `on_evaluate`. `eval_loss` -> `val/loss`, `eval_<name>` -> `val/<name>` (e.g. `val/accuracy`);
  with several eval datasets (a dict), the Trainer prefixes `eval_<dataset>_`, recorded as task `val/<dataset>`:
  `eval_code_loss` -> `val/code/loss`. Speed figures (runtime, samples/s, steps/s) are left out.

- **hyper-parameters** (the manifest's `config`, `trainer_hparams`): `training`, the `TrainingArguments`
  (`to_dict()`, less where files go, hub settings and tokens), and `model`, the model's config (`to_dict()`, less
  its private `_` keys and the transformers version); merged over a `config` the manifest passed has.

`policy=` governs the run (`Tracker(policy=...)`, docs/gate.md "The gate inside the run"): when the gate inside it
holds, the callback sets `control.should_training_stop` at the next step's end and the Trainer stops as it does at
`max_steps`.

The run is named `run`, or `run-2`, `run-3`, ... when the script is run again and an earlier run took the name
(`resume=True` continues that run instead); without `run`, a readable unique name. `callback.tracker.run` says
which. The Tracker is created at `on_train_begin` (with the Trainer's model, its torch optimizer and, for fp16, its
GradScaler) and closed `finished` at `on_train_end`. The Trainer has no exception hook: to mark a crashed run
`failed`, catch around `trainer.train()` and call `callback.close("failed")`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import torch
from accelerate.optimizer import AcceleratedOptimizer
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import IntervalStrategy

from yieldgate.manifest import Manifest, plain_config
from yieldgate.track.integrations import TokenCounter, TrackerArgs, batch_counts
from yieldgate.track.tracker import Tracker, TrackerConfig

__all__ = ["YieldgateCallback", "eval_metrics", "trainer_hparams"]

log = logging.getLogger("yieldgate.track")

# Per-call speed and memory figures of `Trainer.evaluate`: how fast the eval ran, not what the model scored.
_NOT_SCORES = ("runtime", "samples_per_second", "steps_per_second", "model_preparation_time", "jit_compilation_time")


def eval_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """`<task>/<metric>` keys for the metrics of one `Trainer.evaluate` call (see the module docstring).

    The call's prefix is read from its `<prefix>_runtime` key, which `evaluate` always adds: `eval` for one eval
    dataset, `eval_<dataset>` for each of a dict. A prefix other than `eval...` (`metric_key_prefix="test"`) is
    kept as the task.
    """
    prefix = next((k[: -len("_runtime")] for k in metrics if k.endswith("_runtime")), "eval")
    if prefix == "eval":
        task = "val"
    elif prefix.startswith("eval_"):
        task = "val/" + prefix[len("eval_") :]
    else:
        task = prefix
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if not key.startswith(prefix + "_") or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        name = key[len(prefix) + 1 :]
        if name in _NOT_SCORES or name.startswith("mem_"):
            continue
        out[f"{task}/{name}"] = float(value)
    return out


# TrainingArguments fields that say where files go, how to publish, or hold a secret: not how the model trains.
_NOT_HPARAMS = (
    "output_dir",
    "logging_dir",
    "run_name",
    "overwrite_output_dir",
    "resume_from_checkpoint",
    "report_to",
    "push_to_hub",
)


def trainer_hparams(args: TrainingArguments, model: torch.nn.Module | None) -> dict[str, Any]:
    """The run's hyper-parameters as the Trainer knows them (see the module docstring), as JSON values."""
    training = {
        k: v
        for k, v in args.to_dict().items()
        if k not in _NOT_HPARAMS and not k.startswith(("hub_", "push_to_hub")) and not k.endswith("_token")
    }
    out: dict[str, Any] = {"training": training}
    to_dict = getattr(getattr(model, "config", None), "to_dict", None)
    if callable(to_dict):
        out["model"] = {k: v for k, v in to_dict().items() if not k.startswith("_") and k != "transformers_version"}
    return plain_config(out, origin="TrainingArguments", strict=False)


class YieldgateCallback(TrainerCallback):
    """Records a `Trainer` run into the ledger through a `Tracker` (see the module docstring for each field)."""

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
        policy: Any = None,
    ) -> None:
        self.args = TrackerArgs(run, ledger, manifest, signals, config, resume, takeover, policy)
        self.tracker: Tracker | None = None
        self._tokens = TokenCounter()
        self._samples = 0
        self._lr: float | None = None
        self._optimizer: torch.optim.Optimizer | None = None
        self._pending: dict[str, Any] | None = None
        self._hook: Any = None
        self._main = "input_ids"
        self._warned = False

    # -- lifecycle ------------------------------------------------------------------------------------

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: torch.nn.Module | None = None,
        optimizer: Any = None,
        **kwargs: Any,
    ) -> None:
        # Accelerate wraps the torch optimizer; the Tracker's step hooks belong on the torch one, which
        # `AcceleratedOptimizer.step` calls (through the GradScaler with fp16).
        scaler = None
        if isinstance(optimizer, AcceleratedOptimizer):
            optimizer, scaler = optimizer.optimizer, optimizer.scaler
        self._optimizer = optimizer
        # The Trainer has restored a checkpoint's state by now: its step, and its token count when it keeps one.
        seen = getattr(state, "num_input_tokens_seen", 0) or None
        self.tracker = self.args.open(
            model=model,
            optimizer=optimizer,
            scaler=scaler,
            step=state.global_step,
            tokens=seen if state.global_step else None,
            hparams=trainer_hparams(args, model),
        )
        if model is not None:
            self._main = getattr(model, "main_input_name", "input_ids")
            # compiler.disable: under torch.compile the hook runs eagerly ahead of the graph, not traced into it.
            hook = torch.compiler.disable(self.tracker.busy.wrap(self._count))
            self._hook = model.register_forward_pre_hook(hook, with_kwargs=True)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.close("finished")

    def close(self, status: str = "finished") -> None:
        """Record any step still waiting for its log, then close the Tracker with `status`."""
        if self.tracker is None:
            return
        self._flush()
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        self.tracker.close(status)

    # -- steps ----------------------------------------------------------------------------------------

    def _count(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not module.training:
            return  # an evaluation forward
        counts = batch_counts(kwargs if self._main in kwargs or not args else args[0], self._main)
        if counts is None:
            if not self._warned:
                self._warned = True
                log.warning(
                    "yieldgate: cannot count tokens in the model's inputs (keys %s); tokens recorded as 0",
                    sorted(kwargs),
                )
            return
        self._tokens.add(counts[0])
        self._samples += counts[1]

    def on_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        # After optimizer.step(), before lr_scheduler.step(): the rate this step used (a host float).
        if self._optimizer is not None:
            self._lr = self._optimizer.param_groups[0]["lr"]

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if self.tracker is None:
            return
        self._pending = {"tokens": self._tokens.take(), "samples": self._samples, "lr": self._lr}
        self._samples = 0
        # A step the Trainer is about to log waits for `on_log`, which brings its loss and grad norm as host
        # floats (moments later, after the Trainer's own transfer, before the next step); any other step is
        # recorded now.
        if not _log_follows(args, state, control):
            self._flush()
        if self.tracker.should_stop:  # the gate inside the run held it (`policy=`): the Trainer stops
            control.should_training_stop = True

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        if self._pending is None or not logs or "loss" not in logs:
            return  # eval logs, the end-of-training summary
        self._pending["loss"] = logs["loss"]
        self._pending["grad_norm"] = logs.get("grad_norm")
        if logs.get("learning_rate") is not None:
            self._pending["lr"] = logs["learning_rate"]
        self._flush()

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._flush()  # a step whose log another callback cancelled

    def _flush(self) -> None:
        if self._pending is not None and self.tracker is not None:
            row, self._pending = self._pending, None
            self.tracker.step(**row)

    # -- evaluations ----------------------------------------------------------------------------------

    def on_evaluate(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        if self.tracker is None or not metrics:
            return  # evaluate() outside train()
        self._flush()  # the eval belongs after the step it follows
        scores = eval_metrics(metrics)
        if scores:
            self.tracker.eval(scores)


def _log_follows(args: TrainingArguments, state: TrainerState, control: TrainerControl) -> bool:
    """Whether the Trainer logs the training loss before the next step begins. `DefaultFlowCallback` (always
    ahead of ours) has set `should_log` for `logging_steps` and `logging_first_step`; with
    `logging_strategy="epoch"` the log follows `on_epoch_end`, after an epoch's last step or the final step."""
    if control.should_log:
        return True
    if args.logging_strategy != IntervalStrategy.EPOCH:
        return False
    return state.global_step >= state.max_steps or float(state.epoch or 0).is_integer()
