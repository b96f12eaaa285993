"""A recipe's training stream as a PyTorch `IterableDataset`, for a team's own training script: the windows the probe
trainer draws (`data.sampler.WindowStream` over `recipe.resolve`'s token arrays), in batches, with the tokens each
batch took from each source for `Tracker.step(sources=...)`.

    from yieldgate.data import open_recipe

    data = open_recipe("recipe.yaml", tokens=200_000, context=64, batch_size=16, seed=0)
    for batch in data:                       # data.steps batches, then the stream ends
        logits, loss = model(batch["input_ids"], batch["labels"])
        ...
        tr.step(tokens=batch["input_ids"].numel(), loss=loss, sources=batch["sources"])

Iterating again starts the stream again, the same for the same arguments. Read it in the training process (a
`DataLoader` with `batch_size=None` and no workers: every worker would draw the whole stream). `data.sequences()` is
the same stream a window at a time, for a Hugging Face `Trainer`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from yieldgate.data.recipe import ResolvedRecipe, resolve
from yieldgate.data.sampler import WindowStream
from yieldgate.data.supply import recipe_weights
from yieldgate.errors import InputError
from yieldgate.manifest import Recipe, load_recipe

__all__ = ["RecipeDataset", "open_recipe"]


class RecipeDataset(IterableDataset):
    """`steps` batches of a resolved recipe's stream, each a dict: `input_ids` and `labels` ((batch_size, context)
    int64, `labels` the next tokens, as nanoGPT's x and y; a Hugging Face causal LM that shifts its labels itself
    takes `labels=input_ids`), `sources` (tokens of this batch per source) and `sample_ids` (for the Tracker's
    stream-duplicate monitor)."""

    def __init__(self, data: ResolvedRecipe, *, tokens: int, context: int, batch_size: int, seed: int) -> None:
        for name, value in (("tokens", tokens), ("context", context), ("batch_size", batch_size)):
            if value < 1:
                raise InputError(f"{name} must be >= 1, got {value}", parameter=name)
        self.data = data
        self.context, self.batch_size, self.seed = context, batch_size, seed
        self.steps = math.ceil(tokens / (batch_size * context))
        """Batches in the stream: the token budget in whole batches, as the probe trainer counts its steps."""
        self._stream()  # a recipe the stream cannot draw from fails here, not at the first batch

    @property
    def recipe(self) -> Recipe:
        """The recipe with its accounting (each source's accepted and unique tokens, the tokenizer's content hash):
        what a run's manifest records as `data`."""
        return self.data.recipe

    @property
    def tokenizer(self) -> Any:
        """The recipe's tokenizer (a `tokenizers.Tokenizer`)."""
        return self.data.tokenizer

    @property
    def weights(self) -> dict[str, float]:
        """The recipe's weights, normalised (`data.supply.recipe_weights`)."""
        return recipe_weights(self.data.recipe)

    def _stream(self) -> WindowStream:
        return WindowStream(
            self.data,
            context=self.context,
            batch_size=self.batch_size,
            sequences=self.steps * self.batch_size,
            seed=self.seed,
        )

    def __len__(self) -> int:
        return self.steps

    def sequences(self) -> IterableDataset:
        """The same stream a window at a time, as a Hugging Face `Trainer` takes a dataset (its `batch_size` sequences
        a step give this stream's batches): dicts of `input_ids` and `labels`, both the window's context + 1 tokens
        (the model shifts its labels: context predictions per window, as here; it needs context + 1 positions)."""
        return _Sequences(self)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        worker = get_worker_info()
        if worker is not None and worker.num_workers > 1:
            raise InputError(
                f"a recipe's stream is one stream: read it with num_workers=0 or 1, not {worker.num_workers} "
                "(the DataLoader's workers)"
            )
        stream = self._stream()
        for _ in range(self.steps):
            rows, counts, ids = stream.draw()
            arr = torch.from_numpy(rows.astype(np.int64))
            yield {"input_ids": arr[:, :-1], "labels": arr[:, 1:], "sources": counts, "sample_ids": ids}


class _Sequences(IterableDataset):
    """`RecipeDataset.sequences`."""

    def __init__(self, batches: RecipeDataset) -> None:
        self.batches = batches

    def __len__(self) -> int:
        return self.batches.steps * self.batches.batch_size

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for batch in self.batches:
            windows = torch.cat([batch["input_ids"], batch["labels"][:, -1:]], dim=1)  # (batch_size, context + 1)
            for row in windows:
                yield {"input_ids": row, "labels": row}


def open_recipe(
    recipe: str | Path | Recipe,
    *,
    tokens: int,
    context: int = 64,
    batch_size: int = 16,
    seed: int = 0,
    held_out: float = 0.1,
    max_chars_per_source: int | None = None,
    stdlib_bytes: int = 2_000_000,
    cache_dir: str | Path | None = None,
) -> RecipeDataset:
    """The stream of `recipe` (a recipe file or a Recipe) for a run of `tokens` tokens: what the probe trainer draws
    for a probe of that budget, `context`, `batch_size` and `seed`. `held_out`, `max_chars_per_source` and
    `stdlib_bytes` are a campaign's `data:` settings (the same defaults); the held-out split is a campaign's."""
    parsed = recipe if isinstance(recipe, Recipe) else load_recipe(recipe)
    data = resolve(
        parsed,
        held_out=held_out,
        seed=0,  # a campaign resolves every probe's recipe with seed 0: the probes differ by seed in training only
        stdlib_bytes=stdlib_bytes,
        max_chars_per_source=max_chars_per_source,
        cache_dir=cache_dir,
    )
    return RecipeDataset(data, tokens=tokens, context=context, batch_size=batch_size, seed=seed)
