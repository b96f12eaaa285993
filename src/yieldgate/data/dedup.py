"""Exact and near-duplicate detection over documents: normalise, shingle, MinHash, LSH, clusters.

**Exact**: the normalised text (NFKC, lower case, whitespace runs collapsed) hashed with xxhash (xxh3,
128 bits); documents with equal hashes form a cluster.

**Near**: MinHash signatures banded by LSH, candidates verified on their estimated Jaccard similarity, and
verified pairs joined into clusters (connected components). The whole path is vectorised numpy over one
byte buffer holding every document, because measurement chose it (`benchmarks/bench_dedup.py`, 2,000-char
chunks of the Shakespeare texts, 9.5 MB, 2 shared cores): datasketch spends its time in a Python loop per
shingle and rensa, fast in Rust, waits on the Python normaliser and shingler that feed it, while here
normalising, shingling and hashing are a few passes over uint8/uint64 arrays. docs/data-audit.md has the figures.

- Normalisation (near): ASCII letters lower-cased, every other ASCII byte that is not a letter or digit
  becomes a space, whitespace runs collapse to one space; bytes >= 128 (UTF-8 of non-ASCII letters) stay.
- Shingles: `char:N` (N consecutive bytes of the normalised text) or `word:N` (N consecutive words),
  hashed to 64 bits: a slice's bytes are loaded 8 at a time as uint64 (a strided view of the buffer) and
  chained through the murmur3 finaliser (fmix64); a word shingle weighs its words' hashes by powers of
  an odd constant (mod 2^64), so word order counts, and is finalised again.
- Signatures: one-permutation MinHash (Li, Owen & Zhang, "One permutation hashing", NeurIPS 2012): one
  hash per shingle, its high bits choosing one of `permutations` bins and its low 32 bits competing for
  the bin's minimum; empty bins are filled by rotation densification (Shrivastava & Li, ICML 2014). The
  collision probability of a bin is the Jaccard similarity, as for k independent permutations, at the
  cost of one hash per shingle instead of k: the k-permutation form costs 128 multiply-mods per shingle,
  which in numpy alone is slower than datasketch's whole pipeline.
- LSH: `bands` x `rows` = `permutations`; documents whose rows of one band agree are candidates. When
  the policy gives no bands/rows they are chosen to minimise false positives plus false negatives around
  the threshold (the usual S-curve integrals, Leskovec, Rajaraman & Ullman, "Mining of Massive Datasets",
  ch. 3.4).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from yieldgate.errors import InputError
from yieldgate.manifest import DedupPolicy

__all__ = [
    "DedupResult",
    "Shingled",
    "dedup",
    "estimated_jaccard",
    "exact_keys",
    "lsh_params",
    "near_pairs",
    "normalise",
    "shingle",
    "signatures",
]

_U64 = np.uint64
_MAX32 = np.uint32(0xFFFFFFFF)
# Odd 64-bit constants: the base that weighs a word shingle's words, fmix64's multipliers (murmur3).
_BASE = 0x100000001B3  # the FNV-64 prime
_FMIX1, _FMIX2 = _U64(0xFF51AFD7ED558CCD), _U64(0xC4CEB9FE1A85EC53)
_MASKS = np.array([(1 << (8 * r)) - 1 for r in range(9)], dtype=_U64)  # the low r bytes of a uint64


def _byte_table() -> np.ndarray:
    table = np.full(256, ord(" "), dtype=np.uint8)
    table[128:] = np.arange(128, 256)
    for c in b"abcdefghijklmnopqrstuvwxyz0123456789":
        table[c] = c
    for c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        table[c] = c + 32
    return table


_TABLE = _byte_table()


def normalise(text: str) -> str:
    """The exact-dedup normal form: NFKC, lower case, whitespace runs collapsed to one space, stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())  # split(): runs of Unicode whitespace


