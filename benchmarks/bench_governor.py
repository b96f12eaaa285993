"""The gate inside the run (issue #48), measured on real tiny trainings of the built-in corpus
(`tests/support/governed.py`: the reference GPT at ~31k parameters, 450k tokens planned, 30 evaluations, a plain
loop on one thread), under `docs/examples/governed-policy.yaml` (stages at 150k, 225k, 300k and 450k tokens, a bar
of 250 per billion tokens):

1. the exhaustion case (Milton cut to what the run passes 40 times) over 5 seeds, each trained governed and in full
   (no policy): the share of the planned tokens the governed run did not train (counted from where its loop
   stopped), its last held-out loss against the full run's last, in units of the full run's evaluation noise
   (`fit.learning_noise`: a held run may end above the full run's loss by at most 2 of them), and whether
   `gate(RUN, at_step=)` offline reaches every decision the governor stored, and `yieldgate gate RUN` the last;
2. the governor's cost per evaluation (`Governor.evaluate`, on the writer's thread): median over every evaluation of
   the governed runs, and over the boundary evaluations alone, where the gate's whole reading runs;
3. the Tracker's per-step cost with a policy against without: two copies of the model trained in alternating blocks
   of 20 steps (bench_tracker.py's method), one under a governed Tracker and one under a plain one, both evaluated
   every 15 steps on the healthy recipe (the governor decides at every boundary it crosses); the cost is the median
   over block pairs of the governed block's wall time over the plain one's, less 1.

Targets: >= 30% of the planned tokens saved with the held run's last loss within 2σ of the full run's; the governor
<= 50 ms median per evaluation; the per-step cost with a policy within 5% of without; every live decision matched.

    .venv/bin/python benchmarks/bench_governor.py [--seeds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the cases live with the tests that use them

from tests.support import gate_cases  # noqa: E402
from tests.support import governed as g  # noqa: E402

from yieldgate import api  # noqa: E402
from yieldgate.analysis.fit import learning_noise  # noqa: E402
from yieldgate.gate import live  # noqa: E402
from yieldgate.gate.gate import gate  # noqa: E402
from yieldgate.gate.policy import load_policy  # noqa: E402
from yieldgate.ledger import Ledger  # noqa: E402
from yieldgate.probe.config import Faults  # noqa: E402
from yieldgate.probe.model import GPT, GPTConfig  # noqa: E402
from yieldgate.track import Tracker, TrackerConfig  # noqa: E402

POLICY = Path(__file__).resolve().parents[1] / "docs" / "examples" / "governed-policy.yaml"
EXHAUSTED = g.Case(recipe=gate_cases.ONE, faults=Faults(repeat_source=("milton", 40.0)))


class Timed:
    """`Governor.evaluate`'s wall time per call, and whether the call made the gate's whole reading."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, bool]] = []
        self.original = live.Governor.evaluate

    def __enter__(self) -> Timed:
        timed = self

        def evaluate(governor: live.Governor, ledger: Ledger, run: str, step: int) -> Any:
            stage = governor.stage
            t0 = time.perf_counter()
            out = timed.original(governor, ledger, run, step)
            timed.calls.append((time.perf_counter() - t0, governor.stage != stage or out is not None))
            return out

        live.Governor.evaluate = evaluate  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: Any) -> None:
        live.Governor.evaluate = self.original  # type: ignore[method-assign]


def last_loss(led: Ledger, run: str) -> float:
    evals = led.evals(run)
    return float(evals[(evals["task"] == "val") & (evals["metric"] == "loss")]["value"].iloc[-1])


