"""Bootstrap intervals over the test images for the rows of rank statistics
(:func:`~reobench_mm.analysis.rank_stability.rank_statistics`).

From the per-image statistics every model's ``results.json`` names, the images are
resampled with replacement (the resamples of the paired tests,
:func:`~reobench_mm.evaluation.functional.bootstrap.resample_counts` with the same
count and seed, shared by every model and condition), every model's measure is
recomputed on each resample under each condition (cells, corruption means, ``sev@k``,
Avg), and τ-b between the two rankings is computed per resample
(:func:`~reobench_mm.analysis.paired.kendall_tau_b_rows`); the interval is the percentile
interval of those τ. A row gets one when both its measures have per-image statistics:
the task metric and, of the calibration numbers, those the per-image statistics hold
(:attr:`~reobench_mm.evaluation.functional.image_stats.CalibrationImageStats.names`: ECE,
gap, NLL, Brier for segmentation; ECE, gap for detection), not cwECE, AURC, eAURC,
acc@90cov, aECE or MCE (not in the per-image statistics). For the task metric's
clean → condition rows the intervals are those of the paired tests
(:mod:`~reobench_mm.analysis.paired_models`): the same resamples and the same τ.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from reobench_corruptions.condition import Condition
from ..evaluation.functional.bootstrap import resample_counts
from ..evaluation.functional.condition_stats import ImageStats
from .intervals import check_same_images, interval_of, summary_numbers
from .model_set import SEVERITY_MEAN_PREFIX, ModelSet
from .paired import kendall_tau_b_rows
from .paired_models import check_same_draws, model_image_stats
from .rank_stability import RankStatistics, higher_is_better

__all__ = ['rank_intervals', 'measure_replicates']


def _calibration(stats: ImageStats, measure: str, weights: np.ndarray
                 ) -> Optional[np.ndarray]:
    prefix, _, name = measure.partition('/')
    calibration = stats.calibration.get(prefix)
    if calibration is None or name not in calibration.names:
        return None
    return np.asarray(calibration.values(weights)[name], dtype=np.float64)


def measure_replicates(model_set: ModelSet, stats: Dict[Condition, ImageStats],
                       measure: str, weights: np.ndarray) -> Optional[Dict[str, np.ndarray]]:
    """``condition name -> (B,)`` replicates of ``measure`` for one model (names of
    :meth:`~reobench_mm.analysis.model_set.ModelSet.condition_keys`) on the resample
    ``weights``; None when the per-image statistics do not hold ``measure``."""
    values = {}
    for condition in model_set.conditions:
        s = stats[condition]
        replicate = np.asarray(s.task.values(weights), dtype=np.float64) \
            if measure == model_set.metric else _calibration(s, measure, weights)
        if replicate is None:
            return None
        values[condition] = replicate
    out = summary_numbers(model_set.corruptions, model_set.protocol, values)
    for severity in model_set.full_severities:
        out[f'{SEVERITY_MEAN_PREFIX}@{severity}'] = np.mean(np.stack(
            [v for c, v in values.items() if not c.is_clean and c.severity == severity]),
            axis=0)
    return out


def rank_intervals(model_set: ModelSet, statistics: RankStatistics, *, resamples: int,
                   level: float, seed: int) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """Set ``interval`` on every row of ``statistics`` both of whose measures have
    per-image statistics (see the module docstring); return the settings
    (``{'method', 'level', 'resamples', 'seed', 'images', 'measures'}``) and None, or
    ``(None, why)`` when a model has no per-image statistics.

    Raises:
        ValueError: models evaluated on different images or corruption draws (named).
    """
    all_stats, why = model_image_stats(model_set, 'rank statistics without intervals')
    if all_stats is None:
        return None, why
    check_same_draws(model_set)
    image_ids = check_same_images({(m, c.key): s[c] for m, s in zip(model_set.models,
                                                                    all_stats)
                                   for c in model_set.conditions}, 'model')
    weights = resample_counts(len(image_ids), resamples, seed)
    measures = {m for r in statistics.rows for m in (r.reference[0], r.target[0])}
    # goodness per measure: (B, models) per condition, higher = better
    goodness: Dict[str, Dict[str, np.ndarray]] = {}
    for measure in sorted(measures):
        per_model = [measure_replicates(model_set, s, measure, weights) for s in all_stats]
        if any(p is None for p in per_model):
            continue
        sign = 1.0 if higher_is_better(measure, model_set.metric) else -1.0
        goodness[measure] = {c: sign * np.stack([p[c] for p in per_model], axis=1)
                             for c in per_model[0]}
    for row in statistics.rows:
        (rm, rc), (tm, tc) = row.reference, row.target
        if rm in goodness and tm in goodness:
            row.interval = interval_of(kendall_tau_b_rows(goodness[rm][rc], goodness[tm][tc]),
                                       level)
    return {'method': 'percentile bootstrap over test images (the same resamples for every '
                      'model and condition)', 'level': level, 'resamples': resamples,
            'seed': seed, 'images': len(image_ids), 'measures': sorted(goodness)}, None
