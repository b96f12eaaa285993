"""`yieldgate demo`: the main job on the built-in corpus, with real trainings, in a few minutes on a laptop.

1. Prepare the corpus (Shakespeare in two spellings, Milton, Python's standard library; cached after the
   first run).
2. The worked example. Pipeline A deduplicates (exact and near: the First Folio spelling of a play is a near
   duplicate of its modern text) and filters; pipeline B keeps everything and trains with a 4x bigger batch,
   so it moves more tokens per second. Both train the probe GPT on the same token budget and are compared at
   equal tokens and equal time in bits per byte (their tokenizers differ), with the speedup split into
   throughput x sample efficiency, the hard slices, and the manifest diff as the confounders.
3. A small mixture campaign (3 recipes x 3 seeds x 3 budgets; 2 seeds with --quick): the ranking per budget,
   ties, decision accuracy.
4. The stage gate on the best recipe's next stage, under the checked-in example policy.
5. The HTML report.

Every number printed is read back from the ledger the runs were just written to; nothing is canned.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeElapsedColumn

from yieldgate import api
from yieldgate.analysis.campaign import summarise
from yieldgate.analysis.conditions import Contention, contention, contention_summary
from yieldgate.analysis.load import load_run
from yieldgate.gate.policy import Policy
from yieldgate.ledger import Ledger
from yieldgate.ledger.location import Location
from yieldgate.ledger.pg import masked
from yieldgate.manifest import Manifest, Recipe, diff
from yieldgate.probe.campaign import Campaign, cores, quiet_mfu_warnings, run_campaign
from yieldgate.report.console import CampaignProgress, render_campaign, render_decision, render_pipelines
from yieldgate.report.console.progress import progress_bar, status

__all__ = ["run_demo", "Settings", "QUICK", "FULL"]

SHAKESPEARE = [{"name": "shakespeare-modern", "weight": 0.6}, {"name": "shakespeare-folio", "weight": 0.4}]
TOKENIZER = {"name": "bpe-512", "vocab_size": 512}
PIPELINE_A = Recipe.model_validate(
    {
        "sources": SHAKESPEARE,
        "tokenizer": TOKENIZER,
        "filters": [
            {"kind": "min_chars", "params": {"min": 200}},
            {"kind": "max_symbol_ratio", "params": {"max": 0.25}},
        ],
        "dedup": {"kind": "near", "shingle": "word:3", "threshold": 0.145},
    }
)
PIPELINE_B = Recipe.model_validate({"sources": SHAKESPEARE, "tokenizer": TOKENIZER})
MIXTURES = {
    "shakespeare": PIPELINE_A.model_dump(mode="json"),
    "shakespeare+milton": {
        **PIPELINE_A.model_dump(mode="json"),
        "sources": [{"name": "shakespeare-modern", "weight": 0.5}, {"name": "milton", "weight": 0.5}],
    },
    "shakespeare+code": {
        **PIPELINE_A.model_dump(mode="json"),
        "sources": [{"name": "shakespeare-modern", "weight": 0.7}, {"name": "python-stdlib", "weight": 0.3}],
    },
}


@dataclass(frozen=True)
class Settings:
    pipeline_tokens: int
    """Token budget of each worked-example probe."""
    pipeline_seeds: int
    budgets: tuple[int, ...]
    """The campaign's budgets."""
    campaign_seeds: int
    max_chars: int
    """Training characters kept per source."""
    evals: int


QUICK = Settings(
    pipeline_tokens=60_000,
    pipeline_seeds=1,
    budgets=(15_000, 30_000, 60_000),
    campaign_seeds=2,
    max_chars=300_000,
    evals=5,
)
FULL = Settings(
    pipeline_tokens=600_000,
    pipeline_seeds=2,
    budgets=(100_000, 200_000, 400_000),
    campaign_seeds=3,
    max_chars=1_500_000,
    evals=8,
)


def run_demo(
    location: str, *, quick: bool, console: Console | None = None, report: str | None = None
) -> dict[str, Any]:
    """Run the demo into the ledger at `location`; return what it measured (also printed)."""
    console = console or Console(emoji=False)
    settings = QUICK if quick else FULL
    started = time.perf_counter()
    url = Location.parse(location).is_url
    location = location if url else str(Path(location).resolve())
    shown = masked(location)
    out: dict[str, Any] = {"ledger": shown}
    with quiet_mfu_warnings():
        console.rule("1. The corpus")
        out["corpus"] = _prepare_corpus(console)
        console.rule("2. Pipeline A (dedup + filters) vs pipeline B (everything, 4x batch)")
        out["pipelines"] = _worked_example(location, settings, console)
        console.rule("3. A mixture campaign")
        out["campaign"] = _campaign(location, settings, console)
        console.rule("4. The stage gate on the best recipe")
        out["decision"] = _gate(location, settings, out["campaign"], console)
        console.rule("5. The report")
        out["report"] = _report(
            location, report or ("yieldgate-demo.html" if url else str(Path(location).with_suffix(".html"))), console
        )
    out["seconds"] = time.perf_counter() - started
    console.print(
        f"Done in {out['seconds']:.0f} s. Everything above is in {shown}: try `yieldgate --ledger "
        f"{shown} runs`, `... campaign demo-mix`, `... decisions`.",
        markup=False,
        highlight=False,
    )
    return out


