"""Probe campaigns: recipes x seeds x token budgets (x model sizes), each a small real training into the ledger.

A campaign file (YAML or JSON) names its recipes (inline, or a path relative to the campaign file), seeds,
budgets and the probe's settings; `plan` expands it into `ProbeSpec`s, `run_campaign` trains the ones the
ledger does not already hold, in worker processes (`executor="local"`) or as Ray tasks (`executor="ray"`).

**Keys.** A probe is known by its key: the hash of its recipe (with the data settings that shape the resolved
tokens), seed, budget, model size, probe settings and eval sources. Its run, `CAMPAIGN/RECIPE/s<seed>/t<tokens>`
(`/m<layers>x<width>` added when the campaign has several model sizes), carries the key in its meta (`probe`). A
re-run skips every probe whose run is finished with the same key; a failed, killed or half-written probe is trained
again from scratch. A probe that raises is recorded as `failed` with its error (meta `error`) and the campaign goes
on.

**Scheduling.** Largest budgets first (the longest jobs start first, so workers finish together); each worker
uses cores / workers torch threads.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from yieldgate.errors import InputError, RunInUse, check_choice
from yieldgate.ledger import Ledger
from yieldgate.manifest import Recipe, Source, load_recipe, read_structured_file, validate
from yieldgate.owners import Owner

__all__ = ["Campaign", "ProbeSpec", "load_campaign", "plan", "run_campaign", "run_probe", "CampaignRun"]

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

    layers: int = Field(default=2, ge=1)
    width: int = Field(default=64, ge=1)
    heads: int = Field(default=4, ge=1)

    @model_validator(mode="after")
    def _check(self) -> ModelSize:
        if self.width % self.heads:
            raise ValueError(f"width ({self.width}) must be a multiple of heads ({self.heads})")
        return self


class ProbeSettings(_Model):
    """What every probe of the campaign shares (see `probe.trainer.ProbeConfig`)."""

    batch_size: int = Field(default=16, ge=1)
    microbatches: int = Field(default=2, ge=1)
    context: int = Field(default=64, ge=2)
    lr: float = Field(default=3e-3, gt=0)
    warmup_frac: float = Field(default=0.05, ge=0, le=1)
    decay_frac: float = Field(default=0.2, ge=0, le=1)
    evals: int = Field(default=8, ge=1)
    """Evaluations over each budget (plus one at step 0)."""
    eval_sequences: int = Field(default=32, ge=1)
    eval_documents: int | None = Field(default=None, ge=1)
    """Score whole held-out documents, this many per source, instead of `eval_sequences` windows: the same text
    under every recipe's tokenizer (`probe.trainer.ProbeConfig.eval_documents`)."""
    eval_seed: int | None = 0
    """Seed of the eval draw, the same for every probe: seeds then differ in training only, and every probe is
    scored on the same held-out sequences (None: each probe's own seed)."""


class DataSettings(_Model):
    """How recipes are resolved into tokens (part of each probe's key)."""

    max_chars_per_source: int | None = Field(default=None, ge=1)
    """Keep a deterministic prefix of each source's training documents (fast, small probes)."""
    held_out: float = Field(default=0.1, gt=0, lt=1)
    """Share of works held out for evaluation (split by work)."""
    stdlib_bytes: int = Field(default=2_000_000, ge=1)
    """Bytes of Python's standard library in the `python-stdlib` source."""


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

    @field_validator("seeds", mode="before")
    @classmethod
    def _count(cls, value: Any) -> Any:
        return list(range(value)) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("budget_seeds", mode="before")
    @classmethod
    def _counts(cls, value: Any) -> Any:
        return {k: cls._count(v) for k, v in value.items()} if isinstance(value, dict) else value

    def seeds_of(self, budget: int) -> list[int]:
        """The seeds of `budget`'s probes."""
        return self.budget_seeds.get(budget, self.seeds)

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
        if self.next_budget is not None and self.next_budget <= max(self.budgets):
            raise ValueError(f"next_budget ({self.next_budget}) must exceed the largest budget ({max(self.budgets)})")
        if self.probe.batch_size % self.probe.microbatches:
            raise ValueError(
                f"probe.batch_size ({self.probe.batch_size}) must be a multiple of probe.microbatches "
                f"({self.probe.microbatches})"
            )
        return self

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
    return validate(Campaign, data, str(path), EXAMPLE)


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

    def meta(self) -> dict[str, Any]:
        """What the probe's run carries in its meta under `probe`."""
        return {
            "campaign": self.campaign,
            "recipe": self.recipe_name,
            "recipe_hash": self.recipe_hash,
            "seed": self.seed,
            "tokens": self.tokens,
            "model": self.model.model_dump(),
            "key": self.key,
        }

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
        )


