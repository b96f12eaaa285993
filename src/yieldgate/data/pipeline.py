"""`yieldgate audit PIPELINE.yaml`: a data pipeline described in YAML, run through `Audit`; and the
documents of files and folders (`read_documents`) that it and `yieldgate dedup` read.

```yaml
input:
  sources: [shakespeare-modern, shakespeare-folio, milton]  # built-in corpus sources, and/or
  paths: [corpus/]                                          # files and folders (walked)
  chunk_chars: 2000                                          # documents are chunks of about N characters
tag: {field: source, regex: milton}   # the rare slice: documents whose field matches the regex
stages:
  - {kind: min_chars, params: {min: 200}}
  - {kind: max_symbol_ratio, params: {max: 0.3}}
  - {kind: dedup, dedup: {kind: exact}}
  - {name: near, kind: dedup, dedup: {kind: near, shingle: "word:3", threshold: 0.15}}
  - {kind: sample, every: 2}
```

Stage kinds: the recipe filters (`recipe.FILTERS`), `dedup` (a `DedupPolicy`), `sample` (keep every N-th
document). A document is `{"id", "text", "source", "tokens"}`; tokens are whitespace-separated words.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from yieldgate.config_files import read_structured_file, validate
from yieldgate.data import corpus
from yieldgate.data.audit import Audit, Drop
from yieldgate.data.dedup import DedupResult, dedup
from yieldgate.data.recipe import FILTERS
from yieldgate.errors import InputError
from yieldgate.manifest import DedupPolicy, Manifest, Recipe, Source

__all__ = [
    "InputSpec",
    "Pipeline",
    "StageSpec",
    "TagRule",
    "audit_file",
    "dedup_paths",
    "apply_stage",
    "documents_of",
    "new_audit",
    "load_pipeline",
    "manifest_for",
    "read_documents",
    "run_pipeline",
    "stage_names",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class InputSpec(_Model):
    """Where the documents come from."""

    sources: list[str] = Field(default_factory=list)
    """Built-in corpus sources (`corpus.SOURCES`)."""
    paths: list[str] = Field(default_factory=list)
    """Files or folders; each file is one document, or chunks of it with `chunk_chars`."""
    chunk_chars: int | None = Field(default=2000, ge=1)
    """Cut each work or file into chunks of about this many characters (at line breaks); null: whole."""
    stdlib_bytes: int = Field(default=2_000_000, ge=0)
    """Bytes of Python's standard library for the `python-stdlib` source."""

    @model_validator(mode="after")
    def _check(self) -> InputSpec:
        if not self.sources and not self.paths:
            raise ValueError("name at least one of sources or paths")
        unknown = sorted(set(self.sources) - set(corpus.SOURCES))
        if unknown:
            raise ValueError(f"unknown sources {', '.join(unknown)}; known: {', '.join(corpus.SOURCES)}")
        return self


class TagRule(_Model):
    """Marks the rare or hard slice whose retention is tracked: documents whose `field` matches `regex`."""

    field: Literal["text", "id", "source"] = "text"
    """The document field the regex searches."""
    regex: str
    """A Python regular expression (`re.search`)."""

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression ({exc})") from None
        return value


class StageSpec(_Model):
    """One stage of the pipeline."""

    kind: str
    """A recipe filter (`min_chars`, `max_chars`, `max_symbol_ratio`, `min_alpha_ratio`), `dedup` or `sample`."""
    name: str | None = None
    """Name in the table (default: the kind, numbered when repeated)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """A filter's parameters, e.g. `{min: 200}`."""
    dedup: DedupPolicy | None = None
    """The policy of a `dedup` stage."""
    every: int | None = Field(default=None, ge=1)
    """A `sample` stage keeps every N-th document."""

    @model_validator(mode="after")
    def _check(self) -> StageSpec:
        known = sorted([*FILTERS, "dedup", "sample"])
        if self.kind not in known:
            raise ValueError(f"kind must be one of {', '.join(known)}, got {self.kind!r}")
        if self.kind == "dedup" and (self.dedup is None or self.dedup.kind == "none"):
            raise ValueError("a dedup stage needs dedup: {kind: exact} or {kind: near, ...}")
        if self.kind == "sample" and self.every is None:
            raise ValueError("a sample stage needs every: N")
        return self


