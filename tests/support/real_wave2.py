"""The second wave of real public logs (issue 35): registry entries, in `tests.support.real_logs`' shape, and the
independent parsers `tests/test_real_sources.py` measures them with (standard library only, never yieldgate code).

Provenance in tests/data/real/SOURCES.md. `WAVE2_LOGS` is appended to `REAL_LOGS`, `WAVE2_PARSERS` to its parsers.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any


def _points(rows: list[dict], step: str, column: str, base: int = 0) -> list[tuple[int, float]]:
    return [(int(r[step]) + base, float(r[column])) for r in rows if r.get(column) not in (None, "")]


def _value(point: tuple[int, float]) -> float:
    return point[1]


def _series(points: list[tuple[int, float]]) -> dict:
    low: tuple[int, float] = min(points, key=_value)
    high: tuple[int, float] = max(points, key=_value)
    return {
        "count": len(points),
        "first": [points[0][0], points[0][1]],
        "last": [points[-1][0], points[-1][1]],
        "min": [low[0], low[1]],
        "max": [high[0], high[1]],
    }


def json_lines(path: Path, params: dict) -> dict:
    """One JSON object per line (detectron2's metrics.json, DETR/DeiT's log.txt, LLaMA-Factory's trainer_log.jsonl):
    its rows, and per column the (step, value) series of the rows that have it."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    step = params["step_column"]
    return {
        "rows": len(rows),
        "series": {c: _series(_points(rows, step, c)) for c in params["columns"]},
    }


def csv_padded(path: Path, params: dict) -> dict:
    """A CSV whose names and cells are padded with spaces (early Ultralytics YOLOv8's results.csv)."""
    with path.open(newline="") as handle:
        rows = [{k.strip(): v.strip() for k, v in r.items()} for r in csv.DictReader(handle)]
    step = params["step_column"]
    return {
        "rows": len(rows),
        "columns": len(rows[0]),
        "series": {c: _series(_points(rows, step, c)) for c in params["columns"]},
    }


# YOLOv5's results.txt columns, in order (utils/general.py `print_results`/train.py of 2021)
YOLOV5_TXT = [
    "epoch",
    "gpu_mem",
    "box",
    "obj",
    "cls",
    "total",
    "targets",
    "img_size",
    "P",
    "R",
    "mAP@.5",
    "mAP@.5:.95",
    "val_box",
    "val_obj",
    "val_cls",
]


def yolov5_txt(path: Path, params: dict) -> dict:
    """YOLOv5's headerless results.txt: whitespace-separated, `epoch/last` first, counted from 0 (step = epoch + 1)."""
    rows = []
    for line in path.read_text().splitlines():
        cells = line.split()
        if len(cells) == len(YOLOV5_TXT):
            row = dict(zip(YOLOV5_TXT, cells, strict=True))
            row["epoch"] = str(int(row["epoch"].split("/")[0]) + 1)
            row["gpu_mem"] = row["gpu_mem"].rstrip("G")
            rows.append(row)
    return {"rows": len(rows), "series": {c: _series(_points(rows, "epoch", c)) for c in params["columns"]}}


def lmeval_aggregate(path: Path, params: dict) -> dict:
    """BigScience's lm-eval aggregate: `tokens` and `checkpoints` lists, per-task metric lists under `results`."""
    doc = json.loads(path.read_text())
    results = doc["results"]
    metrics = [(t, m) for t, ms in results.items() for m in ms if not m.endswith("_stderr")]
    return {
        "checkpoints": len(doc["checkpoints"]),
        "tasks": len(results),
        "records": len(metrics) * len(doc["checkpoints"]),
        "with_stderr": sum(f"{m}_stderr" in results[t] for t, m in metrics) * len(doc["checkpoints"]),
        "values": {
            f"{t}|{m}|{i}": [doc["checkpoints"][i], doc["tokens"][i], results[t][m][i], results[t][f"{m}_stderr"][i]]
            for t, m, i in params["points"]
        },
    }


def metric_logger(path: Path, params: dict) -> dict:
    """maskrcnn-benchmark's MetricLogger lines: `iter: N`, then `name: value (mean)`; the value, not the mean."""
    series: dict[str, list[tuple[int, float]]] = {c: [] for c in params["columns"]}
    for line in path.read_text().splitlines():
        step = re.search(r"\siter: (\d+)\s", line)
        if step is None:
            continue
        for column in params["columns"]:
            value = re.search(rf"\s{column}: ([\d.]+) \(", line)
            if value is not None:
                series[column].append((int(step[1]), float(value[1])))
    return {"series": {c: _series(p) for c, p in series.items()}}


WAVE2_PARSERS = {
    "metric-logger": metric_logger,
    "json-lines": json_lines,
    "csv-padded": csv_padded,
    "yolov5-results-txt": yolov5_txt,
    "lmeval-aggregate": lmeval_aggregate,
}


def _entry(path: str, kind: str, fmt: str, parser: str, note: str, params: dict, facts: dict) -> dict[str, Any]:
    return {"path": path, "kind": kind, "format": fmt, "parser": parser, "note": note, "params": params, "facts": facts}


def _s(count: int, first: list, last: list, low: list, high: list) -> dict:
    return {"count": count, "first": first, "last": last, "min": low, "max": high}


WAVE2_LOGS: list[dict[str, Any]] = [
    _entry(
        "detectron2-fruits-faster-rcnn-metrics.json",
        "table",
        "detectron2-metrics-json",
        "json-lines",
        "detectron2's output/metrics.json (JSONWriter: one object per line, named .json): a Faster R-CNN fine-tune "
        "on 3 fruit classes, 300 iterations; training rows every 20 iterations with total_loss beside its terms "
        "(loss_cls, loss_box_reg, loss_rpn_*), lr, and `time` / `data_time` in seconds per iteration (not a clock); "
        "COCO evaluation at 99, 199 and 300 (bbox/AP, AP50, AP75; APs NaN: no small objects), the last on a row of "
        "its own at iteration 300.",
        {"step_column": "iteration", "columns": ["total_loss", "lr", "bbox/AP", "bbox/AP50", "time"]},
        {
            "rows": 16,
            "series": {
                "total_loss": _s(
                    15,
                    [19, 2.632075755856931],
                    [299, 0.4286037251627022],
                    [299, 0.4286037251627022],
                    [19, 2.632075755856931],
                ),
                "lr": _s(15, [19, 1.60675e-05], [299, 0.0002491675], [19, 1.60675e-05], [299, 0.0002491675]),
                "bbox/AP": _s(
                    3,
                    [99, 23.934527287997305],
                    [300, 75.7732398239824],
                    [99, 23.934527287997305],
                    [300, 75.7732398239824],
                ),
                "bbox/AP50": _s(3, [99, 53.33145880677639], [300, 100.0], [99, 53.33145880677639], [300, 100.0]),
                "time": _s(
                    15,
                    [19, 1.1115185959997689],
                    [299, 1.2972766874991066],
                    [19, 1.1115185959997689],
                    [239, 1.3934526059993004],
                ),
            },
        },
    ),
    _entry(
        "deit-tiny-log.txt",
        "table",
        "fb-research-log-txt",
        "json-lines",
        "facebookresearch/deit's outputs/log.txt (the DETR/DeiT/MAE/ConvNeXt main.py: one JSON object per epoch, "
        "named log.txt): DeiT-tiny, train_lr, train_loss, test_acc1, epoch, n_parameters; two launches appended "
        "epochs 0-1 twice before the run that reached epoch 70 (the steps go back twice).",
        {"step_column": "epoch", "columns": ["train_loss", "test_acc1", "train_lr"]},
        {
            "rows": 73,
            "series": {
                "train_loss": _s(
                    73,
                    [0, 4.177725998560588],
                    [70, 3.552252588272095],
                    [65, 3.5493525060017905],
                    [0, 4.177725998560588],
                ),
                "test_acc1": _s(
                    73,
                    [0, 0.3235215960918273],
                    [70, 0.5781395354391728],
                    [1, 0.3191805101955848],
                    [69, 0.5786267999695781],
                ),
                "train_lr": _s(
                    73,
                    [0, 9.999999999999985e-07],
                    [70, 0.0004387772120594622],
                    [0, 9.999999999999985e-07],
                    [6, 0.000499664236014871],
                ),
            },
        },
    ),
    _entry(
        "llamafactory-mistral-translator-trainer_log.jsonl",
        "table",
        "llamafactory-trainer-log-jsonl",
        "json-lines",
        "LLaMA-Factory's trainer_log.jsonl of a LoRA fine-tune of Mistral-7B-v0.2 (translation), 8660 steps over 4 "
        "epochs, a line every 10 steps: current_steps, loss, learning_rate, epoch, elapsed_time as H:MM:SS, "
        "total_tokens 0 (not counted); the last line is the end-of-training summary without a loss.",
        {"step_column": "current_steps", "columns": ["loss", "learning_rate"]},
        {
            "rows": 867,
            "series": {
                "loss": _s(866, [10, 2.4977], [8660, 0.1333], [7330, 0.0935], [40, 2.8357]),
                "learning_rate": _s(
                    866, [10, 5.773672055427253e-07], [8660, 0.0], [8660, 0.0], [870, 4.999996750557592e-05]
                ),
            },
        },
    ),
    _entry(
        "yolov8-fire-smoke-results.csv",
        "table",
        "ultralytics-v8-padded-results-csv",
        "csv-padded",
        "Early Ultralytics YOLOv8's runs/detect/train/results.csv (fire and smoke detection, 25 epochs): every "
        "name and cell padded to a fixed width, epochs counted from 0, lr/pg0-2, no total loss.",
        {"step_column": "epoch", "columns": ["metrics/mAP50-95(B)", "lr/pg0", "train/box_loss"]},
        {
            "rows": 25,
            "columns": 14,
            "series": {
                "metrics/mAP50-95(B)": _s(25, [0, 0.05583], [24, 0.45929], [0, 0.05583], [24, 0.45929]),
                "lr/pg0": _s(25, [0, 0.070545], [24, 0.000892], [24, 0.000892], [0, 0.070545]),
                "train/box_loss": _s(25, [0, 1.6878], [24, 0.93868], [24, 0.93868], [0, 1.6878]),
            },
        },
    ),
    _entry(
        "yolov5-mushrooms-results.txt",
        "textlog",
        "yolov5-results-txt",
        "yolov5-results-txt",
        "YOLOv5's headerless runs/train/exp/results.txt (2021), mushroom detection, 30 epochs counted from 0: "
        "epoch/last, gpu_mem, box, obj, cls, total, targets, img_size, P, R, mAP@.5, mAP@.5:.95, val box, obj, cls.",
        {"columns": ["total", "mAP@.5", "val_box"]},
        {
            "rows": 30,
            "series": {
                "total": _s(30, [1, 0.1917], [30, 0.1364], [30, 0.1364], [2, 0.1939]),
                "mAP@.5": _s(30, [1, 0.004895], [30, 0.5145], [1, 0.004895], [28, 0.5198]),
                "val_box": _s(30, [1, 0.09176], [30, 0.04726], [30, 0.04726], [3, 0.0968]),
            },
        },
    ),
]

WAVE2_LOGS.append(
    _entry(
        "maskrcnn-benchmark-mask-rcnn-log.txt",
        "textlog",
        "maskrcnn-benchmark-metriclogger",
        "metric-logger",
        "maskrcnn-benchmark's outputs/log.txt (2019, Mask R-CNN, 9620 iterations, a line every 20): its config dump, "
        "then `maskrcnn_benchmark.trainer INFO: eta: ...  iter: N  loss: v (mean)  loss_*: ...  time: v (mean)  "
        "data: v (mean)  lr: ...  max mem: ...` (Facebook Research's MetricLogger, as torchvision's references, "
        "DETR and DeiT print it): `time` and `data` are seconds per iteration, not a clock; the loss is the total.",
        {"columns": ["loss", "time", "data"]},
        {
            "series": {
                "loss": _s(481, [20, 45.1925], [9620, 1.2627], [500, 1.0721], [20, 45.1925]),
                "time": _s(481, [20, 0.3803], [9620, 0.7787], [20, 0.3803], [5360, 0.9871]),
                "data": _s(481, [20, 0.0306], [9620, 0.0357], [200, 0.0272], [1300, 0.0635]),
            },
        },
    )
)

_AGGREGATE_POINTS = [["arc_easy", "acc", 0], ["hellaswag", "acc_norm", 33], ["lambada", "ppl", 10]]

WAVE2_SHARED: list[dict[str, Any]] = [
    _entry(
        "lmeval-aggregate-bigscience-tr3e-1b3-c4.json",
        "lm-eval",
        "lm-eval-aggregate-under-results",
        "lmeval-aggregate",
        "BigScience's aggregate of lm-eval results of tr3e-1B3 on C4: 28 tasks at 34 checkpoints in one JSON, the "
        "per-task metric lists under `results` beside `tokens` and `checkpoints` (steps).",
        {"points": _AGGREGATE_POINTS},
        {
            "checkpoints": 34,
            "tasks": 28,
            "records": 1428,
            "with_stderr": 1360,
            "values": {
                "arc_easy|acc|0": [19500, 10044178432, 0.4713804713804714, 0.01024296261792719],
                "hellaswag|acc_norm|33": [117000, 112280338432, 0.550687114120693, 0.004964075870120337],
                "lambada|ppl|10": [45000, 36782866432, 19.773001152615144, 0.6377795946534752],
            },
        },
    ),
]
