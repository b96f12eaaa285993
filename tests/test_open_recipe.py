"""`yieldgate.data.open_recipe`: a team's script draws the probe trainer's own stream of a recipe over data on disk;
the recipe's weights for a team's own loader; a team's tokenizer, whose content hash lands in the manifest; and
`yieldgate.data` without torch."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from yieldgate.data import corpus
from yieldgate.data.recipe import resolve, train_tokenizer
from yieldgate.data.supply import recipe_weights
from yieldgate.errors import InputError
from yieldgate.manifest import load_recipe


def _chunks(work_id: str, n: int) -> list[str]:
    works = [w for w in corpus.load_corpus(stdlib_bytes=0) if w.id == work_id]
    return [text for _, text in corpus.documents(works, chunk_chars=1500)][:n]


@pytest.fixture(scope="module")
def recipe_file(tmp_path_factory) -> Path:
    """Two sources on disk written from the built-in texts (Milton as JSON lines, gzipped; Hamlet as Parquet under
    `body`), weights 3:1, the Parquet source half shuffled (a damaged control), exact dedup and a filter."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("recipe")
    books = "".join(json.dumps({"text": t}) + "\n" for t in _chunks("milton/areopagitica", 50))
    (root / "books.jsonl.gz").write_bytes(gzip.compress(books.encode()))
    pq.write_table(pa.table({"body": _chunks("shakespeare/hamlet/modern", 50)}), root / "plays.parquet")
    (root / "recipe.yaml").write_text(
        f"sources:\n  - {{name: books, path: {root / 'books.jsonl.gz'}, weight: 3}}\n"
        f"  - {{name: plays, path: {root / 'plays.parquet'}, text_field: body, weight: 1, shuffled_share: 0.5}}\n"
        "filters: [{kind: min_chars, params: {min: 100}}]\ndedup: {kind: exact}\n"
        "tokenizer: {name: bpe-512, vocab_size: 512}\n"
    )
    return root / "recipe.yaml"


def test_open_recipe_yields_the_probe_trainers_stream(recipe_file):
    from yieldgate.data import open_recipe
    from yieldgate.probe.config import ProbeConfig
    from yieldgate.probe.parts import Sampler

    cfg = ProbeConfig(tokens=6_000, seed=3, batch_size=4, context=32)
    data = open_recipe(recipe_file, tokens=cfg.tokens, context=32, batch_size=4, seed=3)
    trainer_data = resolve(load_recipe(recipe_file), held_out=0.1, seed=0)  # as a campaign's probe resolves it
    sampler = Sampler(trainer_data, cfg, len(data))
    batches = list(data)
    assert len(batches) == len(data) == -(-6_000 // (4 * 32)) == 47
    for batch in batches:
        x, y, counts, ids = sampler.batch()
        assert batch["input_ids"].equal(x) and batch["labels"].equal(y)
        assert batch["sources"] == counts and batch["sample_ids"] == ids
    drawn = {name: sum(b["sources"][name] for b in batches) for name in ("books", "plays")}
    assert drawn["books"] > 2 * drawn["plays"] > 0  # weights 3:1
    assert [b["input_ids"].tolist() for b in data] == [b["input_ids"].tolist() for b in batches]  # it starts again
    import torch
    from torch.utils.data import DataLoader

    loaded = list(DataLoader(data, batch_size=None))
    assert [b["input_ids"].tolist() for b in loaded] == [b["input_ids"].tolist() for b in batches]
    assert [b["sources"] for b in loaded] == [b["sources"] for b in batches]
    rows = [row for b in batches for row in torch.cat([b["input_ids"], b["labels"][:, -1:]], dim=1)]
    sequences = list(data.sequences())
    assert len(sequences) == len(data.sequences()) == len(rows) == 47 * 4
    assert all(s["input_ids"].equal(r) and s["labels"].equal(r) for s, r in zip(sequences, rows, strict=True))
    assert sequences[0]["input_ids"][1:].equal(batches[0]["labels"][0])
    workers = iter(DataLoader(data, batch_size=None, num_workers=2))
    with pytest.raises(InputError, match="read it with num_workers=0 or 1, not 2"):
        next(workers)
    # Stopped here (0.07 s), not by a later garbage collection: the exception holds the iterator in a reference
    # cycle, and its finalizer, run by the next collection, waited 5 s for each worker (tests/support/worker_exit.py)
    workers._shutdown_workers()
    assert data.recipe.tokenizer.content_hash == trainer_data.tokenizer_hash
    accounted = {s.name: s.unique_tokens for s in data.recipe.sources}
    assert accounted == {name: len(s.train) for name, s in trainer_data.sources.items()}
    assert trainer_data.sources["plays"].stats["shuffled_docs"] > 0


def test_the_recipes_weights_for_a_teams_own_loader(recipe_file, tmp_path):
    from yieldgate.data import open_recipe
    from yieldgate.data import recipe_weights as exported

    assert exported is recipe_weights
    assert recipe_weights(recipe_file) == {"books": 0.75, "plays": 0.25}
    assert open_recipe(recipe_file, tokens=1_000).weights == {"books": 0.75, "plays": 0.25}
    staged = tmp_path / "staged.yaml"
    staged.write_text(
        "sources: [{name: a, weight: 1}, {name: b, weight: 3}]\n"
        "curriculum: {kind: staged, stages: [{until_share: 0.5, weights: {a: 1, b: 0}}]}\n"
    )
    assert recipe_weights(staged) == {"a": 0.25, "b": 0.75}
    assert recipe_weights(staged, at=400, of=1_000) == {"a": 1.0, "b": 0.0}
    assert recipe_weights(staged, at=600, of=1_000) == {"a": 0.25, "b": 0.75}
    with pytest.raises(InputError, match="pass of"):
        recipe_weights(staged, at=400)


def test_a_teams_tokenizer_file_or_folder_is_used_and_its_hash_lands_in_the_manifest(recipe_file, tmp_path):
    """The tokenizer a team trained elsewhere (a `tokenizers` JSON file, or a Hugging Face tokenizer folder holding
    tokenizer.json) tokenizes the recipe; the manifest records the sha256 of its file."""
    import torch

    from yieldgate.probe.config import ProbeConfig
    from yieldgate.probe.model import GPT, GPTConfig
    from yieldgate.probe.parts import Portfolio
    from yieldgate.probe.trainer import probe_manifest

    team = train_tokenizer(_chunks("milton/paradise-regained", 40), 300)
    (tmp_path / "hf-tokenizer").mkdir()
    team.save(str(tmp_path / "team.json"))
    team.save(str(tmp_path / "hf-tokenizer" / "tokenizer.json"))
    (tmp_path / "hf-tokenizer" / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    digest = hashlib.sha256((tmp_path / "team.json").read_bytes()).hexdigest()
    text = recipe_file.read_text().replace("tokenizer: {name: bpe-512, vocab_size: 512}", "tokenizer: {name: team}")
    builtin = resolve(load_recipe(recipe_file), held_out=0.1)
    for where in (tmp_path / "team.json", tmp_path / "hf-tokenizer"):
        (tmp_path / "r.yaml").write_text(text.replace("{name: team}", f"{{name: team, path: {where}}}"))
        data = resolve(load_recipe(tmp_path / "r.yaml"), held_out=0.1)
        assert data.tokenizer.get_vocab_size() == team.get_vocab_size() == 300
        books = data.sources["books"]
        first = books.train[: len(team.encode(_first_training_text(data)).ids)]
        assert first.tolist() == team.encode(_first_training_text(data)).ids
        cfg = ProbeConfig(tokens=1_000, context=32)
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=300, context=32, layers=1, width=16, heads=2))
        manifest = probe_manifest(data, cfg, model, Portfolio(data, cfg))
        assert manifest.data.tokenizer.content_hash == digest and manifest.data.tokenizer.path == str(where)
        assert builtin.recipe.tokenizer.content_hash != digest and builtin.recipe.tokenizer.path is None
    (tmp_path / "r.yaml").write_text(text.replace("{name: team}", f"{{name: team, path: {tmp_path / 'nowhere'}}}"))
    with pytest.raises(InputError) as exc:
        resolve(load_recipe(tmp_path / "r.yaml"))
    assert "tokenizer.path:" in str(exc.value) and "tokenizer.json" in str(exc.value) and "\n" not in str(exc.value)


