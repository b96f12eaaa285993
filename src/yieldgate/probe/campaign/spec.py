"""The campaign file: its keys and their validation (`Campaign`), and its probes (`plan` -> `ProbeSpec`), each known
by a key that hashes everything its result depends on (see the package docstring)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from yieldgate.config_files import read_structured_file, validate
from yieldgate.errors import InputError
from yieldgate.manifest import Recipe, Source, load_recipe
from yieldgate.names import metric_direction
from yieldgate.probe.campaign.own_spec import TrainerSpec

__all__ = [
    "Adaptive",
    "Campaign",
    "RankBy",
    "ModelSize",
    "ProbeSettings",
    "DataSettings",
    "ProbeSpec",
    "load_campaign",
    "plan",
    "probe_key_part",
    "probes_of",
    "with_eval_sources",
]

# Bounds on what one campaign may ask for, checked when the file is read, before any work: a probe campaign trains
# small models on a CPU or one GPU, and a value past these is a typo (`seeds: 1000000000000` once died of a
# MemoryError, `context: 1000000000` ran every probe to a failure, a budget of 1e18 tokens trained for hours).
MAX_SEEDS = 1000
"""Seeds of one budget."""
MAX_PROBES = 10_000
"""Probes of one campaign: recipes x seeds x budgets x model sizes."""
MAX_CONTEXT = 1_048_576
"""Tokens of one probe's context window (2**20)."""
MAX_TOKENS = 10**12
"""Tokens one probe trains on (a budget)."""

EXAMPLE = "'name: mix, recipes: {clean: {sources: [{name: milton}]}}, seeds: [0, 1], budgets: [50000, 100000]'"


_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def _check_part(value: str, field: str) -> None:
    """Campaign and recipe names become parts of run names (`CAMPAIGN/RECIPE/s0/t100000`)."""
    if not _PART.fullmatch(value):
        raise ValueError(
            f"{field} {value!r} must be 1-64 letters, digits, '.', '_', '+' or '-' (it becomes part of run names)"
        )


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ModelSize(_Model):
    """A probe model's shape."""

    layers: int = Field(default=2, ge=1, le=1024)
    width: int = Field(default=64, ge=1, le=65_536)
    heads: int = Field(default=4, ge=1, le=1024)

    @model_validator(mode="after")
    def _check(self) -> ModelSize:
        if self.width % self.heads:
            raise ValueError(f"width ({self.width}) must be a multiple of heads ({self.heads})")
        return self


class ProbeSettings(_Model):
    """What every probe of the campaign shares (see `probe.trainer.ProbeConfig`)."""

    batch_size: int = Field(default=16, ge=1, le=1_048_576)
    microbatches: int = Field(default=2, ge=1, le=1_048_576)
    context: int = Field(default=64, ge=2, le=MAX_CONTEXT)
    """Tokens per sequence (at most MAX_CONTEXT; the recipe's sources must hold more training tokens than this)."""
    lr: float = Field(default=3e-3, gt=0)
    warmup_frac: float = Field(default=0.05, ge=0, le=1)
    decay_frac: float = Field(default=0.2, ge=0, le=1)
    evals: int = Field(default=8, ge=1, le=100_000)
    """Evaluations over each budget (plus one at step 0)."""
    eval_sequences: int = Field(default=32, ge=1, le=1_000_000)
    eval_documents: int | None = Field(default=None, ge=1)
    """Score whole held-out documents, this many per source, instead of `eval_sequences` windows: the same text
    under every recipe's tokenizer (`probe.trainer.ProbeConfig.eval_documents`)."""
    eval_seed: int | None = 0
    """Seed of the eval draw, the same for every probe: seeds then differ in training only, and every probe is
    scored on the same held-out sequences (None: each probe's own seed)."""
    eval_at: list[float] = Field(default_factory=list)
    """More evaluations, at these shares of each probe's budget (0 < share <= 1), beside the `evals` evenly spaced
    ones: a campaign's `score_window` adds its own. An evaluation does not change what a probe learns (it draws on no
    random state of training)."""

    @field_validator("eval_at")
    @classmethod
    def _shares(cls, value: list[float]) -> list[float]:
        bad = [x for x in value if not 0 < x <= 1]
        if bad:
            raise ValueError(f"shares of the budget must lie in (0, 1], got {bad[0]}")
        return sorted(set(value))


