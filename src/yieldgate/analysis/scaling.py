"""Loss against model size and data, fitted over probes of three or more sizes, and the compute-optimal split.

    L(N, D) = E + A / N^alpha + B / D^beta        (N: non-embedding parameters, D: tokens)

Hoffmann et al. (2022, "Training Compute-Optimal Large Language Models", approach 3, appendix D.2): in log space,
log L^ = LSE(a - alpha log N, b - beta log D, e) with A = exp(a), B = exp(b), E = exp(e), minimising the sum of
Huber losses (delta = 1e-3) of log L^ - log L with L-BFGS from a grid of starting points (alpha, beta in
{0, 0.5, ..., 2}, e in {-1, -0.5, ..., 1}, a, b in {0, 5, ..., 25}). The objective is evaluated at every grid point
and L-BFGS runs from the best few, which is where it ends up anyway and costs a hundredth of the time. The
exponents are held at >= 0: a loss that grows with size or data is not a scaling law.

**Intervals** are bootstrap percentiles over refits. A probe's evaluations share its seed's luck (one trajectory,
one initialisation), so they are not independent draws: the resampling unit is the **probe**, drawn with replacement
within each model size (every refit keeps every size). A size with a single probe leaves nothing to resample there;
then the evaluations within each size are resampled instead, and a note says the interval misses the seed-to-seed
spread. `Prediction.interval` is the law's own uncertainty at (N, D); `measured_interval` adds one evaluation's
scatter around the law (the residuals' spread, in log loss), which is where one new probe's measured loss
should fall.

**Identified.** E is read as a measurement only when the probes pin it (`ScalingLaw.unidentified` holds why not,
and what probes would pin it): its estimate is off its bound 0 (at least E_FLOOR of the lowest loss fitted), and its
bootstrap interval neither reaches that bound nor is wider than E itself. Probes far above the irreducible loss
(tiny models, few tokens) fit E to ~0 and let A, alpha, B, beta absorb it: the exponents, and every compute-optimal
split drawn from them, are then those of a local description, not of the law. An exponent at its bound 0 (the loss
does not fall with N or D over the probes) leaves the split undefined likewise.

**Compute-optimal split** (Hoffmann et al., eq. 4) for C = 6ND FLOPs:
N_opt = G (C/6)^(beta/(alpha+beta)), D_opt = G^-1 (C/6)^(alpha/(alpha+beta)), G = (alpha A / (beta B))^(1/(alpha+beta)).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from yieldgate.errors import InputError

__all__ = ["ScalingLaw", "Prediction", "fit_scaling", "MIN_SIZES", "E_FLOOR"]

MIN_SIZES = 3
"""Model sizes an L(N, D) fit needs: A and alpha are two numbers learned from how loss moves with N."""
E_FLOOR = 1e-3
"""E below this share of the lowest loss fitted is at its bound (E >= 0): fitted to ~0, not identified."""
_IDENTIFYING_SIZES = 5
"""Sizes that give each of the law's five parameters a point of its own; fewer leave E traded against A and alpha."""
HUBER_DELTA = 1e-3
"""Hoffmann et al.'s delta, in log loss."""
_GRID = np.array(
    list(
        itertools.product(
            np.arange(0, 30, 5.0),  # a
            np.arange(0, 30, 5.0),  # b
            np.arange(-1, 1.5, 0.5),  # e
            np.arange(0, 2.5, 0.5),  # alpha
            np.arange(0, 2.5, 0.5),  # beta
        )
    )
)
_STARTS = 4
"""L-BFGS runs from this many of the best grid points; a bootstrap refit starts from the full fit instead."""
_NAMES = ("E", "A", "alpha", "B", "beta")


