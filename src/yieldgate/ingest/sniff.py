"""What a source holds, told from its content and never from its name alone: `yieldgate import auto` picks the kind
with `kind_of`, and the table and text-log readers read a file by what it holds (`table_format`). A JSON-lines log is
as often named `metrics.json` (detectron2), `scalars.json` (MMEngine), `log.txt` (DETR, DeiT, MAE, ConvNeXt: one
object per epoch) or `trainer_log.jsonl` (LLaMA-Factory) as `.jsonl`. A refusal says what the content looked like.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Sequence
from pathlib import Path

from yieldgate.errors import InputError
from yieldgate.ingest.clean import clip, parse_json
from yieldgate.ingest.epochfiles import columns_of, has_step, is_record, record_files, rows_of
from yieldgate.util.inputs import check_regular

__all__ = ["SPACES", "delimiter", "describe", "kind_of", "split_fields", "table_format"]

_HEAD = 64 * 1024  # bytes read to tell a file's kind


def _head(path: Path) -> str:
    check_regular(path, "a training log or table")  # a FIFO or /dev/zero is refused, not waited on
    with path.open("rb") as f:
        data = f.read(_HEAD)
    if path.suffix.lower() == ".gz":
        import zlib

        try:
            data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, _HEAD)
        except zlib.error:
            return ""
    return data.decode("utf-8", errors="replace")


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _is_object(line: str) -> bool:
    line = line.strip()
    if not (line.startswith("{") and line.endswith("}")):
        return False
    try:
        return isinstance(parse_json(line), dict)
    except (json.JSONDecodeError, ValueError):
        return False


def table_format(path: Path) -> str | None:
    """`parquet`, `jsonl` (one JSON object per line, whatever the name), `record` (one JSON object of numbers and
    text: one row), `columns` (one JSON object of equal-length lists of numbers: one row per position), `array` (a
    JSON list of objects of numbers, each with its step: one row per object; the three `ingest.epochfiles`) or `csv`
    (`_is_csv`), from the file's content; None for anything else."""
    with path.open("rb") as f:
        if f.read(4) == b"PAR1":
            return "parquet"
    lines = _lines(_head(path))
    if not lines:
        return None
    complete = lines[:-1] or lines  # the last line of the head may be cut
    if len(lines) >= 2 and all(_is_object(line) for line in complete[:50]):
        return "jsonl"  # one object alone is a JSON document, not a log of records
    if lines[0].lstrip().startswith("{") and is_record(path):
        return "record"
    if lines[0].lstrip().startswith("{") and _columns_shaped(path):
        return "columns"
    if lines[0].lstrip().startswith("[") and _rows_shaped(path):
        return "array"
    return "csv" if _is_csv(lines, complete) else None


# A header cell that is a name and a value (`epoch 1`, `loss: 0.5`, `lr=0.1`, `{'loss': 2.3`, `Step: 10/40`,
# `Epoch [3/300]`): a printed line
_VALUE = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NAMED_VALUE = re.compile(rf"[\s:=]\s*\[?{_VALUE}(?:\s*/\s*{_VALUE})?\]?\s*[}}\])]*\s*$|^\s*[{{\[(]")
_NUMBER = re.compile(rf"{_VALUE}|[-+]?(?i:nan|inf|infinity)")
# The delimiters a table is written with, in the order a tie goes to; runs of spaces (`SPACES`) are tried last.
_DELIMITERS = ("\t", ",", ";")
SPACES = " "
"""`delimiter`'s answer for a table whose columns are separated by runs of spaces (or tabs mixed with them)."""


def split_fields(lines: Sequence[str], sep: str) -> list[list[str]] | None:
    """The fields of each line split at `sep` (quoted fields as the csv module reads them; `SPACES`: runs of
    whitespace), or None where the csv module cannot read them."""
    if sep == SPACES:
        return [line.split() for line in lines]
    try:
        return list(csv.reader(lines, delimiter=sep))
    except csv.Error:
        return None


