"""Data supply at the next stage: how many times each source's unique tokens would be passed, and what the
repetition is expected to cost in yield, before any compute is spent on it.

A stage that trains to T tokens draws from each source its share of T (the recipe's weights normalised; a
staged curriculum's weights within each of its stages, the recipe's after the last). A source drawn D tokens
from U unique ones is passed D/U times (epochs). Repeated tokens are worth less than new ones; Muennighoff et al.
(2023, "Scaling Data-Constrained Language Models", eq. 5) fit the tokens they are worth as

    D' = U + U · R* · (1 − exp(−R / R*)),   R = D/U − 1 (repetitions past the first epoch),   R* ≈ 15.4,

so ~4 epochs are worth nearly as much as new data and returns vanish past ~16 (D' tends to U · (1 + R*)).
The worth of a stage's new tokens is the effective tokens they add over the tokens they add: 1 while every
source is within its first epoch, e^(−R/R*) for the last token of a source passed 1 + R times.

The gate multiplies the forecast yield by the worth of the next stage's tokens over the worth of the tokens the
evidence was measured on (the forecast extrapolates a curve measured at that repetition), and the policy's
`max_epochs` holds any source that would be passed more often (`gate.py`). `yieldgate plan` prints the table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yieldgate.analysis.detectors import R_STAR, effective_tokens
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger
from yieldgate.manifest import Recipe, parse_manifest, read_structured_file, validate
from yieldgate.probe.policy import Policy, Stage

__all__ = ["SourceSupply", "drawn_tokens", "stage_supply", "worth", "plan", "plan_target", "target_recipe"]


def _shares(weights: dict[str, float], names: list[str]) -> dict[str, float]:
    total = sum(weights.get(n, 0.0) for n in names)
    return {n: weights.get(n, 0.0) / total if total > 0 else 0.0 for n in names}


def drawn_tokens(recipe: Recipe, tokens: float) -> dict[str, float]:
    """Tokens each source gives a run trained to `tokens`."""
    names = [s.name for s in recipe.sources]
    base = _shares({s.name: s.weight for s in recipe.sources}, names)
    spans: list[tuple[float, dict[str, float]]] = []  # (end, shares) in token order
    if recipe.curriculum.kind == "staged":
        spans = [(st.end(tokens), _shares(st.weights, names)) for st in recipe.curriculum.stages]
    spans.append((math.inf, base))
    drawn = dict.fromkeys(names, 0.0)
    start = 0.0
    for end, shares in spans:
        span = min(end, tokens) - start
        if span <= 0:
            break
        for name in names:
            drawn[name] += span * shares[name]
        start = end
    return drawn


@dataclass(frozen=True)
class SourceSupply:
    """One source at one stage."""

    stage: str
    source: str
    drawn_tokens: float
    """Tokens the stage's run draws from it, from the first token to the stage's end."""
    unique_tokens: int | None
    """What it holds (the manifest's `data.sources[].unique_tokens`; None where not recorded)."""
    epochs: float | None
    effective_tokens: float | None
    """What the drawn tokens are worth as new ones (Muennighoff et al.)."""
    stage_worth: float | None
    """Of the tokens it adds in this stage (past the previous stage's end), the share that counts as new."""

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def stage_supply(recipe: Recipe, stage: str, start: float, end: float) -> list[SourceSupply]:
    """Each source of `recipe` in a stage that trains from `start` to `end` tokens."""
    before, after = drawn_tokens(recipe, start), drawn_tokens(recipe, end)
    rows = []
    for source in recipe.sources:
        unique, d0, d1 = source.unique_tokens, before[source.name], after[source.name]
        if unique is None:
            rows.append(SourceSupply(stage, source.name, d1, None, None, None, None))
            continue
        gained = effective_tokens(d1, unique) - effective_tokens(d0, unique)
        rows.append(
            SourceSupply(
                stage,
                source.name,
                d1,
                unique,
                d1 / unique if unique else math.inf,
                effective_tokens(d1, unique),
                gained / (d1 - d0) if d1 > d0 else None,
            )
        )
    return rows


def worth(recipe: Recipe, start: float, end: float) -> float | None:
    """The share of the tokens from `start` to `end` that count as new, over all sources; None where a source
    drawn from has no unique-token count."""
    rows = stage_supply(recipe, "", start, end)
    before = drawn_tokens(recipe, start)
    added = {r.source: r.drawn_tokens - before[r.source] for r in rows}
    if any(r.unique_tokens is None and added[r.source] > 0 for r in rows):
        return None
    total = sum(added.values())
    if total <= 0:
        return None
    return sum((r.stage_worth or 0.0) * added[r.source] for r in rows) / total


def plan(
    recipe: Recipe, stages: Sequence[Stage], max_epochs: float | None = None, params: int | None = None
) -> dict[str, Any]:
    """Every stage's data supply (`yieldgate plan`): per source its tokens drawn, epochs, effective tokens and the
    worth of the stage's new tokens; the stage's tokens per parameter where `params` is known; and, for each
    source the policy's `max_epochs` would be passed on, the first stage it happens at and the unique tokens
    that stage needs."""
    out: list[dict[str, Any]] = []
    advice: list[dict[str, Any]] = []
    named: set[str] = set()
    start = 0.0
    for stage in stages:
        rows = stage_supply(recipe, stage.name, start, stage.tokens)
        sources = []
        for r in rows:
            over = max_epochs is not None and r.epochs is not None and r.epochs > max_epochs
            sources.append({**r.to_dict(), "over_limit": over})
            if max_epochs is not None and over and r.source not in named:
                named.add(r.source)
                advice.append(
                    {
                        "source": r.source,
                        "stage": stage.name,
                        "epochs": r.epochs,
                        "unique_tokens": r.unique_tokens,
                        "needed_unique_tokens": r.drawn_tokens / max_epochs,
                    }
                )
        out.append(
            {
                "stage": stage.name,
                "start_tokens": start,
                "tokens": stage.tokens,
                "worth": worth(recipe, start, stage.tokens),
                "tokens_per_param": stage.tokens / params if params else None,
                "sources": sources,
            }
        )
        start = stage.tokens
    return {"max_epochs": max_epochs, "params": params, "r_star": R_STAR, "stages": out, "grow": advice}


def target_recipe(ledger: Ledger, target: str) -> tuple[Recipe, int | None]:
    """The recipe (and model parameters, where known and shared) of `target`: a recipe or manifest file (YAML/JSON)
    not trained yet, or a run, seed group or campaign recipe in the ledger, whose runs must share one data recipe
    (a campaign recipe probed at several model sizes is one recipe: its sizes differ in model only)."""
    from yieldgate.probe.evidence import target_runs, workflow

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
        (m.data, m.model.params if m.model else None, json.dumps(workflow(m)["data"], sort_keys=True))
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
    from yieldgate.analysis.scaling import MIN_SIZES
    from yieldgate.probe.sizing import campaign_law, sizing

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
    from yieldgate.probe.evidence import target_runs

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
    from yieldgate.analysis.campaign import probe_runs

    campaign, _, recipe = ref.partition("/")
    runs = probe_runs(ledger, campaign)
    return int(runs.loc[(runs["recipe"] == recipe) & (runs["status"] == "finished"), "model"].nunique())
