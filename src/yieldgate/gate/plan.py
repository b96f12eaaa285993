"""`yieldgate plan`: the data supply of a target's recipe at each stage of a policy (`gate.supply.plan`), and, from
a campaign's L(N, D) law, each stage's predicted loss and the compute-optimal size for a FLOP budget
(`gate.sizing`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yieldgate.analysis.campaign import probe_runs
from yieldgate.analysis.scaling import MIN_SIZES
from yieldgate.errors import InputError
from yieldgate.gate.evidence import target_runs, workflow
from yieldgate.gate.policy import Policy
from yieldgate.gate.sizing import campaign_law, sizing
from yieldgate.gate.supply import plan
from yieldgate.ledger import Ledger
from yieldgate.manifest import Recipe, parse_manifest, read_structured_file, validate
from yieldgate.util.hashing import canonical_json

__all__ = ["plan_target", "target_recipe"]


def target_recipe(ledger: Ledger, target: str) -> tuple[Recipe, int | None]:
    """The recipe (and model parameters, where known and shared) of `target`: a recipe or manifest file (YAML/JSON)
    not trained yet, or a run, seed group or campaign recipe in the ledger, whose runs must share one data recipe
    (a campaign recipe probed at several model sizes is one recipe: its sizes differ in model only)."""
    if Path(target).is_file():
        data = read_structured_file(target)
        if isinstance(data, dict) and "data" in data:
            manifest = parse_manifest(data, target)
            if manifest.data is None:
                raise InputError(f"{target}: the manifest has no data recipe (data.sources)")
            return manifest.data, manifest.model.params if manifest.model else None
        return validate(Recipe, data, target, "'sources: [{name: web, unique_tokens: 1000000}]'"), None
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
) -> dict[str, Any]:
    """`yieldgate plan`: `plan` for `target`'s recipe under `policy`'s stages and max_epochs; and, from the L(N, D)
    law of campaign recipe `scaling` (default: the target's own, when its campaign has 3 or more model sizes), each
    stage's predicted loss at `params` (default: the target's model's non-embedding parameters) and the
    compute-optimal N and D for `flops` (`sizing`)."""
    recipe, total = target_recipe(ledger, target)
    out = {
        "target": target,
        "policy": f"{policy.name}@{policy.version}",
        **plan(recipe, policy.stages, policy.requirements.max_epochs, total),
    }
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
    out["sizing"] = {"scaling": name, **section}
    return out


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
