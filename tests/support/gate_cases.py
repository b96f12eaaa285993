"""The gate's probe settings, shared by its tests (tests/integration/test_gate.py) and its benchmark
(benchmarks/bench_gate.py): the example policy, the two recipes, and the probe they are trained with.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from yieldgate.data.recipe import ResolvedRecipe, resolve
from yieldgate.manifest import parse_manifest
from yieldgate.probe.config import Faults, ProbeConfig

POLICY = Path(__file__).parents[2] / "examples" / "policy.yaml"
TOKENIZER = {"name": "bpe-512", "vocab_size": 512}
TWO = {
    "sources": [{"name": "shakespeare-modern", "weight": 0.6}, {"name": "milton", "weight": 0.4}],
    "tokenizer": TOKENIZER,
}
"""The clean recipe."""
ONE = {"sources": [{"name": "milton"}], "tokenizer": TOKENIZER}
"""Milton alone: the source the repeat fault shrinks to 1/40 of the budget."""


def probe_config(seed: int, tokens: int = 150_000, **faults: Any) -> ProbeConfig:
    """The gate's probe: ~31k parameters, 150k tokens in 147 steps of 16 x 64, 12 evaluations, one thread."""
    return ProbeConfig(
        tokens=tokens,
        seed=seed,
        layers=1,
        width=32,
        heads=2,
        evals=12,
        eval_sequences=32,
        threads=1,
        faults=Faults(**faults),
    )


def stall_config(seed: int) -> ProbeConfig:
    """A probe that stalls at a constant LR: 2 wide, so it learns all it can (the unigram statistics) by step ~50 of
    440, and the LR never decays. `diagnose` calls it `stalled`: schedule or data, undetermined."""
    return dataclasses.replace(
        probe_config(seed, tokens=450_000), width=2, heads=1, lr=1e-2, warmup_frac=0.02, decay_frac=0.0
    )


def resolve_recipe(recipe: dict[str, Any]) -> ResolvedRecipe:
    data = parse_manifest({"data": recipe}).data
    assert data is not None
    return resolve(data, seed=0, max_chars_per_source=600_000)
