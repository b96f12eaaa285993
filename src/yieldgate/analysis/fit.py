"""Loss-vs-tokens fits and forecasts of the next tranche's marginal yield, with bootstrap intervals.

    loss(D) = E + B * D^(-beta)        (D: accepted tokens)

fitted robustly (scipy least squares, then a Cauchy loss at the residuals' own scale, so one broken
evaluation does not drag the curve).
A within-run fit on a decaying learning rate mixes data yield with annealing (DESIGN.md): fit the
constant-LR phase of a warmup-stable-decay run, or the final losses of runs at three or more budgets.
`stable_phase` finds the evaluations before the decay starts; a fit asked to span a decay says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from yieldgate.analysis import refit, stats
from yieldgate.errors import InputError

__all__ = [
    "PowerLaw",
    "fit_power_law",
    "law_fit",
    "Forecast",
    "forecast",
    "eval_noise",
    "stable_phase",
    "tokens_at_marginal_yield",
]

BILLION = 1e9


FLAT_BETA = 0.02
"""A fitted exponent below this is a flat curve: no law to set learning against (a probe's val loss: 0.2-0.6)."""


@dataclass
class PowerLaw:
    """A fitted loss(D) = E + B * D^(-beta), with its quality and the points it used."""

    E: float
    B: float
    beta: float
    r2: float
    rmse: float
    tokens: list[float]
    losses: list[float]
    poor: str | None = None
    """Why the fit should not be trusted, or None."""

    def __call__(self, tokens: np.ndarray | float) -> np.ndarray | float:
        return self.E + self.B * np.power(np.asarray(tokens, dtype=float), -self.beta)

    def marginal_yield(self, tokens: float) -> float:
        """-dLoss/dD per billion tokens at D = `tokens`."""
        return self.B * self.beta * tokens ** (-self.beta - 1) * BILLION

    @property
    def flat(self) -> bool:
        """Fitted on a run that barely learned: the exponent near 0 (`FLAT_BETA`), or a fall over the fitted points
        within 3 times the points' scatter around it. Such a law expects almost no gain, and any gain set against it
        reads as thousands of times its due."""
        if self.beta < FLAT_BETA:
            return True
        fall = float(self(self.tokens[0]) - self(self.tokens[-1])) if self.tokens else 0.0
        return math.isfinite(self.rmse) and fall <= 3 * self.rmse

    def tokens_at(self, loss: float) -> float | None:
        """D at which the law reaches `loss` (None: at or below its floor E, which it never reaches)."""
        if not (math.isfinite(loss) and loss > self.E and self.B > 0 and self.beta > 0):
            return None
        return float((self.B / (loss - self.E)) ** (1.0 / self.beta))

    def to_dict(self) -> dict[str, Any]:
        return {
            "E": self.E,
            "B": self.B,
            "beta": self.beta,
            "r2": self.r2,
            "rmse": self.rmse,
            "points": len(self.tokens),
            "poor": self.poor,
        }


def _fit(
    tokens: np.ndarray, losses: np.ndarray, start: tuple[float, float, float] | None = None, *, robust: bool = True
) -> tuple[float, float, float]:
    """(E, B, beta); `start`: an earlier fit's (E, B, beta) to begin from (a bootstrap refit starts at the full fit);
    `robust` False: plain least squares (the first pass alone), whose residual sums of squares compare as such."""
    # Work in units of the first token count, so B and beta are well scaled for the solver.
    scale = tokens[0]
    x = tokens / scale
    lo = float(losses.min())
    if start is None:
        # A rough L = c * x^-beta guess through the first and last point sets the starting values.
        beta0 = 0.3
        e0 = max(0.0, lo - 0.5 * (losses[0] - lo) - 1e-3)
        b0 = max(losses[0] - e0, 1e-6)
    else:
        e0, b0, beta0 = min(start[0], lo), start[1] * scale ** -start[2], start[2]

    log_x = np.log(x)

    def residuals(p: np.ndarray) -> np.ndarray:
        e, b, beta = p
        return e + b * np.power(x, -beta) - losses

    def jacobian(p: np.ndarray) -> np.ndarray:
        # Exact derivatives: a finite-difference Jacobian costs 3 extra residual evaluations per iteration, and a
        # forecast's 400 bootstrap refits spent a third of their time there.
        _, b, beta = p
        power = np.power(x, -beta)
        return np.column_stack([np.ones_like(x), power, -b * power * log_x])

    bounds = ([0.0, 0.0, 1e-4], [lo, np.inf, 5.0])
    first = least_squares(residuals, x0=[e0, b0, beta0], jac=jacobian, bounds=bounds)
    if not robust:
        e, b, beta = first.x
        return float(e), float(b * scale**beta), float(beta)
    # Second pass: a Cauchy loss at the scale of the typical residual (1.4826 x MAD ~ sigma), so that an
    # evaluation far off the curve (a broken eval) counts for little instead of quadratically.
    r = residuals(first.x)
    sigma = 1.4826 * float(np.median(np.abs(r - np.median(r))))
    floor = 1e-6 * (float(losses.max() - losses.min()) or 1.0)
    result = least_squares(residuals, x0=first.x, jac=jacobian, bounds=bounds, loss="cauchy", f_scale=max(sigma, floor))
    e, b, beta = result.x
    return float(e), float(b * scale**beta), float(beta)


def law_fit(tokens: np.ndarray, losses: np.ndarray) -> tuple[float, float, float]:
    """(E, B, beta) of loss = E + B * D^(-beta) through points sorted by D > 0 by plain least squares, without
    `fit_power_law`'s checks or its robust second pass: for callers that compare the residual sums of squares of
    many variants of one curve (`plateau`), which a robust fit does not minimise."""
    return _fit(np.asarray(tokens, dtype=float), np.asarray(losses, dtype=float), robust=False)


def fit_power_law(tokens: np.ndarray | list[float], losses: np.ndarray | list[float]) -> PowerLaw:
    """Fit loss(D) = E + B * D^(-beta) to evaluation points (tokens > 0); report when the fit is poor."""
    d = np.asarray(tokens, dtype=float)
    y = np.asarray(losses, dtype=float)
    ok = np.isfinite(d) & np.isfinite(y) & (d > 0)
    d, y = d[ok], y[ok]
    order = np.argsort(d)
    d, y = d[order], y[order]
    if len(d) < 3:
        raise InputError(f"a loss-vs-tokens fit needs at least 3 evaluations after the first token, got {len(d)}")
    e, b, beta = _fit(d, y)
    law = PowerLaw(E=e, B=b, beta=beta, r2=math.nan, rmse=math.nan, tokens=d.tolist(), losses=y.tolist())
    pred = law(d)
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    law.rmse = math.sqrt(ss_res / len(d))
    law.r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else math.nan
    if len(d) < 4:
        law.poor = f"only {len(d)} evaluations: too few to judge the fit"
    elif not law.r2 >= 0.9:
        law.poor = f"the curve explains little of the variation (R^2 = {law.r2:.2f})"
    elif beta >= 4.99 or beta <= 1e-3:
        law.poor = f"the exponent ran to its bound (beta = {beta:.3g})"
    if law.flat:  # the reason that matters most: say it whatever else is poor
        fall = float(law(d[0]) - law(d[-1]))
        flat = f"the curve it is fitted on is flat (falls {fall:.3g} over its points, scatter {law.rmse:.3g})"
        law.poor = flat if law.poor is None else f"{flat}; {law.poor}"
    return law


@dataclass
class Forecast:
    """The improvement the next `next_tokens` will buy after `at_tokens`, with bootstrap intervals.

    `interval` is where the gain measured between two evaluations (at `at_tokens` and `at_tokens +
    next_tokens`) should fall: the fit's uncertainty plus the evaluations' own noise, which is what a
    measured tranche shows. `fit_interval` is the fit's uncertainty alone (the gain of the smooth curve)."""

    at_tokens: float
    next_tokens: float
    gain: float
    interval: tuple[float, float]
    level: float
    fit_interval: tuple[float, float]
    eval_noise: float
    """Standard deviation of one evaluation around the curve, from the fit's residuals."""
    yield_per_btok: float
    yield_interval: tuple[float, float]
    """The curve's marginal yield over the tranche, per billion tokens, with `fit_interval`'s uncertainty."""
    fit: PowerLaw
    threshold_tokens: float | None = None
    """Tokens at which the marginal yield falls below the requested threshold (None: not asked)."""
    notes: list[str] = field(default_factory=list)
    axis: str = "tokens"
    """What `at_tokens` and `next_tokens` count: tokens, or optimizer steps (`steps`; `epochs` where the run's steps
    count epochs) for a run without token counts (its `yield_per_btok` is then per billion steps: read `gain /
    next_tokens` instead)."""

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["fit"] = self.fit.to_dict()
        return out


LOCAL_HALF = 3
"""Neighbours on each side of an evaluation in the local fit that predicts it (`eval_noise`): 6 for a cubic."""
LOCAL_DEGREE = 3
"""Degree of the local polynomial in log tokens: a power law's curvature over 7 evaluations is a cubic's to well
under a noise of 1e-3 of the loss, while a line through two neighbours (the difference-based estimator) keeps it."""


def eval_noise(tokens: np.ndarray, losses: np.ndarray) -> float:
    """Standard deviation of one evaluation around the smooth curve, from the evaluations alone.

    Each evaluation is predicted by a local polynomial (`LOCAL_DEGREE`, in log tokens) fitted to its `LOCAL_HALF`
    neighbours on each side (the window shifted inward at the ends), leaving itself out; the prediction error
    e_i = y_i - f_i(x_i) has variance sigma^2 (1 + v_i), with v_i = x0' (X'X)^-1 x0 the fit's own variance at the
    point, so sigma^2 = mean(e_i^2 / (1 + v_i)) (leave-one-out residuals of a local polynomial: Gasser, Sroka &
    Jennen-Steinmetz 1986 is the case of a line through two neighbours). The line kept a steep early curve's slope
    change as noise (0.022 for a true 0.010 on a curve falling 9.5 -> 3.1); a cubic in log tokens follows a power
    law's bend. With fewer evaluations than the window, the polynomial's degree is lowered to what they allow (a
    line through two neighbours at three). The few residuals a sharp bend of the curve leaves (a plateau left within
    two evaluations) are not noise and are left out (`_robust_sigma`). Points that share a token count (seeds of one
    budget) give the noise directly: the pooled standard deviation of the replicates.
    """
    x, y = np.asarray(tokens, dtype=float), np.asarray(losses, dtype=float)
    groups = pd.Series(y).groupby(x)
    if groups.ngroups < len(x):  # replicates (seeds at one budget): their scatter is the noise, measured directly
        dof = len(x) - groups.ngroups
        return float(math.sqrt(float(((y - groups.transform("mean").to_numpy()) ** 2).sum()) / dof))
    if len(x) < 3:
        return math.nan
    return _robust_sigma(_squared_residuals(x, y))


def _squared_residuals(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each evaluation's squared leave-one-out residual against its local polynomial, scaled by 1 + v_i (see
    `eval_noise`): each has expectation sigma^2 where the curve is smooth at the evaluations' spacing."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(x)
    u = np.log(x) if (x > 0).all() else x  # a power law bends least in log tokens
    width = min(2 * LOCAL_HALF + 1, n)  # the window, the point itself included
    degree = min(LOCAL_DEGREE, max((width - 1) // 2, 1))  # half as many terms as neighbours: a line through two
    scaled = []
    for i in range(n):
        lo = min(max(i - (width - 1) // 2, 0), n - width)
        near = np.r_[lo:i, i + 1 : lo + width]
        design = np.vander(u[near] - u[i], degree + 1)  # the point itself at 0: the prediction is the intercept
        coef, *_ = np.linalg.lstsq(design, y[near], rcond=None)
        v = float(np.linalg.pinv(design.T @ design)[-1, -1])
        scaled.append((y[i] - coef[-1]) ** 2 / (1.0 + v))
    return np.asarray(scaled)


CHI2_1_MEDIAN = 0.45494
"""The median of a chi-square with one degree of freedom: a squared normal's, so sigma^2 = median(e^2) / this."""
CUT_SIGMAS = 5.0
"""A residual beyond this many of the median's sigmas is a bend, not noise. Not 3: the median of a dozen squares is
itself a rough sigma (a third low now and then), and a cut at 3 of those took normal residuals out too, reading the
noise 18% low on smooth 16-evaluation curves; at 5 a normal residual is cut about once in a million."""


def _robust_sigma(squares: np.ndarray) -> float:
    """sigma from the squared scaled residuals, the few that a bend of the curve makes large left out.

    A curve that bends within a few evaluations (a small model leaving its plateau, a schedule's turn) is followed
    by no local polynomial: its two or three evaluations there leave residuals ten times the others', and the mean
    of the squares read them as noise (0.026 on a real 200k-token probe whose other evaluations scatter by 0.005,
    calling 3 of its 10 tranches "within noise"). The squares beyond (`CUT_SIGMAS` sigma)^2, sigma read from their
    median, are left out and the mean of the rest is the noise. Where none is beyond, the plain mean is the reading,
    as before; where more than a third would go, the curve is not smooth at the evaluations' spacing and nothing is
    left out either: the plain mean, the larger reading. So the estimate is never above the plain one, and never
    reads normal noise low (tests/test_fit.py)."""
    plain = float(math.sqrt(np.mean(squares)))
    if len(squares) < 6:
        return plain
    start = float(np.median(squares)) / CHI2_1_MEDIAN
    kept = squares[squares <= CUT_SIGMAS**2 * start]
    if start <= 0 or len(kept) == len(squares) or len(kept) < math.ceil(2 * len(squares) / 3):
        return plain
    return float(math.sqrt(np.mean(kept)))


def tokens_at_marginal_yield(law: PowerLaw, threshold_per_btok: float) -> float:
    """D at which -dLoss/dD per billion tokens falls to `threshold_per_btok`."""
    if threshold_per_btok <= 0:
        raise InputError(f"the marginal-yield threshold must be > 0, got {threshold_per_btok}")
    return float((law.B * law.beta * BILLION / threshold_per_btok) ** (1.0 / (law.beta + 1.0)))


def forecast(
    tokens: np.ndarray | list[float],
    losses: np.ndarray | list[float],
    *,
    next_tokens: float,
    at_tokens: float | None = None,
    level: float = 0.8,
    boots: int = 400,
    threshold_per_btok: float | None = None,
    seed: int = 0,
    replicates: int = 1,
) -> Forecast:
    """Fit, then forecast loss(at) - loss(at + next_tokens) with bootstrap intervals over evaluations
    (resampled with replacement, refitted; `level` is each interval's coverage). The measured gain is a
    difference of two noisy evaluations, so `interval` adds two draws of the evaluation noise (normal, at
    `eval_noise`'s standard deviation) to each refit's gain; `replicates` > 1: the gain will be measured as the
    mean over that many seeds, whose noise is smaller by its square root."""
    if not (math.isfinite(next_tokens) and next_tokens > 0):
        raise InputError(f"next_tokens must be a number > 0, got {next_tokens}")
    stats.check_level(level)
    law = fit_power_law(tokens, losses)
    at = float(at_tokens if at_tokens is not None else law.tokens[-1])
    gain = float(law(at) - law(at + next_tokens))
    rng = np.random.default_rng(seed)
    d, y = np.array(law.tokens), np.array(law.losses)
    noise = eval_noise(d, y)
    # Resample the evaluations with replacement (each resample as how often it draws each point) and refit them
    # all at once (`refit.fit_many`); a resample of fewer than 3 distinct points fits no curve.
    counts = np.stack([np.bincount(rng.integers(0, len(d), size=len(d)), minlength=len(d)) for _ in range(boots)])
    counts = counts[(counts > 0).sum(1) >= 3]
    _, b, beta = refit.fit_many(d, y, counts)
    with np.errstate(over="ignore", invalid="ignore"):
        refits = b * (at**-beta - (at + next_tokens) ** -beta)
    gains = refits[np.isfinite(refits)].tolist()
    notes = []
    if len(gains) < boots // 2:
        notes.append(f"only {len(gains)} of {boots} bootstrap refits succeeded: the interval is rough")
    tail = (1 - level) / 2
    fit_lo, fit_hi = np.quantile(gains, [tail, 1 - tail]).tolist() if gains else [math.nan, math.nan]
    measured = np.asarray(gains) + rng.normal(0.0, noise * math.sqrt(2.0 / max(replicates, 1)), size=len(gains))
    lo, hi = np.quantile(measured, [tail, 1 - tail]).tolist() if gains else [math.nan, math.nan]
    # A percentile interval need not hold the full fit's estimate (a skewed bootstrap); the interval printed beside
    # an estimate always holds it, so each is widened to it where it falls outside.
    fit_lo, fit_hi, lo, hi = min(fit_lo, gain), max(fit_hi, gain), min(lo, gain), max(hi, gain)
    per = BILLION / next_tokens
    if law.poor:
        notes.append(f"poor fit: {law.poor}")
    return Forecast(
        at_tokens=at,
        next_tokens=float(next_tokens),
        gain=gain,
        interval=(lo, hi),
        level=level,
        fit_interval=(fit_lo, fit_hi),
        eval_noise=noise,
        yield_per_btok=gain * per,
        yield_interval=(fit_lo * per, fit_hi * per),
        fit=law,
        threshold_tokens=(None if threshold_per_btok is None else tokens_at_marginal_yield(law, threshold_per_btok)),
        notes=notes,
    )


def warmup_end(steps: pd.DataFrame, drop: float = 0.9) -> int | None:
    """The first step at which the learning rate reaches `drop` x its peak: the end of warm-up (None: no LR
    recorded)."""
    if "lr" not in steps or steps["lr"].isna().all():
        return None
    lr = steps.dropna(subset=["lr"])
    values = lr["lr"].to_numpy(dtype=float)
    return int(lr["step"].iloc[int(np.argmax(values >= drop * float(values.max())))])


def learning_noise(x: np.ndarray, y: np.ndarray, eval_steps: np.ndarray, steps: pd.DataFrame) -> tuple[float, int, int]:
    """One run's evaluation noise where it learns: `eval_noise` over its trained evaluations, those after step 0 and
    after warm-up (`warmup_end`). The untrained point and the steep first evaluations are where the curve bends
    most, and no line through neighbours follows them: over all evaluations they pass curvature off as noise (a
    200k-token probe: 0.110 with step 0, 0.027 without, which called every tranche "within noise"). With fewer than
    three trained evaluations, all of them. `x`, `y`: the evaluations on the run's axis (tokens or steps) and their
    values; `eval_steps`: their steps. Returns (noise, degrees of freedom, evaluations left out). The yield's noise
    bands and the detectors read the noise of a run through this one function."""
    x, y, eval_steps = (np.asarray(v, dtype=float) for v in (x, y, eval_steps))
    warm = warmup_end(steps)
    trained = (eval_steps > 0) & (x > 0)
    if warm is not None:
        trained &= eval_steps >= warm
    use = trained if trained.sum() >= 3 else np.ones(len(x), dtype=bool)
    if use.sum() < 3:
        return math.nan, int(use.sum()) - 2, 0
    return eval_noise(x[use], y[use]), int(use.sum()) - 2, int((~use).sum())


def stable_phase(steps: pd.DataFrame, eval_steps: np.ndarray, drop: float = 0.9) -> tuple[np.ndarray, str | None]:
    """Mask of evaluations taken before the learning rate starts to decay, and a note.

    The decay starts at the first step after the LR's peak where it falls below `drop` x the peak. A run
    without recorded LR gives all evaluations and says the phase is unknown; a schedule that decays from
    its peak on (cosine) leaves no stable phase, and the note says the fit mixes data yield with annealing.
    """
    if "lr" not in steps or steps["lr"].isna().all():
        return (
            np.ones(len(eval_steps), dtype=bool),
            "no learning rate recorded: cannot tell the stable phase from a decay",
        )
    lr = steps.dropna(subset=["lr"])
    peak_at = int(lr["lr"].to_numpy().argmax())
    peak = float(lr["lr"].iloc[peak_at])
    # The stable phase starts once warm-up has brought the LR near its peak: learning per token is lower
    # while it ramps, which would bend the fit.
    warm_end = warmup_end(steps, drop)
    assert warm_end is not None  # an LR is recorded
    after = lr.iloc[peak_at:]
    decayed = after[after["lr"] < drop * peak]
    if decayed.empty:
        mask = eval_steps >= warm_end
        return mask, (
            f"warm-up ends at step {warm_end}: the fit uses the {int(mask.sum())} evaluations after it"
            if not mask.all()
            else None
        )
    start = int(decayed["step"].iloc[0])
    mask = (eval_steps >= warm_end) & (eval_steps < start)
    stable = int(mask.sum())
    note = f"learning rate is stable from step {warm_end} to {start}: the fit uses the {stable} evaluations in between"
    if stable < 3:
        note = (
            f"learning rate decays from step {start}, leaving {stable} evaluations before it: a fit across the "
            "decay mixes data yield with annealing; fit the final losses of runs at three or more budgets instead"
        )
    return mask, note
