"""Rank stability across models: does the ranking of the models on clean data survive
the corruptions?

For every condition (corruption x severity), every corruption mean and the overall Avg,
Kendall's τ-b (:func:`scipy.stats.kendalltau`, with its p-value) between the models'
clean values and their values under that condition, for the task metric and, when every
model reports it in every condition, for the calibration error ``calib/ECE``. Summaries:
mean τ per severity and the fraction of conditions whose best model (top-1; the set of
tied best models) differs from the clean one.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

from .model_set import ModelSet
from .results import AVG

__all__ = ['kendall_tau', 'TauRow', 'MeasureStability', 'RankStability', 'rank_stability']

_TWO_MODELS_RANK = ('only 2 models: Kendall τ between two rankings is ±1 (or undefined '
                    'on ties), so rank stability of two models is nearly meaningless')


def kendall_tau(reference: Sequence[float], other: Sequence[float]) -> Tuple[float, float]:
    """Kendall's τ-b between two score vectors and its two-sided p-value
    (:func:`scipy.stats.kendalltau`, ``variant='b'``); NaN when one is constant (τ is
    undefined). The package's one Kendall τ: the data-budget report writes its NaN as
    None (:mod:`reobench_mm.analysis.data_budget`)."""
    result = stats.kendalltau(np.asarray(reference, dtype=float),
                              np.asarray(other, dtype=float), variant='b')
    return float(result.statistic), float(result.pvalue)


def _top1(models: Sequence[str], values: np.ndarray, higher_is_better: bool) -> List[str]:
    best = values.max() if higher_is_better else values.min()
    return [m for m, v in zip(models, values) if v == best]


@dataclass
class TauRow:
    """Kendall τ between the clean ranking and one condition's ranking.

    ``condition`` is ``'<corruption>@<severity>'``, ``'<corruption>@mean'`` or
    ``'avg'``; ``severity`` is None for means; ``top1`` lists the best models (all
    tied ones); ``top1_changed`` says whether that set differs from clean's.
    """
    measure: str
    condition: str
    corruption: str
    severity: Optional[int]
    tau: float
    p_value: float
    top1: List[str]
    top1_changed: bool


@dataclass
class MeasureStability:
    """Rank stability of one measure (the task metric or the calibration error).

    Attributes:
        measure: its name; ``higher_is_better`` decides the top-1 model.
        clean_top1: best model(s) on clean data.
        conditions: one :class:`TauRow` per corruption x severity.
        corruption_means: one per corruption mean, then ``avg``.
        mean_tau_per_severity: mean τ over the corruptions at each severity (NaN
            values left out; None when none is defined).
        mean_tau: mean τ over all corrupted conditions.
        top1_changed_fraction: fraction of conditions whose top-1 differs from clean.
        top1_changed_fraction_means: the same over the corruption means (not avg).
    """
    measure: str
    higher_is_better: bool
    clean_top1: List[str]
    conditions: List[TauRow]
    corruption_means: List[TauRow]
    mean_tau_per_severity: Dict[int, Optional[float]]
    mean_tau: Optional[float]
    top1_changed_fraction: float
    top1_changed_fraction_means: float


@dataclass
class RankStability:
    """:class:`MeasureStability` per measure (task metric first)."""
    measures: Dict[str, MeasureStability]


def _nanmean(values: Sequence[float]) -> Optional[float]:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else None


def rank_stability(model_set: ModelSet) -> RankStability:
    """Kendall τ-b between the clean ranking of the models and their ranking under
    every condition, corruption mean and the Avg, for each measure of
    ``model_set`` (warns with 2 models)."""
    n_models = len(model_set.models)
    if n_models < 2:
        raise ValueError(f'rank stability needs at least 2 models, got {n_models}')
    if n_models == 2:
        warnings.warn(_TWO_MODELS_RANK, stacklevel=2)
    out: Dict[str, MeasureStability] = {}
    for measure in model_set.measures:
        higher = measure == model_set.metric
        clean = model_set.clean(measure)
        clean_top1 = _top1(model_set.models, clean, higher)

        def row(values: np.ndarray, name: str, corruption: str,
                severity: Optional[int]) -> TauRow:
            tau, p_value = kendall_tau(clean, values)
            top1 = _top1(model_set.models, values, higher)
            return TauRow(measure, name, corruption, severity, tau, p_value, top1,
                          set(top1) != set(clean_top1))

        conditions = [row(model_set.column(measure, c), c.key, c.corruption, c.severity)
                      for c in model_set.conditions[1:]]
        means = [row(model_set.corruption_mean(c, measure), f'{c}@mean', c, None)
                 for c in model_set.corruptions]
        means.append(row(model_set.corruption_mean(AVG, measure), AVG, AVG, None))
        per_severity = {s: _nanmean([r.tau for r in conditions if r.severity == s])
                        for s in model_set.severities}
        out[measure] = MeasureStability(
            measure=measure, higher_is_better=higher, clean_top1=clean_top1,
            conditions=conditions, corruption_means=means,
            mean_tau_per_severity=per_severity,
            mean_tau=_nanmean([r.tau for r in conditions]),
            top1_changed_fraction=float(np.mean([r.top1_changed for r in conditions])),
            top1_changed_fraction_means=float(np.mean([r.top1_changed for r in means[:-1]])))
    return RankStability(out)
