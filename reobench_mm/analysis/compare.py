"""Cross-model analysis of several robustness sweeps: rank stability and effective
robustness, and the files that report them.

The loader is :mod:`~reobench_mm.analysis.model_set`, the statistics are
:mod:`~reobench_mm.analysis.rank_stability` and
:mod:`~reobench_mm.analysis.effective_robustness`; this module puts them together
(:func:`compare_models`) and writes them (:func:`write_cross_model`).

Given the ``results.json`` of several models (same task and metric) it answers two
questions: does the clean ranking of the models survive the corruptions (Kendall τ-b per
condition, top-1 changes), and which models are more robust than their clean accuracy
predicts (effective robustness, with a bootstrap over models).

Typical use::

    from reobench_mm.analysis.compare import compare_models, write_cross_model
    comparison = compare_models(['satmae/results.json', 'scalemae/results.json',
                                 'croma/results.json'], n_bootstrap=1000, seed=0)
    files = write_cross_model(comparison, 'work_dirs/cross_model')

Files written by :func:`write_cross_model` (each atomically):

* ``cross_model.json`` -- every number (strict JSON, NaN as ``null``);
* ``cross_model.md`` -- the Markdown tables;
* ``model_conditions.csv`` -- one row per model x condition (clean, each
  corruption@severity, each corruption mean ``<corruption>@mean`` and ``avg``):
  the metric, its rank among the models (1 = best, ties averaged), and the same for
  ``calib/ECE`` when available (1 = lowest error);
* ``rank_stability.csv`` -- one row per measure x condition: τ, p-value, top-1
  models and whether top-1 differs from clean;
* ``effective_robustness.csv`` -- one row per fit x model: ID, OOD, predicted OOD,
  effective robustness and its bootstrap interval;
* ``rank_statistics.csv`` -- one row per rank statistic (any ``(measure, condition)``
  ranking against another, :mod:`~reobench_mm.analysis.rank_report`): τ, p-value and,
  where per-image statistics allow, its interval; ``rank_statistics_datasets.csv`` -- the
  mean τ over further datasets, when given;
* ``kendall_tau_vs_severity.png``, ``effective_robustness.png`` and, when a calibration
  number is present, ``rank_scatter.png`` (unless ``plots=False``);
* with the paired tests (:mod:`~reobench_mm.analysis.paired_models`):
  ``paired_differences.csv`` (one row per model x number: the difference to the
  reference, its interval, p-value, adjusted p-value, significance) and
  ``rank_flips.csv``;
* with groups (:mod:`~reobench_mm.analysis.groups`): ``groups.csv`` (group means and
  Mann–Whitney U tests), ``group_cells.csv`` (group means per condition,
  :mod:`~reobench_mm.analysis.group_cells`), ``group_relative_drop.png``,
  ``group_ece_ratio.png``, ``group_ece_ratio_by_corruption.png``; with
  drift files ``cka_ece_inflation.csv`` and ``cka_vs_ece_inflation.png``; with real
  shifts (:mod:`~reobench_mm.analysis.synthetic_real`) ``synthetic_vs_real.csv``,
  ``synthetic_vs_real.png`` and ``shift_drop_vs_delta_tp.png``.
"""
from __future__ import annotations

import json
import math
import os
import os.path as osp
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
from scipy import stats

from ..evaluation.keys import ECE_KEY
from ..fileio import atomic_write_text
from .effective_robustness import EffectiveRobustnessFit, check_space, effective_robustness
from .group_cells import group_cells_csv_rows
from .group_plots import write_group_plots
from .groups import (DEFAULT_DRAWS, CkaEceCorrelation, GroupAnalysis, Groupings,
                     analyze_groups, cka_csv_rows, cka_ece_correlation, groups_csv_rows,
                     groups_markdown)
from .model_set import ModelSet, load_model_set, load_shift_values
from .paired import DEFAULT_PERMUTATIONS
from .paired_models import (DEFAULT_ALPHA, PairedModels, blocks_not_paired, flips_csv_rows,
                            paired_csv_rows, paired_markdown, paired_models)
from .model_plots import (RANK_SCATTER_MEASURES, plot_effective_robustness,
                          plot_kendall_tau_vs_severity, plot_rank_scatter)
from .rank_report import (RankOptions, RankReport, datasets_csv_rows, rank_csv_rows,
                          rank_markdown, rank_report, rank_report_to_dict)
