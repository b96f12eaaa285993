"""Cleaning a run's rows as read from a real log: the one place every importer sends its data through.

Real logs are messy. What each case becomes (docs/importing.md lists the same):

- **A truncated last line** (a writer killed mid-line: the file does not end with a line end): skipped, with
  a warning naming the line. A file that merely lacks its final newline loses its last row the same way;
  the warning says so.
- **Repeated rows** (the same step with the same values again, e.g. a log appended twice): the repeats are
  dropped, one warning with the count and the first repeat's line.
- **Two writers of one log** (two ranks, or two launches, appending one file: each step twice, the file order
  stepping back by a logging interval now and then): a row equal to the row before it of its step in every value
  but its writer's own timing, to the digits each printed, its clock near the first's (without a clock: stepping
  back by two logging intervals at most), is the same record written twice: kept once, one warning. It is not a
  restart: a restart shows its clock restarting, or other values, or goes back further (`stepback`).
- **A restart** (the steps go back in file order): a `resume` event; only the steps done again are its lost work.
- **A step logged again with other values** (a run resumed from an earlier checkpoint re-logs its steps):
  the later values win, column by column, one warning per step (first few, then a count).
- **`nan` / `inf`**: kept as NaN / inf (a diverged loss is data), one warning per column with the count.
- **A cumulative clock that goes backwards** (a timer reset after warm-up, a resumed run restarting its
  clock): the later values are offset so the clock keeps counting from where it was, one warning per reset
  with the line and both values.
- **A metric present only on some rows**: absent where it is absent (not NaN, not zero).
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.errors import InputError
from yieldgate.ingest.stepback import restarts, second_writer
from yieldgate.ingest.types import Rows, Warnings
from yieldgate.util.inputs import read_regular

__all__ = [
    "Rows",
    "Warnings",
    "read_json",
    "parse_json",
    "clip",
    "read_lines",
    "read_bytes",
    "placeholder",
    "unix_seconds",
    "concat",
    "pivot",
    "clean",
    "own_export",
    "check_columns",
    "MAX_COLUMNS",
    "CLOCK_COLUMNS",
]

# Cumulative clocks: a value lower than the one before is a reset, not time running backwards.
CLOCK_COLUMNS = ("wall_s",)

# Metrics one import takes. Every reader holds its rows column by column; a table of tens of thousands of
# columns (a dump of per-parameter values, a transposed table) would take minutes and gigabytes to turn into
# step records nobody reads.
MAX_COLUMNS = 2000


def check_columns(count: int, where: str) -> None:
    """Refuse a source of more than MAX_COLUMNS metric columns (tags, keys), saying how to import it."""
    if count > MAX_COLUMNS:
        raise InputError(
            f"{where}: {count:,} columns, more than the {MAX_COLUMNS:,} one import takes; keep the "
            f"columns you need, or split the table into tables of at most {MAX_COLUMNS:,} columns, each "
            "with the step, and import them one by one into the same run",
            parameter="run",
        )


def concat(parts: list[Rows]) -> Rows:
    """Rows of several files of one run, one after the other (a column missing from a file is absent there)."""
    names = list(dict.fromkeys(n for p in parts for n in p.values))
    rows = Rows(
        ", ".join(p.source for p in parts),
        np.concatenate([p.step for p in parts]),
        [w for p in parts for w in p.where],
        epochs=all(p.epochs for p in parts),
    )
    if any(p.launch is not None for p in parts):
        # each file's launches after those of the files before it; a file that marks none goes on the launch before
        counted: list[np.ndarray] = []
        last = 0
        for p in parts:
            own = p.launch + last + (1 if counted else 0) if p.launch is not None else np.full(len(p), last)
            counted.append(own)
            last = int(own.max()) if len(own) else last
        rows.launch = np.concatenate(counted)
    for n in names:
        rows.values[n] = np.concatenate([p.values.get(n, np.full(len(p), np.nan)) for p in parts])
        rows.present[n] = np.concatenate([p.present.get(n, np.zeros(len(p), dtype=bool)) for p in parts])
    return rows


def pivot(
    source: str,
    group: np.ndarray,
    step: np.ndarray,
    name: Sequence[str],
    value: np.ndarray,
    wall_time: np.ndarray,
    where: Callable[[int], str],
    warnings: Warnings,
) -> Rows:
    """Rows from long-form scalars (one value of one metric each): one row per (group, step), in order of
    first appearance, plus `wall_time` (the row's latest Unix time, counted from the earliest value's; NaN: a
    value without a time of its own).

    `group` tells apart rows of one step that are separate records (an events file of a resumed run); within
    a row, a metric logged twice keeps its last value, with a warning. `where(i)` names the i-th value's
    origin (built only for the values a row or a warning points at: there may be millions).
    """
    if len(step) == 0:
        return Rows(source, np.empty(0, dtype=np.int64), [])
    # (group, step) pairs as one integer, without packing bits: any int64 step, negative ones included.
    step_code, step_values = pd.factorize(step, sort=False)
    key = group.astype(np.int64) * len(step_values) + step_code
    row, _ = pd.factorize(key, sort=False)
    col, names = pd.factorize(pd.Series(name, dtype=object), sort=False)
    n_rows, n_cols = int(row.max()) + 1, len(names)
    flat = row.astype(np.int64) * n_cols + col
    last = np.full(n_rows * n_cols, -1, dtype=np.int64)
    np.maximum.at(last, flat, np.arange(len(flat)))
    repeated = np.bincount(flat, minlength=n_rows * n_cols) > 1
    if repeated.any():
        i = int(last[np.argmax(repeated)])
        warnings.add(
            "relogged", f"{where(i)}: {int(repeated.sum())} value(s) logged more than once at one step; the last kept"
        )
    wall = np.full(n_rows, -np.inf)
    np.fmax.at(wall, row, wall_time)  # a NaN time is none: a row of such values only has no clock
    first = np.full(n_rows, len(step), dtype=np.int64)
    np.minimum.at(first, row, np.arange(len(step)))
    rows = Rows(source, step[first].astype(np.int64), [where(int(i)) for i in first])
    rows.values["wall_time"] = wall - np.nanmin(wall_time)
    rows.present["wall_time"] = np.isfinite(wall)
    grid = last.reshape(n_rows, n_cols)
    for j, n in enumerate(names):
        got = grid[:, j] >= 0
        values = np.full(n_rows, np.nan)
        values[got] = value[grid[got, j]]
        rows.values[str(n)], rows.present[str(n)] = values, got
    return rows


_LFS_POINTER = re.compile(
    rb"^version https://git-lfs\.github\.com/spec/v1\s+oid sha256:(?P<oid>[0-9a-f]{64})\s+"
    rb"size (?P<size>\d+)"
)
_HTML = re.compile(rb"^\s*(?:<!doctype html|<html|<head|<\?xml[^>]*>\s*<html)", re.IGNORECASE)


def placeholder(path: Path, head: bytes, expected: str) -> str | None:
    """What a file holds instead of a log, from its first bytes: a Git LFS pointer, nothing, or a web page
    saved in its place (a download of a repository's HTML view) — the message to give, or None."""
    if not head.strip():
        return f"{path}: the file is empty{' (only whitespace)' if head else ''}; expected {expected}"
    m = _LFS_POINTER.match(head)
    if m is not None:
        return (
            f"{path}: this is a Git LFS pointer (a {int(m['size']):,}-byte file stored elsewhere), not the file "
            "itself: run `git lfs pull` in its repository, then import again"
        )
    if _HTML.match(head[:512]):
        return (
            f"{path}: this is an HTML page, not {expected}: a web page was saved in the file's place (download "
            "the raw file, e.g. GitHub's 'Raw' link)"
        )
    return None


def read_bytes(path: Path, expected: str) -> bytes:
    """A file's bytes; unreadable, not a regular file (a FIFO, /dev/zero), empty, a Git LFS pointer or a saved
    web page is one InputError saying so."""
    data = read_regular(path, expected)
    problem = placeholder(path, data[:1024], expected)
    if problem is not None:
        raise InputError(problem)
    return data


def own_export(rows: Rows, warnings: Warnings, *, step: str | None, prefix: str = "") -> Rows:
    """Rows of a run yieldgate itself exported (`yieldgate export --to tensorboard|mlflow|wandb`), back as the
    run they came from: the optimizer step from the `step` series where the export stepped by tokens, names
    without the export's `prefix` (`yieldgate/loss` -> `loss`), and without what the export derived (its
    `yield/*` figures, recomputed from the data; the writer's clock, when the run's own `wall_s` is there)."""
    if step is not None and step in rows.values:
        keep = rows.present[step] & np.isfinite(rows.values[step])
        rows = rows.take(keep)
        rows.step = rows.values.pop(step).astype(np.int64)
        rows.present.pop(step)
    renamed = Rows(rows.source, rows.step, rows.where)
    derived = 0
    for name in rows.values:
        if name.startswith("yield/"):
            derived += 1
            continue
        new = name.removeprefix(prefix) if prefix else name
        renamed.values[new], renamed.present[new] = rows.values[name], rows.present[name]
    for clock in ("wall_time", "_runtime"):  # the export's writer's clock (TensorBoard, MLflow; W&B's)
        if "wall_s" in renamed.values and clock in renamed.values:
            del renamed.values[clock], renamed.present[clock]
    if derived:
        warnings.add(
            "derived",
            f"{rows.source}: a yieldgate export: its {derived} yield series are derived from the "
            "run's data and were not imported (yieldgate yield recomputes them)",
        )
    return renamed


# Whole numbers of more digits than this are read as floats: Python refuses to read an int of 4,300+ digits
# (and takes quadratic time below that), and past 2**63 no step or counter of ours is an integer anyway.
_INT_DIGITS = 18


def _int(text: str) -> int | float:
    return int(text) if len(text) <= _INT_DIGITS else float(text)


def parse_json(text: str | bytes) -> Any:
    """`json.loads`, bounded for what a hostile or damaged file holds: a whole number of thousands of digits is
    a float (inf past float range), and nesting deeper than Python can parse is a JSONDecodeError ("nested too
    deeply") instead of a RecursionError. Every JSON reader of an importer goes through here."""
    try:
        return json.loads(text, parse_int=_int)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text if isinstance(text, str) else "", 0) from None


