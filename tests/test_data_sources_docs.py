"""docs/data-sources.md's examples run as written: its recipe over a JSON-lines file and a folder of Parquet files
(written here from the built-in texts), its one-line refusal, and its training script with `open_recipe`."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from yieldgate.data import corpus

PAGE = Path(__file__).resolve().parents[1] / "docs" / "data-sources.md"
CODE_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def blocks(lang: str) -> list[str]:
    return [body for kind, body in CODE_BLOCK.findall(PAGE.read_text()) if kind == lang]


def _chunks(work_id: str, n: int) -> list[str]:
    works = [w for w in corpus.load_corpus(stdlib_bytes=0) if w.id == work_id]
    return [text for _, text in corpus.documents(works, chunk_chars=1500)][:n]


@pytest.mark.slow
def test_the_pages_recipe_refusal_and_script_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from yieldgate import Ledger
    from yieldgate.data import check_source
    from yieldgate.errors import InputError
    from yieldgate.manifest import load_recipe

    monkeypatch.chdir(tmp_path)
    books = "".join(json.dumps({"text": t}) + "\n" for t in _chunks("milton/areopagitica", 40))
    (tmp_path / "books.jsonl.gz").write_bytes(gzip.compress(books.encode()))
    (tmp_path / "plays").mkdir()
    plays = _chunks("shakespeare/hamlet/modern", 40)
    for i in range(2):
        part = plays[i * 20 : (i + 1) * 20]
        pq.write_table(pa.table({"id": list(range(len(part))), "body": part}), tmp_path / "plays" / f"part-{i}.parquet")
    (recipe,) = blocks("yaml")
    (tmp_path / "recipe.yaml").write_text(recipe)

    (refusal,) = blocks("text")
    plays_source = load_recipe("recipe.yaml").sources[1].model_copy(update={"text_field": None})
    with pytest.raises(InputError) as exc:
        check_source(plays_source)
    assert str(exc.value) == refusal.strip()

    (script,) = blocks("python")
    exec(compile(script, str(PAGE), "exec"), {})
    with Ledger(tmp_path / "yieldgate.db", readonly=True) as ledger:
        manifest = ledger.manifest("bigram/s0")
        steps = ledger.steps("bigram/s0", ["tokens", "loss"])
    assert len(steps) == 16_384 // (8 * 64) and steps["tokens"].iloc[-1] == 16_384
    assert manifest is not None and manifest.data is not None and manifest.data.tokenizer is not None
    assert manifest.data.tokenizer.content_hash and {s.name: s.weight for s in manifest.data.sources} == {
        "books": 3.0,
        "plays": 1.0,
    }
    assert all(s.unique_tokens for s in manifest.data.sources)
