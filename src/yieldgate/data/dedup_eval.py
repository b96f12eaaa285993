"""How well near dedup finds the built-in corpus's known duplicates: ground truth, exact Jaccard, scores.

Ground truth at the level of works: the modern and First Folio editions of each Shakespeare play, and the
two copies of each Milton work (`corpus.py` names both). Works that share some text without being copies
(`corpus._SHARED_GROUP`: Milton's minor-poem volumes, The Passionate Pilgrim and Love's Labour's Lost)
are neither right nor wrong: a pair of them is left out of precision and recall.

The threshold is chosen on one part of the corpus (the comedies) and scored on another (the tragedies and
histories), with the genres of the First Folio's own catalogue (`corpus._SHAKESPEARE`).

At the level of chunks the truth is the exact Jaccard similarity of every pair of chunks' shingle sets
(the same shingles the MinHash sees), computed in full: frequent shingles as a dense matrix product,
the rest as a sparse one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from yieldgate.data import corpus
from yieldgate.data.dedup import Shingled, estimated_jaccard, lsh_params, near_pairs, shingle, signatures
from yieldgate.manifest import DedupPolicy

__all__ = [
    "Score",
    "choose_threshold",
    "exact_jaccard_pairs",
    "found_pairs",
    "known_pairs",
    "score",
    "work_level",
    "work_similarities",
]

Pair = tuple[str, str]


@dataclass(frozen=True)
class Score:
    """Precision and recall of a set of found pairs against the true pairs."""

    precision: float
    recall: float
    found: int
    true_positives: int
    truth: int

    def to_dict(self) -> dict[str, float | int]:
        return {
            "precision": self.precision,
            "recall": self.recall,
            "found": self.found,
            "true_positives": self.true_positives,
            "truth": self.truth,
        }


def _key(a: str, b: str) -> Pair:
    return (a, b) if a < b else (b, a)


def known_pairs(works: Iterable[corpus.Work]) -> tuple[set[Pair], set[Pair]]:
    """(duplicates, overlaps) among `works`: the editions and copies of one work, and other pairs that
    share a corpus group (they share some text; scoring leaves them out)."""
    by_group: dict[str, list[corpus.Work]] = {}
    for w in works:
        by_group.setdefault(w.group, []).append(w)
    dupes: set[Pair] = set()
    overlaps: set[Pair] = set()
    for members in by_group.values():
        for x, a in enumerate(members):
            for b in members[x + 1 :]:
                same_work = (
                    a.id.rsplit("/", 1)[0] == b.id.rsplit("/", 1)[0]
                    if a.author == "shakespeare"
                    else a.id.removesuffix("/copy-2") == b.id.removesuffix("/copy-2")
                )
                (dupes if same_work else overlaps).add(_key(a.id, b.id))
    return dupes, overlaps


def score(found: Iterable[Pair], truth: set[Pair], ignore: set[Pair] = frozenset()) -> Score:  # type: ignore[assignment]
    """Precision and recall of `found` pairs; pairs in `ignore` count neither way."""
    found = {_key(*p) for p in found} - ignore
    tp = len(found & truth)
    return Score(
        precision=tp / len(found) if found else 1.0,
        recall=tp / len(truth) if truth else 1.0,
        found=len(found),
        true_positives=tp,
        truth=len(truth),
    )


def work_similarities(works: Sequence[corpus.Work], spec: str, permutations: int) -> dict[Pair, float]:
    """Estimated Jaccard (MinHash, no LSH) of every pair of works: what a threshold is chosen from."""
    sig = signatures(shingle([w.text for w in works], spec), permutations)
    i, j = np.triu_indices(len(works), k=1)
    sim = estimated_jaccard(sig, i, j)
    return {_key(works[a].id, works[b].id): s for a, b, s in zip(i.tolist(), j.tolist(), sim.tolist(), strict=True)}


def choose_threshold(similarities: dict[Pair, float], truth: set[Pair], ignore: set[Pair] = frozenset()) -> float:  # type: ignore[assignment]
    """The threshold of highest F1 over the pairs' similarities: the midpoint between the lowest
    similarity kept and the highest one below it (the middle of the gap that F1 cannot tell apart)."""
    items = sorted(((s, p in truth) for p, s in similarities.items() if p not in ignore), reverse=True)
    sims = np.array([s for s, _ in items])
    hits = np.cumsum([t for _, t in items])
    kept = np.arange(1, len(items) + 1)
    f1 = 2 * hits / (kept + len(truth))
    best = int(np.argmax(f1))
    below = sims[best + 1] if best + 1 < len(sims) else 0.0
    return float((sims[best] + below) / 2)


def found_pairs(ids: Sequence[str], texts: Sequence[str], policy: DedupPolicy) -> dict[Pair, float]:
    """The pairs the near-dedup pipeline (MinHash + LSH + verification) reports, with their estimates."""
    bands, rows = (policy.bands, policy.rows) if policy.bands else lsh_params(policy.threshold, policy.permutations)
    sh = shingle(texts, policy.shingle)
    i, j, sim = near_pairs(
        signatures(sh, policy.permutations),
        bands,
        rows,  # type: ignore[arg-type]
        policy.threshold,
        valid=sh.counts() > 0,
    )
    return {_key(ids[a], ids[b]): float(s) for a, b, s in zip(i, j, sim, strict=True)}


def exact_jaccard_pairs(
    sh: Shingled, threshold: float, dense_df: int = 64
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair (i < j) of documents whose shingle sets have Jaccard >= threshold, with it, exactly.

    |A ∩ B| for all pairs is X X^T for the documents x shingles incidence matrix X. Shingles in more than
    `dense_df` documents go into a dense product (BLAS), the rest into a sparse one, whose cost grows with
    the square of each shingle's document frequency."""
    docs = len(sh.offsets) - 1
    owner = np.repeat(np.arange(docs), sh.counts())
    order = np.lexsort((sh.hashes, owner))
    doc, h = owner[order], sh.hashes[order]
    first = np.concatenate(([True], (doc[1:] != doc[:-1]) | (h[1:] != h[:-1])))  # one entry per (doc, shingle)
    doc, col = doc[first], np.unique(h[first], return_inverse=True)[1]
    size = np.bincount(doc, minlength=docs).astype(np.float64)
    df = np.bincount(col)
    frequent = df[col] > dense_df
    remap = np.cumsum(df > dense_df) - 1
    dense = np.zeros((docs, int((df > dense_df).sum())), dtype=np.float32)
    dense[doc[frequent], remap[col[frequent]]] = 1
    inter = dense @ dense.T  # exact: counts below 2^24
    rare = sparse.csr_matrix(
        (np.ones(int((~frequent).sum()), dtype=np.float32), (doc[~frequent], col[~frequent])), shape=(docs, len(df))
    )
    inter += (rare @ rare.T).toarray()
    i, j = np.triu_indices(docs, k=1)
    union = size[i] + size[j] - inter[i, j]
    jac = np.divide(inter[i, j], union, out=np.zeros(len(i)), where=union > 0)
    ok = jac >= threshold
    return i[ok], j[ok], jac[ok]


