"""What a text log's training lines say beyond the loss, and what was appended after them.

Two rules read by the log's structure, not by a trainer's names (issue #45, found on PaddleRec's `trainer.py` with
its `infer.py` run appended to the same file):

- **A metric on the training line is a training metric.** `epoch: 3, batch_id: 100, AUC:0.71, ACC:0.85,
  loss:0.12` scores the batch just trained on, at the training cadence: an extra of the step, not an evaluation.
  A name that is an evaluation by its metric alone (a bare `auc`, `map`) is read so when it is printed on (nearly)
  every line that prints the training loss. A name that says its split (`val_auc`, `test_acc`) stays an
  evaluation wherever it is printed: the log said so.
- **A second program's section appended after the run is not the run.** Records after the last one with the
  training loss whose step goes back below the steps the run reached, and which print no value the training lines
  do not print but extras (the same logger's lines again, less the loss, and perhaps `load model epoch 15`: an
  inference over the run's checkpoints), would overwrite the training rows and send the clock back if read as the
  run. They are left out, with a warning that says where they begin. Records after the run with an evaluation or a
  core value of their own (a final `val_loss`) are not this: they stay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from yieldgate.aliases import guess, imported
from yieldgate.ingest.types import Warnings

__all__ = ["appended_section", "training_metrics"]

Column = tuple[np.ndarray, np.ndarray]

_BESIDE = 0.9  # the share of the loss's lines a metric is printed on for it to be of the training lines
_SPLIT_WORDS = {"val", "valid", "validation", "eval", "evaluation", "dev", "test", "train", "training"}


def _loss_column(columns: Mapping[str, Column], names: Mapping[str, str]) -> str | None:
    """The column that holds the training loss: one the format names `loss`, else one whose name is guessed so."""
    for name in columns:
        if names.get(name) == "loss":
            return name
    found = [n for n in columns if n not in names and guess(n).kind == "core" and guess(n).key == "loss"]
    return found[0] if found else None


def _names_split(name: str) -> bool:
    """Whether a name says which split it scores (`val_auc`, `test/acc`, `eval-f1`)."""
    words = name.lower().replace("/", "_").replace("-", "_").split("_")
    return bool(_SPLIT_WORDS.intersection(words))


def training_metrics(columns: Mapping[str, Column], names: Mapping[str, str]) -> dict[str, str]:
    """{name: `imported/<name>`} for each column guessed an evaluation by its metric alone that is printed on at least
    `_BESIDE` of the lines that print the training loss (`names`: what the format already names, left as it is)."""
    loss = _loss_column(columns, names)
    if loss is None:
        return {}
    trained = columns[loss][1]
    out = {}
    for name, (_, present) in columns.items():
        if name in names or name == loss or _names_split(name) or guess(name).kind != "eval":
            continue
        if (present & trained).sum() >= _BESIDE * trained.sum():
            out[name] = imported(name).key
    return out


def appended_section(
    columns: Mapping[str, Column], step_name: str, names: Mapping[str, str], where: Sequence[str], warnings: Warnings
) -> np.ndarray:
    """Which records to keep: all but a section appended after the run (the module's second rule), which is warned
    of. `names`: what the format names its columns (to find the loss by)."""
    keep = np.ones(len(where), dtype=bool)
    loss = _loss_column(columns, names)
    if loss is None or not columns[loss][1].any():
        return keep
    trained = columns[loss][1]
    last = int(np.nonzero(trained)[0][-1])
    step, has_step = columns[step_name]
    after = np.arange(len(where)) > last
    reached = float(np.max(step[trained & has_step])) if (trained & has_step).any() else np.nan
    back = after & has_step & (step < reached)
    if not back.any():
        return keep
    first = int(np.argmax(back))
    section = np.arange(len(where)) >= first
    own = [n for n, (_, present) in columns.items() if (present & section).any() and not (present & trained).any()]
    if any(n in names or guess(n).kind in ("core", "eval") for n in own):
        return keep
    keep &= ~section
    warnings.add(
        "appended",
        f"{where[first]}: {int(section.sum())} record(s) after the run's last training record count their step again "
        f"from {step[first]:g} (the run reached {reached:g}) and print no evaluation of their own, only extras and "
        "what the training lines print less the loss: another program's output appended to the log (an inference "
        "over the checkpoints), not the run; left out",
    )
    return keep
