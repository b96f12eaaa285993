"""Plain-text training logs: read as a well-known trainer's format, detected per file, or with named-group regular
expressions, into `Rows` under the log's own names.

Public training runs leave their logs as printed text, each trainer in its own shape. `FORMATS` names each with a
line of it: a `LogFormat` (`base`) turns one line, or the whole log, into values under names the mapping already
understands (`loss`, `val_loss`, `lr`, `step_s`, `mfu` as a fraction, ...), with the units converted where the
format fixes them: milliseconds to seconds, a percentage MFU to a fraction, fairseq's base-2 losses to nats. A
format a regex per line reads is written out in the table; one that needs code has its module (`kv`, `megatron`,
`fairseq`, `keras`, `tqdm`, `hf`). `detect` picks the format that reads the most lines of a file; `kv`, the generic
`key: value` / `key=value` reader, comes last and catches the many loggers that print pairs (Megatron-LM, nanotron,
TorchTitan, MaxText, DeepSpeed, ...). What a log says once or in passing (its clock, its device count, its batch in
tokens) is read by `facts`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

import numpy as np
import pandas as pd

from yieldgate.aliases import guess
from yieldgate.errors import InputError, check_choice
from yieldgate.ingest.clean import check_columns, concat, read_lines
from yieldgate.ingest.core import pick_step
from yieldgate.ingest.mapping import LogMapping, computed_step
from yieldgate.ingest.stepcount import counter_name, counts_only, infer_step, is_counter
from yieldgate.ingest.tables import numeric_column, rows_from_columns
from yieldgate.ingest.textlog import fairseq, hf, keras, kv, megatron, metriclogger, openmmlab, tqdm
from yieldgate.ingest.textlog.base import NUM, PER_DEVICE_TOKENS_PER_S, Line, LogFormat, strip_ansi
from yieldgate.ingest.textlog.epochrecords import last_of_each_epoch
from yieldgate.ingest.textlog.facts import batch_tokens, clock, device_count, per_device_throughput
from yieldgate.ingest.textlog.kv import read_pairs
from yieldgate.ingest.textlog.launches import launches
from yieldgate.ingest.textlog.mapped import EVAL_MARK, mapped_format
from yieldgate.ingest.textlog.trainline import appended_section, training_metrics
from yieldgate.ingest.types import Rows, Warnings
from yieldgate.util.inputs import check_regular

__all__ = [
    "FORMATS",
    "PER_DEVICE_TOKENS_PER_S",
    "Line",
    "LogFormat",
    "TextLog",
    "batch_tokens",
    "detect",
    "device_count",
    "get",
    "per_device_throughput",
    "read_pairs",
    "read_textlog",
    "strip_ansi",
]

FORMATS: dict[str, LogFormat] = {
    f.name: f
    for f in (
        LogFormat(
            "nanogpt",
            "karpathy/nanoGPT: `iter 100: loss 4.2345, time 123.45ms, mfu 12.34%` and "
            "`step 2000: train loss 3.1234, val loss 3.2345`",
            lines=(
                Line(
                    rf"^iter (?P<step>\d+): loss (?P<loss>{NUM}), time (?P<step_s>{NUM})ms"
                    rf"(?:, mfu (?P<mfu>{NUM})%)?",
                    scale={"step_s": 1e-3, "mfu": 0.01},
                ),
                Line(
                    rf"^step (?P<step>\d+): train loss (?P<train>{NUM}), val loss (?P<val_loss>{NUM})",
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
                Line(rf"^(?P<step>\d+) train (?P<loss>{NUM})$"),
                Line(rf"^(?P<step>\d+) val (?P<val_loss>{NUM})$"),
                Line(rf"^(?P<step>\d+) hella (?P<hellaswag>{NUM})$", names={"hellaswag": "hellaswag/acc_norm"}),
                Line(
                    rf"^step\s+(?P<step>\d+) \| loss: (?P<loss>{NUM}) \| lr (?P<lr>{NUM}) \| "
                    rf"norm: (?P<grad_norm>{NUM}) \| dt: (?P<step_s>{NUM})ms \| tok/sec: (?P<tokens_per_s>{NUM})",
                    scale={"step_s": 1e-3},
                ),
                Line(rf"^validation loss: (?P<val_loss>{NUM})$"),
                Line(rf"^HellaSwag accuracy: \d+/\d+=(?P<hellaswag>{NUM})$", names={"hellaswag": "hellaswag/acc_norm"}),
            ),
        ),
        LogFormat(
            "modded-nanogpt",
            "KellerJordan/modded-nanogpt: `step:125/1390 val_loss:4.1234 train_time:12345ms step_avg:98.76ms`",
            lines=(
                Line(
                    rf"^step:(?P<step>\d+)/\d+ (?:val_loss:(?P<val_loss>{NUM}) )?(?:train_loss:(?P<loss>{NUM}) )?"
                    rf"train_time:(?P<wall_s>{NUM})ms",
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
                    rf"^s:(?P<step>\d+) trl:(?P<loss>{NUM})(?: lr:(?P<lr>{NUM}))?"
                    rf"(?: norm:(?P<grad_norm>{NUM}))?"
                ),
                Line(rf"^s:(?P<step>\d+) tel:(?P<val_loss>{NUM})"),
                Line(rf"^s:(?P<step>\d+) eval:(?P<hellaswag>{NUM})", names={"hellaswag": "hellaswag/acc_norm"}),
                # `\s*(?:\|\s*)?`, not `\s*\|?\s*`: two runs of spaces side by side split n^2 ways before failing
                Line(
                    rf"^step\s+(?P<step>\d+)/\d+\s*[|:]\s*(?:train )?loss (?P<loss>{NUM})(?: \([^)]*\))?"
                    rf"(?:\s*\|\s*norm (?P<grad_norm>{NUM})(?: \([^)]*\))?)?(?:\s*\|\s*lr (?P<lr>{NUM}))?"
                    rf"(?:\s*(?:\|\s*)?\(?(?P<step_s>{NUM}) ms)?(?:\s*\|\s*(?P<mfu>{NUM})% \w+ MFU)?"
                    rf"(?:\s*[|,]\s*(?P<tokens_per_s>{NUM}) tok/s)?",
                    scale={"step_s": 1e-3, "mfu": 0.01},
                ),
                Line(
                    rf"^step (?P<step>\d+): train loss (?P<loss>{NUM}) \(took (?P<step_s>{NUM}) ms\)",
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
            reader=megatron.read_line,
        ),
        LogFormat(
            "fairseq",
            "fairseq (--log-format simple): `| train_inner | epoch 001:    100 / 1563 loss=9.876, "
            "ppl=940.5, wps=12345.6, ..., num_updates=100, lr=1.25e-05, gnorm=1.234, ...` and `| valid | epoch 001 "
            "| valid on 'valid' subset | loss 5.678 | ... | num_updates 1000`; losses in bits, read as nats",
            reader=fairseq.read_line,
        ),
        LogFormat(
            "keras",
            "Keras' model.fit output: `Epoch 3/10` then `3083s - loss: 1.7197 - acc: 0.5893 - val_loss: "
            "0.3504 - val_acc: 0.8959` (Keras 2) or `7/7 ━━━━ 7s 1s/step - accuracy: 0.5672 - loss: 0.6807 - "
            "val_accuracy: 0.5179 - val_loss: 0.6897` (Keras 3); one step per epoch",
            scan=keras.scan,
            epochs=True,
            note="Keras prints one line per epoch: steps in this run count epochs (a fit that starts again at "
            "epoch 1 is counted on from the epoch before)",
        ),
        LogFormat(
            "tqdm",
            "tqdm progress bars with values (PyTorch Lightning's and many loops'): `Epoch 3:  42%|████ | 197/469 "
            "[00:03<00:04, 55.1it/s, loss=0.412, v_num=0, val_loss=0.381]`, each refresh a line; the step is the "
            "batches counted across epochs",
            scan=tqdm.scan,
            note="tqdm's bars count batches: a step here is a batch (several with gradient accumulation), the values "
            "what the loop shows; PyTorch Lightning before 2.0 counts its validation batches in the bar too",
        ),
        LogFormat(
            "hf-printed",
            "the Hugging Face Trainer's console: `  2%|▏   | 500/22184 [01:40<1:12:54,  4.96it/s]{'loss': 2.5609, "
            "'learning_rate': 1.96e-05, 'epoch': 0.05}` and `{'eval_loss': 1.137, ...}` after an evaluation's bar; "
            "the step is the training bar's count",
            scan=hf.scan,
        ),
        openmmlab.OPENMMLAB,
        openmmlab.YOLO_TXT,
        metriclogger.METRIC_LOGGER,
        LogFormat(
            "kv",
            "any `key: value` / `key=value` pairs with a step key (`step`, `iter`, `iteration N/M`, "
            "`global_step`, ...) or progress pairs (`Epoch [3/300] Iter [50/390]`, `[3/300][50/390]`): nanotron, "
            "TorchTitan, MaxText, DeepSpeed and most hand-written loops; and blocks of one pair per line under a "
            "`[step=N/M]` (OLMo) or `[batch=N/M]:` (Composer) line, or `| > name: value` lines under a `--> STEP: "
            "24/406 -- GLOBAL_STEP: 25` head (Coqui TTS's trainer)",
            reader=kv.read_counted,
            blocks=kv.read_block,
            context=kv.context,
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


def get(name: str) -> LogFormat:
    """The format named `name` (`log_format`)."""
    check_choice("log_format", name, tuple(FORMATS))
    return FORMATS[name]


@dataclass
class TextLog:
    """What plain-text logs of one run hold: their rows, the format each file was read as, and the facts
    printed once."""

    rows: Rows
    formats: list[str]
    start_unix: float | None
    """Unix time of the first timestamped line (naive times read as this machine's local time)."""
    devices: tuple[int, str] | None
    """(device count, where it was printed) when a log says."""
    tokens_per_step: tuple[float, str] | None = None
    """(tokens per optimizer step, where the log printed the batch that gives it) when a log says."""
    mapping: LogMapping = field(default_factory=LogMapping)
    """What the formats read declare (`textlog.mapped`): their names and evaluations' directions, and the
    evaluation lines' metrics as evaluations."""


RecordReader: TypeAlias = Callable[[Sequence[str]], Iterator[tuple[int, int, dict[str, str]]]]
"""A reader of a file's lines: (index of a record's first line, lines it took, its values as text) per record."""


def _custom(patterns: Sequence[str]) -> RecordReader:
    """A reader of lines by `patterns`: (index, 1, the first matching pattern's groups) per matched line."""
    compiled = []
    for p in patterns:
        try:
            rx = re.compile(p)
        except re.error as exc:
            raise InputError(f"patterns {p!r}: not a regular expression ({exc})", parameter="patterns") from None
        if not rx.groupindex:
            raise InputError(
                f"patterns {p!r}: has no named groups; name each value, e.g. (?P<loss>[\\d.]+)", parameter="patterns"
            )
        compiled.append(rx)

    def records(lines: Sequence[str]) -> Iterator[tuple[int, int, dict[str, str]]]:
        for i, line in enumerate(lines):
            line = strip_ansi(line)
            m = next((m for rx in compiled if (m := rx.search(line))), None)
            if m is not None:
                yield i, 1, {k: v for k, v in m.groupdict().items() if v is not None}

    return records


def _format(fmt: LogFormat) -> RecordReader:
    """A reader of lines as `fmt`, its values as text like a pattern's groups (one path to `numeric_column`)."""

    def records(lines: Sequence[str]) -> Iterator[tuple[int, int, dict[str, str]]]:
        for i, n, values in fmt.records(lines):
            yield i, n, {k: repr(v) for k, v in values.items()}

    return records


def _reader(
    custom: RecordReader | LogFormat | None, log_format: str, lines: Sequence[str], path: Path, warnings: Warnings
) -> tuple[RecordReader, str, str, LogFormat | None]:
    """How to read one file: (its reader, the name of its format, what its unread lines are, its format); the
    format detected in the file when `log_format` is `auto`, the user's mapping's `lines` when it has them."""
    if isinstance(custom, LogFormat):
        return _format(custom), "mapping", "matched none of the mapping's lines", custom
    if custom is not None:
        return custom, "pattern", "matched no pattern", None
    fmt = detect(lines, str(path)) if log_format == "auto" else get(log_format)
    if fmt.note:
        warnings.add("format", f"{path}: {fmt.note}")
    return _format(fmt), fmt.name, f"are not {fmt.name} log lines", fmt


def read_textlog(
    paths: Sequence[Path],
    patterns: Sequence[str],
    warnings: Warnings,
    overrides: Mapping[str, str] | LogMapping,
    log_format: str = "auto",
) -> TextLog:
    """Rows of plain-text logs, the format each file was read as, and what they print once.

    With `patterns`, each line is searched with each in turn; the first that matches gives the row, its
    named groups the metrics (a group that took no part in the match is absent). Without, the lines are
    read as `log_format` (one of `FORMATS`), or as the format detected in each file (`auto`).
    Lines that are not log lines are skipped and counted; terminal colour codes are ignored."""
    if patterns and log_format != "auto":
        raise InputError(
            f"patterns and log_format {log_format} exclude each other: give one", parameter=("patterns", "log_format")
        )
    user = overrides if isinstance(overrides, LogMapping) else LogMapping(names=dict(overrides))
    custom: RecordReader | LogFormat | None = _custom(patterns) if patterns else None
    if custom is None and user.lines:
        custom = mapped_format("mapping", "the user's mapping", user)
    parts, formats, starts = [], [], []
    devices: tuple[int, str] | None = None
    tokens_per_step: tuple[float, str] | None = None
    declared = LogMapping()
    for path in paths:
        check_regular(path, "a plain-text training log")  # a FIFO or /dev/zero is refused, not waited on
        lines = read_lines(path, warnings)
        read, name, what, fmt = _reader(custom, log_format, lines, path, warnings)
        formats.append(name)
        own = fmt.mapping if fmt is not None and fmt.mapping is not None else None
        found = _read_file(path, lines, read, what, warnings, user, own, fmt.context if fmt is not None else None)
        devices = devices or device_count(lines, path)
        tokens_per_step = tokens_per_step or batch_tokens(lines, path)
        if found is not None:
            part, first_stamp, found_mapping = found
            part.epochs = part.epochs or (fmt is not None and fmt.epochs)
            parts.append(part)
            declared.names.update(found_mapping.names)
            declared.directions.update(found_mapping.directions)
            if first_stamp is not None:
                starts.append(first_stamp)
    if not parts and patterns:
        raise InputError(f"{', '.join(map(str, paths))}: no line matched any patterns", parameter="patterns")
    if not parts:
        raise InputError(
            f"{', '.join(map(str, paths))}: no line reads as a {' or '.join(sorted(set(formats)))} log line"
        )
    rows = concat(parts)
    start = min(starts) if starts else None
    if start is not None:
        rows.values["timestamp"] = rows.values["timestamp"] - start  # seconds since the job's first line
    return TextLog(rows, formats, start, devices, tokens_per_step, declared)


def _read_file(
    path: Path,
    lines: Sequence[str],
    read: RecordReader,
    what: str,
    warnings: Warnings,
    user: LogMapping,
    own: LogMapping | None = None,
    context: Callable[[str], object] | None = None,
) -> tuple[Rows, float | None, LogMapping] | None:
    """The rows of one file's records, the Unix time of its first timestamped line (None when no line starts
    with a timestamp, or the log has its own) and what its format declares (`_declared`); None when it has no
    record. Its skipped lines are said in a warning; the banner each launch prints marks the launches
    (`launches`; `context`: the format's reader of lines that say which epoch begins, which are no banner)."""
    records: list[dict[str, str]] = []
    where: list[str] = []
    first_lines: list[int] = []
    used = np.zeros(len(lines), dtype=bool)
    names: dict[str, None] = {}
    for i, n, rec in read(lines):
        names.update(dict.fromkeys(rec))
        check_columns(len(names), f"{path}:{i + 1}")
        records.append(rec)
        where.append(f"{path}:{i + 1}")
        first_lines.append(i)
        used[i : i + n] = True
    skipped = ~used & np.array([bool(line.strip()) for line in lines], dtype=bool)
    if skipped.any():
        warnings.add(
            "unmatched",
            f"{path}: {int(skipped.sum())} line(s) {what} and were skipped (first: line {int(np.argmax(skipped)) + 1})",
        )
    if not records:
        return None
    launch = launches(lines, first_lines, used, context)
    frame = pd.DataFrame.from_records(records).fillna("")
    columns = {}
    for col in frame.columns:
        values = numeric_column(col, frame[col], where, warnings, str(path))
        if values is not None:
            columns[col] = values
    _refuse_counters_alone(columns, where)
    _refuse_a_stray_record(columns, where, len(lines), patterned=own is not None and bool(own.lines))
    stamps = clock(lines, first_lines) if "timestamp" not in columns else None
    if stamps is not None:
        columns["timestamp"] = (stamps[0], ~np.isnan(stamps[0]))  # Unix seconds until all files are read
    declared = _declared(columns, own)
    if stamps is not None and _stamped(columns, own):
        declared.names["timestamp"] = "wall_s"
        warnings.reading.setdefault("clock", "the timestamp each line starts with (seconds since the first)")
    epoch = columns.get(counter_name("epoch"))
    step_name = _step_of(columns, path, user, own, warnings)
    by_epoch = (
        last_of_each_epoch(columns, step_name, epoch, where, warnings) if "step" not in warnings.reading else None
    )
    if by_epoch is not None:
        columns = {n: (v[by_epoch], p[by_epoch]) for n, (v, p) in columns.items()}
        where = [w for w, keep in zip(where, by_epoch.tolist(), strict=True) if keep]
        launch = launch[by_epoch] if launch is not None else None
    placed = columns[step_name][1]
    if not placed.all():
        warnings.add(
            "unplaced",
            f"{where[int(np.argmin(placed))]}: {int((~placed).sum())} record(s) print no counter that places them "
            "(no epoch beside the count within it): left out",
        )
        columns = {n: (v[placed], p[placed]) for n, (v, p) in columns.items()}
        where = [w for w, keep in zip(where, placed.tolist(), strict=True) if keep]
        launch = launch[placed] if launch is not None else None
    kept = appended_section(columns, step_name, declared.names, where, warnings)
    if not kept.all():
        columns = {n: (v[kept], p[kept]) for n, (v, p) in columns.items()}
        where = [w for w, keep in zip(where, kept.tolist(), strict=True) if keep]
        launch = launch[kept] if launch is not None else None
    for name in {*(own.step_columns() if own is not None else ()), EVAL_MARK} - {step_name}:
        columns.pop(name, None)
    rows = rows_from_columns(str(path), columns, where, step_name)
    rows.launch = launch
    rows.epochs = rows.epochs or by_epoch is not None
    return rows, (stamps[1] if stamps is not None else None), declared


_SETTING = re.compile(r"(?:^|[_/.\s-])(?:lr|learning_?rate|momentum|weight_?decay|wd)(?:\d*|_group_?\d+)$", re.I)
"""A value the trainer sets rather than measures (the learning rate, momentum, weight decay): `lr`, `base_lr`,
`optimizer/lr`, `lr_group0`."""


def _refuse_counters_alone(columns: Mapping[str, tuple[np.ndarray, np.ndarray]], where: Sequence[str]) -> None:
    """InputError where a file's records hold counters alone (a step, an epoch, a batch), or counters and settings
    (a learning rate the trainer prints at each epoch's start), no value of training: a log read so would be
    imported empty, or as a run of learning rates (an ImageNet-style log whose training lines no reader took
    imported 80 learning rates and nothing else, exit 0)."""
    names = [n for n in columns if n not in ("step", "timestamp", EVAL_MARK)]
    settings = [n for n in names if _SETTING.search(n)]
    counted = counts_only(n for n in names if n not in settings)
    if counted is not None:
        what = "counters and settings" if settings else "counters"
        raise InputError(
            f"{where[0]}: only {what} were read ({', '.join(_shown(counted) + sorted(settings))}) on {len(where):,} "
            "line(s), no value of training (a loss, a rate, a score): not a training log's values; name them with "
            "patterns, or a mapping's lines",
            parameter=("patterns", "map"),
        )


_STRAY_RECORDS = 3  # records: this few (or one in a hundred lines) measuring nothing, among many lines, read no run
_STRAY_LINES = 200  # lines: a file this long holding that few records is no log of a training
_TIMES_AND_SETTINGS = ("wall_s", "step_s", "data_wait_s", "lr")


def _refuse_a_stray_record(
    columns: Mapping[str, tuple[np.ndarray, np.ndarray]], where: Sequence[str], lines: int, patterned: bool
) -> None:
    """InputError where a long file gives a few records (three, or one in a hundred lines) that measure nothing
    (no loss, evaluation, rate or count of tokens): a log pasted into a README read as its configuration's `batch=32
    ... train=1`. A training log prints a record every few lines; a few records of settings among thousands of other
    lines are of something else. A mapping's own lines are trusted."""
    if patterned or len(where) > max(_STRAY_RECORDS, lines // 100) or lines < _STRAY_LINES:
        return
    measured = [n for n in columns if (t := guess(n)).kind in ("core", "eval") and t.key not in _TIMES_AND_SETTINGS]
    if measured:
        return
    read = ", ".join(sorted(n for n in columns if n not in ("step", "timestamp"))[:6])
    raise InputError(
        f"{where[0]}: only {len(where)} record(s) read among {lines:,} lines, measuring nothing ({read}): no training "
        "log's records as read; name the values with patterns, or a mapping's lines",
        parameter=("patterns", "map"),
    )


def _step_of(
    columns: dict[str, tuple[np.ndarray, np.ndarray]],
    path: Path,
    user: LogMapping,
    own: LogMapping | None,
    warnings: Warnings,
) -> str:
    """The column that holds the step, and how it was read (`Warnings.reading`): the user's mapping's rule, else the
    counters combined (`stepcount`; a format whose mapping computes the step has its own rule), else the step field
    found by name. The counter columns (`#...`) are taken out."""
    if user.step is not None and user.step.epoch is not None:
        for name in user.step_columns():  # a counter as the log names it (`iter` of `iter: 50`, read as the step)
            if name not in columns and counter_name(name) in columns:
                columns[name] = columns[counter_name(name)]
        for name in [n for n in columns if is_counter(n)]:
            del columns[name]
        columns["step"] = computed_step(columns, user.step, str(path))
        warnings.reading.setdefault("step", f"{user.step.describe()} (the mapping's rule)")
        return "step"
    found = infer_step(columns, str(path))
    counted = found if own is None or own.step is None else None
    if counted is not None and "step" not in user.names.values():
        columns["step"] = (counted.step, counted.present)
        warnings.reading.setdefault("step", counted.how)
        return "step"
    step_name = pick_step(columns, user.names, str(path))
    warnings.reading.setdefault("step_field", step_name)
    rule = (own.step if own is not None else None) or user.step
    if rule is not None and step_name == "step":
        warnings.reading.setdefault("step", f"{rule.describe()} (the mapping's rule)")
    return step_name


def _shown(names: Iterable[str]) -> list[str]:
    """Counter columns as the log names them (`#epoch` -> `epoch`; a total left out)."""
    return sorted({n.lstrip("#") for n in names if not n.endswith("/total")})


_STAMPED = 0.9  # the share of a log's records that start with a timestamp for the timestamps to be its clock


def _stamped(columns: Mapping[str, tuple[np.ndarray, np.ndarray]], own: LogMapping | None) -> bool:
    """Whether the timestamps the records start with are the log's clock: nearly every record has one, and the
    format reads no clock of its own (a `wall_s` it names). A per-iteration `time` beside them is then `step_s`
    (`timing.per_step_times`), and the gaps between launches are in the clock."""
    owned = own is not None and "wall_s" in own.names.values()
    return not owned and "wall_s" not in columns and float(np.mean(columns["timestamp"][1])) >= _STAMPED


def _declared(columns: Mapping[str, tuple[np.ndarray, np.ndarray]], own: LogMapping | None) -> LogMapping:
    """What a file's format declares about the columns it has: the format's names and directions, and every
    metric of its evaluation lines (`EVAL_MARK`) an evaluation under its own name."""
    out = LogMapping()
    if own is not None:
        out.names = {src: key for src, key in own.names.items() if src in columns and key != "step"}
        out.directions = dict(own.directions)
    if EVAL_MARK in columns:
        on_eval = columns[EVAL_MARK][1]
        skip = {EVAL_MARK, "step", *(own.step_columns() if own is not None else ())}
        for name, (_, present) in columns.items():
            # an evaluation line's metrics are named with their task (`val/mIoU`, `coco/bbox_mAP`); its clock is not
            if "/" in name and name not in skip and name not in out.names and (present & on_eval).any():
                out.names[name] = name
    out.names.update(training_metrics(columns, out.names))
    return out
