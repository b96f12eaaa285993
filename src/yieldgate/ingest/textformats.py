"""The plain-text training logs of well-known trainers, read without a hand-written pattern.

Public training runs leave their logs as printed text, each trainer in its own shape. A `LogFormat` turns
one line into values under names the mapping already understands (`loss`, `val_loss`, `lr`, `step_s`,
`mfu` as a fraction, ...), with the units converted where the format fixes them: milliseconds to seconds,
a percentage MFU to a fraction, fairseq's base-2 losses to nats. `detect` picks the format that reads the
most lines of a file; `kv`, the generic `key: value` / `key=value` reader, comes last and catches the
many loggers that print pairs (Megatron-LM, nanotron, TorchTitan, MaxText, DeepSpeed, ...).

A value that says it is not yet measured (nanoGPT prints an MFU of -100% until it has five steps) is
absent, not a number.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from yieldgate.errors import InputError
from yieldgate.ingest.clean import parse_json

__all__ = ["FORMATS", "LogFormat", "PER_DEVICE_TOKENS_PER_S", "detect", "strip_ansi"]

PER_DEVICE_TOKENS_PER_S = "tokens_per_s_per_device"
"""A log's name for one device's tokens/s; the import multiplies it by the device count into `tokens_per_s`."""

# A number as loggers print it: 12, -3.5, .5, 1.5E-04, 1,234,567 (thousands separators), nan, NaN, -inf.
# `\d+(?:\.\d*)?`, not `\d+\.?\d*`: that splits a run of n digits n ways, n^2 steps before a mismatch.
_NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])|\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?i:nan|inf)\b"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RANK = re.compile(r"^(?:\[(?:default|rank)\d+\]:|\d{1,5}: )")
_LN2 = math.log(2.0)


def strip_ansi(line: str) -> str:
    """The line without terminal colour codes (TorchTitan, rich and tqdm colour what they print) and without
    the rank a launcher puts before each line (torchrun's `[default0]:`, `[rank0]:`; srun --label's `0: `)."""
    line = _ANSI.sub("", line) if "\x1b" in line else line
    return _RANK.sub("", line, count=1) if line[:1] in "[0123456789" and line else line


def _number(text: str) -> float:
    return float(text.replace(",", ""))


@dataclass(frozen=True)
class Line:
    """One kind of line: a regex whose named groups are values. `names` renames a group (a regex group
    cannot hold `/`), `scale` converts its unit; a group left out of the match is absent."""

    regex: str
    names: Mapping[str, str] = field(default_factory=dict)
    scale: Mapping[str, float] = field(default_factory=dict)

    def read(self, line: str) -> dict[str, float] | None:
        """The line's values, or None when the regex does not match it."""
        m = re.search(self.regex, line)
        if m is None:
            return None
        out = {}
        for group, text in m.groupdict().items():
            if text is not None:
                out[self.names.get(group, group)] = _number(text) * self.scale.get(group, 1.0)
        return out