@dataclass(frozen=True)
class Prediction:
    """L(N, D) at one point, with the law's interval and the interval for one measured probe."""

    params: float
    tokens: float
    loss: float
    interval: tuple[float, float]
    measured_interval: tuple[float, float]
    level: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ScalingLaw:
    """A fitted L(N, D) = E + A/N^alpha + B/D^beta with bootstrap intervals; see the module docstring."""

    E: float
    A: float
    alpha: float
    B: float
    beta: float
    intervals: dict[str, tuple[float, float]]
    """Parameter -> its bootstrap percentile interval at `level`."""
    level: float
    sizes: list[int]
    """The distinct N fitted over, smallest first."""
    points: int
    probes: int
    resampled: str
    """`probes` (within each size) or `evaluations` (within each size: some size has a single probe)."""
    boots: int
    """Bootstrap refits that converged."""
    noise: float
    """One evaluation's scatter around the law, in log loss: the residuals' root mean square over n - 5 degrees of
    freedom (not their median absolute value: the Huber loss at delta = 1e-3 fits nearly a median, which shrinks
    the residuals' median below the scatter)."""
    rmse: float
    """Root mean square of the log-loss residuals."""
    notes: list[str] = field(default_factory=list)
    e_at_bound: bool = field(default=False, init=False)
    """E fitted to ~0 (below `E_FLOOR` of the lowest loss): its value is where the optimiser stopped at the bound
    E >= 0, which depends on the BLAS and the CPU, so it is shown as ~0, never by its digits."""
    unidentified: str | None = field(default=None, init=False)
    """Why the law is not identified (E at its bound or its interval reaching it or wider than E, an exponent at 0)
    and what probes would identify it; None when it is (module docstring, "Identified")."""
    replicates: np.ndarray = field(default_factory=lambda: np.empty((0, 5)), repr=False)
    """(boots, 5): E, A, alpha, B, beta of each bootstrap refit."""

    def __call__(self, params: Any, tokens: Any) -> Any:
        return _law(np.array([self.E, self.A, self.alpha, self.B, self.beta]), params, tokens)

    def predict(self, params: float, tokens: float, *, seed: int = 0) -> Prediction:
        """L at (N, D) with the law's interval and the interval one measured probe's loss should fall in."""
        if not (params > 0 and tokens > 0):
            raise InputError(f"a prediction needs N > 0 and D > 0, got N = {params}, D = {tokens}")
        loss = float(self(params, tokens))
        boot = _law(self.replicates.T, params, tokens) if len(self.replicates) else np.array([loss])
        scatter = np.exp(np.random.default_rng(seed).normal(0.0, self.noise, size=len(boot)))
        return Prediction(
            params=float(params),
            tokens=float(tokens),
            loss=loss,
            interval=_percentiles(boot, self.level, loss),
            measured_interval=_percentiles(boot * scatter, self.level, loss),
            level=self.level,
        )

    def optimal(self, flops: float) -> dict[str, float]:
        """The N and D that minimise L at C = 6ND FLOPs (Hoffmann et al., eq. 4), and their ratio D/N."""
        if not flops > 0:
            raise InputError(f"the FLOP budget must be > 0, got {flops}")
        n, d = _optimal(self.alpha, self.A, self.beta, self.B, flops)
        return {"flops": float(flops), "params": n, "tokens": d, "tokens_per_param": d / n}

    def optimal_interval(self, flops: float) -> dict[str, tuple[float, float]]:
        """Bootstrap intervals of `optimal`'s N, D and D/N."""
        est = self.optimal(flops)
        r = self.replicates
        n, d = _optimal(r[:, 2], r[:, 1], r[:, 4], r[:, 3], flops) if len(r) else (est["params"], est["tokens"])
        n, d = np.atleast_1d(n), np.atleast_1d(d)
        return {
            "params": _percentiles(n, self.level, est["params"]),
            "tokens": _percentiles(d, self.level, est["tokens"]),
            "tokens_per_param": _percentiles(d / n, self.level, est["tokens_per_param"]),
        }

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "replicates"}
        out["law"] = "L(N, D) = E + A/N^alpha + B/D^beta (Hoffmann et al. 2022, approach 3)"
        return out


def _law(p: np.ndarray, n: Any, d: Any) -> Any:
    e, a, alpha, b, beta = p
    return e + a / np.power(n, alpha) + b / np.power(d, beta)


def _optimal(alpha: Any, a: Any, beta: Any, b: Any, flops: float) -> tuple[Any, Any]:
    g = np.power(alpha * a / (beta * b), 1.0 / (alpha + beta))
    n = g * np.power(flops / 6.0, beta / (alpha + beta))
    return n, flops / 6.0 / n


