"""Binned calibration errors: the bin of a confidence, the maximum calibration error and
the adaptive (equal-mass) ECE.

:func:`bin_index` puts values in ``B`` equal-width bins ``(0, 1/B], ..., ((B-1)/B, 1]``
(a value of exactly 0 in the first), the bins of the pixel and detection ECE. The errors
are computed from histograms that are sums over images and processes, as the other
calibration metrics (:class:`~reobench_mm.evaluation.functional.calibration.PixelCalibrationStats`,
:mod:`~reobench_mm.evaluation.functional.detection_calibration`), so their memory does not
grow with the test set and the distributed reduction stays a sum of arrays.

**MCE** (maximum calibration error, Naeini et al., "Obtaining Well Calibrated Probabilities
Using Bayesian Binning", AAAI 2015): ``max_b |acc_b - conf_b|`` over the NON-EMPTY bins
``b`` of a histogram, ``acc_b`` being the fraction of correct predictions (true positives
for detections) in the bin and ``conf_b`` its mean confidence (score). It is exact from
the per-bin count, confidence sum and correct count (:func:`maximum_calibration_error`).
An empty bin is skipped; without any non-empty bin the MCE is NaN.

**aECE** (adaptive ECE; the equal-mass binning of Nixon et al., "Measuring Calibration in
Deep Learning", CVPR Workshops 2019): the top-label ECE over ``B`` bins that each hold
about ``n / B`` of the ``n`` predictions instead of equal-width bins. The exact reference
sorts the predictions by increasing confidence, splits them with ``numpy.array_split`` into
``B`` groups (sizes ``ceil(n/B)`` for the first ``n mod B`` groups, ``floor(n/B)`` after;
group ``j`` ends at rank ``K_j = j floor(n/B) + min(j, n mod B)``) and sums
``|sum_{i in j} c_i - sum_{i in j} correct_i| / n`` over the groups.

Sorting every prediction is not possible in a streamed O(bins) accumulator, so
:func:`adaptive_calibration` forms the groups from WHOLE bins of a fine confidence
histogram (``F`` bins, each with count, confidence sum and error count): each inner target
rank ``K_j`` is moved to the nearer edge (in cumulative count) of the fine bin that holds
it (to the lower edge on a tie), and each group is the union of the fine bins between two
moved edges. Consequences:

- pixels (or detections) of one fine bin are never split, so TIES stay together (the
  exact value itself depends on the arbitrary order of tied confidences, e.g. the pixels
  of confidence exactly 1.0); the approximation is independent of any order;
- a fine bin holding more than ``n / B`` predictions swallows several targets, leaving
  EMPTY groups (count 0, contributing 0) beside the group that holds it; with ``n < B``
  predictions some exact groups are empty too;
- the group sums (count, confidence sum, correct count) are exact sums of the fine bins.

**Error bound.** Let ``t_j = |K_j - K'_j|`` be how far target ``j`` moved, inside fine
bin ``f`` with ``n_f`` predictions, ``e_f`` of them wrong, confidences in ``(lo_f, hi_f]``.
With ``D(k)`` the sum of ``c_i - correct_i`` over the ``k`` least confident predictions
(in ANY order of ties), group ``j``'s term changes by at most
``|D(K'_j) - D(K_j)| + |D(K'_{j-1}) - D(K_{j-1})|``, and ``D(K'_j) - D(K_j)`` is a sum
over ``t_j`` predictions of bin ``f``: wrong ones add ``c_i <= hi_f``, correct ones
``c_i - 1`` with ``|c_i - 1| < 1 - lo_f``. As a difference of two non-negative sums it is
at most ``delta_j = max(min(t_j, e_f) hi_f, min(t_j, n_f - e_f) (1 - lo_f))``, so

    |aECE - exact aECE| <= (2 / n) sum_{j=1}^{B-1} delta_j.

Moving a cut between two groups that are miscalibrated in the SAME direction changes
nothing: their terms ``|A_j|`` add up to ``|A_j + A_{j+1}|``, which does not depend on the
cut. With ``A'_j = sum_j c - sum_j correct`` of the formed group, the exact group's
``A_j`` differs from it by at most ``delta_{j-1} + delta_j``; where ``A'_j != 0`` and
``|A'_j| >= delta_{j-1} + delta_j``, ``A_j`` has the sign of ``A'_j`` (or is 0) for every
order of ties. A run of groups of one such certain sign contributes ``|sum of the run|``,
which only the cuts at the two ends of the run move. Hence

    |aECE - exact aECE| <= (2 / n) sum over the cuts j NOT between two groups of one
                           certain sign of delta_j,

which :attr:`AdaptiveCalibration.bound` reports (0 when every target falls on a fine-bin
edge, or the model is over- (or under-) confident in every group by more than the
slack). The bound is attained when both neighbours of a moved cut are miscalibrated in
opposite directions and the moved predictions all push the same way (tested). Since
``t_j <= n_f / 2`` it is at most ``(1/n) sum_j n_{f_j} <= (B - 1) max_f n_f / n``: with
``F`` equal-width fine bins and no fine bin holding more than ``rho / F`` of the
predictions, at most ``(B - 1) rho / F`` (0.0014 ``rho`` for 15 bins and ``F = 10000``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

import numpy as np

__all__ = ['bin_index', 'maximum_calibration_error', 'AdaptiveCalibration', 'equal_mass_targets',
           'adaptive_calibration']


def bin_index(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Index ``b`` with ``edges[b] < value <= edges[b + 1]`` for values in [0, 1] and
    increasing ``edges`` from 0 to 1 (``numpy.linspace(0, 1, B + 1)``); 0 goes to the
    first bin (the result of ``searchsorted(edges, values) - 1``, faster).

    ``ceil(value * B) - 1`` can be off by one only for values within rounding error of an
    edge; those few are re-checked against ``edges``.
    """
    num_bins = len(edges) - 1
    scaled = values * num_bins
    index = np.ceil(scaled).astype(np.int64)
    index -= 1
    np.clip(index, 0, num_bins - 1, out=index)
    near = np.flatnonzero(np.abs(scaled - np.rint(scaled)) < 1e-6)
    if near.size:
        flat_index = index.reshape(-1)
        flat_values = values.reshape(-1)[near]
        fixed = np.searchsorted(edges, flat_values, side='left') - 1
        flat_index[near] = np.clip(fixed, 0, num_bins - 1)
    return index


