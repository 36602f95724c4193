"""Paired comparison of models evaluated on the same test images.

Two models evaluated on the same images differ, image by image, in ways that a comparison
of their two intervals ignores: an image hard for one is usually hard for the other.
Everything here uses that pairing, from the per-image statistics of both models
(:class:`~reobench_mm.evaluation.functional.condition_stats.ImageStats`):

- the **difference** A − B of every cell (condition), corruption mean, Avg, ΔTP, mPC and
  rPC, with a bootstrap interval from resamples of the images shared by both models
  (:func:`~reobench_mm.evaluation.functional.bootstrap.resample_counts`);
- its **p-value**, from a paired permutation test: under the null hypothesis that the two
  models are exchangeable on every image, swapping their results on any set of images
  gives a difference as likely as the observed one. Each permutation swaps the two
  models' statistics on a random half of the images (the same swaps for every number, so
  the summary numbers are tested with their pairing across conditions) and recomputes
  every number; the p-value is the one ``scipy.stats.permutation_test(...,
  permutation_type='samples')`` gives: per side ``(count + 1) / (R + 1)`` with ``count``
  the permutations at least as extreme (all ``2**N`` swaps, without the +1, when that is
  no more than the permutations asked for), two-sided ``min(1, 2 min(less, greater))``.
  Written here rather than calling scipy per number because one set of swaps serves
  every number of a comparison (tested equal to scipy on the same numbers);
- **Kendall's τ-b** between two rankings of several models, per bootstrap resample, for
  an interval (:func:`kendall_tau_b_rows`, tested against ``scipy.stats.kendalltau``);
- **rank flips**: a pair of models whose order under a condition is the opposite of its
  clean order. Its p-value is the intersection-union test of the two one-sided paired
  tests (A better than B clean, B better than A under the condition): the larger of the
  two one-sided p-values, small only when both orders are themselves significant.

Multiple comparisons: :func:`benjamini_hochberg` (``scipy.stats.false_discovery_control``)
over the tests of one table.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np
from scipy import stats as scipy_stats

from reobench_corruptions.condition import Condition
from ..evaluation.functional.bootstrap import (DEFAULT_LEVEL, DEFAULT_RESAMPLES,
                                               resample_counts)
from ..evaluation.functional.condition_stats import ImageStats
from .intervals import check_same_images, interval_of, summary_numbers

__all__ = ['DEFAULT_PERMUTATIONS', 'swap_masks', 'permutation_p_values', 'smallest_p_value',
           'benjamini_hochberg', 'kendall_tau_b_rows', 'PairedNumbers', 'paired_numbers',
           'flip_p_value', 'ModelNumbers', 'model_numbers']

#: Permutations of the paired test when none are given (p-values down to 1/2000).
DEFAULT_PERMUTATIONS = 1999


def swap_masks(num_images: int, permutations: int, seed: int) -> Tuple[np.ndarray, bool]:
    """``(R, N)`` bool: which images have the two models' results swapped in each
    permutation, and whether they are all ``2**N`` swaps (exact test) rather than
    ``permutations`` random ones."""
    if num_images < 1:
        raise ValueError('a paired test needs at least one image')
    if 2 ** min(num_images, 62) <= permutations:
        grid = np.array(list(itertools.product((False, True), repeat=num_images)))
        return grid, True
    rng = np.random.default_rng(seed)
    return rng.random((permutations, num_images)) < 0.5, False


def smallest_p_value(num_images: int, exact: bool, permutations: int) -> float:
    """The smallest two-sided p-value the paired test can give on ``num_images`` images:
    ``2 / 2**N`` when every swap is enumerated (only the observed assignment and its
    mirror are as extreme), ``2 / (R + 1)`` with ``R`` random swaps."""
    if exact:
        return min(1.0, 2.0 / 2.0 ** num_images)
    return min(1.0, 2.0 / (permutations + 1))


def permutation_p_values(observed: np.ndarray, null: np.ndarray, exact: bool
                         ) -> Dict[str, np.ndarray]:
    """One-sided (``less``, ``greater``) and ``two-sided`` p-values of ``observed``
    ``(K,)`` against the permutation distribution ``null`` ``(R, K)``, as
    ``scipy.stats.permutation_test`` computes them (its tolerance for ties included)."""
    observed = np.asarray(observed, dtype=np.float64)
    null = np.asarray(null, dtype=np.float64)
    adjustment = 0 if exact else 1
    gamma = np.abs(np.finfo(np.float64).eps * 100 * observed)
    count = null.shape[0]
    less = ((null <= observed + gamma).sum(axis=0) + adjustment) / (count + adjustment)
    greater = ((null >= observed - gamma).sum(axis=0) + adjustment) / (count + adjustment)
    two_sided = np.minimum(2 * np.minimum(less, greater), 1.0)
    undefined = ~np.isfinite(observed) | ~np.isfinite(null).all(axis=0)
    return {k: np.where(undefined, math.nan, v) for k, v in
            (('less', less), ('greater', greater), ('two-sided', two_sided))}


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (``scipy.stats.false_discovery_control``);
    NaN entries stay NaN and are not counted as tests."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, math.nan)
    valid = np.isfinite(p)
    if valid.any():
        out[valid] = scipy_stats.false_discovery_control(p[valid], method='bh')
    return out


def kendall_tau_b_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's τ-b between the rows of ``x`` and ``y`` (``(B, K)``: B rankings of K
    models), ``(B,)``; NaN where a row is constant. Equal to ``scipy.stats.kendalltau``
    (``variant='b'``) row by row, computed for all rows at once over the K(K-1)/2 pairs
    (the resamples of an interval would otherwise be one scipy call each)."""
    x, y = np.atleast_2d(x).astype(np.float64), np.atleast_2d(y).astype(np.float64)
    i, j = np.triu_indices(x.shape[1], k=1)
    sx, sy = np.sign(x[:, i] - x[:, j]), np.sign(y[:, i] - y[:, j])
    concordance = (sx * sy).sum(axis=1)
    with np.errstate(invalid='ignore', divide='ignore'):
        tau = concordance / np.sqrt((sx != 0).sum(axis=1) * (sy != 0).sum(axis=1))
    return np.clip(tau, -1.0, 1.0)


