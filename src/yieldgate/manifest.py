"""The manifest: what a run consumed and how, as pydantic models shared by every part of yieldgate.

A manifest is loaded from YAML or JSON and validated with messages that name the field
(`data.sources[2].weight: must be >= 0, got -0.5`), both by `config_files.py`; it is content-hashed (stable across
key order and formatting) and diffed field by field: the diff of two runs' manifests is the list of confounders of
their comparison. The models here are reused everywhere (recipes, probes, importers); none is redefined.
"""

from __future__ import annotations

import hashlib
import json
import reprlib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from yieldgate.config_files import read_structured_file, validate
from yieldgate.errors import ManifestError
from yieldgate.util.inputs import check_regular

__all__ = [
    "Source",
    "Filter",
    "DedupPolicy",
    "CurriculumStage",
    "Curriculum",
    "Tokenizer",
    "Recipe",
    "ModelConfig",
    "Optimisation",
    "Hardware",
    "EvalPortfolio",
    "Manifest",
    "Difference",
    "ManifestCheck",
    "ManifestDiff",
    "load_manifest",
    "load_recipe",
    "parse_manifest",
    "diff",
    "flat_config",
    "plain_config",
    "with_hparams",
]


class _Model(BaseModel):
    # Unknown fields are errors: a typo (`sequnce_length`) must not silently fall back to a default.
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)