def exact_keys(texts: Iterable[str]) -> list[bytes]:
    """xxh3-128 digest of each text's normal form (`normalise`): equal keys are exact duplicates."""
    try:
        import xxhash
    except ImportError:
        raise InputError("exact dedup needs xxhash: pip install 'yieldgate[data]'") from None
    return [xxhash.xxh3_128_digest(normalise(t).encode()) for t in texts]


def _parse_shingle(spec: str) -> tuple[str, int]:
    unit, _, size = spec.partition(":")
    if unit not in ("word", "char") or not size.isdigit() or int(size) < 1:
        raise InputError(f"shingle must be 'word:N' or 'char:N' with N >= 1, got {spec!r}")
    return unit, int(size)


def _fmix64(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> _U64(33))
    x *= _FMIX1
    x ^= x >> _U64(33)
    x *= _FMIX2
    return x ^ (x >> _U64(33))


@dataclass
class Shingled:
    """Every document's shingle hashes in one array: document i owns `hashes[offsets[i]:offsets[i+1]]`."""

    hashes: np.ndarray
    """uint64 hash of every shingle, documents in order (a shingle repeated in a document repeats here)."""
    offsets: np.ndarray
    """int64, length documents + 1."""
    words: np.ndarray
    """Words (runs of letters and digits) of each document's normalised text: its size in tokens."""

    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)


