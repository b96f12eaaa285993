"""Near dedup: precision and recall on the corpus's known duplicates, speed beside datasketch and rensa, and
the cost of stage accounting.

1. Works: for each shingling, the threshold is chosen on the comedies (modern + Folio editions) and the
   pipeline (MinHash + LSH) is scored on the tragedies and histories, and on every Shakespeare and Milton
   work (the Milton copies included).
2. Chunks: every Shakespeare text cut into 2,000-character chunks; the pairs each pipeline reports against
   the exact Jaccard of all chunk pairs, at the same threshold.
3. Speed on those chunks, end to end from raw text to clusters, median of `--repeats` runs: ours beside
   datasketch (MinHash + MinHashLSH) and rensa (RMinHash + RMinHashLSH) fed by a plain Python normaliser
   and shingler, all with the same permutations, bands x rows and threshold; each run draws its own
   permutation (seeds 1..repeats), so precision and recall are means over the runs.
4. Stage accounting: a filter running at >= 100,000 documents/s, bare and through `Audit`: the time outside
   the stage function within each audited run, and alternating bare and audited runs side by side.

    .venv/bin/python benchmarks/bench_dedup.py [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from yieldgate.data import corpus, dedup_eval
from yieldgate.data.audit import Audit
from yieldgate.data.dedup import dedup, lsh_params, shingle
from yieldgate.manifest import DedupPolicy

SHINGLINGS = ("word:1", "word:2", "word:3", "word:4", "word:5", "char:5", "char:7", "char:9")
CHOSEN = "word:3"
PERMUTATIONS = 128
# The Python normaliser the peers get: what `dedup.shingle` does to bytes, done with str methods and re.
_NOT_ALNUM = re.compile(r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+")


def _python_shingles(text: str, n: int) -> list[str]:
    words = _NOT_ALNUM.sub(" ", text.lower()).split()
    return [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]


def _clusters(n: int, pairs: list[tuple[int, int]]) -> list[list[int]]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        parent[find(a)] = find(b)
    groups: dict[int, list[int]] = {}
    for x in range(n):
        groups.setdefault(find(x), []).append(x)
    return [g for g in groups.values() if len(g) > 1]


def _peer(
    texts: list[str], threshold: float, lsh: Any, minhash: Callable[[list[str]], Any]
) -> tuple[list[list[int]], set]:
    """A peer library's pipeline: Python shingles -> `minhash` -> its LSH -> verified pairs -> clusters."""
    sigs = []
    for k, text in enumerate(texts):
        m = minhash(_python_shingles(text, 3))
        sigs.append(m)
        lsh.insert(k, m)
    pairs = {
        (min(k, c), max(k, c))
        for k, m in enumerate(sigs)
        for c in lsh.query(m)
        if c != k and m.jaccard(sigs[c]) >= threshold
    }
    return _clusters(len(texts), sorted(pairs)), pairs


def datasketch_pipeline(
    texts: list[str], threshold: float, bands: int, rows: int, seed: int = 1
) -> tuple[list[list[int]], set]:
    from datasketch import MinHash, MinHashLSH

    def minhash(shingles: list[str]) -> MinHash:
        m = MinHash(num_perm=PERMUTATIONS, seed=seed)
        m.update_batch([s.encode() for s in shingles])
        return m

    return _peer(
        texts, threshold, MinHashLSH(threshold=threshold, num_perm=PERMUTATIONS, params=(bands, rows)), minhash
    )


def rensa_pipeline(
    texts: list[str], threshold: float, bands: int, rows: int, seed: int = 1
) -> tuple[list[list[int]], set]:
    from rensa import RMinHash, RMinHashLSH

    def minhash(shingles: list[str]) -> RMinHash:
        m = RMinHash(num_perm=PERMUTATIONS, seed=seed)
        m.update(shingles)
        return m

    return _peer(texts, threshold, RMinHashLSH(threshold=threshold, num_perm=PERMUTATIONS, num_bands=bands), minhash)


def ours_pipeline(
    texts: list[str], threshold: float, bands: int, rows: int, seed: int = 1
) -> tuple[list[list[int]], set]:
    policy = DedupPolicy(
        kind="near", shingle=CHOSEN, permutations=PERMUTATIONS, bands=bands, rows=rows, threshold=threshold
    )
    result = dedup([(str(k), t) for k, t in enumerate(texts)], policy, seed=seed)
    i, j, _ = result.pairs
    return result.clusters, set(zip(i.tolist(), j.tolist(), strict=True))


