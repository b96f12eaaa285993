"""The third wave of real public logs (issue 35): a real OpenMMLab text log and MMEngine `scalars.json`, and a second
fine-tuning framework (ms-swift). Registry entries in `tests.support.real_logs`' shape and the independent parsers
`tests/test_real_sources.py` measures them with (standard library only, never yieldgate code).

Provenance in tests/data/real/SOURCES.md. `WAVE3_LOGS` is appended to `REAL_LOGS`, `WAVE3_PARSERS` to its parsers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.support.real_wave2 import _entry, _series

# MMEngine's text log: `Epoch(train) [E][I/N]  lr: ...  time: T  data_time: D  loss: L ...` and, at the end of an
# evaluation, `Epoch(val) [E][n/n]    coco/AP: ...  PCK: ...  NME: ...` (the lines with metrics, not the progress
# lines `Epoch(val) [E][i/n]    eta: ...`)
_TRAIN = re.compile(r"Epoch\(train\)\s*\[(\d+)\]\[\s*(\d+)/(\d+)\]\s+(.*)$")
_VAL = re.compile(r"Epoch\(val\)\s*\[(\d+)\]\[\s*(\d+)/(\d+)\]\s+(.*)$")


def _pairs(text: str) -> dict[str, float]:
    """`name: value` pairs of a line, the name up to its colon (MMPose's `coco/AP .5` has a space in it)."""
    return {k.strip(): float(v) for k, v in re.findall(r"([A-Za-z][\w/ .()]*?):\s+(-?[\d.]+(?:e[-+]?\d+)?)", text)}


def mmengine_textlog(path: Path, params: dict) -> dict:
    """Training lines at step (E - 1) x N + I; each metrics line of an evaluation at the step that ended epoch E."""
    train: dict[str, list[tuple[int, float]]] = {c: [] for c in params["train"]}
    evals: dict[str, list[tuple[int, float]]] = {c: [] for c in params["evals"]}
    per_epoch = 0
    missing = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        found = _TRAIN.search(line)
        if found:
            epoch, it, per_epoch = int(found[1]), int(found[2]), int(found[3])
            values = _pairs(found[4])
            for c in train:
                train[c].append(((epoch - 1) * per_epoch + it, values[c]))
            continue
        found = _VAL.search(line)
        if found and "eta:" not in found[4]:
            values = _pairs(found[4])
            missing += sum(v == -1.0 for v in values.values())
            for c in evals:
                evals[c].append((int(found[1]) * per_epoch, values[c]))
    return {
        "series": {c: _series(p) for c, p in {**train, **evals}.items()},
        "minus_one_values": missing,
    }


def mmengine_scalars(path: Path, params: dict) -> dict:
    """MMEngine's vis_data/scalars.json: training rows (`epoch`, `iter`, `step` = iteration) and evaluation rows
    whose `step` is the epoch; each evaluation at the `step` of the training row before it."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    train = [r for r in rows if "loss" in r]
    evals: list[tuple[int, int, float]] = []  # (own step, step of the training row before it, value)
    last: Any = None
    for r in rows:
        if "loss" in r:
            last = r["step"]
        elif params["eval"] in r:
            evals.append((r["step"], last, r[params["eval"]]))
    return {
        "rows": len(rows),
        "loss": _series([(r["step"], r["loss"]) for r in train]),
        "time": _series([(r["step"], r["time"]) for r in train]),
        "eval_steps_are_epochs": [e[0] for e in evals] == list(range(1, len(evals) + 1)),
        "eval": _series([(e[1], e[2]) for e in evals]),
    }


_DURATION = re.compile(r"^(?:(\d+)h ?)?(?:(\d+)m ?)?(?:(\d+)s)?$")


def _seconds(text: str) -> int:
    h, m, s = (int(g or 0) for g in _DURATION.fullmatch(text).groups())  # type: ignore[union-attr]
    return h * 3600 + m * 60 + s


def ms_swift_logging(path: Path, params: dict) -> dict:
    """ms-swift's logging.jsonl: `global_step/max_steps` `done/total` strings, `elapsed_time` as `1m 42s`; training
    rows (`loss`), evaluation rows (`eval_loss`), the end-of-training summary (`train_loss`) and, last, the Trainer's
    state (`log_history`)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    logged = [r for r in rows if "global_step/max_steps" in r]

    def step(r: dict) -> int:
        return int(r["global_step/max_steps"].split("/")[0])

    train = [r for r in logged if "loss" in r]
    evals = [r for r in logged if "eval_loss" in r]
    summary = [r for r in logged if "train_loss" in r]
    return {
        "rows": len(rows),
        "state_rows": sum(isinstance(r.get("log_history"), list) for r in rows),
        "loss": _series([(step(r), r["loss"]) for r in train]),
        "learning_rate": _series([(step(r), r["learning_rate"]) for r in train]),
        "eval_loss": _series([(step(r), r["eval_loss"]) for r in evals]),
        "elapsed_s": _series([(step(r), float(_seconds(r["elapsed_time"]))) for r in train]),
        "summary_train_loss": [[step(r), r["train_loss"]] for r in summary],
        "tokens_logged": any("token" in k and "acc" not in k for r in logged for k in r),
    }


WAVE3_PARSERS = {
    "mmengine-textlog": mmengine_textlog,
    "mmengine-scalars": mmengine_scalars,
    "ms-swift-logging": ms_swift_logging,
}

WAVE3_LOGS: list[dict[str, Any]] = [
    _entry(
        "mmpose-rtmpose-ear-train-log-cut.log",
        "textlog",
        "openmmlab-mmengine-textlog",
        "mmengine-textlog",
        "MMPose (MMEngine) text log of RTMPose-s fine-tuned on an ear-keypoint set, from its first training "
        "line (the environment and config dump before it cut): `Epoch(train) [E][I/6]` lines, 6 iterations an"
        " epoch, 132 epochs (the run stopped at epoch 132, iteration 3); `time` and `data_time` are seconds "
        "per iteration (data_time ~90% of it: a data-bound run); every 10 epochs an evaluation line with "
        "coco/AP, AR, PCK, AUC (rise) and NME (falls), and -1 for the COCO scores not computed (AP (M), AR "
        "(M)).",
        {"train": ["loss", "time", "data_time", "lr"], "evals": ["coco/AP", "PCK", "NME", "AUC"]},
        {
            "series": {
                "loss": {
                    "count": 789,
                    "first": [1, 0.421912],
                    "last": [789, 0.081515],
                    "min": [787, 0.080551],
                    "max": [34, 0.423119],
                },
                "time": {
                    "count": 789,
                    "first": [1, 9.97871],
                    "last": [789, 7.476109],
                    "min": [180, 7.160982],
                    "max": [1, 9.97871],
                },
                "data_time": {
                    "count": 789,
                    "first": [1, 9.013012],
                    "last": [789, 6.900388],
                    "min": [90, 6.61881],
                    "max": [1, 9.013012],
                },
                "lr": {"count": 789, "first": [1, 4e-08], "last": [789, 0.004], "min": [1, 4e-08], "max": [20, 0.004]},
                "coco/AP": {
                    "count": 13,
                    "first": [60, 0.000891],
                    "last": [780, 0.580725],
                    "min": [60, 0.000891],
                    "max": [780, 0.580725],
                },
                "PCK": {
                    "count": 13,
                    "first": [60, 0.31746],
                    "last": [780, 0.930839],
                    "min": [240, 0.309524],
                    "max": [780, 0.930839],
                },
                "NME": {
                    "count": 13,
                    "first": [60, 0.222999],
                    "last": [780, 0.056013],
                    "min": [780, 0.056013],
                    "max": [240, 0.299049],
                },
                "AUC": {
                    "count": 13,
                    "first": [60, 0.007143],
                    "last": [780, 0.066667],
                    "min": [60, 0.007143],
                    "max": [780, 0.066667],
                },
            },
            "minus_one_values": 26,
        },
    ),
    _entry(
        "mmpretrain-vis-data-scalars.json",
        "table",
        "mmengine-vis-data-scalars-json",
        "mmengine-scalars",
        "MMEngine's vis_data/scalars.json of an MMPretrain classification fine-tune: a training row per epoch"
        " (`epoch`, `iter`, `step` = the iteration, 69 an epoch; `time` / `data_time` seconds per iteration) "
        "and an evaluation row per epoch whose `step` is the epoch (`accuracy/top1`, bare, a percentage), 59 "
        "epochs.",
        {"eval": "accuracy/top1"},
        {
            "rows": 118,
            "loss": {
                "count": 59,
                "first": [69, 1.7152580142021179],
                "last": [4071, 0.05788642740808427],
                "min": [4002, 0.03154899962246418],
                "max": [69, 1.7152580142021179],
            },
            "time": {
                "count": 59,
                "first": [69, 0.14321839809417725],
                "last": [4071, 0.12626192569732667],
                "min": [3243, 0.10301849842071534],
                "max": [69, 0.14321839809417725],
            },
            "eval_steps_are_epochs": True,
            "eval": {
                "count": 59,
                "first": [69, 43.13543701171875],
                "last": [4071, 94.15584564208984],
                "min": [69, 43.13543701171875],
                "max": [4002, 94.71243286132812],
            },
        },
    ),
    _entry(
        "ms-swift-qwen3-8b-lora-logging.jsonl",
        "table",
        "ms-swift-logging-jsonl",
        "ms-swift-logging",
        "ms-swift's logging.jsonl of a LoRA fine-tune of DeepSeek-R1-0528-Qwen3-8B (one epoch, 438 steps, a "
        "row every 10): the step only as `global_step/max_steps` (`10/438`), the clock as `elapsed_time` (`1m"
        " 42s`), eval rows every 100 steps (eval_loss, eval_token_acc), the end-of-training summary "
        "(train_loss: the run's mean) and, last, the Trainer's state with its whole log_history; no token "
        "counts; the LR starts at its peak (no warm-up).",
        {},
        {
            "rows": 51,
            "state_rows": 1,
            "loss": {
                "count": 44,
                "first": [1, 20.53074074],
                "last": [430, 0.15476817],
                "min": [410, 0.08834665],
                "max": [1, 20.53074074],
            },
            "learning_rate": {
                "count": 44,
                "first": [1, 0.0001],
                "last": [430, 8e-08],
                "min": [430, 8e-08],
                "max": [1, 0.0001],
            },
            "eval_loss": {
                "count": 5,
                "first": [100, 0.15809415],
                "last": [438, 0.12936011],
                "min": [400, 0.12932175],
                "max": [100, 0.15809415],
            },
            "elapsed_s": {"count": 44, "first": [1, 6.0], "last": [430, 2773.0], "min": [1, 6.0], "max": [430, 2773.0]},
            "summary_train_loss": [[438, 0.28420261]],
            "tokens_logged": False,
        },
    ),
]