TUNE_GENRES = ("comedy",)
"""The threshold is chosen on these genres' works (genres of the First Folio's catalogue, `corpus._SHAKESPEARE`)..."""
TEST_GENRES = ("tragedy", "history")
"""...and scored on these."""


def work_level(works: Sequence[corpus.Work], spec: str, permutations: int = 128) -> dict[str, object]:
    """Choose the threshold for `spec` on the comedies, then score the pipeline (MinHash + LSH) on the
    tragedies and histories, and on every work given (Shakespeare and Milton together)."""

    def part(genres: tuple[str, ...]) -> list[corpus.Work]:
        return [w for w in works if w.author == "shakespeare" and w.tags & set(genres)]

    tune = part(TUNE_GENRES)
    truth, ignore = known_pairs(tune)
    threshold = choose_threshold(work_similarities(tune, spec, permutations), truth, ignore)
    policy = DedupPolicy(kind="near", shingle=spec, permutations=permutations, threshold=threshold)
    out: dict[str, object] = {"shingle": spec, "threshold": threshold}
    for name, subset in (("tune", tune), ("test", part(TEST_GENRES)), ("all", list(works))):
        truth, ignore = known_pairs(subset)
        found = found_pairs([w.id for w in subset], [w.text for w in subset], policy)
        out[name] = score(found, truth, ignore).to_dict()
    return out
