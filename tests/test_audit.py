from __future__ import annotations

import pytest
import yaml

from yieldgate.data.audit import Audit, Drop, StageStats
from yieldgate.data.pipeline import Pipeline, audit_file, load_pipeline, run_pipeline
from yieldgate.data.pipeline_compare import align_stages, choose
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


@pytest.mark.slow
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
    assert (
        sum(accepted.values()) == stages["sample"].tokens_out
        and accepted["shakespeare-folio"] < accepted["shakespeare-modern"]
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stages": [{"kind": "nope"}]}, "stages[0]: kind must be one of"),
        ({"stages": [{"kind": "dedup"}]}, "stages[0]: a dedup stage needs"),
        ({"tag": {"regex": "("}}, "tag.regex: not a regular expression"),
        ({"input": {"sources": ["nope"]}}, "input: unknown sources nope"),
        (
            {"stages": [{"kind": "dedup", "dedup": {"kind": "near", "shingle": "x"}}]},
            "stages[0].dedup: shingle must be",
        ),
    ],
)
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
    path.write_text(
        yaml.safe_dump(
            {
                "input": {"paths": [str(folder)], "chunk_chars": None},
                "tag": {"regex": "rare"},
                "stages": [{"kind": "min_chars", "params": {"min": 130}}],
            }
        )
    )
    (stage,) = cli.json("audit", str(path))["stages"]
    assert stage["docs_in"] == 6 and stage["tagged_in"] == 3 and stage["drops"] == {"min_chars": 3}
    assert stage["tagged_out"] == 0 and stage["drops_tagged_slice"]  # every "rare" text is short
    assert "min_chars" in cli("audit", str(path)).stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("input: [1\n")
    assert cli("audit", str(bad), code=2).stderr.startswith(f"error: {bad}:")


def _stages(*specs):
    """A pipeline of these stages: (kind, name) pairs, filters with the parameter they need."""
    params = {"min_chars": {"min": 1}, "max_chars": {"max": 10}, "max_symbol_ratio": {"max": 0.3}}
    stages = [
        {
            "kind": k,
            **({"name": n} if n else {}),
            **({"params": params[k]} if k in params else {}),
            **({"dedup": {"kind": "exact"}} if k == "dedup" else {}),
            **({"every": 2} if k == "sample" else {}),
        }
        for k, n in specs
    ]
    return Pipeline.model_validate({"input": {"sources": ["milton"]}, "stages": stages})


def test_stages_align_by_name_then_role_in_order():
    a = _stages(("min_chars", None), ("dedup", None), ("sample", None))
    b = _stages(("max_symbol_ratio", None), ("max_chars", None), ("dedup", None))
    # min_chars pairs with the first filter of B by role; B's second filter stands alone; dedup pairs by name
    assert align_stages(a, b) == [(0, 0), (None, 1), (1, 2), (2, None)]
    # a name shared on purpose wins over the order: B's second filter is A's "quality"
    a = _stages(("min_chars", "quality"), ("dedup", None))
    b = _stages(("max_chars", None), ("max_symbol_ratio", "quality"), ("dedup", None))
    assert align_stages(a, b) == [(None, 0), (0, 1), (1, 2)]
    assert align_stages(a, _stages(("sample", None))) == [(0, None), (1, None), (None, 0)]  # no role in common


def test_the_hybrid_rule_puts_the_tagged_slice_first_then_speed():
    def stage(tagged_out, seconds):
        return StageStats(
            name="s", docs_in=100, docs_out=90, bytes_in=10**6, tagged_in=10, tagged_out=tagged_out, seconds=seconds
        )

    assert choose(stage(9, 10.0), stage(4, 0.1)) == ("a", "keeps more of the tagged slice (90.0% vs 40.0%)")
    assert choose(stage(9, 1.0), stage(9, 0.5)) == ("b", "faster at equal tagged retention (2 vs 1 MB/s)")
    assert choose(stage(9, 1.0), stage(9, 1.0))[0] == "a"  # a tie goes to A
    # within the tolerance the slice counts as kept equally: speed decides
    assert choose(stage(9, 1.0), stage(8, 0.5), tolerance=0.15)[0] == "b"
    untagged = StageStats(name="s", docs_in=10, docs_out=10, bytes_in=10**6, seconds=2.0)
    assert choose(untagged, stage(1, 1.0)) == ("b", "faster (no tagged slice reached both) (1 vs 0.5 MB/s)")