def _slice_hashes(buf: np.ndarray, first: np.ndarray, length: np.ndarray | int) -> np.ndarray:
    """fmix64-chained hash of each slice buf[first[i] : first[i] + length[i]], 8 bytes at a time.

    `buf` must end with 8 zero bytes: the 8-byte loads read past a slice and the mask cuts them off."""
    # A strided view reads the 8 bytes that start at every byte offset as one little-endian uint64.
    w8 = np.ndarray(shape=(len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))
    if isinstance(length, int):  # one length (char shingles): scalar masks, no bookkeeping per slice
        h = np.full(len(first), length, dtype=_U64) * _FMIX2
        for block in range(0, length, 8):
            h = _fmix64(h ^ (w8[first + block] & _MASKS[min(length - block, 8)]))
        return h
    h = length.astype(_U64) * _FMIX2  # the length seeds the hash: "ab" and "ab\0" differ
    live = np.arange(len(first))
    for block in range(0, int(length.max(initial=0)), 8):
        rest = length[live] - block
        if not (rest > 0).all():
            live, rest = live[rest > 0], rest[rest > 0]
        mask = _MASKS[np.minimum(rest, 8)]
        if len(live) == len(first):  # all slices still running: no gather/scatter through `live`
            h = _fmix64(h ^ (w8[first + block] & mask))
        else:
            h[live] = _fmix64(h[live] ^ (w8[first[live] + block] & mask))
    return h


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of arange(starts[d], starts[d] + counts[d]) over d."""
    before = np.concatenate(([0], np.cumsum(counts)[:-1]))
    return np.arange(int(counts.sum())) + np.repeat(starts - before, counts)


def shingle(texts: Sequence[str], spec: str = "word:5") -> Shingled:
    """Normalise and shingle every text at once (see the module docstring); `spec` is `word:N` or `char:N`.

    A document with fewer than N characters (words) has no shingles: it can only be an exact duplicate.
    """
    unit, n = _parse_shingle(spec)
    docs = len(texts)
    raw = [t.encode("utf-8", "surrogatepass") for t in texts]
    lengths = np.fromiter((len(b) for b in raw), dtype=np.int64, count=docs)
    buf = _TABLE[np.frombuffer(b"".join(raw) + bytes(8), dtype=np.uint8)]
    buf[-8:] = 0
    offsets = np.zeros(docs + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    space = buf == ord(" ")
    if unit == "char":
        # Collapse whitespace runs; a document's first byte stays, so no run joins two documents.
        drop = space[1:] & space[:-1]
        drop[offsets[1:-1][lengths[1:] > 0] - 1] = False
        dropped = np.flatnonzero(drop) + 1
        offsets -= np.searchsorted(dropped, offsets)
        keep = np.ones(len(buf), dtype=bool)
        keep[dropped] = False
        buf, space = buf[keep], space[keep]
    m = int(offsets[-1])
    # Words: runs of non-space bytes, cut at document boundaries.
    edge = np.zeros(m + 1, dtype=bool)
    edge[offsets] = True
    gap = np.concatenate(([True], space[:m], [True]))
    starts = np.flatnonzero(~space[:m] & (gap[:m] | edge[:m]))
    ends = np.flatnonzero(~space[:m] & (gap[2:] | edge[1:])) + 1
    words = np.bincount(np.searchsorted(offsets, starts, side="right") - 1, minlength=docs)
    if unit == "char":
        counts = np.maximum(np.diff(offsets) - n + 1, 0)
        h = _slice_hashes(buf, _ranges(offsets[:-1], counts), n)
    else:
        counts = np.maximum(words - n + 1, 0)
        wh = _slice_hashes(buf, starts, ends - starts)
        first = _ranges(np.concatenate(([0], np.cumsum(words)[:-1])), counts)
        h = wh[first]
        for j in range(1, n):  # word j of the shingle weighs BASE^j: word order matters
            h = h * _U64(_BASE) + wh[first + j]
        h = _fmix64(h)
    shingle_offsets = np.zeros(docs + 1, dtype=np.int64)
    np.cumsum(counts, out=shingle_offsets[1:])
    return Shingled(hashes=h, offsets=shingle_offsets, words=words)


def signatures(sh: Shingled, permutations: int = 128, seed: int = 0) -> np.ndarray:
    """One-permutation MinHash signatures, (documents, permutations) uint32, densified by rotation.

    `seed` picks another random permutation (0: the shingle hashes as they are). A document without
    shingles gets all-max values (and is never verified as a near duplicate)."""
    k, docs = permutations, len(sh.offsets) - 1
    h = sh.hashes if not seed else _fmix64(sh.hashes ^ _fmix64(np.array([seed], dtype=_U64))[0])
    owner = np.repeat(np.arange(docs, dtype=np.int64), sh.counts())
    # The bin from the high 32 bits by multiply-shift (any k, not only powers of two); the low 32 compete.
    bins = (((h >> _U64(32)) * _U64(k)) >> _U64(32)).astype(np.int64)
    flat = np.full(docs * k, _MAX32, dtype=np.uint32)
    np.minimum.at(flat, owner * k + bins, (h & _U64(0xFFFFFFFF)).astype(np.uint32))
    sig = flat.reshape(docs, k)
    empty = sig == _MAX32
    has = sh.counts() > 0
    holes = empty[has].any(axis=1)
    if holes.any():
        rows = np.flatnonzero(has)[holes]
        sig[rows] = _densify(sig[rows], empty[rows])
    return sig


def _densify(sig: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """Rotation densification: an empty bin takes the next non-empty bin to its right (circularly), plus
    a constant times the distance, so two documents agree on it only when they agree on the bin it copies."""
    docs, k = sig.shape
    idx = np.where(empty, 2 * k, np.arange(k))
    twice = np.concatenate((idx, idx + k * (idx < 2 * k)), axis=1)  # unroll the circle once
    nxt = np.minimum.accumulate(twice[:, ::-1], axis=1)[:, ::-1][:, :k]
    dist = (nxt - np.arange(k)).astype(np.uint32)
    src = np.take_along_axis(sig, nxt % k, axis=1)
    return np.where(empty, src + dist * np.uint32(0x9E3779B1), sig).astype(np.uint32)


def lsh_params(threshold: float, permutations: int) -> tuple[int, int]:
    """(bands, rows) with bands x rows = permutations minimising the false-positive plus false-negative
    areas of the S-curve 1 - (1 - s^rows)^bands around `threshold` (equal weights)."""
    s = np.linspace(0, 1, 2001)
    best: tuple[float, int, int] | None = None
    for rows in range(1, permutations + 1):
        if permutations % rows:
            continue
        bands = permutations // rows
        p = 1 - (1 - s**rows) ** bands
        error = float(np.trapezoid(np.where(s < threshold, p, 1 - p), s))
        if best is None or error < best[0]:
            best = (error, bands, rows)
    assert best is not None
    return best[1], best[2]


def estimated_jaccard(sig: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Share of equal signature values of each pair (i[n], j[n]): the MinHash estimate of their Jaccard."""
    out = np.empty(len(i))
    for s in range(0, len(i), 65536):  # blocks bound the (pairs, k) temporary
        out[s : s + 65536] = (sig[i[s : s + 65536]] == sig[j[s : s + 65536]]).mean(axis=1)
    return out