def maximum_calibration_error(counts: np.ndarray, confidence_sums: np.ndarray,
                              correct_sums: np.ndarray) -> Union[float, np.ndarray]:
    """``max_b |correct_b / n_b - confidence_b / n_b|`` over the non-empty bins (the last
    axis); NaN where every bin is empty.

    Args:
        counts: ``(..., B)`` predictions per bin.
        confidence_sums: ``(..., B)`` sums of their confidences (scores).
        correct_sums: ``(..., B)`` correct predictions (true positives) per bin.

    Returns:
        float | np.ndarray: a float for ``(B,)`` inputs, else an array of the leading shape.
    """
    counts = np.asarray(counts, dtype=np.float64)
    confidence_sums = np.asarray(confidence_sums, dtype=np.float64)
    correct_sums = np.asarray(correct_sums, dtype=np.float64)
    if not counts.shape == confidence_sums.shape == correct_sums.shape or counts.ndim == 0:
        raise ValueError('counts, confidence_sums and correct_sums must be arrays of one '
                         f'shape (..., bins), got {counts.shape}, {confidence_sums.shape} '
                         f'and {correct_sums.shape}')
    filled = counts > 0
    gaps = np.where(filled, np.abs(correct_sums - confidence_sums)
                    / np.maximum(counts, 1.0), -np.inf)
    worst = gaps.max(axis=-1)
    worst = np.where(filled.any(axis=-1), worst, np.nan)
    return float(worst) if worst.ndim == 0 else worst


def equal_mass_targets(num_items: int, num_bins: int) -> np.ndarray:
    """The ``num_bins + 1`` ranks ``K_j`` at which ``numpy.array_split`` cuts
    ``num_items`` sorted items into ``num_bins`` groups (``K_0 = 0``, ``K_B = n``)."""
    size, extra = divmod(int(num_items), int(num_bins))
    j = np.arange(num_bins + 1, dtype=np.int64)
    return j * size + np.minimum(j, extra)


@dataclass(frozen=True)
class AdaptiveCalibration:
    """Equal-mass bins formed from whole fine bins (see the module docstring).

    Attributes:
        ece: the adaptive ECE, ``sum_j |confidence_sum_j - correct_j| / n`` (NaN without
            predictions).
        bound: upper bound on ``|ece - exact sort-based value|`` (NaN without predictions).
        target: ``(B + 1,)`` exact group ends ``K_j`` (ranks by increasing confidence).
        achieved: ``(B + 1,)`` the ends used (cumulative counts at fine-bin edges).
        count, confidence_sum, correct: ``(B,)`` per-group sums (a group may be empty).
        lower, upper: ``(B,)`` lowest and highest fine-bin edge of each group's
            confidences (NaN for an empty group).
    """
    ece: float
    bound: float
    target: np.ndarray
    achieved: np.ndarray
    count: np.ndarray
    confidence_sum: np.ndarray
    correct: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @property
    def num_items(self) -> int:
        return int(self.count.sum())

    def to_dict(self) -> Dict[str, Any]:
        """JSON-able: ``count``, ``mean_confidence`` and ``accuracy`` per group (None for
        an empty group), the groups' ``confidence_range`` and ``aECE`` and ``bound``."""
        def value(x: float) -> Optional[float]:
            return float(x) if math.isfinite(x) else None

        mean_confidence: List[Optional[float]] = []
        accuracy: List[Optional[float]] = []
        ranges: List[Optional[List[float]]] = []
        for n, conf, correct, low, high in zip(self.count, self.confidence_sum, self.correct,
                                               self.lower, self.upper):
            mean_confidence.append(float(conf / n) if n else None)
            accuracy.append(float(correct / n) if n else None)
            ranges.append([float(low), float(high)] if n else None)
        return dict(count=[int(n) for n in self.count], mean_confidence=mean_confidence,
                    accuracy=accuracy, confidence_range=ranges, aECE=value(self.ece),
                    bound=value(self.bound))