# The built-in corpus, whole works: Shakespeare's plays and the Python standard library's modules, the code being
# the tagged slice. A drops short documents (a cheap length check, but most modules are short); B drops documents
# heavy in symbols (a Python loop over every character, but code passes it). A's near dedup on word 3-grams and B's
# on character 9-grams drop the same one module; the word shingles are the faster.
AB_INPUT = {"sources": ["shakespeare-modern", "python-stdlib"], "chunk_chars": None, "stdlib_bytes": 1_000_000}
AB_TAG = {"field": "source", "regex": "python-stdlib"}
PIPELINE_A = {
    "input": AB_INPUT,
    "tag": AB_TAG,
    "stages": [
        {"kind": "min_chars", "params": {"min": 20_000}},
        {"kind": "dedup", "dedup": {"kind": "near", "shingle": "word:3", "threshold": 0.8}},
    ],
}
PIPELINE_B = {
    "input": AB_INPUT,
    "tag": AB_TAG,
    "stages": [
        {"kind": "max_symbol_ratio", "params": {"max": 0.3}},
        {"kind": "dedup", "dedup": {"kind": "near", "shingle": "char:9", "threshold": 0.8}},
    ],
}


@pytest.mark.slow  # trains or runs a real trainer: the full tier (make test-all)
def test_a_vs_b_the_hybrid_takes_bs_filter_and_as_faster_dedup(cli, tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump(PIPELINE_A))
    b.write_text(yaml.safe_dump(PIPELINE_B))
    out = cli.json("audit", str(a), str(b))
    assert out["hybrid"] == ["B/max_symbol_ratio", "A/dedup"]
    (filters, dedups) = out["pairs"]
    assert (filters["a"]["stage"], filters["b"]["stage"]) == ("min_chars", "max_symbol_ratio")
    assert filters["pick"] == "b" and filters["reason"].startswith("keeps more of the tagged slice")
    assert filters["a"]["drops_tagged_slice"] and filters["b"]["tagged_retention"] == 1.0
    # In its own pipeline A's dedup sees only the 4 modules A's filter let through, and "keeps all" of them; tried
    # on the hybrid's stream (every module), the two dedups keep the same 36 of 37 and speed decides.
    assert dedups["a"]["tagged_in"] == 4 and dedups["b"]["tagged_in"] == 37
    assert dedups["trials"]["a"]["tagged_out"] == dedups["trials"]["b"]["tagged_out"] == 36
    assert dedups["pick"] == "a" and dedups["reason"].startswith("faster at equal tagged retention")
    assert dedups["trials"]["a"]["mb_per_s"] > dedups["trials"]["b"]["mb_per_s"]
    # The hybrid, run for real: B's tagged retention, in less time than B
    s = out["summaries"]
    assert s["a"]["tagged_out"] == 4 and s["hybrid"]["tagged_out"] == s["b"]["tagged_out"] == 36
    assert s["hybrid"]["tagged_retention"] == pytest.approx(36 / 37) and s["hybrid"]["seconds"] < s["b"]["seconds"]
    assert [x["stage"] for x in out["hybrid_audit"]["stages"]] == out["hybrid"]
    assert s["hybrid"]["docs_out"] == out["hybrid_audit"]["stages"][-1]["docs_out"]
    assert out["notes"] == []
    table = cli("audit", str(a), str(b)).stdout
    assert "the hybrid takes B/max_symbol_ratio: keeps more of the tagged slice" in table


def test_audit_of_two_pipelines_refuses_run_and_a_third_file(cli, tmp_path):
    a = tmp_path / "a.yaml"
    a.write_text(yaml.safe_dump(PIPELINE_A))
    assert "--run records one pipeline's audit" in cli("audit", str(a), str(a), "--run", "x", code=2).stderr
    assert "not 3" in cli("audit", str(a), str(a), str(a), code=2).stderr
    missing = tmp_path / "missing.yaml"
    err = cli("audit", str(a), str(missing), code=2).stderr
    assert err.startswith(f"error: {missing}") and err.count("\n") == 1
