"""Megatron-LM's, Megatron-DeepSpeed's and GPT-NeoX's training logs: the iteration line of `name: value` pairs,
and each evaluation set's loss and perplexity under its own task (`val/loss`, `test/loss`, `val/<set>/loss`).
"""

from __future__ import annotations

import re

from yieldgate.ingest.textlog.kv import read_pairs

__all__ = ["read_line"]

_MEGATRON_ITERATION = re.compile(r"\biteration\s+\d+\s*/\s*\d+\s*\|")
# ` validation loss at iteration 1000 | lm loss value: ...`, and the other evaluations Megatron-LM,
# Megatron-DeepSpeed and GPT-NeoX print: `... at iteration 5000 on validation set |`, `... on test set |`,
# `... at iteration 0 [wiki] |` (one of several validation sets), `... at the end of training for test data |`,
# NeoX's ` validation results at iteration 100 | lm_loss value: ...` and ` test results at the end of training`.
_MEGATRON_EVAL = re.compile(
    r"\b(?P<split>validation|test) (?:loss|results) at (?:iteration (?P<step>\d+)|the end of training"
    r"(?: for (?P<data>\w+) data)?)(?: on (?P<set>\w[\w -]{0,60}?) set| \[(?P<panel>[^\]|]{1,60})\])?"
    r"\s*\|(?P<rest>.*)$"
)
_VALIDATION_SETS = {None, "val", "valid", "validation"}


def _eval_task(split: str, data: str | None, named: str | None, panel: str | None) -> str:
    """`val`, `test` or `val/<name>`: each evaluation set is its own task, so a test-set loss never takes
    the place of the validation loss at the same step."""
    if "test" in (split, data, named):
        return "test"
    if panel is not None or named not in _VALIDATION_SETS:
        name = re.sub(r"\W+", "_", (panel or named or "").strip()).strip("_").lower()
        return f"val/{name}" if name else "val"
    return "val"


def read_line(line: str) -> dict[str, float] | None:
    """Megatron's training line, ` iteration  N/  M | name: value | ...` (its pairs, its own words for names),
    and its evaluation lines, each set's loss and perplexity under its own task (`val/loss`, `test/loss`,
    `val/<set>/loss`)."""
    if _MEGATRON_ITERATION.search(line):
        return read_pairs(line)
    m = _MEGATRON_EVAL.search(line) if "at " in line else None
    if m is None:
        return None
    pairs = read_pairs(m["rest"], step=False) or {}
    loss = next((v for k, v in pairs.items() if "loss" in k and "ppl" not in k), None)
    if loss is None:
        return None
    task = _eval_task(m["split"], m["data"], m["set"] and m["set"].strip().lower(), m["panel"])
    out = {f"{task}/loss": loss}
    ppl = next((v for k, v in pairs.items() if "ppl" in k), None)
    if ppl is not None:
        out[f"{task}/ppl"] = ppl
    if m["step"] is not None:
        out["step"] = float(m["step"])
    return out
