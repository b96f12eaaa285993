"""The forecast's bootstrap: 400 refits of loss = E + B * D^-beta, one at a time (scipy's trust-region solver,
`fit._fit`, as the forecast did before) beside all at once (`refit.fit_many`), on curves of 8, 30 and 200
evaluations with evaluation noise; time inside each and the 10/50/90% quantiles of the forecast gain they give.

    .venv/bin/python benchmarks/bench_refit.py [--boots 400] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from yieldgate.analysis import fit, refit


def _case(n: int, noise: float, boots: int) -> dict:
    rng = np.random.default_rng(n)
    tokens = np.geomspace(1e5, 1e7, n)
    losses = 2.0 + 5.0 * tokens**-0.3 + rng.normal(0.0, noise, n)
    law = fit.fit_power_law(tokens, losses)
    counts = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(boots)])
    counts = counts[(counts > 0).sum(1) >= 3]
    at, nxt = tokens[-1], 1e7
    start = time.perf_counter()
    one = []
    for c in counts:
        pick = np.repeat(np.arange(n), c)
        _, b, beta = fit._fit(tokens[pick], losses[pick], start=(law.E, law.B, law.beta))
        one.append(b * (at**-beta - (at + nxt) ** -beta))
    t_one = time.perf_counter() - start
    start = time.perf_counter()
    _, bs, betas = refit.fit_many(tokens, losses, counts)
    many = bs * (at**-betas - (at + nxt) ** -betas)
    t_many = time.perf_counter() - start
    q = [0.1, 0.5, 0.9]
    return {
        "evaluations": n,
        "refits": len(counts),
        "one_at_a_time_s": t_one,
        "all_at_once_s": t_many,
        "speedup": t_one / t_many,
        "gain_quantiles_one": np.quantile(one, q).tolist(),
        "gain_quantiles_all": np.nanquantile(many, q).tolist(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=400)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [_case(n, noise, args.boots) for n, noise in ((8, 0.03), (30, 0.01), (200, 0.005))]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"{args.boots} bootstrap refits of one forecast")
    for col in ("evals", "one at a time", "all at once", "speedup", "gain q10/50/90 (one)", "gain q10/50/90 (all)"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            str(r["evaluations"]),
            f"{r['one_at_a_time_s']:.2f} s",
            f"{r['all_at_once_s']:.2f} s",
            f"{r['speedup']:.1f}x",
            " / ".join(f"{v:.4g}" for v in r["gain_quantiles_one"]),
            " / ".join(f"{v:.4g}" for v in r["gain_quantiles_all"]),
        )
    Console().print(table)


if __name__ == "__main__":
    main()
