"""Rank statistics in the cross-model comparison: what to compute
(:class:`RankOptions`), computing it for a loaded model set (:func:`rank_report`: the
rows of :func:`~reobench_mm.analysis.rank_stability.rank_statistics`, their bootstrap
intervals over the images where the per-image statistics allow
(:mod:`~reobench_mm.analysis.rank_intervals`), the mean τ over further datasets of the
same models), and its parts of ``cross_model.json``, ``cross_model.md``,
``rank_statistics.csv`` and ``rank_statistics_datasets.csv``.

Convention of every row: Kendall τ-b between two rankings of the models, rank 1 = the
best model (highest task metric, lowest calibration error;
:func:`~reobench_mm.analysis.rank_stability.higher_is_better`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..evaluation.functional.bootstrap import DEFAULT_LEVEL, DEFAULT_RESAMPLES
from .model_set import SEVERITY_MEAN_PREFIX, ModelSet, load_model_set
from .rank_intervals import rank_intervals
from .rank_stability import (DatasetAverage, RankStatistics, RankTau, average_over_datasets,
                             rank_statistics)
from .results import AVG
from .tables import column_title, fmt_number, markdown_table

__all__ = ['RANK_CONVENTION', 'RankOptions', 'RankReport', 'rank_report',
           'rank_report_to_dict', 'rank_markdown', 'rank_csv_rows', 'datasets_csv_rows']

RANK_CONVENTION = ('Kendall τ-b between two rankings of the models, rank 1 = best (highest '
                   'task metric and acc@90cov; lowest calibration error: ECE, aECE, MCE, '
                   'NLL, Brier, cwECE, AURC, eAURC); τ > 0: the two rankings agree')


@dataclass
class RankOptions:
    """What the rank statistics of a comparison compute besides the standard rows.

    Attributes:
        references, targets: ``(measure, condition)`` rankings; every reference is set
            against every target (the ``custom`` rows).
        severity_pairs: the ``(k, m)`` of the severity rows (default: every pair).
        scatter_conditions: the conditions of ``rank_scatter.png``.
        datasets: further datasets of the same models: one list of results files per
            dataset, named as the compared files are (the same ``names``, in order).
        dataset_labels: one label per dataset, the compared one first (default
            ``dataset 1``, ...).
    """
    references: Sequence[Tuple[str, str]] = ()
    targets: Sequence[Tuple[str, str]] = ()
    severity_pairs: Optional[Sequence[Tuple[int, int]]] = None
    scatter_conditions: Sequence[str] = ('clean', AVG)
    datasets: Sequence[Sequence[str]] = ()
    dataset_labels: Optional[Sequence[str]] = None


@dataclass
class RankReport:
    """:func:`rank_report`: the rows, the mean over datasets (None without further
    datasets), the conditions of the scatter, the interval settings (None without
    intervals) and remarks."""
    statistics: RankStatistics
    average: Optional[DatasetAverage]
    scatter_conditions: List[str]
    intervals: Optional[Dict[str, Any]] = None
    notes: List[str] = field(default_factory=list)


def rank_report(model_set: ModelSet, options: Optional[RankOptions] = None, *,
                names: Optional[Sequence[Optional[str]]] = None,
                common_conditions: bool = False, resamples: int = DEFAULT_RESAMPLES,
                level: float = DEFAULT_LEVEL, seed: int = 0,
                intervals: bool = True) -> RankReport:
    """The rank statistics of ``model_set`` with ``options``; with ``intervals`` (and
    per-image statistics for every model) the bootstrap intervals over the images of
    the rows that have them (``resamples``, ``level``, ``seed``: those of the paired
    tests, so the shared rows get the same intervals). Further datasets are loaded
    with ``names`` and ``common_conditions`` as the compared files were.

    Raises:
        ValueError: a bad measure, condition or severity pair; further datasets of
            other models (named).
    """
    options = options or RankOptions()
    statistics = rank_statistics(model_set, severity_pairs=options.severity_pairs,
                                 references=options.references, targets=options.targets)
    notes: List[str] = []
    for condition in options.scatter_conditions:
        model_set.values_at(model_set.metric, condition)  # an unknown one is an error
    average = None
    if options.datasets:
        others = [load_model_set(paths, names, common_conditions=common_conditions)
                  for paths in options.datasets]
        labels = options.dataset_labels
        if labels is not None and len(labels) != len(others) + 1:
            raise ValueError(f'{len(labels)} dataset labels for {len(others) + 1} datasets '
                             '(the compared one and each further one); give one per dataset')
        average = average_over_datasets([model_set] + others, labels,
                                        severity_pairs=options.severity_pairs,
                                        references=options.references,
                                        targets=options.targets)
        notes += [f'{label}: {note}' for label, ms in zip(average.labels[1:], others)
                  for note in ms.notes] + average.notes
    settings = None
    if intervals and resamples > 0:
        settings, why = rank_intervals(model_set, statistics, resamples=resamples,
                                       level=level, seed=seed)
        if why:
            notes.append(why)
    return RankReport(statistics, average, list(options.scatter_conditions), settings, notes)


def _side(measure: str, condition: str) -> Dict[str, str]:
    return {'measure': measure, 'condition': condition}


def _number(value: float) -> Optional[float]:
    return float(value) if value is not None and math.isfinite(value) else None


def rank_report_to_dict(report: RankReport) -> Dict[str, Any]:
    """The ``rank_statistics`` block of ``cross_model.json`` (NaN as None)."""
    st = report.statistics
    out: Dict[str, Any] = {
        'convention': RANK_CONVENTION, 'n_models': st.n_models,
        'measures': {m: {'higher_is_better': h} for m, h in st.measures.items()},
        'severity_pairs': [list(p) for p in st.severity_pairs],
        'scatter_conditions': report.scatter_conditions, 'intervals': report.intervals,
        'rows': [{'group': r.group, 'reference': _side(*r.reference),
                  'target': _side(*r.target), 'tau': _number(r.tau),
                  'p_value': _number(r.p_value), 'interval': r.interval} for r in st.rows],
        'datasets': None}
    if report.average is not None:
        av = report.average
        out['datasets'] = {
            'labels': av.labels, 'models': av.models, 'notes': av.notes,
            'rows': [{'group': r.group, 'reference': _side(*r.key[:2]),
                      'target': _side(*r.key[2:]), 'tau': _number(r.tau),
                      'n_defined': r.n_defined,
                      'per_dataset': {lb: _number(v) for lb, v in zip(av.labels, r.per_dataset)}}
                     for r in av.rows]}
    return out


def _tau_cell(row: Optional[RankTau]) -> str:
    if row is None:
        return '–'
    text = fmt_number(row.tau, 3)
    if row.interval:
        text += f' [{fmt_number(row.interval[0], 2)}, {fmt_number(row.interval[1], 2)}]'
    return text


def _title(condition: str) -> str:
    if condition == AVG:
        return 'Avg'
    name, _, rest = condition.partition('@')
    if name == SEVERITY_MEAN_PREFIX:
        return f'sev {rest}'
    return 'Clean' if condition == 'clean' else column_title(name) + \
        (' mean' if rest == 'mean' else f'@{rest}')


def rank_markdown(report: RankReport, model_set: ModelSet) -> List[str]:
    """The section ``## Rank statistics`` of ``cross_model.md``."""
    ms, st = model_set, report.statistics
    by_key = {(r.group, r.key): r for r in st.rows}
    metric = ms.metric
    summary = ['clean'] + [f'{SEVERITY_MEAN_PREFIX}@{s}' for s in ms.full_severities] + [AVG]
    ranked = list(st.measures)
    calibration = [m for m in ranked if m != metric]
    level = '' if not report.intervals else \
        f' Brackets: {100 * report.intervals["level"]:g} % bootstrap interval over the ' \
        f'{report.intervals["images"]} images ({report.intervals["resamples"]} resamples); ' \
        'none where the per-image statistics do not hold a measure (e.g. cwECE, eAURC).'
    lines = ['## Rank statistics', '',
             f'{RANK_CONVENTION}. sev k: the mean over the corruptions at severity k. '
             f'Every row, with its p-value, is in `rank_statistics.csv`.{level}', '']

    def row_of(group: str, ref: Tuple[str, str], tgt: Tuple[str, str]) -> Optional[RankTau]:
        return by_key.get((group, (*ref, *tgt)))

    if calibration:
        lines += [f'### Clean {metric} → calibration', '',
                  f'The ranking by clean {metric} against the ranking by each calibration '
                  'number (τ > 0: the more accurate models are the better calibrated).', '']
        rows = []
        for m in calibration:
            group = 'metric_to_ece' if m == ms.calibration_key else 'metric_to_calibration'
            rows.append([m] + [_tau_cell(row_of(group, (metric, 'clean'), (m, c)))
                               for c in summary])
        lines += markdown_table(['Ranking by'] + [_title(c) for c in summary], rows) + ['']
    if ms.calibration_key in st.measures:
        key = ms.calibration_key
        lines += [f'### Clean {metric} → {key} per corruption', '']
        rows = []
        for name in ms.corruptions + [AVG]:
            cells = [column_title(name) if name != AVG else 'Avg']
            for s in ms.severities:
                r = row_of('metric_to_ece', (metric, 'clean'), (key, f'{name}@{s}'))
                cells.append(_tau_cell(r) if name != AVG else '')
            target = AVG if name == AVG else f'{name}@mean'
            cells.append(_tau_cell(row_of('metric_to_ece', (metric, 'clean'), (key, target))))
            rows.append(cells)
        lines += markdown_table(['Corruption'] + [f'τ@{s}' for s in ms.severities] +
                                ['τ of mean'], rows) + ['']
    lines += ['### Clean → shifted, per measure', '',
              'Each measure\'s clean ranking against its ranking under the shift '
              '(per condition in `rank_statistics.csv`).', '']
    shifted = summary[1:]
    rows = [[m] + [_tau_cell(row_of('clean_to_shifted', (m, 'clean'), (m, c)))
                   for c in shifted] for m in ranked]
    lines += markdown_table(['Measure'] + [_title(c) for c in shifted], rows) + ['']
    if st.severity_pairs:
        lines += ['### Severity k → severity m', '',
                  'The ranking at severity k (mean over corruptions) against the ranking '
                  'at severity m, per measure.', '']
        rows = [[f'{k} → {s}'] + [_tau_cell(row_of(
            'severity_pairs', (m, f'{SEVERITY_MEAN_PREFIX}@{k}'),
            (m, f'{SEVERITY_MEAN_PREFIX}@{s}'))) for m in ranked]
            for k, s in st.severity_pairs]
        lines += markdown_table(['Severities'] + ranked, rows) + ['']
    custom = [r for r in st.rows if r.group == 'custom']
    if custom:
        lines += ['### Asked rankings', '']
        rows = [[f'{r.reference[0]} : {r.reference[1]}', f'{r.target[0]} : {r.target[1]}',
                 _tau_cell(r), fmt_number(r.p_value, 3)] for r in custom]
        lines += markdown_table(['Reference', 'Target', 'τ', 'p'], rows) + ['']
    if report.average is not None:
        lines += _average_markdown(report.average, summary)
    return lines


