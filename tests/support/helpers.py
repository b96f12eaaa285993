"""Shared pieces of the tests that train the reference GPT on real text (the `text` fixture is in conftest)."""

from __future__ import annotations

import numpy as np
import torch

from yieldgate.probe.model import GPTConfig

CFG = GPTConfig(vocab_size=256, context=32, layers=2, width=64, heads=4)


def batch(
    text: np.ndarray, rng: np.random.Generator, n: int, t: int = CFG.context
) -> tuple[torch.Tensor, torch.Tensor]:
    """n random windows of byte-level text: inputs and next-token targets, (n, t) each."""
    starts = rng.integers(0, len(text) - t - 1, size=n)
    x = np.stack([text[s : s + t] for s in starts]).astype(np.int64)
    y = np.stack([text[s + 1 : s + t + 1] for s in starts]).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def stdlib_corpus(max_bytes: int):
    """Bytes of Python's standard-library modules: (train, held-out, modules used), split by module."""
    from yieldgate.data import corpus

    works = corpus.stdlib_works(max_bytes)
    train, held = corpus.split_by_work(works, held_out=0.1, seed=0)
    as_bytes = lambda ws: np.frombuffer("\n".join(w.text for w in ws).encode(), dtype=np.uint8)  # noqa: E731
    return as_bytes(train), as_bytes(held), len(works)


def shuffled(value, rng):
    """The same data with every mapping's keys in another order (`rng`: a random.Random)."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value