def delimiter(lines: Sequence[str]) -> str | None:
    """The delimiter of a table's lines (its header first): of tab, comma and semicolon, the one that splits every
    line into as many fields, two or more (the most fields where several do: a cell may hold another's delimiter);
    else `SPACES` where runs of spaces split the header into two or more names and every line after it into as many
    numbers (an aligned table: `epoch  loss  val_loss`); None for lines that are no table."""
    lines = [line for line in lines if line.strip()]
    if len(lines) < 2:
        return None
    best: tuple[int, str] | None = None
    for sep in _DELIMITERS:
        if sep not in lines[0]:
            continue
        rows = split_fields(lines, sep)
        if rows is None or len(rows[0]) < 2 or any(len(row) != len(rows[0]) for row in rows[1:]):
            continue
        if best is None or len(rows[0]) > best[0]:
            best = (len(rows[0]), sep)
    if best is not None:
        return best[1]
    rows = split_fields(lines, SPACES) or []
    names, body = rows[0], rows[1:]
    if len(names) < 2 or any(_NUMBER.fullmatch(n) for n in names):
        return None
    if all(len(row) == len(names) and all(_NUMBER.fullmatch(cell) for cell in row) for row in body):
        return SPACES
    return None


def _is_csv(lines: list[str], complete: list[str]) -> bool:
    """A header of two or more names (not numbers, not `name value` pairs as a printed log line has them), on every
    complete line of the head as many fields split by one delimiter (`delimiter`), and a column of numbers below the
    header (`_numbers_below`): a text log whose lines hold commas is no table, though each holds one (Python
    logging's `12:00:01,000`, a tqdm bar's `[00:01<00:00, 1.00it/s]`)."""
    if len(lines) < 2:
        return False
    head = complete[:2000] if len(complete) >= 2 else lines[:2]
    sep = delimiter(head)
    rows = split_fields(head, sep) if sep is not None else None
    if not rows:
        return False
    names = [n.strip().strip('"') for n in rows[0]]
    if sum(bool(_NAMED_VALUE.search(n)) for n in names) > len(names) // 2:  # most cells a `name value` pair
        return False
    if not _numbers_below(rows):
        return False
    return sum(not n.replace(".", "", 1).replace("-", "", 1).isdigit() for n in names) > len(names) // 2


def _numbers_below(rows: list[list[str]]) -> bool:
    """Whether some column holds a number on every row after the header that fills it (one at least): a table of a
    run counts or measures something; a log's lines cut at their one comma leave a timestamp and the message."""
    body = rows[1:]
    for col in range(len(rows[0])):
        cells = [row[col].strip().strip('"') for row in body if col < len(row) and row[col].strip().strip('"')]
        if cells and all(_NUMBER.fullmatch(cell) for cell in cells):
            return True
    return False


def describe(path: Path) -> str:
    """What the file's content looks like, in a few words, for a refusal: `JSON lines (keys iteration, loss, ...)`,
    `one JSON object (keys ...)`, `a CSV header (...)`, `plain text: '<its first line>'`, `binary data`."""
    text = _head(path)
    if "\x00" in text[:4096]:
        return "binary data"
    lines = _lines(text)
    if not lines:
        return "nothing (an empty file)"
    if len(lines) >= 2 and _is_object(lines[0]):
        keys = list(parse_json(lines[0]))
        return f"JSON lines (keys {', '.join(map(str, keys[:6]))}{', ...' if len(keys) > 6 else ''})"
    if lines[0].lstrip().startswith(("{", "[")):
        try:
            doc = parse_json(text)
        except (json.JSONDecodeError, ValueError):
            return f"JSON that does not parse as a whole (first line {clip(lines[0])})"
        if isinstance(doc, dict):
            return f"one JSON object (keys {', '.join(map(str, list(doc)[:6]))})"
        return f"a JSON {type(doc).__name__}"
    return f"plain text (first line {clip(lines[0])})"


_UNREAD = object()  # `_document`'s answer for a file that is no JSON document (JSON's own `null` is None)


def _document(path: Path) -> object:
    """The whole file as one JSON document, or `_UNREAD` where it is not one."""
    from yieldgate.ingest.clean import read_json

    try:
        return read_json(path, "a JSON file")
    except InputError:
        return _UNREAD


def _json_kind(path: Path) -> str | None:
    doc = _document(path)
    if doc is _UNREAD:
        return None
    if isinstance(doc, dict) and isinstance(doc.get("log_history"), list):
        return "hf-trainer"
    return "lm-eval" if _lmeval_shaped(doc) else None


