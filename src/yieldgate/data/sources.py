"""A recipe source that names data on disk: which format it is, its files, and its documents, streamed.

| format | what `path` names | a document is |
|---|---|---|
| `text` | a `.txt` file, or a folder of them (walked) | one file (cut into chunks by the recipe's resolution) |
| `jsonl` | a `.jsonl`, `.jsonl.gz` or `.jsonl.zst` file, or a folder of them | one line's `text_field` |
| `parquet` | a `.parquet` file, or a folder of them | one row's `text_field` |
| `hf-dataset` | a folder written by `datasets`' `save_to_disk` (its Arrow files) | one row's `text_field` |

`text_field` is the source's (`Source.text_field`, default `text`). Records are read a line or a record batch at a
time, never a whole file at once; Arrow files are read with pyarrow, so `datasets` need not be installed. A
`save_to_disk` of a `DatasetDict` is read from its `train` split (name another split's folder to read that one).

`check_source` is the pre-flight: a missing path, an unknown format, or records without the text field are one
`InputError` line before any data is prepared.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from yieldgate.errors import InputError
from yieldgate.manifest import Source
from yieldgate.util.inputs import check_regular, read_regular

__all__ = ["FORMATS", "DEFAULT_TEXT_FIELD", "check_source", "source_format", "source_files", "fingerprint", "texts"]

FORMATS = ("text", "jsonl", "parquet", "hf-dataset")
"""The formats of data on disk a source can name."""

DEFAULT_TEXT_FIELD = "text"

_JSONL = (".jsonl", ".jsonl.gz", ".jsonl.zst")
# Suffixes that say a file is not plain text: read as text, it would be trained on as noise.
_NOT_TEXT = (".json", ".csv", ".tsv", ".gz", ".zst", ".bz2", ".xz", ".zip", ".tar", ".arrow", ".npy", ".bin", ".pkl")
_BATCH_ROWS = 1024
_KNOWN = "a .txt/.jsonl/.jsonl.gz/.jsonl.zst/.parquet file, a folder of them, or a `datasets` save_to_disk folder"


def _name(path: Path) -> str:
    return path.name.lower()


def _where(source: Source) -> Path:
    if not source.path:
        raise InputError(f"source {source.name!r}: names no path; give `path:` a file or folder ({_KNOWN})")
    return Path(source.path).expanduser()


def source_format(source: Source) -> str:
    """The format of the data `source.path` names (one of `FORMATS`); InputError for a missing path or an unknown
    format."""
    path = _where(source)
    if not path.exists():
        raise InputError(f"source {source.name!r}: {path} does not exist; fix `path:` ({_KNOWN})")
    if path.is_dir():
        if (path / "state.json").is_file() or (path / "dataset_dict.json").is_file():
            return "hf-dataset"
        for fmt, suffixes in (("parquet", (".parquet",)), ("jsonl", _JSONL)):
            if any(_name(f).endswith(suffixes) for f in _walk(path)):
                return fmt
        if _text_files(path):
            return "text"
        raise InputError(f"source {source.name!r}: no data files under {path}; it should hold {_KNOWN}")
    name = _name(path)
    if name.endswith(_JSONL):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(_NOT_TEXT):
        raise InputError(f"source {source.name!r}: {path} is of an unknown format; name {_KNOWN}")
    return "text"


def _walk(folder: Path) -> list[Path]:
    """Regular files under `folder`, hidden entries skipped, in sorted order."""
    return sorted(
        f for f in folder.rglob("*") if f.is_file() and not any(p.startswith(".") for p in f.relative_to(folder).parts)
    )


def source_files(source: Source, fmt: str | None = None) -> list[Path]:
    """The files `source` reads, in reading order."""
    fmt = fmt or source_format(source)
    path = _where(source)
    if fmt == "hf-dataset":
        return _arrow_files(source, path)
    if not path.is_dir():
        return [path]
    if fmt == "text":
        return _text_files(path)
    suffixes = _JSONL if fmt == "jsonl" else (".parquet",)
    return [f for f in _walk(path) if _name(f).endswith(suffixes)]


def _text_files(folder: Path) -> list[Path]:
    return sorted(f for f in folder.rglob("*.txt") if f.is_file())


def _arrow_files(source: Source, folder: Path) -> list[Path]:
    """The Arrow files of a `save_to_disk` folder, in the order its `state.json` lists them."""
    if (folder / "dataset_dict.json").is_file():
        if not (folder / "train" / "state.json").is_file():
            splits = sorted(p.name for p in folder.iterdir() if (p / "state.json").is_file())
            raise InputError(
                f"source {source.name!r}: {folder} is a DatasetDict without a train split; name one of its splits' "
                f"folders in `path:` ({', '.join(splits) or 'none found'})"
            )
        folder = folder / "train"
    try:
        state = json.loads((folder / "state.json").read_text())
        names = [entry["filename"] for entry in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(
            f"source {source.name!r}: {folder / 'state.json'} is not a `datasets` save_to_disk state ({exc}); "
            "save the dataset again with save_to_disk"
        ) from None
    return [folder / n for n in names]


def fingerprint(source: Source) -> dict[str, Any]:
    """What identifies the source's data without reading it: its format, text field, and each file's path, size
    and modification time (a rewritten file changes one of them)."""
    fmt = source_format(source)
    files = []
    for f in source_files(source, fmt):
        st = f.stat()
        files.append([str(f.resolve()), st.st_size, st.st_mtime_ns])
    return {"format": fmt, "text_field": _field(source), "files": files}


def _field(source: Source) -> str:
    return source.text_field or DEFAULT_TEXT_FIELD


def texts(source: Source) -> Iterator[tuple[str, str]]:
    """(id, text) of each of the source's documents, in order, streamed: `file` for a text file, `file:N` for the
    N-th record (from 1) of a JSON-lines, Parquet or Arrow file."""
    fmt = source_format(source)
    for f in source_files(source, fmt):
        if fmt == "text":
            # Regular files only: a FIFO would block the read, /dev/zero would never end it.
            yield str(f), read_regular(f, f"the text of source {source.name!r}").decode("utf-8", errors="replace")
        elif fmt == "jsonl":
            yield from _jsonl(source, f)
        else:
            yield from _columnar(source, f, fmt)


def check_source(source: Source) -> None:
    """Raise InputError (one line: what, where, how to fix) unless `source` names readable data: a built-in corpus
    source, or data on disk whose first record has the text field. Reads a record at most per file."""
    from yieldgate.data.corpus import SOURCES

    ref = (source.path or source.name).removeprefix("builtin:")
    if ref in SOURCES:
        return
    if source.path is None and not Path(ref).exists():  # a bare name may name a file or folder, as in resolution
        raise InputError(
            f"source {source.name!r}: is not a built-in source ({', '.join(SOURCES)}) and names no path; "
            f"give `path:` ({_KNOWN})"
        )
    source = source.model_copy(update={"path": ref})
    fmt = source_format(source)
    files = source_files(source, fmt)
    if not files:
        raise InputError(f"source {source.name!r}: no {fmt} files under {source.path}; fix `path:` ({_KNOWN})")
    for f in files:
        if not f.is_file():
            raise InputError(f"source {source.name!r}: {f} is missing; save the dataset again or fix `path:`")
        if fmt == "text":
            check_regular(f, f"the text of source {source.name!r}")
        else:
            next(_jsonl(source, f) if fmt == "jsonl" else _columnar(source, f, fmt), None)


# -- JSON lines ------------------------------------------------------------------------------------------------


def _open_lines(f: Path) -> io.TextIOBase:
    name = _name(f)
    if name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(f, "rb"), encoding="utf-8", errors="replace")
    if name.endswith(".zst"):
        try:
            import zstandard
        except ModuleNotFoundError:
            raise InputError(
                f"{f} is zstandard-compressed and zstandard is not installed: pip install 'yieldgate[data]'"
            ) from None
        return io.TextIOWrapper(io.BufferedReader(_Zstd(f, zstandard)), encoding="utf-8", errors="replace")
    return f.open(encoding="utf-8", errors="replace")


class _Zstd(io.RawIOBase):
    """The decompressed bytes of a zstandard file, a block at a time, frame after frame; a stream that ends inside a
    frame (a truncated file) is an EOFError, not a silent end (zstandard's own `stream_reader` ends silently)."""

    def __init__(self, f: Path, zstandard: Any) -> None:
        self._file = f.open("rb")
        self._zstd = zstandard
        self._frame = zstandard.ZstdDecompressor().decompressobj()
        self._pending = b""
        self._started = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            block = self._file.read(1 << 20)
            if not block:
                if self._started and not self._frame.eof:
                    raise EOFError("the zstandard stream ends inside a frame: the file is truncated")
                return 0
            self._started = True
            try:
                self._pending = self._frame.decompress(block)
                while self._frame.eof and self._frame.unused_data:  # the next frame of a multi-frame file
                    rest = self._frame.unused_data
                    self._frame = self._zstd.ZstdDecompressor().decompressobj()
                    self._pending += self._frame.decompress(rest)
            except self._zstd.ZstdError as exc:
                raise EOFError(f"damaged zstandard data: {exc}") from None
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        self._file.close()
        super().close()


def _jsonl(source: Source, f: Path) -> Iterator[tuple[str, str]]:
    field = _field(source)
    n = 0
    try:
        with _open_lines(f) as lines:
            for n, line in enumerate(lines, start=1):  # noqa: B007 - n names the line an error is at
                if not line.strip():
                    continue
                yield f"{f}:{n}", _text_of(source, f, n, _record(source, f, n, line), field)
    except (OSError, EOFError, zlib.error) as exc:
        raise _unreadable(source, f, n, exc) from None


def _unreadable(source: Source, f: Path, n: int, exc: BaseException) -> InputError:
    past = f" past line {n}" if n else ""
    return InputError(f"source {source.name!r}: {f} cannot be read{past} ({_reason(exc)}); re-create or re-download it")


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _record(source: Source, f: Path, n: int, line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise InputError(
            f"source {source.name!r}: {f} line {n} is not JSON ({exc.args[0]}); each line must be one JSON object"
        ) from None


def _text_of(source: Source, f: Path, n: int, record: Any, field: str) -> str:
    if not isinstance(record, dict) or field not in record:
        fields = ", ".join(map(str, record)) if isinstance(record, dict) else f"a JSON {type(record).__name__}"
        raise InputError(
            f"source {source.name!r}: {f} line {n} has no text field {field!r} (it has: {fields or 'no fields'}); "
            "set the source's text_field"
        )
    value = record[field]
    if not isinstance(value, str):
        raise InputError(
            f"source {source.name!r}: {f} line {n}: text field {field!r} holds {type(value).__name__}, not text; "
            "set the source's text_field to a text field"
        )
    return value


# -- Parquet and Arrow -----------------------------------------------------------------------------------------


def _columnar(source: Source, f: Path, fmt: str) -> Iterator[tuple[str, str]]:
    """Records of a Parquet file, or of an Arrow stream file of a `save_to_disk` folder, a batch at a time."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        raise InputError(f"{f} is {fmt} and pyarrow is not installed: pip install 'yieldgate[data]'") from None
    field = _field(source)
    try:
        if fmt == "parquet":
            pf = pq.ParquetFile(f)
            names = pf.schema_arrow.names
            _has_field(source, f, field, names)
            batches = pf.iter_batches(columns=[field], batch_size=_BATCH_ROWS)
        else:
            reader = pa.ipc.open_stream(pa.memory_map(str(f)))
            _has_field(source, f, field, reader.schema.names)
            batches = (b.select([field]) for b in reader)
        n = 0
        for batch in batches:
            for value in batch.column(0).to_pylist():
                n += 1
                if not isinstance(value, str):
                    if value is None:
                        continue  # a missing value is no document
                    raise InputError(
                        f"source {source.name!r}: {f} record {n}: text field {field!r} holds "
                        f"{type(value).__name__}, not text; set the source's text_field to a text field"
                    )
                yield f"{f}:{n}", value
    except (OSError, pa.ArrowException) as exc:
        raise InputError(
            f"source {source.name!r}: {f} is not a readable {fmt} file ({_reason(exc)}); re-create or re-download it"
        ) from None


def _has_field(source: Source, f: Path, field: str, names: list[str]) -> None:
    if field not in names:
        raise InputError(
            f"source {source.name!r}: {f} has no text field {field!r} (it has: {', '.join(names) or 'no fields'}); "
            "set the source's text_field"
        )
