"""Mixture regression (RegMix's idea, Liu et al. 2024; this code is ours): fit a metric as a function of the
mixture weights over small runs, predict mixtures never trained at scale, and propose the best mixture.

- **Models**: ridge regression on the weights (linear) and on the weights with their pairwise products (quadratic),
  each with its penalty chosen by 5-fold cross-validation over a grid; the model of the lower cross-validated RMSE is
  kept. Closed-form in numpy (scikit-learn is not a dependency; LightGBM, RegMix's own choice, is used only where
  installed, as a third candidate).
- **Scored where the truth is known** (`evaluate`): for each larger model size of a results campaign, the fit over
  the smallest size's runs of the mixtures *not* measured at that size predicts the larger size's mixtures: Spearman's
  ρ and decision accuracy (share of pairs ordered as measured) against the measured values; beside it, plain ranking
  (the same mixtures' values at the smallest size) where they were measured there; and the rank, among the larger
  size's measured mixtures, of the one the fit picks as best.
- **Proposal** (`propose`): candidate mixtures drawn from Dirichlet distributions centred on the runs' mean mixture
  (concentration log-uniform over 0.3-30 times it, as RegMix samples around its prior), scored by the fit over every
  smallest-size run; the proposal is the mean of the best 100 (RegMix's averaging of the top candidates, which
  keeps it inside the well-sampled region). Its interval: the fit refitted on bootstrap resamples of the runs, each
  prediction plus a cross-validated residual drawn at random, percentiles at the campaign's level. The predicted
  value is at the smallest size: it ranks mixtures, it does not forecast the large model's loss.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sstats

from yieldgate.errors import InputError

__all__ = ["MixtureFit", "fit_mixture", "cv_rho", "pair_accuracy", "propose", "evaluate", "mixture_report"]

ALPHAS = tuple(10.0**k for k in range(-6, 3))
FOLDS = 5
TOP = 100
CANDIDATES = 20_000


def _features(w: np.ndarray, kind: str) -> np.ndarray:
    if kind == "linear":
        return w
    i, j = np.triu_indices(w.shape[1])
    return np.hstack([w, w[:, i] * w[:, j]])


def _ridge(x: np.ndarray, y: np.ndarray, alphas: tuple[float, ...]) -> list[tuple[np.ndarray, float]]:
    """(coefficients, intercept) of ridge at each penalty (alpha x runs), from one eigendecomposition of the centred
    features' Gram matrix."""
    mx, my = x.mean(axis=0), y.mean()
    xc = x - mx
    if len(alphas) == 1:
        coef = np.linalg.solve(xc.T @ xc + alphas[0] * len(y) * np.eye(x.shape[1]), xc.T @ (y - my))
        return [(coef, float(my - mx @ coef))]
    lam, v = np.linalg.eigh(xc.T @ xc)
    vty = v.T @ (xc.T @ (y - my))
    out = []
    for alpha in alphas:
        coef = v @ (vty / (np.maximum(lam, 0) + alpha * len(y)))
        out.append((coef, float(my - mx @ coef)))
    return out


def _folds(n: int, seed: int = 0) -> list[np.ndarray]:
    return np.array_split(np.random.default_rng(seed).permutation(n), min(FOLDS, n))


@dataclass
class MixtureFit:
    """A fitted mixture model: `predict(weights)`; `residuals` are its cross-validated ones."""

    sources: list[str]
    kind: str
    alpha: float
    cv_rmse: float
    residuals: np.ndarray
    coef: np.ndarray
    intercept: float
    booster: Any = None

    def predict(self, w: np.ndarray) -> np.ndarray:
        if self.booster is not None:
            return np.asarray(self.booster.predict(w), dtype=float)
        return _features(w, self.kind) @ self.coef + self.intercept

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.kind, "alpha": self.alpha, "cv_rmse": self.cv_rmse, "sources": self.sources}


def _cv(w: np.ndarray, y: np.ndarray, kind: str) -> np.ndarray:
    """Cross-validated residuals (measured minus predicted) of one ridge model at each penalty: alphas x runs."""
    x = _features(w, kind)
    out = np.empty((len(ALPHAS), len(y)))
    for test in _folds(len(y)):
        train = np.setdiff1d(np.arange(len(y)), test)
        for k, (coef, icpt) in enumerate(_ridge(x[train], y[train], ALPHAS)):
            out[k, test] = y[test] - (x[test] @ coef + icpt)
    return out


