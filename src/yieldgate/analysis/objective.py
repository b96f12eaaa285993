"""Whether a run's loss is a cross-entropy: only then is it nats per token, with bits per byte, and its fall learning
per token.

Preference and reinforcement-learning fine-tuning (DPO, GRPO, PPO, reward models) log a `loss` that is their
objective: a log-sigmoid of reward margins, a clipped policy-gradient surrogate with a KL term. It is not per-token
cross-entropy, it can be negative, and a fall in it says the policy moved, not that the model learned the data. A
run is told to be one from its own record: the values its trainer logs beside that loss (TRL's DPOTrainer
`rewards/margins`, `logps/chosen`; its GRPOTrainer `reward`, `kl`, `rewards/<function>/mean`; PPO's `objective/kl`,
`ppo/...`), a name that says the method (`dpo`, `grpo`, `ppo`, `orpo`, `kto`), or a training loss below zero, which
no cross-entropy is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

__all__ = ["not_cross_entropy"]

# Words of a logged name that only preference and RL training log (a name's words: split at `/`, `_`, `.`, `-`).
_OBJECTIVE_WORDS = frozenset({"rewards", "reward", "logps", "kl", "dpo", "grpo", "ppo", "orpo", "kto", "simpo", "rlhf"})
_WORD = re.compile(r"[^/_.\-]+")
_SHOWN = 3  # names quoted as evidence


def not_cross_entropy(names: Iterable[str], loss: np.ndarray | None = None) -> str | None:
    """Why a run's loss is not a cross-entropy, or None when nothing says so. `names`: what the run logged beside its
    loss (extras, `imported/rewards/margins`; eval keys); `loss`: its training losses."""
    said = sorted(
        {
            name.removeprefix("imported/")
            for name in names
            if _OBJECTIVE_WORDS.intersection(w.lower() for w in _WORD.findall(name.removeprefix("imported/")))
        }
    )
    if said:
        more = f" and {len(said) - _SHOWN} more" if len(said) > _SHOWN else ""
        return f"it logs {', '.join(said[:_SHOWN])}{more}: preference or RL fine-tuning"
    if loss is not None:
        values = np.asarray(loss, dtype=float)
        negative = values[np.isfinite(values) & (values < 0)]
        if len(negative):
            return f"its training loss is negative at {len(negative)} logged steps (down to {negative.min():.4g})"
    return None