def _without_unset_additions(dump: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """`dump` less the `fields` that are None: fields added to a model after manifests were stored, left out when
    unset so that every stored manifest keeps its content hash."""
    return {k: v for k, v in dump.items() if not (k in fields and v is None)}


class Source(_Model):
    """One data source of a recipe."""

    name: str = Field(min_length=1)
    """Short unique name, used in per-source keys (`tokens/<name>`, task `val/<name>`)."""
    weight: float = Field(default=1.0, ge=0)
    """Sampling weight in the mixture; weights are normalised over the recipe's sources."""
    path: str | None = None
    """Where the documents come from (file, folder, URL or built-in corpus name)."""
    domain: str | None = None
    """What kind of text it is (`prose`, `code`, ...), for reports."""
    unique_tokens: int | None = Field(default=None, ge=0)
    """Distinct tokens the source holds after filters and dedup (for epochs and data exhaustion)."""
    accepted_tokens: int | None = Field(default=None, ge=0)
    """Tokens of this source the run accepted into training."""
    shuffled_share: float = Field(default=0.0, ge=0, le=1)
    """Share of the source's training documents whose tokens are put in a random order: damaged data of
    known worth (the control pair of a campaign: a recipe against the same recipe half shuffled)."""
    text_field: str | None = Field(default=None, min_length=1)
    """The field holding a record's text in JSON-lines, Parquet or `datasets` data (None: `text`)."""
    documents: int | None = Field(default=None, ge=0)
    """Documents (records, or text files) the source's data holds, as measured (`data.source_counts`)."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_unset_additions(handler(self), ("text_field", "documents"))


class Filter(_Model):
    """One document filter of a recipe (length, character mix, quality, ...)."""

    kind: str = Field(min_length=1)
    """Filter name, e.g. `min_chars`, `max_symbol_ratio`."""
    params: dict[str, Any] = Field(default_factory=dict)
    """The filter's parameters, e.g. `{"min": 200}`."""


class DedupPolicy(_Model):
    """How duplicates are removed; the policy is recorded so that its effect can be audited."""

    kind: Literal["none", "exact", "near"] = "none"
    """`none`, `exact` (normalised text hashed) or `near` (MinHash with LSH)."""
    shingle: str = "word:5"
    """Shingles for near dedup: `word:N` or `char:N`."""
    permutations: int = Field(default=128, ge=1)
    """MinHash permutations."""
    bands: int | None = Field(default=None, ge=1)
    """LSH bands; bands x rows must equal permutations."""
    rows: int | None = Field(default=None, ge=1)
    """LSH rows per band."""
    threshold: float = Field(default=0.8, gt=0, le=1)
    """Estimated Jaccard similarity at or above which two documents are duplicates."""

    @model_validator(mode="after")
    def _check(self) -> DedupPolicy:
        unit, _, size = self.shingle.partition(":")
        if unit not in ("word", "char") or not size.isdigit() or int(size) < 1:
            raise ValueError(f"shingle must be 'word:N' or 'char:N' with N >= 1, got {self.shingle!r}")
        if (self.bands is None) != (self.rows is None):
            raise ValueError("bands and rows go together: give both or neither")
        if self.bands is not None and self.rows is not None and self.bands * self.rows != self.permutations:
            raise ValueError(f"bands x rows must equal permutations: {self.bands} x {self.rows} != {self.permutations}")
        return self


class CurriculumStage(_Model):
    """One stage of a staged curriculum: source weights that hold until `until_tokens`, or until `until_share` of
    the run's tokens (a stage that scales with the budget, as an annealing phase does: a probe at a tenth of the
    budget then sees its phases at a tenth of the length, not cut off). After the last stage the recipe's own
    weights hold."""

    until_tokens: int | None = Field(default=None, gt=0)
    """Accepted tokens at which this stage ends."""
    until_share: float | None = Field(default=None, gt=0, le=1)
    """Share of the run's tokens at which this stage ends (instead of `until_tokens`)."""
    weights: dict[str, float]
    """Source name -> weight during this stage."""

    @model_validator(mode="after")
    def _check(self) -> CurriculumStage:
        if (self.until_tokens is None) == (self.until_share is None):
            raise ValueError("a stage ends at until_tokens or at until_share (a share of the run's tokens): give one")
        for name, w in self.weights.items():
            if w < 0:
                raise ValueError(f"weights.{name}: must be >= 0, got {w}")
        return self

    def end(self, tokens: float) -> float:
        """Tokens at which this stage ends in a run of `tokens`."""
        return float(self.until_tokens) if self.until_tokens is not None else float(self.until_share or 0) * tokens


class Curriculum(_Model):
    """The order in which data is presented."""

    kind: Literal["shuffled", "ordered_by_source", "staged"] = "shuffled"
    """`shuffled` (i.i.d.), `ordered_by_source` (one source after another) or `staged` (weights by stage)."""
    stages: list[CurriculumStage] = Field(default_factory=list)
    """Stages of a `staged` curriculum, in increasing `until_tokens`."""

    @model_validator(mode="after")
    def _check(self) -> Curriculum:
        if self.kind == "staged" and not self.stages:
            raise ValueError("a staged curriculum needs at least one stage")
        for field in ("until_tokens", "until_share"):
            ends = [getattr(s, field) for s in self.stages]
            if None not in ends and ends != sorted(set(ends)):
                raise ValueError(f"stages must have strictly increasing {field}, got {ends}")
        if len({s.until_tokens is None for s in self.stages}) > 1:
            raise ValueError("stages end either all at until_tokens or all at until_share, not a mix")
        return self


class Tokenizer(_Model):
    """The tokenizer, identified by content so that a retrained one is never mistaken for the old."""

    name: str = Field(min_length=1)
    """Human name, e.g. `bpe-4k`."""
    content_hash: str | None = None
    """Hash of the tokenizer's serialised content (vocabulary and merges)."""
    vocab_size: int | None = Field(default=None, ge=1)
    """Vocabulary size."""
    bytes_per_token: float | None = Field(default=None, gt=0)
    """Mean UTF-8 bytes per token on the training data: converts per-token loss to bits per byte."""
    path: str | None = None
    """The team's tokenizer: a `tokenizers` JSON file, or a Hugging Face tokenizer folder holding `tokenizer.json`
    (None: a byte-level BPE of `vocab_size` trained on the recipe's training text). Its content hash is the sha256
    of the JSON file's bytes."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_unset_additions(handler(self), ("path",))


class Recipe(_Model):
    """A data recipe: sources and weights, filters, dedup, curriculum, tokenizer, sequence length."""

    sources: list[Source] = Field(min_length=1)
    """The sources and their mixture weights."""
    filters: list[Filter] = Field(default_factory=list)
    """Document filters, applied in order."""
    dedup: DedupPolicy = Field(default_factory=DedupPolicy)
    """Dedup policy."""
    curriculum: Curriculum = Field(default_factory=Curriculum)
    """Order of presentation."""
    tokenizer: Tokenizer | None = None
    """Tokenizer."""
    sequence_length: int | None = Field(default=None, ge=1)
    """Tokens per training sequence."""
    accepted_tokens: int | None = Field(default=None, ge=0)
    """Total tokens accepted into training (all sources)."""

    @model_validator(mode="after")
    def _check(self) -> Recipe:
        names = [s.name for s in self.sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique, repeated: {', '.join(dupes)}")
        if sum(s.weight for s in self.sources) <= 0:
            raise ValueError("at least one source needs a weight > 0")
        for i, stage in enumerate(self.curriculum.stages):
            unknown = sorted(set(stage.weights) - set(names))
            if unknown:
                raise ValueError(f"curriculum.stages[{i}] names unknown sources: {', '.join(unknown)}")
        return self


class ModelConfig(_Model):
    """The model's size and shape: what FLOPs per token and tokens per parameter are computed from."""

    name: str | None = None
    """Model name, e.g. `gpt-1m`."""
    architecture: str = "decoder_transformer"
    """Architecture family; MFU from 6N + 12·L·H·Q·T is only defined for `decoder_transformer`."""
    params: int | None = Field(default=None, ge=1)
    """Total parameters."""
    non_embedding_params: int | None = Field(default=None, ge=1)
    """N in 6N + 12·L·H·Q·T: parameters whose matmuls run for every token (a lookup-only embedding does
    not count; an embedding tied to the output projection counts once)."""
    layers: int | None = Field(default=None, ge=1)
    """Transformer layers (L)."""
    width: int | None = Field(default=None, ge=1)
    """Model width (d_model)."""
    heads: int | None = Field(default=None, ge=1)
    """Attention heads (H)."""
    head_dim: int | None = Field(default=None, ge=1)
    """Size of one attention head (Q); H·Q need not equal the width."""
    context: int | None = Field(default=None, ge=1)
    """Context length in tokens (T)."""
    vocab_size: int | None = Field(default=None, ge=1)
    """Vocabulary size."""
    flops_per_token: float | None = Field(default=None, gt=0)
    """Training FLOPs per token, when given instead of derived."""


class Optimisation(_Model):
    """How the model is optimised: the knobs a throughput change tends to touch."""

    optimizer: str | None = None
    """Optimizer, e.g. `adamw`."""
    lr: float | None = Field(default=None, gt=0)
    """Peak learning rate."""
    schedule: str | None = None
    """Schedule, e.g. `wsd` (warmup-stable-decay), `cosine`, `constant`."""
    warmup_steps: int | None = Field(default=None, ge=0)
    """Warm-up steps."""
    batch_size: int | None = Field(default=None, ge=1)
    """Sequences per optimizer step (all microbatches and ranks together)."""
    microbatch_size: int | None = Field(default=None, ge=1)
    """Sequences per forward/backward pass on one device."""
    grad_accumulation: int = Field(default=1, ge=1)
    """Microbatches accumulated per optimizer step."""
    precision: str = "fp32"
    """Compute precision: `fp32`, `tf32`, `bf16`, `fp16`, `fp8`."""
    weight_decay: float | None = Field(default=None, ge=0)
    """Weight decay."""
    grad_clip: float | None = Field(default=None, gt=0)
    """Gradient-norm clipping threshold."""


class Hardware(_Model):
    """Where the run ran, what a device-hour costs, and how the work is laid out across devices."""

    device_kind: str | None = None
    """Device name, e.g. `H100-SXM`, `cpu`."""
    device_count: int = Field(default=1, ge=1)
    """Devices used by the run."""
    peak_flops: float | None = Field(default=None, gt=0)
    """Peak FLOP/s of one device at the run's precision (overrides the built-in table)."""
    price_per_device_hour: float | None = Field(default=None, ge=0)
    """Price of one device-hour in USD."""
    data_parallel: int = Field(default=1, ge=1)
    """Data-parallel degree."""
    tensor_parallel: int = Field(default=1, ge=1)
    """Tensor-parallel degree."""
    pipeline_parallel: int = Field(default=1, ge=1)
    """Pipeline-parallel degree."""

    @model_validator(mode="after")
    def _check(self) -> Hardware:
        layout = self.data_parallel * self.tensor_parallel * self.pipeline_parallel
        if layout > 1 and layout != self.device_count:
            raise ValueError(
                f"data x tensor x pipeline parallel = {layout} must equal device_count = {self.device_count}"
            )
        return self


class EvalPortfolio(_Model):
    """A named, versioned set of evaluation tasks; capability yields are only compared within a version."""

    name: str = Field(min_length=1)
    """Portfolio name."""
    version: str = Field(min_length=1)
    """Portfolio version: a changed task set or metric gets a new version."""
    tasks: list[str] = Field(default_factory=list)
    """Tasks, as `<task>/<metric>` keys (e.g. `val/loss`, `lambada_openai/acc`)."""


class Manifest(_Model):
    """Everything a run consumed and how. Content-hashed; two manifests can be diffed."""

    name: str | None = None
    """Optional label for the manifest itself."""
    data: Recipe | None = None
    """The data recipe."""
    model: ModelConfig | None = None
    """Model size and shape."""
    optimisation: Optimisation | None = None
    """Optimisation settings."""
    hardware: Hardware | None = None
    """Hardware and price."""
    evals: EvalPortfolio | None = None
    """Evaluation portfolio."""
    code_version: str | None = None
    """Version of the training code (git commit or tag)."""
    library_versions: dict[str, str] = Field(default_factory=dict)
    """Versions of the libraries that matter (torch, transformers, ...)."""
    seed: int | None = None
    """Random seed."""
    config: dict[str, JsonValue] = Field(default_factory=dict)
    """Hyper-parameters as the training code holds them: free-form, nested JSON (`{"optimizer": {"lr": 3e-4}}`),
    filled from `Tracker(hparams=...)`, a Trainer's `TrainingArguments` and model config, or Lightning's `hparams`.
    Part of the diff (`config.optimizer.lr`), so of a comparison's confounders; shown flattened (`flat_config`)."""

    def canonical(self) -> dict[str, Any]:
        """The JSON form that is hashed, stored and diffed. An empty `config` is left out, so a manifest without
        hyper-parameters keeps the hash it had before the field existed."""
        dump = self.model_dump(mode="json")
        if not dump["config"]:
            del dump["config"]
        return dump

    def content_hash(self) -> str:
        """sha256 of the canonical JSON form: the same for any key order or file format."""
        canonical = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def to_json(self) -> str:
        """Compact JSON, the form the ledger stores."""
        return json.dumps(self.canonical(), sort_keys=True)


# -- loading: the file is read and validated by config_files.py -------------------------------------------


def parse_manifest(data: Any, origin: str = "manifest") -> Manifest:
    """Validate plain data as a Manifest; errors name `origin` and the field."""
    return validate(Manifest, data, origin, "'data: {sources: [...]}'")


def load_manifest(path: str | Path) -> Manifest:
    """Load and validate a manifest from a YAML or JSON file."""
    return parse_manifest(read_structured_file(path), origin=str(path))


def load_recipe(path: str | Path) -> Recipe:
    """Load and validate a data recipe (the `data` part of a manifest) from a YAML or JSON file. A source
    `path` that names something on disk must be a regular file or a folder: a FIFO or /dev/zero is refused
    here, before any data is prepared, not read for ever."""
    recipe = validate(Recipe, read_structured_file(path), str(path), "'sources: [{name: milton}]'")
    for source in recipe.sources:
        where = Path(source.path) if source.path else None
        if where is not None and where.exists() and not where.is_dir():
            check_regular(where, f"the text of source {source.name!r} (a file or a folder)")
    return recipe


# -- diff ----------------------------------------------------------------------------------------------


class Difference(BaseModel):
    """One field that differs between two manifests (None: absent on that side)."""

    field: str
    a: Any = None
    b: Any = None


def _flatten(value: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        if not value and path:
            out[path] = {}
        for key in sorted(value):
            _flatten(value[key], f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
        # Lists of named items (sources) are keyed by name, so reordering is not a difference.
        for item in value:
            _flatten({k: v for k, v in item.items() if k != "name"}, f"{path}[{item['name']}]", out)
    else:
        out[path] = value


def plain_config(value: Any, *, origin: str, strict: bool = True, _at: str = "") -> Any:
    """Hyper-parameters as JSON values for `Manifest.config`: mappings (keys as text), lists (from tuples and sets,
    a set sorted), numbers, text, booleans and None; numpy and 0-d torch scalars become numbers, enums their values,
    paths and dtypes text, a non-finite float its name (`nan`, JSON has none). Anything else is a ManifestError
    naming its key (`strict`), or its `str()` (not strict: what a framework's arguments hold that we cannot
    foresee, e.g. a callable)."""
    import enum
    import math
    import os

    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict) or (hasattr(value, "keys") and hasattr(value, "__getitem__")):
        return {
            str(k): plain_config(value[k], origin=origin, strict=strict, _at=f"{_at}.{k}" if _at else str(k))
            for k in value.keys()
        }
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [plain_config(v, origin=origin, strict=strict, _at=f"{_at}[{i}]") for i, v in enumerate(items)]
    if isinstance(value, enum.Enum):
        return plain_config(value.value, origin=origin, strict=strict, _at=_at)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    item = getattr(value, "item", None)  # numpy scalars, 0-d arrays and tensors
    if callable(item) and getattr(value, "ndim", 0) == 0:
        return plain_config(item(), origin=origin, strict=strict, _at=_at)
    if type(value).__name__ == "dtype":  # torch.float16, numpy.dtype('float32')
        return str(value)
    if strict:
        raise ManifestError(
            f"{origin}: config.{_at}: {type(value).__name__} is not a JSON value (numbers, text, "
            f"booleans, lists and mappings are), got {reprlib.repr(value)}"
        )
    return str(value)


def with_hparams(manifest: Manifest | None, hparams: Any, *, origin: str, strict: bool = True) -> Manifest:
    """`manifest` (or an empty one) with `hparams` merged over its `config`, key by key at the top level."""
    if not hasattr(hparams, "keys"):
        raise ManifestError(
            f"{origin}: hyper-parameters must be a mapping (e.g. vars(args)), got {type(hparams).__name__}"
        )
    config = plain_config(hparams, origin=origin, strict=strict)
    base = manifest.canonical() if manifest is not None else {}
    return parse_manifest({**base, "config": {**base.get("config", {}), **config}}, origin=origin)


def flat_config(config: dict[str, Any]) -> dict[str, Any]:
    """A nested `Manifest.config` as dotted keys, sorted (`{"optimizer": {"lr": 3e-4}}` -> `{"optimizer.lr": 3e-4}`);
    lists stay values."""
    out: dict[str, Any] = {}
    _flatten(config, "", out)
    return out


_DEFAULTED_SECTIONS: dict[str, type[_Model]] = {
    "model": ModelConfig,
    "optimisation": Optimisation,
    "hardware": Hardware,
}
"""Sections every field of which has a default: one left out says no more than one written out empty."""


def _filled(manifest: Manifest) -> dict[str, Any]:
    """The canonical form with each absent defaulted section as its defaults, for `diff`: `hardware: {}` beside no
    hardware differed in seven fields (`hardware.device_count: None -> 1`, ...), a confounder made of nothing."""
    dump = manifest.canonical()
    for name, section in _DEFAULTED_SECTIONS.items():
        if dump.get(name) is None:
            dump[name] = section().model_dump(mode="json")
    return dump


def diff(a: Manifest, b: Manifest) -> list[Difference]:
    """Fields whose values differ, as dotted paths (`data.sources[web].weight`), sorted by path. A default is the
    same written out or left out, a whole section's (`_filled`) as a field's."""
    fa: dict[str, Any] = {}
    fb: dict[str, Any] = {}
    _flatten(_filled(a), "", fa)
    _flatten(_filled(b), "", fb)
    return [Difference(field=k, a=fa.get(k), b=fb.get(k)) for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]


class ManifestDiff(BaseModel):
    """Two manifests field by field (`yieldgate manifest diff`): each as given (a file or a run's name), its content
    hash, and the fields in which they differ."""

    a: str
    b: str
    hash_a: str
    hash_b: str
    differences: list[Difference]

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()


class ManifestCheck(BaseModel):
    """A manifest file that validates (`yieldgate manifest validate`; one that does not is a ManifestError), with
    its content hash."""

    file: str
    valid: bool = True
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()