from .rank_stability import RankStability, TauRow, rank_stability
from .results import AVG, SHIFT
from .synthetic_real import (SyntheticVsReal, synthetic_real_csv_rows,
                             synthetic_real_markdown, synthetic_vs_real)
from .tables import column_title, csv_text, fmt_number, markdown_table

__all__ = [
    'CROSS_MODEL_FORMAT', 'CROSS_MODEL_FILES', 'CROSS_MODEL_PLOTS', 'CrossModelComparison',
    'compare_models', 'comparison_to_dict', 'cross_model_markdown',
    'model_conditions_csv_text', 'rank_stability_csv_text', 'effective_robustness_csv_text',
    'write_cross_model'
]

CROSS_MODEL_FORMAT = 'reobench_mm.cross_model/1'
CROSS_MODEL_FILES = ('cross_model.json', 'cross_model.md', 'model_conditions.csv',
                     'rank_stability.csv', 'effective_robustness.csv',
                     'rank_statistics.csv')
CROSS_MODEL_PLOTS = ('kendall_tau_vs_severity.png', 'effective_robustness.png',
                     'rank_scatter.png')


@dataclass
class CrossModelComparison:
    """Everything :func:`compare_models` computes."""
    model_set: ModelSet
    rank: RankStability
    fits: Dict[str, EffectiveRobustnessFit]
    shift_paths: Optional[Dict[str, str]] = None
    notes: List[str] = field(default_factory=list)
    #: the paired tests (None without per-image statistics, or when not asked for)
    paired: Optional[PairedModels] = None
    #: rank statistics: any (measure, condition) ranking against any other
    ranks: Optional[RankReport] = None
    #: groups of models (None without groups), CKA against ECE inflation (None without
    #: drift files), corruption drops against real shift drops (None without shifts)
    groups: Optional[GroupAnalysis] = None
    cka_ece: Optional[CkaEceCorrelation] = None
    synthetic_real: Optional[SyntheticVsReal] = None


def compare_models(paths: Sequence[str], *, names: Optional[Sequence[Optional[str]]] = None,
                   shift_paths: Optional[Sequence[str]] = None,
                   shift_names: Optional[Sequence[Optional[str]]] = None,
                   space: str = 'linear', n_bootstrap: int = 1000, seed: Optional[int] = 0,
                   confidence: float = 0.95,
                   common_conditions: bool = False, paired: bool = True,
                   permutations: int = DEFAULT_PERMUTATIONS,
                   alpha: float = DEFAULT_ALPHA,
                   rank_options: Optional[RankOptions] = None,
                   groups: Optional[Groupings] = None,
                   drift_paths: Optional[Any] = None,
                   drift_draws: int = DEFAULT_DRAWS) -> CrossModelComparison:
    """Load ``paths`` (and ``shift_paths``), then compute rank stability and
    effective robustness. See :func:`load_model_set` (its rules on names and conditions
    are those of every comparison; ``common_conditions=True`` restricts files of
    different conditions to the common ones instead of refusing them),
    :func:`load_shift_values`, :func:`rank_stability` and :func:`effective_robustness`.
    With ``paired`` (and per-image statistics for every model) also the paired tests of
    :func:`~reobench_mm.analysis.paired_models.paired_models` (``n_bootstrap`` image
    resamples, ``permutations``, false discovery rate ``alpha``); models evaluated on
    different images are then refused. The rank statistics of
    :func:`~reobench_mm.analysis.rank_report.rank_report` with ``rank_options`` (with
    ``paired``, their intervals over the images on the paired tests' resamples).
    With ``groups`` (``{grouping: {model: label}}``) the group statistics of
    :func:`~reobench_mm.analysis.groups.analyze_groups`; with ``drift_paths`` (one
    ``representation_drift.json`` per model in order, or ``{model: path}``) the CKA
    correlation of :func:`~reobench_mm.analysis.groups.cka_ece_correlation`
    (``drift_draws`` permutations, ``seed``); with real shifts (shift sets in every
    results file, or ``shift_paths``) :func:`~reobench_mm.analysis.synthetic_real.
    synthetic_vs_real` (``n_bootstrap`` resamples of the models, ``confidence``)."""
    check_space(space)
    model_set = load_model_set(paths, names, common_conditions=common_conditions)
    notes = list(model_set.notes)
    shift_values = shift_files = None
    if shift_paths:
        shift_values, shift_files, shift_notes = load_shift_values(model_set, shift_paths,
                                                                   shift_names)
        for note in shift_notes:
            warnings.warn(note, stacklevel=2)
        notes += shift_notes
    elif shift_names:
        raise ValueError('shift_names given without shift_paths')
    rank = rank_stability(model_set)
    fits: Dict[str, EffectiveRobustnessFit] = {}
    cleans = model_set.clean()
    if np.ptp(cleans) > 0:
        fits = effective_robustness(model_set, shift_values=shift_values, space=space,
                                    n_bootstrap=n_bootstrap, seed=seed, confidence=confidence)
    else:  # a side analysis: the paired tests and the rest go on without it
        notes.append(f'every model has the same clean {model_set.metric} '
                     f'({float(cleans[0]):.4g}): no effective-robustness line can be '
                     'fitted across them, so that fit is skipped')
    tests = None
    if paired:
        tests, why = paired_models(model_set, resamples=n_bootstrap, level=confidence,
                                   seed=seed or 0, permutations=permutations, alpha=alpha)
        if why:
            notes.append(why)
        elif blocks_not_paired(model_set):
            notes.append(blocks_not_paired(model_set))
    ranks = rank_report(model_set, rank_options, names=names,
                        common_conditions=common_conditions, resamples=n_bootstrap,
                        level=confidence, seed=seed or 0, intervals=tests is not None)
    notes += ranks.notes
    group_stats = analyze_groups(model_set, groups) if groups is not None else None
    cka = None if drift_paths is None else cka_ece_correlation(model_set, drift_paths,
                                                               drift_draws, seed)
    real = synthetic_vs_real(model_set, shift_values, resamples=n_bootstrap,
                             level=confidence, seed=seed)
    return CrossModelComparison(model_set, rank, fits, shift_files, notes, tests, ranks,
                                group_stats, cka, real)


