"""A run's per-epoch values written as JSON in one of two shapes other than JSON lines.

**Columns**: one JSON object whose values are lists of numbers, one per epoch (Keras' `History.history` dumped with
`json.dump`: `{"loss": [...], "val_loss": [...], "learning_rate": [...]}`; nested objects of such lists are read with
their keys joined by `/`). Each list is a column and the position in it the row: the step is a list named as a step
(`epoch`), else the position, counting epochs from 0 as Keras' own CSVLogger does.

**Records**: a folder of pretty-printed JSON objects, one per epoch, numbered by it (AllenNLP's serialization folder:
`metrics_epoch_0.json`, `metrics_epoch_1.json`, ..., each holding `epoch`, `training_loss`, `validation_loss`,
`best_validation_loss` and a cumulative `training_duration` of `H:MM:SS.f`).

**Array**: one JSON list of such objects, one per logging interval (Chainer's LogReport writes `result/log` so:
`[{"epoch": 1, "iteration": 600, "main/loss": ..., "validation/main/loss": ..., "elapsed_time": ...}, ...]`), is the
same table as JSON lines of those objects would be; each object names its step.

A **record** is one JSON object whose values are scalars (numbers, text, booleans, null), read as one row; a folder
of them (or several named on the command line) is one run's table, its rows in the order of the number in their
names (`metrics_epoch_10.json` after `metrics_epoch_9.json`, whatever the shell's sort). Only the files that share
one numbered name are its rows: AllenNLP's `metrics.json` (the final epoch's record again, with the bests) and
`config.json` beside them are left out, and said. A record's step is its own step field (`epoch`, `step`), else the
number in its name, which counts epochs. A duration field (`0:07:35.750313`) is read in seconds
(`tables.numeric_column`); a cumulative one is the run's clock (`aliases`: AllenNLP's `training_duration`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from yieldgate.aliases import STEP_NAMES
from yieldgate.errors import InputError
from yieldgate.ingest.clean import check_columns, parse_json
from yieldgate.ingest.types import Warnings
from yieldgate.names import SPLIT_PREFIXES
from yieldgate.util.inputs import read_regular

__all__ = [
    "RECORD_BYTES",
    "columns_of",
    "has_step",
    "in_order",
    "is_record",
    "metadata_of",
    "numbered",
    "read_array",
    "read_columns",
    "read_record",
    "rows_of",
    "record_files",
]

RECORD_BYTES = 1 << 20
"""A record file is one step's values: a JSON object past 1 MiB is some other document, not read as one."""
# The last number in a file's name: `metrics_epoch_12.json` -> 12
_NUMBER = re.compile(r"(\d+)(?!.*\d)")


def numbered(path: Path) -> int | None:
    """The last number in the file's name without its suffix (`metrics_epoch_12.json` -> 12), or None."""
    found = _NUMBER.search(path.stem)
    return int(found[1]) if found else None


def _object(path: Path) -> dict | None:
    """The JSON object of a small `.json` file whose values are all scalars, or None for anything else."""
    if path.suffix.lower() != ".json" or not path.is_file() or path.stat().st_size > RECORD_BYTES:
        return None
    try:
        doc = parse_json(read_regular(path, "a JSON record").decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, InputError):
        return None
    if not isinstance(doc, dict) or not doc:
        return None
    if any(isinstance(v, (dict, list)) for v in doc.values()):
        return None
    return doc


def is_record(path: Path) -> bool:
    """True when `path` is one JSON object of scalars (one row of a table)."""
    return _object(path) is not None


def has_step(path: Path) -> bool:
    """True when the record in `path` says which step it is: a step field of its own, or a number in its name."""
    doc = _object(path)
    return doc is not None and (numbered(path) is not None or bool({str(k).lower() for k in doc} & set(STEP_NAMES)))


def _pattern(path: Path) -> str:
    """The file's name with its last number as a placeholder: the files of one series share it."""
    return _NUMBER.sub("#", path.name[: -len(path.suffix)]) + path.suffix


