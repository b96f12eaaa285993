"""A Hugging Face Trainer's `trainer_state.json` (a checkpoint folder, or the file itself).

Its `log_history` mixes three kinds of entries, each a row at its `step`: training logs (`loss`,
`grad_norm`, `learning_rate`, `num_input_tokens_seen`, `epoch`), evaluations (`eval_loss`, `eval_<metric>`,
`eval_runtime`, ...) and the end-of-training summary, told apart by its `train_loss` (the mean over the whole
run, not a step's loss) or `total_flos`. Summary keys are kept as `summary/<key>`, so the mean training
loss never lands in the `loss` column. (Recent Trainers also log a cumulative `train_runtime` on training
entries: that one is the run's wall clock, `wall_s`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


from yieldgate.errors import InputError
from yieldgate.ingest.clean import Rows, Warnings, concat, read_json

__all__ = ["read", "read_state"]

_SUMMARY_KEYS = ("train_loss", "total_flos")


def _state_file(source: Path) -> Path:
    path = source / "trainer_state.json" if source.is_dir() else source
    if not path.is_file():
        raise InputError(f"{source}: no trainer_state.json; give the file or a checkpoint folder holding it")
    return path


def read_state(path: Path, warnings: Warnings) -> Rows:
    """One row per `log_history` entry, under the Trainer's own names (summary keys as `summary/<key>`)."""
    state = read_json(path, "a Trainer's trainer_state.json")
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise InputError(f"{path}: no 'log_history' list; expected a Trainer's trainer_state.json")
    steps, where, entries = [], [], []
    for i, entry in enumerate(history):
        at = f"{path}:log_history[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("step"), int):
            raise InputError(f"{at}: expected an object with an integer 'step', got {str(entry)[:80]}")
        summary = any(k in entry for k in _SUMMARY_KEYS)
        values = {}
        for key, value in entry.items():
            if key == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue  # strings and nested objects are not metrics
            values[f"summary/{key}" if summary else key] = float(value)
        steps.append(entry["step"])
        where.append(at)
        entries.append(values)
    if not entries:
        raise InputError(f"{path}: log_history is empty; the Trainer logged nothing yet")
    return Rows.from_records(str(path), steps, where, entries)


def read(sources: Sequence[str], opts, warnings: Warnings) -> list:
    """Importer entry point: one run from a trainer_state.json (several: checkpoints of one run, in order)."""
    from yieldgate.ingest import Read

    paths = [_state_file(Path(s)) for s in sources]
    return [Read(", ".join(map(str, paths)), concat([read_state(p, warnings) for p in paths]))]