def plan(campaign: Campaign) -> list[ProbeSpec]:
    """Every probe of the campaign, largest budgets first."""
    models = campaign.models or [ModelSize()]
    # A setting at its default that older probes did not have stays out of the key, so their keys still match.
    unset = {"eval_documents"} if campaign.probe.eval_documents is None else None
    probe_settings = campaign.probe.model_dump(exclude=unset)
    specs = []
    for tokens in sorted(campaign.budgets, reverse=True):
        for name, declared in campaign.recipes.items():
            recipe = with_eval_sources(declared, campaign.eval_sources)
            recipe_hash = _digest({"recipe": recipe.model_dump(mode="json"), "data": campaign.data.model_dump()})
            for model in models:
                for seed in campaign.seeds_of(tokens):
                    key = _digest(
                        {
                            "recipe": recipe_hash,
                            "seed": seed,
                            "tokens": tokens,
                            "model": model.model_dump(),
                            "probe": probe_settings,
                            "eval": campaign.eval_sources,
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
                        )
                    )
    return specs


def with_eval_sources(recipe: Recipe, names: list[str]) -> Recipe:
    """The recipe with each eval source it lacks added at weight 0 (evaluated on, never trained on)."""
    have = {s.name for s in recipe.sources}
    missing = [Source(name=n, weight=0.0) for n in names if n not in have]
    return recipe.model_copy(update={"sources": [*recipe.sources, *missing]}) if missing else recipe


# -- one probe (runs in a worker) ---------------------------------------------------------------------------

_RESOLVED: dict[str, Any] = {}
"""Resolved recipes of this worker process, by recipe hash: a worker resolves each recipe once."""