def _number(value: Any) -> Optional[float]:
    value = float(value)
    return value if math.isfinite(value) else None


def _array(values: Optional[np.ndarray]) -> Optional[List[Optional[float]]]:
    return None if values is None else [_number(v) for v in values]


def _tau_row_dict(row: TauRow) -> Dict[str, Any]:
    return {'condition': row.condition, 'corruption': row.corruption,
            'severity': row.severity, 'tau': _number(row.tau),
            'p_value': _number(row.p_value), 'top1': row.top1,
            'top1_changed': row.top1_changed}


def comparison_to_dict(comparison: CrossModelComparison) -> Dict[str, Any]:
    """Every number of ``comparison`` as JSON-able data (NaN -> None)."""
    ms = comparison.model_set
    models = []
    for i, (name, path) in enumerate(zip(ms.models, ms.paths)):
        entry = {'name': name, 'path': path}
        for measure in ms.measures:
            entry[measure] = {
                c.key: _number(ms.values[measure][i, j])
                for j, c in enumerate(ms.conditions)}
            entry[measure].update({f'{c}@mean': _number(ms.corruption_mean(c, measure)[i])
                                   for c in ms.corruptions})
            entry[measure][AVG] = _number(ms.corruption_mean(AVG, measure)[i])
        entry[ms.metric]['delta_tp'] = _number(ms.delta_tp()[i])
        if comparison.shift_paths:
            entry['shift_path'] = comparison.shift_paths[name]
        models.append(entry)
    rank = {}
    for measure, st in comparison.rank.measures.items():
        rank[measure] = {
            'higher_is_better': st.higher_is_better, 'clean_top1': st.clean_top1,
            'mean_tau_per_severity': {str(s): v for s, v in st.mean_tau_per_severity.items()},
            'mean_tau': st.mean_tau, 'top1_changed_fraction': st.top1_changed_fraction,
            'top1_changed_fraction_means': st.top1_changed_fraction_means,
            'conditions': [_tau_row_dict(r) for r in st.conditions],
            'corruption_means': [_tau_row_dict(r) for r in st.corruption_means]}
    fits = {}
    for name, fit in comparison.fits.items():
        fits[name] = {
            'space': fit.space, 'slope': _number(fit.slope),
            'intercept': _number(fit.intercept), 'r_squared': _number(fit.r_squared),
            'n_bootstrap': fit.n_bootstrap, 'n_valid': fit.n_valid,
            'confidence': fit.confidence, 'seed': fit.seed,
            'models': {m: {'id': _number(fit.id_values[i]), 'ood': _number(fit.ood_values[i]),
                           'predicted_ood': _number(fit.predicted[i]),
                           'effective_robustness': _number(fit.residuals[i]),
                           'ci_low': None if fit.residual_low is None
                           else _number(fit.residual_low[i]),
                           'ci_high': None if fit.residual_high is None
                           else _number(fit.residual_high[i])}
                       for i, m in enumerate(fit.models)},
            'grid': _array(fit.grid), 'line': _array(fit.line),
            'band_low': _array(fit.band_low), 'band_high': _array(fit.band_high)}
    return {'format': CROSS_MODEL_FORMAT, 'task': ms.task, 'metric': ms.metric,
            'protocol': ms.protocol, 'calibration_key': ECE_KEY,
            'measures': ms.measures, 'conditions': [c.key for c in ms.conditions],
            'corruptions': ms.corruptions, 'severities': ms.severities,
            'dropped': ms.dropped, 'notes': comparison.notes, 'models': models,
            'rank_stability': rank, 'effective_robustness': fits,
            'paired': None if comparison.paired is None else comparison.paired.to_dict(),
            'rank_statistics': None if comparison.ranks is None
            else rank_report_to_dict(comparison.ranks),
            'groups': None if comparison.groups is None else comparison.groups.to_dict(),
            'cka_ece_inflation': None if comparison.cka_ece is None
            else comparison.cka_ece.to_dict(),
            'synthetic_vs_real': None if comparison.synthetic_real is None
            else comparison.synthetic_real.to_dict()}