def _bar(console: Console, location: str) -> Any:
    """Bars on a terminal; elsewhere (a log file, CI) a line per finished run and every 30 s, which names `yieldgate
    serve` on the demo's ledger (`report.console.progress`)."""
    return progress_bar(
        console,
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
        ledger=masked(location),
    )


def _prepare_corpus(console: Console) -> dict[str, Any]:
    from yieldgate.data import corpus

    with status(console, "Preparing the corpus (fetched once, then cached)..."):
        works = corpus.load_corpus()
    counts = {name: len(ws) for name, ws in corpus.sources(works).items()}
    console.print("Corpus: " + ", ".join(f"{n} {name}" for name, n in counts.items()) + " works.", highlight=False)
    return {"works": counts}


def _worked_example(location: str, s: Settings, console: Console) -> dict[str, Any]:
    from yieldgate.data.recipe import resolve
    from yieldgate.probe.config import ProbeConfig
    from yieldgate.probe.trainer import train_probe

    pipelines = {"pipeline-a": (PIPELINE_A, 16), "pipeline-b": (PIPELINE_B, 64)}
    threads = max(1, min(cores(), 4))
    with _bar(console, location) as bar:
        for name, (recipe, batch) in pipelines.items():
            task = bar.add_task(f"{name}: resolving the recipe", total=None)
            data = resolve(recipe, max_chars_per_source=s.max_chars)
            for seed in range(s.pipeline_seeds):
                run = f"demo/{name}/s{seed}"
                with Ledger(location) as led:  # a re-run of the demo replaces its runs
                    led.create_run(run, status="running", source="demo", if_exists="replace")
                bar.update(task, description=f"{run}: training", completed=0)
                cfg = ProbeConfig(
                    tokens=s.pipeline_tokens,
                    seed=seed,
                    batch_size=batch,
                    microbatches=2,
                    evals=s.evals,
                    threads=threads,
                    eval_seed=0,
                )

                def progress(step: int, steps: int, t: TaskID = task) -> None:
                    bar.update(t, completed=step, total=steps)

                train_probe(data, cfg, run=run, ledger=location, resume=True, progress=progress)
            bar.remove_task(task)
    a, b = "demo/pipeline-a/*", "demo/pipeline-b/*"
    with Ledger(location, readonly=True) as led:
        by_tokens = api.compare(a, b, ledger=led, at="tokens", per="byte")
        by_time = api.compare(a, b, ledger=led, at="time", per="byte")
        runs = {name: _pipeline_figures(led, f"demo/{name}/s0") for name in pipelines}
        confounders = [
            d.field for d in diff(_manifest(led, "demo/pipeline-a/s0"), _manifest(led, "demo/pipeline-b/s0"))
        ]
    render_pipelines(runs, console, by_tokens, by_time, confounders)
    measured = _contention(location, s)
    for line in contention_summary(measured):
        console.print(f"Host: {line}.", markup=False, highlight=False)
    return {
        "runs": runs,
        "at_equal_tokens": by_tokens.to_dict(),
        "at_equal_time": by_time.to_dict(),
        "confounders": confounders,
        "contention": measured.to_dict(),
    }


def _contention(location: str, s: Settings) -> Contention:
    """How much the host held the pipelines' runs back while they trained (`conditions.contention`): under load,
    pipeline A's throughput can collapse and flip the equal-time verdict, and the demo says so."""
    with Ledger(location, readonly=True) as led:
        loaded = {
            name: [load_run(led, f"demo/pipeline-{x}/s{seed}") for seed in range(s.pipeline_seeds)]
            for name, x in (("pipeline A", "a"), ("pipeline B", "b"))
        }
    return contention({name: [(r.steps, r.host) for r in runs] for name, runs in loaded.items()})


def _manifest(led: Ledger, run: str) -> Manifest:
    manifest = led.manifest(run)
    assert manifest is not None, run  # train_probe writes one
    return manifest


