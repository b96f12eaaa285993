"""OpenMMLab's text log (MMEngine, and MMCV 1.x before it; every OpenMMLab project: MMDetection, MMPretrain, MMSeg,
MMPose, MMYOLO, ...) and YOLOv5's headerless `results.txt`, as declared mappings (`textlog.mapped`).

OpenMMLab, one line per logging interval and one per evaluation:

    07/03 13:04:17 - mmengine - INFO - Epoch(train)  [1][ 10/196]  lr: 3.3333e-04  eta: 0:13:14  time: 0.4073
        data_time: 0.0335  memory: 970  loss: 6.1887
    06/10 17:34:19 - mmengine - INFO - Epoch(val) [200][13/13]    coco/bbox_mAP: 0.7640  coco/bbox_mAP_50: 0.8630
    2021-12-21 21:51:30,877 - mmdet - INFO - Epoch [1][50/930]	lr: 1.978e-03, eta: 0:56:09, time: 0.303, ...
    ... - mmengine - INFO - Iter(train) [  50/40000]  lr: 1.0e-02  ...  loss: 2.1      (iteration-based runners)

The step is (epoch - 1) x iterations per epoch + iteration; an evaluation lands at the end of its epoch (its own
`[13/13]` counts the validation batches, not training's). `time` and `data_time` are seconds per iteration (the
mean over the interval): `step_s` and the data wait, never a clock; `loss` is the total of the `loss_*` terms.

YOLOv5 (and YOLOv3/v7 of the same code) before its results.csv, one line per epoch, counted from 0:

    epoch/last  gpu_mem  box  obj  cls  total  targets  img_size  P  R  mAP@.5  mAP@.5:.95  val box  val obj  val cls
"""

from __future__ import annotations

import re

from yieldgate.ingest.mapping import mapping_from_doc
from yieldgate.ingest.textlog.base import NUM, number
from yieldgate.ingest.textlog.mapped import EVAL_MARK, mapped_format

__all__ = ["OPENMMLAB", "YOLO_TXT", "read_line"]

_HEAD = re.compile(
    r"(?:^|\s)(?P<mode>Epoch|Iter)(?:\((?P<phase>train|val|test)\))?\s*"
    r"\[\s*(?P<a>\d+)\s*(?:/\s*(?P<a_of>\d+)\s*)?\](?:\s*\[\s*(?P<b>\d+)\s*(?:/\s*(?P<b_of>\d+)\s*)?\])?"
)
# `key: value` after the head: keys as OpenMMLab writes them (`loss_cls`, `d0.loss_bbox`, `coco/bbox_mAP`,
# `recall@thr=0.5`), values numbers; `eta: 0:13:14` and dict-valued keys are not values.
_PAIR = re.compile(rf"(?:^|[\s,])(?P<key>[A-Za-z_][\w@=./\-]*):\s+(?P<value>{NUM})(?=[\s,]|$)")
# What an evaluation line times is the evaluation, not training
_NOT_EVAL = {"time", "data_time", "memory", "eta", "lr", "base_lr"}


def read_line(line: str) -> dict[str, float] | None:
    """One OpenMMLab log line's fields: `epoch`, `iter`, `iters` (training lines), its pairs; an evaluation
    line's metrics under `val/<metric>` (or their own task) with `EVAL_MARK`."""
    head = _HEAD.search(line)
    if head is None or (head["mode"] == "Epoch" and head["a_of"] is not None and head["phase"] is None):
        return None  # `Epoch [3/300]`: an epoch of a total, another logger's progress pair (OpenMMLab's is `[3][..]`)
    if head["mode"] == "Iter" and head["phase"] is None and re.search(r"\bEpoch\b", line, re.IGNORECASE):
        return None  # `Iter [50/390] Epoch [3/300]`: a count within an epoch, not an iteration-based runner's
    pairs = {m["key"]: number(m["value"]) for m in _PAIR.finditer(line, head.end())}
    if not pairs:
        return None
    if head["phase"] in ("val", "test"):
        task = "test" if head["phase"] == "test" else "val"
        out = {k if "/" in k else f"{task}/{k}": v for k, v in pairs.items() if k not in _NOT_EVAL}
        if not out:
            return None
        out[EVAL_MARK] = 1.0
        if head["mode"] == "Epoch" and head["phase"] == "val":
            out["epoch"] = float(head["a"])
        return out
    if head["mode"] == "Iter":
        return {**pairs, "iter_step": float(head["a"])}
    if head["b"] is None or head["b_of"] is None:
        return None
    return {**pairs, "epoch": float(head["a"]), "iter": float(head["b"]), "iters": float(head["b_of"])}


