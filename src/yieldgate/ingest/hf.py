"""A Hugging Face Trainer's `trainer_state.json` (a checkpoint folder, or the file itself).

Its `log_history` mixes three kinds of entries, each a row at its `step`: training logs (`loss`,
`grad_norm`, `learning_rate`, `num_input_tokens_seen`, `epoch`), evaluations (`eval_loss`, `eval_<metric>`,
`eval_runtime`, ...) and the end-of-training summary, told apart by its `train_loss` (the mean over the whole
run, not a step's loss) or `total_flos`. Summary keys are kept as `summary/<key>`, so the mean training
loss never lands in the `loss` column. (Recent Trainers also log a cumulative `train_runtime` on training
entries: that one is the run's wall clock, `wall_s`.)

Entries without a step (the `predict_*` / `test_*` results a script appends after training, a run summary
written by hand) are not rows of the curve: their numbers go to the run's summary (`yieldgate show`), one
warning counting them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from yieldgate.errors import InputError
from yieldgate.ingest.clean import clip, concat, read_json
from yieldgate.ingest.types import Rows, Warnings
from yieldgate.util.inputs import check_regular

__all__ = ["read", "read_state"]

_SUMMARY_KEYS = ("train_loss", "total_flos")


def _state_file(source: Path) -> Path:
    path = source / "trainer_state.json" if source.is_dir() else source
    if not path.exists():
        raise InputError(f"{source}: no trainer_state.json; give the file or a checkpoint folder holding it")
    check_regular(path, "a Trainer's trainer_state.json")  # a FIFO or /dev/zero: refused, not read
    return path


def read_state(path: Path, warnings: Warnings, summary: dict[str, float] | None = None) -> Rows:
    """One row per `log_history` entry with a step, under the Trainer's own names (summary keys as
    `summary/<key>`); the numbers of entries without one go into `summary`."""
    state = read_json(path, "a Trainer's trainer_state.json")
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise InputError(f"{path}: no 'log_history' list; expected a Trainer's trainer_state.json")
    steps, where, entries = [], [], []
    stepless: list[int] = []
    for i, entry in enumerate(history):
        if not isinstance(entry, dict):
            stepless.append(i)
            continue
        values = {
            key: float(value)
            for key, value in entry.items()
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool)
        }
        step = entry.get("step")
        if isinstance(step, float) and step.is_integer():
            step = int(step)
        if isinstance(step, (int, float)) and not isinstance(step, bool) and abs(step) > 2**53:
            # No trainer counts this far (inf: a number of thousands of digits): a damaged file.
            raise InputError(f"{path}:log_history[{i}]: step {clip(str(step), 30)} is not a step number (past 2**53)")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            stepless.append(i)
            if summary is not None:
                summary.update(values)
            continue
        is_summary = any(k in entry for k in _SUMMARY_KEYS)
        steps.append(step)
        where.append(f"{path}:log_history[{i}]")
        entries.append({f"summary/{k}" if is_summary else k: v for k, v in values.items()})
    if stepless:
        first = stepless[0]
        warnings.add(
            "stepless",
            f"{path}: {len(stepless)} log_history entr{'y' if len(stepless) == 1 else 'ies'} "
            f"without a step (first: log_history[{first}]) kept in the run's summary, not "
            "as rows",
        )
    if not entries:
        raise InputError(
            f"{path}: log_history has no entry with a step ({len(history)} entries); the Trainer "
            "logged no training step yet: import a later checkpoint's trainer_state.json"
        )
    return Rows.from_records(str(path), steps, where, entries)


def read(sources: Sequence[str], opts, warnings: Warnings) -> list:
    """Importer entry point: one run from a trainer_state.json (several: checkpoints of one run, in order)."""
    from yieldgate.ingest import Read

    paths = [_state_file(Path(s)) for s in sources]
    summary: dict[str, float] = {}
    rows = concat([read_state(p, warnings, summary) for p in paths])
    return [Read(", ".join(map(str, paths)), rows, summary=summary)]
