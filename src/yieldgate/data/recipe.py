"""Resolve a `Recipe` (manifest.py) into token streams: sources -> works -> held-out split by work ->
documents -> filters -> dedup -> tokenizer -> per-source token arrays, and the statistics of each stage.

The result feeds the probe trainer: training windows per source, held-out sequences per source for the eval
portfolio, and the manifest's accounting (accepted and unique tokens per source, tokenizer hash, bytes per
token, what filters and dedup removed).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from yieldgate.data import corpus, dedup
from yieldgate.data.sources import source_format, texts
from yieldgate.errors import InputError
from yieldgate.manifest import DedupPolicy, Filter, Recipe, Source, Tokenizer
from yieldgate.util.inputs import read_regular

__all__ = [
    "ResolvedRecipe",
    "SourceData",
    "resolve",
    "train_tokenizer",
    "team_tokenizer",
    "cached_tokenizer",
    "apply_filter",
    "disk_works",
    "FILTERS",
]


def _symbol_ratio(text: str) -> float:
    if not text:
        return 0.0
    return sum(1 for c in text if not (c.isalnum() or c.isspace())) / len(text)


# Document filters by kind: (text, params) -> keep? Each names its parameters in the error when misused.
FILTERS: dict[str, Callable[[str, dict[str, Any]], bool]] = {
    "min_chars": lambda text, p: len(text) >= p["min"],
    "max_chars": lambda text, p: len(text) <= p["max"],
    "max_symbol_ratio": lambda text, p: _symbol_ratio(text) <= p["max"],
    "min_alpha_ratio": lambda text, p: (sum(c.isalpha() for c in text) / max(len(text), 1)) >= p["min"],
}


@dataclass
class SourceData:
    """One source after resolution."""

    name: str
    weight: float
    train: np.ndarray
    """Training token ids, documents concatenated (int32)."""
    held_out: list[np.ndarray]
    """Held-out documents' token ids."""
    held_out_bytes: list[int]
    """UTF-8 bytes of each held-out document (for bits per byte)."""
    held_out_tags: list[frozenset[str]]
    """Tags of each held-out document's work (e.g. `folio`)."""
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class ResolvedRecipe:
    recipe: Recipe
    """The recipe with its accounting filled in (accepted tokens, unique tokens, tokenizer identity)."""
    sources: dict[str, SourceData]
    tokenizer: Any
    bytes_per_token: float
    stats: dict[str, Any]
    tokenizer_hash: str
    """Content hash of the trained tokenizer (also `recipe.tokenizer.content_hash`, typed there as optional)."""


def train_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """A byte-level BPE trained with the `tokenizers` library (deterministic for the same texts)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def _works_for(source: Source, works_by_source: dict[str, list[corpus.Work]]) -> list[corpus.Work]:
    ref = (source.path or source.name).removeprefix("builtin:")
    if ref in works_by_source:
        return works_by_source[ref]
    if Path(ref).exists():
        return disk_works(source.model_copy(update={"path": ref}))
    known = ", ".join(sorted(works_by_source or corpus.SOURCES))
    raise InputError(f"source {source.name!r}: {ref!r} is neither a built-in source ({known}) nor a file or folder")


def disk_works(source: Source) -> list[corpus.Work]:
    """The works of a source on disk (`data.sources`): a text file is a work, as is a record of JSON-lines, Parquet
    or `datasets` data (its own group: the held-out split holds records out whole)."""
    fmt = source_format(source)
    root = source.path if source.path and Path(source.path).is_dir() else None
    works = []
    for doc_id, text in texts(source):
        # `play` for play.txt; `part-0.jsonl:12` for a file's 12th record, its path within a folder source
        stem = Path(doc_id).stem if fmt == "text" else os.path.relpath(doc_id, root) if root else Path(doc_id).name
        works.append(
            corpus.Work(
                id=f"{source.name}/{stem}",
                title=stem,
                author="",
                domain=source.domain or "text",
                source=source.name,
                edition="",
                group=f"{source.name}/{stem}",
                path=doc_id,
                text=text,
                tags=frozenset(),
            )
        )
    return works


@dataclass
class _SourceDocs:
    """One source's documents on their way through the recipe: training documents kept, held-out documents with
    their work's tags, and the training documents dedup removed."""

    train: list[str]
    held: list[tuple[str, frozenset[str]]]
    removed: list[str] = field(default_factory=list)