def _percentiles(values: np.ndarray, level: float, estimate: float) -> tuple[float, float]:
    """Percentile interval, widened to hold the estimate (a skewed bootstrap may leave it outside)."""
    values = values[np.isfinite(values)]
    if not len(values):
        return (math.nan, math.nan)
    tail = (1 - level) / 2
    lo, hi = np.quantile(values, [tail, 1 - tail])
    return (float(min(lo, estimate)), float(max(hi, estimate)))


def _objective(theta: np.ndarray, logn: np.ndarray, logd: np.ndarray, logl: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean Huber loss of log L^ - log L over delta^2, and its gradient in theta = (a, b, e, alpha, beta).

    Over delta^2 so that the objective is of order 1: L-BFGS-B's stopping rule compares the objective's decrease
    with max(|f|, 1), and at the raw scale (~1e-5) it stops long before the minimum (Besiroglu et al. 2024 traced
    part of their disagreement with Hoffmann et al.'s fit to such an early stop)."""
    a, b, e, alpha, beta = theta
    t1, t2 = a - alpha * logn, b - beta * logd  # the A/N^alpha and B/D^beta terms, in log
    top = np.maximum(np.maximum(t1, t2), e)
    x1, x2, x3 = np.exp(t1 - top), np.exp(t2 - top), np.exp(e - top)
    total = x1 + x2 + x3
    r = top + np.log(total) - logl  # log L^ - log L
    absr = np.abs(r)
    huber = np.where(absr <= HUBER_DELTA, 0.5 * r**2, HUBER_DELTA * (absr - 0.5 * HUBER_DELTA))
    slope = np.clip(r, -HUBER_DELTA, HUBER_DELTA) / total  # d huber / d r, over the softmax's denominator
    w1, w2 = x1 * slope, x2 * slope  # d huber / d term (softmax weight x slope)
    grad = np.array([w1.sum(), w2.sum(), (x3 * slope).sum(), -(w1 @ logn), -(w2 @ logd)])
    scale = len(r) * HUBER_DELTA**2
    return float(huber.sum() / scale), grad / scale


def _grid_starts(logn: np.ndarray, logd: np.ndarray, logl: np.ndarray, k: int) -> np.ndarray:
    """The k grid points with the lowest objective, as (a, b, e, alpha, beta) rows."""
    a, b, e, alpha, beta = _GRID.T[:, :, None]
    terms = np.stack([a - alpha * logn, b - beta * logd, np.broadcast_to(e, (len(_GRID), len(logn)))])
    r = np.abs(logsumexp(terms, axis=0) - logl)
    huber = np.where(r <= HUBER_DELTA, 0.5 * r**2, HUBER_DELTA * (r - 0.5 * HUBER_DELTA)).mean(axis=1)
    return _GRID[np.argsort(huber)[:k]]


_BOUNDS = [(None, None), (None, None), (None, None), (0.0, None), (0.0, None)]


def _fit(logn: np.ndarray, logd: np.ndarray, logl: np.ndarray, start: np.ndarray | None = None) -> np.ndarray | None:
    """(E, A, alpha, B, beta) of the best L-BFGS run from `start`, else from the grid's best starts; None if none
    converged to finite values."""
    starts = [start] if start is not None else list(_grid_starts(logn, logd, logl, _STARTS))
    best = None
    for x0 in starts:
        res = minimize(
            _objective,
            x0,
            args=(logn, logd, logl),
            jac=True,
            method="L-BFGS-B",
            bounds=_BOUNDS,
            options={"maxiter": 5000, "ftol": 1e-10, "gtol": 1e-8},
        )
        if np.all(np.isfinite(res.x)) and (best is None or res.fun < best.fun):
            best = res
    if best is None:
        return None
    a, b, e, alpha, beta = best.x
    return np.array([math.exp(e), math.exp(a), alpha, math.exp(b), beta])


def _theta(p: np.ndarray) -> np.ndarray:
    """(E, A, alpha, B, beta) back to the optimiser's (a, b, e, alpha, beta)."""
    e, a, alpha, b, beta = p
    # E (or A, B) fitted to 0 is exp(e) underflowed: its log is taken at the smallest positive float instead.
    tiny = np.finfo(float).tiny
    return np.array([math.log(max(a, tiny)), math.log(max(b, tiny)), math.log(max(e, tiny)), alpha, beta])


@dataclass(frozen=True)
class _Points:
    """The evaluation points of a fit: N, D, loss and the probe of each, checked finite and positive."""

    n: np.ndarray
    d: np.ndarray
    y: np.ndarray
    labels: np.ndarray

    @property
    def sizes(self) -> list[int]:
        return sorted({int(v) for v in self.n})


def fit_scaling(
    params: Any,
    tokens: Any,
    losses: Any,
    probes: Any,
    *,
    level: float = 0.9,
    boots: int = 200,
    seed: int = 0,
) -> ScalingLaw:
    """Fit L(N, D) to evaluation points: each has N (`params`), D (`tokens`), a loss, and the probe it came from
    (`probes`: any label; the bootstrap's unit). Refuses fewer than 3 model sizes, and any point whose N, D or
    loss is not a finite positive number."""
    from threadpoolctl import threadpool_limits

    p = _points(params, tokens, losses, probes)
    n, d, y, labels, sizes = p.n, p.d, p.y, p.labels, p.sizes
    notes: list[str] = []
    # Thousands of 5-parameter L-BFGS-B steps, each a few BLAS calls on vectors of 5: OpenBLAS's threads cost more
    # than they save, and on a busy machine (another job, a test run) a fit of 60 refits took 56 s, not 4.
    with threadpool_limits(limits=1, user_api="blas"):
        best = _fit(np.log(n), np.log(d), np.log(y))
        if best is None:
            raise InputError(f"the L(N, D) fit did not converge on {len(y)} points from {len(set(labels))} probes")
        replicates, resampled = _bootstrap(p, best, boots, seed, notes)
    resid = np.log(_law(best, n, d)) - np.log(y)
    law = ScalingLaw(
        **{k: float(v) for k, v in zip(_NAMES, best, strict=True)},
        intervals={k: _percentiles(replicates[:, i], level, float(best[i])) for i, k in enumerate(_NAMES)},
        level=level,
        sizes=sizes,
        points=len(y),
        probes=len(set(labels)),
        resampled=resampled,
        boots=len(replicates),
        noise=float(np.sqrt(np.sum(resid**2) / max(len(resid) - 5, 1))),
        rmse=float(np.sqrt(np.mean(resid**2))),
        notes=notes,
        replicates=replicates,
    )
    law.e_at_bound = law.E < E_FLOOR * float(y.min())
    if law.e_at_bound:
        law.notes.append(
            "E fitted to ~0 (at its bound): the probes lie far above the irreducible loss, so E is not identified "
            "(its interval is not a measurement); predictions rest on A, alpha, B and beta"
        )
    if min(law.alpha, law.beta) < 1e-6:
        which = "alpha" if law.alpha < 1e-6 else "beta"
        law.notes.append(
            f"{which} fitted to 0: the loss does not fall with {'N' if which == 'alpha' else 'D'} over these probes, "
            "so the law cannot extrapolate along it"
        )
    law.unidentified = _unidentified(law, E_FLOOR * float(y.min()))
    return law


def _unidentified(law: ScalingLaw, floor: float) -> str | None:
    """Why `law` is not identified, with the probes that would identify it; None when it is (module docstring)."""
    lo, hi = law.intervals["E"]
    level = f"{law.level:.0%}"
    if law.e_at_bound:
        why = "E fitted to ~0 (at its bound, not a measured value)"
    elif lo < floor:
        why = f"E's {level} interval [{lo:.3g}, {hi:.3g}] reaches 0"
    elif hi - lo > law.E:
        why = f"E's {level} interval [{lo:.3g}, {hi:.3g}] is wider than E ({law.E:.3g}) itself"
    elif min(law.alpha, law.beta) < 1e-6:
        which = "alpha" if law.alpha < 1e-6 else "beta"
        why = f"{which} fitted to 0 (the loss does not fall with {'N' if which == 'alpha' else 'D'} over the probes)"
    else:
        return None
    more = (
        f"probes of more sizes ({len(law.sizes)} now, {_IDENTIFYING_SIZES} or more) or "
        if len(law.sizes) < _IDENTIFYING_SIZES
        else ""
    )
    return (
        f"the law is not identified: {why}; over the probes (N = {law.sizes[0]:,} to {law.sizes[-1]:,}) the "
        f"irreducible loss is not told from the power terms: {more}larger ones (past N = {law.sizes[-1]:,}, trained "
        "on more tokens) would identify it"
    )


def _points(params: Any, tokens: Any, losses: Any, probes: Any) -> _Points:
    """The fit's points as arrays; refused where their lengths differ, a value is not finite and positive, or
    fewer than MIN_SIZES model sizes are among them."""
    n = np.asarray(params, dtype=float)
    d = np.asarray(tokens, dtype=float)
    y = np.asarray(losses, dtype=float)
    labels = np.asarray(probes).astype(str)
    if not len(n) == len(d) == len(y) == len(labels):
        lengths = ", ".join(str(len(v)) for v in (n, d, y, labels))
        raise InputError(f"params, tokens, losses and probes differ in length: {lengths}")
    bad = ~(np.isfinite(n) & np.isfinite(d) & np.isfinite(y) & (n > 0) & (d > 0) & (y > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"an L(N, D) fit needs finite positive N, D and loss; {int(bad.sum())} point(s) are not, the first in "
            f"probe {str(labels[i])!r} (N = {n[i]:g}, D = {d[i]:g}, loss = {y[i]:g}): drop or re-run that probe"
        )
    points = _Points(n, d, y, labels)
    if len(points.sizes) < MIN_SIZES:
        raise InputError(
            f"an L(N, D) fit needs probes of at least {MIN_SIZES} model sizes, got {len(points.sizes)} "
            f"(N = {', '.join(f'{s:,}' for s in points.sizes) or 'none'}): add sizes to the campaign's `models`"
        )
    return points


def _bootstrap(p: _Points, best: np.ndarray, boots: int, seed: int, notes: list[str]) -> tuple[np.ndarray, str]:
    """`boots` refits on points resampled within each model size: by probe where every size has two or more, else
    by evaluation (with a note); the converged refits' parameters (one row each) and the unit resampled."""
    by_size = {s: np.flatnonzero(p.n.astype(int) == s) for s in p.sizes}
    per_size = {s: sorted(set(p.labels[idx])) for s, idx in by_size.items()}
    resampled = "probes" if all(len(names) >= 2 for names in per_size.values()) else "evaluations"
    if resampled == "evaluations":
        single = [f"{s:,}" for s, names in per_size.items() if len(names) < 2]
        notes.append(
            f"one probe at N = {', '.join(single)}: the bootstrap resamples evaluations, which share a probe's seed, "
            "so the intervals miss the seed-to-seed spread; train 2 or more seeds per size"
        )
    logn, logd, logl = np.log(p.n), np.log(p.d), np.log(p.y)
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(boots):
        pick = np.concatenate([_resample(rng, idx, p.labels, resampled) for idx in by_size.values()])
        refit = _fit(logn[pick], logd[pick], logl[pick], start=_theta(best))
        if refit is not None:
            rows.append(refit)
    replicates = np.array(rows).reshape(-1, 5)
    if len(replicates) < boots // 2:
        notes.append(f"only {len(replicates)} of {boots} bootstrap refits converged: the intervals are rough")
    return replicates, resampled


def _resample(rng: np.random.Generator, idx: np.ndarray, labels: np.ndarray, unit: str) -> np.ndarray:
    """Indices of one size's points, resampled by probe (all of a drawn probe's points) or by evaluation."""
    if unit == "evaluations":
        return np.asarray(rng.choice(idx, size=len(idx)))
    names = sorted(set(labels[idx]))
    drawn = rng.choice(len(names), size=len(names))
    return np.concatenate([idx[labels[idx] == names[k]] for k in drawn])
