"""The one statistical rule of yieldgate: intervals over seeds, paired and unpaired tests, family-wise levels and
"within noise / tie / beyond noise" verdicts. `compare`, campaign rankings, the gate (its evidence and the
new-hardware exception) and the small-batch check all call these functions; none keeps a copy.

Rules:
- Intervals over a few seeds use Student's t at the interval's level, never the normal 1.96: with n seeds the
  mean is off by up to t(n-1)·s/√n.
- Two groups: the difference of means with Welch's standard error and degrees of freedom (unpaired), or the mean
  of per-seed differences (paired: seed k of A and seed k of B share what the seed fixes, such as the
  initialisation and the sampler). A side with one seed borrows the other side's spread and its degrees of
  freedom (a side with none leaves the difference without an interval).
- A family of k comparisons read together (the aligned points of one comparison, the pairs of one ranking) is held
  at a family-wise level by Bonferroni: each comparison at 1 - (1 - level)/k, when "beyond noise" is the claim
  acted on. Where "within noise" is the claim acted on (the new-hardware exception lets throughput decide while the
  curves match), widening for the family would make a departure harder to see, so each point is read at the
  level alone. The result names its level and its family.
- A verdict is "beyond noise" when the interval of the difference excludes 0, "within noise" otherwise;
  for rankings, a difference within noise is a "tie".
- Points where every run is identical by construction (the untrained model at step 0, the same for every seed of
  a side) carry no information about noise: `identical` tells them, and callers leave them out of verdicts.
- Every `Interval` names its level and its kind, and its estimate lies inside it (checked on construction).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

__all__ = [
    "Interval",
    "KINDS",
    "t_quantile",
    "normal_quantile",
    "family_level",
    "mean_interval",
    "difference",
    "pooled_mean",
    "slope_interval",
    "evaluation_difference",
    "reported_difference",
    "identical",
    "verdict",
    "seeds_for_margin",
    "check_level",
]

KINDS = {
    "mean": "mean over seeds",
    "difference": "difference of means (B - A)",
    "paired": "mean of paired differences (B - A, by seed)",
    "slope": "a fitted line's own slope",
    "pooled": "mean over seeds of per-seed estimates",
    "prediction": "prediction of a measured value",
    "curve": "a fitted curve's own",
    "evaluations": "difference of two evaluations, each off the curve by the evaluation noise",
    "reported": "difference of two evaluations, each with the standard error its harness reported",
}
"""The kinds of interval, by key: what the interval is an interval of."""

Kind = Literal["mean", "difference", "paired", "slope", "pooled", "prediction", "curve", "evaluations", "reported"]


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval, the interval's level (coverage), its kind and its degrees of freedom."""

    estimate: float
    low: float
    high: float
    level: float
    kind: Kind
    n: int
    """Seeds (or points) behind it."""
    dof: float | None = None
    family: int = 1
    """Comparisons in the family this interval was widened for (Bonferroni); `level` is then the family-wise level."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"interval kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not self.low <= self.estimate <= self.high:
            raise ValueError(f"the estimate {self.estimate!r} lies outside its interval [{self.low!r}, {self.high!r}]")

    @property
    def half(self) -> float:
        return (self.high - self.low) / 2

    def excludes(self, value: float = 0.0) -> bool:
        return bool(value < self.low or value > self.high)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = KINDS[self.kind]
        return out


@functools.lru_cache(maxsize=256)  # a yield report asks it once per tranche, always at the same level and dof
def t_quantile(level: float, dof: float) -> float:
    """Two-sided Student t quantile: the half-width of a `level` interval in standard errors."""
    from scipy import stats as _scipy  # imported when first used: scipy.stats takes ~1 s to import

    return float(_scipy.t.ppf(0.5 + level / 2, dof))


def normal_quantile(level: float) -> float:
    """Two-sided normal quantile (for large samples and bootstrap noise draws only, never for a few seeds)."""
    from scipy import stats as _scipy

    return float(_scipy.norm.ppf(0.5 + level / 2))


def check_level(level: float, name: str = "level") -> float:
    """`level`, an interval's coverage, if it lies strictly between 0 and 1; an InputError naming `name` otherwise
    (checked before any work, not deep in a quantile function)."""
    from yieldgate.errors import InputError

    if not 0 < level < 1:  # False for nan too
        raise InputError(f"{name} must be between 0 and 1, got {level}")
    return level


def family_level(level: float, k: int) -> float:
    """Per-comparison level that holds a family of k comparisons at `level` (Bonferroni): 1 - (1 - level) / k."""
    if not 0 < level < 1 or k < 1:
        raise ValueError(f"need 0 < level < 1 and k >= 1, got level={level}, k={k}")
    return 1 - (1 - level) / k


def _finite(values: Any) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return v[np.isfinite(v)]


def mean_interval(values: Any, level: float, *, family: int = 1) -> Interval | None:
    """Mean over seeds with its t-interval; None with fewer than two finite values."""
    v = _finite(values)
    if len(v) < 2:
        return None
    mean = float(v.mean())
    half = t_quantile(family_level(level, family), len(v) - 1) * float(v.std(ddof=1)) / math.sqrt(len(v))
    return Interval(mean, mean - half, mean + half, level, "mean", len(v), len(v) - 1, family)


def difference(a: Any, b: Any, level: float, *, paired: bool = False, family: int = 1) -> Interval | None:
    """mean(b) - mean(a) with its t-interval at `level` (family-wise over `family` comparisons).

    Paired: `a` and `b` are dicts seed -> value (or equal-length sequences, aligned by position); the interval is the
    mean of the per-seed differences over the shared seeds (None with fewer than two). Unpaired: Welch's standard
    error and degrees of freedom; a side with one value borrows the other's variance; None when neither side has two.
    """
    per = family_level(level, family)
    if paired:
        if isinstance(a, dict) and isinstance(b, dict):
            seeds = sorted(set(a) & set(b))
            d = _finite([b[s] - a[s] for s in seeds])
        else:
            d = _finite(np.asarray(b, dtype=float) - np.asarray(a, dtype=float))
        if len(d) < 2:
            return None
        mean = float(d.mean())
        half = t_quantile(per, len(d) - 1) * float(d.std(ddof=1)) / math.sqrt(len(d))
        return Interval(mean, mean - half, mean + half, level, "paired", len(d), len(d) - 1, family)
    va, vb = _finite(a), _finite(b)
    na, nb = len(va), len(vb)
    if (na < 2 and nb < 2) or not na or not nb:
        return None
    sa = va.var(ddof=1) if na >= 2 else vb.var(ddof=1)
    sb = vb.var(ddof=1) if nb >= 2 else va.var(ddof=1)
    se2 = sa / na + sb / nb
    if min(na, nb) == 1:
        dof = float(max(na, nb) - 1)  # one variance estimate, the other side's: its degrees of freedom
    else:
        den = (sa / na) ** 2 / (na - 1) + (sb / nb) ** 2 / (nb - 1)
        dof = se2**2 / den if den > 0 else float(na + nb - 2)
    delta = float(vb.mean() - va.mean())
    half = t_quantile(per, dof) * math.sqrt(se2) if se2 > 0 else 0.0
    return Interval(delta, delta - half, delta + half, level, "difference", na + nb, dof, family)


def pooled_mean(estimates: list[tuple[float, float, float]], level: float) -> Interval:
    """Mean over seeds of per-seed estimates (point, low, high at `level`), with a t-interval (n - 1 dof) whose
    standard error is the larger of the between-seed spread and the seeds' mean own variance, over √n. Each seed's
    own interval comes from hundreds of bootstrap refits, so its half-width is read back as a normal quantile times
    its standard error. The floor keeps two seeds that agree by chance from claiming a precision their fits do not
    have. One seed: its own interval."""
    if len(estimates) == 1:
        point, lo, hi = estimates[0]
        return Interval(point, min(lo, point), max(hi, point), level, "pooled", 1)
    points = np.array([e[0] for e in estimates], dtype=float)
    z = normal_quantile(level)
    within = float(np.mean([((hi - lo) / (2 * z)) ** 2 for _, lo, hi in estimates]))
    se = math.sqrt(max(float(points.var(ddof=1)), within) / len(points))
    half = t_quantile(level, len(points) - 1) * se
    mean = float(points.mean())
    return Interval(mean, mean - half, mean + half, level, "pooled", len(points), len(points) - 1)


def slope_interval(x: Any, y: Any, level: float) -> Interval:
    """Least-squares slope of y on x with its t-interval on n - 2 degrees of freedom (unbounded with two points)."""
    from scipy import stats as _scipy

    fit = _scipy.linregress(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    n = len(np.asarray(x))
    half = t_quantile(level, n - 2) * float(fit.stderr) if n > 2 else math.inf
    slope = float(fit.slope)
    return Interval(slope, slope - half, slope + half, level, "slope", n, n - 2 if n > 2 else None)


def evaluation_difference(estimate: float, sigma: float, dof: float, level: float) -> Interval | None:
    """The change between two evaluations of one run (a tranche's improvement) with the band its evaluation noise
    allows: each evaluation is off the smooth curve by a standard deviation `sigma` (`fit.eval_noise`, estimated
    with `dof` degrees of freedom), so the difference of two has standard error sigma·√2 and the band is
    ± t(level, dof)·sigma·√2. None without a finite noise estimate or degrees of freedom."""
    if not (math.isfinite(sigma) and math.isfinite(estimate)) or dof < 1:
        return None
    half = t_quantile(level, dof) * sigma * math.sqrt(2.0)
    return Interval(estimate, estimate - half, estimate + half, level, "evaluations", 2, dof)


def reported_difference(estimate: float, se_start: float, se_end: float, level: float) -> Interval | None:
    """The change between two evaluations whose harness reported each one's standard error (lm-eval's
    `acc_stderr`: the sampling error of a mean over the task's items): ± z(level)·√(se_start² + se_end²), normal
    quantiles as the errors are of means over many items. The two are taken as independent, which the same items
    at both ends make conservative. None unless all three are finite."""
    if not (math.isfinite(estimate) and math.isfinite(se_start) and math.isfinite(se_end)):
        return None
    half = normal_quantile(level) * math.hypot(se_start, se_end)
    return Interval(estimate, estimate - half, estimate + half, level, "reported", 2, math.inf)


def identical(*groups: Any) -> bool:
    """No seed varies at this point: within every group all values are the same (and some group has two or
    more). That is a point identical by construction, such as the untrained model every seed of a side starts
    from at step 0; it says nothing about noise, and callers leave it out of verdicts."""
    arrays = [np.asarray(g, dtype=float).ravel() for g in groups]
    return bool(any(len(v) > 1 for v in arrays) and all(np.all(v == v[0]) for v in arrays if len(v)))


def verdict(interval: Interval | None, *, tie: bool = False) -> str | None:
    """`beyond noise` when the interval excludes 0, else `within noise` (`tie` with `tie`); None without one."""
    if interval is None:
        return None
    return "beyond noise" if interval.excludes(0.0) else ("tie" if tie else "within noise")


def seeds_for_margin(seeds: int, half: float, margin: float, *, cap: float = 4.0) -> int:
    """More seeds needed so that an interval of half-width `half` on `seeds` seeds shrinks to `margin` (half-widths
    shrink as 1/√seeds): ceil(seeds·(half/margin)²) - seeds, at least 1 and at most `cap` times `seeds`."""
    return max(1, min(math.ceil(seeds * (half / margin) ** 2) - seeds, int(cap * seeds)))
