"""Many refits of loss(D) = E + B * D^(-beta) at once: the forecast's bootstrap, vectorised over its resamples.

`fit._fit` fits one curve with scipy's trust-region solver; a forecast's 400 bootstrap refits took it 10-20 s on a
run of a few evaluations (each refit some 30 solver iterations, each an SVD). Here the curve is profiled instead:
for a fixed exponent beta the curve is linear in (E, B), whose least-squares values have a closed form under the
same bounds (0 <= E <= the lowest loss, B >= 0), so every resample's best (E, B) at a beta is a few array
operations over all resamples together. beta is searched on a log grid, then refined by golden-section search
within the grid cell of the minimum. The two passes of `fit._fit` are kept: plain least squares, then a Cauchy loss
at the scale of the typical residual (iteratively reweighted least squares at each beta), so that one broken
evaluation counts for little.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["fit_many"]

BETA_BOUNDS = (1e-4, 5.0)
"""The exponent's bounds, as in `fit._fit`."""
_GRID = 40
"""Exponents tried by the least-squares pass (log-spaced over `BETA_BOUNDS`), before the golden-section search."""
_ROBUST_GRID = 16
"""Exponents tried by the Cauchy pass, whose every try costs `_IRLS_STEPS` weighted solves."""
_GOLDEN_STEPS = 20
_IRLS_STEPS = 8
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def _weighted_ls(p: np.ndarray, y: np.ndarray, w: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, (E, B) minimising sum w * (E + B * p - y)^2 with 0 <= E <= hi and B >= 0: the unconstrained
    solution where it is feasible, else the best of the three faces (E = 0, E = hi, B = 0)."""
    sw = w.sum(1)
    pm, ym = (w * p).sum(1) / sw, (w * y).sum(1) / sw
    dp = p - pm[:, None]
    spp = (w * dp * dp).sum(1)
    b = np.divide((w * dp * (y - ym[:, None])).sum(1), spp, out=np.zeros_like(spp), where=spp > 0)
    e = ym - b * pm
    bad = (e < 0) | (e > hi) | (b < 0)
    if not bad.any():
        return e, b
    wpp = (w * p * p).sum(1)
    faces = []
    for e_face in (np.zeros_like(hi), hi):
        num = (w * p * (y - e_face[:, None])).sum(1)
        faces.append((e_face, np.maximum(0.0, np.divide(num, wpp, out=np.zeros_like(wpp), where=wpp > 0))))
    faces.append((np.clip(ym, 0.0, hi), np.zeros_like(ym)))
    costs = np.stack([(w * (fe[:, None] + fb[:, None] * p - y) ** 2).sum(1) for fe, fb in faces])
    k = np.argmin(costs, 0)
    e_best = np.choose(k, [fe for fe, _ in faces])
    b_best = np.choose(k, [fb for _, fb in faces])
    return np.where(bad, e_best, e), np.where(bad, b_best, b)


def _profile(
    log_x: np.ndarray,
    y: np.ndarray,
    counts: np.ndarray,
    beta: np.ndarray,
    hi: np.ndarray,
    scale: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E, B, cost) per row at exponent `beta` (one per row): least squares, or with `scale` the Cauchy loss at that
    scale. A row is a resample, given as how often it draws each point (`counts`)."""
    p = np.exp(-beta[:, None] * log_x[None, :])
    e, b = _weighted_ls(p, y, counts, hi)
    if scale is None:
        return e, b, (counts * (e[:, None] + b[:, None] * p - y) ** 2).sum(1)
    for _ in range(_IRLS_STEPS):
        r = (e[:, None] + b[:, None] * p - y) / scale[:, None]
        e, b = _weighted_ls(p, y, counts / (1.0 + r * r), hi)
    r = (e[:, None] + b[:, None] * p - y) / scale[:, None]
    return e, b, (counts * np.log1p(r * r)).sum(1)


def _search(
    log_x: np.ndarray,
    y: np.ndarray,
    counts: np.ndarray,
    hi: np.ndarray,
    scale: np.ndarray | None,
    grid_points: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's best (E, B, beta): the grid's best beta, then golden-section search between its neighbours."""
    grid = np.log(np.geomspace(*BETA_BOUNDS, grid_points))
    rows = len(counts)
    costs = np.stack([_profile(log_x, y, counts, np.full(rows, math.exp(g)), hi, scale)[2] for g in grid], 1)
    i = np.argmin(costs, 1)
    lo, up = grid[np.maximum(i - 1, 0)], grid[np.minimum(i + 1, grid_points - 1)]
    x1, x2 = up - _GOLDEN * (up - lo), lo + _GOLDEN * (up - lo)
    f1 = _profile(log_x, y, counts, np.exp(x1), hi, scale)[2]
    f2 = _profile(log_x, y, counts, np.exp(x2), hi, scale)[2]
    for _ in range(_GOLDEN_STEPS):
        left = f1 < f2  # the minimum lies in [lo, x2]
        up, lo = np.where(left, x2, up), np.where(left, lo, x1)
        x1, x2 = np.where(left, up - _GOLDEN * (up - lo), x2), np.where(left, x1, lo + _GOLDEN * (up - lo))
        # One new point per step: the other is the old inner point, whose cost is known.
        f_new = _profile(log_x, y, counts, np.exp(np.where(left, x1, x2)), hi, scale)[2]
        f1, f2 = np.where(left, f_new, f2), np.where(left, f1, f_new)
    beta = np.exp((lo + up) / 2.0)
    e, b, _ = _profile(log_x, y, counts, beta, hi, scale)
    return e, b, beta


def fit_many(tokens: np.ndarray, losses: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E, B, beta) of each resample of the points (`tokens` > 0, sorted, and their `losses`); resample i draws
    point j `counts[i, j]` times. B is in the units of the tokens given; a row that cannot be fitted gets NaN."""
    x, y = np.asarray(tokens, dtype=float), np.asarray(losses, dtype=float)
    w = np.asarray(counts, dtype=float)
    log_x = np.log(x / x[0])  # in units of the first token count, as `fit._fit`: B and beta well scaled
    drawn = w > 0
    hi = np.where(drawn, y[None, :], np.inf).min(1)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e, b, beta = _search(log_x, y, w, hi, None, _GRID)
        r = np.where(drawn, e[:, None] + b[:, None] * np.exp(-beta[:, None] * log_x[None, :]) - y, np.nan)
        mad = 1.4826 * _weighted_median(np.abs(r - _weighted_median(r, w)[:, None]), w)
        spread = np.where(drawn, y[None, :], -np.inf).max(1) - hi
        scale_r = np.maximum(mad, 1e-6 * np.where(spread > 0, spread, 1.0))
        e, b, beta = _search(log_x, y, w, hi, scale_r, _ROBUST_GRID)
        b = b * x[0] ** beta
    ok = np.isfinite(e) & np.isfinite(b) & np.isfinite(beta)
    return np.where(ok, e, np.nan), np.where(ok, b, np.nan), np.where(ok, beta, np.nan)


def _weighted_median(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per row, the median of `values` with each repeated `counts` times (the resample's own median; NaN where
    a point is not drawn); for an even count the mean of the two middle values, as numpy's median."""
    order = np.argsort(np.where(counts > 0, values, np.inf), axis=1)
    v = np.take_along_axis(values, order, 1)
    c = np.cumsum(np.take_along_axis(counts, order, 1), 1)
    total = c[:, -1]
    lower = np.argmax(c >= (total[:, None] + 1) // 2, axis=1)
    upper = np.argmax(c >= total[:, None] // 2 + 1, axis=1)
    rows = np.arange(len(v))
    return (v[rows, lower] + v[rows, upper]) / 2.0