class DataSettings(_Model):
    """How recipes are resolved into tokens (part of each probe's key)."""

    max_chars_per_source: int | None = Field(default=None, ge=1)
    """Keep a deterministic prefix of each source's training documents (fast, small probes)."""
    held_out: float = Field(default=0.1, gt=0, lt=1)
    """Share of works held out for evaluation (split by work)."""
    stdlib_bytes: int = Field(default=2_000_000, ge=1)
    """Bytes of Python's standard library in the `python-stdlib` source."""


class RankBy(_Model):
    """The evaluation a campaign ranks recipes by, with its direction."""

    metric: str = Field(min_length=1)
    """An evaluation key, `<task>/<metric>` (`val/milton/bpb`, `hellaswag/acc`), or `bpb`: the mean bits per byte over
    the campaign's eval sources (the default)."""
    higher_is_better: bool | None = None
    """The metric's direction; may be left out only where the metric's name says it (`bpb`, `loss`, `acc`, ...)."""

    @model_validator(mode="after")
    def _direction(self) -> RankBy:
        if self.metric != "bpb" and "/" not in self.metric:
            raise ValueError(f"metric {self.metric!r} must be 'bpb' or an evaluation key '<task>/<metric>'")
        if self.higher_is_better is None:
            known = False if self.metric == "bpb" else metric_direction(self.metric.rpartition("/")[2])
            if known is None:
                raise ValueError(
                    f"metric {self.metric!r} has no known direction; give rank_by.higher_is_better (true or false)"
                )
            self.higher_is_better = known
        return self


class Adaptive(_Model):
    """Adaptive seeds (`analysis.adaptive`): after a first pass, more seeds only for the recipes still in a pair
    within noise, until every pair is decided or the compute is spent. The seeds drawn are the budget's own
    (`budget_seeds`, else `seeds`), in their order: the first `first_seeds` for every recipe, then one more a round."""

    budget: int = Field(ge=1)
    """The budget (one of `budgets`, not the largest) whose seeds adapt."""
    first_seeds: int = Field(default=2, ge=2, le=MAX_SEEDS)
    """Seeds a recipe in the first pass (two at least: the noise must be measured)."""
    compute: float = Field(gt=0)
    """The compute to spend at `budget`, the first pass included, as a share of one probe of the largest budget a
    recipe (DataDecide's compute share): 0.1 at a tenth of the largest budget pays for one probe a recipe."""