# The checkpoint axes of an lm-eval aggregate (`ingest.lmeval` reads them)
_AXES = {"steps", "step", "checkpoints", "iterations", "tokens", "tokens_seen", "num_tokens", "train_tokens"}


def _lmeval_shaped(doc: object) -> bool:
    """lm-eval results: one checkpoint's (`results` an object), a list or object of such, or an aggregate's
    per-task lists beside a list of steps or tokens."""

    def one(d: object) -> bool:
        return isinstance(d, dict) and isinstance(d.get("results"), dict)

    if one(doc):
        return True
    if isinstance(doc, list):
        return bool(doc) and all(one(d) for d in doc)
    if not isinstance(doc, dict) or not doc:
        return False
    if all(one(v) for v in doc.values()):
        return True
    inner = next(iter(doc.values())) if len(doc) == 1 else doc
    return isinstance(inner, dict) and any(str(k).lower() in _AXES and isinstance(v, list) for k, v in inner.items())


def _dir_kind(source: Path) -> str:
    files = [p for p in source.rglob("*") if p.is_file()]
    if any("tfevents" in p.name for p in files):
        return "tensorboard"
    if (source / "trainer_state.json").is_file():
        return "hf-trainer"
    if files and all(p.suffix == ".json" for p in files) and any(_json_kind(p) == "lm-eval" for p in files[:20]):
        return "lm-eval"
    if record_files(source):
        return "table"  # one JSON record per file, numbered by epoch (ingest.epochfiles)
    raise InputError(
        f"{source}: a directory without TensorBoard event files, trainer_state.json, lm-eval results or numbered "
        "JSON records (metrics_epoch_0.json, ...); give the log file itself, or name the kind (yieldgate import "
        "KIND ...)"
    )


def kind_of(source: Path) -> str:
    """The import kind of a file or directory by its content: `tensorboard`, `hf-trainer`, `lm-eval`, `table` or
    `textlog` (a text file no other kind reads; the text-log reader then finds its format or says it has none)."""
    if source.is_dir():
        return _dir_kind(source)
    if not source.exists():
        raise InputError(f"{source}: no such file or directory")
    if not source.is_file():  # a FIFO blocks the reader that sniffs it; /dev/zero never ends
        check_regular(source, "a training log, table or results file")
    if "tfevents" in source.name:
        return "tensorboard"
    fmt = table_format(source)
    if fmt == "record" and not has_step(source):
        raise InputError(
            f"{source}: {describe(source)}, one record of no step (no step field, no number in its name): neither "
            "a Trainer's state (log_history), lm-eval results nor JSON lines; to read it as one step, import it as "
            "a table and name its step field with map step=FIELD",
            parameter="map",
        )
    if fmt is not None:
        return "table"
    head = _head(source)
    if "\x00" in head[:4096]:
        raise InputError(f"{source}: binary data that is no known format (not a TensorBoard event file, not Parquet)")
    if head.lstrip().startswith(("{", "[")) and _parses(source):
        kind = _json_kind(source)
        if kind is None:
            raise InputError(
                f"{source}: {describe(source)}: neither a Trainer's state (log_history), lm-eval results, JSON "
                "lines nor a record of one step; it is no training log yieldgate reads",
            )
        return kind
    return "textlog"  # printed lines, bracketed or with commas as they may be: the text-log reader tells


def _columns_shaped(path: Path) -> bool:
    """True when the file is one JSON object of equal-length lists of numbers (`epochfiles.columns_of`) that is not
    an lm-eval aggregate (whose per-task lists sit beside a list of checkpoints: `ingest.lmeval` reads it)."""
    doc = _document(path)
    return doc is not _UNREAD and columns_of(doc) is not None and not _lmeval_shaped(doc)


def _rows_shaped(path: Path) -> bool:
    """True when the file is one JSON list of step records (`epochfiles.rows_of`)."""
    return rows_of(_document(path)) is not None


def _parses(path: Path) -> bool:
    """True when the whole file is one JSON document (a log whose lines start with `[` or `{` is not)."""
    return _document(path) is not _UNREAD
