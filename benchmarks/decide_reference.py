"""The reference of `bench_decide.py`: every recipe at the campaign's largest budget with 10 seeds, computed once.

Issue #22 showed the 3-seed reference was the limit of the decision benchmark, not the probes: its own noise capped
the agreement a perfect probe could reach near 94%. This command trains every recipe of the campaign at its largest
budget with seeds 0..9 (at least 10: `bench_decide.py` refuses fewer) and stores each probe's score, bits per byte
by the campaign's `last_evals`, in `benchmarks/data/<campaign>-reference-<key>.json`:

- **Keyed** by `reference_key`: a hash of the recipes (each with the campaign's eval sources and data settings:
  the hash that keys its probes), the model, the probe settings, the eval sources, `last_evals`, the largest budget
  and the trainer. A changed campaign gets a new file name, so `bench_decide.py` never scores against a reference
  computed for other recipes or settings (the smaller budgets and their seeds are not in the key: the reference
  does not depend on them).
- **Resumable and safe to interrupt**: the probes go into the ledger given (`--ledger`); a re-run trains only the
  ones the ledger lacks, and the data file is rewritten after each probe finishes, so an interrupted run keeps every
  probe it finished. `--seeds 3-5` (or `0,4,7`) trains a piece; pieces may go to different ledgers, the data file
  merges them.
- **Reproducible exactly**: each probe trains in a worker process with `--threads` threads (1 by default, and
  stored), so `bench_decide.py` can retrain one with the same threads and check it gets the same value to the bit
  (a different thread count may sum in another order).
- **Its own time** is the sum of the probes' training times (printed, and stored per probe), and the wall time of
  this invocation.

    .venv/bin/python benchmarks/decide_reference.py --ledger /tmp/ref.db [--seeds 0-9] [--workers 2] [--threads 1]
        [--campaign examples/decide.yaml] [--out benchmarks/data] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
REFERENCE_SEEDS = 10
"""Seeds per recipe at the largest budget: seeds 0..9 (bench_decide refuses a reference with fewer)."""
FORMAT = 1


def reference_campaign(campaign: Any, seeds: list[int]) -> Any:
    """The campaign reduced to its largest budget with `seeds`, named `<name>-reference` (its probes keep the keys
    they have in the full campaign: a key does not depend on the other budgets), scored by its last evaluations
    (`last_evals`), without an adaptive mode."""
    from yieldgate.probe.campaign import Campaign

    spec = campaign.model_dump()
    spec.update(name=f"{campaign.name}-reference", budgets=[max(campaign.budgets)], budget_seeds={}, seeds=seeds)
    spec.update(score_window=[], adaptive=None)
    return Campaign.model_validate(spec)


def key_parts(campaign: Any) -> dict[str, Any]:
    """What the reference's values depend on: the recipes' hashes (with eval sources and data settings), the model,
    the probe settings, eval sources, last_evals, the largest budget and the trainer."""
    from yieldgate.probe.campaign import plan
    from yieldgate.probe.campaign.spec import probe_key_part

    specs = plan(reference_campaign(campaign, [0]))
    return {
        "recipes": {s.recipe_name: s.recipe_hash for s in specs},
        "models": [m.model_dump() for m in campaign.models],
        # Where a probe is evaluated besides (`eval_at`) is no part of it: the reference is scored by its final
        # evaluation, and an evaluation draws on no state of training.
        "probe": probe_key_part(campaign.probe, evaluations=False),
        "eval_sources": list(campaign.eval_sources),
        "last_evals": campaign.last_evals,
        "tokens": max(campaign.budgets),
        "trainer": campaign.trainer.key_part() if campaign.trainer is not None else None,
        "score": "val/bpb",
    }


def reference_key(campaign: Any) -> str:
    """The reference's key: 16 hex digits of the hash of `key_parts`."""
    from yieldgate.probe.campaign.spec import _digest

    return _digest(key_parts(campaign))[:16]


def reference_path(campaign: Any, out: Path = DATA) -> Path:
    """Where the campaign's reference lives: its name and key in the file name."""
    return out / f"{campaign.name}-reference-{reference_key(campaign)}.json"


def parse_seeds(text: str) -> list[int]:
    """`0-9`, `3-5`, `0,4,7` or `0-2,5` as a sorted list of seeds."""
    seeds: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        seeds.update(range(int(lo), int(hi or lo) + 1))
    if not seeds:
        raise ValueError(f"no seeds in {text!r}")
    return sorted(seeds)