# ----------------------------------------------------------------------------------
# Markdown and CSV
# ----------------------------------------------------------------------------------
def cross_model_markdown(comparison: CrossModelComparison) -> str:
    """The Markdown tables: models, rank stability per severity and per corruption,
    effective-robustness fits and per-model effective robustness."""
    ms, rank, fits = comparison.model_set, comparison.rank, comparison.fits
    metric = ms.metric
    lines = [f'# Cross-model robustness ({len(ms.models)} models)', '',
             f'Task: {ms.task or "–"}; metric: {metric} (0–100); protocol: {ms.protocol}. '
             f'Conditions of every model: {len(ms.corruptions)} corruptions, '
             f'severities {", ".join(map(str, ms.severities))}'
             + (' (restricted to those common to every file)' if ms.dropped else '') +
             ". Avg: the mean over the corruptions of each corruption's mean over its "
             'severities; ΔTP = Clean − Avg.', '']
    if comparison.notes:
        lines += [f'- {n}' for n in comparison.notes] + ['']

    header = ['Model', f'Clean {metric}', f'Avg {metric}', 'ΔTP']
    if ECE_KEY in ms.values:
        header += [f'Clean {ECE_KEY}', f'Avg {ECE_KEY}']
    rows = []
    for i, model in enumerate(ms.models):
        row = [model, fmt_number(ms.clean()[i]), fmt_number(ms.corruption_mean(AVG)[i]),
               fmt_number(ms.delta_tp()[i])]
        if ECE_KEY in ms.values:
            row += [fmt_number(ms.clean(ECE_KEY)[i], 4),
                    fmt_number(ms.corruption_mean(AVG, ECE_KEY)[i], 4)]
        rows.append(row)
    lines += ['## Models', ''] + markdown_table(header, rows) + ['']

    lines += ['## Rank stability', '',
              'Kendall τ-b between the models\' clean ranking and their ranking under each '
              'condition (1 = same order). Top-1 changed: fraction of conditions whose best '
              f'model differs from clean (highest {metric}; lowest {ECE_KEY}).', '']
    header = ['Severity'] + [f'Mean τ {m}' for m in rank.measures] + \
        [f'Top-1 changed {m}' for m in rank.measures]
    rows = []
    for s in ms.severities:
        changed = [np.mean([r.top1_changed for r in st.conditions if r.severity == s])
                   for st in rank.measures.values()]
        rows.append([str(s)] + [fmt_number(st.mean_tau_per_severity[s], 3)
                                for st in rank.measures.values()] +
                    [fmt_number(v, 2) for v in changed])
    rows.append(['all'] + [fmt_number(st.mean_tau, 3) for st in rank.measures.values()] +
                [fmt_number(st.top1_changed_fraction, 2) for st in rank.measures.values()])
    lines += markdown_table(header, rows) + ['']

    for measure, st in rank.measures.items():
        lines += [f'### τ per corruption: {measure}', '',
                  f'Clean top-1: {", ".join(st.clean_top1)}.', '']
        header = ['Corruption'] + [f'τ@{s}' for s in ms.severities] + \
            ['τ of mean', 'p', 'Top-1 of mean']
        rows = []
        by_condition = {r.condition: r for r in st.conditions}
        for mean_row in st.corruption_means:
            name = mean_row.corruption
            cells = [column_title(name) if name != AVG else 'Avg']
            for s in ms.severities:
                r = by_condition.get(f'{name}@{s}')
                cells.append(fmt_number(r.tau, 3) if r is not None else '–')
            cells += [fmt_number(mean_row.tau, 3), fmt_number(mean_row.p_value, 3),
                      ', '.join(mean_row.top1) + (' *' if mean_row.top1_changed else '')]
            rows.append(cells)
        lines += markdown_table(header, rows) + ['', '`*`: top-1 differs from clean.', '']

    if not fits:
        lines += ['## Effective robustness', '', 'Not fitted: every model has the same '
                  f'clean {metric} (see the notes).', '']
    else:
        lines += _fit_lines(comparison)
    if comparison.ranks is not None:
        lines += rank_markdown(comparison.ranks, ms)
    if comparison.paired is not None:
        lines += paired_markdown(comparison.paired, ms)
    if comparison.groups is not None or comparison.cka_ece is not None:
        lines += groups_markdown(comparison.groups, comparison.cka_ece)
    if comparison.synthetic_real is not None:
        lines += synthetic_real_markdown(comparison.synthetic_real)
    return '\n'.join(lines)


