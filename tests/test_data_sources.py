"""Recipe sources that name data on disk (`data.sources`) and their measured supply (`data.source_counts`): every
format reads the same documents, the counts equal a count made here with the tokenizers library, the cache is hit and
invalidated, bad data is one line, and `yieldgate plan` shows the measured supply of a JSON-lines recipe."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from yieldgate.data import corpus
from yieldgate.data.recipe import train_tokenizer
from yieldgate.data.source_counts import count_source, measured
from yieldgate.data.sources import check_source, source_format, texts
from yieldgate.errors import InputError
from yieldgate.manifest import DedupPolicy, Filter, Recipe, Source, Tokenizer


@pytest.fixture(scope="module")
def docs() -> list[str]:
    """60 real documents (chunks of Milton's Areopagitica of 1,431 to 1,500 characters: one chunk each when counted)."""
    works = [w for w in corpus.load_corpus(stdlib_bytes=0) if w.id == "milton/areopagitica"]
    out = [text for _, text in corpus.documents(works, chunk_chars=1500)][:60]
    assert len(out) == 60 and max(map(len, out)) <= 2000
    return out


def write_jsonl(path: Path, docs: list[str], field: str = "text") -> Path:
    lines = "".join(json.dumps({"id": i, field: d}) + "\n" for i, d in enumerate(docs))
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(lines.encode()))
    elif path.name.endswith(".zst"):
        import zstandard

        path.write_bytes(zstandard.ZstdCompressor().compress(lines.encode()))
    else:
        path.write_text(lines)
    return path


def write_parquet(path: Path, docs: list[str], field: str = "text") -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": list(range(len(docs))), field: docs}), path, row_group_size=17)
    return path


def write_saved_dataset(path: Path, docs: list[str]) -> Path:
    """What `datasets.Dataset.save_to_disk` writes (an Arrow stream file and its state.json), written with pyarrow:
    importing `datasets` takes seconds (`test_a_real_save_to_disk_reads_the_same_documents` uses it)."""
    import pyarrow as pa

    path.mkdir()
    table = pa.table({"text": docs, "id": list(range(len(docs)))})
    for i, part in enumerate((table.slice(0, 25), table.slice(25))):
        with (
            pa.OSFile(str(path / f"data-0000{i}-of-00002.arrow"), "wb") as sink,
            pa.ipc.new_stream(sink, table.schema) as w,
        ):
            w.write_table(part)
    files = [{"filename": f"data-0000{i}-of-00002.arrow"} for i in range(2)]
    (path / "state.json").write_text(json.dumps({"_data_files": files, "_split": None}))
    (path / "dataset_info.json").write_text("{}")
    return path


def test_every_format_reads_the_same_documents_in_order(tmp_path, docs):
    (tmp_path / "texts").mkdir()
    for i, d in enumerate(docs):
        (tmp_path / "texts" / f"doc{i:03d}.txt").write_text(d)
    (tmp_path / "shards").mkdir()
    write_jsonl(tmp_path / "shards" / "part-0.jsonl", docs[:25])
    write_jsonl(tmp_path / "shards" / "part-1.jsonl.gz", docs[25:])
    (tmp_path / "pq").mkdir()
    write_parquet(tmp_path / "pq" / "a.parquet", docs[:30], "body")
    write_parquet(tmp_path / "pq" / "b.parquet", docs[30:], "body")
    cases = {
        "text": Source(name="s", path=str(tmp_path / "texts")),
        "jsonl": Source(name="s", path=str(write_jsonl(tmp_path / "d.jsonl", docs))),
        "jsonl.gz": Source(name="s", path=str(write_jsonl(tmp_path / "d.jsonl.gz", docs))),
        "jsonl.zst": Source(name="s", path=str(write_jsonl(tmp_path / "d.jsonl.zst", docs))),
        "jsonl folder": Source(name="s", path=str(tmp_path / "shards")),
        "parquet": Source(name="s", path=str(write_parquet(tmp_path / "d.parquet", docs, "body")), text_field="body"),
        "parquet folder": Source(name="s", path=str(tmp_path / "pq"), text_field="body"),
        "save_to_disk": Source(name="s", path=str(write_saved_dataset(tmp_path / "hf", docs))),
    }
    formats = {}
    for case, source in cases.items():
        check_source(source)
        assert [t for _, t in texts(source)] == docs, case
        formats[case] = source_format(source)
    assert formats == {
        "text": "text",
        "jsonl": "jsonl",
        "jsonl.gz": "jsonl",
        "jsonl.zst": "jsonl",
        "jsonl folder": "jsonl",
        "parquet": "parquet",
        "parquet folder": "parquet",
        "save_to_disk": "hf-dataset",
    }