class Campaign(_Model):
    """Recipes x seeds x token budgets (x model sizes)."""

    name: str = Field(min_length=1)
    """The campaign's name: the first part of its probes' run names."""
    recipes: dict[str, Recipe] = Field(min_length=1)
    """Recipes by name (inline, or a path to a recipe file relative to the campaign file)."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1], min_length=1)
    """Seeds (a number N means seeds 0..N-1)."""
    budgets: list[int] = Field(min_length=1)
    """Token budgets, each > 0."""
    budget_seeds: dict[int, list[int]] = Field(default_factory=dict)
    """Seeds of particular budgets, instead of `seeds` (a number N means seeds 0..N-1): more seeds where probes are
    cheap, or seeds disjoint from the largest budget's, whose probes of the same seed share the initialisation and
    the first tokens of the data order with the smaller budget's."""
    last_evals: int = Field(default=1, ge=1)
    """Score each probe by the mean of its last N evaluations' bits per byte (1: the final evaluation)."""
    score_window: list[float] = Field(default_factory=list)
    """Score each probe by the mean of its evaluations at these shares of its budget instead (e.g. [0.9, 0.95, 1.0]:
    inside the learning rate's decay, where a single final evaluation is among the noisiest scores a probe has). The
    built-in trainer evaluates there (`probe.eval_at`); a trainer of one's own is scored by its evaluations nearest
    each share, within 2.5% of the budget."""
    rank_by: RankBy = Field(default_factory=lambda: RankBy(metric="bpb"))
    """What ranks the recipes and decides (a key `<task>/<metric>` of the probes' evaluations, with its direction);
    the summary also measures every other evaluation's signal-to-noise on the probes and recommends the best."""
    adaptive: Adaptive | None = None
    """Adaptive seeds at one budget (`Adaptive`): `yieldgate probe` trains the first pass, then rounds of more seeds for
    the recipes still close, instead of `budget_seeds` there."""
    models: list[ModelSize] = Field(default_factory=list)
    """Model sizes (default: one, the probe default)."""
    probe: ProbeSettings = Field(default_factory=ProbeSettings)
    data: DataSettings = Field(default_factory=DataSettings)
    eval_sources: list[str] = Field(default_factory=list)
    """Built-in sources every probe is evaluated on, whatever its recipe trains on: the common yardstick of a
    mixture campaign (added to each recipe at weight 0: held-out text, never sampled for training). The overall
    `val/loss`, `val/bpb` and the hard slices are computed on their held-out text only. Without it each recipe
    is evaluated on its own sources' held-out text."""
    level: float = Field(default=0.9, gt=0, lt=1)
    """Coverage of the intervals over seeds; a pair whose interval holds 0 is a tie."""
    next_budget: int | None = Field(default=None, ge=1)
    """Budget the forecast looks ahead to (default: twice the largest)."""
    trainer: TrainerSpec | None = None
    """The team's own trainer (`own_spec`): a command or callable run once per probe instead of the built-in one."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A campaign without its own trainer dumps (and hashes) as before the key existed; the trainer by its aliases.
        out: dict[str, Any] = handler(self)
        # Keys at their defaults that older campaigns did not have dump as absent, so their hashes stay.
        for key in ("score_window", "adaptive"):
            if not out.get(key):
                out.pop(key, None)
        if self.rank_by == RankBy(metric="bpb"):
            out.pop("rank_by", None)
        if not out.get("probe", {}).get("eval_at"):
            out.get("probe", {}).pop("eval_at", None)
        if self.trainer is None:
            out.pop("trainer", None)
        else:
            out["trainer"] = self.trainer.model_dump(mode="json", by_alias=True)
        return out

    @field_validator("seeds", mode="before")
    @classmethod
    def _count(cls, value: Any) -> Any:
        # A count is bounded before it becomes a list (10**12 seeds would not fit in memory).
        if isinstance(value, int) and not isinstance(value, bool):
            if value > MAX_SEEDS:
                raise ValueError(f"must be at most {MAX_SEEDS} seeds, got {value:,}")
            return list(range(value))
        if isinstance(value, list) and len(value) > MAX_SEEDS:
            raise ValueError(f"must be at most {MAX_SEEDS} seeds, got {len(value):,}")
        return value

    @field_validator("budget_seeds", mode="before")
    @classmethod
    def _counts(cls, value: Any) -> Any:
        return {k: cls._count(v) for k, v in value.items()} if isinstance(value, dict) else value

    def seeds_of(self, budget: int) -> list[int]:
        """The seeds of `budget`'s probes (at an adaptive budget, the seeds its rounds may draw)."""
        return self.budget_seeds.get(budget, self.seeds)

    def planned_seeds(self, budget: int) -> list[int]:
        """The seeds planned at `budget`: all of `seeds_of`, or an adaptive budget's first pass."""
        seeds = self.seeds_of(budget)
        if self.adaptive is not None and budget == self.adaptive.budget:
            return seeds[: self.adaptive.first_seeds]
        return seeds

    @model_validator(mode="after")
    def _check(self) -> Campaign:
        _check_part(self.name, "name")
        for recipe in self.recipes:
            _check_part(recipe, "recipe name")
        named = [(f"budget_seeds[{b}]", v) for b, v in self.budget_seeds.items()]
        for what, values in (("seeds", self.seeds), ("budgets", self.budgets), *named):
            if len(set(values)) < len(values):
                raise ValueError(f"{what} repeat a value: {values}")
            if not values:
                raise ValueError(f"{what} must name at least one seed")
        unknown = sorted(set(self.budget_seeds) - set(self.budgets))
        if unknown:
            raise ValueError(f"budget_seeds names budgets not in budgets: {unknown}")
        if min(self.budgets) < 1:
            raise ValueError(f"budgets must be > 0, got {self.budgets}")
        if max(self.budgets) > MAX_TOKENS:
            raise ValueError(f"budgets must be at most {MAX_TOKENS:.0e} tokens a probe, got {max(self.budgets):.3g}")
        probes = len(self.recipes) * sum(len(self.seeds_of(b)) for b in self.budgets) * max(1, len(self.models))
        if probes > MAX_PROBES:
            raise ValueError(
                f"the campaign plans {probes:,} probes (recipes x seeds x budgets x models), more than {MAX_PROBES:,}; "
                "split it into campaigns"
            )
        if self.next_budget is not None and self.next_budget <= max(self.budgets):
            raise ValueError(f"next_budget ({self.next_budget}) must exceed the largest budget ({max(self.budgets)})")
        self._check_scoring()
        if self.probe.batch_size % self.probe.microbatches:
            raise ValueError(
                f"probe.batch_size ({self.probe.batch_size}) must be a multiple of probe.microbatches "
                f"({self.probe.microbatches})"
            )
        return self

    def _check_scoring(self) -> None:
        """score_window against last_evals, the built-in trainer's evaluations there, and the adaptive budget."""
        if any(not 0 < x <= 1 for x in self.score_window):
            raise ValueError(f"score_window shares must lie in (0, 1], got {self.score_window}")
        if self.score_window and self.last_evals != 1:
            raise ValueError("score_window and last_evals both say how to score a probe: give one")
        if self.score_window and self.trainer is None:  # the built-in trainer evaluates where the window scores
            shares = sorted({*self.probe.eval_at, *(x for x in self.score_window if x < 1)})
            self.probe = self.probe.model_copy(update={"eval_at": shares})
        if self.adaptive is not None:
            if self.adaptive.budget not in self.budgets:
                raise ValueError(f"adaptive.budget ({self.adaptive.budget}) must be one of budgets {self.budgets}")
            if len(self.models) > 1:
                raise ValueError("adaptive seeds take one model size; give the campaign one in models")
            if self.adaptive.budget == max(self.budgets):
                raise ValueError("adaptive.budget must be a smaller budget than the largest (the reference)")
            pool = len(self.seeds_of(self.adaptive.budget))
            if pool <= self.adaptive.first_seeds:
                raise ValueError(
                    f"adaptive: budget {self.adaptive.budget} has {pool} seed(s), no more than first_seeds "
                    f"({self.adaptive.first_seeds}); give it more in budget_seeds"
                )
            first = self.adaptive.budget * self.adaptive.first_seeds / max(self.budgets)
            if first > self.adaptive.compute:
                raise ValueError(
                    f"adaptive.compute ({self.adaptive.compute:g}) is less than its first pass costs ({first:g}: "
                    f"{self.adaptive.first_seeds} probes of {self.adaptive.budget} tokens over {max(self.budgets)})"
                )

    def content_hash(self) -> str:
        return _digest(self.model_dump(mode="json"))


