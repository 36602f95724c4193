"""Image resamples of a test set and percentile intervals over them.

A bootstrap resample draws ``N`` images of an ``N``-image test set with replacement; an
image drawn ``k`` times counts ``k`` times in every sum a metric is computed from. A
resample is therefore a row of *counts* (how often each image was drawn), and
:func:`resample_counts` returns ``B`` such rows. The counts depend only on the seed, the
number of images and the number of resamples, so every condition of a run, every model
evaluated on the same images and every process or shard split gets the same resamples:
a difference of two conditions (ΔTP) or of two models is resampled *paired*.

Why not ``scipy.stats.bootstrap``: it draws its own resamples per call and resamples one
statistic at a time; here one set of count rows is shared by the 61 conditions of a
sweep (the pairing above) and applied to the per-image sufficient statistics as one
matrix product (:mod:`~reobench_mm.evaluation.functional.image_stats`), which is what
makes 1,000 resamples of 2,016 images x 61 conditions take seconds. The percentile
interval is the one ``scipy.stats.bootstrap(method='percentile')`` gives (tested).
"""
from __future__ import annotations

import math
import warnings
from typing import Optional, Tuple

import numpy as np

__all__ = ['DEFAULT_RESAMPLES', 'DEFAULT_LEVEL', 'MIN_FINITE_FRACTION', 'resample_counts',
           'resample_draws', 'percentile_interval', 'interval_or_none', 'check_level', 'check_resamples']

#: Resamples of the intervals when none are given.
DEFAULT_RESAMPLES = 1000
#: Level of the intervals when none is given.
DEFAULT_LEVEL = 0.95
#: An interval needs at least this fraction of its resamples to give a finite value
#: (a class absent from most resamples has no interval rather than a wrong one).
MIN_FINITE_FRACTION = 0.9


def check_resamples(resamples: object) -> int:
    """``resamples`` as an int >= 0 (0: no intervals), or a ``ValueError`` saying what is
    valid."""
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) \
            or resamples < 0:
        raise ValueError(f'the number of bootstrap resamples must be an integer >= 0 '
                         f'(0: no intervals), got {resamples!r}')
    return int(resamples)


def check_level(level: object) -> float:
    """``level`` as a float in (0, 1), or a ``ValueError`` saying what is valid."""
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) \
            or not 0.0 < float(level) < 1.0:
        raise ValueError(f'the interval level must be a number in (0, 1), e.g. 0.95, got '
                         f'{level!r}')
    return float(level)


def resample_counts(num_images: int, resamples: int, seed: int) -> np.ndarray:
    """``(resamples, num_images)`` int32 counts: row ``b`` says how often each image is
    drawn in resample ``b`` (each row sums to ``num_images``).

    The draws are ``numpy.random.default_rng(seed).integers(0, num_images,
    (resamples, num_images))``: the same seed and sizes give the same rows on every
    machine, process count and shard split.
    """
    if isinstance(num_images, bool) or not isinstance(num_images, (int, np.integer)) \
            or num_images < 1:
        raise ValueError(f'num_images must be an integer >= 1, got {num_images!r}')
    resamples = check_resamples(resamples)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, num_images, size=(resamples, num_images), dtype=np.int64)
    offsets = np.arange(resamples, dtype=np.int64)[:, None] * num_images
    counts = np.bincount((draws + offsets).ravel(), minlength=resamples * num_images)
    return counts.reshape(resamples, num_images).astype(np.int32)


def resample_draws(count: int, resamples: int, seed: int) -> np.ndarray:
    """``(resamples, count)`` int64 indices in ``0..count-1``: row ``b`` is a draw with
    replacement of ``count`` items (the corruption seeds of a condition,
    :mod:`~reobench_mm.evaluation.functional.seed_average`) for resample ``b``.

    The draws come from ``numpy.random.default_rng((seed, 1, count))``: a stream of its own,
    independent of the image counts of :func:`resample_counts` with the same seed, and the
    same on every machine, process count and shard split.
    """
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f'count must be an integer >= 1, got {count!r}')
    resamples = check_resamples(resamples)
    rng = np.random.default_rng((int(seed), 1, int(count)))
    return rng.integers(0, count, size=(resamples, count), dtype=np.int64)


def percentile_interval(replicates: np.ndarray, level: float = DEFAULT_LEVEL,
                        axis: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """The percentile interval ``(low, high)`` of bootstrap replicates along ``axis``:
    the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles (linear interpolation,
    ``numpy.percentile``'s default, as ``scipy.stats.bootstrap``).

    Non-finite replicates (a metric undefined on that resample) are left out; where fewer
    than :data:`MIN_FINITE_FRACTION` of them are finite the interval is NaN.
    """
    level = check_level(level)
    values = np.moveaxis(np.asarray(replicates, dtype=np.float64), axis, 0)
    if values.shape[0] == 0:
        shape = values.shape[1:]
        return np.full(shape, math.nan), np.full(shape, math.nan)
    finite = np.isfinite(values)
    enough = finite.mean(axis=0) >= MIN_FINITE_FRACTION
    alpha = (1.0 - level) / 2.0
    if finite.all():
        low, high = np.percentile(values, [100 * alpha, 100 * (1 - alpha)], axis=0)
    else:
        masked = np.where(finite, values, np.nan)
        with warnings.catch_warnings():  # all-NaN columns: NaN, marked below
            warnings.simplefilter('ignore', RuntimeWarning)
            low, high = np.nanpercentile(masked, [100 * alpha, 100 * (1 - alpha)], axis=0)
    low = np.where(enough, low, math.nan)
    high = np.where(enough, high, math.nan)
    return low, high


def interval_or_none(low: float, high: float) -> Optional[list]:
    """``[low, high]`` as plain floats, or None when either is not finite."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return [float(low), float(high)]
