"""Drift–confidence coupling: does a model stay confident while its representation drifts?

Everything here works on plain per-sample numbers (numpy arrays) and knows nothing about
models or datasets. For ``n`` samples (images) of one condition with

- ``drift[i]`` = ``d_i``, the L2 distance between the sample's clean and corrupted
  representations (``‖x_corr,i − x_clean,i‖₂``),
- ``confidence[i]``, the sample's mean confidence (for segmentation the mean over its
  valid pixels of the max softmax probability),
- ``accuracy[i]``, the sample's accuracy (the fraction of its valid pixels predicted
  correctly),
- ``num_pixels[i]``, its valid predictions (pixels), and ``num_confident_wrong[i]``, how
  many of them are predicted with confidence above :data:`OVERCONFIDENCE_THRESHOLD`
  and wrong,

:func:`drift_confidence_summary` reports, as the calibration study ties overconfidence
to drift (§III-J, App. B2/B3):

- ``spearman_drift_confidence`` and ``spearman_drift_accuracy``: Spearman's rank
  correlation ρ of drift with confidence and with accuracy over the samples, with its
  two-sided p-value (:func:`spearman_correlation`, ``scipy.stats.spearmanr``: ties get
  average ranks; the p-value is scipy's t-distribution approximation);
- ``overconfident_drift_fraction``: the fraction of all valid predictions (pixels) that
  belong to a sample drifting more than the median drift (``d_i > median(d)``, strictly)
  AND are predicted with confidence > 0.9 AND are wrong
  (:func:`overconfident_drift_fraction`).

A negative ρ(drift, accuracy) with a flat or positive ρ(drift, confidence) means the
model stays confident while it drifts and errs.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import numpy as np

from ...fileio import finite_or_none

__all__ = ['spearman_correlation', 'overconfident_drift_fraction', 'drift_confidence_summary',
           'OVERCONFIDENCE_THRESHOLD', 'MIN_SPEARMAN_SAMPLES']

#: A prediction this confident (strictly above) and wrong is overconfident (the study's
#: 0.9).
OVERCONFIDENCE_THRESHOLD = 0.9
#: Samples a rank correlation needs (with 2 samples ρ is ±1 whatever the data).
MIN_SPEARMAN_SAMPLES = 3


def _vector(values: Sequence[float], name: str) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f'{name} must be a 1-D sequence of numbers, got '
                         f'{type(values).__name__}') from error
    if array.ndim != 1:
        raise ValueError(f'{name} must be 1-D (one value per sample), got shape {array.shape}')
    if not np.all(np.isfinite(array)):
        bad = np.flatnonzero(~np.isfinite(array))[:5].tolist()
        raise ValueError(f'{name} must be finite, got NaN/inf at positions {bad}')
    return array


def spearman_correlation(x: Sequence[float], y: Sequence[float], x_name: str = 'x',
                         y_name: str = 'y') -> Dict[str, Any]:
    """Spearman's rank correlation of paired samples, with its two-sided p-value.

    ``ρ`` is Pearson's correlation of the ranks (ties get their average rank), computed
    by ``scipy.stats.spearmanr``; the p-value is scipy's (a t-distribution
    approximation, rough for small ``n``).

    Undefined cases give ``rho = p_value = None`` and a ``note`` saying why, instead of
    a number: fewer than :data:`MIN_SPEARMAN_SAMPLES` samples, or a constant ``x`` or
    ``y`` (no ranks to correlate: the drift of the clean-vs-clean reference is 0 for
    every image, a model can be right on every pixel of every image).

    Args:
        x, y: one finite value per sample, the same length.
        x_name, y_name: what ``x`` and ``y`` are, for the note.

    Returns:
        ``{'rho', 'p_value', 'n', 'note'}`` (``note`` None when ρ is defined).
    """
    a, b = _vector(x, x_name), _vector(y, y_name)
    if a.shape != b.shape:
        raise ValueError(f'{x_name} and {y_name} must have one value per sample each, got '
                         f'{a.size} and {b.size}')
    n = int(a.size)
    note: Optional[str] = None
    if n < MIN_SPEARMAN_SAMPLES:
        note = f'{n} samples: a rank correlation needs at least {MIN_SPEARMAN_SAMPLES}'
    else:
        constant = [name for name, v in ((x_name, a), (y_name, b)) if np.all(v == v[0])]
        if constant:
            note = (f'{" and ".join(constant)} {"is" if len(constant) == 1 else "are"} '
                    f'constant over the {n} samples: Spearman ρ is undefined')
    if note is not None:
        return dict(rho=None, p_value=None, n=n, note=note)
    from scipy import stats
    result = stats.spearmanr(a, b)
    return dict(rho=finite_or_none(result.statistic), p_value=finite_or_none(result.pvalue),
                n=n, note=None)


def overconfident_drift_fraction(drift: Sequence[float], num_pixels: Sequence[int],
                                 num_confident_wrong: Sequence[int]) -> Optional[float]:
    """The fraction of predictions that drift far, are confident and are wrong.

    ``Σ_{i: d_i > median(d)} num_confident_wrong[i] / Σ_i num_pixels[i]``: a prediction
    (pixel) counts when its sample's drift is strictly above the median drift of the
    ``n`` samples (``numpy.median``) and it is predicted with confidence above
    :data:`OVERCONFIDENCE_THRESHOLD` and wrong; the denominator is every valid
    prediction of every sample. At most about half the predictions can count (those of
    the samples above the median). None when there are no predictions.

    Args:
        drift: per-sample drift ``d_i`` (finite).
        num_pixels: per-sample number of valid predictions (``>= 0``).
        num_confident_wrong: per-sample number of those predicted with confidence
            > 0.9 and wrong (``<= num_pixels``).
    """
    d = _vector(drift, 'drift')
    total = _vector(num_pixels, 'num_pixels')
    wrong = _vector(num_confident_wrong, 'num_confident_wrong')
    if not d.shape == total.shape == wrong.shape:
        raise ValueError(f'drift, num_pixels and num_confident_wrong need one value per '
                         f'sample each, got {d.size}, {total.size} and {wrong.size}')
    if np.any(total < 0) or np.any(wrong < 0) or np.any(wrong > total):
        raise ValueError('num_confident_wrong must lie between 0 and num_pixels for every '
                         'sample')
    if d.size == 0 or total.sum() == 0:
        return None
    far = d > np.median(d)
    return float(wrong[far].sum() / total.sum())


def drift_confidence_summary(drift: Sequence[float], confidence: Sequence[float],
                             accuracy: Sequence[float], num_pixels: Sequence[int],
                             num_confident_wrong: Sequence[int]) -> Dict[str, Any]:
    """The drift–confidence statistics of one condition (see the module docstring).

    Samples without valid predictions (``num_pixels == 0``; their confidence and accuracy
    are undefined, NaN) are left out of everything, the median drift included.

    Returns:
        ``{'num_samples', 'num_pixels', 'spearman_drift_confidence',
        'spearman_drift_accuracy', 'overconfident_drift_fraction', 'median_drift',
        'mean_drift', 'mean_confidence', 'mean_accuracy'}`` (JSON-serialisable; the
        means are over samples, undefined values None).
    """
    total = _vector(num_pixels, 'num_pixels')
    keep = total > 0
    d = _vector(drift, 'drift')
    c = np.asarray(confidence, dtype=np.float64)
    a = np.asarray(accuracy, dtype=np.float64)
    wrong = _vector(num_confident_wrong, 'num_confident_wrong')
    if not d.shape == c.shape == a.shape == total.shape == wrong.shape:
        raise ValueError('drift, confidence, accuracy, num_pixels and num_confident_wrong '
                         'need one value per sample each, got sizes '
                         f'{[v.size for v in (d, c, a, total, wrong)]}')
    d, c, a, total, wrong = d[keep], c[keep], a[keep], total[keep], wrong[keep]
    if c.size and (np.any((c < 0) | (c > 1)) or np.any((a < 0) | (a > 1))):
        raise ValueError('confidence and accuracy must lie in [0, 1] for every sample with '
                         'valid predictions')

    def mean(values: np.ndarray) -> Optional[float]:
        return finite_or_none(values.mean()) if values.size else None

    return dict(
        num_samples=int(d.size), num_pixels=int(total.sum()),
        spearman_drift_confidence=spearman_correlation(d, c, 'drift', 'confidence'),
        spearman_drift_accuracy=spearman_correlation(d, a, 'drift', 'accuracy'),
        overconfident_drift_fraction=overconfident_drift_fraction(d, total, wrong),
        median_drift=finite_or_none(np.median(d)) if d.size else None,
        mean_drift=mean(d), mean_confidence=mean(c), mean_accuracy=mean(a))