def clip(text: str, limit: int = 60) -> str:
    """`text` for a message: its repr, cut to `limit` characters with its length said when longer (a 16,000-digit
    cell must not make a 16,000-character error line)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


def read_json(path: Path, expected: str) -> object:
    """A JSON document; unreadable, non-UTF-8 or invalid JSON (nested too deeply included) is one InputError
    naming file and line."""
    data = read_bytes(path, expected)
    try:
        return parse_json(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: byte {exc.start}: not UTF-8 text; expected {expected}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg}); expected {expected}") from None


def unix_seconds(cells: pd.Series) -> np.ndarray:
    """Unix seconds of time cells: Unix times in s, ms, µs or ns (told apart by size: 1e9 s is 2001, 1e11 s
    would be the year 5138) or date-times (without a UTC offset: this machine's local time, as nvidia-smi
    writes them). NaN where a cell is empty or not a time."""
    text = cells.fillna("").astype(str).str.strip()
    filled = text != ""
    numeric = pd.to_numeric(text.where(filled), errors="coerce")
    if filled.any() and numeric.notna().sum() == filled.sum():
        values = numeric.to_numpy(dtype=float, na_value=np.nan)
        median = np.nanmedian(values)
        return values / next((unit for above, unit in ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3)) if median > above), 1.0)
    stamps = pd.to_datetime(text.where(filled), format="mixed", errors="coerce")
    if stamps.dt.tz is None:
        stamps = stamps.dt.tz_localize(datetime.now().astimezone().tzinfo)
    return (stamps - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(dtype=float, na_value=np.nan)


# The longest line an importer reads. A real log's or table's lines are short (a CSV header of MAX_COLUMNS names
# of MAX_NAME_CHARS is 400,000 characters); a longer one is a damaged or binary file, and one of 100 MB once kept
# an import busy for minutes before it became a metric name of millions of characters.
MAX_LINE_CHARS = 1_000_000


def _refuse_long_lines(path: Path, lines: Sequence[str], expected: str) -> None:
    """InputError naming the first line longer than MAX_LINE_CHARS."""
    for i, line in enumerate(lines, start=1):
        if len(line) > MAX_LINE_CHARS:
            raise InputError(
                f"{path}:{i}: a line of {len(line):,} characters, more than the {MAX_LINE_CHARS:,} a line of "
                f"{expected} holds (a damaged or binary file?); fix or remove that line"
            )


def read_lines(
    path: Path,
    warnings: Warnings,
    expected: str = "a training log",
    complete: Callable[[list[str]], bool] | None = None,
) -> list[str]:
    """A text file's lines (`.gz` decompressed); a last line without a line end is treated as truncated:
    skipped, with a warning, unless `complete(lines)` says it is whole (a CSV row with every field: W&B
    writes its exports without a final line end). An empty file, a Git LFS pointer or a saved web page is
    an InputError."""
    data = read_bytes(path, expected)
    if path.suffix.lower() == ".gz":  # logs are often kept compressed
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(
                f"{path}: not a readable gzip file ({exc}); decompress it or give the plain file"
            ) from None
        problem = placeholder(path, data[:1024], expected)
        if problem is not None:
            raise InputError(problem)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Logs pick up stray bytes (a progress bar, a locale); the lines stay readable, and the user is told.
        text = data.decode("utf-8", errors="replace")
        line = data.count(b"\n", 0, exc.start) + 1
        warnings.add(
            "encoding",
            f"{path}:{line}: not UTF-8 text (byte {exc.start}); "
            "undecodable bytes read as U+FFFD; save the file as UTF-8 to keep them",
        )
    lines = text.splitlines(keepends=True)
    if len(text) > MAX_LINE_CHARS:
        _refuse_long_lines(path, lines, expected)
    if lines and not lines[-1].endswith(("\n", "\r")) and not (complete is not None and complete(lines)):
        warnings.add(
            "truncated",
            f"{path}:{len(lines)}: last line has no line end (truncated write?); skipped: {lines[-1][:60]!r}",
        )
        lines = lines[:-1]
    return [line.rstrip("\r\n") for line in lines]


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b) | (np.isnan(a) & np.isnan(b))


def _drop_repeats(rows: Rows, warnings: Warnings) -> Rows:
    """Drop rows equal to an earlier row of the same step (same columns present, same values), and those a second
    writer wrote (`stepback.second_writer`)."""
    if len(rows) < 2:
        return rows
    names = sorted(rows.values)
    # A row's kind: which columns it has (a train line, a validation line, ...), as one integer code.
    kind = (
        pd.DataFrame({n: rows.present[n] for n in names}).groupby(names, sort=False).ngroup().to_numpy()
        if names
        else np.zeros(len(rows), dtype=np.int64)
    )
    table = pd.DataFrame(
        {"step": rows.step, "kind": kind, **{n: np.where(rows.present[n], rows.values[n], np.nan) for n in names}}
    )
    drop = table.duplicated(keep="first").to_numpy()  # NaN equals NaN here
    if drop.any():
        first = rows.where[int(np.argmax(drop))]
        warnings.add("repeat", f"{first}: {int(drop.sum())} repeated row(s) (same step, same values) dropped")
    writer = second_writer(rows, table, drop)
    if writer.any():
        warnings.reading["writers"] = f"two: {int(writer.sum()):,} row(s) written again by a second writer, kept once"
        warnings.add(
            "writer",
            f"{rows.where[int(np.argmax(writer))]}: {int(writer.sum())} row(s) repeat an earlier row of their step "
            "in every value but their own timing (to the digits each printed): a second writer (two ranks or two "
            "launches appending one log), each kept once; not a restart",
        )
        drop = drop | writer
    # The same kind of line for a step again with other values (a run resumed from an earlier checkpoint):
    # the later values win (the ledger merges column by column). A train line and a validation line of one
    # step differ in kind, and are merged without a word.
    kept = np.nonzero(~drop)[0]
    order = kept[np.lexsort((kept, kind[kept], rows.step[kept]))]
    again = (rows.step[order][1:] == rows.step[order][:-1]) & (kind[order][1:] == kind[order][:-1])
    for i in np.nonzero(again)[0]:
        a, b = order[i], order[i + 1]
        n = next(
            n
            for n in names
            if rows.present[n][b] and not _same(rows.values[n][a : a + 1], rows.values[n][b : b + 1])[0]
        )
        warnings.add(
            "relogged",
            f"{rows.where[b]}: step {rows.step[b]} logged again with {n} {rows.values[n][b]:g} "
            f"(was {rows.values[n][a]:g}); the later values are kept",
        )
    return rows.take(~drop)


def _fix_clock(rows: Rows, name: str, warnings: Warnings) -> None:
    """Offset a cumulative clock after each point where it goes backwards, so it keeps counting."""
    present = rows.present.get(name)
    if present is None or not present.any():
        return
    at = np.nonzero(present & np.isfinite(rows.values[name]))[0]
    vals = rows.values[name][at]
    back = np.nonzero(np.diff(vals) < 0)[0]
    if not len(back):
        return
    offset = np.zeros(len(at))
    for i in back:
        delta = vals[i] - vals[i + 1]
        offset[i + 1 :] += delta
        warnings.add(
            "clock",
            f"{rows.where[at[i + 1]]}: {name} went back from {vals[i]:g} to {vals[i + 1]:g} "
            f"(timer reset or resumed run); later values offset by {delta:g}",
        )
    rows.values[name][at] = vals + offset


def _report_nonfinite(rows: Rows, warnings: Warnings) -> None:
    for name in sorted(rows.values):
        bad = rows.present[name] & ~np.isfinite(rows.values[name])
        if bad.any():
            warnings.add(
                "nan",
                f"{rows.where[int(np.argmax(bad))]}: {name} is nan/inf on {int(bad.sum())} row(s); kept as recorded",
            )


def clean(rows: Rows, warnings: Warnings, clocks: tuple[str, ...] = CLOCK_COLUMNS) -> Rows:
    """Rows fit for the ledger: repeats dropped, clocks made monotone, non-finite values reported (and kept).

    `clocks` are the cumulative-clock columns, by their mapped (canonical) names.
    """
    rows = _drop_repeats(rows, warnings)
    restarts(rows, warnings)
    for name in clocks:
        _fix_clock(rows, name, warnings)
    _report_nonfinite(rows, warnings)
    return rows
