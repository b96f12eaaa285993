"""What a text log says once or in passing, beyond each line's values:
- **Its clock.** A timestamp that starts a record's line (`2024-01-02 10:11:12,345 INFO ...`,
  `[2024-01-02 10:11:12] iteration 10/...`, `2024-01-02T10:11:12.345Z`; without a year, glog's `I0317 10:00:13` and
  detectron2's `[11/17 15:16:42]`, where no line has a dated one) gives the record's `timestamp`,
  seconds since the log's first timestamp (a line's leading one, or Megatron's `[...] datetime: ...` marks
  of its start-up phases: the job's start, setup included), which the mapping reads as `wall_s`. A log's
  own clock (`train_time`, `elapsed`) keeps precedence.
- **Its device count**, where the trainer prints it (`world size: 8`; Megatron's data x tensor x pipeline
  parallel sizes; `number of GPUs: 8`; Lightning's `MEMBER: 1/8`): per-device-hour yields need it.
- **Its batch in tokens**, where the trainer prints its global batch and sequence length (TorchTitan).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from yieldgate.ingest.clean import unix_seconds
from yieldgate.ingest.textlog.base import PER_DEVICE_TOKENS_PER_S, strip_ansi
from yieldgate.ingest.types import Rows, Warnings

__all__ = ["batch_tokens", "clock", "device_count", "per_device_throughput"]

# A date-time at the start of a line, bare or in brackets, after at most two bracketed tags (TorchTitan's
# `[titan] 2025-01-02 10:11:12,345 - root - INFO - ...`) or Coqui TTS's `--> TIME:` that heads a step's block: ISO
# with `T` or a space, optional fraction (`.` or logging's `,`) and zone; the date's parts split by `-` or by `/`
# (PaddlePaddle's logger: `[2022/12/09 15:54:51] root INFO: ...`).
_STAMP = re.compile(
    r"^\s*(?:-->\s*TIME:\s*)?(?:\[[A-Za-z][^\]]{0,40}\]\s*){0,2}\[?"
    r"(?P<ts>\d{4}(?P<sep>[-/])\d{2}(?P=sep)\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?)(?![\d:])"
)
# nanotron's `08/31/2024 14:37:31 [INFO|DP=0|PP=0|TP=0]: iteration: 1 / 15 | ...` (month first, as logging's
# `%m/%d/%Y %H:%M:%S` writes it).
_US_STAMP = re.compile(r"^\s*(?P<m>\d{2})/(?P<d>\d{2})/(?P<y>\d{4}) (?P<t>\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?)(?![\d:])")
# absl / glog's `I0317 10:00:13.224641 140234 train.py:123] ...` (MaxText, JAX, TensorFlow): month and day, no
# year; used only where no line of the log has a dated stamp (a year is needed to mix the two).
_GLOG = re.compile(r"^\s*[IWEF](?P<m>\d{2})(?P<d>\d{2}) (?P<t>\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)\s")
# logging's `%m/%d %H:%M:%S`, bare or bracketed (detectron2's and fvcore's `[11/17 15:16:42] d2.utils.events INFO:
# ...`): month and day, no year, read as glog's is.
_MONTH_DAY = re.compile(r"^\s*\[?(?P<m>\d{2})/(?P<d>\d{2}) (?P<t>\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?)(?![\d:/])")
_GLOG_YEAR = "2000"  # a leap year, so 0229 reads; only differences between stamps are used
_MARK = re.compile(r"\bdatetime:\s*(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2})")  # Megatron's phase marks
_HEAD_LINES = 5000  # device counts are printed at start-up
# (pattern, what it counts): the first that matches in the log's head gives the device count.
_DEVICES = (
    (re.compile(r"\bworld[ _]size\b\s*(?:[:=]|\.{2,})\s*(\d{1,9})(?!\d)", re.IGNORECASE), "world size"),
    (re.compile(r"\bWORLD_SIZE\s*[:=]\s*(\d{1,9})(?!\d)"), "world size"),
    (
        re.compile(
            r"\b(?:number of|num|n)[ _](?:gpus|devices|accelerators)\b\s*[:=]?\s*(\d{1,9})(?!\d)", re.IGNORECASE
        ),
        "number of devices",
    ),
    (re.compile(r"\bMEMBER:\s*\d+/(\d{1,9})(?!\d)"), "distributed members"),
)
# Composer's config banner: `num_gpus_per_node: 8` and, on the next lines, `num_nodes: 2`.
_PER_NODE = re.compile(r"^\s*num_gpus_per_node:\s*(\d{1,9})\s*$")
_NODES = re.compile(r"^\s*num_nodes:\s*(\d{1,9})\s*$")
_PARALLEL = re.compile(r"\b(data|tensor-model|pipeline-model|context)-parallel size:\s*(\d{1,9})(?!\d)")
# TorchTitan's device mesh: `Building device mesh with parallelism: pp=1, dp_replicate=1, dp_shard=8, cp=1, tp=1,
# ep=1, etp=1` (its world size is pp x dp_replicate x dp_shard x cp x tp: experts borrow from those), and the
# older `Building 2-D device mesh with ['dp_shard', 'tp'], [4, 2]`.
_TITAN_MESH = re.compile(r"Building device mesh with parallelism:\s*(?P<sizes>(?:\w+=\d{1,9},?\s*)+)")
_TITAN_WORLD = ("pp", "dp_replicate", "dp_shard", "cp", "tp")
_ND_MESH = re.compile(r"Building \d-D device mesh with \[[^\]]*\],\s*\[(?P<sizes>[\d, ]{1,60})\]")
# Tokens per optimizer step where a trainer prints its batch: TorchTitan's `Trainer is initialized with local
# batch size 4, global batch size 384, gradient accumulation steps 12, sequence length 2048, ...`.
_BATCH_TOKENS = re.compile(r"\bglobal batch size (?P<batch>\d{1,9}),.{0,80}?\bsequence length (?P<seq>\d{1,9})\b")


def _stamp(line: str) -> str | None:
    """The dated timestamp that starts `line` (ISO, bracketed, or month/day/year), as ISO text."""
    if line[:1] not in " \t[0123456789\x1b":
        return None
    text = strip_ansi(line)
    if m := _STAMP.match(text):
        return m["ts"].replace(",", ".").replace("/", "-")
    if m := _US_STAMP.match(text):
        return f"{m['y']}-{m['m']}-{m['d']} {m['t'].replace(',', '.')}"
    return None


def _glog_stamp(line: str) -> str | None:
    """A timestamp of month and day without a year that starts `line` (glog's `I0317 10:00:13.224641`, logging's
    `[11/17 15:16:42]`), as ISO text in a fixed year."""
    m = _GLOG.match(line) if line[:1] in " \tIWEF" else None
    if m is None and line[:1] in " \t[0123456789":
        m = _MONTH_DAY.match(line)
    return f"{_GLOG_YEAR}-{m['m']}-{m['d']} {m['t'].replace(',', '.')}" if m else None


def _mark(line: str) -> str | None:
    m = _MARK.search(line) if "datetime:" in line else None
    return m["ts"] if m else None


def device_count(lines: Sequence[str], path: Path) -> tuple[int, str] | None:
    """The device count a log prints at start-up: its world size, else data x tensor x pipeline (x context)
    parallel sizes, else a number of GPUs; with where it was read."""
    for i, line in enumerate(lines[:_HEAD_LINES]):
        for rx, what in _DEVICES:
            m = rx.search(line)
            if m and int(m.group(1)) > 0:
                return int(m.group(1)), f"{path}:{i + 1} ({what})"
        if (per_node := _PER_NODE.match(line)) and int(per_node[1]) > 0:
            nodes = next((int(m[1]) for near in lines[i + 1 : i + 10] if (m := _NODES.match(near))), 1)
            return int(per_node[1]) * max(nodes, 1), f"{path}:{i + 1} (GPUs per node x nodes)"
        sizes = dict(_PARALLEL.findall(line))
        if "data" in sizes:
            n = int(np.prod([int(v) for v in sizes.values()]))
            return n, f"{path}:{i + 1} (data x tensor x pipeline parallel sizes)"
        if "device mesh" in line and (m := _TITAN_MESH.search(line) or _ND_MESH.search(line)):
            if m.re is _TITAN_MESH:
                named = dict(re.findall(r"(\w+)=(\d+)", m["sizes"]))
                factors = [int(named[k]) for k in _TITAN_WORLD if k in named]
            else:
                factors = [int(v) for v in re.findall(r"\d+", m["sizes"])]
            if factors and min(factors) > 0:
                return int(np.prod(factors)), f"{path}:{i + 1} (device mesh)"
    return None


def batch_tokens(lines: Sequence[str], path: Path) -> tuple[float, str] | None:
    """Tokens per optimizer step where the log prints its global batch and sequence length at start-up."""
    for i, line in enumerate(lines[:_HEAD_LINES]):
        m = _BATCH_TOKENS.search(line) if "global batch size" in line else None
        if m and int(m["batch"]) > 0 and int(m["seq"]) > 0:
            return (
                float(int(m["batch"]) * int(m["seq"])),
                f"global batch size {m['batch']} x sequence length {m['seq']}, {path}:{i + 1}",
            )
    return None


def per_device_throughput(rows: Rows, devices: tuple[int, str] | None, warnings: Warnings) -> None:
    """A per-device tokens/s (TorchTitan's `tps`, MaxText's `Tokens/s/device`) times the device count is the job's
    `tokens_per_s`; with no device count it stays an extra under its own name, said in a warning."""
    name = PER_DEVICE_TOKENS_PER_S
    if name not in rows.values or "tokens_per_s" in rows.values:
        return
    if devices is None:
        warnings.add(
            "devices",
            f"{rows.source}: tokens/s is logged per device and the device count is unknown: "
            f"kept as {name}, no tokens_per_s (give devices to have it)",
        )
        return
    rows.values["tokens_per_s"] = rows.values.pop(name) * devices[0]
    rows.present["tokens_per_s"] = rows.present.pop(name)
    warnings.add("devices", f"{rows.source}: tokens_per_s = tokens/s per device x {devices[0]} devices ({devices[1]})")


def clock(lines: Sequence[str], where: Sequence[int]) -> tuple[np.ndarray, float] | None:
    """Unix time of each record (the timestamp its first line starts with, NaN where none), and of the
    log's first timestamped line; None when no line starts with one."""
    stamp = _stamp
    first = next((s for line in lines if (s := _stamp(line) or _mark(line)) is not None), None)
    if first is None:
        stamp = _glog_stamp
        first = next((s for line in lines if (s := _glog_stamp(line)) is not None), None)
    if first is None:
        return None
    stamps = pd.Series([stamp(lines[i]) or "" for i in where] + [first], dtype=object)
    seconds = unix_seconds(stamps)
    return seconds[:-1], float(seconds[-1])
