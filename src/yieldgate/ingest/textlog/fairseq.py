"""fairseq's training logs: `--log-format simple` (and `none`) lines, and the same records as JSON (`--log-format
json`, fairseq-hydra-train's default). Its losses are in bits (base 2), read as nats; `fairseq_name` is the one
naming of its statistics, shared with the TensorBoard import of a fairseq log directory.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from yieldgate.ingest.clean import parse_json
from yieldgate.ingest.textlog.base import NUM, number

__all__ = ["fairseq_name", "read_line"]

_LN2 = math.log(2.0)
_FAIRSEQ_NAMES = {
    "loss": "loss",
    "nll_loss": "nll_loss",
    "wps": "tokens_per_s",
    "lr": "lr",
    "gnorm": "grad_norm",
    "loss_scale": "signals/loss_scale",
    "wall": "wall_s",
    "ppl": "ppl",
    "ups": "updates_per_s",
    "wpb": "tokens_per_batch",
    "bsz": "samples_per_batch",
}


# fairseq's `--log-format json` (fairseq-hydra-train's default): `[time][train_inner][INFO] - {"epoch": 1, ...,
# "loss": "9.276", "num_updates": "200", ...}`; `[valid]` records prefix each name with the subset.
_FAIRSEQ_JSON = re.compile(
    r"\[(?P<kind>train_inner|valid(?:_(?P<subset>\w+))?)\](?:\[\w+\])?"
    r"\s*-\s*(?P<json>\{.*\})\s*$"
)


def _fairseq_json(line: str) -> dict[str, float] | None:
    m = _FAIRSEQ_JSON.search(line) if "{" in line else None
    if m is None:
        return None
    try:
        record = parse_json(m["json"])
    except ValueError:  # not JSON (nested too deeply included): not a fairseq record
        return None
    if not isinstance(record, dict):
        return None
    valid = m["kind"].startswith("valid")
    prefix = m["kind"] + "_" if valid else ""
    pairs = {}
    for key, text in record.items():
        if isinstance(key, str) and key.startswith(prefix) and isinstance(text, (str, int, float)):
            try:
                pairs[key[len(prefix) :]] = float(text)
            except ValueError:
                continue
    return _fairseq_values(valid, m["subset"], pairs)


def fairseq_name(key: str, valid: bool, subset: str | None) -> tuple[str, float] | None:
    """Our name for a fairseq statistic and the factor to our units (its losses are in bits: to nats), or None
    for one we do not read. A validation (`valid: True`; `subset`: a second validation set, its own source) keeps
    its losses and perplexity only (not its speed, nor `best_loss`, the best so far)."""
    if key not in _FAIRSEQ_NAMES or (valid and key not in ("loss", "nll_loss", "ppl")):
        return None
    name = _FAIRSEQ_NAMES[key]
    if valid:
        name = f"val/{subset}/{name}" if subset else "val_" + name
    return name, _LN2 if key in ("loss", "nll_loss") else 1.0


def _fairseq_values(valid: bool, subset: str | None, pairs: Mapping[str, float]) -> dict[str, float] | None:
    """A fairseq record's values under our names (losses from bits to nats), or None without its step."""
    if "num_updates" not in pairs:
        return None
    out = {"step": pairs["num_updates"]}
    for key, value in pairs.items():
        named = fairseq_name(key, valid, subset)
        if named is not None:
            out[named[0]] = value * named[1]
    return out


def read_line(line: str) -> dict[str, float] | None:
    """fairseq's `simple`/`none` log lines: `train_inner` (every --log-interval updates) and `valid` (per
    validation), and the same records as JSON. Its losses are in bits (base 2): converted to nats. The
    per-epoch `train` summary (the epoch's mean) is not a step's value and is skipped."""
    if "{" in line:
        return _fairseq_json(line)
    m = re.search(r"\|\s*(?P<kind>train_inner|valid(?:_(?P<subset>\w+))?)\s*\|(?P<rest>.*)$", line) or re.search(
        r"^(?P<kind>)\|?\s*epoch \d+:\s+\d+\s*/\s*\d+\s+(?P<rest>\w+=.*)$", line
    )
    if m is None:
        return None
    valid = m["kind"].startswith("valid")
    subset = m.groupdict().get("subset")  # `valid_wiki`: a second validation set, its own source
    pairs = {key: number(text) for key, text in re.findall(rf"(?<!\w)(\w+)(?:=|\s+)({NUM})(?=[,|\s]|$)", m["rest"])}
    return _fairseq_values(valid, subset, pairs)
