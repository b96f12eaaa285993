"""A source's supply, measured once: the documents its data on disk holds and the unique tokens left after the
recipe's filters and dedup, cached by what identifies the data, so `yieldgate plan`'s supply table reads every
source's epochs without a training run.

**What is counted.** Each document (a text file, or a record's `text_field`) is cut into chunks as the recipe's
resolution cuts them (`corpus.documents`, `chunk_chars`), the recipe's filters are applied to the chunks, then its
dedup within the source (exact dedup streams its keys; near dedup holds the source's chunks in memory), and the kept
chunks' tokens are counted with the recipe's tokenizer: the team's (`tokenizer.path`), streamed a batch at a time,
or else the built-in byte-level BPE trained on this source's kept chunks alone (the recipe's own is trained on all
its sources: a probe's manifest may count a few per cent otherwise; name a tokenizer for the exact count).

**The cache** is one JSON file per measurement in `$YIELDGATE_CACHE/supply/` (default `~/.cache/yieldgate/supply/`),
named by the sha256 of the source's format, text field and files (path, size and modification time of each), the
tokenizer (its content hash, or the built-in BPE's vocabulary size), the filters, the dedup policy and `chunk_chars`.
A file rewritten, a filter changed or another tokenizer is a new key; a damaged cache file is measured again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yieldgate.data import corpus, dedup
from yieldgate.data.recipe import apply_filter, cached_tokenizer, team_tokenizer
from yieldgate.data.sources import fingerprint, texts
from yieldgate.manifest import Recipe, Source
from yieldgate.util.hashing import content_hash

__all__ = ["SourceCount", "count_source", "measured", "cache_folder"]

_VERSION = 1
"""Bump when what is counted changes: every cached count is then measured again."""
_BATCH = 256


@dataclass(frozen=True)
class SourceCount:
    """One source's measured supply."""

    source: str
    documents: int
    """Documents its data holds (text files, or records with text), before filters."""
    unique_tokens: int
    """Tokens of the chunks the recipe's filters and dedup keep, in the counting tokenizer."""
    tokenizer: str
    """The counting tokenizer: the team's content hash, or `bpe-<vocab>` trained on the source."""
    cached: bool
    """Read from the cache rather than measured."""
    cache_file: Path


def cache_folder(cache_dir: str | Path | None = None) -> Path:
    """Where measured counts are kept: `<cache>/supply` (`$YIELDGATE_CACHE`, default `~/.cache/yieldgate`)."""
    return corpus.cache_root(cache_dir) / "supply"


def count_source(
    source: Source, recipe: Recipe, *, chunk_chars: int = 2000, cache_dir: str | Path | None = None
) -> SourceCount:
    """`source`'s documents and unique tokens under `recipe`'s filters, dedup and tokenizer (see the module
    docstring), from the cache when the data, tokenizer and policy are those measured before."""
    spec = recipe.tokenizer
    team = team_tokenizer(spec.path) if spec is not None and spec.path is not None else None
    vocab = (spec.vocab_size if spec is not None else None) or 1024
    tokenizer_id = team[1] if team is not None else f"bpe-{vocab}"
    key = content_hash(
        {
            "version": _VERSION,
            "data": fingerprint(source),
            "tokenizer": tokenizer_id,
            "filters": [f.model_dump(mode="json") for f in recipe.filters],
            "dedup": recipe.dedup.model_dump(mode="json"),
            "chunk_chars": chunk_chars,
        }
    )
    file = cache_folder(cache_dir) / f"{key[:40]}.json"
    found = _read(file, key)
    if found is not None:
        return SourceCount(source.name, found["documents"], found["unique_tokens"], tokenizer_id, True, file)
    counter = _Counter(source, recipe, chunk_chars)
    if team is not None:
        tokens = sum(_tokens(team[0], batch) for batch in counter.kept())
    else:
        kept = [chunk for batch in counter.kept() for chunk in batch]
        tokens = _tokens(cached_tokenizer(kept, vocab, cache_dir), kept) if kept else 0
    _write(file, {"key": key, "source": source.path, "documents": counter.documents, "unique_tokens": tokens})
    return SourceCount(source.name, counter.documents, tokens, tokenizer_id, False, file)


def measured(recipe: Recipe, *, chunk_chars: int = 2000, cache_dir: str | Path | None = None) -> Recipe:
    """`recipe` with `unique_tokens` and `documents` filled in for each source that names data on disk and records no
    unique tokens of its own (`count_source`); built-in sources and paths that do not exist here are left as they
    are."""
    out = recipe.model_copy(deep=True)
    for source in out.sources:
        if source.unique_tokens is not None or not source.path or not Path(source.path).expanduser().exists():
            continue
        count = count_source(source, recipe, chunk_chars=chunk_chars, cache_dir=cache_dir)
        source.unique_tokens, source.documents = count.unique_tokens, count.documents
    return out


class _Counter:
    """A source's documents, chunked, filtered and deduplicated a batch at a time; `documents` counts what was read."""

    def __init__(self, source: Source, recipe: Recipe, chunk_chars: int) -> None:
        self.source, self.recipe, self.chunk_chars = source, recipe, chunk_chars
        self.documents = 0

    def _chunks(self) -> Iterator[list[str]]:
        batch: list[str] = []
        for doc_id, text in texts(self.source):
            self.documents += 1
            work = corpus.Work(
                id=doc_id, title="", author="", domain="", source="", edition="", group="", path="", text=text
            )
            batch.extend(chunk for _, chunk in corpus.documents([work], chunk_chars=self.chunk_chars))
            if len(batch) >= _BATCH:
                yield self._filtered(batch)
                batch = []
        if batch:
            yield self._filtered(batch)

    def _filtered(self, batch: list[str]) -> list[str]:
        stats: dict[str, Any] = {}
        for f in self.recipe.filters:
            batch = apply_filter(f, batch, stats)
        return batch

    def kept(self) -> Iterator[list[str]]:
        policy = self.recipe.dedup
        if policy.kind == "near":  # LSH over all the source's chunks at once
            chunks = [c for batch in self._chunks() for c in batch]
            result = dedup.dedup([(str(i), c) for i, c in enumerate(chunks)], policy)
            yield [c for c, keep in zip(chunks, result.keep, strict=True) if keep]
            return
        seen: set[bytes] = set()
        for batch in self._chunks():
            if policy.kind == "exact":
                fresh = []
                for chunk, k in zip(batch, dedup.exact_keys(batch), strict=True):
                    if k not in seen:
                        seen.add(k)
                        fresh.append(chunk)
                batch = fresh
            yield batch


def _tokens(tokenizer: Any, chunks: list[str]) -> int:
    return sum(len(e.ids) for e in tokenizer.encode_batch(chunks)) if chunks else 0


def _read(file: Path, key: str) -> dict[str, Any] | None:
    try:
        found = json.loads(file.read_text())
    except (OSError, ValueError):
        return None  # missing or damaged: measured again
    if not isinstance(found, dict) or found.get("key") != key:
        return None
    if not all(isinstance(found.get(k), int) for k in ("documents", "unique_tokens")):
        return None
    return found


def _write(file: Path, entry: dict[str, Any]) -> None:
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entry, sort_keys=True))
        tmp.replace(file)
    except OSError:
        pass  # an unwritable cache only costs a measurement next time