def _lightgbm(w: np.ndarray, y: np.ndarray) -> tuple[Any, np.ndarray] | None:
    if importlib.util.find_spec("lightgbm") is None:
        return None
    import lightgbm  # optional: RegMix's model

    def model() -> Any:
        return lightgbm.LGBMRegressor(n_estimators=200, learning_rate=0.05, verbose=-1, random_state=0)

    out = np.empty(len(y))
    for test in _folds(len(y)):
        train = np.setdiff1d(np.arange(len(y)), test)
        out[test] = y[test] - model().fit(w[train], y[train]).predict(w[test])
    return model().fit(w, y), out


def fit_mixture(sources: list[str], w: np.ndarray, y: np.ndarray) -> MixtureFit:
    """The best of linear and quadratic ridge (and LightGBM where installed) by cross-validated RMSE."""
    if len(y) < 2 * FOLDS:
        raise InputError(f"{len(y)} runs with mixture weights; a mixture regression needs {2 * FOLDS} or more")
    best: MixtureFit | None = None
    for kind in ("linear", "quadratic"):
        residuals = _cv(w, y, kind)
        for alpha, res in zip(ALPHAS, residuals, strict=True):
            rmse = float(np.sqrt(np.mean(res**2)))
            if best is None or rmse < best.cv_rmse:
                coef, icpt = _ridge(_features(w, kind), y, (alpha,))[0]
                best = MixtureFit(sources, kind, alpha, rmse, res, coef, icpt)
    assert best is not None
    boosted = _lightgbm(w, y)
    if boosted is not None and float(np.sqrt(np.mean(boosted[1] ** 2))) < best.cv_rmse:
        rmse = float(np.sqrt(np.mean(boosted[1] ** 2)))
        best = MixtureFit(sources, "lightgbm", 0.0, rmse, boosted[1], best.coef, best.intercept, boosted[0])
    return best


def refit_mixture(fit: MixtureFit, w: np.ndarray, y: np.ndarray) -> MixtureFit:
    """`fit`'s model (its kind and ridge penalty, or a boosted model) fitted again to the runs `w`, `y` (a bootstrap
    resample): the spread of such refits is the interval of a prediction. The cross-validation error and residuals
    stay the original fit's."""
    if fit.booster is not None:
        boosted = _lightgbm(w, y)
        assert boosted is not None
        return MixtureFit(fit.sources, fit.kind, 0.0, fit.cv_rmse, fit.residuals, fit.coef, fit.intercept, boosted[0])
    coef, icpt = _ridge(_features(w, fit.kind), y, (fit.alpha,))[0]
    return MixtureFit(fit.sources, fit.kind, fit.alpha, fit.cv_rmse, fit.residuals, coef, icpt)


def cv_rho(fit: MixtureFit, y: np.ndarray) -> float:
    """Spearman's rho between the runs' values and the fit's cross-validated predictions of them (each predicted by
    the fit over the other folds): how well the fit ranks mixtures it has not seen, on the runs it has."""
    return float(sstats.spearmanr(y - fit.residuals, y)[0])


def pair_accuracy(predicted: np.ndarray, measured: np.ndarray) -> tuple[float, int]:
    """(share of pairs `predicted` orders as `measured` does, pairs)."""
    i, j = np.triu_indices(len(measured), k=1)
    agree = np.sign(predicted[i] - predicted[j]) == np.sign(measured[i] - measured[j])
    return float(agree.mean()), len(i)


def propose(
    fit: MixtureFit, w: np.ndarray, y: np.ndarray, *, higher_is_better: bool, level: float, boots: int = 30
) -> dict[str, Any]:
    """The proposed mixture, its predicted value and interval (see the module docstring)."""
    rng = np.random.default_rng(0)
    centre = w.mean(axis=0) + 1e-3
    centre /= centre.sum()
    scale = np.exp(rng.uniform(np.log(0.3), np.log(30), CANDIDATES))[:, None] * len(centre)
    candidates = np.vstack([w, rng.gamma(scale * centre)])
    candidates /= candidates.sum(axis=1, keepdims=True)
    predicted = fit.predict(candidates)
    order = np.argsort(-predicted if higher_is_better else predicted)
    mixture = candidates[order[:TOP]].mean(axis=0)
    value = float(fit.predict(mixture[None, :])[0])
    draws = []
    for _ in range(boots):
        pick = rng.integers(0, len(y), len(y))
        again = refit_mixture(fit, w[pick], y[pick])
        draws.append(float(again.predict(mixture[None, :])[0]) + float(rng.choice(fit.residuals)))
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return {
        "mixture": {s: float(v) for s, v in zip(fit.sources, mixture, strict=True)},
        "predicted": value,
        "interval": [float(lo), float(hi)],
        "level": level,
        "candidates": len(candidates),
        "averaged": TOP,
        "boots": boots,
    }


