"""Data pipelines: duplicates among files, a pipeline audited stage by stage, two lined up."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from yieldgate.data.dedup import DedupResult
    from yieldgate.data.pipeline import Audit
    from yieldgate.data.pipeline_compare import PipelineComparison


from yieldgate.api._common import LocationArg, _location


def dedup(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    near: float | None = None,
    shingle: str = "word:3",
    chunk_chars: int | None = None,
) -> DedupResult:
    """Exact or near-duplicate documents among files (`yieldgate dedup`): each file under `paths` (folders walked)
    one document, or chunks of about `chunk_chars` characters; near dedup at estimated Jaccard >= `near` over
    `shingle`s (word:N or char:N), exact without it."""
    from yieldgate.data.pipeline import dedup_paths

    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    return dedup_paths(given, near=near, shingle=shingle, chunk_chars=chunk_chars)


def audit(pipeline: str | os.PathLike[str], *, run: str | None = None, ledger: LocationArg = None) -> Audit:
    """Run a data pipeline file stage by stage and account for each (`yieldgate audit FILE`); with `run`, the audit
    is recorded into that run (created if absent)."""
    from yieldgate.data.pipeline import audit_file

    return audit_file(Path(pipeline), ledger=_location(ledger), run=run)


def audit_pair(
    a: str | os.PathLike[str], b: str | os.PathLike[str], *, progress: Callable[[str], None] | None = None
) -> PipelineComparison:
    """Two pipeline files run and lined up stage by stage, with the hybrid that takes at each row the stage keeping
    more of the tagged slice (`yieldgate audit A B`; `data.pipeline_compare`); `progress(what)` before each run."""
    from yieldgate.data.pipeline_compare import compare_files

    return compare_files(Path(a), Path(b), progress=progress)
