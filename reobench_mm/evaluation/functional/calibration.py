"""Calibration and selective-prediction metrics for dense (pixel) classification.

Everything is computed exactly from a few histograms that are summed over images and
processes, so memory does not grow with the number of images and the distributed
reduction is a sum of arrays. :class:`PixelCalibrationStats` is a pure-numpy accumulator
of ``O(num_classes x bins)`` arrays with the metrics as methods; the MMEngine metric
around it is :class:`~reobench_mm.evaluation.metrics.seg_calibration.SegCalibrationMetric`
and the reliability diagrams are drawn by
:func:`~reobench_mm.analysis.plotting.plot_reliability_diagrams`.

Example::

    stats = PixelCalibrationStats(num_classes=6)
    stats.update(probs, labels, ignore_index=255)   # probs (C, H, W), labels (H, W)
    stats.summary()['ECE'], stats.reliability_diagram()
    total = stats_rank0 + stats_rank1                # merge = sum of the arrays

Definitions (``n`` valid pixels, i.e. label != ``ignore_index``; the prediction of a
pixel is the first arg-max of its probabilities, its confidence ``c`` that maximum):

- **Bins**: ``num_bins`` equal-width bins ``(0, 1/B], (1/B, 2/B], ..., ((B-1)/B, 1]``
  (``edges = numpy.linspace(0, 1, B + 1)``); a value of exactly 0 goes to the first bin.
- **ECE** (top label): ``sum_b |sum_{i in b} c_i - sum_{i in b} correct_i| / n``, i.e.
  bin frequency times |mean confidence - accuracy| summed over bins.
- **gap**: mean confidence - accuracy (positive = over-confident).
- **NLL**: mean of ``-log(max(p_true, NLL_EPSILON))``; probabilities are clipped at
  ``NLL_EPSILON = 1e-15`` so that a pixel whose true-class probability underflowed to 0
  contributes a finite 34.5 instead of infinity.
- **Brier**: mean over pixels of ``sum_k (p_k - 1[y = k])^2`` (range 0-2), NOT divided
  by the number of classes.
- **MCE** and **aECE**: the maximum calibration error over the non-empty equal-width
  bins and the ECE over ``num_bins`` equal-mass bins formed from whole bins of the fine
  histogram below (with an error bound against sorting every pixel); defined in
  :mod:`~reobench_mm.evaluation.functional.calibration_bins`.
- **cwECE** (classwise ECE, Kull et al. 2019): for each class ``k`` the values ``p_k``
  of all valid pixels are put in the same bins and
  ``cwECE_k = sum_b |sum_{i in b} p_ik - #{i in b: y_i = k}| / n``; cwECE is the mean
  of ``cwECE_k`` over the classes that occur at least once among the valid labels.
  Classes that never occur are skipped (Kull et al. average over all classes; the two
  agree when every class occurs). The classwise MCE of class ``k`` is the largest
  ``|sum_{i in b} p_ik - #{i in b: y_i = k}| / n_kb`` over its non-empty bins.
- **Selective prediction** uses a finer histogram: ``selective_bins`` (``M``)
  equal-width bins ``(0, 1/M], ..., ((M-1)/M, 1)`` of the confidence plus one bin for
  confidence exactly 1.0. Pixels are ranked by decreasing confidence; pixels of the
  same fine bin are ties and ties are broken uniformly at random, every metric below
  being the exact expectation over that random order. With ``E(i)`` the number of
  errors among the ``i`` top-ranked pixels:

  * the risk-coverage curve has one point per non-empty fine bin: accepting that bin
    and all more confident ones gives coverage ``N/n`` and selective risk ``E(N)/N``
    (no tie inside a bin is split, so these points are exact);
  * ``AURC = (1/n) sum_{i=1}^{n} E[E(i)] / i`` (the mean selective risk over the ``n``
    coverages ``i/n``, Geifman et al. 2019). Within a fine bin with ``n_g`` pixels,
    ``e_g`` errors and ``N`` pixels ranked before it, ``E[E(N + t)] = E(N) + t e_g /
    n_g``, so the sum over the bin is ``e_g + (E(N) - N e_g / n_g) (H(N + n_g) -
    H(N))`` with harmonic numbers ``H`` (computed with the digamma function);
  * ``eAURC = AURC - AURC*`` where the oracle ranks every error last:
    ``AURC* = (1/n) (E - (n - E)(H(n) - H(n - E)))`` with ``E`` errors in total;
  * ``acc@90cov = 1 - E[E(k)] / k`` with ``k = ceil(0.9 n)`` top-ranked pixels.

  The usual sort-based AURC over the raw (unquantised) confidences orders the pixels
  inside each bin in one particular way; it differs from the value above by at most
  :meth:`PixelCalibrationStats.aurc_quantisation_bound`, a worst case over all orders
  computed from the same histogram. If at most a fraction ``rho / M`` of the pixels
  falls in any bin, that bound is at most ``rho H(n) / (2 M)`` (``H(n) ~ ln n``): it
  shrinks with the bin width ``1 / M``. In practice the difference is far smaller than
  the bound (typically well below ``1 / M``).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Dict, List, Mapping, Optional, Union

import numpy as np
import torch

from ...fileio import finite_or_none
from ..keys import CALIBRATION_METRICS
from .calibration_bins import (AdaptiveCalibration, adaptive_calibration, bin_index,
                               maximum_calibration_error)

__all__ = ['NLL_EPSILON', 'STATS_FORMAT', 'PixelCalibrationStats']

#: True-class probabilities are clipped at this value before the log in the NLL.
NLL_EPSILON = 1e-15
#: ``format`` field of :meth:`PixelCalibrationStats.to_dict`.
STATS_FORMAT = 'reobench_mm.pixel_calibration_stats/2'

# Tolerances of the probability checks (float32 softmax outputs pass them).
_PROB_RANGE_TOL = 1e-6
_PROB_SUM_TOL = 1e-3

ArrayLike = Union[np.ndarray, torch.Tensor]


def _to_numpy(value: Any, name: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    raise TypeError(f'{name} must be a numpy array or a torch tensor, got {type(value).__name__}')


def _harmonic(n: np.ndarray) -> np.ndarray:
    """Harmonic numbers ``H(n) = sum_{j=1}^{n} 1/j`` (``H(0) = 0``) for integer arrays."""
    from scipy.special import digamma  # here: importing the package does not import scipy
    return digamma(np.asarray(n, dtype=np.float64) + 1.0) + np.euler_gamma


def _first_argmax(probs: np.ndarray) -> np.ndarray:
    """``probs.argmax(axis=0)`` (first maximum) of a ``(C, n)`` array, by a running
    comparison over the classes (faster than a strided arg-max)."""
    best = probs[0].copy()
    index = np.zeros(probs.shape[1], np.int64)
    for k in range(1, probs.shape[0]):
        better = probs[k] > best
        index[better] = k
        np.maximum(best, probs[k], out=best)
    return index


class PixelCalibrationStats:
    """Streaming sufficient statistics of pixel-wise class probabilities.

    Holds only ``O(num_classes x num_bins + selective_bins)`` arrays (sums in float64,
    counts in int64); :meth:`update` adds a batch of pixels, ``+`` / :meth:`merge` sum
    two accumulators (the only reduction needed across processes). The definitions of
    the metrics are in the module docstring.

    Args:
        num_classes (int): Number of classes ``C`` (at least 2).
        num_bins (int): Equal-width confidence bins of ECE, classwise ECE and the
            reliability diagram. Defaults to 15.
        selective_bins (int): Equal-width bins of the fine confidence histogram (count,
            errors and confidence sum per bin) used for selective prediction and the
            equal-mass bins of aECE (one more bin holds confidence exactly 1.0).
            Defaults to 10000.
    """
    #: The summed arrays (besides the scalars ``nll_sum`` and ``brier_sum``).
    _ARRAYS = ('top_count', 'top_confidence_sum', 'top_correct', 'class_count',
               'class_probability_sum', 'class_label_count', 'selective_count',
               'selective_errors', 'selective_confidence_sum')

    def __init__(self, num_classes: int, num_bins: int = 15,
                 selective_bins: int = 10000) -> None:
        for name, value, low in (('num_classes', num_classes, 2), ('num_bins', num_bins, 1),
                                 ('selective_bins', selective_bins, 1)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                    or value < low:
                raise ValueError(f'{name} must be an integer >= {low}, got {value!r}')
        self.num_classes = int(num_classes)
        self.num_bins = int(num_bins)
        self.selective_bins = int(selective_bins)
        c, b, m = self.num_classes, self.num_bins, self.selective_bins
        self.top_count = np.zeros(b, np.int64)
        self.top_confidence_sum = np.zeros(b, np.float64)
        self.top_correct = np.zeros(b, np.int64)
        self.class_count = np.zeros((c, b), np.int64)
        self.class_probability_sum = np.zeros((c, b), np.float64)
        self.class_label_count = np.zeros((c, b), np.int64)
        self.selective_count = np.zeros(m + 1, np.int64)
        self.selective_errors = np.zeros(m + 1, np.int64)
        self.selective_confidence_sum = np.zeros(m + 1, np.float64)
        self.nll_sum = 0.0
        self.brier_sum = 0.0

    # ------------------------------------------------------------------------------
    # Accumulation
    # ------------------------------------------------------------------------------
    @property
    def bin_edges(self) -> np.ndarray:
        """The ``num_bins + 1`` edges ``linspace(0, 1, num_bins + 1)``."""
        return np.linspace(0.0, 1.0, self.num_bins + 1)

    @property
    def selective_edges(self) -> np.ndarray:
        """Edges of the regular fine bins, ``linspace(0, 1, selective_bins + 1)``."""
        return np.linspace(0.0, 1.0, self.selective_bins + 1)

    @property
    def num_pixels(self) -> int:
        """Number of valid pixels accumulated."""
        return int(self.top_count.sum())

    def update(self, probs: ArrayLike, labels: ArrayLike,
               ignore_index: Optional[int] = 255) -> 'PixelCalibrationStats':
        """Add a batch of pixels.

        Args:
            probs (np.ndarray | torch.Tensor): Class probabilities, shape ``(C, N)`` or
                ``(C, H, W)``; finite, in [0, 1] and summing to 1 over the classes on
                valid pixels (values within 1e-6 outside [0, 1] are clipped).
            labels (np.ndarray | torch.Tensor): Integer labels, shape ``(N,)`` or
                ``(H, W)`` (``probs.shape[1:]``), in ``[0, C)`` or ``ignore_index``.
            ignore_index (int, optional): Label of pixels to skip; None keeps all.

        Returns:
            PixelCalibrationStats: ``self``.
        """
        probs = _to_numpy(probs, 'probs')
        labels = _to_numpy(labels, 'labels')
        if probs.ndim not in (2, 3):
            raise ValueError(f'probs must have shape (C, N) or (C, H, W), got {probs.shape}')
        if probs.shape[0] != self.num_classes:
            raise ValueError(f'probs has {probs.shape[0]} classes (first axis) but the '
                             f'accumulator was made for {self.num_classes}')
        if labels.shape != probs.shape[1:]:
            raise ValueError(f'labels shape {labels.shape} does not match the pixel shape '
                             f'{probs.shape[1:]} of probs {probs.shape}')
        if not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f'labels must have an integer dtype, got {labels.dtype}')
        labels = labels.reshape(-1).astype(np.int64, copy=False)
        probs = probs.reshape(self.num_classes, -1)
        if ignore_index is not None:
            valid = labels != ignore_index
            labels = labels[valid]
            probs = probs[:, valid]
        num = labels.size
        if num == 0:
            return self
        if labels.min() < 0 or labels.max() >= self.num_classes:
            bad = labels[(labels < 0) | (labels >= self.num_classes)][0]
            raise ValueError(f'label {bad} is outside [0, {self.num_classes}) and is not '
                             f'ignore_index={ignore_index}')
        probs = probs.astype(np.float64, copy=False)
        if not np.isfinite(probs).all():
            raise ValueError('probs contains NaN or infinite values on valid pixels')
        if probs.min() < -_PROB_RANGE_TOL or probs.max() > 1.0 + _PROB_RANGE_TOL:
            raise ValueError(f'probs must lie in [0, 1], got values in [{probs.min()}, '
                             f'{probs.max()}] (pass softmax outputs, not logits)')
        worst_sum = np.abs(probs.sum(axis=0) - 1.0).max()
        if worst_sum > _PROB_SUM_TOL:
            raise ValueError(f'probs must sum to 1 over the classes (axis 0); the worst pixel '
                             f'is off by {worst_sum:.3g} (pass softmax outputs, not logits)')
        return self._accumulate(np.clip(probs, 0.0, 1.0), labels)

    def _accumulate(self, probs: np.ndarray, labels: np.ndarray) -> 'PixelCalibrationStats':
        """Add valid pixels: ``probs`` float64 ``(C, n)`` in [0, 1], ``labels`` ``(n,)`` in
        ``[0, C)`` (checked by the callers)."""
        c, b, m = self.num_classes, self.num_bins, self.selective_bins
        num = labels.size
        if num == 0:
            return self
        pixel = np.arange(num)
        prediction = _first_argmax(probs)
        confidence = probs[prediction, pixel]
        correct = prediction == labels

        top_bin = bin_index(confidence, self.bin_edges)
        self.top_count += np.bincount(top_bin, minlength=b)
        self.top_confidence_sum += np.bincount(top_bin, weights=confidence, minlength=b)
        self.top_correct += np.bincount(top_bin[correct], minlength=b)

        fine_bin = bin_index(confidence, self.selective_edges)
        fine_bin[confidence >= 1.0] = m
        self.selective_count += np.bincount(fine_bin, minlength=m + 1)
        self.selective_errors += np.bincount(fine_bin[~correct], minlength=m + 1)
        self.selective_confidence_sum += np.bincount(fine_bin, weights=confidence,
                                                     minlength=m + 1)

        class_bin = bin_index(probs, self.bin_edges)  # (C, num)
        class_bin += (np.arange(c) * b)[:, None]
        flat_bin = class_bin.ravel()
        self.class_count += np.bincount(flat_bin, minlength=c * b).reshape(c, b)
        self.class_probability_sum += np.bincount(
            flat_bin, weights=probs.ravel(), minlength=c * b).reshape(c, b)
        self.class_label_count += np.bincount(
            class_bin[labels, pixel], minlength=c * b).reshape(c, b)

        true_prob = probs[labels, pixel]
        self.nll_sum += float(-np.log(np.maximum(true_prob, NLL_EPSILON)).sum())
        # Brier: sum over pixels and classes of (p_k - 1[y = k])^2
        residual = probs.copy()
        residual[labels, pixel] -= 1.0
        self.brier_sum += float(np.einsum('ij,ij->', residual, residual))
        return self

    def _check_compatible(self, other: 'PixelCalibrationStats') -> None:
        if not isinstance(other, PixelCalibrationStats):
            raise TypeError(f'cannot merge PixelCalibrationStats with {type(other).__name__}')
        mine = (self.num_classes, self.num_bins, self.selective_bins)
        theirs = (other.num_classes, other.num_bins, other.selective_bins)
        if mine != theirs:
            raise ValueError('cannot merge accumulators with different (num_classes, num_bins, '
                             f'selective_bins): {mine} and {theirs}')

    def merge(self, other: 'PixelCalibrationStats') -> 'PixelCalibrationStats':
        """Add the sums of ``other`` into ``self`` (in place) and return ``self``."""
        self._check_compatible(other)
        for name in self._ARRAYS:
            total = getattr(self, name)
            total += getattr(other, name)
        self.nll_sum += other.nll_sum
        self.brier_sum += other.brier_sum
        return self

    def copy(self) -> 'PixelCalibrationStats':
        """A deep copy."""
        return PixelCalibrationStats.from_dict(self.to_dict())

    def __add__(self, other: 'PixelCalibrationStats') -> 'PixelCalibrationStats':
        return self.copy().merge(other)

    def __radd__(self, other: Any) -> 'PixelCalibrationStats':
        if isinstance(other, int) and other == 0:  # builtin sum() starts at 0
            return self.copy()
        return NotImplemented

    # ------------------------------------------------------------------------------
    # Serialisation
    # ------------------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """JSON-able dict of every sum (the fine histogram stored sparsely: its non-empty
        bins); :meth:`from_dict` restores it exactly."""
        nonzero = np.flatnonzero(self.selective_count)
        return {
            'format': STATS_FORMAT,
            'num_classes': self.num_classes,
            'num_bins': self.num_bins,
            'selective_bins': self.selective_bins,
            'num_pixels': self.num_pixels,
            'nll_sum': float(self.nll_sum),
            'brier_sum': float(self.brier_sum),
            'top_count': self.top_count.tolist(),
            'top_confidence_sum': self.top_confidence_sum.tolist(),
            'top_correct': self.top_correct.tolist(),
            'class_count': self.class_count.tolist(),
            'class_probability_sum': self.class_probability_sum.tolist(),
            'class_label_count': self.class_label_count.tolist(),
            'selective_nonzero_bins': nonzero.tolist(),
            'selective_count': self.selective_count[nonzero].tolist(),
            'selective_errors': self.selective_errors[nonzero].tolist(),
            'selective_confidence_sum': self.selective_confidence_sum[nonzero].tolist(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> 'PixelCalibrationStats':
        """Rebuild an accumulator from :meth:`to_dict` output."""
        if data.get('format') != STATS_FORMAT:
            raise ValueError(f"expected format {STATS_FORMAT!r}, got {data.get('format')!r}")
        stats = cls(data['num_classes'], data['num_bins'], data['selective_bins'])
        for name in ('top_count', 'top_confidence_sum', 'top_correct', 'class_count',
                     'class_probability_sum', 'class_label_count'):
            target = getattr(stats, name)
            value = np.asarray(data[name], dtype=target.dtype)
            if value.shape != target.shape:
                raise ValueError(f'{name} has shape {value.shape}, expected {target.shape}')
            target[...] = value
        index = np.asarray(data['selective_nonzero_bins'], dtype=np.int64)
        if index.size and (index.min() < 0 or index.max() > stats.selective_bins):
            raise ValueError('selective_nonzero_bins holds an index outside '
                             f'[0, {stats.selective_bins}]')
        stats.selective_count[index] = np.asarray(data['selective_count'], dtype=np.int64)
        stats.selective_errors[index] = np.asarray(data['selective_errors'], dtype=np.int64)
        stats.selective_confidence_sum[index] = np.asarray(data['selective_confidence_sum'],
                                                           dtype=np.float64)
        stats.nll_sum = float(data['nll_sum'])
        stats.brier_sum = float(data['brier_sum'])
        return stats

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(num_classes={self.num_classes}, num_bins='
                f'{self.num_bins}, selective_bins={self.selective_bins}, '
                f'num_pixels={self.num_pixels})')

    # ------------------------------------------------------------------------------
    # Calibration
    # ------------------------------------------------------------------------------
    def accuracy(self) -> float:
        """Pixel accuracy of the arg-max prediction (NaN without pixels)."""
        n = self.num_pixels
        return float(self.top_correct.sum() / n) if n else math.nan

    def expected_calibration_error(self) -> float:
        """Top-label ECE over ``num_bins`` equal-width bins (NaN without pixels)."""
        n = self.num_pixels
        if not n:
            return math.nan
        return float(np.abs(self.top_confidence_sum - self.top_correct).sum() / n)

    def maximum_calibration_error(self) -> float:
        """Top-label MCE: the largest |accuracy - mean confidence| over the non-empty
        equal-width bins (NaN without pixels)."""
        return maximum_calibration_error(self.top_count, self.top_confidence_sum,
                                         self.top_correct)

    def adaptive_calibration(self) -> AdaptiveCalibration:
        """Top-label ECE over ``num_bins`` equal-mass bins made of whole fine bins, with
        its error bound (``.ece``, ``.bound``)."""
        edges = self.selective_edges
        return adaptive_calibration(
            self.selective_count, self.selective_confidence_sum, self.selective_errors,
            np.append(edges[:-1], 1.0), np.append(edges[1:], 1.0), self.num_bins)

    def calibration_gap(self) -> float:
        """Mean confidence minus accuracy (NaN without pixels)."""
        n = self.num_pixels
        if not n:
            return math.nan
        return float((self.top_confidence_sum.sum() - self.top_correct.sum()) / n)

    def negative_log_likelihood(self) -> float:
        """Mean ``-log(max(p_true, NLL_EPSILON))`` (NaN without pixels)."""
        n = self.num_pixels
        return self.nll_sum / n if n else math.nan

    def brier_score(self) -> float:
        """Mean over pixels of ``sum_k (p_k - 1[y = k])^2``, not divided by the number
        of classes (NaN without pixels)."""
        n = self.num_pixels
        return self.brier_sum / n if n else math.nan

    def classwise_calibration_errors(self) -> np.ndarray:
        """``cwECE_k`` of every class, shape ``(C,)``; NaN for classes absent from the
        valid labels (and for all classes without pixels)."""
        n = self.num_pixels
        errors = np.full(self.num_classes, np.nan)
        if not n:
            return errors
        present = self.class_label_count.sum(axis=1) > 0
        per_class = np.abs(self.class_probability_sum - self.class_label_count).sum(axis=1) / n
        errors[present] = per_class[present]
        return errors

    def classwise_maximum_calibration_errors(self) -> np.ndarray:
        """Classwise MCE of every class, shape ``(C,)``; NaN as for
        :meth:`classwise_calibration_errors`."""
        present = self.class_label_count.sum(axis=1) > 0
        errors = maximum_calibration_error(self.class_count, self.class_probability_sum,
                                           self.class_label_count)
        return np.where(present, errors, np.nan)

    def classwise_ece(self) -> float:
        """Mean of :meth:`classwise_calibration_errors` over the classes present."""
        errors = self.classwise_calibration_errors()
        present = ~np.isnan(errors)
        return float(errors[present].mean()) if present.any() else math.nan

    def reliability_diagram(self) -> Dict[str, Any]:
        """Reliability-diagram data (JSON-able): ``bin_edges`` (``B + 1``), per bin
        ``count``, ``mean_confidence`` and ``accuracy`` (None for empty bins), plus
        ``ECE``, ``MCE``, ``gap``, ``accuracy`` and ``num_pixels``."""
        count = self.top_count
        with np.errstate(invalid='ignore', divide='ignore'):
            confidence = self.top_confidence_sum / count
            accuracy = self.top_correct / count

        def values(array: np.ndarray) -> List[Optional[float]]:
            return [float(v) if c else None for v, c in zip(array, count)]

        return {
            'bin_edges': self.bin_edges.tolist(),
            'count': count.tolist(),
            'mean_confidence': values(confidence),
            'accuracy': values(accuracy),
            'ECE': finite_or_none(self.expected_calibration_error()),
            'MCE': finite_or_none(self.maximum_calibration_error()),
            'gap': finite_or_none(self.calibration_gap()),
            'accuracy_overall': finite_or_none(self.accuracy()),
            'num_pixels': self.num_pixels,
        }

    # ------------------------------------------------------------------------------
    # Selective prediction
    # ------------------------------------------------------------------------------
    def _ranked_groups(self) -> Dict[str, np.ndarray]:
        """Non-empty fine bins from most to least confident, with the number of pixels
        and errors before each (``before_count``, ``before_errors``)."""
        order = np.arange(self.selective_bins, -1, -1)
        count = self.selective_count[order]
        errors = self.selective_errors[order]
        keep = count > 0
        order, count, errors = order[keep], count[keep], errors[keep]
        before_count = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
        before_errors = np.concatenate([[0], np.cumsum(errors)[:-1]]).astype(np.int64)
        return dict(bin=order, count=count, errors=errors, before_count=before_count,
                    before_errors=before_errors)

    def risk_coverage_curve(self, max_points: Optional[int] = None) -> Dict[str, List[float]]:
        """Points (coverage, selective risk) of accepting every pixel whose confidence
        lies in a fine bin at or above each non-empty bin, by increasing coverage.

        ``confidence_threshold`` is the lower edge of that bin (pixels with confidence
        above it are accepted; 1.0 for the bin of confidence exactly 1.0). With
        ``max_points`` (>= 2), at most that many points are kept: for each of
        ``max_points`` evenly spaced target coverages the first point at or above it
        (the last point is always kept).
        """
        groups = self._ranked_groups()
        n = self.num_pixels
        if not n:
            return {'coverage': [], 'risk': [], 'confidence_threshold': []}
        accepted = groups['before_count'] + groups['count']
        coverage = accepted / n
        risk = (groups['before_errors'] + groups['errors']) / accepted
        threshold = np.where(groups['bin'] == self.selective_bins, 1.0,
                             groups['bin'] / self.selective_bins)
        if max_points is not None:
            if max_points < 2:
                raise ValueError(f'max_points must be >= 2, got {max_points}')
            if coverage.size > max_points:
                targets = np.linspace(coverage[0], 1.0, max_points)
                keep = np.unique(np.searchsorted(coverage, targets, side='left'))
                keep = np.unique(np.append(np.clip(keep, 0, coverage.size - 1),
                                           coverage.size - 1))
                coverage, risk, threshold = coverage[keep], risk[keep], threshold[keep]
        return {'coverage': coverage.tolist(), 'risk': risk.tolist(),
                'confidence_threshold': threshold.tolist()}

    def aurc(self) -> float:
        """Area under the risk-coverage curve, the expected mean selective risk over the
        ``n`` coverages ``i / n`` (ties inside a fine bin in uniformly random order)."""
        n = self.num_pixels
        if not n:
            return math.nan
        g = self._ranked_groups()
        rate = g['errors'] / g['count']
        harmonic = _harmonic(g['before_count'] + g['count']) - _harmonic(g['before_count'])
        per_group = g['errors'] + (g['before_errors'] - rate * g['before_count']) * harmonic
        return float(per_group.sum() / n)

    def oracle_aurc(self) -> float:
        """AURC of a ranking that puts every error last (same pixels, same errors)."""
        n = self.num_pixels
        if not n:
            return math.nan
        errors = int(self.selective_errors.sum())
        correct = n - errors
        return float((errors - correct * (_harmonic(n) - _harmonic(correct))) / n)

    def excess_aurc(self) -> float:
        """``AURC - oracle AURC``."""
        return self.aurc() - self.oracle_aurc()

    def accuracy_at_coverage(self, coverage: float = 0.9) -> float:
        """Expected accuracy of the ``ceil(coverage * n)`` most confident pixels (ties
        inside a fine bin in uniformly random order); ``coverage`` in (0, 1]."""
        if not 0.0 < coverage <= 1.0:
            raise ValueError(f'coverage must be in (0, 1], got {coverage}')
        n = self.num_pixels
        if not n:
            return math.nan
        keep = max(1, math.ceil(Fraction(str(coverage)) * n))
        g = self._ranked_groups()
        index = int(np.searchsorted(g['before_count'] + g['count'], keep, side='left'))
        inside = keep - g['before_count'][index]
        expected_errors = (g['before_errors'][index]
                           + inside * g['errors'][index] / g['count'][index])
        return float(1.0 - expected_errors / keep)

    def aurc_quantisation_bound(self) -> float:
        """Upper bound on ``|AURC - sort-based AURC over the raw confidences|``, valid for
        any order of the pixels inside each regular fine bin (confidence exactly 1.0 is a
        true tie, averaged the same way in both).

        Inside a bin with ``n_g`` pixels, ``e_g`` errors and ``N_g`` pixels before it, the
        errors among its first ``t`` pixels differ from the expectation ``t e_g / n_g`` by
        at most ``f(t) = min(t, n_g - t, m_g)`` with ``m_g = min(e_g, n_g - e_g)``, so the
        bound is ``(1/n) sum_g sum_{t=1}^{n_g} f(t) / (N_g + t)`` (summed in closed form
        with harmonic numbers).
        """
        n = self.num_pixels
        if not n:
            return math.nan
        g = self._ranked_groups()
        regular = g['bin'] < self.selective_bins
        before = g['before_count'][regular]
        size = g['count'][regular]
        mixed = np.minimum(g['errors'], g['count'] - g['errors'])[regular]

        def reciprocal_sum(first: np.ndarray, last: np.ndarray) -> np.ndarray:
            """sum_{t=first}^{last} 1 / (N_g + t), 0 for an empty range."""
            total = _harmonic(before + np.maximum(last, first - 1)) - _harmonic(before + first - 1)
            return np.where(last >= first, total, 0.0)

        rising = mixed - before * reciprocal_sum(np.ones_like(size), mixed)  # f(t) = t
        flat = mixed * reciprocal_sum(mixed + 1, size - mixed - 1)  # f(t) = m_g
        fall_start = np.maximum(mixed + 1, size - mixed)  # f(t) = n_g - t
        falling = ((size + before) * reciprocal_sum(fall_start, size)
                   - np.maximum(size - fall_start + 1, 0))
        return float((rising + flat + falling).sum() / n)

    def summary(self) -> Dict[str, float]:
        """The metrics of :data:`~reobench_mm.evaluation.keys.CALIBRATION_METRICS` as
        floats (NaN without pixels)."""
        values = {'ECE': self.expected_calibration_error(),
                  'aECE': self.adaptive_calibration().ece,
                  'MCE': self.maximum_calibration_error(), 'gap': self.calibration_gap(),
                  'NLL': self.negative_log_likelihood(), 'Brier': self.brier_score(),
                  'cwECE': self.classwise_ece(), 'AURC': self.aurc(),
                  'eAURC': self.excess_aurc(), 'acc@90cov': self.accuracy_at_coverage(0.9)}
        return {name: float(values[name]) for name in CALIBRATION_METRICS}
