"""Decisions measured where the truth is known: RegMix's published runs (../shared/tables/regmix/, SOURCES.md).

    python benchmarks/bench_published.py [FOLDER]

Turns the CSVs into the results format (`regmix_table.py`), imports them with `yieldgate import results` into a
temporary ledger, and prints per Pile domain's validation loss:

- **1M -> 60M, plain ranking**: `yieldgate campaign`'s decision accuracy of the 256 mixtures trained at both sizes
  (ordered by their 1M loss, scored against their 60M loss; one seed, so no abstention), and its compute share;
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import regmix_table  # noqa: E402

from yieldgate import api  # noqa: E402
from yieldgate.analysis.results import mixture_regressions  # noqa: E402
from yieldgate.ledger import Ledger  # noqa: E402


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
    print(f"wall {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else regmix_table.FOLDER)