def resolve(
    recipe: Recipe,
    *,
    held_out: float = 0.1,
    seed: int = 0,
    chunk_chars: int = 2000,
    cache_dir: str | Path | None = None,
    stdlib_bytes: int = 2_000_000,
    max_chars_per_source: int | None = None,
) -> ResolvedRecipe:
    """Resolve `recipe` into per-source token arrays; see the module docstring.

    The held-out split is one call over all the recipe's works, so the modern and Folio editions of a play
    (different sources, one group) always fall on the same side. `max_chars_per_source` keeps a deterministic
    prefix of each source's training documents (small probes and tests)."""
    # The built-in corpus is loaded only for a recipe that names one of its sources (reading the standard library's
    # modules alone takes seconds): a recipe of the team's data on disk does without it.
    refs = {(s.path or s.name).removeprefix("builtin:") for s in recipe.sources}
    works_by_source = (
        corpus.sources(corpus.load_corpus(cache_dir=cache_dir, stdlib_bytes=stdlib_bytes))
        if refs & set(corpus.SOURCES)
        else {}
    )
    stats: dict[str, Any] = {"filters": {}, "dedup": {"kind": recipe.dedup.kind, "removed_docs": 0}}
    docs = _filtered_documents(recipe, works_by_source, held_out, seed, chunk_chars, max_chars_per_source, stats)
    recipe_dedup = _dedup(recipe, docs, stats)
    all_train = [d for source in docs.values() for d in source.train]
    if not all_train:
        raise InputError("the recipe's filters and dedup left no training documents")
    tok_cfg = recipe.tokenizer or Tokenizer(name="bpe-1k", vocab_size=1024)
    if tok_cfg.path is not None:
        tokenizer, tokenizer_hash = team_tokenizer(tok_cfg.path)
    else:
        tokenizer = cached_tokenizer(all_train, tok_cfg.vocab_size or 1024, cache_dir)
        tokenizer_hash = hashlib.sha256(tokenizer.to_str().encode()).hexdigest()
    sources = {
        source.name: _tokenized(source, docs[source.name], tokenizer, np.random.default_rng([seed, i]))
        for i, source in enumerate(recipe.sources)
    }
    total_bytes = sum(len(d.encode()) for source in docs.values() for d in source.train)
    bytes_per_token = total_bytes / max(sum(len(s.train) for s in sources.values()), 1)
    tokenizer_model = Tokenizer(
        name=tok_cfg.name,
        content_hash=tokenizer_hash,
        vocab_size=tokenizer.get_vocab_size(),
        bytes_per_token=bytes_per_token,
        path=tok_cfg.path,
    )
    stats["sources"] = {name: s.stats for name, s in sources.items()}
    return ResolvedRecipe(
        recipe=_accounted(recipe, sources, tokenizer_model, recipe_dedup),
        sources=sources,
        tokenizer=tokenizer,
        bytes_per_token=bytes_per_token,
        stats=json.loads(json.dumps(stats)),
        tokenizer_hash=tokenizer_hash,
    )