def _first_training_text(data) -> str:
    """The first training document of `books` (the first record not held out, as the recipe's resolution keeps it)."""
    from yieldgate.data.recipe import disk_works

    source = data.recipe.sources[0]
    works = disk_works(source)
    train, _ = corpus.split_by_work(
        works + [w for s in data.recipe.sources[1:] for w in disk_works(s)], held_out=0.1, seed=0
    )
    return next(w.text for w in train if w.source == "books")


def test_the_manifest_of_a_recipe_without_the_new_fields_keeps_its_hash():
    """Fields added to Source and Tokenizer are left out of the canonical form while unset: every stored manifest
    keeps its content hash."""
    from yieldgate.manifest import Manifest

    manifest = Manifest(data={"sources": [{"name": "a"}], "tokenizer": {"name": "t"}}, seed=1)
    dumped = manifest.canonical()["data"]
    assert "text_field" not in dumped["sources"][0] and "documents" not in dumped["sources"][0]
    assert "path" not in dumped["tokenizer"]
    # The hash this manifest had before the fields existed (computed with the manifest.py of commit 6ff552f).
    assert manifest.content_hash() == "4e03865079b57255533cacc8ce5675b577bf3ed74107223ba4c3ffe15a9ce155"
    with_field = Manifest(data={"sources": [{"name": "a", "text_field": "body"}], "tokenizer": {"name": "t"}}, seed=1)
    assert with_field.content_hash() != manifest.content_hash()


def test_yieldgate_data_imports_without_torch_and_open_recipe_names_the_extra():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import yieldgate.data, yieldgate.data.sources, yieldgate.data.source_counts\n"
        "from yieldgate.data import check_source, recipe_weights\n"
        "try:\n    from yieldgate.data import open_recipe\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "MissingExtra yieldgate.data.open_recipe needs torch, which is not installed: pip install 'yieldgate[torch]'"
    ), out.stderr


def test_resolve_reads_each_record_as_a_work_held_out_whole(recipe_file):
    data = resolve(load_recipe(recipe_file), held_out=0.2)
    assert set(data.sources) == {"books", "plays"}
    for source in data.sources.values():
        assert source.stats["held_out_docs"] > 0 and source.stats["train_docs"] > source.stats["held_out_docs"]
        assert np.issubdtype(source.train.dtype, np.integer)