@dataclass(frozen=True)
class LogFormat:
    """One trainer's log: its kinds of line, tried in order, and `reader` last."""

    name: str
    """Its `--format` name."""
    about: str
    """Who prints it, and a line of it."""
    lines: Sequence[Line] = ()
    """Its kinds of line, each read by a regex."""
    reader: Callable[[str], dict[str, float] | None] | None = None
    """A reader for formats a regex per line cannot express (pairs in any order)."""
    blocks: bool = False
    """Also read blocks: a line ending in `[step=N]` or `[batch=N/M]:`, then indented lines of pairs."""
    scan: Callable[[Sequence[str]], Iterator[tuple[int, int, dict[str, float]]]] | None = None
    """A reader of the whole log instead of `lines` and `reader`, for a format whose lines take their step from
    lines before them (Keras' `Epoch 3/10` headers)."""
    note: str = ""
    """What an import of this format says about its steps (`steps count epochs`), when that needs saying."""
    ahead: bool = False
    """Lines without a step belong to the step printed next (build-nanogpt evaluates before it prints the step's
    line), not to the one before."""
    epochs: bool = False
    """Its steps count epochs (one line per epoch), not optimizer steps."""

    def records(self, lines: Sequence[str]) -> Iterator[tuple[int, int, dict[str, float]]]:
        """(index of the record's first line, lines it took, values) of each record in `lines`.

        A reader's values without a step (Megatron's evaluation "at the end of training") belong to the step
        of the record before them; with none before, the line is not read."""
        if self.scan is not None:
            yield from self.scan([strip_ansi(line) for line in lines])
            return
        i, last = 0, None
        pending: list[tuple[int, dict[str, float]]] = []  # stepless values waiting for the next step (`ahead`)
        while i < len(lines):
            line = strip_ansi(lines[i])
            head = _BLOCK_HEAD.search(line) if self.blocks and len(line) <= _LONGEST else None
            if head is not None:
                values, n = {"step": float(head["step"])}, 1
                while (
                    i + n < len(lines)
                    and lines[i + n][:1].isspace()
                    and (more := read_pairs(strip_ansi(lines[i + n]), step=False))
                ):
                    values.update((k, v) for k, v in more.items() if k not in values)
                    n += 1
                if n > 1:
                    last = values["step"]
                    yield i, n, values
                i += n
                continue
            read = self.read(line, None if self.ahead else last)
            if read is not None:
                last = read["step"]
                for j, waiting in pending:
                    yield j, 1, {**waiting, "step": last}
                pending = []
                yield i, 1, read
            elif self.ahead and (stepless := self._stepless(line)):
                pending.append((i, stepless))
            i += 1

    def _stepless(self, line: str) -> dict[str, float] | None:
        """The values of a line of this format that carries no step."""
        return next((values for kind in self.lines if (values := kind.read(line)) and "step" not in values), None)

    def read(self, line: str, last_step: float | None = None) -> dict[str, float] | None:
        """The line's values with a whole `step`, or None when the line is not one of this format's.
        `last_step` is the step of values that a reader returns without one."""
        readers = [kind.read for kind in self.lines] + ([self.reader] if self.reader is not None else [])
        for read in readers:
            values = read(line)
            if values is not None and "step" not in values and last_step is not None:
                values["step"] = last_step
            step = values.get("step", -1.0) if values is not None else -1.0
            if values is not None and step >= 0 and step.is_integer():
                if values.get("mfu", 0.0) < 0:  # nanoGPT's placeholder before it has measured anything
                    del values["mfu"]
                return values
        return None


# --- generic pairs --------------------------------------------------------------------------------------