def _filtered_documents(
    recipe: Recipe,
    works_by_source: dict[str, list[corpus.Work]],
    held_out: float,
    seed: int,
    chunk_chars: int,
    max_chars_per_source: int | None,
    stats: dict[str, Any],
) -> dict[str, _SourceDocs]:
    """Each source's works split by work into training and held out, cut into documents, and its training documents
    filtered (counted in `stats["filters"]`); by source, in recipe order."""
    works = {source.name: _works_for(source, works_by_source) for source in recipe.sources}
    train_all, eval_all = corpus.split_by_work([w for ws in works.values() for w in ws], held_out=held_out, seed=seed)
    train_ids, eval_ids = {w.id for w in train_all}, {w.id for w in eval_all}
    out: dict[str, _SourceDocs] = {}
    for source in recipe.sources:
        train_works = [w for w in works[source.name] if w.id in train_ids]
        eval_works = [w for w in works[source.name] if w.id in eval_ids]
        docs = [text for _, text in corpus.documents(train_works, chunk_chars=chunk_chars)]
        if max_chars_per_source is not None:
            docs = _prefix(docs, max_chars_per_source)
        for f in recipe.filters:
            docs = apply_filter(f, docs, stats["filters"])
        held = [
            (text, w.tags | {w.edition} - {""})
            for w in eval_works
            for _, text in corpus.documents([w], chunk_chars=chunk_chars)
        ]
        out[source.name] = _SourceDocs(train=docs, held=held)
    return out


def _dedup(recipe: Recipe, docs: dict[str, _SourceDocs], stats: dict[str, Any]) -> DedupPolicy:
    """Dedup once over every source's training documents, in recipe order: a document duplicating one of an earlier
    source (a Folio chunk of a modern play) is removed from the later source. Moves the removed documents of each
    source to its `removed`, counts them in `stats["dedup"]`, and returns the dedup policy as applied."""
    if recipe.dedup.kind == "none":
        return recipe.dedup
    result = dedup.dedup([(name, d) for name, source in docs.items() for d in source.train], recipe.dedup)
    stats["dedup"] = {
        **result.policy.model_dump(mode="json"),
        **result.stats(),
        "removed_docs": int((~result.keep).sum()),
    }
    at = 0
    for source in docs.values():
        mask = result.keep[at : at + len(source.train)]
        at += len(source.train)
        source.removed = [d for d, k in zip(source.train, mask, strict=True) if not k]
        source.train = [d for d, k in zip(source.train, mask, strict=True) if k]
    return result.policy


def _tokenized(source: Source, docs: _SourceDocs, tokenizer: Any, rng: np.random.Generator) -> SourceData:
    """One source's documents as token ids: training documents concatenated (a `shuffled_share` of them with their
    tokens shuffled by `rng`), held-out documents apart, with the source's counts."""
    ids = [np.asarray(e.ids, dtype=np.int32) for e in tokenizer.encode_batch(docs.train)] if docs.train else []
    duplicate_tokens = sum(len(e.ids) for e in tokenizer.encode_batch(docs.removed)) if docs.removed else 0
    if source.shuffled_share > 0:
        _shuffle_documents(ids, source.shuffled_share, rng)
    train = np.concatenate(ids) if ids else np.empty(0, dtype=np.int32)
    held_ids = (
        [np.asarray(e.ids, dtype=np.int32) for e in tokenizer.encode_batch([t for t, _ in docs.held])]
        if docs.held
        else []
    )
    return SourceData(
        name=source.name,
        weight=source.weight,
        train=train,
        held_out=held_ids,
        held_out_bytes=[len(t.encode()) for t, _ in docs.held],
        held_out_tags=[tags for _, tags in docs.held],
        stats={
            "train_docs": len(docs.train),
            "train_tokens": int(len(train)),
            "held_out_docs": len(docs.held),
            "shuffled_docs": round(source.shuffled_share * len(ids)),
            "dedup_removed_docs": len(docs.removed),
            "dedup_removed_tokens": duplicate_tokens,
        },
    )


def _accounted(recipe: Recipe, sources: dict[str, SourceData], tokenizer: Tokenizer, applied: DedupPolicy) -> Recipe:
    """The recipe with its accounting filled in: the tokenizer's identity, the dedup as applied, and each source's
    accepted (what passed the filters) and unique (what is left after dedup: the stream's distinct data) tokens."""
    resolved = recipe.model_copy(deep=True)
    resolved.tokenizer = tokenizer
    resolved.dedup = applied  # bands and rows as applied
    for s in resolved.sources:
        st = sources[s.name].stats
        s.unique_tokens = st["train_tokens"]
        s.accepted_tokens = st["train_tokens"] + st["dedup_removed_tokens"]
    resolved.accepted_tokens = sum(s.accepted_tokens or 0 for s in resolved.sources)
    return resolved


