"""The stage gate's known answers, on real probes, across seed groups, under `examples/policy.yaml`.

Each seed trains three probes of the reference GPT (1 layer x 32 wide, ~31k parameters, 150k tokens, one
thread): the two-source recipe (Shakespeare modern 0.6 + Milton 0.4), Milton alone repeated for 40 epochs
(`Faults(repeat_source=("milton", 40))`), and the two-source recipe at LR x30 (diagnosed, so its schedule
finding is open). Then it gates every window of three consecutive seeds (clean: approve; repeated: reject),
every single clean seed (hold: one seed) and every pair of LR x30 seeds (hold: open schedule diagnosis), and
prints the forecast yield per billion tokens and its interval beside the threshold (and the power law's own
interval, before the measured recent yield caps it). Then the new-hardware
exception's curve check: each clean and each LR x30 seed from 3 on against the clean seeds 0-2 as the reference
(the manifests are the same: LR x30 is injected, not declared), at the aligned point nearest its limit.

    .venv/bin/python benchmarks/bench_gate.py [--seeds 6] [--json]

`tests/integration/test_gate.py` runs seeds 0-2 of the same probes.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the settings live with the tests that use them

from tests.support.gate_cases import ONE, POLICY, TWO, probe_config, resolve_recipe  # noqa: E402


def main() -> None:
    from yieldgate.analysis.diagnose import diagnose
    from yieldgate.gate.gate import gate
    from yieldgate.gate.policy import load_policy, parse_policy
    from yieldgate.ledger import Ledger
    from yieldgate.probe.trainer import train_probe

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.getLogger("yieldgate").setLevel(logging.ERROR)
    policy = load_policy(POLICY)
    two, one = resolve_recipe(TWO), resolve_recipe(ONE)
    seeds = range(args.seeds)
    rows, curves = [], []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        db = str(Path(folder) / "gate.db")
        for seed in seeds:
            train_probe(two, probe_config(seed), run=f"clean/s{seed}", ledger=db)
            train_probe(one, probe_config(seed, repeat_source=("milton", 40.0)), run=f"repeat40/s{seed}", ledger=db)
            train_probe(two, probe_config(seed, lr_multiplier=30.0), run=f"lr30/s{seed}", ledger=db)
        with Ledger(db) as ledger:
            for seed in seeds:
                diagnose(ledger, f"lr30/s{seed}")
            cases = [("clean, 3 seeds", "approve", f"clean/s[{s}{s + 1}{s + 2}]") for s in seeds[:-2]]
            cases += [("repeated 40 epochs, 3 seeds", "reject", f"repeat40/s[{s}{s + 1}{s + 2}]") for s in seeds[:-2]]
            cases += [("clean, 1 seed", "hold", f"clean/s{s}") for s in seeds]
            cases += [("LR x30, diagnosed, 2 seeds", "hold", f"lr30/s[{s}{s + 1}]") for s in seeds[:-1:2]]
            for case, expected, target in cases:
                d = gate(ledger, target, policy)
                fc = d.evidence["forecast"]
                rows.append(
                    {
                        "case": case,
                        "target": target,
                        "expected": expected,
                        "decision": d.decision,
                        "yield_per_btok": fc["yield_per_btok"],
                        "interval": fc["interval"],
                        "power_law_interval": fc["forecast"]["interval"],
                        "threshold": policy.requirements.min_yield_per_btok,
                        "rationale": d.rationale,
                    }
                )
            hardware = parse_policy(
                {**policy.model_dump(mode="json"), "exception": {"kind": "new_hardware", "reference": "clean/s[012]"}}
            )
            for target in [f"{kind}/s{s}" for kind in ("clean", "lr30") for s in seeds[3:]]:
                exc = gate(ledger, target, hardware).evidence["exception"]
                judged = [
                    p for p in exc["curve"]["points"] if not p["identical_by_construction"]
                ]  # the first: equal by design
                worst = max(judged, key=lambda p: abs(p["diff"]) / p["allowed"])
                curves.append(
                    {
                        "target": target,
                        "expected": target.startswith("clean"),
                        "applies": exc["applies"],
                        "tokens": worst["tokens"],
                        "departure": worst["diff"],
                        "allowed": worst["allowed"],
                    }
                )
    elapsed = time.perf_counter() - start
    if args.json:
        print(json.dumps({"decisions": rows, "exception": curves}, indent=2))
        return
    table = Table(
        "case",
        "target",
        "decision",
        "yield / B tokens",
        f"{policy.requirements.level:.0%} interval",
        "power law alone",
        title=f"{len(rows)} decisions on {3 * args.seeds} real probes in {elapsed:.0f} s, threshold "
        f"{policy.requirements.min_yield_per_btok:g} per billion tokens",
    )
    for r in rows:
        mark = "" if r["decision"] == r["expected"] else f" (expected {r['expected']})"
        table.add_row(
            r["case"],
            r["target"],
            r["decision"] + mark,
            f"{r['yield_per_btok']:,.0f}",
            f"[{r['interval'][0]:,.0f}, {r['interval'][1]:,.0f}]",
            f"[{r['power_law_interval'][0]:,.0f}, {r['power_law_interval'][1]:,.0f}]",
        )
    Console(width=150).print(table)
    right = sum(r["decision"] == r["expected"] for r in rows)
    print(f"{right}/{len(rows)} decisions as expected")
    table = Table(
        "target",
        "exception",
        "at tokens",
        "departure",
        "allowed",
        "departure / allowed",
        title="the new-hardware exception's curve check against clean/s[012], at the point nearest its limit",
    )
    for c in curves:
        mark = "" if c["applies"] == c["expected"] else " (unexpected)"
        table.add_row(
            c["target"],
            ("holds" if c["applies"] else "ends") + mark,
            f"{c['tokens']:,.0f}",
            f"{c['departure']:+.4f}",
            f"±{c['allowed']:.4f}",
            f"{abs(c['departure']) / c['allowed']:.2f}",
        )
    Console(width=150).print(table)


if __name__ == "__main__":
    main()
