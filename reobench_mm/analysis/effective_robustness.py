"""Effective robustness across models (Taori et al., 2020; as plotted by the EarthShift
study).

A line ``OOD = a * ID + b`` is fitted across models by least squares, with ``ID`` the
clean metric and ``OOD`` a per-corruption mean (one fit per corruption and one for the
overall Avg) and, when a second set of results evaluated on a shifted dataset is given,
that set's clean metric (fit ``'shift'``, models paired by name). A model's effective
robustness is ``OOD - predicted OOD`` (metric points; positive = more robust than its
clean accuracy predicts). Uncertainty comes from a bootstrap over models (resampled with
replacement; resamples whose ID values are all equal are skipped): a percentile band of
the fitted line on a grid and a percentile interval per model residual. When a fit pools
several points per model (one per dataset: the fits per shift type of
:mod:`~reobench_mm.analysis.shifts`), the models are resampled as clusters: a drawn
model brings all its points.

``space='linear'`` (default) fits the raw 0-100 values, as the study plots them.
``space='logit'`` fits ``logit(v / 100)`` on both axes (values clipped to
``[LOGIT_EPS, 1 - LOGIT_EPS]``), the scaling Taori et al. use to make the trend linear
over wide ranges; predictions are mapped back, so residuals, bands and intervals stay in
metric points.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from scipy import special, stats

from .model_set import ModelSet
from .results import AVG, SHIFT

__all__ = ['FIT_SPACES', 'LOGIT_EPS', 'fit_line', 'EffectiveRobustnessFit',
           'effective_robustness_fit', 'effective_robustness', 'check_space']

FIT_SPACES = ('linear', 'logit')
#: Clipping of fractions before the logit (0.01 metric points from 0 and 100).
LOGIT_EPS = 1e-4
_TWO_MODELS_FIT = ('only 2 models: the fitted line passes exactly through both points, '
                   'so every effective robustness (residual) is 0')


def check_space(space: str) -> None:
    """Refuse a fit space other than :data:`FIT_SPACES`."""
    if space not in FIT_SPACES:
        raise ValueError(f'unknown fit space {space!r}; valid: {list(FIT_SPACES)}')


def _to_space(values: np.ndarray, space: str) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if space == 'linear':
        return values
    return special.logit(np.clip(values / 100.0, LOGIT_EPS, 1.0 - LOGIT_EPS))


def _from_space(values: np.ndarray, space: str) -> np.ndarray:
    return values if space == 'linear' else 100.0 * special.expit(values)


def fit_line(id_values: Sequence[float], ood_values: Sequence[float],
             space: str = 'linear') -> Tuple[float, float, float]:
    """Least-squares line ``OOD = slope * ID + intercept`` (in ``space``) with
    :func:`scipy.stats.linregress`; returns ``(slope, intercept, r_squared)``
    (``r_squared`` NaN when OOD is constant).

    Raises:
        ValueError: fewer than 2 points, lengths differ, or all ID values equal.
    """
    check_space(space)
    x = _to_space(id_values, space)
    y = _to_space(ood_values, space)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f'ID and OOD must be 1-D of the same length, got {x.shape} and '
                         f'{y.shape}')
    if x.size < 2:
        raise ValueError(f'a line fit needs at least 2 models, got {x.size}')
    if np.ptp(x) == 0:
        raise ValueError('every model has the same ID (clean) value: no line can be fitted')
    result = stats.linregress(x, y)
    return float(result.slope), float(result.intercept), float(result.rvalue) ** 2


@dataclass
class EffectiveRobustnessFit:
    """One effective-robustness fit across models.

    Attributes:
        name: corruption name, ``'avg'`` or ``'shift'``.
        space: ``'linear'`` or ``'logit'`` (the space of ``slope``/``intercept``).
        models: model names; ``id_values``/``ood_values`` in that order (0-100).
        slope, intercept, r_squared: the least-squares line in ``space``.
        predicted: the line's OOD at each model's ID (0-100).
        residuals: effective robustness, ``ood_values - predicted``.
        grid: ID values (0-100) where the band is evaluated (the data's range).
        line: the fitted OOD on ``grid``.
        band_low, band_high: percentile band of the bootstrap lines on ``grid``
            (None when no resample was usable).
        residual_low, residual_high: percentile interval of each model's residual
            against the bootstrap lines (None likewise).
        n_bootstrap: resamples drawn; n_valid: resamples used (non-degenerate).
        confidence: the band's coverage (0.95 -> percentiles 2.5 and 97.5).
        seed: seed of the :func:`numpy.random.default_rng` generator.
        boot_slopes, boot_intercepts: the usable resamples' lines (in ``space``), in the
            order drawn (None without a bootstrap).
        boot_draws: the index of each usable resample among the ``n_bootstrap`` drawn
            (a fit of the same seed and the same number of models or clusters draws the
            same resample at the same index; skipped resamples leave gaps).
    """
    name: str
    space: str
    models: List[str]
    id_values: np.ndarray
    ood_values: np.ndarray
    slope: float
    intercept: float
    r_squared: float
    predicted: np.ndarray
    residuals: np.ndarray
    grid: np.ndarray
    line: np.ndarray
    band_low: Optional[np.ndarray]
    band_high: Optional[np.ndarray]
    residual_low: Optional[np.ndarray]
    residual_high: Optional[np.ndarray]
    n_bootstrap: int
    n_valid: int
    confidence: float
    seed: Optional[int]
    boot_slopes: Optional[np.ndarray] = None
    boot_intercepts: Optional[np.ndarray] = None
    boot_draws: Optional[np.ndarray] = None

    def predict(self, id_values: Sequence[float]) -> np.ndarray:
        """OOD predicted by the line for ``id_values`` (0-100)."""
        return _from_space(self.slope * _to_space(id_values, self.space) + self.intercept,
                           self.space)

    def predict_resamples(self, id_values: Sequence[float]) -> np.ndarray:
        """OOD predicted by each usable resample's line for ``id_values``: shape
        ``(n_valid, len(id_values))`` (0-100; no rows without a bootstrap)."""
        x = _to_space(id_values, self.space)
        if self.boot_slopes is None:
            return np.empty((0, x.size))
        return _from_space(self.boot_slopes[:, None] * x[None] +
                           self.boot_intercepts[:, None], self.space)


def _bootstrap_lines(x: np.ndarray, y: np.ndarray, n_bootstrap: int, seed: Optional[int],
                     clusters: Optional[Sequence[str]]
                     ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(slopes, intercepts, draws)`` of the least-squares lines of the usable resamples
    (of the points, or of the clusters of points with all their points); ``draws``: each
    line's resample index among the ``n_bootstrap`` drawn."""
    rng = np.random.default_rng(seed)
    if clusters is None:
        index = rng.integers(0, x.size, size=(n_bootstrap, x.size))
        draws = np.flatnonzero(np.ptp(x[index], axis=1) > 0)  # skip one-ID resamples
        xb, yb = x[index[draws]], y[index[draws]]
        xc = xb - xb.mean(axis=1, keepdims=True)
        yc = yb - yb.mean(axis=1, keepdims=True)
        slopes = (xc * yc).sum(axis=1) / (xc * xc).sum(axis=1)
        return slopes, yb.mean(axis=1) - slopes * xb.mean(axis=1), draws
    labels = list(clusters)
    if len(labels) != x.size:
        raise ValueError(f'{len(labels)} clusters for {x.size} points')
    names = list(dict.fromkeys(labels))
    members = [np.flatnonzero(np.asarray(labels, dtype=object) == n) for n in names]
    slopes, intercepts, draws = [], [], []
    # resamples of different sizes: one small least-squares line each
    for draw, row in enumerate(rng.integers(0, len(names), size=(n_bootstrap, len(names)))):
        index = np.concatenate([members[k] for k in row])
        xb, yb = x[index], y[index]
        if np.ptp(xb) == 0:
            continue
        xc, yc = xb - xb.mean(), yb - yb.mean()
        slope = float((xc * yc).sum() / (xc * xc).sum())
        slopes.append(slope)
        intercepts.append(float(yb.mean() - slope * xb.mean()))
        draws.append(draw)
    return np.asarray(slopes), np.asarray(intercepts), np.asarray(draws, dtype=int)


def effective_robustness_fit(id_values: Sequence[float], ood_values: Sequence[float], *,
                             models: Sequence[str], name: str, space: str = 'linear',
                             n_bootstrap: int = 1000, seed: Optional[int] = 0,
                             confidence: float = 0.95, grid_size: int = 50,
                             clusters: Optional[Sequence[str]] = None
                             ) -> EffectiveRobustnessFit:
    """Fit ``OOD = a * ID + b`` across models and bootstrap it.

    Args:
        id_values, ood_values: one value per model (0-100).
        models: model names, same order.
        name: the fit's name.
        space: ``'linear'`` or ``'logit'`` (see the module docstring).
        n_bootstrap: resamples of the models (with replacement); 0 disables the
            bootstrap.
        seed: seed of :func:`numpy.random.default_rng` (same seed -> same result).
        confidence: coverage of the percentile band and intervals.
        grid_size: points of the ID grid spanning the models' ID range.
        clusters: one label per point (its model, when a model has several points):
            the bootstrap resamples the labels, each with all its points (default: every
            point on its own).
    """
    check_space(space)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f'confidence must be in (0, 1), got {confidence}')
    if n_bootstrap < 0 or grid_size < 2:
        raise ValueError(f'n_bootstrap must be >= 0 and grid_size >= 2, got {n_bootstrap} '
                         f'and {grid_size}')
    x_raw = np.asarray(id_values, dtype=float)
    y_raw = np.asarray(ood_values, dtype=float)
    if len(models) != x_raw.size:
        raise ValueError(f'{len(models)} model names for {x_raw.size} values')
    slope, intercept, r_squared = fit_line(x_raw, y_raw, space)
    x, y = _to_space(x_raw, space), _to_space(y_raw, space)
    predicted = _from_space(slope * x + intercept, space)
    grid = np.linspace(x_raw.min(), x_raw.max(), grid_size)
    grid_space = _to_space(grid, space)
    line = _from_space(slope * grid_space + intercept, space)

    band_low = band_high = residual_low = residual_high = None
    slopes = intercepts = draws = None
    n_valid = 0
    if n_bootstrap:
        slopes, intercepts, draws = _bootstrap_lines(x, y, n_bootstrap, seed, clusters)
        n_valid = len(slopes)
        if n_valid:
            percentiles = [50.0 * (1.0 - confidence), 50.0 * (1.0 + confidence)]
            lines = _from_space(slopes[:, None] * grid_space[None] + intercepts[:, None],
                                space)
            band_low, band_high = np.percentile(lines, percentiles, axis=0)
            boot_residuals = y_raw[None] - _from_space(
                slopes[:, None] * x[None] + intercepts[:, None], space)
            residual_low, residual_high = np.percentile(boot_residuals, percentiles, axis=0)
    return EffectiveRobustnessFit(
        name=name, space=space, models=list(models), id_values=x_raw, ood_values=y_raw,
        slope=slope, intercept=intercept, r_squared=r_squared, predicted=predicted,
        residuals=y_raw - predicted, grid=grid, line=line, band_low=band_low,
        band_high=band_high, residual_low=residual_low, residual_high=residual_high,
        n_bootstrap=int(n_bootstrap), n_valid=n_valid, confidence=confidence, seed=seed,
        boot_slopes=slopes, boot_intercepts=intercepts, boot_draws=draws)


