"""Where a run stopped learning: the plateau its own law can resolve, whatever the evaluation cadence.

A tranche's gain judged against the noise band alone calls a learning run's late tranches flat, and more of them the
more often it is evaluated (one power-law run read 70%, 62% and 50% wasted at evaluations every 100, 250 and 500
steps): a short tranche of a slowly falling curve gains less than one evaluation's noise. What stops learning is
read from the whole curve instead, against the run's own law loss(D) = E + B * D^(-beta) (`fit`):

- **learning**: the law over every stable-phase evaluation;
- **stopped at D0**: the same law up to D0 and its value at D0 after it, `E + B * min(D, D0)^(-beta)`, for each
  evaluation D0 with at least `MIN_EVALS` evaluations from it on (the window the plateau is judged over), refitted.

A curve whose law is flat (`PowerLaw.flat`: it falls by less than three times its scatter) learned nothing
measurable: its plateau starts at its first evaluation. Otherwise the stop that fits best is a plateau when it fits
better than the law by more than the evaluation noise allows: (RSS_law - RSS_stopped) / sigma^2 above `THRESHOLD`,
sigma the noise of one evaluation read from residuals against a local fit (`fit.eval_noise`, which does not depend
on the law being right). Both models describe the same curve at any cadence, so a finer cadence only adds evidence:
the start moves by an evaluation interval or so (within 10% of the run over the generated resolvable cases). A run
whose law keeps falling, however slowly, has no plateau; a stretch with fewer than `MIN_EVALS` evaluations after the
start cannot be judged (`unresolved`).

`THRESHOLD`: over 30 seeds each of a power-law run (2 + 3 (t/100)^-0.5, noise 0.01, 20 to 100 evaluations) the
statistic's 99th percentile was 2.0 to 5.9; a plateau after half of such a run gave 117 and more at 20 evaluations
and was found in 90 of 90 (`tests/test_plateau.py` holds both sides on generated curves). It is a likelihood ratio
for one added parameter chosen by a search over the evaluations, so it sits above chi-square's 6.6 (one degree of
freedom, 1%): 12. The fits compared are plain least squares (`fit.law_fit`): a robust fit does not minimise the sums
of squares set against each other here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from yieldgate.analysis.fit import fit_power_law, law_fit

__all__ = ["Plateau", "plateau", "MIN_EVALS", "THRESHOLD"]

MIN_EVALS = 4
"""Evaluations from a plateau's start on that judge it: fewer leave it unresolved."""
MIN_BEFORE = 3
"""Evaluations up to a plateau's start that the law before it is fitted on."""
SCAN = 120
"""Stops tried on the first pass over a long run's evaluations (`plateau`)."""
THRESHOLD = 12.0
"""(RSS_law - RSS_stopped) / sigma^2 above which the stopped law is a plateau (module docstring)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Plateau:
    """Where a run's learning stopped on its own law, or why that cannot be said."""

    start: float | None
    """The axis value (tokens or steps) from which the run learned nothing; None: it did not stop (or unresolved)."""
    statistic: float | None
    """(RSS_law - RSS_stopped) / sigma^2 of the best stop; None where nothing was judged."""
    evaluations: int
    """Evaluations from `start` on (0 without a plateau)."""
    unresolved: str | None = None
    """Why the curve cannot be judged; None when it was."""
    axis: str = "tokens"
    """What `start` counts: tokens, or steps for a run without token counts."""

    def to_dict(self) -> dict[str, float | int | str | None]:
        return {
            "start": self.start,
            "statistic": None if self.statistic is None else round(self.statistic, 1),  # a threshold of 12 reads it
            "evaluations": self.evaluations,
            "unresolved": self.unresolved,
            "axis": self.axis,
        }


def _rss(x: np.ndarray, y: np.ndarray) -> float:
    e, b, beta = law_fit(x, y)
    return float(np.sum((e + b * np.power(x, -beta) - y) ** 2))


def plateau(x: np.ndarray, y: np.ndarray, sigma: float) -> Plateau:
    """The plateau of the curve y(x) (a loss: lower is better; x > 0 increasing, the stable-phase evaluations),
    against its own law, at evaluation noise `sigma` (module docstring)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(x)
    if n < MIN_BEFORE + MIN_EVALS - 1:
        return Plateau(
            start=None,
            statistic=None,
            evaluations=0,
            unresolved=f"{n} stable-phase evaluations: a plateau is judged over {MIN_EVALS} or more after "
            f"{MIN_BEFORE} or more on the law before it",
        )
    if not (math.isfinite(sigma) and sigma > 0):
        return Plateau(start=None, statistic=None, evaluations=0, unresolved="no evaluation noise to judge against")
    if fit_power_law(x, y).flat:  # it never learned measurably: all of it is the plateau
        return Plateau(start=float(x[0]), statistic=None, evaluations=n)
    learning = _rss(x, y)
    first, last = MIN_BEFORE - 1, n - MIN_EVALS
    # At most `SCAN` stops evenly spaced, then every one between the best's neighbours: a run of thousands of
    # evaluations costs a few hundred fits, not thousands.
    grid = sorted({int(round(v)) for v in np.linspace(first, last, min(SCAN, last - first + 1))})
    stops = {k: _rss(np.minimum(x, x[k]), y) for k in grid}
    best = min(stops, key=lambda i: (stops[i], i))
    at = grid.index(best)
    for k in range(grid[max(at - 1, 0)], grid[min(at + 1, len(grid) - 1)] + 1):
        stops.setdefault(k, _rss(np.minimum(x, x[k]), y))
    k = min(stops, key=lambda i: (stops[i], i))
    statistic = (learning - stops[k]) / sigma**2
    if not statistic > THRESHOLD:
        return Plateau(start=None, statistic=float(statistic), evaluations=0)
    return Plateau(start=float(x[k]), statistic=float(statistic), evaluations=n - k)
