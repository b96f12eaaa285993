"""One canonical sha256 of JSON-able content: equal content hashes equal whatever its key order, comments or file
format. It is the form of every content hash yieldgate keeps (a manifest's, a policy's, a campaign's, the gate's
workflow digest) and of `diagnose`'s data order. Ledgers store them (a decision keeps its manifests' hashes, its
policy's and its workflow digest, and compares a later workflow with it), so its bytes never change.

Two spellings of the canonical form exist, and each hash keeps the one it was first stored in: compact JSON
(`separators=(",", ":")`, the content hashes) and JSON's default separators (`", "`, `": "`; `spaced=True`: the
workflow digest and the data order).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "content_hash"]


_ENCODERS = {False: json.JSONEncoder(sort_keys=True, separators=(",", ":")), True: json.JSONEncoder(sort_keys=True)}
# Built once: json.dumps with these settings builds an encoder per call, a third of the time of hashing a ledger
# record (an import checksums every evaluation it stores).


def canonical_json(value: Any, *, spaced: bool = False) -> str:
    """`value` as JSON with its keys sorted, compact (no whitespace) unless `spaced`."""
    return _ENCODERS[spaced].encode(value)


def content_hash(value: Any, *, spaced: bool = False) -> str:
    """sha256 (hex) of `canonical_json(value, spaced=spaced)`."""
    return hashlib.sha256(canonical_json(value, spaced=spaced).encode()).hexdigest()