def load_reference(path: Path) -> dict[str, Any] | None:
    """The stored reference, or None where there is none."""
    return json.loads(path.read_text()) if path.exists() else None


def empty_reference(campaign: Any, threads: int) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "campaign": campaign.name,
        "key": reference_key(campaign),
        "key_parts": key_parts(campaign),
        "tokens": max(campaign.budgets),
        "threads": threads,
        "target_seeds": list(range(REFERENCE_SEEDS)),
        "probes": {name: {} for name in campaign.recipes},
    }


def missing(reference: dict[str, Any], recipes: list[str]) -> dict[str, list[int]]:
    """Per recipe, the seeds 0..9 the reference lacks (empty when complete)."""
    probes = reference.get("probes", {})
    want = range(REFERENCE_SEEDS)
    out = {r: [s for s in want if str(s) not in probes.get(r, {})] for r in recipes}
    return {r: s for r, s in out.items() if s}


def stored_keys(reference: dict[str, Any] | None) -> set[str]:
    """The probe keys the data file holds (a piece run in another ledger does not train them again)."""
    return {p["key"] for by_seed in (reference or {}).get("probes", {}).values() for p in by_seed.values()}


def reference_seconds(reference: dict[str, Any]) -> float:
    """The reference's own time: the sum of its probes' training times."""
    return float(sum(p.get("seconds") or 0.0 for by_seed in reference["probes"].values() for p in by_seed.values()))


