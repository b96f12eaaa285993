from __future__ import annotations

import numpy as np
import pytest

from yieldgate.data import corpus, dedup, dedup_eval, pipeline
from yieldgate.errors import InputError
from yieldgate.manifest import DedupPolicy


def _sets(texts, spec):
    sh = dedup.shingle(texts, spec)
    return [set(sh.hashes[sh.offsets[d] : sh.offsets[d + 1]].tolist()) for d in range(len(texts))]


def test_shingles_are_the_normalised_ngrams():
    texts = ["The cat, the CAT!", "the   cat the cat", "a", "", "dog cat the"]
    words = _sets(texts, "word:2")
    assert words[0] == words[1] and len(words[0]) == 2  # "the cat" (twice), "cat the"
    assert words[2] == words[3] == set()  # fewer than 2 words: no shingles
    assert len(words[4]) == 2 and len(words[4] & words[0]) == 1  # "cat the"
    chars = _sets(texts, "char:3")
    assert chars[0] == chars[1] and len(chars[0]) == len({"the", "he ", "e c", " ca", "cat", "at ", "t t", " th"})
    assert dedup.shingle(texts, "word:1").words.tolist() == [4, 4, 1, 0, 3]


def test_long_words_and_long_char_shingles_hash_every_byte():
    a, b = "x" * 20 + "a", "x" * 20 + "b"
    assert _sets([a], "word:1") != _sets([b], "word:1")
    assert _sets([a + " y"], "char:21")[0] != _sets([b + " y"], "char:21")[0]


def test_shingles_never_span_documents():
    sh = dedup.shingle(["one two", "three"], "word:2")
    assert sh.counts().tolist() == [1, 0]
    sh = dedup.shingle(["abc", "def"], "char:4")
    assert sh.counts().tolist() == [0, 0]


def test_signature_estimates_jaccard():
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(4000)]
    a = rng.choice(vocab, 3000, replace=False)
    b = np.concatenate([a[:2000], rng.choice(vocab, 1000)])
    sa, sb = _sets([" ".join(a)], "word:1")[0], _sets([" ".join(b)], "word:1")[0]
    exact = len(sa & sb) / len(sa | sb)
    sig = dedup.signatures(dedup.shingle([" ".join(a), " ".join(b)], "word:1"), 512)
    est = dedup.estimated_jaccard(sig, np.array([0]), np.array([1]))[0]
    assert abs(est - exact) < 3 * np.sqrt(exact * (1 - exact) / 512)


def test_densification_fills_empty_bins_consistently():
    sig = dedup.signatures(dedup.shingle(["a b c", "a b c", "a b d"], "word:1"), 64)
    assert (sig != np.uint32(0xFFFFFFFF)).all()  # 3 shingles, 64 bins: densified
    assert (sig[0] == sig[1]).all() and not (sig[0] == sig[2]).all()


def test_lsh_params_cover_the_permutations_and_bend_at_the_threshold():
    for threshold in (0.1, 0.5, 0.8):
        bands, rows = dedup.lsh_params(threshold, 128)
        assert bands * rows == 128
        p = lambda s, rows=rows, bands=bands: 1 - (1 - s**rows) ** bands  # noqa: E731
        assert p(threshold * 0.5) < 0.5 < p(min(threshold * 1.5, 1))


def test_exact_dedup_keeps_the_first_of_each_cluster():
    docs = [("a", "Hello  World"), ("b", "other"), ("c", "hello world"), ("d", "HELLO WORLD ")]
    result = dedup.dedup(docs, DedupPolicy(kind="exact"))
    assert result.clusters == [[0, 2, 3]] and result.similarity == [1.0]
    assert result.keep.tolist() == [True, True, False, False]
    assert result.duplicate_share == 4 / 7
    assert result.stats() == {"docs_in": 4, "docs_out": 2, "clusters": 1, "duplicate_share": 4 / 7}


def test_near_dedup_clusters_and_records_its_policy():
    base = " ".join(f"word{i}" for i in range(300))
    edited = base.replace("word7 ", "changed ").replace("word200 ", "other ")
    docs = [("x", base), ("y", "entirely different text " * 20), ("z", edited)]
    result = dedup.dedup(docs, DedupPolicy(kind="near", shingle="word:3", threshold=0.8))
    assert result.policy.bands * result.policy.rows == 128
    assert result.clusters == [[0, 2]] and 0.8 <= result.similarity[0] < 1
    out = result.to_dict()
    assert out["clusters"][0]["members"] == ["x", "z"] and out["documents"] == 3
    assert out["policy"]["kind"] == "near" and out["policy"]["threshold"] == 0.8


def test_exact_jaccard_pairs_match_python_sets():
    texts = ["a b c d e f", "a b c d e g", "x y z", "a b c d e f", "q r s t u v w"] * 3
    sets = _sets(texts, "word:2")
    i, j, jac = dedup_eval.exact_jaccard_pairs(dedup.shingle(texts, "word:2"), 0.3, dense_df=3)
    want = {
        (a, b): len(sets[a] & sets[b]) / len(sets[a] | sets[b])
        for a in range(len(texts))
        for b in range(a + 1, len(texts))
        if len(sets[a] & sets[b]) / len(sets[a] | sets[b]) >= 0.3
    }
    assert dict(zip(zip(i.tolist(), j.tolist(), strict=True), jac.tolist(), strict=True)) == pytest.approx(want)