def _table(points: pd.DataFrame, params: int, mixtures: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Recipe -> mean value at size `params` (its largest tokens), for the recipes with a mixture."""
    here = points[points["params"] == params]
    here = here[here["tokens"] == here["tokens"].max()]
    means = here.groupby("recipe")["value"].mean()
    return means[[r for r in means.index if r in mixtures]].to_frame("value")


def _weights(recipes: Any, sources: list[str], mixtures: dict[str, dict[str, float]]) -> np.ndarray:
    return np.array([[mixtures[r].get(s, 0.0) for s in sources] for r in recipes], dtype=float)


def evaluate(
    points: pd.DataFrame, mixtures: dict[str, dict[str, float]], *, higher_is_better: bool
) -> list[dict[str, Any]]:
    """For each larger model size: the fit over the smallest size's other mixtures scored on it (see the module
    docstring)."""
    sizes = sorted(int(n) for n in points["params"].unique())
    sources = sorted({s for m in mixtures.values() for s in m})
    small = _table(points, sizes[0], mixtures)
    out = []
    for size in sizes[1:]:
        big = _table(points, size, mixtures)
        if len(big) < 2:
            continue
        train = small[~small.index.isin(big.index)]
        entry: dict[str, Any] = {"params": size, "from_params": sizes[0], "mixtures": len(big), "fit_on": len(train)}
        try:
            fit = fit_mixture(sources, _weights(train.index, sources, mixtures), train["value"].to_numpy())
        except InputError as exc:
            out.append({**entry, "available": False, "reason": str(exc)})
            continue
        measured = big["value"].to_numpy()
        predicted = fit.predict(_weights(big.index, sources, mixtures))
        accuracy, pairs = pair_accuracy(predicted, measured)
        pick = int(np.argmax(predicted) if higher_is_better else np.argmin(predicted))
        better = measured > measured[pick] if higher_is_better else measured < measured[pick]
        entry.update(
            available=True,
            fit=fit.to_dict(),
            rho=float(sstats.spearmanr(predicted, measured)[0]),
            accuracy=accuracy,
            pairs=pairs,
            pick=str(big.index[pick]),
            pick_rank=int(better.sum()) + 1,
        )
        shared = big.index[big.index.isin(small.index)]
        if len(shared) >= 2:
            plain = small.loc[shared, "value"].to_numpy()
            truth = big.loc[shared, "value"].to_numpy()
            entry["plain"] = {
                "mixtures": len(shared),
                "accuracy": pair_accuracy(plain, truth)[0],
                "rho": float(sstats.spearmanr(plain, truth)[0]),
            }
        out.append(entry)
    return out


def mixture_report(
    points: pd.DataFrame, mixtures: dict[str, dict[str, float]], *, higher_is_better: bool, level: float
) -> dict[str, Any]:
    """One metric's mixture regression: `evaluate`'s entries, and the proposal from every smallest-size run."""
    if not mixtures:
        return {"available": False, "reason": "the campaign's recipes carry no mixture weights (w:<source> columns)"}
    sources = sorted({s for m in mixtures.values() for s in m})
    size = int(points["params"].min())
    small = _table(points, size, mixtures)
    try:
        w, y = _weights(small.index, sources, mixtures), small["value"].to_numpy()
        fit = fit_mixture(sources, w, y)
    except InputError as exc:
        return {"available": False, "reason": str(exc)}
    proposal = propose(fit, w, y, higher_is_better=higher_is_better, level=level)
    return {
        "available": True,
        "params": size,
        "runs": len(small),
        "fit": fit.to_dict(),
        "cv_rho": cv_rho(fit, y),
        "lightgbm": importlib.util.find_spec("lightgbm") is not None,
        "evaluated": evaluate(points, mixtures, higher_is_better=higher_is_better),
        "proposal": {**proposal, "params": size},
    }
