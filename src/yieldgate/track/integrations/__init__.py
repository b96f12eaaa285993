"""Adapters from training frameworks to the `Tracker`.

- `yieldgate.track.integrations.hf.YieldgateCallback`: a Hugging Face `TrainerCallback`;
- `yieldgate.track.integrations.lightning.YieldgateCallback`: a Lightning `Callback`.

Import each from its own module: this package imports neither framework, so `import yieldgate` never pulls in
transformers or Lightning. The adapters translate framework events into `Tracker` calls and nothing more.

Shared here is the one piece both need: counting a batch's tokens and samples, and summing the counts of one
optimizer step's microbatches without making the host wait for the device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from yieldgate.manifest import Manifest
from yieldgate.track.tracker import Tracker, TrackerConfig

__all__ = ["TokenCounter", "TrackerArgs", "batch_counts"]


@dataclass
class TrackerArgs:
    """What an adapter hands to the Tracker it opens when training starts (the callbacks' own arguments)."""

    run: str | None
    """None: a readable unique name; a name taken by an earlier run (without `resume`) gets a suffix, `exp-2`."""
    ledger: str | Path | None = None
    manifest: Manifest | str | Path | Mapping[str, Any] | None = None
    signals: Literal["throughput", "full"] = "throughput"
    config: TrackerConfig | None = None
    resume: bool = False
    takeover: bool = False
    """Take the run over from a writer that died without closing it (a job restarted after a crash)."""
    policy: Any = None
    """The policy that governs the run (`Tracker(policy=...)`); a hold stops the framework's trainer."""

    def open(
        self,
        *,
        model: torch.nn.Module | None,
        optimizer: Any,
        scaler: Any,
        step: int,
        tokens: float | None = None,
        hparams: Mapping[str, Any] | None = None,
    ) -> Tracker:
        """`step` (and `tokens`, when the framework counts them): where the framework's state stands as training
        starts, a restored checkpoint's point on a restart (see `Tracker`). `hparams`: what the framework knows of
        the run's hyper-parameters (`Manifest.config`). A script run again records a new run under a suffixed
        name instead of failing on the name its last run took; `resume=True` continues that run instead."""
        return Tracker(
            self.run,
            ledger=self.ledger,
            manifest=self.manifest,
            signals=self.signals,
            model=model,
            optimizer=optimizer,
            scaler=scaler,
            config=self.config,
            resume=self.resume,
            takeover=self.takeover,
            step=step,
            tokens=tokens,
            hparams=hparams,
            suffix_if_taken=True,
            policy=self.policy,
        )


def batch_counts(batch: Any, main: str = "input_ids") -> tuple[int | torch.Tensor, int] | None:
    """(tokens, samples) of one microbatch of token ids, or None when the batch holds no tensor to count.

    - a mapping (`input_ids`, `attention_mask`, `labels`, ...): with an `attention_mask`, tokens are its sum,
      so padding is left out (a 0-d tensor on the batch's device: the sum is queued there, not read); without
      one, B x T from the shape of `main` (or of `inputs_embeds`);
    - a tuple or list, e.g. `(x, y)`: B x T from the shape of its first tensor (the inputs);
    - a tensor: B x T from its shape.

    Samples are the first dimension (a 1-D tensor is one sequence). Counts taken from shapes are host ints:
    reading a shape never waits for the device.
    """
    mask = None
    if isinstance(batch, Mapping):
        ids = batch.get(main)
        if ids is None:
            ids = batch.get("inputs_embeds")
        mask = batch.get("attention_mask")
    elif isinstance(batch, (tuple, list)):
        ids = next((x for x in batch if isinstance(x, torch.Tensor)), None)
    else:
        ids = batch
    if not isinstance(ids, torch.Tensor):
        return None
    samples = int(ids.shape[0]) if ids.dim() >= 2 else 1
    if isinstance(mask, torch.Tensor):
        return mask.sum(), samples
    # inputs_embeds are (B, T, width): the tokens are B x T, not numel.
    tokens = int(ids.shape[0] * ids.shape[1]) if ids.dim() >= 2 else ids.numel()
    return tokens, samples


class TokenCounter:
    """Sums the token counts of one optimizer step's microbatches; `take()` returns the total and starts over.

    Counts known on the host (from shapes) are added as ints. A count that is a CUDA tensor (an attention mask's
    sum) is copied to pinned host memory without blocking, with an event recorded behind the copy; `take()` waits
    on that event only. The adapters count a microbatch before its forward pass is queued, so the wait lasts until
    the device has *started* that microbatch, never until it has finished the step: the host stays up to one step
    ahead of the device instead of draining its queue to learn a count.
    """

    def __init__(self) -> None:
        self._host = 0
        self._copies: list[tuple[torch.Tensor, Any]] = []

    def add(self, count: int | torch.Tensor) -> None:
        if not isinstance(count, torch.Tensor):
            self._host += int(count)
        elif count.device.type == "cuda":
            host = count.to("cpu", non_blocking=True)  # lands in pinned memory; read after the event below
            event = torch.cuda.Event()
            event.record()
            self._copies.append((host, event))
        else:
            # A CPU tensor: nothing to wait for. (Another accelerator, e.g. MPS or XLA: this is a sync point.)
            self._host += int(count)

    def take(self) -> int:
        total = self._host
        for host, event in self._copies:
            event.synchronize()  # waits for this copy only, queued before the microbatch's forward
            total += int(host)
        self._host, self._copies = 0, []
        return total
