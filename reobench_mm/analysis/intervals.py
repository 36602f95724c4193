"""Bootstrap intervals on every number of a robustness summary.

The test images of a sweep are resampled with replacement (``resamples`` times, seeded:
:func:`~reobench_mm.evaluation.functional.bootstrap.resample_counts`), and every
condition's metric is recomputed on each resample from its per-image statistics
(:class:`~reobench_mm.evaluation.functional.condition_stats.ImageStats`). The *same*
resamples serve every condition, so each resample gives one whole set of condition values
and every summary number computed from them (a corruption's mean, Avg, ΔTP, mPC, rPC, the
categories, the calibration means) has a replicate per resample: the interval of a
difference such as ΔTP respects the pairing of clean and corrupted results on the same
images. Each interval is the percentile interval of those replicates
(:func:`~reobench_mm.evaluation.functional.bootstrap.percentile_interval`); it measures
how much the number depends on which test images were drawn, for this model and these
corruption draws.

When the random corruptions were evaluated with several corruption seeds (their cells
are the means over the seeds: :mod:`~reobench_mm.analysis.corruption_seeds`), each
resample also draws the seeds of every such condition with replacement
(:func:`~reobench_mm.evaluation.functional.bootstrap.resample_draws`) and averages the
drawn seeds' values on its images
(:mod:`~reobench_mm.evaluation.functional.seed_average`): the intervals of those cells,
of their corruptions' means and of every aggregate containing them (Avg, ΔTP, mPC, rPC,
the categories) then include the variation over corruption draws too; the block's
``corruption_seeds`` names the seeds and corruptions (False with one seed).

:func:`summary_intervals` returns the JSON block ``numbers.intervals`` of
``results.json`` (see :func:`no_intervals` for results without per-image statistics).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from reobench_corruptions import CATEGORIES, get_corruption
from reobench_corruptions.condition import Condition
from ..evaluation.functional.bootstrap import (DEFAULT_LEVEL, DEFAULT_RESAMPLES,
                                               check_level, check_resamples,
                                               interval_or_none, percentile_interval,
                                               resample_counts, resample_draws)
from ..evaluation.functional.condition_stats import ImageStats
from ..evaluation.functional.seed_average import average_over_seeds
from ..evaluation.keys import metric_key
from .corruption_seeds import group_by_seed, seed_condition_label
from .results import RobustnessSummary

__all__ = ['INTERVAL_METHOD', 'summary_intervals', 'no_intervals', 'check_same_images',
           'condition_replicates', 'interval_of', 'summary_numbers', 'SUMMARY_INTERVAL_KEYS',
           'available_intervals']

INTERVAL_METHOD = 'percentile bootstrap over test images (the same resamples for every ' \
    'condition)'
SEEDS_METHOD = 'percentile bootstrap over test images and corruption seeds (the same image ' \
    'resamples for every condition; the seeds of each random corruption drawn with ' \
    'replacement in every resample)'
#: The overall numbers that get an interval (``robust/<key>_ci_low``, ...).
SUMMARY_INTERVAL_KEYS = ('clean', 'avg', 'delta_tp', 'mpc', 'rpc')


def available_intervals(summary: RobustnessSummary) -> Optional[Dict[str, Any]]:
    """The summary's intervals block when it holds intervals (None without, or when it
    says why there are none)."""
    intervals = summary.intervals
    return intervals if isinstance(intervals, dict) and intervals.get('available') else None


def no_intervals(reason: str) -> Dict[str, Any]:
    """The ``intervals`` block of results without intervals, saying why."""
    return {'available': False, 'reason': reason}


def check_same_images(stats: Mapping[Any, ImageStats], what: str = 'condition') -> tuple:
    """The image ids all ``stats`` share.

    Raises:
        ValueError: two were computed on different images (the first difference named).
    """
    items = list(stats.items())
    if not items:
        raise ValueError('no per-image statistics')
    first_key, first = items[0]
    for key, other in items[1:]:
        if other.image_ids != first.image_ids:
            a, b = set(first.image_ids), set(other.image_ids)
            if a == b:
                detail = 'the same images in another order'
            else:
                only_a = sorted(a - b)[:3]
                only_b = sorted(b - a)[:3]
                detail = (f'{len(a)} vs {len(b)} images; only in {first_key}: '
                          f'{only_a or "none"}; only in {key}: {only_b or "none"}')
            raise ValueError(f'{what} {key} was evaluated on other images than {first_key} '
                             f'({detail})')
    return first.image_ids


def interval_of(replicates: np.ndarray, level: float) -> Optional[List[float]]:
    """``[low, high]`` of one number's replicates (None when undefined)."""
    low, high = percentile_interval(np.asarray(replicates), level)
    return interval_or_none(float(low), float(high))