def test_bad_shingle_and_paths(tmp_path):
    with pytest.raises(InputError, match="word:N"):
        dedup.shingle(["x"], "token:3")
    with pytest.raises(InputError, match="no such file"):
        pipeline.read_documents([tmp_path / "missing"])


def test_read_documents_walks_folders_and_chunks(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("line one\nline two\n")
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / ".hidden").write_text("skip\n")
    assert [d for d, _ in pipeline.read_documents([tmp_path])] == [
        str(tmp_path / "a.txt"),
        str(tmp_path / "sub" / "b.txt"),
    ]
    chunks = pipeline.read_documents([tmp_path / "sub" / "b.txt"], chunk_chars=10)
    assert [d for d, _ in chunks] == [f"{tmp_path / 'sub' / 'b.txt'}#0", f"{tmp_path / 'sub' / 'b.txt'}#1"]


@pytest.fixture(scope="module")
def works():
    return corpus.load_corpus(stdlib_bytes=0)


def test_known_pairs_of_the_corpus(works):
    dupes, overlaps = dedup_eval.known_pairs(works)
    assert len(dupes) == 35 + 7
    assert ("shakespeare/hamlet/folio", "shakespeare/hamlet/modern") in dupes
    assert ("milton/paradise-lost", "milton/paradise-lost/copy-2") in dupes
    assert ("shakespeare/loves-labours-lost/folio", "shakespeare/passionate-pilgrim/modern") in overlaps


def test_near_dedup_finds_editions_and_copies_on_a_real_subset(works):
    # Threshold chosen on four comedies, scored on four tragedies and histories plus two Milton works
    # (the full proof over every work is benchmarks/bench_dedup.py).
    pick = lambda slugs: [w for w in works if any(f"/{s}/" in w.id + "/" for s in slugs)]  # noqa: E731
    tune = pick(["as-you-like-it", "twelfth-night", "much-ado-about-nothing", "comedy-of-errors"])
    truth, _ = dedup_eval.known_pairs(tune)
    threshold = dedup_eval.choose_threshold(dedup_eval.work_similarities(tune, "word:3", 128), truth)
    assert 0.03 < threshold < 0.3
    test = pick(["hamlet", "macbeth", "henry-v", "richard-ii", "areopagitica", "paradise-regained"])
    truth, ignore = dedup_eval.known_pairs(test)
    found = dedup_eval.found_pairs(
        [w.id for w in test], [w.text for w in test], DedupPolicy(kind="near", shingle="word:3", threshold=threshold)
    )
    s = dedup_eval.score(found, truth, ignore)
    assert s.truth == 6 and s.recall >= 0.9 and s.precision >= 0.95


def test_cli_dedup_json_and_bad_input(cli, tmp_path):
    base = " ".join(f"w{i}" for i in range(400))
    (tmp_path / "a.txt").write_text(base)
    (tmp_path / "b.txt").write_text(base.replace("w10 ", "x "))
    (tmp_path / "c.txt").write_text("something else entirely\n" * 30)
    (tmp_path / "d.txt").write_text(base)
    exact = cli.json("dedup", str(tmp_path))
    assert exact["documents"] == 4 and exact["duplicate_share"] == pytest.approx(400 / (400 * 3 + 90))
    assert [c["members"] for c in exact["clusters"]] == [[str(tmp_path / "a.txt"), str(tmp_path / "d.txt")]]
    near = cli.json("dedup", str(tmp_path), "--near", "0.8", "--shingle", "word:2")
    assert [len(c["members"]) for c in near["clusters"]] == [3] and near["policy"]["shingle"] == "word:2"
    chunked = cli.json("dedup", str(tmp_path / "c.txt"), "--chunk-chars", "100")
    assert chunked["documents"] == 8 and chunked["clusters"][0]["members"][0] == f"{tmp_path / 'c.txt'}#0"
    assert "a.txt" in cli("dedup", str(tmp_path)).stdout
    result = cli("dedup", str(tmp_path), "--near", "1.5", code=2)
    assert result.stderr.startswith("error: dedup policy: threshold") and result.stderr.count("\n") == 1


@pytest.mark.slow
def test_a_text_repeated_many_times_is_one_cluster_linked_to_its_first():
    base = " ".join(f"t{i}" for i in range(200))
    docs = [(str(k), base) for k in range(3000)] + [("edit", base.replace("t5 ", "x ")), ("other", "a b c d e f")]
    result = dedup.dedup(docs, DedupPolicy(kind="near", shingle="word:3", threshold=0.8))
    assert result.clusters == [list(range(3001))] and result.keep.sum() == 2
    i, j, _ = result.pairs
    assert len(i) <= (dedup._MAX_GAP + 1) * 3001  # a star and short runs, not all 4.5 million pairs