def exhaustion(seeds: int, tmp: Path) -> list[dict[str, Any]]:
    policy = load_policy(POLICY)
    db = tmp / "exhaustion.db"
    rows = []
    for seed in range(seeds):
        case = g.Case(**{**EXHAUSTED.__dict__, "seed": seed})
        held = g.train(case, run=f"governed/s{seed}", ledger=db, policy=POLICY)
        g.train(case, run=f"full/s{seed}", ledger=db)  # no policy: no governor, nothing timed
        with Ledger(db, readonly=True) as led:
            full = led.evals(f"full/s{seed}")
            full = full[(full["task"] == "val") & (full["metric"] == "loss")]
            sigma, _, _ = learning_noise(
                full["tokens"].to_numpy(dtype=float),
                full["value"].to_numpy(dtype=float),
                full["step"].to_numpy(),
                led.steps(f"full/s{seed}"),
            )
            stored = led.decisions(held.run).to_dict("records")
            matched = [
                (d.decision, d.next_stage, d.rationale) == (row["decision"], row["stage"], row["rationale"])
                for row in stored
                for d in [gate(led, held.run, policy, at_step=_step_of(led, held.run, row))]
            ]
            tokens = float(led.steps(held.run)["tokens"].iloc[-1])
            held_loss, full_loss = last_loss(led, held.run), last_loss(led, f"full/s{seed}")
        offline = api.gate(held.run, POLICY, ledger=str(db), record=False)
        last = stored[-1] if stored else None
        rows.append(
            {
                "seed": seed,
                "held": held.stopped,
                "decision": None if last is None else f"{last['decision']} {last['stage']}",
                "held_at_tokens": None if last is None else last["evidence"]["reached_tokens"],
                "trained_tokens": tokens,
                "saved_share": 1 - tokens / policy.stages[-1].token_budget,
                "held_loss": held_loss,
                "full_loss": full_loss,
                "sigma": sigma,
                "excess_sigmas": (held_loss - full_loss) / sigma,
                "live_decisions": len(stored),
                "matched_at_step": sum(matched),
                "offline_matches_last": last is not None
                and (offline.decision, offline.next_stage) == (last["decision"], last["stage"]),
            }
        )
    return rows


def _step_of(led: Ledger, run: str, row: dict[str, Any]) -> int:
    """The step of the evaluation a stored decision was made at (the run's meta lists the governor's decisions)."""
    (step,) = [d["step"] for d in led.meta(run)["governor"]["decisions"] if d["id"] == row["id"]]
    return int(step)