_MAX_GAP = 32
"""Within one LSH bucket, each member is paired with the next `_MAX_GAP` members and with the first:
every pair when a bucket is small, linear cost (a star) when it is not."""


def _row_keys(rows: np.ndarray) -> np.ndarray:
    weights = _fmix64(np.arange(1, rows.shape[1] + 1, dtype=_U64)) | _U64(1)
    return _fmix64((rows.astype(_U64) * weights).sum(axis=1, dtype=_U64))


def _bucket_pairs(key: np.ndarray, members: np.ndarray, docs: int) -> list[np.ndarray]:
    """Pair codes (i * docs + j, i < j) of members sharing a key."""
    order = np.argsort(key, kind="stable")
    key, members = key[order], members[order]
    new = np.concatenate(([True], key[1:] != key[:-1]))
    bucket = np.cumsum(new) - 1
    big = np.bincount(bucket)[bucket] > _MAX_GAP  # members of buckets the runs below do not cover
    first = members[np.flatnonzero(new)[bucket[big]]]
    codes = [np.minimum(first, members[big]) * docs + np.maximum(first, members[big])]
    for gap in range(1, min(_MAX_GAP, len(key))):
        pos = np.flatnonzero(key[:-gap] == key[gap:])
        if not len(pos):
            break
        a, c = members[pos], members[pos + gap]
        codes.append(np.minimum(a, c) * docs + np.maximum(a, c))
    return codes


def near_pairs(
    sig: np.ndarray, bands: int, rows: int, threshold: float, valid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (i < j) that share an LSH band and whose estimated Jaccard is >= threshold, with it.

    Documents with identical signatures are linked to the first of them and only that one goes through
    the bands, so a text repeated thousands of times costs one bucket, not thousands of pairs per band."""
    docs = len(sig)
    ids = np.flatnonzero(valid) if valid is not None else np.arange(docs)
    whole = _row_keys(sig[ids])
    codes = _bucket_pairs(whole, ids, docs)
    _, first = np.unique(whole, return_index=True)
    reps = ids[np.sort(first)]
    for b in range(bands):
        codes += _bucket_pairs(_row_keys(sig[reps, b * rows : (b + 1) * rows]), reps, docs)
    pair = np.unique(np.concatenate(codes))
    i, j = pair // docs, pair % docs
    ok = i != j
    i, j = i[ok], j[ok]
    sim = estimated_jaccard(sig, i, j)
    ok = sim >= threshold
    return i[ok], j[ok], sim[ok]


@dataclass
class DedupResult:
    """What dedup found: clusters of duplicates, which documents to keep, and the policy's statistics."""

    ids: list[str]
    """Document ids, in input order."""
    policy: DedupPolicy
    """The policy applied, bands and rows filled in for `near`."""
    clusters: list[list[int]]
    """Clusters of two or more documents (indices into `ids`), members in input order."""
    similarity: list[float]
    """Per cluster: the lowest estimated Jaccard among the verified pairs that join it (1.0 for exact)."""
    keep: np.ndarray
    """bool per document: False for every non-first member of a cluster."""
    tokens: np.ndarray
    """Words per document (normalised): the token count behind `duplicate_share`."""
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray] = field(repr=False, default=None)  # type: ignore[assignment]
    """The verified pairs (i, j, estimated Jaccard) for near dedup; empty for exact."""

    @property
    def duplicate_share(self) -> float:
        """Share of all tokens that sit in non-first cluster members (what dedup removes)."""
        total = int(self.tokens.sum())
        return float(self.tokens[~self.keep].sum() / total) if total else 0.0

    def stats(self) -> dict[str, Any]:
        """Statistics recorded beside the policy: documents in and out, clusters, duplicate share."""
        return {
            "docs_in": len(self.ids),
            "docs_out": int(self.keep.sum()),
            "clusters": len(self.clusters),
            "duplicate_share": self.duplicate_share,
        }

    def to_dict(self) -> dict[str, Any]:
        """The `yieldgate dedup --json` shape."""
        return {
            "documents": len(self.ids),
            "policy": self.policy.model_dump(mode="json"),
            "clusters": [
                {"members": [self.ids[m] for m in c], "similarity": s}
                for c, s in zip(self.clusters, self.similarity, strict=True)
            ],
            "duplicate_share": self.duplicate_share,
        }