def run_probe(
    spec: ProbeSpec, ledger: str, *, threads: int | None = None, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """Train one probe into the ledger. Never raises for a failing probe: returns its status and error."""
    from yieldgate.data.recipe import resolve
    from yieldgate.probe.config import ProbeConfig
    from yieldgate.probe.trainer import train_probe

    # Claimed in one write transaction with the check, so two `yieldgate probe` commands on one campaign share the
    # work: a probe another live process trains, or finished since this one planned, is skipped, never restarted
    # under it. A fresh run: a half-written one of an earlier attempt (its writer dead) is dropped.
    try:
        with Ledger(ledger) as led, led.transaction():
            if _statuses(led).get((spec.run, spec.key)) == "finished":
                return {"run": spec.run, "key": spec.key, "status": "skipped", "reason": "finished by another process"}
            led.claim_run(spec.run, owner=Owner.this_process(), resume=True, takeover=True, source="probe")
            led.create_run(spec.run, status="running", source="probe", if_exists="replace")
            led.set_meta(spec.run, "probe", spec.meta())
    except RunInUse as exc:
        return {"run": spec.run, "key": spec.key, "status": "skipped", "reason": str(exc)}
    started = time.perf_counter()
    try:
        data = _RESOLVED.get(spec.recipe_hash)
        if data is None:
            data = _RESOLVED[spec.recipe_hash] = resolve(
                spec.recipe,
                held_out=spec.data.held_out,
                seed=0,
                stdlib_bytes=spec.data.stdlib_bytes,
                max_chars_per_source=spec.data.max_chars_per_source,
            )
        cfg = ProbeConfig(
            tokens=spec.tokens,
            seed=spec.seed,
            layers=spec.model.layers,
            width=spec.model.width,
            heads=spec.model.heads,
            threads=threads,
            eval_sources=spec.eval_sources,
            **spec.probe.model_dump(),
        )
        final = train_probe(data, cfg, run=spec.run, ledger=ledger, progress=progress, resume=True)
        return {
            "run": spec.run,
            "key": spec.key,
            "status": "finished",
            "final": final,
            "seconds": time.perf_counter() - started,
        }
    except Exception as exc:  # noqa: BLE001 - a failing probe is recorded, the campaign goes on
        error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        _record_failure(ledger, spec, error)
        return {
            "run": spec.run,
            "key": spec.key,
            "status": "failed",
            "error": error,
            "seconds": time.perf_counter() - started,
        }


def _record_failure(ledger: str, spec: ProbeSpec, error: str) -> None:
    with Ledger(ledger) as led:
        led.set_status(spec.run, "failed")
        led.set_meta(spec.run, "error", error)


# -- the campaign -------------------------------------------------------------------------------------------


@dataclass
class CampaignRun:
    """What one `run_campaign` call did."""

    campaign: str
    planned: int
    skipped: list[str]
    """Runs already in the ledger (finished, same key)."""
    finished: list[str]
    failed: dict[str, str]
    """Run -> error."""
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


Progress = Callable[[str, int, int], None]
"""(run, step, steps) -> None, a few times a second per training probe."""


def pending(ledger: Ledger, specs: list[ProbeSpec]) -> tuple[list[ProbeSpec], list[str]]:
    """(probes to train, runs to skip): a probe is done when its run is finished with the same key."""
    status = _statuses(ledger)
    todo = [s for s in specs if status.get((s.run, s.key)) != "finished"]
    skip = [s.run for s in specs if status.get((s.run, s.key)) == "finished"]
    return todo, skip


def _statuses(ledger: Ledger) -> dict[tuple[str, str], str]:
    """(run, probe key) -> status, for every probe run in the ledger."""
    metas = ledger.run_metas()
    return {
        (name, meta["probe"].get("key")): status
        for name, status, meta in metas.itertuples(index=False)
        if isinstance(meta.get("probe"), dict)
    }


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def run_campaign(
    campaign: Campaign,
    ledger: str,
    *,
    executor: Literal["local", "ray"] = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: Progress | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> CampaignRun:
    """Train the campaign's probes that the ledger lacks; see the module docstring. `progress` hears from
    probes in training; `on_result` gets one result per planned probe (status skipped, finished or failed)."""
    check_choice("executor", executor, ("local", "ray"))
    if executor == "ray":
        _ray()  # a missing Ray is said before anything is written
    ledger = str(Path(ledger).resolve()) if "://" not in ledger else ledger
    specs = plan(campaign)
    with Ledger(ledger) as led:
        led.put_campaign(campaign.name, campaign.model_dump(mode="json"), campaign.content_hash())
        todo, skipped = pending(led, specs)
    workers = max(1, min(workers or cores(), len(todo) or 1))
    threads = max(1, cores() // workers)
    out = CampaignRun(campaign=campaign.name, planned=len(specs), skipped=skipped, finished=[], failed={}, seconds=0.0)
    started = time.perf_counter()
    if on_result is not None:  # every planned probe gets a result: skipped, finished or failed
        for name in skipped:
            on_result({"run": name, "status": "skipped"})
    run = _run_local if executor == "local" else _run_ray
    for result in run(todo, ledger, workers=workers, threads=threads, address=address, progress=progress):
        if result["status"] == "finished":
            out.finished.append(result["run"])
        elif result["status"] == "skipped":  # trained by another process running the same campaign
            out.skipped.append(result["run"])
        else:
            out.failed[result["run"]] = result["error"]
        if on_result is not None:
            on_result(result)
    out.seconds = time.perf_counter() - started
    return out


def _worker_init(threads: int) -> None:
    # Before torch loads in this process: its thread pools size themselves from these.
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
    logging.getLogger("yieldgate.track").addFilter(_no_mfu_warning)  # this process only runs probes


def _no_mfu_warning(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("yieldgate: mfu not recorded")


@contextmanager
def quiet_mfu_warnings() -> Iterator[None]:
    """A CPU has no known peak FLOP/s, so every probe would warn that MFU is not recorded: each run's meta
    (`mfu`) keeps the reason, and the terminal keeps the campaign's progress."""
    logger = logging.getLogger("yieldgate.track")
    logger.addFilter(_no_mfu_warning)
    try:
        yield
    finally:
        logger.removeFilter(_no_mfu_warning)


def _local_task(spec: dict[str, Any], ledger: str, threads: int, queue: Any) -> dict[str, Any]:
    probe = ProbeSpec.from_json(spec)
    last = [0.0]

    def report(step: int, steps: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.25 or step == steps:  # a few messages a second per probe, not one per step
            last[0] = now
            queue.put((probe.run, step, steps))

    return run_probe(probe, ledger, threads=threads, progress=report)


def _run_local(
    todo: list[ProbeSpec], ledger: str, *, workers: int, threads: int, address: str | None, progress: Progress | None
) -> Iterator[dict[str, Any]]:
    """Probes in worker processes (spawned: no state copied from the caller)."""
    import multiprocessing as mp

    if not todo:
        return
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        queue = manager.Queue()
        stop = threading.Event()
        relay = threading.Thread(target=_relay, args=(queue, stop, progress), daemon=True)
        relay.start()
        try:
            remaining = list(todo)
            while remaining:
                with ProcessPoolExecutor(
                    workers, mp_context=ctx, initializer=_worker_init, initargs=(threads,)
                ) as pool:
                    futures: dict[Future[dict[str, Any]], ProbeSpec] = {
                        pool.submit(_local_task, s.to_json(), ledger, threads, queue): s for s in remaining
                    }
                    remaining = []
                    waiting = set(futures)
                    try:
                        while waiting:
                            done, waiting = wait(waiting, return_when=FIRST_COMPLETED)
                            for future in done:
                                try:
                                    yield future.result()
                                except BrokenProcessPool:
                                    remaining.append(futures[future])
                    except (KeyboardInterrupt, GeneratorExit):
                        # Interrupted: nothing more starts, and the probes in training stop now (their runs end
                        # `killed`, and the next run of the campaign trains them again).
                        pool.shutdown(wait=False, cancel_futures=True)
                        _stop_workers()
                        raise
                if remaining:  # a worker died: the probes it had begun fail, the others go to a new pool
                    crashed = [s for s in remaining if _started(ledger, s)]
                    yield from _fail(
                        crashed, ledger, "the worker process died during the probe (killed or out of memory)"
                    )
                    remaining = [s for s in remaining if s not in crashed]
        finally:
            stop.set()
            relay.join(timeout=2)


def _started(ledger: str, spec: ProbeSpec) -> bool:
    """The probe's run was begun by this attempt and not ended (a worker that dies leaves it `running`)."""
    with Ledger(ledger, readonly=True) as led:
        return _statuses(led).get((spec.run, spec.key)) in ("running", "killed")


def _fail(specs: list[ProbeSpec], ledger: str, error: str) -> Iterator[dict[str, Any]]:
    for spec in specs:
        _record_failure(ledger, spec, error)
        yield {"run": spec.run, "key": spec.key, "status": "failed", "error": error}


def _stop_workers() -> None:
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            child.terminate()
        except psutil.Error:
            pass


def _relay(queue: Any, stop: threading.Event, progress: Progress | None) -> None:
    import queue as q

    while not stop.is_set():
        try:
            run, step, steps = queue.get(timeout=0.2)
        except (q.Empty, EOFError, OSError):
            continue
        if progress is not None:
            progress(run, step, steps)


def _ray_task(spec: dict[str, Any], ledger: str, threads: int) -> dict[str, Any]:
    _worker_init(threads)
    return run_probe(ProbeSpec.from_json(spec), ledger, threads=threads)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("executor ray needs Ray: pip install 'yieldgate[ray]'", parameter="executor") from None
    return ray


def _run_ray(
    todo: list[ProbeSpec], ledger: str, *, workers: int, threads: int, address: str | None, progress: Progress | None
) -> Iterator[dict[str, Any]]:
    """Probes as Ray tasks on a running cluster (`address`), or on a local Ray instance started here (bound
    to 127.0.0.1, no dashboard) with `workers` x `threads` CPUs. The ledger must be reachable from every
    node (a shared file system, or a ledger URL)."""
    ray = _ray()
    if not todo:
        return
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(
                num_cpus=workers * threads, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1"
            )
    try:
        task = ray.remote(num_cpus=threads, max_retries=0)(_ray_task)
        refs = {task.remote(s.to_json(), ledger, threads): s for s in todo}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            spec = refs.pop(done[0])
            try:
                yield ray.get(done[0])
            except ray.exceptions.RayError as exc:  # the task's worker died
                yield from _fail([spec], ledger, f"Ray task failed: {str(exc).splitlines()[0]}")
    finally:
        if started_here:
            ray.shutdown()