def _average_markdown(average: DatasetAverage, summary: Sequence[str]) -> List[str]:
    """The mean τ over datasets: the rows whose target is a summary condition, a
    severity pair or asked (every row in ``rank_statistics_datasets.csv``)."""
    shown = [r for r in average.rows if r.group in ('severity_pairs', 'custom')
             or r.key[3] in summary]
    lines = [f'### Mean over {len(average.labels)} datasets', '',
             f'τ per dataset ({", ".join(average.labels)}; the same {len(average.models)} '
             'models, matched by name) and their mean over the datasets where it is '
             'defined (n). Rows whose target is a single condition or a corruption mean '
             'are in `rank_statistics_datasets.csv`.', '']
    rows = [[f'{r.key[0]} : {_title(r.key[1])}', f'{r.key[2]} : {_title(r.key[3])}']
            + [fmt_number(v, 3) for v in r.per_dataset]
            + [f'{fmt_number(r.tau, 3)} ({r.n_defined})'] for r in shown]
    lines += markdown_table(['Reference', 'Target'] + [f'τ {lb}' for lb in average.labels]
                            + ['Mean τ (n)'], rows, align_left=2) + ['']
    if average.notes:
        lines += [f'- {n}' for n in average.notes] + ['']
    return lines


def rank_csv_rows(report: RankReport) -> Tuple[List[str], List[list]]:
    """``rank_statistics.csv``: one row per :class:`RankTau`."""
    header = ['group', 'reference_measure', 'reference_condition', 'target_measure',
              'target_condition', 'tau', 'p_value', 'ci_low', 'ci_high', 'n_models']
    rows = [[r.group, *r.key, r.tau, r.p_value, *(r.interval or [None, None]),
             report.statistics.n_models] for r in report.statistics.rows]
    return header, rows


def datasets_csv_rows(average: DatasetAverage) -> Tuple[List[str], List[list]]:
    """``rank_statistics_datasets.csv``: one row per averaged row, τ per dataset."""
    header = ['group', 'reference_measure', 'reference_condition', 'target_measure',
              'target_condition'] + [f'tau {lb}' for lb in average.labels] + \
        ['mean_tau', 'n_defined']
    rows = [[r.group, *r.key, *r.per_dataset, r.tau, r.n_defined] for r in average.rows]
    return header, rows