def _iter_or_epoch(line: str) -> dict[str, float] | None:
    fields = read_line(line)
    if fields is not None and "iter_step" in fields:  # an iteration-based runner: the iteration is the step
        fields["epoch"], fields["iter"], fields["iters"] = 1.0, fields.pop("iter_step"), 0.0
    return fields


OPENMMLAB = mapped_format(
    "openmmlab",
    "OpenMMLab (MMEngine and MMCV 1.x: MMDetection, MMPretrain, MMSeg, MMPose, MMYOLO, ...): `Epoch(train)  "
    "[1][ 50/1509]  lr: 2.1648e-06  eta: 8:27:55  time: 0.2526  data_time: 0.0334  memory: 9182  loss: 59.1782  "
    "loss_cls: 21.0711`, `Epoch(val) [12][13/13]  coco/bbox_mAP: 0.7640`, MMCV's `Epoch [1][50/930]\\tlr: "
    "1.978e-03, ..., loss: 1.2`, `Iter(train) [  50/40000]  ...`; step = (epoch - 1) x iterations per epoch + "
    "iteration, an evaluation at the end of its epoch",
    mapping_from_doc(
        "openmmlab",
        {
            "step": {"epoch": "epoch", "iter": "iter", "iters_per_epoch": "iters"},
            "loss": "loss",
            "times": {"time": "per_step", "data_time": "data_wait"},
            "names": {"lr": "lr", "grad_norm": "grad_norm"},
        },
    ),
    reader=_iter_or_epoch,
)
# An iteration-based run's lines carry iters 0: step = (1 - 1) x 0 + iteration.


YOLO_TXT = mapped_format(
    "yolo-txt",
    "YOLOv5 / YOLOv3 / YOLOv7's headerless results.txt, one line per epoch counted from 0: `  0/29  1.86G  "
    "0.09854  0.09318  0  0.1917  24  416  0  0  0.004895  0.0009547  0.09176  0.05526  0` (epoch/last, gpu_mem, "
    "box, obj, cls, total, targets, img_size, P, R, mAP@.5, mAP@.5:.95, val box, obj, cls)",
    mapping_from_doc(
        "yolo-txt",
        {
            "lines": [
                rf"^\s*(?P<epoch>\d+)/(?P<last>\d+)\s+(?P<gpu_mem>{NUM})G?\s+(?P<box_loss>{NUM})\s+(?P<obj_loss>{NUM})"
                rf"\s+(?P<cls_loss>{NUM})\s+(?P<total>{NUM})\s+(?P<targets>{NUM})\s+(?P<img_size>{NUM})\s+"
                rf"(?P<precision>{NUM})\s+(?P<recall>{NUM})\s+(?P<mAP50>{NUM})\s+(?P<mAP50_95>{NUM})\s+"
                rf"(?P<val_box_loss>{NUM})\s+(?P<val_obj_loss>{NUM})\s+(?P<val_cls_loss>{NUM})\s*$"
            ],
            "step": {"epoch": "epoch", "iters_per_epoch": 1, "first_epoch": 0},
            "loss": "total",
            "evals": {
                "precision": "higher",
                "recall": "higher",
                "mAP50": "higher",
                "mAP50_95": "higher",
                "val_box_loss": {"key": "val/box_loss", "direction": "lower"},
                "val_obj_loss": {"key": "val/obj_loss", "direction": "lower"},
                "val_cls_loss": {"key": "val/cls_loss", "direction": "lower"},
            },
            "epochs": True,
        },
    ),
    note="YOLO's results.txt has one line per epoch: steps in this run count epochs (epoch 0 is step 1)",
)