def _shuffle_documents(ids: list[np.ndarray], share: float, rng: np.random.Generator) -> None:
    """Put the tokens of `share` of the documents (chosen at random) in a random order, in place."""
    for i in rng.permutation(len(ids))[: round(share * len(ids))]:
        ids[i] = rng.permutation(ids[i])


def _prefix(docs: list[str], max_chars: int) -> list[str]:
    out, total = [], 0
    for d in docs:
        if total >= max_chars:
            break
        out.append(d)
        total += len(d)
    return out


def team_tokenizer(path: str | Path) -> tuple[Any, str]:
    """(tokenizer, content hash) of a team's tokenizer: a `tokenizers` JSON file, or a Hugging Face tokenizer folder
    holding `tokenizer.json`. The hash is the sha256 of the JSON file's bytes (what `sha256sum tokenizer.json`
    prints)."""
    from tokenizers import Tokenizer as HFTokenizer

    where = Path(path).expanduser()
    file = where / "tokenizer.json" if where.is_dir() else where
    if not file.is_file():
        inside = " (a folder without tokenizer.json)" if where.is_dir() else ""
        raise InputError(
            f"tokenizer.path: {where}{inside} is no tokenizer file; name a `tokenizers` JSON file or a Hugging Face "
            "tokenizer folder holding tokenizer.json (save_pretrained writes it)"
        )
    raw = read_regular(file, "a tokenizers JSON file")
    try:
        tokenizer = HFTokenizer.from_str(raw.decode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - the tokenizers library raises a bare Exception for a bad file
        raise InputError(
            f"tokenizer.path: {file} is not a `tokenizers` JSON file ({str(exc).splitlines()[0]}); save it with "
            "tokenizer.save(path) or save_pretrained"
        ) from None
    return tokenizer, hashlib.sha256(raw).hexdigest()


def cached_tokenizer(texts: list[str], vocab_size: int, cache_dir: str | Path | None) -> Any:
    """Train once per (training text, vocabulary size); later resolutions load the saved tokenizer."""
    from tokenizers import Tokenizer as HFTokenizer

    digest = hashlib.sha256(str(vocab_size).encode())
    for t in texts:
        digest.update(hashlib.blake2b(t.encode(), digest_size=16).digest())
    path = corpus.cache_root(cache_dir) / "tokenizers" / f"bpe-{vocab_size}-{digest.hexdigest()[:24]}.json"
    if path.exists():
        try:
            return HFTokenizer.from_file(str(path))
        except Exception:  # noqa: BLE001 - a damaged cache entry is retrained, not fatal
            path.unlink(missing_ok=True)
    tokenizer = train_tokenizer(texts, vocab_size)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tokenizer.save(str(tmp))
        tmp.replace(path)
    except OSError:
        pass  # an unwritable cache only costs a retrain next time
    return tokenizer


def apply_filter(f: Filter, docs: list[str], stats: dict[str, Any]) -> list[str]:
    """The documents filter `f` keeps, with what it took in and dropped added to `stats`."""
    if f.kind not in FILTERS:
        raise InputError(f"filter kind {f.kind!r} is unknown; known kinds: {', '.join(sorted(FILTERS))}")
    try:
        kept = [d for d in docs if FILTERS[f.kind](d, f.params)]
    except KeyError as exc:
        raise InputError(f"filter {f.kind!r} needs parameter {exc.args[0]!r} in params") from None
    key = f"{f.kind}({json.dumps(f.params, sort_keys=True)})"
    entry = stats.setdefault(key, {"in": 0, "dropped": 0})
    entry["in"] += len(docs)
    entry["dropped"] += len(docs) - len(kept)
    return kept
