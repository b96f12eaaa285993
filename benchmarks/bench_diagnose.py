"""The fault-injection proof of `yieldgate diagnose`: short real probe runs, each with one fault injected
through the trainer's fault hooks, diagnosed and scored.

    python benchmarks/bench_diagnose.py                 # score seeds 100.. (10 per fault, 20 clean)
    python benchmarks/bench_diagnose.py --seeds 0 1 2   # the calibration seeds the thresholds were set on
    python benchmarks/bench_diagnose.py --conditions    # only the synthetic table and the real cases (a minute)
    python benchmarks/bench_diagnose.py --conditions --synthetic 0   # only the real cases

Prints the confusion matrix (rows: injected fault; columns: the top cause found, or none), each fault's hit
rate, a per-cause table (runs labelled with the cause, found as top cause, missed, and false positives: runs
whose top cause it was but whose fault was another), the spike-localisation error, and the false-positive table
of the schedule detector on synthetic fault-free runs (50 flat-with-noise, 50 healthy power-law; a schedule
finding at confidence >= 0.5 on at most 5% of each is the bar), the lead of the (heuristic) GNS early warning
over the validation loss's degradation on the faulted probes, and the real cases: public training logs with known
answers (tests/data/real, provenance in SOURCES.md), imported into a temporary ledger and diagnosed, with a
confusion table of the answer expected against the top cause found.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the cases live with the tests that check them

from tests.support.diagnose_cases import (  # noqa: E402
    CONDITIONS,
    _data,
    _job,
    false_positives,
    gns_lead_times,
    real_cases,
    score,
)


def print_false_positives(fp: dict[str, Any]) -> None:
    """The synthetic false-positive table: schedule findings at confidence >= 0.5, and every cause found there."""
    print("synthetic fault-free runs: schedule findings at confidence >= 0.5 (the bar: at most 5%)")
    print("kind".ljust(12) + "runs  schedule   rate  too-high+too-low  not_run+found  causes found (>= 0.5)")
    for kind, row in fp.items():
        causes = ", ".join(f"{c} {n}" for c, n in sorted(row["causes"].items())) or "-"
        print(
            kind.ljust(12)
            + f"{row['runs']:>4}  {row['schedule']:>8}  {row['rate']:>5.0%}  {row['too_high_and_too_low']:>16}"
            f"  {row['not_run_and_found']:>13}  {causes}"
        )
    print()


def print_gns_leads(g: dict[str, Any]) -> None:
    print(
        f"\nGNS early warning (a heuristic): fired on {g['fired']}/{g['faulted']} faulted probes "
        f"({', '.join(f'{c} {n}' for c, n in sorted(g['by_condition'].items())) or '-'}) "
        f"and {g['clean_fired']}/{g['clean']} clean ones"
    )
    if g["leads"]:
        print(
            f"  lead over the validation loss's degradation (1% above its best), where both happened "
            f"({g['with_val_degradation']} runs): median {g['median_lead']:.0f} steps, {g['ahead']} ahead of it, "
            f"leads {g['leads']}"
        )
    print(f"  fired without the validation loss degrading: {g['without_val_degradation']}")


# -- real public logs with known answers --------------------------------------------------------------------


def print_real_cases(rows: list[dict[str, Any]]) -> None:
    labels = sorted({r["expected"] for r in rows} | {r["found"] for r in rows})
    print(
        "real public logs with known answers (rows: the answer expected; columns: the top cause found above low "
        "confidence)"
    )
    print("expected".ljust(18) + " ".join(c[:10].rjust(10) for c in labels))
    for expected in sorted({r["expected"] for r in rows}):
        mine = [r for r in rows if r["expected"] == expected]
        print(expected.ljust(18) + " ".join(str(sum(r["found"] == c for r in mine)).rjust(10) for c in labels))
    print(
        f"checks passed {sum(r['passed'] for r in rows)}/{len(rows)}; top cause as expected "
        f"{sum(r['agrees'] for r in rows)}/{len(rows)}"
    )
    for r in rows:
        print(
            f"  check {'pass' if r['passed'] else 'FAIL'}, top cause {'agrees' if r['agrees'] else 'DISAGREES'}: "
            f"{r['case']}: {r['checked']}; top cause {r['found']} (expected {r['expected']}); second-half "
            f"tranches within noise: {r['second_half_within_noise']}"
        )
        print(f"        findings: {'; '.join(r['findings']) or 'none'}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="*", help="seeds to run (default: 100-109, clean 100-119)")
    parser.add_argument(
        "--conditions", nargs="*", default=list(CONDITIONS), help="conditions to run (none: only the synthetic table)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--synthetic", type=int, default=50, help="synthetic runs per kind for the false-positive table"
    )
    parser.add_argument("--no-real", action="store_true", help="skip the real cases")
    args = parser.parse_args()
    if args.synthetic:
        print_false_positives(false_positives(args.synthetic))
    if not args.no_real:
        print_real_cases(real_cases())
    if not args.conditions:
        return
    jobs = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.conditions:
            seeds = args.seeds if args.seeds is not None else list(range(100, 120 if name == "clean" else 110))
            jobs += [(name, seed, folder) for seed in seeds]
        start = time.perf_counter()
        _data()  # resolve (and cache the tokenizer) once before the workers start
        with ProcessPoolExecutor(args.workers) as pool:
            results = list(pool.map(_job, jobs))
        elapsed = time.perf_counter() - start
    s = score(results)
    causes = sorted({c for row in s["matrix"].values() for c in row} | {c.cause or "none" for c in CONDITIONS.values()})
    print(f"{len(results)} real probe runs in {elapsed:.0f} s ({args.workers} workers)")
    print("columns: the top cause found above low confidence: " + ", ".join(f"{c[:6]}={c}" for c in causes) + "\n")
    print("injected fault".ljust(18) + "expected".ljust(22) + " ".join(c[:6].rjust(6) for c in causes) + "   hits")
    for name, row in s["matrix"].items():
        if not sum(row.values()):
            continue
        expected = CONDITIONS[name].cause or "none"
        print(
            name.ljust(18)
            + expected.ljust(22)
            + " ".join(str(row.get(c, 0)).rjust(6) for c in causes)
            + f"   {sum(row.values()) * s['hits'][name]:.0f}/{sum(row.values())}"
        )
    print("\nper cause (top cause above low confidence)".ljust(40) + "labelled  found  missed  false+")
    for cause in sorted({c.cause or "none" for c in CONDITIONS.values()}):
        labelled = [n for n, c in CONDITIONS.items() if (c.cause or "none") == cause]
        total = sum(sum(s["matrix"][n].values()) for n in labelled)
        found = sum(s["matrix"][n].get(cause, 0) for n in labelled)
        false = sum(s["matrix"][n].get(cause, 0) for n in s["matrix"] if n not in labelled)
        if total or false:
            print(f"  {cause}".ljust(40) + f"{total:>8} {found:>6} {total - found:>7} {false:>7}")
    print_gns_leads(gns_lead_times(results))
    loc = s["localisation"]
    if loc:
        within = sum(d <= 10 for d in loc)
        print(f"\nspike localisation: {within}/{len(loc)} within 10 steps of the injection; errors {sorted(loc)}")
    for r in results:
        top = next((f for f in r["findings"] if f["confidence"] > 0.3), None)
        wanted_cause = CONDITIONS[r["condition"]].cause
        if (top["cause"] if top else None) != wanted_cause:
            print(
                f"miss: {r['run']}: "
                + "; ".join(f"{f['cause']}/{f['detector']} {f['confidence']}@{f['start_step']}" for f in r["findings"]),
                file=sys.stderr,
            )


if __name__ == "__main__":
    main()