def _joint(a: ImageStats, b: ImageStats) -> ImageStats:
    """One set of 2N images: A's results, then B's."""
    ids = tuple(f'a:{i}' for i in a.image_ids) + tuple(f'b:{i}' for i in b.image_ids)
    prefixes = set(a.calibration) & set(b.calibration)
    return ImageStats(ids, a.task.concat(b.task),
                      {p: a.calibration[p].concat(b.calibration[p]) for p in prefixes})


@dataclass
class PairedNumbers:
    """A − B of every number of two models' sweeps on the same images.

    Attributes:
        difference: name -> observed A − B (names of
            :func:`~reobench_mm.analysis.intervals.summary_numbers`: ``clean``, ``avg``,
            ``delta_tp``, ``mpc``, ``rpc``, ``<corruption>@mean``, condition keys).
        interval: name -> ``[low, high]`` bootstrap interval of the difference (or None).
        p_value: name -> ``{'less', 'greater', 'two-sided'}`` permutation p-values.
        values_a, values_b: name -> each model's own value (recomputed, unrounded).
        replicates: name -> ``(B,)`` bootstrap replicates of the difference.
        exact: whether the test enumerated every swap.
    """
    difference: Dict[str, float]
    interval: Dict[str, Optional[list]]
    p_value: Dict[str, Dict[str, float]]
    values_a: Dict[str, float]
    values_b: Dict[str, float]
    replicates: Dict[str, np.ndarray]
    exact: bool
    images: int
    permutations: int


def _numbers(stats: Mapping[Condition, ImageStats], weights: np.ndarray,
             corruptions: Sequence[str], protocol: str) -> Dict[str, np.ndarray]:
    values = {c: np.asarray(s.task.values(weights), dtype=np.float64)
              for c, s in stats.items()}
    return summary_numbers(corruptions, protocol, values)