def load_campaign(path: str | Path) -> Campaign:
    """Load and validate a campaign file; recipe entries that are strings are recipe files (relative paths
    are relative to the campaign file)."""
    path = Path(path)
    data = read_structured_file(path)
    if isinstance(data, dict) and isinstance(data.get("recipes"), dict):
        data = dict(data)
        data["recipes"] = {
            name: (load_recipe(_relative(path, ref)).model_dump(mode="json") if isinstance(ref, str) else ref)
            for name, ref in data["recipes"].items()
        }
    campaign = validate(Campaign, data, str(path), EXAMPLE)
    if campaign.trainer is not None:  # its relative paths are the campaign file's
        campaign.trainer = campaign.trainer.anchored(path.resolve().parent)
    return campaign


def _relative(campaign: Path, ref: str) -> Path:
    p = Path(ref).expanduser()
    return p if p.is_absolute() else campaign.parent / p


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class ProbeSpec:
    """One probe of a campaign."""

    campaign: str
    recipe_name: str
    recipe: Recipe
    recipe_hash: str
    """Hash of the recipe with the campaign's data settings: what the resolved tokens depend on."""
    seed: int
    tokens: int
    model: ModelSize
    probe: ProbeSettings
    data: DataSettings
    eval_sources: tuple[str, ...]
    run: str
    key: str
    trainer: TrainerSpec | None = None
    """The campaign's own trainer (None: the built-in one)."""
    ablation: dict[str, str] | None = None
    """A leave-one-out probe (`ablation`): {"base": the recipe it ablates, "left_out": the source it leaves out}."""
    declared: tuple[str, ...] = ("model", "context")
    """What the campaign file says of the probe's shape: `model` (its `models:`), `context` (its `probe.context`). An
    own trainer's script builds the rest its own way: its manifest holds only these (`own._manifest`)."""

    def meta(self) -> dict[str, Any]:
        """What the probe's run carries in its meta under `probe` (with `ablation` only for a leave-one-out probe)."""
        out = {
            "campaign": self.campaign,
            "recipe": self.recipe_name,
            "recipe_hash": self.recipe_hash,
            "seed": self.seed,
            "tokens": self.tokens,
            "model": self.model.model_dump(),
            "key": self.key,
        }
        return {**out, "ablation": dict(self.ablation)} if self.ablation else out

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "recipe_name": self.recipe_name,
            "recipe": self.recipe.model_dump(mode="json"),
            "seed": self.seed,
            "tokens": self.tokens,
            "model": self.model.model_dump(),
            "probe": self.probe.model_dump(),
            "data": self.data.model_dump(),
            "eval_sources": list(self.eval_sources),
            "run": self.run,
            "recipe_hash": self.recipe_hash,
            "key": self.key,
            "trainer": self.trainer.model_dump(mode="json", by_alias=True) if self.trainer else None,
            "ablation": self.ablation,
            "declared": list(self.declared),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ProbeSpec:
        return cls(
            campaign=d["campaign"],
            recipe_name=d["recipe_name"],
            recipe=Recipe.model_validate(d["recipe"]),
            recipe_hash=d["recipe_hash"],
            seed=d["seed"],
            tokens=d["tokens"],
            model=ModelSize.model_validate(d["model"]),
            probe=ProbeSettings.model_validate(d["probe"]),
            data=DataSettings.model_validate(d["data"]),
            eval_sources=tuple(d["eval_sources"]),
            run=d["run"],
            key=d["key"],
            trainer=TrainerSpec.model_validate(d["trainer"]) if d.get("trainer") else None,
            ablation=d.get("ablation"),
            declared=tuple(d.get("declared", ("model", "context"))),
        )