@pytest.mark.slow
def test_a_real_save_to_disk_reads_the_same_documents_and_a_datasetdict_its_train_split(tmp_path, docs):
    """`datasets` itself writes the folders (importing it takes seconds, hence slow)."""
    datasets = pytest.importorskip("datasets", reason="datasets (brought by lm-eval in the dev group) is missing")
    datasets.Dataset.from_dict({"text": docs, "n": list(range(len(docs)))}).save_to_disk(str(tmp_path / "ds"))
    assert [t for _, t in texts(Source(name="s", path=str(tmp_path / "ds")))] == docs
    splits = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"text": docs[:40]}),
            "test": datasets.Dataset.from_dict({"text": docs[40:]}),
        }
    )
    splits.save_to_disk(str(tmp_path / "dd"))
    assert source_format(Source(name="s", path=str(tmp_path / "dd"))) == "hf-dataset"
    assert [t for _, t in texts(Source(name="s", path=str(tmp_path / "dd")))] == docs[:40]
    assert [t for _, t in texts(Source(name="s", path=str(tmp_path / "dd" / "test")))] == docs[40:]


@pytest.fixture(scope="module")
def team_tokenizer(tmp_path_factory, docs) -> Path:
    """A team's tokenizer: a byte-level BPE of 400 tokens trained on other text, saved as a `tokenizers` JSON file."""
    works = [w for w in corpus.load_corpus(stdlib_bytes=0) if w.id == "milton/paradise-regained"]
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    train_tokenizer([t for _, t in corpus.documents(works)], 400).save(str(path))
    return path


def test_counts_equal_an_independent_count_with_filters_and_exact_dedup(tmp_path, docs, team_tokenizer):
    from tokenizers import Tokenizer as HFTokenizer

    data = docs + docs[:7]  # seven exact duplicates
    source = Source(name="books", path=str(write_jsonl(tmp_path / "books.jsonl.gz", data)))
    recipe = Recipe(
        sources=[source],
        filters=[Filter(kind="min_chars", params={"min": 1460})],
        dedup=DedupPolicy(kind="exact"),
        tokenizer=Tokenizer(name="team", path=str(team_tokenizer)),
    )
    count = count_source(source, recipe, cache_dir=tmp_path)
    tok = HFTokenizer.from_file(str(team_tokenizer))
    kept = [d for d in dict.fromkeys(data) if len(d) >= 1460]
    assert 0 < len(kept) < len(docs)
    assert (count.documents, count.unique_tokens) == (67, sum(len(tok.encode(d).ids) for d in kept))
    assert not count.cached and count.cache_file.parent == tmp_path / "supply"


def test_the_cache_is_hit_the_second_time_and_missed_when_the_file_or_policy_changes(tmp_path, docs, team_tokenizer):
    path = write_jsonl(tmp_path / "d.jsonl", docs[:30])
    source = Source(name="d", path=str(path))
    recipe = Recipe(sources=[source], tokenizer=Tokenizer(name="team", path=str(team_tokenizer)))
    first = count_source(source, recipe, cache_dir=tmp_path)
    second = count_source(source, recipe, cache_dir=tmp_path)
    assert (first.cached, second.cached) == (False, True)
    assert (
        (second.documents, second.unique_tokens) == (first.documents, first.unique_tokens) == (30, second.unique_tokens)
    )
    write_jsonl(path, docs[:31])
    os.utime(path, ns=(1, 1))  # even a rewrite that kept the old time would change the size
    grown = count_source(source, recipe, cache_dir=tmp_path)
    assert not grown.cached and grown.documents == 31 and grown.unique_tokens > first.unique_tokens
    filtered = recipe.model_copy(update={"filters": [Filter(kind="min_chars", params={"min": 1460})]})
    assert not count_source(source, filtered, cache_dir=tmp_path).cached
    grown.cache_file.write_text("{damaged")
    again = count_source(source, recipe, cache_dir=tmp_path)
    assert not again.cached and again.unique_tokens == grown.unique_tokens


def test_the_builtin_tokenizer_counts_a_source_and_measured_fills_only_sources_on_disk(tmp_path, docs):
    path = write_parquet(tmp_path / "d.parquet", docs)
    recipe = Recipe(
        sources=[
            Source(name="disk", path=str(path)),
            Source(name="milton"),
            Source(name="given", path=str(path), unique_tokens=5),
            Source(name="elsewhere", path=str(tmp_path / "not-here.jsonl")),
        ]
    )
    out = measured(recipe, cache_dir=tmp_path)
    counts = {s.name: (s.documents, s.unique_tokens) for s in out.sources}
    assert counts["disk"][0] == 60 and counts["disk"][1] > 0
    assert counts["milton"] == (None, None) and counts["given"] == (None, 5) and counts["elsewhere"] == (None, None)
    assert recipe.sources[0].unique_tokens is None  # the recipe given is left as it was
    assert count_source(recipe.sources[0], recipe, cache_dir=tmp_path).cached


