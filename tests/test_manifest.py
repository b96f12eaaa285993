from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.support.helpers import shuffled
from yieldgate.errors import InputError, ManifestError
from yieldgate.manifest import DedupPolicy, Hardware, Manifest, diff, load_manifest, parse_manifest

BASE = {
    "data": {
        "sources": [
            {"name": "web", "weight": 0.7, "unique_tokens": 1_000_000},
            {"name": "code", "weight": 0.2},
            {"name": "books", "weight": 0.1},
        ],
        "filters": [{"kind": "min_chars", "params": {"min": 200}}],
        "dedup": {"kind": "near", "shingle": "word:5", "permutations": 128, "bands": 16, "rows": 8, "threshold": 0.8},
        "tokenizer": {"name": "bpe-4k", "content_hash": "abc", "vocab_size": 4096, "bytes_per_token": 3.9},
        "sequence_length": 256,
    },
    "model": {"name": "gpt-1m", "layers": 4, "width": 128, "heads": 4, "head_dim": 32, "context": 256},
    "optimisation": {"optimizer": "adamw", "lr": 3e-3, "schedule": "wsd", "batch_size": 64, "precision": "bf16"},
    "hardware": {"device_kind": "H100-SXM", "device_count": 8, "data_parallel": 8, "price_per_device_hour": 2.5},
    "evals": {"name": "probe", "version": "1", "tasks": ["val/loss", "val/code/loss"]},
    "seed": 3,
}


def write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data))
    return path


def test_yaml_and_json_load_to_the_same_manifest_and_hash(tmp_path):
    a = load_manifest(write(tmp_path, "m.yaml", BASE))
    b = load_manifest(write(tmp_path, "m.json", BASE))
    assert a == b
    assert a.content_hash() == b.content_hash()
    assert a.data.sources[2].name == "books"
    assert a.hardware.device_count == 8


def test_error_names_the_field_and_the_value(tmp_path):
    bad = json.loads(json.dumps(BASE))
    bad["data"]["sources"][2]["weight"] = -0.5
    with pytest.raises(ManifestError) as err:
        load_manifest(write(tmp_path, "bad.yaml", bad))
    assert str(err.value) == f"{tmp_path / 'bad.yaml'}: data.sources[2].weight: must be >= 0.0, got -0.5"


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"seed": "x"}, "seed: "),
        ({"data": {"sources": []}}, "data.sources: "),
        ({"data": {"sources": [{"name": "a"}], "sequnce_length": 5}}, "data.sequnce_length: unknown field"),
        ({"optimisation": {"grad_accumulation": 0}}, "optimisation.grad_accumulation: must be >= 1, got 0"),
        ({"data": {"sources": [{"name": "a"}, {"name": "a"}]}}, "source names must be unique, repeated: a"),
        ({"data": {"sources": [{"name": "a"}], "dedup": {"kind": "fuzzy"}}}, "data.dedup.kind: must be one of"),
        (
            {"data": {"sources": [{"name": "a"}], "dedup": {"bands": 3, "rows": 5}}},
            "bands x rows must equal permutations",
        ),
        ({"hardware": {"device_count": 4, "data_parallel": 8}}, "must equal device_count = 4"),
        ({"data": {"sources": [{"name": "a"}]}, "model": {"layers": -1}}, "model.layers: must be >= 1, got -1"),
    ],
)
def test_validation_messages(patch, expected):
    with pytest.raises(ManifestError) as err:
        parse_manifest(patch, origin="m.yaml")
    message = str(err.value)
    assert message.startswith("m.yaml: ")
    assert expected in message
    assert "\n" not in message


def test_malformed_files_get_one_line_with_position(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("data:\n  sources: [\n    {name: web\n")
    with pytest.raises(InputError, match=r"broken.yaml:\d+:\d+: malformed YAML"):
        load_manifest(broken)
    bad_json = tmp_path / "broken.json"
    bad_json.write_text('{"seed": 1,}')
    with pytest.raises(InputError, match=r"broken.json:1:\d+: malformed JSON"):
        load_manifest(bad_json)
    with pytest.raises(InputError, match="no such file"):
        load_manifest(tmp_path / "missing.yaml")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\xe9".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8"):
        load_manifest(latin)
    listing = tmp_path / "list.yaml"
    listing.write_text("- 1\n- 2\n")
    with pytest.raises(ManifestError, match="expected a mapping"):
        load_manifest(listing)


def test_yaml_is_loaded_safely(tmp_path):
    hostile = tmp_path / "hostile.yaml"
    hostile.write_text("seed: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(InputError, match="malformed YAML"):
        load_manifest(hostile)


def test_diff_lists_confounders_by_field_and_source_name():
    a = parse_manifest(BASE)
    changed = json.loads(json.dumps(BASE))
    changed["data"]["sources"].reverse()  # order alone is not a difference
    changed["data"]["sources"][0]["weight"] = 0.2  # books
    changed["optimisation"]["precision"] = "fp16"
    changed["seed"] = 4
    b = parse_manifest(changed)
    fields = {(d.field, d.a, d.b) for d in diff(a, b)}
    assert fields == {
        ("data.sources[books].weight", 0.1, 0.2),
        ("optimisation.precision", "bf16", "fp16"),
        ("seed", 3, 4),
    }
    assert diff(a, a) == []


def test_diff_reports_a_source_present_on_one_side_only():
    a = parse_manifest({"data": {"sources": [{"name": "web"}]}})
    b = parse_manifest({"data": {"sources": [{"name": "web"}, {"name": "code", "weight": 0.5}]}})
    assert {"data.sources[code].weight"} <= {d.field for d in diff(a, b)}


def test_defaults_and_models_are_shared_types():
    m = Manifest()
    assert m.data is None and m.library_versions == {}
    assert DedupPolicy().kind == "none"
    with pytest.raises(ValueError):
        Hardware(device_count=2, tensor_parallel=4)


@given(st.randoms(use_true_random=False), st.integers(min_value=0, max_value=2**31))
def test_hash_is_stable_across_key_order(rnd, seed):
    base = dict(BASE, seed=seed)
    assert parse_manifest(shuffled(base, rnd)).content_hash() == parse_manifest(base).content_hash()


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False), st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_hash_changes_with_content(w1, w2):
    a = parse_manifest({"data": {"sources": [{"name": "s", "weight": w1 + 1}]}})
    b = parse_manifest({"data": {"sources": [{"name": "s", "weight": w2 + 1}]}})
    assert (a.content_hash() == b.content_hash()) == (w1 + 1 == w2 + 1)