def plan(campaign: Campaign) -> list[ProbeSpec]:
    """Every probe of the campaign, largest budgets first; at an adaptive budget, its first pass only
    (`Campaign.planned_seeds`: the rounds after it are `probes_of`)."""
    return [
        spec
        for tokens in sorted(campaign.budgets, reverse=True)
        for name in campaign.recipes
        for spec in probes_of(campaign, name, tokens, campaign.planned_seeds(tokens))
    ]


def probes_of(campaign: Campaign, name: str, tokens: int, seeds: list[int]) -> list[ProbeSpec]:
    """The probes of recipe `name` at budget `tokens` with `seeds`, for every model size."""
    models = campaign.models or [ModelSize()]
    probe_settings = probe_key_part(campaign.probe)
    # The own trainer joins the key only when there is one: the built-in probes' keys stay what they were.
    trainer = {"trainer": campaign.trainer.key_part()} if campaign.trainer is not None else {}
    workdir = Path(campaign.trainer.workdir or ".") if campaign.trainer is not None else Path(".")
    recipe = with_eval_sources(campaign.recipes[name], campaign.eval_sources)
    recipe_hash = _digest({"recipe": recipe.model_dump(mode="json"), "data": campaign.data.model_dump()})
    files = _data_files(recipe, workdir)  # the team's data on disk: a rewritten file is a new key
    # What the campaign file gives of the probe's shape (an own trainer's manifest holds only that: `own._manifest`).
    given = (("model", bool(campaign.models)), ("context", "context" in campaign.probe.model_fields_set))
    shape = tuple(name for name, yes in given if yes)
    specs = []
    for model in models:
        for seed in seeds:
            key = _digest(
                {
                    "recipe": recipe_hash,
                    "seed": seed,
                    "tokens": tokens,
                    "model": model.model_dump(),
                    "probe": probe_settings,
                    "eval": campaign.eval_sources,
                    **trainer,
                    **files,
                }
            )[:20]
            run = f"{campaign.name}/{name}/s{seed}/t{tokens}"
            if len(models) > 1:
                run += f"/m{model.layers}x{model.width}"
            specs.append(
                ProbeSpec(
                    campaign=campaign.name,
                    recipe_name=name,
                    recipe=recipe,
                    recipe_hash=recipe_hash,
                    seed=seed,
                    tokens=tokens,
                    model=model,
                    probe=campaign.probe,
                    data=campaign.data,
                    eval_sources=tuple(campaign.eval_sources),
                    run=run,
                    key=key,
                    trainer=campaign.trainer,
                    declared=shape,
                )
            )
    return specs


