"""What can confound a comparison besides its runs' numbers: the manifest fields two sides differ in (a seed or a label
aside), the tokenizer (and the unit runs compare in when tokenizers differ), and the knobs turned for throughput
that may change what the optimiser learns per token, with the small-batch check that would tell."""

from __future__ import annotations

from typing import Any

from yieldgate.manifest import Manifest, Optimisation, diff

__all__ = ["manifest_confounders", "batch_check_arguments", "tokenizer_of", "unit_for"]


_SECTIONS = {
    "data": "data",
    "model": "model",
    "optimisation": "optimisation",
    "hardware": "hardware",
    "evals": "eval portfolio",
    "library_versions": "library versions",
    "code_version": "code version",
    "config": "hyper-parameters",
}


def _confounder(field: str) -> bool:
    """Whether a manifest difference can confound a comparison: not the manifest's label, and not a seed (seed
    groups differ in seeds on purpose), be it the manifest's `seed` or one among the hyper-parameters
    (`config.training.seed`, `config.data_seed`)."""
    last = field.rsplit(".", 1)[-1]
    seed = last == "seed" or last.endswith("_seed")
    return field not in ("seed", "name") and not (field.startswith("config.") and seed)


def tokenizer_of(manifest: Manifest | None) -> str | None:
    """What tells tokenizers apart: the manifest's tokenizer content hash (None: not recorded)."""
    return manifest.data.tokenizer.content_hash if manifest and manifest.data and manifest.data.tokenizer else None


def unit_for(manifests: dict[str, Manifest | None]) -> tuple[str, str | None]:
    """The unit runs compare in: `byte` when their tokenizers differ (per-token losses and token counts would not
    compare) and every run records its bytes per token; else `token`. With a note when the unit was switched, or
    could not be. `compare`, `report` and the dashboard all choose through here, so they never disagree."""
    if len({tokenizer_of(m) for m in manifests.values()}) < 2:
        return "token", None
    lacking = [
        n for n, m in manifests.items() if not (m and m.data and m.data.tokenizer and m.data.tokenizer.bytes_per_token)
    ]
    if lacking:
        return "token", (
            f"the runs' tokenizers differ, but {', '.join(map(repr, lacking))} record(s) no "
            "data.tokenizer.bytes_per_token: compared per token, which does not compare across tokenizers"
        )
    return "byte", "the runs' tokenizers differ: losses in bits per byte and token counts in bytes"


def manifest_confounders(
    ma: Manifest | None, mb: Manifest | None, names: tuple[str, str], seeds: tuple[int, int], metric: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """The manifest fields two sides differ in that can confound their comparison (one per field), and warnings: the
    sides differ in more than one section, in seed counts, in tokenizer, or in a knob turned for throughput. `names`:
    the runs the manifests are of; `seeds`: each side's run count."""
    warnings = []
    if ma is None or mb is None:
        missing = [n for n, m in zip(names, (ma, mb), strict=True) if m is None]
        return [], [f"no manifest for {', '.join(missing)}: the confounders of this comparison are unknown"]
    fields = [d.model_dump() for d in diff(ma, mb) if _confounder(d.field)]
    sections = sorted({_SECTIONS.get(f["field"].split(".")[0].split("[")[0], f["field"]) for f in fields})
    if len(sections) > 1:
        warnings.append(
            f"the sides differ in {', '.join(sections)}: more than the one thing under test, so the "
            "difference mixes their effects"
        )
    if seeds[0] != seeds[1]:
        warnings.append(f"the sides have different seed counts ({seeds[0]} vs {seeds[1]})")
    if tokenizer_of(ma) != tokenizer_of(mb) and metric != "bpb":
        warnings.append(
            "the sides use different tokenizers, so per-token losses and token counts do not compare: "
            "compare them per byte (bits per byte)"
        )
    throughput = sorted(f["field"].split(".")[1] for f in fields if f["field"] in _THROUGHPUT_KNOBS)
    if throughput:
        warnings.append(
            f"the sides differ in {', '.join(throughput)}: changes made for throughput can alter what "
            "is learned per token; the small-batch check measures whether they did (probe.batch.run_batch_check "
            "with the comparison's batch_check arguments, or track.batch_check.batch_size_check on your own model)"
        )
    return fields, warnings


def batch_check_arguments(a: Manifest | None, b: Manifest | None) -> dict[str, Any] | None:
    """The small-batch check that answers this comparison's throughput question (`probe.batch.BatchCheckSetup`'s
    fields: A's batch as the baseline, B's batch, accumulation, precision and learning rate as the candidate), when
    the sides differ in a throughput knob (`_THROUGHPUT_KNOBS`); None otherwise. A value a manifest does not hold,
    or a precision the check cannot train in (tf32, fp8), is left out: the check's default stands."""
    if a is None or b is None or not any(d.field in _THROUGHPUT_KNOBS for d in diff(a, b)):
        return None
    oa, ob = a.optimisation or Optimisation(), b.optimisation or Optimisation()
    args: dict[str, Any] = {
        "baseline_batch": oa.batch_size,
        "candidate_batch": ob.batch_size,
        "accumulation": ob.grad_accumulation,
        "precision": ob.precision if ob.precision in ("fp32", "bf16", "fp16") else None,
        "lr": oa.lr,
        "candidate_lr": ob.lr if ob.lr != oa.lr else None,
    }
    return {k: v for k, v in args.items() if v is not None}


_THROUGHPUT_KNOBS = (
    "optimisation.batch_size",
    "optimisation.microbatch_size",
    "optimisation.grad_accumulation",
    "optimisation.precision",
)
"""Manifest fields a team changes for tokens/s that may change the optimiser's steps (McCandlish et al. 2018)."""

_STEP_DATA = ("optimisation.batch_size", "optimisation.grad_accumulation", "data.sequence_length", "data.sources")
"""Manifest fields (and prefixes) that make one step (or epoch) a different amount of data on two sides."""


def step_data_differences(a: Manifest | None, b: Manifest | None) -> list[str] | None:
    """The fields in which two sides' steps differ as amounts of data (batch size, accumulation, sequence length, the
    data sources): where any does, steps to target are not data to target. None: a side has no manifest to say."""
    if a is None or b is None:
        return None
    fields = [d.field for d in diff(a, b)]
    return sorted({p for p in _STEP_DATA for f in fields if f == p or f.startswith(p + "[") or f.startswith(p + ".")})
