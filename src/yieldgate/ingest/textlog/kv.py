"""The generic reader of `key: value` / `key=value` pairs, the `kv` format: the many loggers that print pairs
(Megatron-LM, nanotron, TorchTitan, MaxText, DeepSpeed, hand-written loops), with the step from a step key or
`iteration N/M`; and blocks of one pair per line under a `[step=N/M]` (OLMo) or `[batch=N/M]:` (Composer) line.
Megatron's reader reads its pairs with it too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from yieldgate.ingest.textlog.base import NUM, PER_DEVICE_TOKENS_PER_S, number, strip_ansi

__all__ = ["read_block", "read_pairs"]

# A key is up to eight words, each from a word's start and letters first (a timestamp or a count is not a
# key), optionally a unit in parentheses; then `:` or `=`, a number (in brackets: DeepSpeed's `lr=[0.0001]`)
# and an optional unit glued to it (`ms`, `%`, `K`, `GiB`). Possessive and bounded, so a try costs at most
# eight words: a line of prose without a `:` is one pass, not one pass per word. A number that runs on into
# `:12` or `-05` is a clock or a date (`eta: 0:01:23`, `datetime: 2024-05-01`), and one before `%|` is a
# tqdm bar's share done: not values.
_PAIR = re.compile(
    rf"(?<![\w.-])(?P<key>[A-Za-z_][\w./-]{{0,99}}+(?: [A-Za-z_][\w./-]{{0,99}}+){{0,7}}+"
    rf"(?: ?\([^()]*\))?)(?P<sep>\s*[:=]\s*)\[?(?P<value>{NUM})\]?(?!%\|)"
    rf"(?P<unit>%|[A-Za-z]+(?:/[A-Za-z]+)?)?(?![\w.]|[-:]\d)"
)
_STEP_OF_TOTAL = re.compile(r"\b(?:iteration|iter|step|steps)\s*[:=]?\s*(?P<step>\d+)\s*/\s*\d+", re.IGNORECASE)
_LONGEST = 4096  # characters; longer lines are dumps (a config, a tensor), not a step's metrics
_BLOCK_HEAD = re.compile(r"\[(?:step|batch)=(?P<step>\d+)(?:/\d+)?[^\]]*\]:?\s*$")
# `olmo.train:967`, `train.py:120`, `__main__:45`, `node-3:0`: a module, file or host with a line number or
# rank (a whole number glued to the `:`), where the line was logged from; `train.loss: 2.3` is a value.
_NOT_A_KEY = re.compile(r"[\w-]+\.[\w.]+|[\w.-]+-\d+|__\w+__")
# `Namespace(lr=0.001, steps=...)`, `TrainConfig(step=0, ...)`: an object's repr is a configuration
_REPR = re.compile(r"\b[A-Z]\w*\(\w+=")
_TAGS = re.compile(r"\[[^\[\]|]*\|[^\[\]]*\]")  # `[INFO|DP=0|PP=0|TP=0]`: the logger's tags, not metrics
_STEP_WORD = re.compile(r"\b(?:step|iter|iteration)\s+(?P<step>\d+)\b", re.IGNORECASE)
_MULTIPLIERS = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_TIME_UNITS = {"ms": "_ms", "s": "_s", "sec": "_s", "secs": "_s", "min": "_min", "h": "_h"}
# Keys that mean the step, its time or a rate only in a line of pairs (the other names are the mapping's;
# elsewhere `tokens/s` would be the tokens of a source named `s`).
_KV_ALIASES = {
    "completed_step": "step",
    "num_updates": "step",
    "it": "step",
    "tokens/s": "tokens_per_s",
    "tok/s": "tokens_per_s",
    "tok/sec": "tokens_per_s",
    "tokens/sec": "tokens_per_s",
    "seconds": "step_s",  # MaxText's `completed step: 4, seconds: 1.5` (a run's total would be `elapsed ...`)
    # Throughput of one device, not of the job: TorchTitan's `tps` ("tokens per second per device", its
    # metrics.py) and MaxText's `Tokens/s/device`. The job's tokens/s is this times the device count.
    "tps": PER_DEVICE_TOKENS_PER_S,
    "tokens/s/device": PER_DEVICE_TOKENS_PER_S,
    # OLMo's `throughput/device/tokens_per_second=45,538` and Composer's SpeedMonitor
    # `throughput/device/tokens_per_sec` (beside its job-wide `throughput/tokens_per_sec`).
    "throughput/device/tokens_per_second": PER_DEVICE_TOKENS_PER_S,
    "throughput/device/tokens_per_sec": PER_DEVICE_TOKENS_PER_S,
}
# Per-step times (a cumulative clock is `wall`, `elapsed`, `train_time`: the mapping knows those).
_STEP_TIMES = {
    "time",
    "dt",
    "step",
    "step_time",
    "iter_time",
    "iteration_time",
    "elapsed_time_per_iteration",
    "time_per_iteration",
    "time_per_step",
}
_STEP_KEYS = {"step", "iteration", "iter", "global_step"}
# A step word after an evaluation word (TorchTitan's `validate step:  1  loss: 12.2079  tps: 7,599`): the line
# holds an evaluation's values at that step, not the training step's.
_EVAL_STEP = re.compile(r"\b(?:validate|validation|eval|evaluation)\s+step\s*[:=]", re.IGNORECASE)
# Words before a step key that make it a bound or a setting, not the step (`max iteration: 5000`).
_NOT_THE_STEP = {"max", "maximum", "total", "num", "number", "warmup"}
_LEVEL = re.compile(r"^(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)\s+")  # the logger's, before the message


def _key(text: str) -> str:
    """`lm loss` -> `lm_loss`, `elapsed time per iteration (ms)` -> `elapsed_time_per_iteration_ms`; a log
    level before a key (`INFO loss: 2.3`) and words a log prefixes to its step key (`completed step: 4`) are
    dropped."""
    text = re.sub(r"\s*\(([^()]*)\)", lambda m: "_" + m.group(1).replace("/", "_per_"), _LEVEL.sub("", text.strip()))
    words = re.sub(r"-+", "_", text.lower()).split()
    if words[-1] in _STEP_KEYS and not _NOT_THE_STEP.intersection(words[:-1]):
        return words[-1]
    return "_".join(words)


def read_pairs(line: str, step: bool = True) -> dict[str, float] | None:
    """Every `key: number` / `key=number` of a line, with the step from a step key or `iteration N/M`
    (`step=False`: the pairs of a block's line, which has none)."""
    out: dict[str, float] = {}
    if len(line) > _LONGEST or _REPR.search(line):
        return None
    for m in _PAIR.finditer(_TAGS.sub(" ", line)):
        if m["sep"] == ":" and m["value"].isdigit() and _NOT_A_KEY.fullmatch(m["key"]):
            continue
        key, value, unit = _key(m["key"]), number(m["value"]), m["unit"] or ""
        if unit in _MULTIPLIERS:
            value *= _MULTIPLIERS[unit]
        elif unit == "%":
            if key == "mfu":
                value /= 100
            else:
                key += "_pct"
        elif unit.lower() in _TIME_UNITS:
            key += _TIME_UNITS[unit.lower()]
        elif unit:
            key += "_" + unit.lower().replace("/", "_per_")
        key = _KV_ALIASES.get(key, key)
        for suffix, scale in (("_ms", 1e-3), ("_s", 1.0)):
            if key.endswith(suffix) and key[: -len(suffix)] in _STEP_TIMES:
                key, value = "step_s", value * scale
        out.setdefault(key, value)
    if not step:
        return out or None
    for name in ("iteration", "iter", "global_step"):
        if "step" not in out and name in out:
            out["step"] = out.pop(name)
    # DeepSpeed's `steps: 100 loss: 3.4567 iter time (s): 1.234`; a config's `steps: 100000` has no loss
    if "step" not in out and "steps" in out and any("loss" in key for key in out):
        out["step"] = out.pop("steps")
    if not out or out.keys() == {"step"}:  # a line with a step and nothing measured is not a metrics line
        return None
    if "step" not in out:
        found = _STEP_OF_TOTAL.search(line) or _STEP_WORD.search(line)
        if found is None:
            return None
        out["step"] = float(found["step"])
    if _EVAL_STEP.search(line):
        return {key if key == "step" else "val_" + key: value for key, value in out.items()}
    return out


def read_block(line: str, lines: Sequence[str], i: int) -> tuple[int, dict[str, float]] | None:
    """The block `line` (`lines[i]`, stripped) heads: the lines after it that start with a space and hold pairs,
    their values at the head's step; (lines it took, values), or None when the line heads no block."""
    head = _BLOCK_HEAD.search(line) if len(line) <= _LONGEST else None
    if head is None:
        return None
    values, n = {"step": float(head["step"])}, 1
    while (
        i + n < len(lines) and lines[i + n][:1].isspace() and (more := read_pairs(strip_ansi(lines[i + n]), step=False))
    ):
        values.update((k, v) for k, v in more.items() if k not in values)
        n += 1
    return n, values
