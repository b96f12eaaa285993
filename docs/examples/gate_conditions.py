"""The probes behind docs/gate.md's "Conditions the gate sets aside, and stages it holds": a campaign whose every probe
ran without a warm-up (two recipes: the clean two-source one, and Milton alone repeated for 40 epochs), and a stage
whose runs diverged (a NaN update applied at step 100). About a minute on 2 cores.

    python docs/examples/gate_conditions.py conditions.db
    yieldgate --ledger conditions.db gate cold/two --policy examples/policy.yaml
    yieldgate --ledger conditions.db gate 'diverged/s*' --policy examples/policy.yaml --strict
"""

from __future__ import annotations

import sys

from yieldgate.data.recipe import resolve
from yieldgate.ledger import Ledger
from yieldgate.manifest import parse_manifest
from yieldgate.probe.config import Faults, ProbeConfig
from yieldgate.probe.trainer import train_probe

TOKENIZER = {"name": "bpe-512", "vocab_size": 512}
RECIPES = {
    "two": {"sources": [{"name": "shakespeare-modern", "weight": 0.6}, {"name": "milton", "weight": 0.4}]},
    "repeat40": {"sources": [{"name": "milton"}]},
}


def probe(seed: int, **faults: object) -> ProbeConfig:
    """The gate's probe (tests/support/gate_cases.py): ~31k parameters, 150k tokens, 12 evaluations."""
    return ProbeConfig(
        tokens=150_000,
        seed=seed,
        layers=1,
        width=32,
        heads=2,
        evals=12,
        eval_sequences=32,
        threads=1,
        faults=Faults(**faults),  # type: ignore[arg-type]
    )


def main(ledger: str) -> None:
    resolved = {
        name: resolve(
            parse_manifest({"data": {**r, "tokenizer": TOKENIZER}}).data, seed=0, max_chars_per_source=600_000
        )
        for name, r in RECIPES.items()
    }
    for seed in range(3):
        for name, trained in resolved.items():
            extra = {"repeat_source": ("milton", 40.0)} if name == "repeat40" else {}
            run = f"cold/{name}/s{seed}"
            train_probe(trained, probe(seed, no_warmup=True, **extra), run=run, ledger=ledger)
            with Ledger(ledger) as led:
                led.set_meta(run, "probe", {"campaign": "cold", "recipe": name, "seed": seed, "tokens": 150_000})
        train_probe(resolved["two"], probe(seed, diverge_at_step=100), run=f"diverged/s{seed}", ledger=ledger)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "conditions.db")