def _one_line(exc: pytest.ExceptionInfo[InputError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_bad_sources_are_one_line_naming_the_field_and_the_fix(tmp_path, docs, monkeypatch):
    write_jsonl(tmp_path / "content.jsonl", docs[:3], field="content")
    write_parquet(tmp_path / "body.parquet", docs[:3], field="body")
    (tmp_path / "table.csv").write_text("text\nhello\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken.jsonl").write_text('{"text": "fine"}\n{"text": \n')
    cases = [
        (Source(name="m", path=str(tmp_path / "missing.jsonl")), ["missing.jsonl does not exist", "path:"]),
        (Source(name="c", path=str(tmp_path / "table.csv")), ["unknown format", ".jsonl"]),
        (Source(name="e", path=str(tmp_path / "empty")), ["no data files under"]),
        (Source(name="j", path=str(tmp_path / "content.jsonl")), ["no text field 'text'", "id, content", "text_field"]),
        (Source(name="p", path=str(tmp_path / "body.parquet")), ["no text field 'text'", "id, body", "text_field"]),
        (Source(name="n", path=str(tmp_path / "body.parquet"), text_field="id"), ["holds int, not text"]),
        (Source(name="nowhere"), ["not a built-in source", "give `path:`"]),
    ]
    for source, words in cases:
        with pytest.raises(InputError) as exc:
            check_source(source)
        message = _one_line(exc)
        assert message.startswith(f"source {source.name!r}: ") and all(w in message for w in words), message
    check_source(Source(name="milton"))
    monkeypatch.chdir(tmp_path)
    check_source(Source(name="content.jsonl", text_field="content"))  # a bare name that is a file, as resolve reads it
    check_source(Source(name="mine", path="builtin:shakespeare-folio"))
    with pytest.raises(InputError) as exc:
        list(texts(Source(name="b", path=str(tmp_path / "broken.jsonl"))))
    assert "broken.jsonl line 2 is not JSON" in _one_line(exc)


def test_damaged_compressed_files_are_one_line_not_a_silent_end(tmp_path, docs):
    import zstandard

    lines = "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()
    gz, zst = gzip.compress(lines), zstandard.ZstdCompressor().compress(lines)
    (tmp_path / "cut.jsonl.gz").write_bytes(gz[: len(gz) // 2])
    (tmp_path / "cut.jsonl.zst").write_bytes(zst[: len(zst) // 2])
    (tmp_path / "not.jsonl.gz").write_bytes(b"plain text, not gzip\n")
    (tmp_path / "not.jsonl.zst").write_bytes(b"plain text, not zstandard\n")
    (tmp_path / "not.parquet").write_bytes(b"PAR1 and then nothing")
    for name in ("cut.jsonl.gz", "cut.jsonl.zst", "not.jsonl.gz", "not.jsonl.zst", "not.parquet"):
        source = Source(name="z", path=str(tmp_path / name))
        with pytest.raises(InputError) as exc:
            count_source(source, Recipe(sources=[source]), cache_dir=tmp_path)
        message = _one_line(exc)
        assert f"{name} " in message and "re-create or re-download it" in message, message


POLICY = """name: p
version: 1
stages:
  - {name: probe, tokens: 150000, compute_share: 0.05}
  - {name: pilot, tokens: 500000, compute_share: 0.15}
  - {name: full, tokens: 5000000, compute_share: 0.8}
requirements: {min_yield_per_btok: 250, max_epochs: 4}
"""


def test_plan_shows_the_measured_supply_of_a_jsonl_recipe(cli, tmp_path, docs, team_tokenizer, monkeypatch):
    from tokenizers import Tokenizer as HFTokenizer

    monkeypatch.setenv("YIELDGATE_CACHE", str(tmp_path / "cache"))
    books = write_jsonl(tmp_path / "books.jsonl.zst", docs)
    (tmp_path / "p.yaml").write_text(POLICY)
    (tmp_path / "r.yaml").write_text(
        f"sources:\n  - {{name: books, path: {books}, weight: 0.7}}\n"
        "  - {name: web, weight: 0.3, unique_tokens: 1500000}\n"
        f"tokenizer: {{name: team, path: {team_tokenizer}}}\n"
    )
    unique = sum(len(e.ids) for e in HFTokenizer.from_file(str(team_tokenizer)).encode_batch(docs))
    out = cli.json("plan", str(tmp_path / "r.yaml"), "--policy", str(tmp_path / "p.yaml"))
    full = {r["source"]: r for r in out["stages"][2]["sources"]}
    assert full["books"]["unique_tokens"] == unique
    assert full["books"]["epochs"] == pytest.approx(0.7 * 5_000_000 / unique) and full["books"]["over_limit"]
    assert [g["source"] for g in out["grow"]] == ["books"]
    assert len(list((tmp_path / "cache" / "supply").glob("*.json"))) == 1
    (tmp_path / "bad.yaml").write_text(f"sources:\n  - {{name: books, path: {books}, text_field: body}}\n")
    err = cli("plan", str(tmp_path / "bad.yaml"), "--policy", str(tmp_path / "p.yaml"), code=2).stderr
    assert "no text field 'body' (it has: id, text)" in err and err.count("\n") == 1, err