def _pipeline_figures(led: Ledger, run: str) -> dict[str, Any]:
    steps = led.steps(run, ["tokens", "wall_s"])
    evals = led.evals(run)
    last = evals[evals["step"] == evals["step"].max()]
    final = {f"{t}/{m}": v for t, m, v in zip(last["task"], last["metric"], last["value"], strict=True)}
    manifest = _manifest(led, run)
    recipe, optimisation = manifest.data, manifest.optimisation
    # probe_manifest fills both in, the recipe with its trained tokenizer
    assert recipe and recipe.tokenizer and recipe.tokenizer.bytes_per_token and optimisation, run
    return {
        "run": run,
        "tokens": float(steps["tokens"].iloc[-1]),
        "wall_s": float(steps["wall_s"].iloc[-1]),
        "tokens_per_s": float(steps["tokens"].iloc[-1] / steps["wall_s"].iloc[-1]),
        "batch": optimisation.batch_size,
        # bytes, not tokens: the two pipelines train their own tokenizers
        "train_mb": (sum(s.unique_tokens or 0 for s in recipe.sources) * recipe.tokenizer.bytes_per_token / 1e6),
        "val_bpb": final.get("val/bpb"),
        "hard": {k: v for k, v in final.items() if k.startswith("hard/") and k.endswith("/bpb")},
    }


def _campaign(location: str, s: Settings, console: Console) -> dict[str, Any]:
    campaign = Campaign.model_validate(
        {
            "name": "demo-mix",
            "recipes": MIXTURES,
            "seeds": s.campaign_seeds,
            "budgets": list(s.budgets),
            "eval_sources": ["shakespeare-modern", "milton"],
            "probe": {"evals": s.evals},
            "data": {"max_chars_per_source": s.max_chars},
        }
    )
    total = len(campaign.recipes) * len(campaign.seeds) * len(campaign.budgets)
    console.print(
        f"{len(campaign.recipes)} recipes x {len(campaign.seeds)} seeds x {len(campaign.budgets)} budgets "
        f"({', '.join(f'{b:,}' for b in campaign.budgets)} tokens): {total} probes, scored on the held-out "
        "text of shakespeare-modern and milton.",
        highlight=False,
    )
    with CampaignProgress(console, total, transient=True, ledger=masked(location)) as (step, result):
        done = run_campaign(campaign, location, workers=min(2, cores()), progress=step, on_result=result)
    with Ledger(location) as led:
        summary = summarise(led, campaign.name)
        led.set_campaign_summary(campaign.name, summary.to_dict())
    console.print(
        f"{len(done.finished)} probes trained, {len(done.skipped)} already in the ledger, {len(done.failed)} failed.",
        highlight=False,
    )
    render_campaign(summary.to_dict(), console)
    return summary.to_dict()


def demo_policy(s: Settings) -> Policy:
    """The demo's policy: examples/policy.yaml's requirements, its stages scaled to the demo's budgets (the
    campaign's largest budget is the first stage), two seeds (the quick demo runs two), no tokens-per-parameter floor
    (the demo's next stages are small; examples/policy.yaml asks for 10)."""
    top = max(s.budgets)
    return Policy.model_validate(
        {
            "name": "demo",
            "version": 1,
            "primary": "learning",
            "exploration_share": 0.2,
            "stages": [
                {"name": "probes", "tokens": top, "compute_share": 0.05},
                {"name": "stage-1", "tokens": 4 * top, "compute_share": 0.15},
                {"name": "stage-2", "tokens": 16 * top, "compute_share": 0.8},
            ],
            "requirements": {
                "min_yield_per_btok": 250,
                "regression_tolerance": 0.1,
                "min_seeds": 2,
                "min_tokens_per_param": 0,
                "level": 0.8,
            },
        }
    )


def _gate(location: str, s: Settings, campaign: dict[str, Any], console: Console) -> dict[str, Any]:
    from yieldgate.gate.gate import gate, record

    top = campaign["rankings"][str(max(campaign["budgets"]))]["bpb"]["order"][0]["recipe"]
    target = f"{campaign['campaign']}/{top}"
    policy = demo_policy(s)
    console.print(
        f"The best recipe at the largest budget is {top}; gating {target} (its {len(s.budgets)} budgets x "
        f"{s.campaign_seeds} seeds) for the next stage under policy {policy.name}@{policy.version}.",
        markup=False,
        highlight=False,
    )
    with Ledger(location) as led:
        decision = gate(led, target, policy)
        decision_id = record(led, decision, policy)
    render_decision(decision, console, decision_id)
    return {"id": decision_id, **decision.to_dict()}


def _report(location: str, out: str, console: Console) -> dict[str, Any]:
    from yieldgate.report.html import write_report

    with status(console, "Writing the HTML report..."), Ledger(location, readonly=True) as led:
        result = write_report(led, ["demo/pipeline-a/*", "demo/pipeline-b/*"], out)
    console.print(
        f"Report: {result.path} ({len(result.figures)} plots; open it in a browser, no network needed).",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return {"path": str(result.path), "figures": len(result.figures)}