def effective_robustness(model_set: ModelSet, *, shift_values: Optional[Sequence[float]] = None,
                         space: str = 'linear', n_bootstrap: int = 1000,
                         seed: Optional[int] = 0, confidence: float = 0.95
                         ) -> Dict[str, EffectiveRobustnessFit]:
    """Effective-robustness fits of ``model_set``: ``'avg'`` (OOD = the Avg over
    corruptions), one per corruption (OOD = its mean over the common severities)
    and, with ``shift_values`` (one clean value per model on a shifted dataset,
    see :func:`load_shift_values`), ``'shift'``. ID is always the clean metric.
    Every fit uses the same seed, hence the same model resamples (warns with 2
    models)."""
    n_models = len(model_set.models)
    if n_models < 2:
        raise ValueError(f'effective robustness needs at least 2 models, got {n_models}')
    if n_models == 2:
        warnings.warn(_TWO_MODELS_FIT, stacklevel=2)
    ood = {AVG: model_set.corruption_mean(AVG)}
    ood.update((c, model_set.corruption_mean(c)) for c in model_set.corruptions)
    if shift_values is not None:
        shift_values = np.asarray(shift_values, dtype=float)
        if shift_values.shape != (n_models, ):
            raise ValueError(f'shift_values must hold one value per model ({n_models}), got '
                             f'shape {shift_values.shape}')
        ood[SHIFT] = shift_values
    clean = model_set.clean()
    return {name: effective_robustness_fit(clean, values, models=model_set.models, name=name,
                                           space=space, n_bootstrap=n_bootstrap, seed=seed,
                                           confidence=confidence)
            for name, values in ood.items()}