@dataclass
class ModelNumbers:
    """One model's numbers (:func:`~reobench_mm.analysis.intervals.summary_numbers`) on
    all images (``observed``, ``(1,)`` each) and on each bootstrap resample
    (``bootstrap``, ``(B,)`` each): what every comparison of that model shares."""
    observed: Dict[str, np.ndarray]
    bootstrap: Dict[str, np.ndarray]


def model_numbers(stats: Mapping[Condition, ImageStats], corruptions: Sequence[str],
                  protocol: str, weights: np.ndarray) -> ModelNumbers:
    """:class:`ModelNumbers` of one model with the resample ``weights``."""
    return ModelNumbers(_numbers(stats, np.ones((1, weights.shape[1])), corruptions,
                                 protocol),
                        _numbers(stats, weights, corruptions, protocol))


def paired_numbers(stats_a: Mapping[Condition, ImageStats],
                   stats_b: Mapping[Condition, ImageStats], corruptions: Sequence[str],
                   protocol: str = 'reobench', *, resamples: int = DEFAULT_RESAMPLES,
                   level: float = DEFAULT_LEVEL, seed: int = 0,
                   permutations: int = DEFAULT_PERMUTATIONS,
                   permutation_seed: int = 0,
                   numbers: Optional[Tuple[ModelNumbers, ModelNumbers]] = None
                   ) -> PairedNumbers:
    """The paired difference A − B of every number (see the module docstring).
    ``numbers``: both models' :class:`ModelNumbers` on the resamples of ``resamples``
    and ``seed`` when already computed (a comparison of several models computes each
    model's once).

    Raises:
        ValueError: the two models were evaluated on different images or conditions
            (the difference named).
    """
    keys_a, keys_b = set(stats_a), set(stats_b)
    if keys_a != keys_b:
        only = sorted(c.key for c in keys_a ^ keys_b)
        raise ValueError(f'the two models have other conditions ({", ".join(only[:5])})')
    conditions = sorted(stats_a, key=lambda c: c.key)
    image_ids = check_same_images({('A', c.key): stats_a[c] for c in conditions}
                                  | {('B', c.key): stats_b[c] for c in conditions}, 'model')
    n = len(image_ids)
    if numbers is None:
        weights = resample_counts(n, resamples, seed)
        numbers = (model_numbers(stats_a, corruptions, protocol, weights),
                   model_numbers(stats_b, corruptions, protocol, weights))
    a, b = numbers
    names = list(a.observed)
    difference = {k: float(a.observed[k][0] - b.observed[k][0]) for k in names}
    replicates = {k: a.bootstrap[k] - b.bootstrap[k] for k in names}
    masks, exact = swap_masks(n, permutations, permutation_seed)
    swap = masks.astype(np.float64)
    joint = {c: _joint(stats_a[c], stats_b[c]) for c in conditions}
    as_a = _numbers(joint, np.hstack([1 - swap, swap]), corruptions, protocol)
    as_b = _numbers(joint, np.hstack([swap, 1 - swap]), corruptions, protocol)
    null = np.stack([as_a[k] - as_b[k] for k in names], axis=1)
    p = permutation_p_values(np.array([difference[k] for k in names]), null, exact)
    return PairedNumbers(
        difference=difference,
        interval={k: interval_of(replicates[k], level) for k in names},
        p_value={k: {side: float(p[side][i]) for side in p} for i, k in enumerate(names)},
        values_a={k: float(a.observed[k][0]) for k in names},
        values_b={k: float(b.observed[k][0]) for k in names},
        replicates=replicates, exact=exact, images=n, permutations=len(masks))


def flip_p_value(clean: Mapping[str, float], condition: Mapping[str, float],
                 clean_difference: float) -> float:
    """The p-value of a rank flip between clean and a condition (the intersection-union
    test): with A ahead clean (``clean_difference > 0``), the larger of the one-sided
    p-values of "A better clean" and "B better under the condition" (and mirrored)."""
    if clean_difference > 0:
        return max(clean['greater'], condition['less'])
    return max(clean['less'], condition['greater'])
