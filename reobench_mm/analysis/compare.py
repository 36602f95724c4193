"""Cross-model analysis of several robustness sweeps: rank stability and effective
robustness.

Given the ``results.json`` of several models (same task and metric), this module
answers two questions:

* **Rank stability** -- does the ranking of the models on clean data survive the
  corruptions? For every condition (corruption x severity), every corruption mean
  and the overall Avg, Kendall's τ-b (:func:`scipy.stats.kendalltau`, with its
  p-value) between the models' clean values and their values under that condition,
  for the task metric and, when every model reports it in every condition, for the
  calibration error ``calib/ECE``. Summaries: mean τ per severity and the fraction
  of conditions whose best model (top-1; the set of tied best models) differs from
  the clean one.
* **Effective robustness** (Taori et al., 2020; as plotted by the EarthShift study)
  -- a line ``OOD = a * ID + b`` is fitted across models by least squares, with
  ``ID`` the clean metric and ``OOD`` a per-corruption mean (one fit per corruption
  and one for the overall Avg) and, when a second set of results evaluated on a
  shifted dataset is given, that set's clean metric (fit ``'shift'``, models paired
  by name). A model's effective robustness is ``OOD - predicted OOD`` (metric
  points; positive = more robust than its clean accuracy predicts). Uncertainty
  comes from a bootstrap over models (resampled with replacement; resamples whose
  ID values are all equal are skipped): a percentile band of the fitted line on a
  grid and a percentile interval per model residual.

  ``space='linear'`` (default) fits the raw 0-100 values, as the study plots them.
  ``space='logit'`` fits ``logit(v / 100)`` on both axes (values clipped to
  ``[LOGIT_EPS, 1 - LOGIT_EPS]``), the scaling Taori et al. use to make the trend
  linear over wide ranges; predictions are mapped back, so residuals, bands and
  intervals stay in metric points.

Several models' results are read by one loader, :func:`load_model_set`; the comparison
table of ``tools/analysis_tools/robustness_table.py`` (:func:`build_comparison`) is a view
of what it returns.

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
* ``kendall_tau_vs_severity.png`` and ``effective_robustness.png`` (unless
  ``plots=False``).
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import os.path as osp
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from scipy import special, stats

from ..corruptions.condition import Condition
from ..evaluation.keys import ECE_KEY
from ..fileio import atomic_write_text
from .plotting import plot_effective_robustness, plot_kendall_tau_vs_severity
from .report import load_results_json
from .results import AVG, SHIFT, check_condition, corruption_order, robustness_scores
from .tables import ComparisonTable, column_title, fmt_number, markdown_table

__all__ = [
    'CROSS_MODEL_FORMAT', 'FIT_SPACES', 'LOGIT_EPS', 'CROSS_MODEL_FILES',
    'CROSS_MODEL_PLOTS', 'ModelSet', 'load_model_set', 'build_comparison',
    'load_shift_values', 'kendall_tau', 'TauRow', 'MeasureStability', 'RankStability',
    'rank_stability', 'fit_line', 'EffectiveRobustnessFit', 'effective_robustness_fit',
    'effective_robustness', 'CrossModelComparison', 'compare_models', 'comparison_to_dict',
    'cross_model_markdown', 'model_conditions_csv_text', 'rank_stability_csv_text',
    'effective_robustness_csv_text', 'write_cross_model'
]

CROSS_MODEL_FORMAT = 'reobench_mm.cross_model/1'
FIT_SPACES = ('linear', 'logit')
#: Clipping of fractions before the logit (0.01 metric points from 0 and 100).
LOGIT_EPS = 1e-4
CROSS_MODEL_FILES = ('cross_model.json', 'cross_model.md', 'model_conditions.csv',
                     'rank_stability.csv', 'effective_robustness.csv')
CROSS_MODEL_PLOTS = ('kendall_tau_vs_severity.png', 'effective_robustness.png')

_TWO_MODELS_RANK = ('only 2 models: Kendall τ between two rankings is ±1 (or undefined '
                    'on ties), so rank stability of two models is nearly meaningless')
_TWO_MODELS_FIT = ('only 2 models: the fitted line passes exactly through both points, '
                   'so every effective robustness (residual) is 0')


# ----------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------
def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _read_documents(paths: Sequence[str], names: Optional[Sequence[Optional[str]]],
                    what: str, distinct_names: bool = True
                    ) -> Tuple[List[str], List[Dict[str, Any]], str, str, str]:
    """Read results files; return names, documents, task, metric and protocol
    (``distinct_names``: a name given to two files is an error)."""
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError(f'no {what} files given')
    if names is not None and len(names) != len(paths):
        raise ValueError(f'{len(names)} names given for {len(paths)} {what} files; give '
                         'one name per file')
    docs = [load_results_json(p) for p in paths]
    model_names = []
    for i, (path, doc) in enumerate(zip(paths, docs)):
        given = names[i] if names is not None else None
        prov = doc.get('provenance') or {}
        model_names.append(str(given or prov.get('model')
                               or osp.basename(osp.dirname(osp.abspath(path)))))
    repeated = sorted({n for n in model_names if model_names.count(n) > 1})
    if repeated and distinct_names:
        raise ValueError(f'model names must be unique among the {what} files; repeated: '
                         f'{repeated} (give distinct names, e.g. with --names)')
    for key in ('task', 'metric', 'protocol'):
        seen = {}
        for path, doc in zip(paths, docs):
            seen.setdefault(str(doc['numbers'].get(key)), []).append(path)
        if len(seen) > 1:
            detail = '; '.join(f'{k}: {", ".join(v)}' for k, v in seen.items())
            raise ValueError(f'the {what} files must share one {key}, got {detail}')
    numbers = docs[0]['numbers']
    return (model_names, docs, numbers.get('task'), numbers.get('metric') or 'metric',
            numbers['protocol'])


@dataclass
class ModelSet:
    """Several models' results over the conditions they all have.

    Attributes:
        task, metric, protocol: shared by every file.
        models: model names (provenance ``model``, else the file's folder name, or
            the names given).
        paths: the files, in the order of ``models``.
        conditions: clean first, then the corrupted conditions in table order
            (:class:`~reobench_mm.corruptions.condition.Condition` of ``protocol``).
        corruptions: the corruptions of ``conditions`` (table order).
        severities: the severities of ``conditions`` (sorted).
        values: ``{measure: array (models x conditions)}``; measure is ``metric``
            and, when every model has a finite ``calib/ECE`` in every condition,
            ``'calib/ECE'``.
        dropped: ``{model: [condition keys left out because not every model has
            them]}`` (models with none left out are absent).
        notes: human-readable remarks (dropped conditions, skipped calibration).
        documents: the ``results.json`` documents, in the order of ``models`` (what
            each file itself holds: its own severities, per-corruption means,
            provenance).
    """
    task: Optional[str]
    metric: str
    protocol: str
    models: List[str]
    paths: List[str]
    conditions: List[Condition]
    corruptions: List[str]
    severities: List[int]
    values: Dict[str, np.ndarray]
    dropped: Dict[str, List[str]] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    documents: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def measures(self) -> List[str]:
        """The analysed measures: the task metric, then ``calib/ECE`` if present."""
        return list(self.values)

    def column(self, measure: str, condition: Condition) -> np.ndarray:
        """Values of ``measure`` under ``condition``, one per model."""
        return self.values[measure][:, self.conditions.index(condition)]

    def clean(self, measure: Optional[str] = None) -> np.ndarray:
        """Clean values of ``measure`` (default the task metric), one per model."""
        return self.column(measure or self.metric, Condition(protocol=self.protocol))

    def corruption_mean(self, corruption: str, measure: Optional[str] = None) -> np.ndarray:
        """Mean of ``measure`` over the common severities of ``corruption``, or over
        the corruption means for ``corruption == 'avg'``, one per model."""
        measure = measure or self.metric
        if corruption == AVG:
            return np.mean([self.corruption_mean(c, measure) for c in self.corruptions],
                           axis=0)
        if corruption not in self.corruptions:
            raise ValueError(f'unknown corruption {corruption!r}; valid: '
                             f'{self.corruptions + [AVG]}')
        columns = [i for i, c in enumerate(self.conditions) if c.corruption == corruption]
        return self.values[measure][:, columns].mean(axis=1)


def load_model_set(paths: Sequence[str], names: Optional[Sequence[Optional[str]]] = None,
                   calibration_key: str = ECE_KEY, *, min_models: int = 2,
                   distinct_names: bool = True,
                   require_common_condition: bool = True) -> ModelSet:
    """Read several ``results.json`` files into a :class:`ModelSet`: the one loader of
    several models' results, for the cross-model analysis (:func:`compare_models`) and
    the comparison table (:func:`build_comparison`).

    Args:
        paths: results files of the same task, metric and protocol.
        names: optional model names, one per file (``None`` entries fall back to
            the provenance ``model``, then the file's folder name).
        calibration_key: the ``extra`` key analysed as calibration error.
        min_models: the fewest files accepted (2 for a cross-model comparison; the
            table of :func:`build_comparison` takes a single model too).
        distinct_names: two files of the same model name are an error (the analysis
            pairs results by name; a table may show the same name twice).
        require_common_condition: without a corrupted condition (a corruption at the
            same severity) common to all files there is nothing to compare, an error;
            otherwise :attr:`ModelSet.conditions` may hold the clean condition alone.

    Raises:
        ValueError: fewer than ``min_models`` files, names not one per file or (with
            ``distinct_names``) repeated, different task/metric/protocol, or (with
            ``require_common_condition``) no corrupted condition common to all.
    """
    if min_models > 1 and len(paths) < min_models:
        raise ValueError(f'a cross-model comparison needs at least {min_models} results '
                         f'files, got {len(paths)}')
    models, docs, task, metric, protocol = _read_documents(paths, names, 'results',
                                                           distinct_names)
    rows = [{check_condition((r['corruption'], int(r['severity'])), protocol): r
             for r in d['numbers']['conditions']} for d in docs]
    common = set.intersection(*(set(r) for r in rows))
    clean = Condition(protocol=protocol)
    corrupted = sorted(c for c in common if not c.is_clean)
    if require_common_condition and (clean not in common or not corrupted):
        raise ValueError('the results files have no corrupted condition in common (a '
                         'corruption at the same severity); nothing to compare')
    corruptions = corruption_order({c.corruption for c in corrupted}, protocol)
    conditions = [clean] + [c for name in corruptions for c in corrupted
                            if c.corruption == name]
    notes: List[str] = []
    dropped: Dict[str, List[str]] = {}
    for model, model_rows in zip(models, rows):
        left_out = [c.key for c in model_rows if c not in common]
        if left_out:
            dropped[model] = left_out
            notes.append(f'{model}: conditions left out (not in every file): '
                         f'{", ".join(left_out)}')
    values = {metric: np.array([[float(r[c]['value']) for c in conditions] for r in rows])}
    calibration = [[(r[c].get('extra') or {}).get(calibration_key) for c in conditions]
                   for r in rows]
    if all(_finite(v) for row in calibration for v in row):
        values[calibration_key] = np.array(calibration, dtype=float)
    else:
        lacking = [m for m, row in zip(models, calibration) if not all(map(_finite, row))]
        notes.append(f'{calibration_key} is not reported (finite) by every model in every '
                     f'condition (lacking: {", ".join(lacking)}): its analysis is skipped')
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return ModelSet(task=task, metric=metric, protocol=protocol, models=models,
                    paths=[os.fspath(p) for p in paths], conditions=conditions,
                    corruptions=corruptions,
                    severities=sorted({c.severity for c in conditions[1:]}), values=values,
                    dropped=dropped, notes=notes, documents=docs)


def load_shift_values(model_set: ModelSet, paths: Sequence[str],
                      names: Optional[Sequence[Optional[str]]] = None
                      ) -> Tuple[np.ndarray, Dict[str, str], List[str]]:
    """Clean metric of every model of ``model_set`` on a shifted dataset.

    Args:
        model_set: the in-distribution results.
        paths: results files of the same models evaluated on the shifted dataset
            (same task and metric); paired with ``model_set.models`` by name.
        names: optional names for ``paths`` (default: provenance ``model``, else the
            folder name).

    Returns:
        ``(values, {model: path}, notes)``: one clean value per model of
        ``model_set`` in its order, the file used for each, and remarks (shifted
        files whose model is not in ``model_set`` are ignored).

    Raises:
        ValueError: a model of ``model_set`` has no shifted result, or the task or
            metric differs.
    """
    shift_names, docs, task, metric, _ = _read_documents(paths, names, 'shift results')
    if (task, metric) != (model_set.task, model_set.metric):
        raise ValueError(f'the shift results report {metric} for task {task}, the results '
                         f'{model_set.metric} for task {model_set.task}; they must match')
    by_name = dict(zip(shift_names, zip(paths, docs)))
    missing = [m for m in model_set.models if m not in by_name]
    if missing:
        raise ValueError(f'no shift result for model(s) {missing}; shift results are paired '
                         f'by model name and are named {sorted(by_name)} (set the names '
                         'with shift_names / --shift-names)')
    notes = [f'shift result {n} ({by_name[n][0]}) has no model of that name in the results: '
             'ignored' for n in shift_names if n not in model_set.models]
    values = np.array([float(by_name[m][1]['numbers']['clean']) for m in model_set.models])
    return values, {m: os.fspath(by_name[m][0]) for m in model_set.models}, notes


# ----------------------------------------------------------------------------------
# The comparison table
# ----------------------------------------------------------------------------------
def build_comparison(paths: Sequence[str], names: Optional[Sequence[Optional[str]]] = None
                     ) -> ComparisonTable:
    """Read several ``results.json`` files into a
    :class:`~reobench_mm.analysis.tables.ComparisonTable`: a view of the
    :class:`ModelSet` of :func:`load_model_set` (one file is enough, names may repeat,
    the files need no condition in common) that shows what each file itself reports.

    The model name is the provenance's ``model`` (else the file's parent folder
    name), the backbone the provenance's ``backbone``. Columns are the corruptions
    present in every file, each file's mean over the severities it has; the others are
    reported in ``warnings`` (also issued as Python warnings), as are files with missing
    severities and files averaging over different severity sets.
    """
    with warnings.catch_warnings():
        # the loader's notes are about the conditions common to every file, which the
        # table does not use; its own remarks follow
        warnings.simplefilter('ignore')
        model_set = load_model_set(paths, names, min_models=1, distinct_names=False,
                                   require_common_condition=False)
    docs, protocol = model_set.documents, model_set.protocol
    msgs: List[str] = []
    common = set.intersection(*(set(d['numbers']['per_corruption']) for d in docs))
    if not common:
        raise ValueError('the files have no corruption in common')
    columns = corruption_order(common, protocol)
    severity_sets = {tuple(d['numbers']['included']['severities']) for d in docs}
    if len(severity_sets) > 1:
        msgs.append('the files average over different severities (' + '; '.join(
            f'{p}: {", ".join(map(str, d["numbers"]["included"]["severities"]))}'
            for p, d in zip(model_set.paths, docs)) + '): their columns are not directly '
            'comparable')
    rows = []
    for name, path, doc in zip(model_set.models, model_set.paths, docs):
        numbers, prov = doc['numbers'], doc.get('provenance') or {}
        dropped = [c for c in numbers['per_corruption'] if c not in common]
        if dropped:
            msgs.append(f'{path}: corruptions left out (not in every file): '
                        f'{", ".join(dropped)}; its Avg/ΔTP are recomputed over the '
                        f'{len(columns)} common corruptions')
        incomplete = {c: v for c, v in numbers['included']['missing_severities'].items()
                      if c in common}
        if incomplete:
            msgs.append(f'{path}: missing severities ' + '; '.join(
                f'{c}: {", ".join(map(str, v))}' for c, v in incomplete.items()))
        means = {c: numbers['per_corruption'][c]['mean'] for c in columns}
        scores = robustness_scores(numbers['clean'], means, protocol)['overall']
        row = {'model': name, 'backbone': prov.get('backbone'), 'clean': numbers['clean']}
        row.update(means)
        row.update(avg=scores.avg, delta_tp=scores.delta_tp)
        rows.append(row)
    for msg in msgs:
        warnings.warn(msg, stacklevel=2)
    return ComparisonTable(model_set.metric, protocol, columns, rows, msgs)


# ----------------------------------------------------------------------------------
# Rank stability
# ----------------------------------------------------------------------------------
def kendall_tau(reference: Sequence[float], other: Sequence[float]) -> Tuple[float, float]:
    """Kendall's τ-b between two score vectors and its two-sided p-value
    (:func:`scipy.stats.kendalltau`, ``variant='b'``); NaN when one is constant (τ is
    undefined). The package's one Kendall τ: the data-budget report writes its NaN as
    None (:mod:`reobench_mm.robustness.data_budget`)."""
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
# Effective robustness
# ----------------------------------------------------------------------------------
def _check_space(space: str) -> None:
    if space not in FIT_SPACES:
        raise ValueError(f'unknown fit space {space!r}; valid: {list(FIT_SPACES)}')


def _to_space(values: np.ndarray, space: str) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if space == 'linear':
        return values
    return special.logit(np.clip(values / 100.0, LOGIT_EPS, 1.0 - LOGIT_EPS))


def _from_space(values: np.ndarray, space: str) -> np.ndarray:
    return values if space == 'linear' else 100.0 * special.expit(values)


def fit_line(id_values: Sequence[float], ood_values: Sequence[float],
             space: str = 'linear') -> Tuple[float, float, float]:
    """Least-squares line ``OOD = slope * ID + intercept`` (in ``space``) with
    :func:`scipy.stats.linregress`; returns ``(slope, intercept, r_squared)``
    (``r_squared`` NaN when OOD is constant).

    Raises:
        ValueError: fewer than 2 points, lengths differ, or all ID values equal.
    """
    _check_space(space)
    x = _to_space(id_values, space)
    y = _to_space(ood_values, space)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f'ID and OOD must be 1-D of the same length, got {x.shape} and '
                         f'{y.shape}')
    if x.size < 2:
        raise ValueError(f'a line fit needs at least 2 models, got {x.size}')
    if np.ptp(x) == 0:
        raise ValueError('every model has the same ID (clean) value: no line can be fitted')
    result = stats.linregress(x, y)
    return float(result.slope), float(result.intercept), float(result.rvalue) ** 2


@dataclass
class EffectiveRobustnessFit:
    """One effective-robustness fit across models.

    Attributes:
        name: corruption name, ``'avg'`` or ``'shift'``.
        space: ``'linear'`` or ``'logit'`` (the space of ``slope``/``intercept``).
        models: model names; ``id_values``/``ood_values`` in that order (0-100).
        slope, intercept, r_squared: the least-squares line in ``space``.
        predicted: the line's OOD at each model's ID (0-100).
        residuals: effective robustness, ``ood_values - predicted``.
        grid: ID values (0-100) where the band is evaluated (the data's range).
        line: the fitted OOD on ``grid``.
        band_low, band_high: percentile band of the bootstrap lines on ``grid``
            (None when no resample was usable).
        residual_low, residual_high: percentile interval of each model's residual
            against the bootstrap lines (None likewise).
        n_bootstrap: resamples drawn; n_valid: resamples used (non-degenerate).
        confidence: the band's coverage (0.95 -> percentiles 2.5 and 97.5).
        seed: seed of the :func:`numpy.random.default_rng` generator.
    """
    name: str
    space: str
    models: List[str]
    id_values: np.ndarray
    ood_values: np.ndarray
    slope: float
    intercept: float
    r_squared: float
    predicted: np.ndarray
    residuals: np.ndarray
    grid: np.ndarray
    line: np.ndarray
    band_low: Optional[np.ndarray]
    band_high: Optional[np.ndarray]
    residual_low: Optional[np.ndarray]
    residual_high: Optional[np.ndarray]
    n_bootstrap: int
    n_valid: int
    confidence: float
    seed: Optional[int]

    def predict(self, id_values: Sequence[float]) -> np.ndarray:
        """OOD predicted by the line for ``id_values`` (0-100)."""
        return _from_space(self.slope * _to_space(id_values, self.space) + self.intercept,
                           self.space)


def effective_robustness_fit(id_values: Sequence[float], ood_values: Sequence[float], *,
                             models: Sequence[str], name: str, space: str = 'linear',
                             n_bootstrap: int = 1000, seed: Optional[int] = 0,
                             confidence: float = 0.95, grid_size: int = 50
                             ) -> EffectiveRobustnessFit:
    """Fit ``OOD = a * ID + b`` across models and bootstrap it.

    Args:
        id_values, ood_values: one value per model (0-100).
        models: model names, same order.
        name: the fit's name.
        space: ``'linear'`` or ``'logit'`` (see the module docstring).
        n_bootstrap: resamples of the models (with replacement); 0 disables the
            bootstrap.
        seed: seed of :func:`numpy.random.default_rng` (same seed -> same result).
        confidence: coverage of the percentile band and intervals.
        grid_size: points of the ID grid spanning the models' ID range.
    """
    _check_space(space)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f'confidence must be in (0, 1), got {confidence}')
    if n_bootstrap < 0 or grid_size < 2:
        raise ValueError(f'n_bootstrap must be >= 0 and grid_size >= 2, got {n_bootstrap} '
                         f'and {grid_size}')
    x_raw = np.asarray(id_values, dtype=float)
    y_raw = np.asarray(ood_values, dtype=float)
    if len(models) != x_raw.size:
        raise ValueError(f'{len(models)} model names for {x_raw.size} values')
    slope, intercept, r_squared = fit_line(x_raw, y_raw, space)
    x, y = _to_space(x_raw, space), _to_space(y_raw, space)
    predicted = _from_space(slope * x + intercept, space)
    grid = np.linspace(x_raw.min(), x_raw.max(), grid_size)
    grid_space = _to_space(grid, space)
    line = _from_space(slope * grid_space + intercept, space)

    band_low = band_high = residual_low = residual_high = None
    n_valid = 0
    if n_bootstrap:
        rng = np.random.default_rng(seed)
        index = rng.integers(0, x.size, size=(n_bootstrap, x.size))
        index = index[np.ptp(x[index], axis=1) > 0]  # skip resamples with one ID value
        n_valid = len(index)
        if n_valid:
            xb, yb = x[index], y[index]
            xc = xb - xb.mean(axis=1, keepdims=True)
            yc = yb - yb.mean(axis=1, keepdims=True)
            slopes = (xc * yc).sum(axis=1) / (xc * xc).sum(axis=1)
            intercepts = yb.mean(axis=1) - slopes * xb.mean(axis=1)
            percentiles = [50.0 * (1.0 - confidence), 50.0 * (1.0 + confidence)]
            lines = _from_space(slopes[:, None] * grid_space[None] + intercepts[:, None],
                                space)
            band_low, band_high = np.percentile(lines, percentiles, axis=0)
            boot_residuals = y_raw[None] - _from_space(
                slopes[:, None] * x[None] + intercepts[:, None], space)
            residual_low, residual_high = np.percentile(boot_residuals, percentiles, axis=0)
    return EffectiveRobustnessFit(
        name=name, space=space, models=list(models), id_values=x_raw, ood_values=y_raw,
        slope=slope, intercept=intercept, r_squared=r_squared, predicted=predicted,
        residuals=y_raw - predicted, grid=grid, line=line, band_low=band_low,
        band_high=band_high, residual_low=residual_low, residual_high=residual_high,
        n_bootstrap=int(n_bootstrap), n_valid=n_valid, confidence=confidence, seed=seed)


def effective_robustness(model_set: ModelSet, *, shift_values: Optional[Sequence[float]] = None,
                         space: str = 'linear', n_bootstrap: int = 1000,
                         seed: Optional[int] = 0, confidence: float = 0.95
                         ) -> Dict[str, EffectiveRobustnessFit]:
    """Effective-robustness fits of ``model_set``: ``'avg'`` (OOD = the Avg over
    corruptions), one per corruption (OOD = its mean over the common severities)
    and, with ``shift_values`` (one clean value per model on a shifted dataset,
    see :func:`load_shift_values`), ``'shift'``. ID is always the clean metric.
    Every fit uses the same seed, hence the same model resamples (warns with 2
    models)."""
    n_models = len(model_set.models)
    if n_models < 2:
        raise ValueError(f'effective robustness needs at least 2 models, got {n_models}')
    if n_models == 2:
        warnings.warn(_TWO_MODELS_FIT, stacklevel=2)
    ood = {AVG: model_set.corruption_mean(AVG)}
    ood.update((c, model_set.corruption_mean(c)) for c in model_set.corruptions)
    if shift_values is not None:
        shift_values = np.asarray(shift_values, dtype=float)
        if shift_values.shape != (n_models, ):
            raise ValueError(f'shift_values must hold one value per model ({n_models}), got '
                             f'shape {shift_values.shape}')
        ood[SHIFT] = shift_values
    clean = model_set.clean()
    return {name: effective_robustness_fit(clean, values, models=model_set.models, name=name,
                                           space=space, n_bootstrap=n_bootstrap, seed=seed,
                                           confidence=confidence)
            for name, values in ood.items()}


# ----------------------------------------------------------------------------------
# The whole comparison
# ----------------------------------------------------------------------------------
@dataclass
class CrossModelComparison:
    """Everything :func:`compare_models` computes."""
    model_set: ModelSet
    rank: RankStability
    fits: Dict[str, EffectiveRobustnessFit]
    shift_paths: Optional[Dict[str, str]] = None
    notes: List[str] = field(default_factory=list)


def compare_models(paths: Sequence[str], *, names: Optional[Sequence[Optional[str]]] = None,
                   shift_paths: Optional[Sequence[str]] = None,
                   shift_names: Optional[Sequence[Optional[str]]] = None,
                   space: str = 'linear', n_bootstrap: int = 1000, seed: Optional[int] = 0,
                   confidence: float = 0.95) -> CrossModelComparison:
    """Load ``paths`` (and ``shift_paths``), then compute rank stability and
    effective robustness. See :func:`load_model_set`, :func:`load_shift_values`,
    :func:`rank_stability` and :func:`effective_robustness`."""
    _check_space(space)
    model_set = load_model_set(paths, names)
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
    fits = effective_robustness(model_set, shift_values=shift_values, space=space,
                                n_bootstrap=n_bootstrap, seed=seed, confidence=confidence)
    return CrossModelComparison(model_set, rank, fits, shift_files, notes)


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
            'rank_stability': rank, 'effective_robustness': fits}


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
             f'Conditions common to every model: {len(ms.corruptions)} corruptions, '
             f'severities {", ".join(map(str, ms.severities))}.', '']
    if comparison.notes:
        lines += [f'- {n}' for n in comparison.notes] + ['']

    header = ['Model', f'Clean {metric}', f'Avg {metric}']
    if ECE_KEY in ms.values:
        header += [f'Clean {ECE_KEY}', f'Avg {ECE_KEY}']
    rows = []
    for i, model in enumerate(ms.models):
        row = [model, fmt_number(ms.clean()[i]), fmt_number(ms.corruption_mean(AVG)[i])]
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

    space = next(iter(fits.values())).space
    first = next(iter(fits.values()))
    lines += ['## Effective robustness', '',
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
    lines += markdown_table(header, rows) + ['']
    return '\n'.join(lines)


def _csv_cell(value: Any) -> str:
    if value is None:
        return ''
    if isinstance(value, (float, np.floating)):
        return repr(float(value)) if math.isfinite(value) else ''
    return str(value)


def _csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    writer.writerow(header)
    writer.writerows([[_csv_cell(v) for v in row] for row in rows])
    return buffer.getvalue()


def model_conditions_csv_text(comparison: CrossModelComparison) -> str:
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
    return _csv_text(header, rows)


def rank_stability_csv_text(comparison: CrossModelComparison) -> str:
    """One row per measure x condition: ``measure, condition, corruption, severity,
    tau, p_value, top1`` (``;``-joined), ``top1_changed`` (0/1)."""
    rows = []
    for measure, st in comparison.rank.measures.items():
        for r in st.conditions + st.corruption_means:
            rows.append([measure, r.condition, r.corruption, r.severity, r.tau, r.p_value,
                         ';'.join(r.top1), int(r.top1_changed)])
    return _csv_text(['measure', 'condition', 'corruption', 'severity', 'tau', 'p_value',
                      'top1', 'top1_changed'], rows)


def effective_robustness_csv_text(comparison: CrossModelComparison) -> str:
    """One row per fit x model: ``fit, space, model, id, ood, predicted_ood,
    effective_robustness, ci_low, ci_high`` (empty CI without usable resamples)."""
    rows = []
    for name, fit in comparison.fits.items():
        for i, model in enumerate(fit.models):
            rows.append([name, fit.space, model, fit.id_values[i], fit.ood_values[i],
                         fit.predicted[i], fit.residuals[i],
                         None if fit.residual_low is None else fit.residual_low[i],
                         None if fit.residual_high is None else fit.residual_high[i]])
    return _csv_text(['fit', 'space', 'model', 'id', 'ood', 'predicted_ood',
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
                                                  model_conditions_csv_text(comparison)),
        'rank_stability.csv': atomic_write_text(path('rank_stability.csv'),
                                                rank_stability_csv_text(comparison)),
        'effective_robustness.csv': atomic_write_text(
            path('effective_robustness.csv'), effective_robustness_csv_text(comparison)),
    }
    if plots:
        files['kendall_tau_vs_severity.png'] = plot_kendall_tau_vs_severity(
            comparison, path('kendall_tau_vs_severity.png'))
        files['effective_robustness.png'] = plot_effective_robustness(
            comparison, path('effective_robustness.png'))
    return files