def probe_key_part(probe: ProbeSettings, *, evaluations: bool = True) -> dict[str, Any]:
    """The probe settings as a part of a probe's key: a setting at its default that older probes did not have stays
    out, so their keys still match. Without `evaluations`, also `eval_at`: where a probe is evaluated besides, which
    changes its records but not what it learns (the key of a reference scored by its final evaluation)."""
    unset = {name for name in ("eval_documents",) if getattr(probe, name) is None}
    if not probe.eval_at or not evaluations:
        unset.add("eval_at")
    return probe.model_dump(exclude=unset)


def _data_files(recipe: Recipe, workdir: Path) -> dict[str, Any]:
    """The fingerprints (path, size, modification time of each file) of the recipe's sources that name data on disk
    (relative to the trainer's `workdir`), as a part of each probe's key; none for the built-in corpus, so the built-in
    probes' keys stay what they were. A source that cannot be read now (moved, unmounted) is keyed by its path alone:
    its probes show as not done."""
    from yieldgate.data.sources import fingerprint

    prints = {}
    for source in recipe.sources:
        if source.path is None:
            continue
        try:
            located = source.model_copy(update={"path": str(workdir / Path(source.path).expanduser())})
            prints[source.name] = fingerprint(located)
        except (OSError, InputError):
            prints[source.name] = {"unreadable": source.path}
    return {"files": prints} if prints else {}


def with_eval_sources(recipe: Recipe, names: list[str]) -> Recipe:
    """The recipe with each eval source it lacks added at weight 0 (evaluated on, never trained on)."""
    have = {s.name for s in recipe.sources}
    missing = [Source(name=n, weight=0.0) for n in names if n not in have]
    return recipe.model_copy(update={"sources": [*recipe.sources, *missing]}) if missing else recipe