PIPELINES: dict[str, Callable[..., tuple[list[list[int]], set]]] = {
    "yieldgate (numpy)": ours_pipeline,
    "rensa + Python normaliser": rensa_pipeline,
    "datasketch": datasketch_pipeline,
}


def works_table(works: list[corpus.Work]) -> list[dict[str, Any]]:
    return [dedup_eval.work_level(works, spec, PERMUTATIONS) for spec in SHINGLINGS]


def work_gap(works: list[corpus.Work]) -> dict[str, float]:
    """Exact Jaccard of the chosen shingles: the range over the plays' two editions, and the highest
    between two different plays."""
    plays = [w for w in works if w.author == "shakespeare"]
    truth, ignore = dedup_eval.known_pairs(plays)
    i, j, jac = dedup_eval.exact_jaccard_pairs(shingle([w.text for w in plays], CHOSEN), 0.0)
    editions: list[float] = []
    others: list[float] = []
    for a, b, x in zip(i.tolist(), j.tolist(), jac.tolist(), strict=True):
        key = dedup_eval._key(plays[a].id, plays[b].id)
        if key not in ignore:
            (editions if key in truth else others).append(x)
    return {"editions_min": min(editions), "editions_max": max(editions), "other_plays_max": max(others)}


def _mean(scores: list[dict[str, Any]]) -> dict[str, float]:
    return {k: statistics.fmean(s[k] for s in scores) for k in scores[0]}


def _score(pairs: set, truth: set) -> dict[str, Any]:
    return dedup_eval.score(pairs, truth).to_dict()


def speed_and_recall(works: list[corpus.Work], threshold: float, repeats: int) -> dict[str, Any]:
    docs = corpus.documents([w for w in works if w.author == "shakespeare"], chunk_chars=2000)
    texts = [t for _, t in docs]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    bands, rows = lsh_params(threshold, PERMUTATIONS)
    i, j, _ = dedup_eval.exact_jaccard_pairs(shingle(texts, CHOSEN), threshold)
    truth = set(zip(i.tolist(), j.tolist(), strict=True))
    test = [w for w in works if w.author == "shakespeare" and w.tags & set(dedup_eval.TEST_GENRES)]
    work_truth, ignore = dedup_eval.known_pairs(test)
    same_play = sum(
        1
        for a, b in truth
        if docs[a][0].split("/")[1] == docs[b][0].split("/")[1] and docs[a][0].split("/")[2] != docs[b][0].split("/")[2]
    )
    out: dict[str, Any] = {
        "documents": len(texts),
        "mb": mb,
        "bands": bands,
        "rows": rows,
        "exact_pairs": len(truth),
        "exact_pairs_editions": same_play,
        "pipelines": {},
    }
    for name, run in PIPELINES.items():
        # Each run draws its own permutation (seed): the time is the median, the scores are the mean.
        times, chunks, tests = [], [], []
        for seed in range(1, repeats + 1):
            start = time.perf_counter()
            _, pairs = run(texts, threshold, bands, rows, seed)
            times.append(time.perf_counter() - start)
            chunks.append(_score(pairs, truth))
            _, wpairs = run([w.text for w in test], threshold, bands, rows, seed)
            found = {dedup_eval._key(test[a].id, test[b].id) for a, b in wpairs}
            tests.append(dedup_eval.score(found, work_truth, ignore).to_dict())
        s = statistics.median(times)
        out["pipelines"][name] = {
            "seconds": s,
            "docs_per_s": len(texts) / s,
            "mb_per_s": mb / s,
            "chunks": _mean(chunks),
            "works_test": _mean(tests),
        }
    return out


