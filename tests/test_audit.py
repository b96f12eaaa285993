from __future__ import annotations

import pytest
import yaml

from yieldgate.data.audit import Audit, Drop
from yieldgate.data.pipeline import audit_file, load_pipeline, run_pipeline
from yieldgate.errors import InputError, ManifestError
from yieldgate.ledger import Ledger


def _docs():
    # 10 documents, every third one rare (tagged); "é" makes one of them 2 bytes longer in UTF-8.
    return [{"text": ("é" if i == 0 else "x") * (10 + i), "rare": i % 3 == 0, "n": i} for i in range(10)]


def test_stage_accounts_for_filters_drops_and_maps_in_call_order():
    audit = Audit(tag="rare", text="text", tokens="n", batch=4)
    docs = audit.stage("drop-rare", lambda d: Drop("rare") if d["rare"] and d["n"] > 0 else True, _docs())
    docs = audit.map("upper", lambda d: {**d, "text": d["text"].upper()}, docs)
    docs = audit.whole("short", lambda ds: [len(d["text"]) < 18 for d in ds], docs)
    assert [d["n"] for d in docs] == [0, 1, 2, 4, 5, 7]
    first, second, third = (s.to_dict() for s in audit.stages)
    assert [s.name for s in audit.stages] == ["drop-rare", "upper", "short"]
    assert first["docs_in"] == 10 and first["docs_out"] == 7 and first["drops"] == {"rare": 3}
    assert first["bytes_in"] == sum(10 + i for i in range(10)) + 10  # é is 2 bytes, 10 of them
    assert first["tokens_in"] == 45 and first["tokens_out"] == 45 - 3 - 6 - 9
    assert first["tagged_in"] == 4 and first["tagged_out"] == 1 and first["tagged_retention"] == 0.25
    assert first["retention"] == 0.7 and first["drops_tagged_slice"]  # 25% of the rare vs 70% of all
    assert second["docs_out"] == 7 and second["drops"] == {} and not second["drops_tagged_slice"]
    assert third["drops"] == {"rejected": 1} and third["docs_out"] == 6
    assert audit.table()["stage"].tolist() == ["drop-rare", "upper", "short"]
    assert all(s["seconds"] >= 0 and s["docs_per_s"] is None or s["docs_per_s"] > 0 for s in (first, second, third))


def test_stage_names_are_unique_and_whole_must_answer_every_document():
    audit = Audit()
    list(audit.stage("a", bool, ["x", ""]))
    assert list(audit.map("m", lambda d: d or None, ["x", "", "y"])) == ["x", "y"]
    with pytest.raises(InputError, match="repeated"):
        audit.stage("a", bool, [])
    with pytest.raises(InputError, match="returned 1 results for 2"):
        audit.whole("b", lambda ds: [True], ["x", "y"])
    assert audit.stages[0].drops == {"rejected": 1}


PIPELINE = {
    "input": {"sources": ["shakespeare-modern", "shakespeare-folio"], "chunk_chars": 2000, "stdlib_bytes": 0},
    "tag": {"field": "id", "regex": "/folio"},
    "stages": [
        {"kind": "min_chars", "params": {"min": 200}},
        {"kind": "dedup", "dedup": {"kind": "exact"}},
        {"name": "near", "kind": "dedup", "dedup": {"kind": "near", "shingle": "word:3", "threshold": 0.145}},
        {"kind": "sample", "every": 2},
    ],
}


def test_yaml_pipeline_shows_near_dedup_dropping_the_tagged_folio(tmp_path, ledger_path):
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(PIPELINE))
    audit = audit_file(path, ledger=str(ledger_path), run="audit-1")
    stages = {s.name: s for s in audit.stages}
    assert list(stages) == ["min_chars", "dedup", "near", "sample"]
    near = stages["near"]
    assert near.drops_tagged_slice and near.tagged_retention < 0.35 < near.retention
    assert near.drops == {"near duplicate": near.docs_in - near.docs_out}
    assert stages["sample"].docs_out == (stages["sample"].docs_in + 1) // 2
    with Ledger(ledger_path, readonly=True) as led:
        meta = led.meta("audit-1")["audit"]
        manifest = led.manifest("audit-1")
    assert [s["stage"] for s in meta["stages"]] == list(stages)
    assert meta["notes"]["near"]["stats"]["docs_in"] == near.docs_in
    assert manifest.data.dedup.kind == "near" and manifest.data.dedup.bands * manifest.data.dedup.rows == 128
    accepted = {s.name: s.accepted_tokens for s in manifest.data.sources}
    assert sum(accepted.values()) == stages["sample"].tokens_out and accepted["shakespeare-folio"] < accepted["shakespeare-modern"]


@pytest.mark.parametrize(("change", "message"), [
    ({"stages": [{"kind": "nope"}]}, "stages[0]: kind must be one of"),
    ({"stages": [{"kind": "dedup"}]}, "stages[0]: a dedup stage needs"),
    ({"tag": {"regex": "("}}, "tag.regex: not a regular expression"),
    ({"input": {"sources": ["nope"]}}, "input: unknown sources nope"),
    ({"stages": [{"kind": "dedup", "dedup": {"kind": "near", "shingle": "x"}}]}, "stages[0].dedup: shingle must be"),
])
def test_bad_pipelines_name_the_field(tmp_path, change, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**PIPELINE, **change}))
    with pytest.raises(ManifestError, match=message.replace("[", r"\[").replace("(", r"\(")):
        load_pipeline(path)


def test_filter_stage_missing_parameter_is_input_error(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**PIPELINE, "stages": [{"kind": "min_chars", "params": {}}]}))
    with pytest.raises(InputError, match="needs parameter 'min'"):
        run_pipeline(load_pipeline(path))


def test_cli_audit_json_and_table(cli, tmp_path):
    folder = tmp_path / "texts"
    folder.mkdir()
    for i in range(6):
        (folder / f"{i}.txt").write_text(("rare " if i % 2 else "common ") * (20 + i))
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"input": {"paths": [str(folder)], "chunk_chars": None},
                                    "tag": {"regex": "rare"}, "stages": [{"kind": "min_chars", "params": {"min": 130}}]}))
    (stage,) = cli.json("audit", str(path))["stages"]
    assert stage["docs_in"] == 6 and stage["tagged_in"] == 3 and stage["drops"] == {"min_chars": 3}
    assert stage["tagged_out"] == 0 and stage["drops_tagged_slice"]  # every "rare" text is short
    assert "min_chars" in cli("audit", str(path)).stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("input: [1\n")
    assert cli("audit", str(bad), code=2).stderr.startswith(f"error: {bad}:")