def _fit_lines(comparison: CrossModelComparison) -> List[str]:
    """The effective-robustness section: the fits and each model's residuals."""
    ms, fits, metric = comparison.model_set, comparison.fits, comparison.model_set.metric
    space = next(iter(fits.values())).space
    first = next(iter(fits.values()))
    lines = ['## Effective robustness', '',
              f'Least-squares line OOD = a·ID + b across models ({space} space), ID = clean '
              f'{metric}; OOD = the corruption mean (Avg: mean over corruptions; shift: clean '
              f'{metric} on the shifted dataset). Effective robustness = OOD − predicted OOD '
              f'({metric} points). Intervals: {100 * first.confidence:g}% percentile '
              f'bootstrap over models ({first.n_bootstrap} resamples, seed {first.seed}).', '']
    rows = [[column_title(n) if n not in (AVG, SHIFT) else n.capitalize(),
             fmt_number(f.slope, 4), fmt_number(f.intercept, 4), fmt_number(f.r_squared, 3),
             f'{f.n_valid}/{f.n_bootstrap}'] for n, f in fits.items()]
    lines += markdown_table(['Fit', 'Slope a', 'Intercept b', 'R²', 'Resamples used'], rows)
    lines += ['']
    header = ['Model', f'Clean {metric}'] + [
        column_title(n) if n not in (AVG, SHIFT) else n.capitalize() for n in fits]
    rows = []
    for i, model in enumerate(ms.models):
        cells = [model, fmt_number(ms.clean()[i])]
        for fit in fits.values():
            text = fmt_number(fit.residuals[i], 2, signed=True)
            if fit.residual_low is not None:
                text += f' [{fmt_number(fit.residual_low[i], 2, True)}, ' \
                        f'{fmt_number(fit.residual_high[i], 2, True)}]'
            cells.append(text)
        rows.append(cells)
    return lines + markdown_table(header, rows) + ['']


def model_conditionscsv_text(comparison: CrossModelComparison) -> str:
    """One row per model x condition (clean, corruption@severity, corruption@mean,
    avg): ``model, condition, corruption, severity, <metric>, <metric>_rank`` and,
    when available, ``calib/ECE, calib/ECE_rank`` (rank 1 = best, ties averaged)."""
    ms = comparison.model_set
    columns = [(c.key, c.corruption, c.severity, {m: ms.column(m, c) for m in ms.measures})
               for c in ms.conditions]
    columns += [(f'{c}@mean', c, None, {m: ms.corruption_mean(c, m) for m in ms.measures})
                for c in ms.corruptions]
    columns.append((AVG, AVG, None, {m: ms.corruption_mean(AVG, m) for m in ms.measures}))
    header = ['model', 'condition', 'corruption', 'severity']
    for measure in ms.measures:
        header += [measure, f'{measure}_rank']
    rows = []
    for i, model in enumerate(ms.models):
        for key, corruption, severity, values in columns:
            row = [model, key, corruption, severity]
            for measure in ms.measures:
                v = values[measure]
                ranks = stats.rankdata(-v if measure == ms.metric else v, method='average')
                row += [float(v[i]), float(ranks[i])]
            rows.append(row)
    return csv_text(header, rows)