class Pipeline(_Model):
    """A pipeline to audit: input, the tag rule of the rare slice, stages in order."""

    input: InputSpec
    """The documents."""
    tag: TagRule | None = None
    """The rare slice (none: no tagged retention)."""
    stages: list[StageSpec] = Field(min_length=1)
    """Stages, applied in order."""


def load_pipeline(path: str | Path) -> Pipeline:
    """Load and validate a pipeline file; errors name the file and the field."""
    return validate(Pipeline, read_structured_file(path), str(path), "'input: {sources: [milton]}, stages: [...]'")


def documents_of(spec: InputSpec) -> list[dict[str, Any]]:
    """The input's documents, `{"id", "text", "source", "tokens"}` each. Stages never change a document, so one
    reading can feed several pipelines."""
    docs: list[tuple[str, str, str]] = []
    if spec.sources:
        works = corpus.sources(corpus.load_corpus(stdlib_bytes=spec.stdlib_bytes))
        for name in spec.sources:
            chunks = corpus.documents(works.get(name, []), chunk_chars=spec.chunk_chars or 2**62)
            docs.extend((doc_id, text, name) for doc_id, text in chunks)
    if spec.paths:
        docs.extend((doc_id, text, "paths") for doc_id, text in read_documents(spec.paths, spec.chunk_chars))
    return [{"id": i, "text": t, "source": s, "tokens": len(t.split())} for i, t, s in docs]


def _filter(kind: str, params: dict[str, Any]) -> Any:
    check = FILTERS[kind]

    def keep(doc: dict[str, Any]) -> bool | Drop:
        return True if check(doc["text"], params) else Drop(kind)

    try:
        keep({"text": "probe"})
    except KeyError as exc:
        raise InputError(f"stage {kind!r} needs parameter {exc.args[0]!r} in params") from None
    return keep


def stage_names(pipeline: Pipeline) -> list[str]:
    """Each stage's name in the audit table: its `name`, else its kind, numbered (`dedup-1`, `dedup-2`) when
    the pipeline has that kind more than once unnamed."""
    names = Counter(s.name or s.kind for s in pipeline.stages)
    seen: Counter[str] = Counter()
    out = []
    for spec in pipeline.stages:
        base = spec.name or spec.kind
        seen[base] += 1
        out.append(f"{base}-{seen[base]}" if names[base] > 1 and spec.name is None else base)
    return out


def new_audit(tag: TagRule | None) -> Audit:
    """An `Audit` of pipeline documents: text and tokens from their fields, the slice marked by `tag`."""
    rule = None
    if tag is not None:
        search, key = re.compile(tag.regex).search, tag.field
        rule = lambda doc: search(doc[key]) is not None  # noqa: E731
    return Audit(tag=rule, text="text", tokens="tokens")


