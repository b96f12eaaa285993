"""util/: the one content hash and the one NaN-in-JSON policy. The hashes are pinned to the values ledgers already
hold: a change of a byte of the canonical form would orphan every stored manifest hash and workflow digest."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from yieldgate.analysis.diagnose import data_order
from yieldgate.gate.evidence import workflow, workflow_digest
from yieldgate.gate.policy import load_policy
from yieldgate.manifest import load_manifest
from yieldgate.util.hashing import canonical_json, content_hash
from yieldgate.util.jsonsafe import json_safe

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_canonical_json_sorts_keys_and_is_compact_unless_spaced():
    value = {"b": [1, {"d": 2, "c": None}], "a": "x, y: z"}
    assert canonical_json(value) == '{"a":"x, y: z","b":[1,{"c":null,"d":2}]}'
    assert canonical_json(value, spaced=True) == '{"a": "x, y: z", "b": [1, {"c": null, "d": 2}]}'
    assert content_hash(value) == content_hash(json.loads(json.dumps(value)))  # any key order
    assert content_hash(value) != content_hash(value, spaced=True)


def test_the_hashes_ledgers_hold_keep_their_values():
    manifest = load_manifest(EXAMPLES / "manifest.yaml")
    assert manifest.content_hash() == content_hash(manifest.canonical())
    assert manifest.content_hash() == "55436833803806da8bccbfbf838c8faf042127e5cd638b9a1c31fdeca7584f80"
    assert workflow_digest(manifest) == content_hash(workflow(manifest), spaced=True)
    assert workflow_digest(manifest) == "2dec4fee60f4618d0ff47434e7c9320c92f99d8749ab73f83370446b6f45253c"
    assert data_order(manifest) == "045a6192136fe0d581412b3815335dae23d854ce4ee68455df183b3bc3e092f6"
    assert load_policy(EXAMPLES / "policy.yaml").content_hash() == (
        "cee4321b8dae3ccc677b64b4d33e1dd8b0a87abf5da5f42b0f5ec2f6b6389763"
    )


def test_json_safe_writes_null_for_what_json_cannot_hold():
    value = {"a": math.nan, "b": (np.float32(1.5), np.int64(3), -math.inf), "c": [{"d": np.float64("inf")}], 1: "x"}
    assert json_safe(value) == {"a": None, "b": [1.5, 3, None], "c": [{"d": None}], 1: "x"}
    assert json.dumps(json_safe(value), allow_nan=False)  # valid JSON: no NaN or Infinity left
    assert type(json_safe(np.int64(3))) is int and json_safe("nan") == "nan" and json_safe(None) is None


def test_json_safe_as_text_keeps_the_value_for_stored_bodies():
    value = {"a": math.nan, "b": (math.inf, np.float64(-math.inf), 2.0), 1: {"c": np.float32(0.5)}}
    assert json_safe(value, as_text=True) == {"a": "nan", "b": ["inf", "-inf", 2.0], "1": {"c": 0.5}}
    stored = json.dumps(json_safe(value, as_text=True), allow_nan=False, sort_keys=True)
    assert stored == '{"1": {"c": 0.5}, "a": "nan", "b": ["inf", "-inf", 2.0]}'
