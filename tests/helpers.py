"""Shared pieces of the tests that train the reference GPT on real text (the `text` fixture is in conftest)."""

from __future__ import annotations

import numpy as np
import torch

from yieldgate.probe.model import GPTConfig

CFG = GPTConfig(vocab_size=256, context=32, layers=2, width=64, heads=4)


def batch(text: np.ndarray, rng: np.random.Generator, n: int, t: int = CFG.context) -> tuple[torch.Tensor, torch.Tensor]:
    """n random windows of byte-level text: inputs and next-token targets, (n, t) each."""
    starts = rng.integers(0, len(text) - t - 1, size=n)
    x = np.stack([text[s : s + t] for s in starts]).astype(np.int64)
    y = np.stack([text[s + 1 : s + t + 1] for s in starts]).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)