def rank_stabilitycsv_text(comparison: CrossModelComparison) -> str:
    """One row per measure x condition: ``measure, condition, corruption, severity,
    tau, p_value, top1`` (``;``-joined), ``top1_changed`` (0/1)."""
    rows = []
    for measure, st in comparison.rank.measures.items():
        for r in st.conditions + st.corruption_means:
            rows.append([measure, r.condition, r.corruption, r.severity, r.tau, r.p_value,
                         ';'.join(r.top1), int(r.top1_changed)])
    return csv_text(['measure', 'condition', 'corruption', 'severity', 'tau', 'p_value',
                      'top1', 'top1_changed'], rows)


def effective_robustnesscsv_text(comparison: CrossModelComparison) -> str:
    """One row per fit x model: ``fit, space, model, id, ood, predicted_ood,
    effective_robustness, ci_low, ci_high`` (empty CI without usable resamples)."""
    rows = []
    for name, fit in comparison.fits.items():
        for i, model in enumerate(fit.models):
            rows.append([name, fit.space, model, fit.id_values[i], fit.ood_values[i],
                         fit.predicted[i], fit.residuals[i],
                         None if fit.residual_low is None else fit.residual_low[i],
                         None if fit.residual_high is None else fit.residual_high[i]])
    return csv_text(['fit', 'space', 'model', 'id', 'ood', 'predicted_ood',
                      'effective_robustness', 'ci_low', 'ci_high'], rows)


def write_cross_model(comparison: CrossModelComparison, out_dir: str,
                      plots: bool = True) -> Dict[str, str]:
    """Write the files listed in the module docstring into ``out_dir`` (each
    atomically); returns ``{file name: path}``."""
    os.makedirs(out_dir, exist_ok=True)
    path = lambda name: osp.join(out_dir, name)  # noqa: E731
    files = {
        'cross_model.json': atomic_write_text(
            path('cross_model.json'),
            json.dumps(comparison_to_dict(comparison), indent=2, allow_nan=False,
                       ensure_ascii=False) + '\n'),
        'cross_model.md': atomic_write_text(path('cross_model.md'),
                                            cross_model_markdown(comparison)),
        'model_conditions.csv': atomic_write_text(path('model_conditions.csv'),
                                                  model_conditionscsv_text(comparison)),
        'rank_stability.csv': atomic_write_text(path('rank_stability.csv'),
                                                rank_stabilitycsv_text(comparison)),
        'effective_robustness.csv': atomic_write_text(
            path('effective_robustness.csv'), effective_robustnesscsv_text(comparison)),
    }
    if comparison.paired is not None:
        for name, rows in (('paired_differences.csv', paired_csv_rows(comparison.paired)),
                           ('rank_flips.csv', flips_csv_rows(comparison.paired))):
            files[name] = atomic_write_text(path(name), csv_text(*rows))
    for name, part, csv_rows in (
            ('groups.csv', comparison.groups, groups_csv_rows),
            ('group_cells.csv', comparison.groups and comparison.groups.cells,
             group_cells_csv_rows),
            ('cka_ece_inflation.csv', comparison.cka_ece, cka_csv_rows),
            ('synthetic_vs_real.csv', comparison.synthetic_real, synthetic_real_csv_rows)):
        if part is not None:
            files[name] = atomic_write_text(path(name), csv_text(*csv_rows(part)))
    ranks = comparison.ranks
    if ranks is not None:
        files['rank_statistics.csv'] = atomic_write_text(path('rank_statistics.csv'),
                                                         csv_text(*rank_csv_rows(ranks)))
        if ranks.average is not None:
            files['rank_statistics_datasets.csv'] = atomic_write_text(
                path('rank_statistics_datasets.csv'),
                csv_text(*datasets_csv_rows(ranks.average)))
    if plots:
        files.update(write_group_plots(out_dir, comparison.model_set.corruptions,
                                       comparison.groups, comparison.cka_ece,
                                       comparison.synthetic_real))
        files['kendall_tau_vs_severity.png'] = plot_kendall_tau_vs_severity(
            comparison.rank, comparison.model_set, path('kendall_tau_vs_severity.png'))
        if comparison.fits:
            files['effective_robustness.png'] = plot_effective_robustness(
                comparison.fits, comparison.model_set, path('effective_robustness.png'))
        if ranks is not None and any(m in comparison.model_set.values
                                     for m in RANK_SCATTER_MEASURES):
            files['rank_scatter.png'] = plot_rank_scatter(
                comparison.model_set, path('rank_scatter.png'), ranks.scatter_conditions)
    return files