def _clusters(n: int, i: np.ndarray, j: np.ndarray, sim: np.ndarray) -> tuple[list[list[int]], list[float]]:
    graph = coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n))
    _, label = connected_components(graph, directed=False)
    sizes = np.bincount(label)
    order = np.argsort(label, kind="stable")  # members stay in input order within a label
    groups = np.split(order, np.cumsum(sizes)[:-1])
    lowest = np.full(len(sizes), np.inf)
    np.minimum.at(lowest, label[i], sim)
    out = sorted((g.tolist() for g in groups if len(g) > 1), key=lambda g: g[0])
    return out, [float(lowest[label[g[0]]]) for g in out]


def dedup(docs: Sequence[tuple[str, str]], policy: DedupPolicy, *, seed: int = 0) -> DedupResult:
    """Find duplicates among (id, text) documents under `policy`; the first member of each cluster is kept.

    `exact`: equal `exact_keys`. `near`: MinHash + LSH as the module docstring says; `policy.bands` and
    `policy.rows` are chosen by `lsh_params` when absent and recorded in the result's policy; `seed`
    picks the MinHash permutation."""
    ids, texts = [d[0] for d in docs], [d[1] for d in docs]
    n = len(texts)
    if policy.kind == "near":
        if policy.bands is None:
            bands, rows = lsh_params(policy.threshold, policy.permutations)
            policy = policy.model_copy(update={"bands": bands, "rows": rows})
        sh = shingle(texts, policy.shingle)
        sig = signatures(sh, policy.permutations, seed)
        i, j, sim = near_pairs(sig, policy.bands, policy.rows, policy.threshold, valid=sh.counts() > 0)  # type: ignore[arg-type]
        tokens = sh.words
    else:
        i = j = np.empty(0, dtype=np.int64)
        sim = np.empty(0)
        tokens = shingle(texts, "word:1").words if n else np.empty(0, dtype=np.int64)
        if policy.kind == "exact":
            first: dict[bytes, int] = {}
            link = [(first.setdefault(k, x), x) for x, k in enumerate(exact_keys(texts))]
            i = np.array([a for a, b in link if a != b], dtype=np.int64)
            j = np.array([b for a, b in link if a != b], dtype=np.int64)
            sim = np.ones(len(i))
    clusters, similarity = _clusters(n, i, j, sim)
    keep = np.ones(n, dtype=bool)
    for c in clusters:
        keep[c[1:]] = False
    return DedupResult(
        ids=ids,
        policy=policy,
        clusters=clusters,
        similarity=similarity,
        keep=keep,
        tokens=np.asarray(tokens),
        pairs=(i, j, sim),
    )
