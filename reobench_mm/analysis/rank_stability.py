"""Rank stability across models: does the ranking of the models on clean data survive
the corruptions?

For every condition (corruption x severity), every corruption mean and the overall Avg,
Kendall's τ-b (:func:`scipy.stats.kendalltau`, with its p-value) between the models'
clean values and their values under that condition, for the task metric and, when every
model reports it in every condition, for the calibration error ``calib/ECE``. Summaries:
mean τ per severity and the fraction of conditions whose best model (top-1; the set of
tied best models) differs from the clean one.

Rank statistics beyond clean → shifted on one measure (:func:`rank_tau`,
:func:`rank_statistics`): Kendall τ-b between the ranking of the models by any
*reference* ``(measure, condition)`` and their ranking by any *target*
``(measure, condition)``, with the measures the task metric and every calibration
number the files carry and the conditions those of
:meth:`~reobench_mm.analysis.model_set.ModelSet.condition_keys`. Orientation: τ compares
RANKINGS with rank 1 = the best model, where best is the highest task metric (and
``acc@90cov``) and the lowest error (ECE, aECE, MCE, NLL, Brier, cwECE, AURC, eAURC); so
clean mIoU → shifted ECE is positive when the most accurate models are also the best
calibrated (lowest ECE). The signed ``gap`` has no better direction and is not ranked. Between two
measures of one orientation (clean ECE → shifted ECE) this is τ between the values, as
:func:`rank_stability` computes it.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

from .model_set import SEVERITY_MEAN_PREFIX, ModelSet
from .results import AVG

__all__ = ['kendall_tau', 'TauRow', 'MeasureStability', 'RankStability', 'rank_stability',
           'HIGHER_IS_BETTER_CALIBRATION', 'UNRANKED_CALIBRATION', 'higher_is_better',
           'rank_measures', 'model_ranks', 'RankTau', 'rank_tau', 'RankStatistics',
           'rank_statistics', 'parse_measure_condition', 'parse_severity_pair',
           'RANK_GROUPS', 'AveragedRankTau', 'DatasetAverage', 'average_over_datasets']

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


# ----------------------------------------------------------------------------------
# Rank statistics: any (measure, condition) ranking against any other
# ----------------------------------------------------------------------------------
#: Calibration metric names (the part after ``calib/``) ranked with higher = better.
HIGHER_IS_BETTER_CALIBRATION = ('acc@90cov', )
#: Calibration metric names that are not ranked: the signed gap (confidence minus
#: accuracy) has no better direction.
UNRANKED_CALIBRATION = ('gap', )
#: The families of rows of :func:`rank_statistics` -> what they hold.
RANK_GROUPS = {
    'metric_to_ece': 'clean task metric → calibration error under each condition',
    'metric_to_calibration': 'clean task metric → each calibration number (clean, '
                             'sev@k, avg)',
    'clean_to_shifted': 'each measure clean → the same measure under sev@k, each '
                        'corruption mean and avg',
    'severity_pairs': 'each measure at severity k → the same measure at severity m '
                      '(sev@k → sev@m)',
    'custom': 'the asked references × targets',
}


def higher_is_better(measure: str, metric: str) -> bool:
    """Whether a higher value of ``measure`` is better: the task metric ``metric`` and
    :data:`HIGHER_IS_BETTER_CALIBRATION`; every other calibration number is an error
    (lower is better).

    Raises:
        ValueError: ``measure`` is :data:`UNRANKED_CALIBRATION` (``calib/gap``).
    """
    if measure == metric:
        return True
    name = measure.split('/', 1)[-1]
    if name in UNRANKED_CALIBRATION:
        raise ValueError(f'{measure} is signed (mean confidence minus accuracy): neither '
                         'direction is better, so it ranks no models; rank by another '
                         'measure (the task metric, calib/ECE, calib/NLL, ...)')
    return name in HIGHER_IS_BETTER_CALIBRATION


def rank_measures(model_set: ModelSet) -> List[str]:
    """The measures models can be ranked by: the task metric, then every calibration
    number of ``model_set`` but the unranked ones (:data:`UNRANKED_CALIBRATION`)."""
    return [m for m in model_set.all_measures
            if m.split('/', 1)[-1] not in UNRANKED_CALIBRATION or m == model_set.metric]


def model_ranks(model_set: ModelSet, measure: str, condition: str) -> np.ndarray:
    """The rank of each model by ``measure`` under ``condition``
    (:meth:`~reobench_mm.analysis.model_set.ModelSet.values_at`): 1 = best (highest
    metric, lowest error; :func:`higher_is_better`), ties given their mean rank
    (``scipy.stats.rankdata``, ``method='average'``)."""
    higher = higher_is_better(measure, model_set.metric)
    values = model_set.values_at(measure, condition)
    return stats.rankdata(-values if higher else values, method='average')


@dataclass
class RankTau:
    """Kendall τ-b between two rankings of the models.

    Attributes:
        reference, target: the ``(measure, condition)`` of each ranking.
        tau, p_value: :func:`kendall_tau` of the two rankings (rank 1 = best); NaN when
            one ranking is constant.
        group: the family of rows (:data:`RANK_GROUPS`).
        interval: a bootstrap interval over the test images, when computed (None here;
            see :mod:`~reobench_mm.analysis.paired_models` for those that have one).
    """
    reference: Tuple[str, str]
    target: Tuple[str, str]
    tau: float
    p_value: float
    group: str = 'custom'
    interval: Optional[List[float]] = None

    @property
    def key(self) -> Tuple[str, str, str, str]:
        """``(reference measure, reference condition, target measure, target
        condition)``: what the row compares, the same in every dataset."""
        return (*self.reference, *self.target)


def rank_tau(model_set: ModelSet, reference: Tuple[str, str],
             target: Tuple[str, str], group: str = 'custom') -> RankTau:
    """Kendall τ-b between the ranking of the models by ``reference`` and by
    ``target``, each ``(measure, condition)``: e.g. ``rank_tau(ms, ('mIoU', 'clean'),
    ('calib/ECE', 'gaussian_noise@5'))`` is positive when the models best on clean
    mIoU are also the best calibrated (lowest ECE) under Gaussian noise at severity 5.
    Rankings per :func:`model_ranks` (1 = best).

    Raises:
        ValueError: an unknown or unranked measure, or an unknown condition.
    """
    if group not in RANK_GROUPS:
        raise ValueError(f'unknown group {group!r}; valid: {list(RANK_GROUPS)}')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # a constant ranking: NaN, reported as undefined
        tau, p_value = kendall_tau(model_ranks(model_set, *reference),
                                   model_ranks(model_set, *target))
    return RankTau(tuple(reference), tuple(target), tau, p_value, group)


def parse_measure_condition(text: str) -> Tuple[str, str]:
    """``'mIoU:clean'``, ``'calib/ECE:gaussian_noise@5'`` -> ``(measure, condition)``
    (split at the last ``:``).

    Raises:
        ValueError: no ``:``, or an empty part.
    """
    measure, sep, condition = str(text).rpartition(':')
    if not sep or not measure or not condition:
        raise ValueError(f'a ranking is MEASURE:CONDITION (e.g. mIoU:clean, '
                         f'calib/ECE:avg, calib/NLL:sev@5), got {text!r}')
    return measure, condition


def parse_severity_pair(text: str) -> Tuple[int, int]:
    """``'3:5'`` -> ``(3, 5)``.

    Raises:
        ValueError: not two integers separated by ``:``.
    """
    first, sep, second = str(text).partition(':')
    try:
        if not sep:
            raise ValueError
        return int(first), int(second)
    except ValueError:
        raise ValueError(f'a severity pair is K:M (e.g. 3:5), got {text!r}') from None


@dataclass
class RankStatistics:
    """The rows of :func:`rank_statistics` and what they were built from.

    Attributes:
        rows: every :class:`RankTau` (standard rows by group, then the custom ones).
        measures: the ranked measures, each with ``higher_is_better``.
        severity_pairs: the ``(k, m)`` of the ``severity_pairs`` rows.
        n_models: the number of ranked models.
    """
    rows: List[RankTau]
    measures: Dict[str, bool]
    severity_pairs: List[Tuple[int, int]]
    n_models: int

    def get(self, reference: Tuple[str, str], target: Tuple[str, str]) -> RankTau:
        """The row of ``reference`` → ``target`` (KeyError if absent)."""
        for row in self.rows:
            if row.reference == tuple(reference) and row.target == tuple(target):
                return row
        raise KeyError(f'no rank row {reference} → {target}')


def rank_statistics(model_set: ModelSet, *,
                    severity_pairs: Optional[Sequence[Tuple[int, int]]] = None,
                    references: Sequence[Tuple[str, str]] = (),
                    targets: Sequence[Tuple[str, str]] = ()) -> RankStatistics:
    """The standard table of rank statistics (:data:`RANK_GROUPS`) and the asked rows.

    Standard rows, for the measures of :func:`rank_measures`:

    * ``metric_to_ece``: clean metric → ``calibration_key`` (``calib/ECE``) under every
      condition of :meth:`~reobench_mm.analysis.model_set.ModelSet.condition_keys`;
    * ``metric_to_calibration``: clean metric → every other calibration number under
      clean, each ``sev@k`` and ``avg``;
    * ``clean_to_shifted``: every measure, clean → the same measure under every other
      condition (for the task metric and ``calibration_key`` the τ of
      :func:`rank_stability`; ``calib/NLL``, ``calib/eAURC``, ... only here);
    * ``severity_pairs``: every measure, ``sev@k`` → ``sev@m`` for ``severity_pairs``
      (default: every pair ``k < m`` of the severities every corruption has).

    ``references`` × ``targets`` (each ``(measure, condition)``) add the ``custom``
    rows, every reference against every target.

    Raises:
        ValueError: fewer than 2 models, a severity not of every corruption, or an
            unknown measure or condition (named).
    """
    ms = model_set
    if len(ms.models) < 2:
        raise ValueError(f'rank statistics need at least 2 models, got {len(ms.models)}')
    if bool(references) != bool(targets):
        raise ValueError('give both references and targets (each reference is ranked '
                         'against each target), or neither')
    measures = rank_measures(ms)
    severities = ms.full_severities
    if severity_pairs is None:
        severity_pairs = [(k, m) for i, k in enumerate(severities) for m in severities[i + 1:]]
    pairs = [(int(k), int(m)) for k, m in severity_pairs]
    bad = sorted({s for pair in pairs for s in pair} - set(severities))
    if bad:
        raise ValueError(f'severities {bad} of the severity pairs are not evaluated for '
                         f'every corruption; valid: {severities}')
    clean = ('clean', )
    keys = ms.condition_keys()
    summary = ['clean'] + [f'{SEVERITY_MEAN_PREFIX}@{s}' for s in severities] + [AVG]
    reference = (ms.metric, 'clean')
    rows: List[RankTau] = []
    if ms.calibration_key in measures:
        rows += [rank_tau(ms, reference, (ms.calibration_key, c), 'metric_to_ece')
                 for c in keys]
    others = [m for m in measures if m not in (ms.metric, ms.calibration_key)]
    rows += [rank_tau(ms, reference, (m, c), 'metric_to_calibration')
             for m in others for c in summary]
    rows += [rank_tau(ms, (m, 'clean'), (m, c), 'clean_to_shifted')
             for m in measures for c in keys if c not in clean]
    rows += [rank_tau(ms, (m, f'{SEVERITY_MEAN_PREFIX}@{k}'),
                      (m, f'{SEVERITY_MEAN_PREFIX}@{s}'), 'severity_pairs')
             for m in measures for k, s in pairs]
    rows += [rank_tau(ms, tuple(r), tuple(t)) for r in references for t in targets]
    return RankStatistics(rows, {m: higher_is_better(m, ms.metric) for m in measures},
                          pairs, len(ms.models))


# ----------------------------------------------------------------------------------
# τ averaged over datasets
# ----------------------------------------------------------------------------------
@dataclass
class AveragedRankTau:
    """One row of rank statistics over several datasets.

    Attributes:
        key: ``(reference measure, reference condition, target measure, target
            condition)``.
        group: its family (:data:`RANK_GROUPS`).
        per_dataset: τ in each dataset (NaN where undefined), in the datasets' order.
        tau: the mean of the defined ``per_dataset`` values (NaN when none is).
        n_defined: how many datasets' τ enter the mean.
    """
    key: Tuple[str, str, str, str]
    group: str
    per_dataset: List[float]
    tau: float
    n_defined: int


@dataclass
class DatasetAverage:
    """:func:`average_over_datasets`: the datasets, the models they share and the rows
    every dataset has (rows missing from some dataset are named in ``notes``)."""
    labels: List[str]
    models: List[str]
    rows: List[AveragedRankTau]
    notes: List[str]


def average_over_datasets(model_sets: Sequence[ModelSet],
                          labels: Optional[Sequence[str]] = None, *,
                          severity_pairs: Optional[Sequence[Tuple[int, int]]] = None,
                          references: Sequence[Tuple[str, str]] = (),
                          targets: Sequence[Tuple[str, str]] = ()) -> DatasetAverage:
    """The mean τ per row of :func:`rank_statistics` over several datasets: the same
    models (matched by name; each dataset's τ compares its own two rankings) evaluated
    on different datasets. A row is averaged over the datasets where its τ is defined
    (``n_defined`` says how many); rows some dataset lacks (a condition or calibration
    number it does not have) are left out and named in the notes.

    Raises:
        ValueError: fewer than 2 datasets, labels not one per dataset or repeated, or
            model names that differ between the datasets (the differences named).
    """
    if len(model_sets) < 2:
        raise ValueError(f'averaging over datasets needs at least 2, got {len(model_sets)}')
    labels = [str(x) for x in labels] if labels is not None else \
        [f'dataset {i + 1}' for i in range(len(model_sets))]
    if len(labels) != len(model_sets) or len(set(labels)) != len(labels):
        raise ValueError(f'give one unique label per dataset: {len(model_sets)} datasets, '
                         f'labels {labels}')
    first = set(model_sets[0].models)
    for label, ms in zip(labels[1:], model_sets[1:]):
        if set(ms.models) != first:
            raise ValueError(
                f'the datasets must hold the same models (matched by name): {labels[0]} '
                f'has {sorted(first)}, {label} has {sorted(ms.models)} (only in '
                f'{labels[0]}: {sorted(first - set(ms.models))}; only in {label}: '
                f'{sorted(set(ms.models) - first)}); name them alike (--names)')
    tables = [{r.key: r for r in rank_statistics(ms, severity_pairs=severity_pairs,
                                                 references=references,
                                                 targets=targets).rows}
              for ms in model_sets]
    rows, notes = [], []
    for key, row in tables[0].items():
        lacking = [lb for lb, t in zip(labels, tables) if key not in t]
        if lacking:
            notes.append(f'{key[0]}:{key[1]} → {key[2]}:{key[3]} is not in '
                         f'{", ".join(lacking)}: not averaged')
            continue
        values = [t[key].tau for t in tables]
        defined = [v for v in values if math.isfinite(v)]
        rows.append(AveragedRankTau(key, row.group, values,
                                    float(np.mean(defined)) if defined else math.nan,
                                    len(defined)))
    for label, table in zip(labels[1:], tables[1:]):
        extra = [k for k in table if k not in tables[0]]
        if extra:
            notes.append(f'{len(extra)} rows only in {label} (not in {labels[0]}): not '
                         'averaged')
    return DatasetAverage(labels, list(model_sets[0].models), rows, notes)
