"""Which extra of the package brings each optional dependency: a missing one is named with the line that installs
it (`pip install 'yieldgate[torch]'`), not a traceback from deep inside an import."""

from __future__ import annotations

from yieldgate.errors import MissingExtra

__all__ = ["EXTRA_OF", "missing_extra"]

EXTRA_OF = {
    "torch": "torch",
    "tokenizers": "torch",
    "psutil": "torch",
    "pynvml": "torch",
    "xxhash": "data",
    "zstandard": "data",
    "transformers": "hf",
    "accelerate": "hf",
    "lightning": "lightning",
    "pytorch_lightning": "lightning",
    "ray": "ray",
    "mlflow": "mlflow",
    "wandb": "wandb",
    "tensorboard": "tensorboard",
    "google_crc32c": "tensorboard",
    "pyarrow": "ingest",
    "kaleido": "report",
    "psycopg": "postgres",
    "starlette": "serve",
    "uvicorn": "serve",
}
"""Top-level module -> the extra (pyproject.toml's `[project.optional-dependencies]`) that installs it."""


def missing_extra(exc: ModuleNotFoundError, what: str) -> MissingExtra | None:
    """`exc` as the one line that names the extra to install, when the missing module is an optional dependency of
    ours (None otherwise: a missing module that is not ours to name stays the error it is). `what`: what needed it
    (`yieldgate.Tracker`, `import wandb`)."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF.get(top)
    if extra is None:
        return None
    return MissingExtra(f"{what} needs {top}, which is not installed: pip install 'yieldgate[{extra}]'")
