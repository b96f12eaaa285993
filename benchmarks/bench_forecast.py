"""Is the forecast right? Real probes, each checked against the tranche it did not see.

Issue "Yield and honest comparison": fitted on the first 60% of a real probe's stable-phase evaluations,
the forecast's 80% interval must contain the measured gain of the next tranche in at least 8 of 10 seeds.
Each seed trains one probe (the built-in corpus: Shakespeare modern + Milton, BPE-512, 300k tokens, WSD
schedule, 20 evaluations), then `analysis.runs.forecast_check` fits, forecasts and compares.

    .venv/bin/python benchmarks/bench_forecast.py [--seeds 10] [--tokens 300000] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from yieldgate.analysis.runs import forecast_check
from yieldgate.data.recipe import resolve
from yieldgate.ledger import Ledger
from yieldgate.manifest import parse_manifest
from yieldgate.probe.config import ProbeConfig
from yieldgate.probe.trainer import train_probe

RECIPE = {
    "sources": [{"name": "shakespeare-modern", "weight": 0.6}, {"name": "milton", "weight": 0.4}],
    "tokenizer": {"name": "bpe-512", "vocab_size": 512},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=300_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.getLogger("yieldgate").setLevel(logging.ERROR)
    recipe = parse_manifest({"data": RECIPE}).data
    assert recipe is not None
    data = resolve(recipe, seed=0, max_chars_per_source=1_500_000)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-forecast-") as tmp:
        db = str(Path(tmp) / "f.db")
        for seed in range(args.seeds):
            start = time.perf_counter()
            train_probe(
                data,
                ProbeConfig(tokens=args.tokens, seed=seed, evals=20, eval_sequences=64, threads=2),
                run=f"seed{seed}",
                ledger=db,
            )
            with Ledger(db, readonly=True) as ledger:
                rows.append(
                    {"seed": seed, **forecast_check(ledger, f"seed{seed}"), "train_s": time.perf_counter() - start}
                )
    held = sum(r["held"] for r in rows)
    result = {
        "seeds": args.seeds,
        "tokens": args.tokens,
        "held": held,
        "target": "held in >= 8 of 10 seeds",
        "pass": held >= 0.8 * args.seeds,
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result))
        return
    table = Table(title=f"80% forecast interval vs the measured next-tranche gain, {args.tokens:,}-token probes")
    for column in ("seed", "fitted/stable evals", "at tokens", "forecast gain", "80% interval", "measured", "held"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            str(r["seed"]),
            f"{r['fitted']}/{r['stable']}",
            f"{r['at_tokens']:,.0f}",
            f"{r['forecast']:.4f}",
            f"[{r['low']:.4f}, {r['high']:.4f}]",
            f"{r['measured']:.4f}",
            "yes" if r["held"] else "no",
        )
    console = Console(width=120)
    console.print(table)
    console.print(f"{'PASS' if result['pass'] else 'FAIL'}  held in {held} of {args.seeds} seeds (target >= 8 of 10)")


if __name__ == "__main__":
    main()
