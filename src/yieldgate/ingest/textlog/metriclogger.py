"""The `MetricLogger` console of Facebook Research's training loops (torchvision's detection and classification
references, DETR, DeiT, MAE, ConvNeXt) and of maskrcnn-benchmark before detectron2, as a declared mapping
(`textlog.mapped`):

    Epoch: [0]  [ 20/625]  eta: 0:05:01  lr: 0.000200  loss: 2.1183 (2.2517)  time: 0.4113  data: 0.0011  max mem: 2786
    2019-07-25 00:00:58,167 maskrcnn_benchmark.trainer INFO: eta: 1 day, 2:01:04  iter: 20  loss: 45.1925 (74.9757)
        loss_box_reg: 0.0806 (0.0898)  ...  time: 0.3803 (1.5616)  data: 0.0306 (0.2529)  lr: 0.000036  max mem: 2786

Each value is the window's median with the run's mean in brackets: the first is read. The step is epoch x
iterations per epoch + iteration (epochs and iterations counted from 0), or maskrcnn-benchmark's `iter`; `time`
is seconds per iteration and `data` the data wait, never a clock.
"""

from __future__ import annotations

import re

from yieldgate.ingest.mapping import mapping_from_doc
from yieldgate.ingest.textlog.base import NUM, number
from yieldgate.ingest.textlog.mapped import mapped_format

__all__ = ["METRIC_LOGGER", "read_line"]

_HEAD = re.compile(
    r"(?:^|\s)(?:Epoch: \[(?P<epoch>\d+)\]\s+\[\s*(?P<iter>\d+)\s*/\s*(?P<iters>\d+)\]|iter: (?P<it>\d+)\s)"
)
_PAIR = re.compile(rf"(?:^|\s)(?P<key>[a-z_][a-z0-9_]*(?: mem)?): (?P<value>{NUM})(?: \({NUM}\))?(?=\s|$)")


def read_line(line: str) -> dict[str, float] | None:
    """A MetricLogger line's fields: `epoch`, `iter`, `iters` and its `name: value (mean)` pairs (the value)."""
    head = _HEAD.search(line)
    if head is None:
        return None
    pairs = {m["key"].replace(" ", "_"): number(m["value"]) for m in _PAIR.finditer(line)}
    pairs.pop("iter", None)
    pairs.pop("eta", None)  # `eta: 1 day, 2:01:04`: not a value
    if "loss" not in pairs:
        return None
    if head["it"] is not None:  # maskrcnn-benchmark: the iteration is the step
        return {**pairs, "epoch": 0.0, "iter": float(head["it"]), "iters": 0.0}
    return {**pairs, "epoch": float(head["epoch"]), "iter": float(head["iter"]), "iters": float(head["iters"])}


METRIC_LOGGER = mapped_format(
    "metriclogger",
    "Facebook Research's MetricLogger console (torchvision references, DETR, DeiT, MAE, ConvNeXt; "
    "maskrcnn-benchmark): `Epoch: [0]  [ 20/625]  eta: 0:05:01  lr: 0.0002  loss: 2.1183 (2.2517)  time: 0.4113  "
    "data: 0.0011  max mem: 2786`, `... maskrcnn_benchmark.trainer INFO: eta: 16:21:54  iter: 40  loss: 5.1431 "
    "(40.1355) ... time: 0.3982 (0.9826)  data: 0.0291 (0.1420)  lr: 0.000039  max mem: 2786`; the window's value, "
    "not the mean in brackets",
    mapping_from_doc(
        "metriclogger",
        {
            "step": {"epoch": "epoch", "iter": "iter", "iters_per_epoch": "iters", "first_epoch": 0},
            "loss": "loss",
            "times": {"time": "per_step", "data": "data_wait"},
            "names": {"lr": "lr"},
        },
    ),
    reader=read_line,
)