def adaptive_calibration(fine_count: np.ndarray, fine_confidence_sum: np.ndarray,
                         fine_errors: np.ndarray, fine_lower: np.ndarray,
                         fine_upper: np.ndarray, num_bins: int = 15) -> AdaptiveCalibration:
    """Adaptive (equal-mass) ECE from a fine confidence histogram.

    Args:
        fine_count: ``(F,)`` predictions per fine bin, the bins in increasing confidence.
        fine_confidence_sum: ``(F,)`` sums of their confidences.
        fine_errors: ``(F,)`` wrong predictions per fine bin.
        fine_lower, fine_upper: ``(F,)`` confidence range ``(lower, upper]`` of each fine
            bin (for the bound; ``lower == upper`` for a bin of one value).
        num_bins: number of equal-mass groups ``B`` (>= 1).

    Returns:
        AdaptiveCalibration: the value, its error bound and the groups.
    """
    if isinstance(num_bins, bool) or not isinstance(num_bins, (int, np.integer)) \
            or num_bins < 1:
        raise ValueError(f'num_bins must be an integer >= 1, got {num_bins!r}')
    count = np.asarray(fine_count, dtype=np.int64)
    arrays = [np.asarray(a, dtype=np.float64)
              for a in (fine_confidence_sum, fine_errors, fine_lower, fine_upper)]
    if count.ndim != 1 or any(a.shape != count.shape for a in arrays):
        raise ValueError('the fine histogram arrays must be 1-d of one length, got shapes '
                         f'{[count.shape] + [a.shape for a in arrays]}')
    confidence_sum, errors, lower, upper = arrays
    if count.size and (count.min() < 0 or np.any(errors < 0) or np.any(errors > count)):
        raise ValueError('fine_count must be >= 0 and 0 <= fine_errors <= fine_count')
    n = int(count.sum())
    edges = np.concatenate([[0], np.cumsum(count)])  # cumulative count at fine edges
    target = equal_mass_targets(n, num_bins)
    # first fine edge at or above each target; the fine bin before it holds the target
    above = np.searchsorted(edges, target, side='left')
    below = np.maximum(above - 1, 0)
    on_edge = edges[above] == target
    nearer_below = (target - edges[below]) <= (edges[above] - target)
    cut = np.where(on_edge | ~nearer_below, above, below)
    achieved = edges[cut]
    # group j holds the fine bins f with cut_j <= f < cut_{j+1}
    fine_group = np.searchsorted(cut, np.arange(count.size), side='right') - 1
    fine_group = np.clip(fine_group, 0, num_bins - 1)
    correct = (count - errors)
    group_count = np.bincount(fine_group, weights=count, minlength=num_bins)
    group_conf = np.bincount(fine_group, weights=confidence_sum, minlength=num_bins)
    group_correct = np.bincount(fine_group, weights=correct, minlength=num_bins)
    filled = count > 0
    group_low = np.full(num_bins, np.inf)
    group_high = np.full(num_bins, -np.inf)
    np.minimum.at(group_low, fine_group[filled], lower[filled])
    np.maximum.at(group_high, fine_group[filled], upper[filled])
    group_low[~np.isfinite(group_low)] = np.nan
    group_high[~np.isfinite(group_high)] = np.nan

    if n == 0:
        ece = bound = math.nan
    else:
        ece = float(np.abs(group_conf - group_correct).sum() / n)
        inner = slice(1, num_bins)
        moved = np.abs(target[inner] - achieved[inner])
        fine = below[inner]  # the fine bin a moved target lies in (count > 0 there)
        delta = np.zeros(num_bins + 1)  # delta_j of every cut, 0 at both ends
        delta[inner] = np.where(moved > 0, np.maximum(
            np.minimum(moved, errors[fine]) * upper[fine],
            np.minimum(moved, count[fine] - errors[fine]) * (1.0 - lower[fine])), 0.0)
        gaps = group_conf - group_correct
        slack = delta[:-1] + delta[1:]  # group j lies between cuts j and j + 1
        sign = np.where((gaps != 0) & (np.abs(gaps) >= slack), np.sign(gaps), 0.0)
        one_sign = (sign[:-1] == sign[1:]) & (sign[1:] != 0)  # inner cuts 1 .. B-1
        bound = float(2.0 * delta[inner][~one_sign].sum() / n)
    return AdaptiveCalibration(
        ece=ece, bound=bound, target=target, achieved=achieved,
        count=group_count.astype(np.int64), confidence_sum=group_conf,
        correct=group_correct.astype(np.int64), lower=group_low, upper=group_high)
