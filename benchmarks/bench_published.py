"""Decisions measured where the truth is known: RegMix's published runs (../shared/tables/regmix/, SOURCES.md).

    python benchmarks/bench_published.py [FOLDER]

Turns the CSVs into the results format (`regmix_table.py`), imports them with `yieldgate import results` into a
temporary ledger, and prints per Pile domain's validation loss:

- **1M -> 60M, plain ranking**: `yieldgate campaign`'s decision accuracy of the 256 mixtures trained at both sizes
  (ordered by their 1M loss, scored against their 60M loss), and its compute share;
- **deciding only beyond noise**: RegMix publishes one run a mixture and no standard errors, so its noise is not
  measured; the three figures every decision reports (accuracy over all pairs, over the pairs decided, coverage)
  are printed for a one-run standard error *supplied* as `NOISE` x the metric's median at 1M (0.1%, 0.3% and 1%:
  an assumption, said as one, as `yieldgate import results --noise METRIC=SE` takes it), through
  `analysis.results.scale_decisions`: a pair is decided when its two 1M values differ by more than
  sqrt(2) x that error;
- **mixture regression** (`yieldgate campaign --propose`), fitted at 1M on the mixtures the larger size did not run:
  on the 256 60M mixtures (Spearman ρ and decision accuracy, beside plain ranking of the same mixtures at 1M), and
  on the 64 1B mixtures, which were never run at 1M (ρ, decision accuracy, and the rank among the 64 of the mixture
  the fit picks as best); no plain ranking exists for those.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small matrices: threads only contend on a shared machine
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas as pd  # noqa: E402
import regmix_table  # noqa: E402

from yieldgate import api  # noqa: E402
from yieldgate.analysis.results import mixture_regressions, result_points, scale_decisions  # noqa: E402
from yieldgate.ledger import Ledger  # noqa: E402

NOISE = (0.001, 0.003, 0.01)
"""One run's standard error supplied, as a share of the metric's median at 1M (RegMix measures none)."""


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def main(folder: Path) -> None:
    if not folder.is_dir():
        sys.exit(f"{folder}: no RegMix tables (../shared/tables/regmix); nothing to measure")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "regmix.csv"
        regmix_table.write(table, regmix_table.rows(folder))
        ledger = str(Path(tmp) / "ledger.db")
        done = api.import_results(table, campaign="regmix", ledger=ledger)
        summary = api.campaign("regmix", ledger=ledger)["summary"]
        with Ledger(ledger, readonly=True) as led:
            report = mixture_regressions(led, "regmix")
            beyond = noise_figures(result_points(led, "regmix"))
    print(f"RegMix (Liu et al. 2024): {done.runs:,} runs, {done.evals:,} evaluations, sizes 1M, 60M, 1B; {folder}")
    print(
        f"{'domain':<20} {'1M->60M plain':>20} {'regression 60M':>24} {'regression 1B (64)':>30}\n"
        f"{'':<20} {'accuracy (pairs)':>20} {'rho / accuracy':>24} {'rho / accuracy / pick rank':>30}"
    )
    for metric, m in summary["metrics"].items():
        plain = next(e for e in m["scales"] if e["params"] == 1_000_000 and e.get("against"))
        evaluated = {e["params"]: e for e in report["metrics"][metric]["evaluated"]}
        mid, big = evaluated[60_000_000], evaluated[1_000_000_000]
        domain = metric.removeprefix("val/").removesuffix("/loss")
        print(
            f"{domain:<20} {_pct(plain['accuracy']):>8} of {plain['pairs']:,} "
            f"{mid['rho']:>10.3f} / {_pct(mid['accuracy']):>6}     "
            f"{big['rho']:>9.3f} / {_pct(big['accuracy']):>6} / {big['pick_rank']:>2} of {big['mixtures']}"
        )
    print(
        f"plain ranking at 1M costs {plain['compute_share']:.2%} of one 60M run per mixture (6ND); the regression's "
        "60M figures fit on the 512 other 1M mixtures, its 1B figures on all 768"
    )
    print(
        "deciding beyond a supplied noise (1M against 60M, the 256 mixtures of both; one run's standard error = share "
        "x the median 1M value): all pairs / decided pairs / coverage"
    )
    print(f"{'domain':<20} " + " ".join(f"{f'noise {n:.1%}':>28}" for n in NOISE))
    for metric, rows in beyond.items():
        domain = metric.removeprefix("val/").removesuffix("/loss")
        cells = [f"{_pct(e['accuracy'])} / {_pct(e['accuracy_decided'])} / {_pct(e['coverage'])}" for e in rows]
        print(f"{domain:<20} " + " ".join(f"{c:>28}" for c in cells))
    print(f"wall {time.perf_counter() - start:.0f} s")


def noise_figures(points: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Per metric, the 1M -> 60M entry of `scale_decisions` for each supplied noise of `NOISE`."""
    out: dict[str, list[dict[str, Any]]] = {}
    for metric, mine in points.groupby("metric"):
        both = mine[mine["recipe"].str.startswith("test-")]
        median = float(both.loc[both["params"] == 1_000_000, "value"].median())
        out[str(metric)] = [
            next(e for e in scale_decisions(both, share * median)["scales"] if e["params"] == 1_000_000)
            for share in NOISE
        ]
    return out


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else regmix_table.FOLDER)