def apply_stage(audit: Audit, spec: StageSpec, name: str, docs: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    """Run one stage over `docs` through `audit`, as table row `name`; lazy for a filter or sample stage."""
    if spec.kind == "dedup":
        assert spec.dedup is not None  # StageSpec checks that a dedup stage has its policy
        return audit.whole(name, _dedup_stage(audit, name, spec.dedup), docs)
    if spec.kind == "sample":
        return audit.stage(name, _every(spec.every or 1), docs)
    return audit.stage(name, _filter(spec.kind, spec.params), docs)


def run_pipeline(pipeline: Pipeline, *, documents: list[dict[str, Any]] | None = None) -> Audit:
    """Run the pipeline's stages over its input through an `Audit` and return it (consumed). `documents`: the
    input already read (`documents_of(pipeline.input)`), to run several pipelines over one reading."""
    audit = new_audit(pipeline.tag)
    docs: Iterable[dict[str, Any]] = documents_of(pipeline.input) if documents is None else documents
    for spec, name in zip(pipeline.stages, stage_names(pipeline), strict=True):
        docs = apply_stage(audit, spec, name, docs)
    out = list(docs)
    accepted: Counter[str] = Counter()
    for doc in out:
        accepted[doc["source"]] += doc["tokens"]
    audit.notes["accepted_tokens"] = dict(accepted)
    return audit


def _dedup_stage(audit: Audit, name: str, policy: DedupPolicy) -> Any:
    def run(docs: list[dict[str, Any]]) -> list[bool | Drop]:
        result = dedup([(d["id"], d["text"]) for d in docs], policy)
        audit.notes[name] = {"policy": result.policy.model_dump(mode="json"), "stats": result.stats()}
        why = Drop(f"{policy.kind} duplicate")
        return [True if k else why for k in result.keep.tolist()]

    return run


def _every(n: int) -> Any:
    count = iter(range(2**62))
    out = Drop("sampled out")
    return lambda doc: next(count) % n == 0 or out


def manifest_for(pipeline: Pipeline) -> Manifest:
    """A manifest for a run created to hold an audit: the input's sources and the last dedup policy."""
    names = pipeline.input.sources + (["paths"] if pipeline.input.paths else [])
    policies = [s.dedup for s in pipeline.stages if s.dedup is not None]
    return Manifest(
        data=Recipe(sources=[Source(name=n) for n in names], dedup=policies[-1] if policies else DedupPolicy())
    )


def audit_file(path: str | Path, *, ledger: str | None = None, run: str | None = None) -> Audit:
    """`yieldgate audit`: load and run the pipeline file; with `run`, record the audit into that run of
    `ledger` (created, with `manifest_for`'s manifest, when it does not exist), all or nothing."""
    from yieldgate.errors import RunNotFound
    from yieldgate.ledger import Ledger

    pipeline = load_pipeline(path)
    audit = run_pipeline(pipeline)
    if run is not None:
        with Ledger(ledger) as led, led.transaction():
            try:
                led.run_id(run)
            except RunNotFound:
                led.create_run(run, manifest=manifest_for(pipeline), status="finished", source="audit")
            audit.record(led, run)
    return audit


def dedup_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    near: float | None = None,
    shingle: str = "word:3",
    chunk_chars: int | None = None,
    permutations: int = 128,
) -> DedupResult:
    """`yieldgate dedup`: the files under `paths` (`read_documents`), exact dedup, or near dedup at
    estimated Jaccard >= `near`. `word:3` is the default shingling because it separated the corpus's
    editions from other plays best (docs/data-audit.md)."""
    import pydantic

    from yieldgate.config_files import format_validation_error

    try:
        policy = DedupPolicy(
            kind="exact" if near is None else "near",
            shingle=shingle,
            permutations=permutations,
            threshold=near if near is not None else 1.0,
        )
    except pydantic.ValidationError as exc:
        raise InputError(f"dedup policy: {format_validation_error(exc)}") from None
    return dedup(read_documents(paths, chunk_chars), policy)


def read_documents(paths: Iterable[str | os.PathLike[str]], chunk_chars: int | None = None) -> list[tuple[str, str]]:
    """(id, text) for each file under `paths` (a folder is walked, hidden entries skipped, in sorted order).

    Each file is one document, id its path; with `chunk_chars` it is cut into chunks that end at a line break
    (`corpus.documents`), ids `path#i`. Text is read as UTF-8 (undecodable bytes replaced)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(
                sorted(
                    f
                    for f in p.rglob("*")
                    if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
                )
            )
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"{p}: no such file or folder")
    if chunk_chars is not None and chunk_chars < 1:
        raise InputError(f"chunk_chars must be >= 1, got {chunk_chars}", parameter="chunk_chars")
    out: list[tuple[str, str]] = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InputError(f"{f}: cannot read ({exc.strerror})") from None
        if chunk_chars is None:
            out.append((str(f), text))
        else:
            work = corpus.Work(
                id=str(f),
                title=f.name,
                author="",
                domain="text",
                source="",
                edition="",
                group=str(f),
                path=str(f),
                text=text,
            )
            out.extend(corpus.documents([work], chunk_chars=chunk_chars))
    return out
