"""The training stream of a resolved recipe: windows of context + 1 tokens at fixed offsets of each source, sources
drawn by the recipe's weights, in its curriculum's order. Pure numpy: the probe trainer's sampler
(`probe.parts.Sampler`) and a team's `open_recipe` dataset (`data.torch_dataset`) draw this one stream.

For a seed, the stream is fixed: one generator (`numpy.random.default_rng(seed)`) first permutes each source's
windows (in the recipe's order of sources), then picks each sequence's source, so two readers with the same
arguments draw the same windows in the same order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from yieldgate.data.recipe import ResolvedRecipe
from yieldgate.errors import InputError

__all__ = ["WindowStream"]


class WindowStream:
    """Windows of `context` + 1 tokens of each source of `data`; `sequences`: the sequences the run draws in all (a
    staged curriculum's `until_share` is a share of them).

    `in_order` presents each source's windows in order, sources one after another; `end_weights` are weights the
    mixture creeps to, linearly, by the end of the run; `loop_windows` draws only each source's first N windows,
    looping. All three are off for a recipe's own stream (the probe's faults set them)."""

    def __init__(
        self,
        data: ResolvedRecipe,
        *,
        context: int,
        batch_size: int,
        sequences: int,
        seed: int,
        in_order: bool = False,
        end_weights: Mapping[str, float] | None = None,
        loop_windows: int | None = None,
    ) -> None:
        self.context, self.batch_size, self.loop_windows = context, batch_size, loop_windows
        self.rng = np.random.default_rng(seed)
        self.names = self.usable(data, context)
        if not self.names:
            raise InputError(f"no source has more than {context + 1} training tokens")
        self.tokens = {n: data.sources[n].train for n in self.names}
        weights = np.array([data.sources[n].weight for n in self.names], dtype=float)
        self.p = weights / weights.sum()
        self.p_end = self.p
        if end_weights is not None:
            end = np.array([end_weights.get(n, 0.0) for n in self.names], dtype=float)
            self.p_end = end / end.sum()
        self.windows: dict[str, np.ndarray] = {}
        for n in self.names:
            count = (len(self.tokens[n]) - 1) // context
            self.windows[n] = np.arange(count) if in_order else self.rng.permutation(count)
        self.cursor = dict.fromkeys(self.names, 0)
        self.total = sequences
        self.drawn = 0
        curriculum = data.recipe.curriculum
        self.ordered = in_order or curriculum.kind == "ordered_by_source"
        # Staged curriculum: (sequences drawn at which the stage ends, source probabilities of the stage).
        self.stages = []
        for stage in curriculum.stages if curriculum.kind == "staged" else []:
            w = np.array([stage.weights.get(n, 0.0) for n in self.names], dtype=float)
            if w.sum() <= 0:
                raise InputError(
                    f"curriculum stage ending at {stage.end(self.total * context):,.0f} tokens gives no weight "
                    f"to any source with data ({', '.join(self.names)})"
                )
            self.stages.append((stage.end(self.total * context) / context, w / w.sum()))

    @staticmethod
    def usable(data: ResolvedRecipe, context: int) -> list[str]:
        """The sources of `data` with more than one window of training tokens: those the stream draws from."""
        return [n for n, s in data.sources.items() if len(s.train) > context + 1]

    def _source(self) -> int:
        if self.ordered:  # sources one after another, each for its share of the budget
            edges = np.cumsum(self.p) * self.total
            return min(int(np.searchsorted(edges, self.drawn, side="right")), len(self.names) - 1)
        frac = min(self.drawn / self.total, 1.0)  # a cooldown continuing the probe draws past its budget
        p = (1.0 - frac) * self.p + frac * self.p_end  # the recipe's weights, unless a drift fault creeps away
        if self.stages:  # the stage the stream is in; after the last one, the recipe's weights (as `plan` counts)
            p = next((w for end, w in self.stages if self.drawn < end), p)
        return int(self.rng.choice(len(self.names), p=p))

    def state(self) -> dict[str, Any]:
        """Where the stream stands: the generator's state, each source's cursor and the sequences drawn."""
        return {"rng": self.rng.bit_generator.state, "cursor": dict(self.cursor), "drawn": self.drawn}

    def load_state(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.cursor = dict(state["cursor"])
        self.drawn = int(state["drawn"])

    def draw(self) -> tuple[np.ndarray, dict[str, int], list[int]]:
        """The next batch: (rows (batch_size, context + 1) of token ids, tokens per source, sample ids). A sample id
        is the source's index (high 32 bits) and the window's (low 32 bits), for the stream-duplicate monitor."""
        t = self.context
        rows, counts, ids = [], dict.fromkeys(self.names, 0), []
        for _ in range(self.batch_size):
            k = self._source()
            name = self.names[k]
            order = self.windows[name]
            limit = min(len(order), self.loop_windows or len(order))
            w = int(order[self.cursor[name] % limit])
            self.cursor[name] += 1
            self.drawn += 1
            rows.append(self.tokens[name][w * t : w * t + t + 1])
            counts[name] += t
            ids.append(k << 32 | w)
        return np.stack(rows), counts, ids
