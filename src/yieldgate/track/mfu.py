"""How a run's MFU is made, decided once when its Tracker starts.

FLOPs per token come from the manifest (`model.flops_per_token`), else from the PaLM formula on the model's shape
(6N + 12·L·H·Q·T, `throughput.flops_per_token`), else, for a model the Tracker holds on a device with a known peak,
from torch's FLOP counter over one whole training step (`signals.FlopCount`). The peak is `hardware.peak_flops`'s
(device, dtype) row or the manifest's override. `MfuPlan` turns a tokens/s rate into MFU, None where it would
mislead; why a run records none is said once, on the logger `yieldgate.track.mfu` (`MFU_LOGGER`), so a caller
that knows (a CPU probe campaign) can silence that warning by its name.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from yieldgate.manifest import Manifest
from yieldgate.track import hardware
from yieldgate.track.throughput import flops_per_token, mfu

__all__ = ["COUNTED_FLOPS", "MFU_LOGGER", "MfuPlan", "matmul_params", "plan_mfu"]

log = logging.getLogger("yieldgate.track")

MFU_LOGGER = "yieldgate.track.mfu"
"""The logger of the one warning that a run records no MFU (and why); every other Tracker warning is on
`yieldgate.track`."""
COUNTED_FLOPS = "counted: torch.utils.flop_counter over one training step (matmuls and convolutions)"
# Why MFU is not recorded, by `throughput.mfu`'s flag: said once when the run starts, kept in the run's meta.
_MFU_WHY = {
    "unknown_device": "unknown device {device!r} ({dtype}), its peak FLOP/s not known: give hardware.peak_flops in the "
    "manifest",
    "unknown_model": "unknown FLOPs per token: hand the model to the Tracker, or give model.flops_per_token in the "
    "manifest",
    "not_transformer": "the 6N + 12LHQT formula is for decoder transformers: give model.flops_per_token in the "
    "manifest, or hand the model to the Tracker to count them",
}
# The matmuls' dtype read off fp32 parameters is a guess on a GPU: under torch.autocast they run in bf16 or fp16, whose
# peak is at least twice the tf32 one (H100: 989 against 495 TFLOP/s, 67 in fp32), and MFU comes out that much too high.
_AUTOCAST = (
    "yieldgate: MFU of run %r is taken against the device's %s peak, the dtype of the model's parameters (fp32 where "
    "no model is given); under torch.autocast the matmuls run in bf16 or fp16, whose peak is at least twice as high: "
    "give optimisation.precision in the manifest (this warning is on the logger yieldgate.track.mfu)"
)
_NOTHING_COUNTED = (
    "torch's FLOP counter saw no matmul in a training step (a compiled model?); give model.flops_per_token in the "
    "manifest"
)


def matmul_params(model: nn.Module) -> int:
    """N of 6N: unique parameters, less embedding tables used only as lookups. An embedding tied to an
    output projection (a Linear sharing its weight) counts once, since that matmul runs for every token."""
    linear_weights = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    lookups = {
        id(m.weight): m.weight.numel()
        for m in model.modules()
        if isinstance(m, nn.Embedding) and id(m.weight) not in linear_weights
    }
    unique = {id(p): p.numel() for p in model.parameters()}
    return sum(n for pid, n in unique.items() if pid not in lookups)


def _model_shape(model: nn.Module | None, manifest: Manifest | None) -> dict[str, Any]:
    """N, L, H, Q, T for 6N + 12·L·H·Q·T, from the manifest first, then the model's own config."""
    shape: dict[str, Any] = {}
    mc = manifest.model if manifest else None
    if mc is not None:
        shape = {
            "flops_per_token": mc.flops_per_token,
            "n": mc.non_embedding_params,
            "layers": mc.layers,
            "heads": mc.heads,
            "head_dim": mc.head_dim or (mc.width // mc.heads if mc.width and mc.heads else None),
            "context": mc.context,
            "architecture": mc.architecture,
        }
    if model is not None:
        cfg = getattr(model, "cfg", None) or getattr(model, "config", None)
        get = lambda *names: next((getattr(cfg, k) for k in names if getattr(cfg, k, None) is not None), None)  # noqa: E731
        if cfg is not None:
            width = get("width", "hidden_size", "n_embd", "d_model")
            shape["layers"] = shape.get("layers") or get("layers", "num_hidden_layers", "n_layer", "num_layers")
            shape["heads"] = shape.get("heads") or get("heads", "num_attention_heads", "n_head")
            if not shape.get("head_dim") and width and shape["heads"]:
                shape["head_dim"] = width // shape["heads"]
            shape["context"] = shape.get("context") or get("context", "max_position_embeddings", "n_positions", "n_ctx")
        if not shape.get("n"):
            shape["n"] = matmul_params(model)
    shape.setdefault("architecture", "decoder_transformer")
    return shape


def _precision(model: nn.Module | None, manifest: Manifest | None, device: torch.device) -> tuple[str, str]:
    """The matmuls' dtype and where it was read: the manifest's (`manifest`) unless it says fp32 (the default) or
    nothing, then the model's parameters' (`parameters`; fp32 on a GPU is tf32 where torch lets matmuls use it), or
    fp32 with no model (`assumed`)."""
    # fp32 is also the manifest's default, so it is read as "not said" (a manifest made again from a dump, as with
    # hparams, marks every field as set).
    precision = manifest.optimisation.precision if manifest and manifest.optimisation else None
    if precision is None or (precision == "fp32" and model is not None):
        dtype = next(iter(model.parameters())).dtype if model is not None else torch.float32
        tf32 = device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32
        inferred = hardware.dtype_name(dtype, tf32=tf32)
        return inferred, "parameters" if model is not None else "assumed"
    return precision, "manifest"


@dataclass(kw_only=True)
class MfuPlan:
    """How a run's MFU is made: call it with a tokens/s rate for the MFU (None: not recorded, or above 100%, which
    is said once). `meta` is the run's `mfu` meta; `why`, when set, says why the run records no MFU."""

    run: str | None
    meta: dict[str, Any]
    flops_per_token: float | None
    """None while MFU is not recorded (unknown, or still being counted: `counting`)."""
    peak_flops: float
    devices: int
    dtype: str
    formula: str | None
    counting: bool = False
    """FLOPs per token are to be counted over one whole training step (`counted` takes the count)."""
    why: str | None = None
    _impossible: bool = field(default=False, repr=False)

    def __call__(self, rate: float) -> float | None:
        if self.flops_per_token is None:
            return None
        value = mfu(
            tokens_per_s=rate,
            flops_per_token=self.flops_per_token,
            peak_flops=self.peak_flops,
            devices=self.devices,
            dtype=self.dtype,
            formula=self.formula,
        ).value
        if value is None and not self._impossible:
            self._impossible = True
            log.warning(
                "yieldgate: MFU above 100%% for run %r (tokens/s %.3g); check the peak or the model "
                "shape; such values are left out",
                self.run,
                rate,
            )
        return value

    def counted(self, flops: float, step: int) -> str | None:
        """One whole step counted at `step` (`flops` per token; 0: no matmul seen): MFU is recorded from the next
        rows on (the meta says so), or, when nothing was counted, the reason is returned."""
        self.meta = {
            **self.meta,
            "flops_per_token": flops or None,
            "counted_at_step": step,
            "flag": "ok" if flops else "unknown_model",
        }
        if not flops:
            return _NOTHING_COUNTED
        self.flops_per_token = flops
        return None


def _why_not(flag: str, handed: bool, known_fpt: bool, known_peak: bool, device: str, dtype: str) -> str:
    """Why a run records no MFU, naming each input actually missing: a handed-over model's FLOPs are counted once
    the peak is known, so on a device of unknown peak the peak is the one thing to give."""
    missing = []
    if flag == "not_transformer" and not handed:
        missing.append(_MFU_WHY["not_transformer"])
    elif not known_fpt and not handed:
        missing.append(_MFU_WHY["unknown_model"])
    if not known_peak:
        missing.append(_MFU_WHY["unknown_device"])
    return "; ".join(missing).format(device=device, dtype=dtype) if missing else _MFU_WHY.get(flag, flag)


def plan_mfu(
    model: nn.Module | None, manifest: Manifest | None, device: torch.device, *, world: int, run: str | None
) -> MfuPlan:
    """The run's MFU plan: FLOPs per token and peak as the module docstring says, from what the Tracker holds."""
    shape = _model_shape(model, manifest)
    fpt = shape.get("flops_per_token")
    formula = "given: model.flops_per_token in the manifest" if fpt is not None else None
    if fpt is None and all(shape.get(k) for k in ("n", "layers", "heads", "head_dim", "context")):
        fpt = flops_per_token(
            non_embedding_params=shape["n"],
            layers=shape["layers"],
            heads=shape["heads"],
            head_dim=shape["head_dim"],
            context=shape["context"],
        )
    hw = manifest.hardware if manifest else None
    precision, precision_from = _precision(model, manifest, device)
    name = (hw.device_kind if hw and hw.device_kind else None) or hardware.device_name(device)
    peak = hardware.peak_flops(name, precision, override=hw.peak_flops if hw else None)
    devices = hw.device_count if hw and hw.device_count > 1 else world
    counting = fpt is None and model is not None and peak is not None
    if counting:
        formula = COUNTED_FLOPS
    probe = mfu(
        tokens_per_s=0.0,
        flops_per_token=fpt,
        peak_flops=peak.flops if peak else None,
        devices=devices,
        dtype=precision,
        architecture=shape["architecture"],
        formula=formula,
    )
    meta = {
        "formula": probe.formula,
        "attention": probe.attention,
        "flops_per_token": fpt,
        "dtype": precision,
        "dtype_from": precision_from,
        "device": name,
        "devices": devices,
        "peak_flops": peak.flops if peak else None,
        "peak_source": peak.source if peak else None,
        "flag": "counting" if counting else probe.flag,  # counting: until the first whole step is counted
        "shape": {k: shape.get(k) for k in ("n", "layers", "heads", "head_dim", "context")},
    }
    plan = MfuPlan(
        run=run,
        meta=meta,
        flops_per_token=None,
        peak_flops=peak.flops if peak else math.nan,
        devices=devices,
        dtype=precision,
        formula=formula,
        counting=counting,
    )
    guessed = precision_from != "manifest" and precision in ("fp32", "tf32")
    if peak is not None and guessed and (hw is None or hw.peak_flops is None):  # an override is the user's own peak
        # Said when the run starts: the Tracker cannot see autocast, which is on only inside the loop's forward.
        logging.getLogger(MFU_LOGGER).warning(_AUTOCAST, run, precision)
    if not counting and (probe.flag != "ok" or peak is None):
        plan.why = _why_not(probe.flag, model is not None, fpt is not None, peak is not None, name, precision)
    elif not counting:
        plan.flops_per_token = fpt
    return plan