def per_step_cost(blocks: int, tmp: Path, block: int = 20) -> dict[str, float]:
    """Alternating blocks of `block` steps on two copies of one model, one under a governed Tracker and one under a
    plain one (both evaluated every 15 steps): the median over pairs of governed / plain block time, less 1."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    case = g.Case(tokens=(blocks + 1) * block * g.CONTEXT * 16)
    cfg, steps, per_step, rows, held, vocab = g.corpus(case)
    models = [GPT(GPTConfig(vocab_size=vocab, context=g.CONTEXT, layers=1, width=32, heads=2)) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    opts = [torch.optim.AdamW(m.parameters(), lr=3e-3, weight_decay=0.0) for m in models]
    stages = tuple(range(100_000, steps * per_step + 100_000, 100_000))
    every = g.policy(tmp, bar=250, stages=stages, on_hold="warn")  # warn: it decides at every boundary
    batches = torch.stack(rows).view(steps, cfg.batch_size, -1)
    val = torch.stack(held)
    config = TrackerConfig(flush_every_s=1.0)
    ratios: list[float] = []
    with (
        Tracker("plain", ledger=tmp / "cost.db", config=config) as plain,
        Tracker("governed", ledger=tmp / "cost.db", config=config, policy=every) as governed,
    ):
        trackers = [governed, plain]
        done = [0, 0]
        for pair in range(blocks + 1):
            times = [0.0, 0.0]
            for i in (0, 1) if pair % 2 else (1, 0):  # each goes first half the time
                t0 = time.perf_counter()
                for _ in range(block):
                    done[i] += 1
                    x = batches[done[i] - 1]
                    opts[i].zero_grad(set_to_none=True)
                    _, loss = models[i](x[:, :-1], x[:, 1:])
                    loss.backward()
                    opts[i].step()
                    trackers[i].step(tokens=per_step, samples=cfg.batch_size, loss=loss.detach())
                    if done[i] % 15 == 0:
                        with torch.no_grad():
                            trackers[i].eval({"val/loss": models[i](val[:, :-1], val[:, 1:])[1].detach()})
                times[i] = time.perf_counter() - t0
            if pair:  # the first pair warms up allocator, caches and the Trackers' first flush
                ratios.append(times[0] / times[1] - 1.0)
    with Ledger(tmp / "cost.db", readonly=True) as led:
        decisions = len(led.decisions("governed"))
    return {
        "cost_median": statistics.median(ratios),
        "cost_mean": statistics.fmean(ratios),
        "pairs": len(ratios),
        "decisions": decisions,
    }


def render(result: dict[str, Any]) -> None:
    console = Console(width=120)
    table = Table(title=f"exhaustion over {len(result['seeds'])} seeds under {POLICY.name}")
    for col in (
        "seed",
        "decision",
        "held at",
        "trained",
        "saved",
        "held loss",
        "full loss",
        "σ",
        "excess / σ",
        "live decisions matched",
    ):
        table.add_column(col, justify="right")
    for r in result["seeds"]:
        table.add_row(
            str(r["seed"]),
            r["decision"] or "not held",
            "-" if r["held_at_tokens"] is None else f"{r['held_at_tokens']:,.0f}",
            f"{r['trained_tokens']:,.0f}",
            f"{r['saved_share']:.0%}",
            f"{r['held_loss']:.3f}",
            f"{r['full_loss']:.3f}",
            f"{r['sigma']:.3f}",
            f"{r['excess_sigmas']:+.1f}",
            f"{r['matched_at_step']}/{r['live_decisions']}" + (" + last offline" if r["offline_matches_last"] else ""),
        )
    console.print(table)
    ev = result["evaluations"]
    cost = result["per_step"]
    console.print(
        f"governor per evaluation: median {ev['median_ms']:.1f} ms over {ev['n']} evaluations (target <= 50 ms); "
        f"at the {ev['boundary_n']} boundary evaluations median {ev['boundary_median_ms']:.0f} ms, "
        f"max {ev['max_ms']:.0f} ms"
    )
    console.print(
        f"per-step cost with a policy: {cost['cost_median']:+.1%} median ({cost['cost_mean']:+.1%} mean) over "
        f"{cost['pairs']} block pairs, {cost['decisions']} decisions made (target within 5%)"
    )
    seeds = result["seeds"]
    ok = [
        ("saved >= 30%", all(r["saved_share"] >= 0.3 for r in seeds)),
        ("held loss within 2σ", all(r["excess_sigmas"] <= 2 for r in seeds)),
        ("governor <= 50 ms median", ev["median_ms"] <= 50),
        ("per-step cost within 5%", abs(cost["cost_median"]) <= 0.05),
        (
            "offline matches every live decision",
            all(r["matched_at_step"] == r["live_decisions"] and r["offline_matches_last"] for r in seeds),
        ),
    ]
    console.print("; ".join(f"{name}: {'met' if met else 'NOT met'}" for name, met in ok))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=30, help="block pairs of the per-step cost")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-governor-") as tmp, Timed() as timed:
        seeds = exhaustion(args.seeds, Path(tmp))
        calls = list(timed.calls)
        per_step = per_step_cost(args.blocks, Path(tmp))
    ms = np.array([c[0] for c in calls]) * 1e3
    boundary = np.array([c[0] for c in calls if c[1]]) * 1e3
    result = {
        "seeds": seeds,
        "evaluations": {
            "n": len(ms),
            "median_ms": float(np.median(ms)),
            "boundary_n": len(boundary),
            "boundary_median_ms": float(np.median(boundary)) if len(boundary) else float("nan"),
            "max_ms": float(ms.max()),
        },
        "per_step": per_step,
        "seconds": time.time() - t0,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        render(result)
        print(f"{result['seconds']:.0f} s")


if __name__ == "__main__":
    main()