def condition_replicates(stats: Mapping[Condition, ImageStats], weights: np.ndarray,
                         value: Callable[[ImageStats, np.ndarray], np.ndarray]
                         ) -> Dict[Condition, np.ndarray]:
    """``condition -> (B,)`` replicates of ``value(stats, weights)``."""
    return {c: np.asarray(value(s, weights), dtype=np.float64) for c, s in stats.items()}


def _mean(arrays: Sequence[np.ndarray]) -> np.ndarray:
    return np.mean(np.stack(arrays), axis=0)


def _per_severity(values: Mapping[Condition, np.ndarray]
                  ) -> Dict[str, Dict[int, np.ndarray]]:
    """corruption -> severity -> replicates, from per-condition replicates."""
    out: Dict[str, Dict[int, np.ndarray]] = {}
    for condition, replicate in values.items():
        if not condition.is_clean:
            out.setdefault(condition.corruption, {})[condition.severity] = replicate
    return out


def _scores(clean: np.ndarray, per_severity: Mapping[str, Mapping[int, np.ndarray]],
            members: Sequence[str]) -> Dict[str, np.ndarray]:
    """Replicates of Avg, ΔTP, mPC, rPC over ``members`` (as
    :func:`~reobench_mm.analysis.results.robustness_scores`)."""
    means = [_mean(list(per_severity[n].values())) for n in members]
    avg = _mean(means)
    mpc = _mean([v for n in members for v in per_severity[n].values()])
    with np.errstate(invalid='ignore', divide='ignore'):
        rpc = np.where(clean > 0, mpc / clean, math.nan)
    return {'avg': avg, 'delta_tp': clean - avg, 'mpc': mpc, 'rpc': rpc}


def summary_numbers(corruptions: Sequence[str], protocol: str,
                    values: Mapping[Condition, np.ndarray]) -> Dict[str, np.ndarray]:
    """Replicates of the main numbers from per-condition replicates, flat: ``clean``,
    ``avg``, ``delta_tp``, ``mpc``, ``rpc``, ``<corruption>@mean`` and every condition
    key (as :func:`~reobench_mm.analysis.results.aggregate` computes them)."""
    clean = values[Condition(protocol=protocol)]
    per_severity = _per_severity(values)
    out = {'clean': clean}
    if corruptions:
        out.update(_scores(clean, per_severity, list(corruptions)))
    for name in corruptions:
        out[f'{name}@mean'] = _mean(list(per_severity[name].values()))
    out.update({c.key: v for c, v in values.items()})
    return out


def _replicate_summary(summary: RobustnessSummary, values: Mapping[Condition, np.ndarray],
                       level: float) -> Dict[str, Any]:
    """The intervals of the task metric's numbers from per-condition replicates."""
    protocol = summary.protocol
    clean = values[Condition(protocol=protocol)]
    per_severity = _per_severity(values)
    names = list(summary.corruptions)
    overall = _scores(clean, per_severity, names)
    out: Dict[str, Any] = {'clean': interval_of(clean, level)}
    out.update({k: interval_of(v, level) for k, v in overall.items()})
    out['per_corruption'] = {}
    for name in names:
        mean = _mean(list(per_severity[name].values()))
        out['per_corruption'][name] = {
            'mean': interval_of(mean, level), 'drop': interval_of(clean - mean, level),
            'severities': {str(s): interval_of(v, level)
                           for s, v in sorted(per_severity[name].items())}}
    out['per_category'] = {}
    for category in CATEGORIES:
        members = [n for n in names if get_corruption(n, protocol).category == category]
        if members:
            scores = _scores(clean, per_severity, members)
            out['per_category'][category] = {k: interval_of(v, level)
                                             for k, v in scores.items()}
    if summary.held_out is not None:
        scores = _scores(clean, per_severity, list(summary.held_out.corruptions))
        out['held_out'] = {k: interval_of(v, level) for k, v in scores.items()}
    out['conditions'] = {c.key: interval_of(v, level) for c, v in values.items()}
    return out


