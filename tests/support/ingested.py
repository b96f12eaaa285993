"""What a log imports to, read back for the structure tests (tests/test_ingest_structure_classes*.py): each log is
written inside the test, imported into a new in-memory ledger, and its steps and evaluations compared as dicts."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, Phase, settings

from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ledger import Ledger

FAST = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # a failure is reported as found, not shrunk for minutes
)
"""The structure tests' hypothesis settings: few examples (each imports a log), a failure reported unshrunk."""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def imported(path: Path, kind: str = "auto", **options):
    """(steps, evals, warnings) of `path` imported into a new in-memory ledger."""
    with Ledger(":memory:") as led:
        (res,) = import_run(led, kind, [str(path)], ImportOptions(run="r", **options))
        return led.steps("r"), led.evals("r"), res.warnings


def column(steps, name: str) -> dict[int, float]:
    """{step: value} of one column where it has a value."""
    known = steps[["step", name]].dropna()
    return dict(zip(known["step"].astype(int).tolist(), known[name].tolist(), strict=True))


def evals_at(evals) -> dict[tuple[str, int], float]:
    """{(task/metric, step): value} of the evaluations."""
    return {
        (f"{task}/{metric}", int(step)): value
        for task, metric, step, value in evals[["task", "metric", "step", "value"]].itertuples(index=False)
    }