def write_reference(path: Path, reference: dict[str, Any]) -> None:
    """Atomically: an interrupted write leaves the previous file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def probe_score(ledger: Any, run: str, campaign: Any) -> float:
    """A finished probe's bits per byte, by the campaign's last_evals (as `campaign_scores` scores it)."""
    from yieldgate.analysis.campaign import BPB, probe_scores

    evals = ledger.evals(run)
    scores = probe_scores(
        evals, list(campaign.eval_sources), ledger.steps(run, ["tokens", "lr"]), last_evals=campaign.last_evals
    )
    return float(scores[BPB])


def train(
    campaign: Any,
    ledger: str,
    *,
    workers: int,
    threads: int,
    on_result: Callable[[Any, dict[str, Any]], None] | None = None,
    stored: Collection[str] = (),
) -> dict[str, int]:
    """Train the campaign's probes the ledger lacks, each in a worker process with `threads` threads (not
    `run_campaign`, which sizes the threads from the machine's cores: an exact reproduction needs the reference's).
    `on_result(spec, result)` after each probe, skipped ones included (result status "skipped"); probes whose key
    is in `stored` (the data file has them) are not trained, whatever the ledger holds."""
    from yieldgate.ledger import Ledger
    from yieldgate.probe.campaign import plan, quiet_mfu_warnings
    from yieldgate.probe.campaign.executors import _run_local, pending, preflight_campaign

    campaign = preflight_campaign(campaign)
    specs = [s for s in plan(campaign) if s.key not in stored]
    by_run = {s.run: s for s in specs}
    with Ledger(ledger) as led:
        led.put_campaign(campaign.name, campaign.model_dump(mode="json"), campaign.content_hash())
        todo, skipped = pending(led, specs)
    # Seed by seed (every recipe's seed 0, then seed 1, ...): an interrupted reference has its seeds for every recipe.
    order = {name: i for i, name in enumerate(campaign.recipes)}
    todo.sort(key=lambda s: (s.seed, order[s.recipe_name]))
    counts = {"planned": len(specs), "skipped": len(skipped), "finished": 0, "failed": 0}
    if on_result is not None:
        for run in skipped:
            on_result(by_run[run], {"run": run, "status": "skipped"})
    with quiet_mfu_warnings():
        for result in _run_local(
            todo, ledger, workers=max(1, min(workers, len(todo))), threads=threads, address=None, progress=None
        ):
            status = result["status"] if result["status"] in ("finished", "failed") else "skipped"
            counts[status] += 1
            if on_result is not None:
                on_result(by_run[result["run"]], result)
    return counts


def record(path: Path, campaign: Any, ledger: str, threads: int) -> Callable[[Any, dict[str, Any]], None]:
    """An `on_result` that stores each finished probe's score in the data file (merged with what it holds)."""
    from yieldgate.ledger import Ledger

    def on_result(spec: Any, result: dict[str, Any]) -> None:
        if result["status"] not in ("finished", "skipped"):
            print(f"  {spec.run}: {result['status']} {result.get('error', '')}", file=sys.stderr)
            return
        with Ledger(ledger) as led:
            reached = float(led.evals(spec.run)["tokens"].max())
            value = probe_score(led, spec.run, campaign)
        if not reached >= spec.tokens:  # its last evaluation is not in the ledger (a spill file not yet merged)
            print(f"  {spec.run}: its last evaluation is not in the ledger ({reached:,.0f} tokens); not stored")
            return
        reference = load_reference(path) or empty_reference(campaign, threads)
        if reference.get("threads") != threads:
            raise SystemExit(
                f"{path.name} was computed with {reference.get('threads')} thread(s) a probe, this run with "
                f"{threads}: rerun with --threads {reference.get('threads')}"
            )
        by_seed = reference["probes"].setdefault(spec.recipe_name, {})
        old = by_seed.get(str(spec.seed))
        if old is not None and old["bpb"] != value:
            print(
                f"  {spec.run}: the ledger has {value!r}, the data file {old['bpb']!r}; keeping the data file's",
                file=sys.stderr,
            )
            return
        seconds = result.get("seconds") if result["status"] == "finished" else (old or {}).get("seconds")
        by_seed[str(spec.seed)] = {"bpb": value, "key": spec.key, "seconds": seconds}
        write_reference(path, reference)
        if result["status"] == "finished":
            print(f"  {spec.run}: {value:.6f} bpb in {seconds:.0f} s", flush=True)

    return on_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaign", type=Path, default=ROOT / "examples" / "decide.yaml")
    parser.add_argument("--ledger", required=True, help="keep the probes here (a re-run trains only what it lacks)")
    parser.add_argument("--seeds", default=f"0-{REFERENCE_SEEDS - 1}", help="seeds to train: 0-9, 3-5 or 0,4,7")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="threads a probe (stored: a reproduction uses them)")
    parser.add_argument("--out", type=Path, default=DATA, help="folder of the data file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.getLogger("yieldgate").setLevel(logging.ERROR)
    from yieldgate.probe.campaign import load_campaign

    campaign = load_campaign(args.campaign)
    seeds = parse_seeds(args.seeds)
    path = reference_path(campaign, args.out)
    start = time.perf_counter()
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: seeds {seeds}", flush=True)
    try:
        counts = train(
            reference_campaign(campaign, seeds),
            args.ledger,
            workers=args.workers,
            threads=args.threads,
            on_result=record(path, campaign, args.ledger, args.threads),
            stored=stored_keys(load_reference(path)),
        )
    except KeyboardInterrupt:
        stored = load_reference(path) or empty_reference(campaign, args.threads)
        done = sum(map(len, stored["probes"].values()))
        print(
            f"interrupted: {done} probe(s) stored in {path.name}; resume with: python benchmarks/decide_reference.py "
            f"--ledger {args.ledger} --seeds {args.seeds}",
            file=sys.stderr,
        )
        raise SystemExit(130) from None
    wall = time.perf_counter() - start
    reference = load_reference(path) or empty_reference(campaign, args.threads)
    lacking = missing(reference, list(campaign.recipes))
    result = {
        "path": str(path),
        "key": reference["key"],
        "probes": counts,
        "wall_s": wall,
        "reference_s": reference_seconds(reference),
        "missing": lacking,
        "complete": not lacking,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{counts['planned']} probes planned, {counts['finished']} trained, {counts['skipped']} already in the "
        f"ledger, {counts['failed']} failed, in {wall / 60:.1f} min on {args.workers} workers x {args.threads} "
        f"thread(s); the reference's own time: {result['reference_s'] / 60:.1f} min of probe training"
    )
    if lacking:
        print(
            f"incomplete: {sum(map(len, lacking.values()))} probe(s) missing of {len(campaign.recipes)} recipes x "
            f"{REFERENCE_SEEDS} seeds; finish with: python benchmarks/decide_reference.py --ledger {args.ledger}"
        )
    else:
        print(f"complete: {len(campaign.recipes)} recipes x {REFERENCE_SEEDS} seeds")


if __name__ == "__main__":
    main()