# A key is up to eight words, each from a word's start and letters first (a timestamp or a count is not a
# key), optionally a unit in parentheses; then `:` or `=`, a number (in brackets: DeepSpeed's `lr=[0.0001]`)
# and an optional unit glued to it (`ms`, `%`, `K`, `GiB`). Possessive and bounded, so a try costs at most
# eight words: a line of prose without a `:` is one pass, not one pass per word. A number that runs on into
# `:12` or `-05` is a clock or a date (`eta: 0:01:23`, `datetime: 2024-05-01`), and one before `%|` is a
# tqdm bar's share done: not values.
_PAIR = re.compile(
    rf"(?<![\w.-])(?P<key>[A-Za-z_][\w./-]{{0,99}}+(?: [A-Za-z_][\w./-]{{0,99}}+){{0,7}}+"
    rf"(?: ?\([^()]*\))?)(?P<sep>\s*[:=]\s*)\[?(?P<value>{_NUM})\]?(?!%\|)"
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
        key, value, unit = _key(m["key"]), _number(m["value"]), m["unit"] or ""
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


# --- the formats ----------------------------------------------------------------------------------------

_MEGATRON_ITERATION = re.compile(r"\biteration\s+\d+\s*/\s*\d+\s*\|")
_FAIRSEQ_NAMES = {
    "loss": "loss",
    "nll_loss": "nll_loss",
    "wps": "tokens_per_s",
    "lr": "lr",
    "gnorm": "grad_norm",
    "loss_scale": "signals/loss_scale",
    "wall": "wall_s",
    "ppl": "ppl",
    "ups": "updates_per_s",
    "wpb": "tokens_per_batch",
    "bsz": "samples_per_batch",
}


# fairseq's `--log-format json` (fairseq-hydra-train's default): `[time][train_inner][INFO] - {"epoch": 1, ...,
# "loss": "9.276", "num_updates": "200", ...}`; `[valid]` records prefix each name with the subset.
_FAIRSEQ_JSON = re.compile(
    r"\[(?P<kind>train_inner|valid(?:_(?P<subset>\w+))?)\](?:\[\w+\])?"
    r"\s*-\s*(?P<json>\{.*\})\s*$"
)


def _fairseq_json(line: str) -> dict[str, float] | None:
    m = _FAIRSEQ_JSON.search(line) if "{" in line else None
    if m is None:
        return None
    try:
        record = parse_json(m["json"])
    except ValueError:  # not JSON (nested too deeply included): not a fairseq record
        return None
    if not isinstance(record, dict):
        return None
    valid = m["kind"].startswith("valid")
    prefix = m["kind"] + "_" if valid else ""
    pairs = {}
    for key, text in record.items():
        if isinstance(key, str) and key.startswith(prefix) and isinstance(text, (str, int, float)):
            try:
                pairs[key[len(prefix) :]] = float(text)
            except ValueError:
                continue
    return _fairseq_values(valid, m["subset"], pairs)


def fairseq_name(key: str, valid: bool, subset: str | None) -> tuple[str, float] | None:
    """Our name for a fairseq statistic and the factor to our units (its losses are in bits: to nats), or None
    for one we do not read. A validation (`valid: True`; `subset`: a second validation set, its own source) keeps
    its losses and perplexity only (not its speed, nor `best_loss`, the best so far)."""
    if key not in _FAIRSEQ_NAMES or (valid and key not in ("loss", "nll_loss", "ppl")):
        return None
    name = _FAIRSEQ_NAMES[key]
    if valid:
        name = f"val/{subset}/{name}" if subset else "val_" + name
    return name, _LN2 if key in ("loss", "nll_loss") else 1.0


def _fairseq_values(valid: bool, subset: str | None, pairs: Mapping[str, float]) -> dict[str, float] | None:
    """A fairseq record's values under our names (losses from bits to nats), or None without its step."""
    if "num_updates" not in pairs:
        return None
    out = {"step": pairs["num_updates"]}
    for key, value in pairs.items():
        named = fairseq_name(key, valid, subset)
        if named is not None:
            out[named[0]] = value * named[1]
    return out


def _fairseq(line: str) -> dict[str, float] | None:
    """fairseq's `simple`/`none` log lines: `train_inner` (every --log-interval updates) and `valid` (per
    validation), and the same records as JSON. Its losses are in bits (base 2): converted to nats. The
    per-epoch `train` summary (the epoch's mean) is not a step's value and is skipped."""
    if "{" in line:
        return _fairseq_json(line)
    m = re.search(r"\|\s*(?P<kind>train_inner|valid(?:_(?P<subset>\w+))?)\s*\|(?P<rest>.*)$", line) or re.search(
        r"^(?P<kind>)\|?\s*epoch \d+:\s+\d+\s*/\s*\d+\s+(?P<rest>\w+=.*)$", line
    )
    if m is None:
        return None
    valid = m["kind"].startswith("valid")
    subset = m.groupdict().get("subset")  # `valid_wiki`: a second validation set, its own source
    pairs = {key: _number(text) for key, text in re.findall(rf"(?<!\w)(\w+)(?:=|\s+)({_NUM})(?=[,|\s]|$)", m["rest"])}
    return _fairseq_values(valid, subset, pairs)


# ` validation loss at iteration 1000 | lm loss value: ...`, and the other evaluations Megatron-LM,
# Megatron-DeepSpeed and GPT-NeoX print: `... at iteration 5000 on validation set |`, `... on test set |`,
# `... at iteration 0 [wiki] |` (one of several validation sets), `... at the end of training for test data |`,
# NeoX's ` validation results at iteration 100 | lm_loss value: ...` and ` test results at the end of training`.
_MEGATRON_EVAL = re.compile(
    r"\b(?P<split>validation|test) (?:loss|results) at (?:iteration (?P<step>\d+)|the end of training"
    r"(?: for (?P<data>\w+) data)?)(?: on (?P<set>\w[\w -]{0,60}?) set| \[(?P<panel>[^\]|]{1,60})\])?"
    r"\s*\|(?P<rest>.*)$"
)
_VALIDATION_SETS = {None, "val", "valid", "validation"}


def _eval_task(split: str, data: str | None, named: str | None, panel: str | None) -> str:
    """`val`, `test` or `val/<name>`: each evaluation set is its own task, so a test-set loss never takes
    the place of the validation loss at the same step."""
    if "test" in (split, data, named):
        return "test"
    if panel is not None or named not in _VALIDATION_SETS:
        name = re.sub(r"\W+", "_", (panel or named or "").strip()).strip("_").lower()
        return f"val/{name}" if name else "val"
    return "val"


def _megatron(line: str) -> dict[str, float] | None:
    """Megatron's training line, ` iteration  N/  M | name: value | ...` (its pairs, its own words for names),
    and its evaluation lines, each set's loss and perplexity under its own task (`val/loss`, `test/loss`,
    `val/<set>/loss`)."""
    if _MEGATRON_ITERATION.search(line):
        return read_pairs(line)
    m = _MEGATRON_EVAL.search(line) if "at " in line else None
    if m is None:
        return None
    pairs = read_pairs(m["rest"], step=False) or {}
    loss = next((v for k, v in pairs.items() if "loss" in k and "ppl" not in k), None)
    if loss is None:
        return None
    task = _eval_task(m["split"], m["data"], m["set"] and m["set"].strip().lower(), m["panel"])
    out = {f"{task}/loss": loss}
    ppl = next((v for k, v in pairs.items() if "ppl" in k), None)
    if ppl is not None:
        out[f"{task}/ppl"] = ppl
    if m["step"] is not None:
        out["step"] = float(m["step"])
    return out


# Keras' `model.fit` output: an `Epoch 3/10` header, then the epoch's line: Keras 2 `3083s - loss: 1.7197 - acc:
# 0.5893 - val_loss: 0.3504 - val_acc: 0.8959` (or after a `[=====]` bar), Keras 3 `7/7 ━━━━━━━━━━━━━━━━━━━━ 7s
# 1s/step - accuracy: 0.5672 - loss: 0.6807 - val_accuracy: 0.5179 - val_loss: 0.6897`. The time before the first
# pair is the epoch's (per-batch times, `50us/step`, are left out); a bar still running (`ETA: 12s`) is not
# the epoch's line.
_KERAS_EPOCH = re.compile(r"^\s*Epoch (?P<epoch>\d+)/(?P<epochs>\d+)\s*$")
_KERAS_LINE = re.compile(
    rf"(?:^|\s)(?P<time>\d+(?:\.\d+)?)(?P<unit>ms|s)(?:\s+\S+/step)?\s+-\s+"
    rf"(?P<pairs>\w+: (?:{_NUM})(?:\s+-\s+\w+: (?:{_NUM}))*)\s*$"
)
_KERAS_PAIR = re.compile(rf"(\w+): ((?:{_NUM}))")


def _keras(lines: Sequence[str]) -> Iterator[tuple[int, int, dict[str, float]]]:
    """Each epoch's line, at step = the epochs run so far: a fit that starts again at `Epoch 1/N` (a second
    `fit` call, training on) is counted on from the last epoch of the one before."""
    epoch, offset, last, start = 0, 0, 0, 0  # epoch 0: no header yet
    for i, line in enumerate(lines):
        if (head := _KERAS_EPOCH.match(line)) is not None:
            if epoch and int(head["epoch"]) <= epoch:
                offset += last
            epoch, start = int(head["epoch"]), i
            continue
        m = _KERAS_LINE.search(line) if epoch and " - " in line and "ETA" not in line else None
        if m is None:
            continue
        values = {name: _number(text) for name, text in _KERAS_PAIR.findall(m["pairs"])}
        if not any("loss" in name for name in values):
            continue
        values["step_s"] = _number(m["time"]) * (1e-3 if m["unit"] == "ms" else 1.0)
        values["step"] = float(offset + epoch)
        last = epoch
        yield start, i - start + 1, values  # the header, what Keras printed under it, the epoch's line


# tqdm's progress bars as a log file keeps them, each refresh after a carriage return: `Epoch 3:  42%|████ | 197/469
# [00:03<00:04, 55.1it/s, loss=0.412, v_num=0]` (PyTorch Lightning), `epoch 1/10: 100%|███| 153/153 [00:03<00:00,
# 44.5it/s, loss=0.783]` (many hand-written loops). The count is the batches of the bar's epoch, the elapsed time
# the bar's own, and the values after the rate its postfix.
_TQDM = re.compile(
    r"^(?P<desc>[^|]*?):?\s*\d+%\|[^|]*\|\s*(?P<n>\d{1,15})/(?P<total>\d{1,15})\s*"
    r"\[(?P<elapsed>\d+(?::\d+){1,2})<[^,\]]*,[^,\]]*(?:,\s*(?P<post>[^\]]*))?\]"
)
_TQDM_EPOCH = re.compile(r"(?i)\bepoch\s*(?P<epoch>\d+)")
_TQDM_EVAL = re.compile(r"(?i)^\s*(?:valid|validation|val|eval|evaluating|evaluation|test|testing)\b")
_TQDM_PAIR = re.compile(rf"(?<!\w)(\w+)=((?:{_NUM}))(?=,|\s|$)")  # tried once per word


def _seconds(clock: str) -> float:
    """`01:02:03` or `02:03` in seconds."""
    seconds = 0.0
    for part in clock.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def _tqdm(lines: Sequence[str]) -> Iterator[tuple[int, int, dict[str, float]]]:
    """Each refresh of a training bar with values in its postfix, at step = the batches of the epochs before (each
    bar's total) plus its count, and wall_s = the epochs before's time plus its elapsed time. A value the bar keeps
    showing (Lightning's `val_loss` until the next validation) is read when it changes; a validation bar's values
    at its end are evaluations of the step before it."""
    epoch: int | None = None
    offset, total, before_s, elapsed = 0, 0, 0.0, 0.0  # the batches and seconds of the epochs before this bar
    step = -1  # the last step read
    shown: dict[str, float] = {}  # the values last read of those a bar keeps showing
    validated: dict[str, float] = {}  # the values of the last validation bar read
    last: tuple[int, str] | None = None  # the last (epoch, count) read
    for i, line in enumerate(lines):
        m = _TQDM.search(line) if "%|" in line else None
        if m is None or not m["post"]:
            continue
        pairs = {k: _number(v) for k, v in _TQDM_PAIR.findall(m["post"]) if k != "v_num"}
        if not pairs:
            continue
        if _TQDM_EVAL.match(m["desc"]):
            if step >= 0 and m["n"] == m["total"] and pairs != validated:
                validated = pairs
                yield (
                    i,
                    1,
                    {"step": float(step), **{k if k.startswith("val") else f"val_{k}": v for k, v in pairs.items()}},
                )
            continue
        found = _TQDM_EPOCH.search(m["desc"])
        this = int(found["epoch"]) if found else 0
        if epoch is not None and (this != epoch or (last is not None and int(m["n"]) < int(last[1]))):
            # The next epoch's bar, a new fit's, or a bar without an epoch counting from 0 again: counted on.
            offset, before_s, last = offset + total, before_s + elapsed, None
        epoch, total, elapsed = this, int(m["total"]), _seconds(m["elapsed"])
        again = (epoch, m["n"]) == last  # the bar drawn again at its count (after a validation, at its end)
        last, step = (epoch, m["n"]), offset + int(m["n"])
        values = {"step": float(step), "wall_s": before_s + elapsed}
        for k, v in pairs.items():
            if (k.startswith("val") and shown.get(k) == v) or (again and not k.startswith("val")):
                continue  # a validation's value still shown since, or the count's training values read already
            shown[k] = v
            values[k] = v
        if len(values) > 2:
            yield i, 1, values


# The Hugging Face Trainer's console: its progress bar, then each log as a printed dict, usually on the bar's own
# line: `  2%|▏   | 500/22184 [01:40<1:12:54,  4.96it/s]{'loss': 2.5609, 'learning_rate': 1.96e-05, 'epoch': 0.05}`
# (newer versions quote the values: `{'loss': '1.178', ...}`). An evaluation draws a bar of its own (its batches)
# before `{'eval_loss': ...}`; `{'train_runtime': ..., 'train_loss': ...}` at the end is the run's summary.
_HF_BAR = re.compile(
    r"(?<!\d)(?P<n>\d{1,15})/(?P<total>\d{1,15})\s*\[(?P<elapsed>\d+(?::\d+){1,2})<"
)  # once per digit run
_HF_LOG = re.compile(r"\{'(?P<first>loss|eval_[^']+|train_runtime)':[^{}]*\}")


def _hf_printed(lines: Sequence[str]) -> Iterator[tuple[int, int, dict[str, float]]]:
    """Each printed training log at the step its bar shows before it (the bar's elapsed time as wall_s), and each
    evaluation at the training bar's step: the bar whose total the first training log was printed under (an
    evaluation's own bar counts its batches). A log cut by a redrawn bar, and the summary, are not read."""
    total: int | None = None  # the training bar's total, once a training log told it apart
    last: re.Match[str] | None = None  # the last bar drawn
    trained: re.Match[str] | None = None  # the training bar's last state
    for i, line in enumerate(lines):
        log = _HF_LOG.search(line) if "{'" in line else None
        if log is None and "/" not in line:
            continue
        for bar in _HF_BAR.finditer(line, 0, log.start() if log else len(line)):
            last = bar
            if total is not None and int(bar["total"]) == total:
                trained = bar
        if log is None or last is None or log["first"] == "train_runtime":
            continue
        if log["first"] == "loss" and total is None:
            total, trained = int(last["total"]), last
        if trained is None:
            continue
        try:
            record = ast.literal_eval(log.group(0))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        values = {"step": float(trained["n"])}
        for key, value in record.items():
            try:
                values[str(key)] = float(value)
            except (TypeError, ValueError):
                continue
        if log["first"] == "loss":
            values["wall_s"] = _seconds(trained["elapsed"])
        yield i, 1, values


FORMATS: dict[str, LogFormat] = {
    f.name: f
    for f in (
        LogFormat(
            "nanogpt",
            "karpathy/nanoGPT: `iter 100: loss 4.2345, time 123.45ms, mfu 12.34%` and "
            "`step 2000: train loss 3.1234, val loss 3.2345`",
            lines=(
                Line(
                    rf"^iter (?P<step>\d+): loss (?P<loss>{_NUM}), time (?P<step_s>{_NUM})ms"
                    rf"(?:, mfu (?P<mfu>{_NUM})%)?",
                    scale={"step_s": 1e-3, "mfu": 0.01},
                ),
                Line(
                    rf"^step (?P<step>\d+): train loss (?P<train>{_NUM}), val loss (?P<val_loss>{_NUM})",
                    names={"train": "train_split/loss"},
                ),
            ),
        ),
        LogFormat(
            "build-nanogpt",
            "karpathy/build-nanogpt's log/log.txt, a step, a name and a value per line: "
            "`19072 train 3.021431`, `19080 val 3.2034`, `19080 hella 0.3036`; and what it prints: `step 19080 | "
            "loss: 3.285733 | lr 3.3794e-04 | norm: 0.8137 | dt: 19807.22ms | tok/sec: 26469.54`, with `validation "
            "loss: 3.2034` and `HellaSwag accuracy: 3049/10042=0.3036` before the line of the step they evaluate",
            ahead=True,
            lines=(
                Line(rf"^(?P<step>\d+) train (?P<loss>{_NUM})$"),
                Line(rf"^(?P<step>\d+) val (?P<val_loss>{_NUM})$"),
                Line(rf"^(?P<step>\d+) hella (?P<hellaswag>{_NUM})$", names={"hellaswag": "hellaswag/acc_norm"}),
                Line(
                    rf"^step\s+(?P<step>\d+) \| loss: (?P<loss>{_NUM}) \| lr (?P<lr>{_NUM}) \| "
                    rf"norm: (?P<grad_norm>{_NUM}) \| dt: (?P<step_s>{_NUM})ms \| tok/sec: (?P<tokens_per_s>{_NUM})",
                    scale={"step_s": 1e-3},
                ),
                Line(rf"^validation loss: (?P<val_loss>{_NUM})$"),
                Line(
                    rf"^HellaSwag accuracy: \d+/\d+=(?P<hellaswag>{_NUM})$", names={"hellaswag": "hellaswag/acc_norm"}
                ),
            ),
        ),
        LogFormat(
            "modded-nanogpt",
            "KellerJordan/modded-nanogpt: `step:125/1390 val_loss:4.1234 train_time:12345ms step_avg:98.76ms`",
            lines=(
                Line(
                    rf"^step:(?P<step>\d+)/\d+ (?:val_loss:(?P<val_loss>{_NUM}) )?(?:train_loss:(?P<loss>{_NUM}) )?"
                    rf"train_time:(?P<wall_s>{_NUM})ms",
                    scale={"wall_s": 1e-3},
                ),
            ),
        ),
        LogFormat(
            "llm.c",
            "karpathy/llm.c: its main.log (`s:100 trl:3.4567`, `s:100 tel:3.5`, `s:100 eval:0.29`) "
            "or what it prints: `step  100/74 | loss 3.456789 (+0.12z)| norm 1.2345 (-0.50z)| lr 6.00e-04 | "
            "123.45 ms | 48.3% bf16 MFU | 244544 tok/s` (before its outlier z-scores: `train loss 3.456789 | "
            "norm 1.2345 |`), and the CPU reference's `step 10: train loss 5.356 (took 1452.1 ms)`",
            lines=(
                Line(
                    rf"^s:(?P<step>\d+) trl:(?P<loss>{_NUM})(?: lr:(?P<lr>{_NUM}))?"
                    rf"(?: norm:(?P<grad_norm>{_NUM}))?"
                ),
                Line(rf"^s:(?P<step>\d+) tel:(?P<val_loss>{_NUM})"),
                Line(rf"^s:(?P<step>\d+) eval:(?P<hellaswag>{_NUM})", names={"hellaswag": "hellaswag/acc_norm"}),
                # `\s*(?:\|\s*)?`, not `\s*\|?\s*`: two runs of spaces side by side split n^2 ways before failing
                Line(
                    rf"^step\s+(?P<step>\d+)/\d+\s*[|:]\s*(?:train )?loss (?P<loss>{_NUM})(?: \([^)]*\))?"
                    rf"(?:\s*\|\s*norm (?P<grad_norm>{_NUM})(?: \([^)]*\))?)?(?:\s*\|\s*lr (?P<lr>{_NUM}))?"
                    rf"(?:\s*(?:\|\s*)?\(?(?P<step_s>{_NUM}) ms)?(?:\s*\|\s*(?P<mfu>{_NUM})% \w+ MFU)?"
                    rf"(?:\s*[|,]\s*(?P<tokens_per_s>{_NUM}) tok/s)?",
                    scale={"step_s": 1e-3, "mfu": 0.01},
                ),
                Line(
                    rf"^step (?P<step>\d+): train loss (?P<loss>{_NUM}) \(took (?P<step_s>{_NUM}) ms\)",
                    scale={"step_s": 1e-3},
                ),
            ),
        ),
        LogFormat(
            "megatron",
            "Megatron-LM / Megatron-DeepSpeed: ` iteration      100/  500000 | consumed samples: "
            "51200 | elapsed time per iteration (ms): 1234.5 | learning rate: 1.5E-04 | lm loss: 7.1E+00 | "
            "loss scale: 65536.0 | grad norm: 1.234 |` and ` validation loss at iteration 1000 | lm loss value: "
            "3.4E+00 |`; each evaluation set (`on test set`, `[wiki]`, `at the end of training for test "
            "data`) its own task",
            reader=_megatron,
        ),
        LogFormat(
            "fairseq",
            "fairseq (--log-format simple): `| train_inner | epoch 001:    100 / 1563 loss=9.876, "
            "ppl=940.5, wps=12345.6, ..., num_updates=100, lr=1.25e-05, gnorm=1.234, ...` and `| valid | epoch 001 "
            "| valid on 'valid' subset | loss 5.678 | ... | num_updates 1000`; losses in bits, read as nats",
            reader=_fairseq,
        ),
        LogFormat(
            "keras",
            "Keras' model.fit output: `Epoch 3/10` then `3083s - loss: 1.7197 - acc: 0.5893 - val_loss: "
            "0.3504 - val_acc: 0.8959` (Keras 2) or `7/7 ━━━━ 7s 1s/step - accuracy: 0.5672 - loss: 0.6807 - "
            "val_accuracy: 0.5179 - val_loss: 0.6897` (Keras 3); one step per epoch",
            scan=_keras,
            epochs=True,
            note="Keras prints one line per epoch: steps in this run count epochs (a fit that starts again at "
            "epoch 1 is counted on from the epoch before)",
        ),
        LogFormat(
            "tqdm",
            "tqdm progress bars with values (PyTorch Lightning's and many loops'): `Epoch 3:  42%|████ | 197/469 "
            "[00:03<00:04, 55.1it/s, loss=0.412, v_num=0, val_loss=0.381]`, each refresh a line; the step is the "
            "batches counted across epochs",
            scan=_tqdm,
            note="tqdm's bars count batches: a step here is a batch (several with gradient accumulation), the values "
            "what the loop shows; PyTorch Lightning before 2.0 counts its validation batches in the bar too",
        ),
        LogFormat(
            "hf-printed",
            "the Hugging Face Trainer's console: `  2%|▏   | 500/22184 [01:40<1:12:54,  4.96it/s]{'loss': 2.5609, "
            "'learning_rate': 1.96e-05, 'epoch': 0.05}` and `{'eval_loss': 1.137, ...}` after an evaluation's bar; "
            "the step is the training bar's count",
            scan=_hf_printed,
        ),
        LogFormat(
            "kv",
            "any `key: value` / `key=value` pairs with a step key (`step`, `iter`, `iteration N/M`, "
            "`global_step`, ...): nanotron, TorchTitan, MaxText, DeepSpeed and most hand-written loops; and blocks "
            "of one pair per line under a `[step=N/M]` (OLMo) or `[batch=N/M]:` (Composer) line",
            reader=read_pairs,
            blocks=True,
        ),
    )
}

_SAMPLE = 2000  # lines `detect` reads from each of a long log's start, middle and end


def detect(lines: Sequence[str], where: str) -> LogFormat:
    """The format that reads the most of `lines` (a sample from the start, middle and end of a long log);
    on a tie the more specific one. `kv`, the generic reader, must read more than twice the lines of the
    best specific format to win: it also reads the lines a trainer prints beside its own (DeepSpeed's `steps:
    N loss: ...` between Megatron's iterations, rounded to 4 digits), which are not the run's record."""
    stripped = [strip_ansi(line) for line in lines if line.strip()]
    if len(stripped) > 3 * _SAMPLE:
        mid = len(stripped) // 2
        stripped = stripped[:_SAMPLE] + stripped[mid - _SAMPLE // 2 : mid + _SAMPLE // 2] + stripped[-_SAMPLE:]
    scores = {name: sum(n for _, n, _ in fmt.records(stripped)) for name, fmt in FORMATS.items()}
    specific = max((name for name in scores if name != "kv"), key=lambda name: scores[name])  # first of equals
    best = "kv" if scores["kv"] > 2 * scores[specific] else specific
    if scores[best] == 0:
        if any(re.match(r"^\{'(?:eval_)?loss':", line) for line in stripped):
            raise InputError(
                f"{where}: these are the Hugging Face Trainer's printed logs without its progress bar, so no "
                "step; import the checkpoint's trainer_state.json instead: yieldgate import hf-trainer DIR"
            )
        raise InputError(
            f"{where}: no line reads as a known training log ({', '.join(FORMATS)}); name the "
            r"values with patterns, e.g. 'step (?P<step>\d+) .*loss (?P<loss>\S+)'",
            parameter="patterns",
        )
    return FORMATS[best]