def _calibration_intervals(summary: RobustnessSummary, stats: Mapping[Condition, ImageStats],
                           weights: np.ndarray, level: float) -> Dict[str, Any]:
    """``calib/ECE`` (...) -> ``{'clean', 'per_corruption', 'avg', 'conditions'}``
    intervals, for the calibration metrics every condition has per-image statistics of
    and the summary reports."""
    prefixes = set.intersection(*(set(s.calibration) for s in stats.values()))
    out: Dict[str, Any] = {}
    for prefix in sorted(prefixes):
        per_condition = {c: s.calibration[prefix].values(weights) for c, s in stats.items()}
        names = next(iter(stats.values())).calibration[prefix].names
        for name in names:
            key = metric_key(prefix, name)
            if key not in summary.extra:
                continue
            values = {c: v[name] for c, v in per_condition.items()}
            clean = values[Condition(protocol=summary.protocol)]
            per_corruption = {}
            for corruption in summary.corruptions:
                rows = [v for c, v in values.items() if c.corruption == corruption]
                per_corruption[corruption] = _mean(rows)
            avg = _mean(list(per_corruption.values()))
            out[key] = {'clean': interval_of(clean, level),
                        'per_corruption': {n: interval_of(v, level)
                                           for n, v in per_corruption.items()},
                        'avg': interval_of(avg, level),
                        'avg_minus_clean': interval_of(avg - clean, level),
                        'conditions': {c.key: interval_of(v, level)
                                       for c, v in values.items()}}
    return out


def _seeded_stats(summary: RobustnessSummary, stats: Dict[Condition, ImageStats],
                  seed_stats: Mapping[Condition, Optional[ImageStats]], resamples: int,
                  seed: int) -> Optional[str]:
    """Replace (in ``stats``) every condition of the summary's further corruption seeds
    by its average over the drawn seeds; why not (None when done)."""
    groups = group_by_seed(seed_stats, summary.protocol)
    for condition in summary.conditions:
        entry = summary.corruption_seeds['conditions'].get(condition.key)
        if entry is None:
            continue
        seeds = [int(s) for s in entry['seeds']][1:]
        have = groups.get(condition, {})
        missing = [s for s in seeds if have.get(s) is None]
        if missing:
            return (f'the further corruption seeds {missing} of {condition.key} have no '
                    'per-image statistics')
        members = [stats[condition]] + [have[s] for s in seeds]
        stats[condition] = average_over_seeds(
            members, resample_draws(len(members), resamples, seed))
    return None


def summary_intervals(summary: RobustnessSummary,
                      stats: Mapping[Condition, Optional[ImageStats]],
                      resamples: int = DEFAULT_RESAMPLES, level: float = DEFAULT_LEVEL,
                      seed: int = 0,
                      seed_stats: Optional[Mapping[Condition, Optional[ImageStats]]] = None
                      ) -> Dict[str, Any]:
    """The ``intervals`` block of ``results.json`` for ``summary`` from each condition's
    per-image statistics (see the module docstring); ``seed_stats``: those of the further
    corruption seeds (keyed by their seeded :class:`Condition`) when the summary's random
    corruptions were evaluated with several (``summary.corruption_seeds``).

    Without statistics for every condition (records written before they were kept, or
    a task metric that keeps none) or with ``resamples=0`` the block says why there are
    no intervals (:func:`no_intervals`).

    Raises:
        ValueError: conditions evaluated on different images, or a bad level or count.
    """
    resamples = check_resamples(resamples)
    level = check_level(level)
    if resamples == 0:
        return no_intervals('intervals were turned off (0 bootstrap resamples)')
    missing = [c.key for c in summary.conditions if stats.get(c) is None]
    if missing:
        return no_intervals(
            f'{len(missing)} of {len(summary.conditions)} condition records have no '
            f'per-image statistics (e.g. {", ".join(missing[:3])}): records written before '
            'they were kept, or a task metric that keeps none; evaluate them again '
            '(force) for intervals')
    stats = {c: stats[c] for c in summary.conditions}
    image_ids = check_same_images(stats)
    seeds: Any = False
    if summary.corruption_seeds is not None:
        check_same_images({'clean': stats[Condition(protocol=summary.protocol)]}
                          | {seed_condition_label(c): s for c, s in (seed_stats or {}).items()
                             if s is not None})
        why = _seeded_stats(summary, stats, seed_stats or {}, resamples, seed)
        if why is not None:
            return no_intervals(why + '; evaluate them again (force) for intervals')
        seeds = {k: summary.corruption_seeds[k] for k in ('seeds', 'corruptions')}
    weights = resample_counts(len(image_ids), resamples, seed)
    values = condition_replicates(stats, weights, lambda s, w: s.task.values(w))
    out: Dict[str, Any] = {'available': True,
                           'method': INTERVAL_METHOD if seeds is False else SEEDS_METHOD,
                           'level': level, 'resamples': resamples, 'seed': seed,
                           'images': len(image_ids), 'corruption_seeds': seeds}
    out.update(_replicate_summary(summary, values, level))
    out['extra'] = _calibration_intervals(summary, stats, weights, level)
    return out