def record_files(folder: Path, warnings: Warnings | None = None) -> list[Path]:
    """The records of a folder that are one run's rows: the numbered JSON records of the most common numbered name,
    in number order; the folder's other JSON files named in a warning. Empty when the folder holds none."""
    candidates = [p for p in folder.iterdir() if p.suffix.lower() == ".json" and p.is_file()]
    series: dict[str, list[Path]] = {}
    for path in candidates:
        if numbered(path) is not None and is_record(path):
            series.setdefault(_pattern(path), []).append(path)
    if not series:
        return []
    name, files = max(series.items(), key=lambda item: (len(item[1]), item[0]))
    files.sort(key=lambda p: (numbered(p), p.name))
    others = sorted(p.name for p in candidates if p not in files)
    if others and warnings is not None:
        warnings.add(
            "records",
            f"{folder}: {len(files)} records {name} read, one row each; {len(others)} other JSON file(s) left out "
            f"({', '.join(others[:4])}{', ...' if len(others) > 4 else ''})",
        )
    return files


def in_order(paths: Sequence[Path]) -> list[Path]:
    """`paths` with each folder of records replaced by its records (`record_files`) and the records named one by one
    put in the order of their numbers (the shell sorts `metrics_epoch_10.json` before `metrics_epoch_9.json`)."""
    out: list[Path] = []
    for path in paths:
        out += record_files(path) if path.is_dir() else [path]
    if len(out) > 1 and all(numbered(p) is not None and p.suffix.lower() == ".json" for p in out):
        out.sort(key=lambda p: (numbered(p), p.name))
    return out


def read_record(path: Path, warnings: Warnings) -> tuple[pd.DataFrame, list[str]]:
    """One record file as a table of one row (its cells as text, as the other readers give them); without a step
    field of its own the number in its name is its `epoch`."""
    doc = _object(path)
    if doc is None:
        raise InputError(f"{path}: not one JSON object of numbers and text; expected a record of one step")
    check_columns(len(doc), str(path))
    row = {str(k): "" if v is None else str(v) for k, v in doc.items()}
    number = numbered(path)
    if not {k.lower() for k in row} & set(STEP_NAMES) and number is not None:
        row["epoch"] = str(number)
        warnings.add("records", f"{path.parent}: no step field in the records: the number in each name is its epoch")
    return pd.DataFrame([row]), [str(path)]


def rows_of(doc: object) -> list[dict] | None:
    """The rows of a JSON document in the array shape: a list of two or more objects of scalars, each with a step
    field of its own (`epoch`, `iteration`, `step`); None for any other document."""
    if not isinstance(doc, list) or len(doc) < 2:
        return None
    for row in doc:
        if not isinstance(row, dict) or not row or not all(map(_scalar, row.values())):
            return None
        if not {str(k).lower() for k in row} & set(STEP_NAMES):
            return None
    return doc


def _parsed(path: Path, expected: str) -> object:
    """The file as one JSON document; None where it is not JSON text (the shape checks then refuse it)."""
    try:
        return parse_json(read_regular(path, expected).decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def read_array(path: Path, warnings: Warnings) -> tuple[pd.DataFrame, list[str]]:
    """A JSON list of step records (`rows_of`) as a table, a row per object, as JSON lines of them would read."""
    rows = rows_of(_parsed(path, "a JSON list of records"))
    if rows is None:
        raise InputError(f"{path}: not a JSON list of objects of numbers, each with its step; expected step records")
    keys = dict.fromkeys(str(k) for row in rows for k in row)
    check_columns(len(keys), str(path))
    cells = [{str(k): "" if v is None else str(v) for k, v in row.items()} for row in rows]
    return pd.DataFrame.from_records(cells).fillna(""), [f"{path}: object {i + 1}" for i in range(len(rows))]


def _leaves(doc: dict, prefix: str = "") -> dict[str, object]:
    """The leaves of nested objects, their keys joined by `/`."""
    out: dict[str, object] = {}
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out |= _leaves(value, name + "/")
        else:
            out[name] = value
    return out


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _numbers(values: list) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) or x is None for x in values)


