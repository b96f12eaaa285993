"""The column-block codec of step records (pure): steps and their columns as float64 arrays with missing masks,
merged by step, encoded into one little-endian blob per block (steps as int64, then each column) with the missing
mask bit-packed, and decoded back, optionally only the columns asked for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from yieldgate.errors import InputError
from yieldgate.util import lazy

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy.module("numpy")  # loaded by the first block read or written: listing runs needs neither
    pd = lazy.module("pandas")

__all__ = ["Columns", "column_values", "collapse", "largest", "take", "concat", "encode", "decode", "block_columns"]

BLOCK_FIELDS = ["first_step", "last_step", "n", "tokens_max", "columns", "data", "missing", "checksum"]
BLOCK_COLUMNS = {
    "step_blocks": ["run_id", *BLOCK_FIELDS, "wall_s_max", "summary_checksum"],
    "extra_blocks": ["run_id", "key_id", *BLOCK_FIELDS],
}


@dataclass
class Columns:
    """Step records in column form: sorted unique steps, and per column (values, missing mask)."""

    steps: np.ndarray
    values: dict[str, tuple[np.ndarray, np.ndarray]]

    def __len__(self) -> int:
        return len(self.steps)


def column_values(seq: Any, n: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values, missing mask) from a column; None / pandas NA / masked entries are missing."""
    if isinstance(seq, pd.Series):
        missing = seq.isna().to_numpy()
        if isinstance(seq.dtype, pd.api.extensions.ExtensionDtype) and seq.dtype.kind == "f":
            # Nullable floats keep NaN apart from NA: only NA is missing.
            missing = seq.array._mask.copy()  # noqa: SLF001 - the public API has no mask accessor
            values = seq.array._data.astype(np.float64)  # noqa: SLF001
            return values, missing
        values = pd.to_numeric(seq, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        return values, missing
    if isinstance(seq, np.ma.MaskedArray):
        return np.ma.getdata(seq).astype(np.float64), np.ma.getmaskarray(seq).copy()
    if isinstance(seq, np.ndarray) and seq.dtype.kind in "fiub":
        return seq.astype(np.float64), np.zeros(n, dtype=bool)
    values = np.empty(n, dtype=np.float64)
    missing = np.zeros(n, dtype=bool)
    for i, v in enumerate(seq):
        if v is None or v is pd.NA:
            missing[i] = True
            values[i] = np.nan
        else:
            try:
                values[i] = float(v)  # numpy scalars and 0-d tensors too; NaN and inf kept
            except (TypeError, ValueError):
                raise InputError(f"column {name!r}, row {i}: expected a number, got {v!r}") from None
    return values, missing


def collapse(steps: np.ndarray, values: dict[str, tuple[np.ndarray, np.ndarray]]) -> Columns:
    """Sort by step and merge repeated steps: per column, the last recorded value wins."""
    if len(steps) == 0 or bool(np.all(np.diff(steps) > 0)):
        return Columns(steps, values)
    order = np.argsort(steps, kind="stable")
    uniq, inverse = np.unique(steps[order], return_inverse=True)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, (vals, miss) in values.items():
        vals, miss = vals[order], miss[order]
        # Index of the last recorded row of each step (-1: none). np.maximum.at is order-independent,
        # unlike fancy assignment with repeated indices.
        last = np.full(len(uniq), -1, dtype=np.int64)
        present = np.nonzero(~miss)[0]
        np.maximum.at(last, inverse[present], present)
        got = last >= 0
        merged = np.full(len(uniq), np.nan)
        merged[got] = vals[last[got]]
        out[name] = (merged, ~got)
    return Columns(uniq, out)


def largest(cols: Columns, name: str) -> float | None:
    """Largest finite recorded value of column `name`, or None (a block's `tokens_max`, `wall_s_max`)."""
    if name not in cols.values:
        return None
    v, m = cols.values[name]
    ok = ~m & np.isfinite(v)
    return float(v[ok].max()) if ok.any() else None


def take(cols: Columns, keep: np.ndarray) -> Columns:
    return Columns(cols.steps[keep], {k: (v[keep], m[keep]) for k, (v, m) in cols.values.items()})


def concat(parts: list[Columns]) -> Columns:
    names = sorted({name for p in parts for name in p.values})
    steps = np.concatenate([p.steps for p in parts])
    values = {}
    for name in names:
        vals, miss = [], []
        for p in parts:
            v, m = p.values.get(name, (np.full(len(p), np.nan), np.ones(len(p), dtype=bool)))
            vals.append(v)
            miss.append(m)
        values[name] = (np.concatenate(vals), np.concatenate(miss))
    return Columns(steps, values)


def encode(cols: Columns) -> tuple[str, bytes, bytes | None]:
    names = list(cols.values)
    data = b"".join([cols.steps.astype("<i8").tobytes()] + [cols.values[n][0].astype("<f8").tobytes() for n in names])
    if not names:
        return "", data, None
    missing = np.stack([cols.values[n][1] for n in names])
    packed = np.packbits(missing, axis=1).tobytes() if missing.any() else None
    return ",".join(names), data, packed


def decode(n: int, columns: str, data: bytes, missing: bytes | None, want: Sequence[str] | None) -> Columns:
    names = columns.split(",") if columns else []
    steps = np.frombuffer(data, dtype="<i8", count=n)
    mask = (
        np.unpackbits(np.frombuffer(missing, dtype=np.uint8).reshape(len(names), -1), axis=1, count=n).astype(bool)
        if missing is not None
        else None
    )
    values = {}
    for i, name in enumerate(names):
        if want is not None and name not in want:
            continue
        vals = np.frombuffer(data, dtype="<f8", count=n, offset=8 * n * (i + 1))
        values[name] = (vals, mask[i] if mask is not None else np.zeros(n, dtype=bool))
    return Columns(steps, values)


# The stored fields of a block, in the order `checksum.verify_block` takes them.
BLOCK = "checksum, first_step, last_step, n, tokens_max, columns, data, missing"


def block_columns(row: Sequence[Any], want: Sequence[str] | None) -> Columns:
    """Decode a checked `BLOCK` row."""
    return decode(row[3], row[5], row[6], row[7], want)
