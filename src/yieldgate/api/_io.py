"""Runs in and out: imports of other tools' logs and of published results tables, exports, manifests validated and
diffed."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yieldgate.errors import RunNotFound, YieldgateError

if TYPE_CHECKING:
    from yieldgate.ingest.explain import Explanation
    from yieldgate.ingest.results import ResultsImport
    from yieldgate.ingest.types import ImportResult
    from yieldgate.manifest import Manifest, ManifestCheck, ManifestDiff
    from yieldgate.report.export import ExportResult


from yieldgate.api._common import LedgerArg, _open


def import_run(
    kind: str, sources: str | Sequence[str], *, run: str, ledger: LedgerArg = None, **options: Any
) -> list[ImportResult]:
    """Import a run another tool logged (`yieldgate import`); `options` are `ImportOptions`' fields
    (`tokens_per_step=`, `devices=`, `map=[...]`, ...)."""
    from yieldgate.ingest import ImportOptions
    from yieldgate.ingest import import_run as run_import

    paths = [sources] if isinstance(sources, str) else list(sources)
    opts = ImportOptions(run=run, **options)  # checked before a ledger file is made
    with _open(ledger, readonly=False) as led:
        return run_import(led, kind, paths, opts)


def explain_import(kind: str, sources: str | Sequence[str], *, run: str = "run", **options: Any) -> list[Explanation]:
    """How `import_run` would read `sources`, one explanation per run, storing nothing (`yieldgate import
    --explain`); `options` as `import_run`'s."""
    from yieldgate.ingest import ImportOptions
    from yieldgate.ingest.explain import explain_import as explain

    paths = [sources] if isinstance(sources, str) else list(sources)
    return explain(kind, paths, ImportOptions(run=run, **options))


def import_results(
    table: str | os.PathLike[str], *, campaign: str, ledger: LedgerArg = None, **options: Any
) -> ResultsImport:
    """Import a long-form results table as a campaign (`yieldgate import results`); `options`: `higher_is_better=`,
    `lower_is_better=` (metric names), `replace=` (`ingest.results.import_results`)."""
    from yieldgate.analysis.results import summarise_results
    from yieldgate.ingest.results import import_results as run_import

    with _open(ledger, readonly=False) as led, led.transaction():  # the runs and their summary, or nothing
        result = run_import(led, Path(table), campaign=campaign, **options)
        led.set_campaign_summary(campaign, summarise_results(led, campaign))
        return result


def export_run(run: str, to: str, dest: str | os.PathLike[str], *, ledger: LedgerArg = None) -> ExportResult:
    """Send a run to TensorBoard, MLflow, W&B or a table (`yieldgate export`)."""
    from yieldgate.report.export import export_run as run_export

    with _open(ledger, readonly=True) as led:
        return run_export(led, run, to, str(dest))


def validate_manifest(path: str | os.PathLike[str]) -> ManifestCheck:
    """Validate a manifest file, with its content hash (`yieldgate manifest validate`); one that does not validate
    is a ManifestError that names the field."""
    from yieldgate.manifest import ManifestCheck, load_manifest

    return ManifestCheck(file=os.fspath(path), hash=load_manifest(Path(path)).content_hash())


def manifest_diff(a: str, b: str, *, ledger: LedgerArg = None) -> ManifestDiff:
    """The fields in which two manifests differ, the confounders of a comparison (`yieldgate manifest diff`); each
    is a manifest file, or else the name of a run whose manifest the ledger holds."""
    from yieldgate.manifest import ManifestDiff, diff

    ma, mb = _manifest_of(a, ledger), _manifest_of(b, ledger)
    return ManifestDiff(a=a, b=b, hash_a=ma.content_hash(), hash_b=mb.content_hash(), differences=diff(ma, mb))


def _manifest_of(ref: str, ledger: LedgerArg) -> Manifest:
    """A manifest file if `ref` is a path that exists, else the manifest of the run named `ref`."""
    from yieldgate.manifest import load_manifest

    if Path(ref).is_file():
        return load_manifest(ref)
    with _open(ledger, readonly=True) as led:
        try:
            manifest = led.manifest(ref)
        except RunNotFound:
            raise RunNotFound(f"{ref}: neither a manifest file nor a run in {led.location}") from None
    if manifest is None:
        raise YieldgateError(f"run {ref!r} has no manifest; attach one when recording or importing it")
    return manifest
