"""`yieldgate plan`: the data supply of a target's recipe at each stage of a policy (`gate.supply.plan`), and, from
a campaign's L(N, D) law, each stage's predicted loss and the compute-optimal size for a FLOP budget
(`gate.sizing`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yieldgate.analysis.campaign import probe_runs
from yieldgate.analysis.scaling import MIN_SIZES
from yieldgate.config_files import read_structured_file, validate
from yieldgate.data.source_counts import measured
from yieldgate.errors import InputError
from yieldgate.gate.evidence import target_runs, workflow
from yieldgate.gate.policy import Policy
from yieldgate.gate.sizing import campaign_law, sizing
from yieldgate.gate.supply import plan
from yieldgate.ledger import Ledger
from yieldgate.manifest import Recipe, parse_manifest
from yieldgate.util.hashing import canonical_json

__all__ = ["plan_target", "target_recipe", "SupplyPlan"]


@dataclass(frozen=True)
class SupplyPlan:
    """`yieldgate plan`'s result: the data supply of a target's recipe at each stage of a policy (`supply.plan`),
    and with an L(N, D) law, each stage's predicted loss and the compute-optimal size (`sizing.sizing`)."""

    target: str
    policy: str
    """`name@version`."""
    max_epochs: float | None
    """The policy's limit on passes over a source's unique tokens (None: none)."""
    params: int | None
    """The planned model's parameters, where known: each stage's tokens per parameter are counted against it."""
    r_star: float
    """R*, the constant of Muennighoff et al. (2023)'s law of repeated data that the sources' worth is read with."""
    stages: list[dict[str, Any]]
    """Per stage: its tokens, the worth of its new tokens and per source the tokens drawn, epochs and worth."""
    grow: list[dict[str, Any]]
    """The sources to grow: each with the first stage that passes it more than `max_epochs` times."""
    sizing: dict[str, Any] | None = None
    """From a campaign's L(N, D) law: each stage's predicted loss, and the compute-optimal N and D of a budget."""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "target": self.target,
            "policy": self.policy,
            "max_epochs": self.max_epochs,
            "params": self.params,
            "r_star": self.r_star,
            "stages": self.stages,
            "grow": self.grow,
        }
        return out if self.sizing is None else {**out, "sizing": self.sizing}


def target_recipe(ledger: Ledger, target: str) -> tuple[Recipe, int | None]:
    """The recipe (and model parameters, where known and shared) of `target`: a recipe or manifest file (YAML/JSON)
    not trained yet, or a run, seed group or campaign recipe in the ledger, whose runs must share one data recipe
    (a campaign recipe probed at several model sizes is one recipe: its sizes differ in model only). A file's sources
    that name data on disk without `unique_tokens` have theirs measured (`data.source_counts.measured`, cached)."""
    if Path(target).is_file():
        data = read_structured_file(target)
        if isinstance(data, dict) and "data" in data:
            manifest = parse_manifest(data, target)
            if manifest.data is None:
                raise InputError(f"{target}: the manifest has no data recipe (data.sources)")
            return measured(manifest.data), manifest.model.params if manifest.model else None
        return measured(validate(Recipe, data, target, "'sources: [{name: web, unique_tokens: 1000000}]'")), None
    runs, _ = target_runs(ledger, target)
    found = [
        (m.data, m.model.params if m.model else None, canonical_json(workflow(m)["data"]))
        for m in (ledger.manifest(r) for r in runs)
        if m is not None and m.data is not None
    ]
    if not found:
        raise InputError(f"{target}: its runs have no manifest with a data recipe; pass a recipe file")
    if len({recipe for _, _, recipe in found}) > 1:
        raise InputError(f"{target}: its runs differ in data recipe; plan one recipe at a time")
    params = {p for _, p, _ in found}
    return found[0][0], params.pop() if len(params) == 1 else None


def plan_target(
    ledger: Ledger,
    target: str,
    policy: Policy,
    *,
    flops: float | None = None,
    scaling: str | None = None,
    params: int | None = None,
) -> SupplyPlan:
    """`yieldgate plan`: `plan` for `target`'s recipe under `policy`'s stages and max_epochs; and, from the L(N, D)
    law of campaign recipe `scaling` (default: the target's own, when its campaign has 3 or more model sizes), each
    stage's predicted loss at `params` (default: the target's model's non-embedding parameters) and the
    compute-optimal N and D for `flops` (`sizing`)."""
    if policy.unit != "tokens":
        raise InputError(
            f"policy {policy.name!r} gives its stages in {policy.unit}; yieldgate plan reads a recipe's supply against "
            "stages in tokens, before any throughput is measured: give the stages in tokens (yieldgate gate reads "
            f"{policy.unit} at the runs' throughput)"
        )
    recipe, total = target_recipe(ledger, target)
    out = SupplyPlan(
        target=target,
        policy=f"{policy.name}@{policy.version}",
        **plan(recipe, policy.stages, policy.requirements.max_epochs, total),
    )
    own, planned = _target_probe(ledger, target)
    ref = scaling or (own if own and _sizes(ledger, own) >= MIN_SIZES else None)
    if ref is None:
        if flops is not None:
            raise InputError(
                f"a FLOP budget needs an L(N, D) law, and {target!r} is no probe of a campaign of {MIN_SIZES} or more "
                "model sizes: name the campaign recipe to fit it from (CAMPAIGN/RECIPE)"
            )
        return out
    name, law = campaign_law(ledger, ref, level=policy.requirements.level)
    n = params if params is not None else planned
    section = sizing(
        law, policy.stages, params=n, flops=flops, recipe=recipe, max_epochs=policy.requirements.max_epochs
    )
    return dataclasses.replace(out, sizing={"scaling": name, **section})


def _target_probe(ledger: Ledger, target: str) -> tuple[str | None, int | None]:
    """(`campaign/recipe` when every run of `target` is a probe of one campaign recipe, the runs' non-embedding
    parameters when they share one N); (None, None) for a file."""
    if Path(target).is_file():
        data = read_structured_file(target)
        model = parse_manifest(data, target).model if isinstance(data, dict) and "data" in data else None
        return None, model.non_embedding_params if model else None
    runs, _ = target_runs(ledger, target)
    probes = {(p["campaign"], p["recipe"]) for p in (ledger.meta(r).get("probe") for r in runs) if isinstance(p, dict)}
    manifests = [ledger.manifest(r) for r in runs]
    sizes = {m.model.non_embedding_params for m in manifests if m is not None and m.model is not None}
    own = "/".join(next(iter(probes))) if len(probes) == 1 else None
    return own, (next(iter(sizes)) if len(sizes) == 1 else None)


def _sizes(ledger: Ledger, ref: str) -> int:
    """Model sizes among the finished probes of campaign recipe `ref`."""
    campaign, _, recipe = ref.partition("/")
    runs = probe_runs(ledger, campaign)
    return int(runs.loc[(runs["recipe"] == recipe) & (runs["status"] == "finished"), "model"].nunique())
