"""Weights & Biases runs: an offline run directory (its `run-<id>.wandb` transaction log) or a history export
(CSV / Parquet, e.g. `run.history()` saved by pandas or the UI's CSV export).

The `.wandb` file is a LevelDB-style log (a 7-byte `:W&B` header, then 32 KiB blocks of records with a
CRC-32 of type byte + payload; long records split FIRST/MIDDLE/LAST). wandb 0.31 no longer ships a Python
reader for it (its core is in Go), so the framing is read here, each CRC checked with zlib's C CRC-32, and
the records are parsed by wandb's own protobuf class `wandb.proto.wandb_internal_pb2.Record`. Every
`history` record (one `wandb.log` call) is a row; its step is W&B's `_step` unless `--map step=KEY` names a
logged key; `_runtime` is the wall clock; media (a nested group with a `_type`), tables and other
non-numbers are skipped.

A run path through the public API (`entity/project/run_id`, online) is not supported here: it cannot be
tested without network access. Export its history (`wandb.Api().run(path).history(samples=...)`) to CSV or
Parquet and import that.

Damage: a CRC mismatch or an undecodable record is an error naming file and byte offset; a record cut off
at the end (a run still writing, or killed) is dropped with a warning, the records before it kept.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from yieldgate.errors import InputError
from yieldgate.ingest.clean import check_columns, clip, concat, own_export, parse_json, placeholder
from yieldgate.ingest.types import Rows, Warnings
from yieldgate.util.inputs import check_regular, open_regular

__all__ = ["read", "read_log", "run_logs", "finished"]

_MAGIC = b":W&B\xe1\xbe\x00"  # ":W&B", magic 0xBEE1 (little-endian), version 0
_BLOCK = 32 * 1024
_CHUNK = 256 * _BLOCK  # bytes read at a time: a run's log can run to gigabytes
_RECORD = struct.Struct("<IHB")  # crc, length, type
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_SKIP = {"_timestamp", "_step"}  # Unix time (the run has `_runtime`), and the step itself


def run_logs(source: Path) -> list[Path]:
    """The `.wandb` files of an offline run folder (or of every run under a `wandb/` folder), or the file."""
    if not source.is_dir():
        if not source.exists():
            raise InputError(f"{source}: no such file or directory; expected a W&B run folder or history export")
        check_regular(source, "a W&B run log (run-*.wandb) or history export")  # a FIFO or /dev/zero: refused
        return [source]
    files = sorted(source.glob("*.wandb")) or sorted(source.glob("*/*.wandb"))
    if not files:
        raise InputError(f"{source}: no run-*.wandb file; give an offline run folder (wandb/offline-run-...)")
    return files


def _payloads(path: Path, warnings: Warnings) -> Iterator[tuple[int, bytes]]:
    """(offset, record bytes) of each complete record of a `.wandb` log, CRCs verified, read _CHUNK bytes at a
    time (whole blocks: no record fragment crosses a block, so none crosses a chunk)."""
    with open_regular(path, "a W&B transaction log (run-*.wandb)") as fh:
        data = fh.read(_CHUNK)
        problem = placeholder(path, data[:1024], "a W&B transaction log (run-*.wandb)")
        if problem is not None:
            raise InputError(problem)
        if not data.startswith(_MAGIC):
            raise InputError(f"{path}: offset 0: not a W&B transaction log (expected the ':W&B' header)")
        base, at, parts, start = 0, len(_MAGIC), [], None  # data[0] is the file's byte `base`
        while data:
            end = len(data)
            while at < end:
                left = _BLOCK - at % _BLOCK
                if left < _RECORD.size:  # the rest of a block too short for a header is padding
                    at += left
                    continue
                if at + _RECORD.size > end:
                    warnings.add(
                        "truncated",
                        f"{path}: offset {base + at}: record header cut off at the end; records before kept",
                    )
                    return
                crc, length, kind = _RECORD.unpack_from(data, at)
                body = data[at + _RECORD.size : at + _RECORD.size + length]
                if len(body) < length:
                    warnings.add(
                        "truncated",
                        f"{path}: offset {base + at}: last record cut off ({len(body)} of "
                        f"{length} bytes); records before it kept",
                    )
                    return
                if zlib.crc32(body, zlib.crc32(bytes([kind]))) != crc:
                    if kind == 0 and length == 0 and crc == 0:
                        at += left  # zero fill to the end of the block
                        continue
                    raise InputError(f"{path}: offset {base + at}: record fails its CRC; the file is damaged")
                if kind == _FULL:
                    yield base + at, body
                elif kind == _FIRST:
                    parts, start = [body], base + at
                elif kind in (_MIDDLE, _LAST) and start is not None:
                    parts.append(body)
                    if kind == _LAST:
                        yield start, b"".join(parts)
                        parts, start = [], None
                else:
                    raise InputError(f"{path}: offset {base + at}: unexpected record type {kind}; the file is damaged")
                at += _RECORD.size + length
            base, at, data = base + end, at - end, fh.read(_CHUNK)
    if start is not None:
        warnings.add("truncated", f"{path}: offset {start}: last record incomplete; records before it kept")


def finished(path: Path) -> bool:
    """True when the log holds its run's `exit` record (wandb's core process writes it after `finish()`
    returns, so a reader in the same process waits for it)."""
    from wandb.proto.wandb_internal_pb2 import Record  # type: ignore[attr-defined]  # star-imported by protobuf version

    try:
        return any(Record.FromString(p).WhichOneof("record_type") == "exit" for _, p in _payloads(path, Warnings()))
    except (InputError, OSError):
        return False


def read_log(path: Path, warnings: Warnings, step_key: str) -> Rows:
    """One row per history record of a `.wandb` log, under the logged keys (nested keys joined by `/`)."""
    from google.protobuf.message import DecodeError
    from wandb.proto.wandb_internal_pb2 import Record  # type: ignore[attr-defined]  # star-imported by protobuf version

    entries, where, steps = [], [], []
    keys: dict[str, None] = {}
    for offset, payload in _payloads(path, warnings):
        try:
            record = Record.FromString(payload)
        except DecodeError:
            raise InputError(f"{path}: offset {offset}: record is not a W&B Record") from None
        if record.WhichOneof("record_type") != "history":
            continue
        values: dict[str, float] = {}
        # A media object (table, image, histogram) is logged as a group of nested keys with a `_type`.
        media = {tuple(i.nested_key[:-1]) for i in record.history.item if i.nested_key[-1:] == ["_type"]}
        for item in record.history.item:
            if any(tuple(item.nested_key[: len(m)]) == m for m in media):
                continue
            key = item.key or "/".join(item.nested_key)
            try:
                value = parse_json(item.value_json)  # NaN and Infinity are W&B's spellings too
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"{path}: offset {offset}: history value of {clip(key)} is not JSON ({exc.msg})"
                ) from None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values[key] = float(value)
        step = values.get(step_key, record.history.step.num if step_key == "_step" else None)
        if step is None or not math.isfinite(step):
            warnings.add("nostep", f"{path}: offset {offset}: history row without {step_key!r}; skipped")
            continue
        steps.append(int(step))
        where.append(f"{path}: offset {offset}")
        entries.append({k: v for k, v in values.items() if k not in _SKIP and k != step_key})
        keys.update(dict.fromkeys(entries[-1]))
        check_columns(len(keys), f"{path}: offset {offset}")
    return Rows.from_records(str(path), steps, where, entries)


def read(sources: Sequence[str], opts, warnings: Warnings) -> list:
    """Importer entry point: one run from offline run folders / `.wandb` files, or from history exports."""
    from yieldgate.ingest import Read, tables_to_reads
    from yieldgate.ingest.mapping import parse_map_options
    from yieldgate.ingest.tables import read_table

    overrides = parse_map_options(opts.map)
    step_key = next((src for src, key in overrides.items() if key == "step"), "_step")
    paths = [Path(s) for s in sources]
    if all(p.suffix.lower() in (".csv", ".parquet", ".jsonl") for p in paths):
        # W&B's `_step` (its history row) where the export has it; a chart export has `Step`
        return tables_to_reads(", ".join(sources), read_table(paths, warnings, overrides, prefer_step=("_step",)))
    logs = [f for p in paths for f in run_logs(p)]
    rows = concat([read_log(f, warnings, step_key) for f in logs])
    if any(name.startswith("yield/") for name in rows.values):  # `yieldgate export --to wandb`
        rows = own_export(rows, warnings, step=None)
    if not len(rows):
        raise InputError(f"{', '.join(sources)}: no history rows (nothing was logged with wandb.log)")
    return [Read(", ".join(map(str, logs)), rows)]