def columns_of(doc: object) -> dict[str, list] | None:
    """{name: values} of a JSON document in the columns shape: an object (nested objects allowed) whose leaves are
    lists of numbers (or nulls), all of one length, and at most as many scalars beside them as there are lists
    (metadata: Ludwig's `evaluation_frequency: {frequency: 1, period: epoch}`, not a row; `metadata_of`); None for
    any other document (a configuration's few lists among its many scalars among them)."""
    if not isinstance(doc, dict) or not doc:
        return None
    leaves = _leaves(doc)
    lists: dict[str, list] = {name: value for name, value in leaves.items() if isinstance(value, list)}
    scalars = [value for value in leaves.values() if not isinstance(value, list)]
    if not lists or len(scalars) > len(lists) or not all(map(_scalar, scalars)):
        return None
    lengths = {len(v) for v in lists.values()}
    return lists if len(lengths) == 1 and lengths != {0} and all(map(_numbers, lists.values())) else None


def metadata_of(doc: dict) -> list[str]:
    """The names of a columns document's scalar leaves (`columns_of`): what it says of the run, not a row."""
    return [name for name, value in _leaves(doc).items() if not isinstance(value, list)]


def _split_losses(lists: dict[str, list]) -> dict[str, str]:
    """{leaf: new name} for the loss of each split (a top-level key `names.SPLIT_PREFIXES` knows: Ludwig's
    `training`, `validation`, `test`) that has one (`training/combined/loss` -> `loss`,
    `validation/combined/loss` -> `val_loss`, `test/combined/loss` -> `test_loss`): of the split's leaves named
    `loss`, the one at least as high as every other at every position (the total of its output features' losses,
    Ludwig's `combined`; with one feature all are equal, the shortest name taken). The other leaves keep their
    names (`validation/<feature>/accuracy` is an evaluation of task `val/<feature>`, `aliases.guess`)."""
    renamed: dict[str, str] = {}
    for split, prefix in SPLIT_PREFIXES.items():
        losses = [n for n in lists if n.lower().startswith(split + "/") and n.lower().endswith("/loss")]
        if not losses:
            continue
        table = np.array([[np.nan if x is None else x for x in lists[n]] for n in losses], dtype=float)
        top = [n for n, row in zip(losses, table, strict=True) if (np.nan_to_num(row - table, nan=0.0) >= 0).all()]
        if top:
            renamed[min(top, key=lambda n: (n.count("/"), len(n)))] = prefix + "loss"
    return renamed


def read_columns(path: Path, warnings: Warnings) -> tuple[pd.DataFrame, list[str]]:
    """A JSON document of columns (`columns_of`) as a table, one row per position in its lists; without a list named
    as a step, the position is the `epoch` (from 0). Lists under a split's key (`training`, `validation`, `test`)
    are that split's values, each split's total loss its loss (`_split_losses`); scalars beside the lists are left
    out, and said."""
    doc = _parsed(path, "a JSON document of columns")
    lists = columns_of(doc)
    if lists is None:
        raise InputError(f"{path}: not one JSON object of equal-length lists of numbers; expected per-epoch columns")
    assert isinstance(doc, dict)
    meta = metadata_of(doc)
    if meta:
        warnings.add(
            "columns",
            f"{path}: {len(meta)} value(s) beside the lists ({', '.join(meta[:4])}): what the file says "
            "of the run, not rows; not imported",
        )
    check_columns(len(lists), str(path))
    renamed = _split_losses(lists)
    rows = len(next(iter(lists.values())))
    frame = pd.DataFrame(
        {renamed.get(name, name): ["" if x is None else str(x) for x in values] for name, values in lists.items()}
    )
    if not {name.lower() for name in lists} & set(STEP_NAMES):
        frame["epoch"] = [str(i) for i in range(rows)]
        warnings.add("columns", f"{path}: lists of {rows} values and no step among them: each position is an epoch")
    return frame, [f"{path}:[{i}]" for i in range(rows)]