def audit_overhead(repeats: int) -> dict[str, Any]:
    """A real filter (the share of distinct words) on 100-word documents, so that it runs at about 100,000
    documents/s on these machines, bare and through Audit (bytes and the tagged slice counted).

    Two measures. In-run: within one audited run, the time outside the stage function (batching, counting,
    handing the documents on) over the time inside it; both come from the same run, so the machine's drift
    between runs cancels, and the result is stable to about 0.1 point. Side by side: bare and audited runs
    alternate, CPU time of this process, medians compared; on a shared machine their spread is about one
    point, as large as what is measured."""
    rng = np.random.default_rng(0)
    vocab = np.array([f"w{k}" for k in range(500)])
    docs = [{"text": " ".join(vocab[rng.integers(0, 500, 100)]), "rare": k % 50 == 0} for k in range(100_000)]

    def keep(doc: dict[str, Any]) -> bool:
        words = doc["text"].split()
        return len(set(words)) > 0.85 * len(words)

    bare, audited, outside = [], [], []
    for _ in range(repeats):
        start = time.process_time()
        want = [d for d in docs if keep(d)]
        bare.append(time.process_time() - start)
        audit = Audit(tag="rare", text="text")
        start, wall = time.process_time(), time.perf_counter()
        got = list(audit.stage("distinct-words", keep, docs))
        audited.append(time.process_time() - start)
        inside = audit.stages[0].seconds
        outside.append((time.perf_counter() - wall - inside) / inside)
        assert got == want
    b, a = statistics.median(bare), statistics.median(audited)
    return {
        "documents": len(docs),
        "runs": repeats,
        "bare_docs_per_s": len(docs) / b,
        "bare_s": b,
        "audited_s": a,
        "side_by_side": a / b - 1,
        "in_run": statistics.median(outside),
        "in_run_range": [min(outside), max(outside)],
        "in_run_us_per_doc": statistics.median(outside) * b / len(docs) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    works = [w for w in corpus.load_corpus(stdlib_bytes=0) if w.author in ("shakespeare", "milton")]
    table = works_table(works)
    chosen = next(r for r in table if r["shingle"] == CHOSEN)
    result: dict[str, Any] = {
        "works": table,
        "gap": work_gap(works),
        "chunks": speed_and_recall(works, chosen["threshold"], args.repeats),
        "audit": audit_overhead(max(args.repeats, 9)),
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print("works: threshold chosen on the comedies, scored on the tragedies and histories, and on all works")
    print(f"{'shingle':8} {'threshold':>9} {'test P':>7} {'test R':>7} {'all P':>6} {'all R':>6}")
    for r in table:
        print(
            f"{r['shingle']:8} {r['threshold']:9.3f} {r['test']['precision']:7.3f} {r['test']['recall']:7.3f} "
            f"{r['all']['precision']:6.3f} {r['all']['recall']:6.3f}"
        )
    g = result["gap"]
    print(
        f"{CHOSEN} exact Jaccard: the two editions of a play {g['editions_min']:.3f}-{g['editions_max']:.3f}, "
        f"two different plays at most {g['other_plays_max']:.3f}"
    )
    c = result["chunks"]
    print(
        f"\n{c['documents']:,} chunks of 2,000 characters ({c['mb']:.2f} MB), {CHOSEN}, threshold "
        f"{chosen['threshold']:.3f}, {PERMUTATIONS} permutations = {c['bands']} bands x {c['rows']} rows; "
        f"{c['exact_pairs']:,} chunk pairs at or above it by exact Jaccard ({c['exact_pairs_editions']:,} of them "
        f"two editions of one play)"
    )
    print(f"{'pipeline':27} {'docs/s':>8} {'MB/s':>6} {'chunk P':>8} {'chunk R':>8} {'works P':>8} {'works R':>8}")
    for name, p in c["pipelines"].items():
        print(
            f"{name:27} {p['docs_per_s']:8,.0f} {p['mb_per_s']:6.2f} {p['chunks']['precision']:8.3f} "
            f"{p['chunks']['recall']:8.3f} {p['works_test']['precision']:8.3f} {p['works_test']['recall']:8.3f}"
        )
    a = result["audit"]
    lo, hi = a["in_run_range"]
    print(
        f"\nstage accounting: a filter at {a['bare_docs_per_s']:,.0f} docs/s bare; through Audit +{a['in_run']:.2%} "
        f"in-run ({lo:.2%}-{hi:.2%} over {a['runs']} runs, {a['in_run_us_per_doc']:.3f} us per "
        f"document), {a['side_by_side']:+.2%} side by side (CPU, medians of alternating runs)"
    )


if __name__ == "__main__":
    main()
