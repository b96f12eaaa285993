"""The generic reader of `key: value` / `key=value` pairs, the `kv` format: the many loggers that print pairs
(Megatron-LM, nanotron, TorchTitan, MaxText, DeepSpeed, hand-written loops), with the step from a step key or
`iteration N/M`; and blocks of one pair per line under a `[step=N/M]` (OLMo) or `[batch=N/M]:` (Composer) line.
Megatron's reader reads its pairs with it too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from yieldgate.aliases import guess
from yieldgate.ingest.stepcount import counter_name, total_name
from yieldgate.ingest.textlog.base import NUM, PER_DEVICE_TOKENS_PER_S, number, strip_ansi
from yieldgate.ingest.textlog.prose import eval_block, names_then_values, sentence_values, split_table
from yieldgate.names import is_reward, metric_direction

__all__ = ["context", "progress", "read_block", "read_counted", "read_pairs"]

# A key is up to eight words, each from a word's start and letters first (a timestamp or a count is not a
# key), optionally a unit in parentheses; then `:` or `=`, a number (in brackets: DeepSpeed's `lr=[0.0001]`)
# and an optional unit glued to it (`ms`, `%`, `K`, `GiB`). Possessive and bounded, so a try costs at most
# eight words: a line of prose without a `:` is one pass, not one pass per word. A number that runs on into
# `:12` or `-05` is a clock or a date (`eta: 0:01:23`, `datetime: 2024-05-01`), and one before `%|` is a
# tqdm bar's share done: not values. One before `/N` is a count and its total (`_TOTAL_AFTER`).
_PAIR = re.compile(
    rf"(?<![\w.-])(?P<key>[A-Za-z_][\w./-]{{0,99}}+(?: [A-Za-z_][\w./-]{{0,99}}+){{0,7}}+"
    rf"(?: ?\([^()]*\))?)(?P<sep>\s*[:=]\s*)\[?(?P<value>{NUM})\]?(?!%\|)"
    rf"(?P<unit>%|[A-Za-z]+(?:/[A-Za-z]+)?)?(?![\w.]|[-:]\d)"
)
# `name value` pairs without a `:` or `=`, one to a segment of a line cut by ` - `, ` | ` or ` : ` (Flair's
# ModelTrainer: `epoch 1 - iter 504/5049 - loss 0.84988712 - samples/sec: 9.54 - lr: 0.000005`, `EPOCH 1 done: loss
# 0.3592 - lr 0.0000050`; Marian's `Ep. 32 : Up. 51000 : Sen. 1,234,567 : Cost 1.89812 : Time 12.3s : L.r. 1.6e-04`):
# the segment's last words and the number it ends with. Up to four words, letters first.
# A tab cuts segments too, and a segment may end in its running mean in brackets: the `Name value (mean)` segments of
# an AverageMeter's printout (PyTorch's ImageNet example and the many scripts that copy its ProgressMeter:
# `Epoch: [0][10/250]\tTime 1.154 (1.408)\tData 0.371 (0.374)\tLoss 12.6626 (12.3890)\tAcc@1 12.5 (10.3)`, its
# newer layout padding the numbers, `Time  1.154 ( 1.408)`, `Loss 6.9e+00 (6.9e+00)`). The value is the batch's;
# the bracketed mean is an average of the values before it, not a metric of its own, and is not read.
_SEGMENT_CUT = re.compile(r"\s*\t\s*|\s+[-|:]\s+")
_SPACED = re.compile(
    rf"(?<![\w./@-])(?P<key>[A-Za-z_][\w./@-]{{0,99}}+(?: [A-Za-z_][\w./@-]{{0,99}}+){{0,3}}+) +(?P<value>{NUM})"
    rf"(?P<unit>%|[A-Za-z]+(?:/[A-Za-z]+)?)?(?P<mean>\s*\(\s*(?:{NUM})\s*\))?\s*$"
)
# A meter's `Time` and `Data` beside their running means are the batch's time and its wait for data (the meters
# `batch_time`, `data_time`), not a clock since the start.
_METER_NAMES = {"time": "step_s", "data": "data_time", "batch_time": "step_s"}
# An evaluation loop's progress (`Test: [10/242]`, `Val: [ 50/196]`): its batches' values and running means over the
# evaluation so far. Its count is not the training step, and its lines are not training records: left out (the
# loop's result is the summary line after it, `_SUMMARY`). Its running loss is not read as the evaluation's loss:
# the summary does not print one, and a loop cut short would give a mean of part of the set.
_EVAL_LOOP = re.compile(
    r"^\W*(?:test|dev|valid|validation|val|eval|evaluation)\s*:?\s*\[\s*\d+\s*/\s*\d+\s*\]", re.IGNORECASE
)
# The summary an evaluation loop ends with, ` * Acc@1 75.312 Acc@5 92.104` (` * Prec@1 ... Prec@5 ...` in older
# copies): nothing but `Name value` pairs after a star. Its values are evaluations (`val_<name>`) at the training
# step reached, the record before it; a line with words between the pairs (` * Prec@1   k 49.2 Prec@5 001 78.8`,
# a variant's qualifier) is not this and is not read.
_SUMMARY = re.compile(rf"^\s*\*\s+(?P<pairs>(?:[A-Za-z_][\w@.-]* +(?:{NUM})\s*)+)$")
_SUMMARY_PAIR = re.compile(rf"(?P<key>[A-Za-z_][\w@.-]*) +(?P<value>{NUM})")
# An evaluation line named by its split, after a timestamp or a log level (Flair's `TEST : loss 0.1763 - score
# 0.9057`, `DEV : loss ...`; Marian's bracketed `[valid] Ep. 42 : Up. 55000 : cross-entropy : 50.2476 : new best`):
# its values are that split's evaluations, at its own step where it prints one, else at the record before's.
_SPLIT_HEAD = re.compile(
    r"^[^A-Za-z]*(?:(?:[\w.]{1,40}\s+)?(?:DEBUG|INFO|WARN|WARNING)\b[^A-Za-z]*)?"
    r"(?:(?P<split>test|dev|valid|validation|val|eval|evaluation)\s*[:|]\s+(?=[A-Za-z])"
    r"|\[(?P<tag>test|dev|valid|validation|val|eval|evaluation)\]\s*(?=[A-Za-z[]))",
    re.IGNORECASE,
)
# A batch of an evaluation loop counted within it, after its split's tag (PaddleClas' `[Eval][Epoch 2][Iter: 20/25]`):
# its values are the batch's, not the evaluation's (the `[Avg]` line after the loop has those), nor a training step's.
_IN_LOOP = re.compile(r"\b(?:iter|iteration|step|batch)s?\s*[:=]?\s*\d+\s*/\s*\d+", re.IGNORECASE)
# A training line of an epoch's means, tagged so (PaddleClas' `[Train][Epoch 2/400][Avg]`): its values are kept
# apart from the batches' (`epoch_avg_<name>`).
_AVERAGED = re.compile(r"\[(?:avg|average|mean)\]", re.IGNORECASE)
# A count's total after it (`Test: [10/242]`, an evaluation loop's progress): the pair is a counter, the value of
# no name but a counter's (`STEP: 24/406` is the step).
_TOTAL_AFTER = re.compile(r"\s*/\s*\d")
_STEP_OF_TOTAL = re.compile(r"\b(?:iteration|iter|step|steps)\s*[:=]?\s*(?P<step>\d+)\s*/\s*\d+", re.IGNORECASE)
_LONGEST = 4096  # characters; longer lines are dumps (a config, a tensor), not a step's metrics
_BLOCK_HEAD = re.compile(r"\[(?:step|batch)=(?P<step>\d+)(?:/\d+)?[^\]]*\]:?\s*$")
# `olmo.train:967`, `train.py:120`, `__main__:45`, `node-3:0`: a module, file or host with a line number or
# rank (a whole number glued to the `:`), where the line was logged from; `train.loss: 2.3` is a value.
_NOT_A_KEY = re.compile(r"[\w-]+\.[\w.]+|[\w.-]+-\d+|__\w+__")
# `Namespace(lr=0.001, steps=...)`, `TrainConfig(step=0, ...)`: an object's repr is a configuration
_REPR = re.compile(r"\b[A-Z]\w*\(\w+=")
_TAGS = re.compile(r"\[[^\[\]|]*\|[^\[\]]*\]")  # `[INFO|DP=0|PP=0|TP=0]`: the logger's tags, not metrics
# `train_net.py[line:177]`: the line a message was logged from (logging's `%(filename)s[line:%(lineno)d]`), no value
_LOCATION = re.compile(r"\[\s*(?:line|lineno)\s*[:=]\s*\d+\s*\]", re.IGNORECASE)
_STEP_WORD = re.compile(r"\b(?:step|iter|iteration)\s+(?P<step>\d+)\b", re.IGNORECASE)
# A key abbreviated with a dot (Marian's `Ep.`, `Up.`, `L.r.`), by what it abbreviates; another keeps its letters.
_ABBREVIATED = {"ep": "epoch", "up": "step", "upd": "step", "it": "step", "iter": "step", "lr": "lr"}
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
_PLURAL_COUNTERS = {"iters": "iter", "iterations": "iteration"}  # a count of iterations is the iteration counter
# Keys whose value is a counter (`stepcount`): the step keys, the epoch, and the names a line of pairs gives them.
_COUNTER_KEYS = {"step", "iteration", "iter", "global_step", "epoch", "batch"}
# A progress pair: a count and its total `N/M`, labelled by a counter word before it (`Epoch [3/300]`, `Iter 50/390`,
# `Step: 50/390`, `STEP: 24/406`, `batch=2/4800`), or bracketed alone (`[3/300][50/390]`: told apart by position).
_COUNTER_WORD = r"(?:global[ _]step|epochs?|ep|iters?|iterations?|it|steps?|batch)"
_PROGRESS = re.compile(
    rf"(?:(?<![\w.])(?P<label>{_COUNTER_WORD})\s*[:=]?\s*)?(?P<open>\[)?\s*(?<![\d/.])(?P<n>\d{{1,12}})\s*/\s*"
    r"(?P<total>\d{1,12})\s*(?(open)\])(?![\d/.:-])",
    re.IGNORECASE,
)
# An epoch named by a word and a number, without its total (`[ep 3 | it 50/100]`, `epoch 3 loss: 2.3`).
# Bracketed alone before a count (`Epoch: [3][10/250]`: epoch 3, its batch 10 of 250).
_EPOCH_WORD = re.compile(
    r"(?<![\w./-])(?:epoch|ep)\s*[:=]?\s*(?:\[\s*(?P<b>\d{1,9})\s*\]|(?P<n>\d{1,9})(?![\d./:-]))",
    re.IGNORECASE,
)
# A range of batches within an epoch, MXNet's Speedometer (`Epoch[5] Batch [0-20]\tSpeed: 25.77 samples/sec\t...`):
# its values are running means since the range's start; the range's end counts the batches done in the epoch.
_BATCH_RANGE = re.compile(r"(?<![\w.])batch\s*\[\s*\d{1,12}\s*-\s*(?P<end>\d{1,12})\s*\]", re.IGNORECASE)
# (Bracketed alone, `Epoch[5]`, as MXNet prints it: epoch 5.)
# A line that says only which epoch begins (`Epoch 3/10`, ` > EPOCH: 3/100`, `=== Epoch 3 ===`, `[Epoch 3]`): the
# records after it are of that epoch until the next such line.
_EPOCH_ONLY = re.compile(
    r"^[\W_]*(?:epoch|ep)\W*[:=]?\s*\[?(?P<n>\d{1,9})(?:\s*/\s*(?P<total>\d{1,9}))?\]?[\W_]*$", re.I
)
# What a logger writes before a message: a timestamp, the level and the logger's name, each cut by ` - ` or `: `
# (Python logging's `%(asctime)s - %(levelname)s - %(name)s - %(message)s`), or a bracketed timestamp alone
# (`[2022-06-26 21:43:24,027]Epoch: 0001`).
_MESSAGE = re.compile(
    r"^(?:.*?\b(?:DEBUG|INFO|WARN|WARNING)\b(?:\s*[-:|]\s*[\w.]+)?\s*[-:|]\s+|\s*\[[\d/:,. T-]{8,40}\]\s*)"
)
# A step word after an evaluation word (TorchTitan's `validate step:  1  loss: 12.2079  tps: 7,599`): the line
# holds an evaluation's values at that step, not the training step's.
_EVAL_STEP = re.compile(r"\b(?:validate|validation|eval|evaluation)\s+step\s*[:=]", re.IGNORECASE)
# Words before a step key that make it a bound or a setting, not the step (`max iteration: 5000`).
_NOT_THE_STEP = {"max", "maximum", "total", "num", "number", "warmup"}
_LEVEL = re.compile(r"^(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)\s+")  # the logger's, before the message
# An evaluation's own speed beside its scores (`fps`, `ips`, `speed`): no score, not read from a line of scores.
_EVAL_SPEEDS = {"fps", "ips", "speed", "samples_per_sec", "samples_per_second", "it_per_s"}
_BEST = re.compile(r"\bbest\b", re.IGNORECASE)


def _key(text: str) -> str:
    """`lm loss` -> `lm_loss`, `elapsed time per iteration (ms)` -> `elapsed_time_per_iteration_ms`; a log
    level before a key (`INFO loss: 2.3`) and words a log prefixes to its step key (`completed step: 4`) are
    dropped."""
    text = re.sub(r"\s*\(([^()]*)\)", lambda m: "_" + m.group(1).replace("/", "_per_"), _LEVEL.sub("", text.strip()))
    words = re.sub(r"-+", "_", text.lower()).split()
    words[-1] = _PLURAL_COUNTERS.get(words[-1], words[-1])  # pytorch-CycleGAN's `(epoch: 3, iters: 200, ...)`
    if words[-2:] == ["global", "step"]:
        return "global_step"
    if words[-1] in _STEP_KEYS and not _NOT_THE_STEP.intersection(words[:-1]):
        return words[-1]
    return "_".join(words)


def read_pairs(line: str, step: bool = True) -> dict[str, float] | None:
    """Every `key: number` / `key=number` of a line, with the step from a step key or `iteration N/M`
    (`step=False`: the pairs of a block's line, which has none)."""
    out = _pairs(line)
    if not step:
        return out or None
    return _stepped(line, out, {}) if out else None


def read_counted(line: str) -> dict[str, float] | None:
    """`read_pairs` with the line's counters (`#epoch`, `#iter`, `#iter/total`, ... for `stepcount`): its progress
    pairs and its step keys. A line of progress pairs and values but no step key (`[3/300][50/390] loss: 2.3`, an
    evaluation's `Epoch [3/300] val_loss: 2.1`) is read too, its step the counters' to place."""
    if _EVAL_LOOP.match(line):
        return None
    if (summary := _SUMMARY.match(line)) is not None:
        return {f"val_{_key(m['key'])}": number(m["value"]) for m in _SUMMARY_PAIR.finditer(summary["pairs"])}
    out = _pairs(line)
    if not out:
        return None
    split = _SPLIT_HEAD.match(line)
    if split is not None:
        if _IN_LOOP.search(line, split.end()):
            return None
        name = (split["split"] or split["tag"]).lower()
        # a best-so-far beside the split's values (PaddleClas' `[Eval][Epoch 2][best metric: 0.0051]`) is an earlier
        # evaluation again, not one of this step
        out = {k if k in _COUNTER_KEYS else f"{name}_{k}": v for k, v in out.items() if not k.startswith("best")}
        if not out:
            return None
        if out.keys().isdisjoint(_COUNTER_KEYS):  # no step of its own: the record before's (`LogFormat.read`)
            return out
    if _AVERAGED.search(line):  # the epoch's means (`[Train][Epoch 2/400][Avg]loss: 6.9`): no batch's values
        out = {k if k in _COUNTER_KEYS else f"epoch_avg_{k}": v for k, v in out.items()}
    counters = progress(line)
    counters.update(
        (counter_name(k), v) for k, v in out.items() if k in _COUNTER_KEYS and counter_name(k) not in counters
    )
    found = _stepped(line, out, counters)
    if found is None and not counters:
        return _scores_alone(line, out)
    return {**found, **counters} if found is not None else None


def _scores_alone(line: str, pairs: dict[str, float]) -> dict[str, float] | None:
    """The values of a line of scores and nothing else, with no step (CSRA's `mAP: 0.936` after `Test on Epoch 3`,
    PaddleOCR's `cur metric, precision: 0.84, recall: 0.94, hmean: 0.88, fps: 0.56`, OpenNMT's `Validation perplexity:
    1.79`): an evaluation's, at the step of the record before (`LogFormat.read`). Names that say their split are
    evaluations whichever way they go. Scores are the metrics that rise (`metric_direction`), beside at most
    the evaluation's speed; a loss or a name of unknown direction makes it no such line (a training value printed
    apart is not an evaluation), and so does a best-so-far (`best metric, hmean: ...`: an evaluation again)."""
    scores = {k: v for k, v in pairs.items() if k not in _EVAL_SPEEDS}
    if not scores or _BEST.search(line) or any(k.startswith("train") for k in scores):
        return None
    if all(guess(k).kind == "eval" for k in scores):  # named as an evaluation's (`validation_perplexity: 1.79`)
        return scores
    if not all(metric_direction(k) is True for k in scores) or any(map(is_reward, scores)):
        return None  # a reward printed alone is the rollout's, at every step (DeepSpeed-Chat's `average reward score`)
    return {f"val_{k}": v for k, v in scores.items()}


def _matches(line: str) -> Iterator[re.Match[str]]:
    """The line's `key: value` / `key=value` pairs, then the `key value` pair that ends each segment of a line cut by
    ` - ` or ` | ` (`_SPACED`)."""
    yield from _PAIR.finditer(line)
    segments = _SEGMENT_CUT.split(line)
    if len(segments) > 1:
        yield from (m for segment in segments if (m := _SPACED.search(segment)) is not None)


def _named(m: re.Match[str]) -> str:
    """A pair's key; a meter's beside its running mean by what it measures (`_METER_NAMES`)."""
    key = _key(m["key"])
    return _METER_NAMES.get(key, key) if m.re is _SPACED and m["mean"] is not None else key


def _pairs(line: str) -> dict[str, float]:
    out: dict[str, float] = {}
    if len(line) > _LONGEST or _REPR.search(line):
        return out
    line = _LOCATION.sub(" ", _TAGS.sub(" ", line))
    said, spans = sentence_values(line) if " " in line else ({}, [])
    for start, end in spans:  # a sentence's words are not pairs of their own (`... iteration 100 is 1.39`)
        line = line[:start] + " " * (end - start) + line[end:]
    for m in _matches(line):
        if m.re is _PAIR and m["sep"] == ":" and m["value"].isdigit() and _NOT_A_KEY.fullmatch(m["key"]):
            continue
        key, value, unit = _named(m), number(m["value"]), m["unit"] or ""
        if m.re is _PAIR and key not in _COUNTER_KEYS and _TOTAL_AFTER.match(line, m.end("value")):
            continue
        if m["key"].endswith("."):
            key = _ABBREVIATED.get(key.replace(".", ""), key.replace(".", ""))
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
    if "cost" in out and "loss" not in out and "loss" not in said:
        out["loss"] = out.pop("cost")  # Theano's, Nematus' and Marian's name of the loss (a price has its unit)
    return {**said, **{k: v for k, v in out.items() if k not in said}}


def _stepped(line: str, pairs: dict[str, float], counters: dict[str, float]) -> dict[str, float] | None:
    """The pairs of a metrics line with its `step`: a step key's, `iteration N/M`'s, else the first of `counters`
    (the epoch's where there is one); None for a line that measures nothing, or has no step."""
    out = dict(pairs)
    for name in ("iteration", "iter", "global_step"):
        if "step" not in out and name in out:
            out["step"] = out.pop(name)
    # DeepSpeed's `steps: 100 loss: 3.4567 iter time (s): 1.234`; a config's `steps: 100000` has no loss
    if "step" not in out and "steps" in out and any("loss" in key for key in out):
        out["step"] = out.pop("steps")
    if not out.keys() - {"step", "epoch"}:  # a line with counters and nothing measured is not a metrics line
        return None
    if "step" not in out:
        found = _STEP_OF_TOTAL.search(line) or _STEP_WORD.search(line)
        if found is not None:
            out["step"] = float(found["step"])
        elif counters:  # progress pairs alone (`[3/300][50/390]`, an evaluation's `Epoch [3/300]`): `stepcount`
            out["step"] = counters.get("#epoch", [v for k, v in counters.items() if not k.endswith("/total")][-1])
        else:
            return None
    if _EVAL_STEP.search(line):
        out = {key if key == "step" else "val_" + key: value for key, value in out.items()}
    return out


def progress(line: str) -> dict[str, float]:
    """The counters of a line's progress pairs, `#<label>` and `#<label>/total` (`stepcount`); a bracketed pair
    without a label by its position (`#1`, `#2`); an epoch named without its total (`[ep 3 | it 50/100]`)."""
    out: dict[str, float] = {}
    if (m := _EPOCH_WORD.search(line)) is not None:
        out[counter_name("epoch")] = float(m["n"] if m["n"] is not None else m["b"])
    if (r := _BATCH_RANGE.search(line)) is not None:
        out[counter_name("batch")] = float(r["end"])
    if "/" not in line:
        return out
    position = 0
    for m in _PROGRESS.finditer(line):
        if m["label"] is None and m["open"] is None:
            continue  # `3/4` in prose: no counter
        if m["label"] is None:
            position += 1
        label = _key(m["label"]) if m["label"] else str(position)
        label = {"iters": "iter", "iterations": "iteration", "steps": "step", "epochs": "epoch"}.get(label, label)
        if counter_name(label) not in out or total_name(label) not in out:
            out[counter_name(label)], out[total_name(label)] = float(m["n"]), float(m["total"])
    return out


def context(line: str) -> dict[str, float] | None:
    """The epoch a line that says only which epoch begins gives the records after it (`#epoch`, `#epoch/total`); the
    line bare or as a logger's message (`2022-09-19 20:28:43,879 - INFO - allennlp.training.trainer - Epoch 0/9`)."""
    message = _MESSAGE.sub("", line, count=1) if len(line) < 200 else line
    m = _EPOCH_ONLY.match(message) if len(message) < 80 else None
    if m is None:
        return None
    out = {counter_name("epoch"): float(m["n"])}
    if m["total"] is not None:
        out[total_name("epoch")] = float(m["total"])
    return out


def read_block(line: str, lines: Sequence[str], i: int) -> tuple[int, dict[str, float]] | None:
    """The block `line` (`lines[i]`, stripped) heads: the lines after it that start with a space and hold pairs,
    their values at the head's step; (lines it took, values), or None when the line heads no block."""
    if line.lstrip().startswith("-->"):
        return _arrow_block(line, lines, i)
    if line.lstrip()[:3] in ("===", "---") and (titled := eval_block(line, lines, i)) is not None:
        return titled
    if (row := names_then_values(line, lines, i)) is not None:
        return row
    if (table := split_table(line, lines, i)) is not None:
        return table
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


# Coqui TTS's trainer: a head `--> STEP: 24/406 -- GLOBAL_STEP: 25` (after `--> TIME: <stamp> --` in its later
# versions), then one `| > name: value  (running average)` line per metric; `--> EVAL PERFORMANCE` heads the
# evaluation's `avg_*` values (no step: the last one's), `--> TRAIN PERFORMACE -- ... GLOBAL_STEP: N` the epoch's
# averages. During an evaluation its batches are `--> STEP: 27`, a bare count without a total: not training steps.
_BULLET = re.compile(rf"^\s*\|\s*>\s*(?P<name>[A-Za-z_]\w*)\s*:\s*(?P<value>{NUM})(?:\s*\([^()]*\))?\s*$")
_EVAL_HEAD = re.compile(r"\b(?:EVAL|EVALUATION|VALID|VALIDATION|TEST)\b", re.IGNORECASE)
_SUMMARY_HEAD = re.compile(r"\bPERFORM", re.IGNORECASE)
_BLOCK_NAMES = {"current_lr": "lr", "loader_time": "data_time"}  # Coqui's names of the learning rate and data wait


def _arrow_block(line: str, lines: Sequence[str], i: int) -> tuple[int, dict[str, float]] | None:
    n, body = 1, dict[str, float]()
    while i + n < len(lines) and (m := _BULLET.match(strip_ansi(lines[i + n]))):
        body.setdefault(m["name"], number(m["value"]))
        n += 1
    if n == 1:
        return None
    head = line.lstrip()[3:]
    counters = progress(head)
    pairs = read_pairs(head, step=False) or {}
    if _EVAL_HEAD.search(head):
        return n, {"val_" + k.removeprefix("avg_"): v for k, v in body.items()}
    if "global_step" in pairs:
        counters[counter_name("global_step")] = pairs["global_step"]
    if "step" in pairs and counter_name("step") not in counters:
        if "global_step" not in pairs:
            return n, {}  # an evaluation's batch (`--> STEP: 27`)
        counters[counter_name("step")] = pairs["step"]
    values = {_BLOCK_NAMES.get(k, k): v for k, v in body.items()}
    if _SUMMARY_HEAD.search(head):
        values = {f"epoch_{k}" if k.startswith("avg_") else k: v for k, v in values.items()}
    step = pairs.get("global_step", pairs.get("step"))
    return n, {**values, **counters, **({"step": step} if step is not None else {})}
