"""What the mitigations change: temperature scaling, a deep ensemble and selective
prediction as deltas, per condition and per severity (the calibration study's Table V).

The robustness sweep reports each mitigation beside the model it mitigates; this module
turns those numbers into differences. Every number is read from ``results.json`` files
through the package's one reader (:func:`~reobench_mm.analysis.results_file.read_results`;
several files through :func:`~reobench_mm.analysis.model_set.load_model_set`) and every
mean over corruptions is that of :func:`~reobench_mm.analysis.results.aggregate`.

Tables (:class:`DeltaTable`), each with one value per condition and the rows ``clean``,
one per evaluated severity and ``avg``:

* **Temperature scaling** (``temperature_scaling``), from one results file of a sweep
  run with ``--temperature-scaling``: ΔECE, ΔNLL, ΔBrier = ``calib_ts/...`` − ``calib/...``
  (with the clean-fitted temperature minus as evaluated) and ΔmIoU, which is 0: dividing
  the logits by a temperature T > 0 keeps every arg-max, so the file holds one prediction
  per condition and ``calib/`` and ``calib_ts/`` describe the same pixels' predictions.
* **Ensemble − mean of its members** (``ensemble_vs_mean``) and **ensemble − best member**
  (``ensemble_vs_best``), from the ensemble's results file and its members': ΔECE, ΔNLL,
  ΔBrier of ``calib/`` and Δ of the task metric. The *best member* is the member with the
  highest clean task metric (the first given among equals): the single model one would
  deploy, chosen without looking at the corruptions. The files must hold the same
  conditions (refused otherwise, naming what each file lacks), share task, metric and
  protocol, and have evaluated the same corruption draws (and, when every file keeps
  per-image statistics, the same images).
* **Selective prediction** (``selective_gain`` and, with temperature scaling,
  ``selective_gain_ts``): the accuracy of the 90 % most confident pixels
  (``calib/acc@90cov``, a fraction) minus the accuracy at full coverage, the pixel accuracy
  ``aAcc`` of ``IoUMetric`` (a percentage, which ``IoUMetric`` rounds to two decimals),
  both in percent, the gain in percentage points. Its rounding leaves the gain uncertain by
  at most 0.005 points.

Rows: ``clean`` is the clean condition's value; a severity row is the mean over the
corruptions evaluated at that severity of their per-condition values (``count`` says how
many); ``avg`` is REOBench's Avg of the difference: the mean over corruptions of each
corruption's mean over its severities, computed as the difference of the Avg values of
:func:`~reobench_mm.analysis.results.aggregate` (the differences are linear, so this
equals the Avg of the per-condition differences; when some corruption lacks a severity the
severity rows and Avg average different things, and a note says so).

The signed calibration error against severity (``calib/gap`` = mean confidence −
accuracy, which for equal-width bins is Σ_b n_b/N (conf_b − acc_b); > 0 is overconfident)
is drawn by :func:`~reobench_mm.analysis.mitigation_plots.plot_signed_ece`.

Typical use::

    report = mitigation_report('ts/results.json', ensemble='ens/results.json',
                               members=['seed0/results.json', 'seed1/results.json'])
    write_mitigation(report, 'work_dirs/mitigation')
"""
from __future__ import annotations

import csv
import io
import math
import os
import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from reobench_corruptions.condition import Condition
from ..evaluation.keys import (CALIBRATION_PREFIX, CALIBRATION_PREFIXES, SCALED_CALIBRATION_PREFIX,
                               SEGMENTATION, get_task, metric_key)
from ..fileio import atomic_write_text, dump_json_atomic, nan_to_null
from .intervals import check_same_images
from .model_set import ModelSet, load_model_set
from .paired_models import check_same_draws
from .report import _temperature_text
from .results import AVG, RobustnessSummary, mean
from .results_file import ResultsFile, read_results
from .tables import fmt_number, markdown_table

__all__ = [
    'MITIGATION_FORMAT', 'MITIGATION_FILES', 'DELTA_MEASURES', 'PIXEL_ACCURACY_KEY',
    'SELECTIVE_METRIC', 'GAP', 'SeverityRow', 'DeltaTable', 'MitigationReport',
    'temperature_scaling_table', 'ensemble_tables', 'selective_gain_tables', 'signed_ece',
    'mitigation_report', 'mitigation_markdown', 'mitigation_csv_text', 'write_mitigation'
]

MITIGATION_FORMAT = 'reobench_mm.mitigation/1'
#: Files :func:`write_mitigation` writes (the plot only with ``plot=True``).
MITIGATION_FILES = ('mitigation.md', 'mitigation.csv', 'mitigation.json', 'signed_ece.png')
#: The calibration measures whose differences the tables give (lower is better).
DELTA_MEASURES = ('ECE', 'NLL', 'Brier')
#: ``IoUMetric``'s pixel accuracy: the accuracy at full coverage, in percent.
PIXEL_ACCURACY_KEY = 'aAcc'
#: The accuracy of the 90 % most confident pixels (a fraction).
SELECTIVE_METRIC = 'acc@90cov'
#: The signed calibration error: mean confidence − accuracy (> 0 overconfident).
GAP = 'gap'
#: Decimals of the printed values, by quantity (the task metric: 2).
_DIGITS = {'ECE': 4, 'NLL': 4, 'Brier': 4}
_TASK = get_task(SEGMENTATION)

#: One term of a difference: (summary, key, weight); the key is the task metric's name
#: (the condition's value) or a key of its extra metrics.
_Term = Tuple[RobustnessSummary, str, float]


@dataclass(frozen=True)
class SeverityRow:
    """One row of a table.

    Attributes:
        label: ``'clean'``, a severity (``'1'`` .. ``'5'``) or ``'avg'``.
        count: the conditions averaged (clean: 1; a severity: the corruptions evaluated at
            it; avg: the corruptions).
        values: quantity -> value (NaN where an input is undefined).
    """
    label: str
    count: int
    values: Dict[str, float]


@dataclass
class DeltaTable:
    """One comparison: its per-condition values and its rows (module docstring).

    Attributes:
        name: ``'temperature_scaling'``, ``'ensemble_vs_mean'``, ``'ensemble_vs_best'``,
            ``'selective_gain'`` or ``'selective_gain_ts'``.
        title: a heading.
        definition: what each value is, in one sentence.
        columns: quantity -> its column title (``'ECE'`` -> ``'ΔECE'``).
        digits: quantity -> decimals printed.
        per_condition: condition key -> quantity -> value, clean first, then table order.
        rows: clean, each severity, avg.
        notes: remarks printed under the table.
    """
    name: str
    title: str
    definition: str
    columns: Dict[str, str]
    digits: Dict[str, int]
    per_condition: Dict[str, Dict[str, float]]
    rows: List[SeverityRow]
    notes: List[str] = field(default_factory=list)

    def row(self, label: Any) -> SeverityRow:
        """The row ``label`` (``'clean'``, a severity as int or str, ``'avg'``)."""
        for row in self.rows:
            if row.label == str(label):
                return row
        raise KeyError(f'no row {label!r}; rows: {[r.label for r in self.rows]}')

    def to_dict(self) -> Dict[str, Any]:
        return nan_to_null({
            'title': self.title, 'definition': self.definition,
            'columns': dict(self.columns), 'per_condition': self.per_condition,
            'rows': [{'row': r.label, 'count': r.count, **r.values} for r in self.rows],
            'notes': list(self.notes)})


# ----------------------------------------------------------------------------------
# The arithmetic
# ----------------------------------------------------------------------------------
def _value(summary: RobustnessSummary, key: str, condition: Condition) -> float:
    result = summary.conditions[condition]
    return result.value if key == summary.metric else result.extra[key]


def _avg(summary: RobustnessSummary, key: str) -> float:
    """REOBench's Avg of ``key`` (the task metric or an extra metric), as aggregated."""
    return summary.avg if key == summary.metric else summary.extra[key]['avg']


def _combine(terms: Sequence[_Term], get) -> float:
    # math.fsum: an exactly rounded weighted sum, whatever the order of the terms
    return math.fsum(weight * get(summary, key) for summary, key, weight in terms)


def _delta_table(name: str, title: str, definition: str, conditions: Sequence[Condition],
                 columns: Dict[str, Tuple[str, Sequence[_Term]]], digits: Dict[str, int],
                 notes: Sequence[str] = ()) -> DeltaTable:
    """The table of the weighted sums ``columns`` (quantity -> (title, terms)) over
    ``conditions`` (clean first): per condition, per severity and REOBench's Avg."""
    per_condition = {c.key: {q: _combine(terms, lambda s, k, c=c: _value(s, k, c))
                             for q, (_, terms) in columns.items()} for c in conditions}
    clean = [c for c in conditions if c.is_clean]
    corrupted = [c for c in conditions if not c.is_clean]
    rows = [SeverityRow('clean', 1, per_condition[clean[0].key])]
    for severity in sorted({c.severity for c in corrupted}):
        at = [c.key for c in corrupted if c.severity == severity]
        rows.append(SeverityRow(str(severity), len(at), {
            q: mean(per_condition[k][q] for k in at) for q in columns}))
    corruptions = {c.corruption for c in corrupted}
    rows.append(SeverityRow(AVG, len(corruptions), {
        q: _combine(terms, _avg) for q, (_, terms) in columns.items()}))
    notes = list(notes)
    by_corruption = {n: {c.severity for c in corrupted if c.corruption == n}
                     for n in corruptions}
    if len({frozenset(s) for s in by_corruption.values()}) > 1:
        notes.append('the corruptions have different severities (' + '; '.join(
            f'{n}: {", ".join(map(str, sorted(s)))}' for n, s in sorted(by_corruption.items()))
            + '): a severity row is the mean over the corruptions evaluated at it (count), '
            'Avg the mean over corruptions of each one\'s mean over its severities')
    undefined = [k for k, v in per_condition.items() if any(math.isnan(x) for x in v.values())]
    if undefined:
        notes.append(f'undefined ({fmt_number(math.nan)}) where an input is: '
                     f'{", ".join(undefined)}')
    return DeltaTable(name, title, definition, {q: t for q, (t, _) in columns.items()},
                      {q: digits.get(q, 2) for q in columns}, per_condition, rows, notes)


# ----------------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------------
def _check_segmentation(results: ResultsFile) -> None:
    if results.task != _TASK.results_name:
        raise ValueError(f'{results.path} holds {results.task} results; the mitigation '
                         'deltas (temperature scaling, ensembles, pixel selective '
                         f'prediction) are defined for {_TASK.results_name} results')


def _require(results: ResultsFile, keys: Sequence[str], how: str) -> None:
    """Every condition of ``results`` holds every key (else an error naming the key, the
    conditions lacking it and what writes it)."""
    for key in keys:
        lacking = [c.key for c, r in results.conditions.items() if key not in r.extra]
        if lacking:
            shown = ', '.join(lacking[:5]) + (f' and {len(lacking) - 5} more'
                                              if len(lacking) > 5 else '')
            raise ValueError(f'{results.path} has no {key!r} in condition(s) {shown}; '
                             f'{how}')


def _has_prefix(results: ResultsFile, prefix: str) -> bool:
    return any(metric_key(prefix, m) in r.extra for r in results.conditions.values()
               for m in DELTA_MEASURES)


def _check_range(results: ResultsFile, key: str, low: float, high: float, unit: str) -> None:
    for condition, result in results.conditions.items():
        value = result.extra[key]
        if not math.isnan(value) and not low <= value <= high:
            raise ValueError(f'{results.path}: {key} of {condition.key} is {value!r}, outside '
                             f'{low:g}..{high:g} ({unit})')


def _temperature(results: ResultsFile) -> Optional[str]:
    """The recorded temperature as text (None when the file records none); a temperature
    that is not a finite positive number is refused (it would change the predictions)."""
    record = (results.provenance.get('extra') or {}).get('temperature')
    if not isinstance(record, dict) or record.get('temperature') is None:
        return None
    value = record['temperature']
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f'{results.path} records the temperature {value!r}; temperature '
                         'scaling needs a finite T > 0')
    return _temperature_text(results.provenance)


# ----------------------------------------------------------------------------------
# The tables
# ----------------------------------------------------------------------------------
def _measure_columns(metric: str, treated: Sequence[_Term],
                     reference: Sequence[_Term]) -> Dict[str, Tuple[str, List[_Term]]]:
    """Δ of each calibration measure and of the task metric: ``treated − reference``,
    each a list of (summary, prefix or None for the metric, weight)."""
    columns = {}
    for quantity in DELTA_MEASURES + (metric, ):
        def keyed(terms):
            return [(s, metric if quantity == metric else metric_key(p, quantity), w)
                    for s, p, w in terms]
        columns[quantity] = (f'Δ{quantity}', keyed(treated) + [
            (s, k, -w) for s, k, w in keyed(reference)])
    return columns


def temperature_scaling_table(results: ResultsFile) -> DeltaTable:
    """Temperature scaling: ``calib_ts/...`` − ``calib/...`` per condition and row, and
    ΔmIoU = 0 (module docstring).

    Raises:
        ValueError: not segmentation results, a condition without the ``calib/`` or
            ``calib_ts/`` measures, or a recorded temperature that is not > 0.
    """
    _check_segmentation(results)
    for prefix, how in ((CALIBRATION_PREFIX, 'run the sweep with --calibration'),
                        (SCALED_CALIBRATION_PREFIX, 'run the sweep with '
                         '--temperature-scaling (segmentation)')):
        _require(results, [metric_key(prefix, m) for m in DELTA_MEASURES], how)
    summary, metric = results.summary, results.metric
    temperature = _temperature(results)
    columns = _measure_columns(metric, [(summary, SCALED_CALIBRATION_PREFIX, 1.0)],
                               [(summary, CALIBRATION_PREFIX, 1.0)])
    # one prediction per condition, the same for both sides: the difference is 0 by
    # construction (no terms), reported as such rather than computed from one number
    columns[metric] = (f'Δ{metric}', [])
    notes = [f'Δ{metric} = 0: T > 0 keeps every arg-max, so the file holds one prediction '
             f'per condition; calib/ and calib_ts/ describe the same predictions',
             'temperature: ' + (temperature or 'not recorded in the results file')]
    return _delta_table(
        'temperature_scaling', 'Temperature scaling (clean-fitted T) − as evaluated',
        'calib_ts/<measure> − calib/<measure> of the same model in the same condition; '
        '< 0: the temperature lowered the error', list(results.conditions), columns,
        _DIGITS, notes)


def _check_images(model_set: ModelSet) -> Optional[str]:
    """Refuse models evaluated on other corruption draws or (where every file keeps
    per-image statistics) on other images; a note when the images cannot be checked."""
    check_same_draws(model_set)
    stats = []
    for model, results in zip(model_set.models, model_set.files):
        kept = results.image_stats()
        if kept is None:
            return (f'{model} ({results.path}) keeps no per-image statistics: that the '
                    'ensemble and its members were evaluated on the same images is not '
                    'checked')
        stats.append(kept)
    for condition in model_set.conditions:
        check_same_images({(m, condition.key): s[condition]
                           for m, s in zip(model_set.models, stats)}, 'model')
    return None


def ensemble_tables(ensemble: str, members: Sequence[str],
                    names: Optional[Sequence[Optional[str]]] = None, *,
                    common_conditions: bool = False) -> Tuple[List[DeltaTable], ModelSet]:
    """The ensemble against the mean of its members and against its best member (the
    highest clean task metric; module docstring), and the loaded :class:`ModelSet`
    (``models[0]`` the ensemble).

    Args:
        ensemble: the ensemble's ``results.json``.
        members: its members' ``results.json`` (at least 2).
        names: optional names, one per file, the ensemble's first (default: the
            provenance ``model``, else the folder; repeated ones told apart by their
            folders).
        common_conditions: when the files' conditions differ, compare over the conditions
            all have (default: refuse, naming what each file lacks).

    Raises:
        ValueError: fewer than 2 members, the same file twice, files of other task,
            metric, protocol or conditions, other corruption draws or images, not
            segmentation, or a condition without the ``calib/`` measures.
    """
    if len(members) < 2:
        raise ValueError(f'an ensemble has at least 2 members; {len(members)} members\' '
                         'results given')
    model_set = load_model_set([ensemble, *members], names, None, min_models=3,
                               common_conditions=common_conditions)
    keys = [metric_key(CALIBRATION_PREFIX, m) for m in DELTA_MEASURES]
    for results in model_set.files:
        _check_segmentation(results)
        _require(results, keys, 'run the sweep with --calibration')
    # the loader's own notes (names, restricted conditions) are the comparison's, kept in
    # model_set.notes; the tables note what concerns their numbers
    unchecked = _check_images(model_set)
    notes = [unchecked] if unchecked else []
    summaries, metric, k = model_set.summaries, model_set.metric, len(members)
    names = model_set.models
    clean = model_set.clean()[1:]
    best = int(np.argmax(clean))  # the first of equal maxima
    treated = [(summaries[0], CALIBRATION_PREFIX, 1.0)]
    shared = (names, model_set.conditions)
    vs_mean = _delta_table(
        'ensemble_vs_mean', f'Ensemble ({names[0]}) − mean of its {k} members',
        f'ensemble − the mean over the members ({", ".join(names[1:])}) in the same '
        f'condition; < 0 in ΔECE/ΔNLL/ΔBrier and > 0 in Δ{metric}: the ensemble is better',
        shared[1], _measure_columns(metric, treated, [
            (s, CALIBRATION_PREFIX, 1.0 / k) for s in summaries[1:]]), _DIGITS, notes)
    vs_best = _delta_table(
        'ensemble_vs_best', f'Ensemble ({names[0]}) − best member ({names[1 + best]})',
        f'ensemble − the member of the highest clean {metric} ({names[1 + best]}, '
        f'{fmt_number(float(clean[best]))}; the first given among equals) in the same '
        'condition', shared[1],
        _measure_columns(metric, treated, [(summaries[1 + best], CALIBRATION_PREFIX, 1.0)]),
        _DIGITS, notes)
    return [vs_mean, vs_best], model_set


def selective_gain_tables(results: ResultsFile) -> List[DeltaTable]:
    """The selective-prediction gain per condition and row (module docstring): one table
    as evaluated and, when the file has them, one with the temperature-scaled numbers.

    Raises:
        ValueError: not segmentation results, a condition without ``aAcc`` or
            ``calib/acc@90cov``, or either outside its range (0-100 %, 0-1).
    """
    _check_segmentation(results)
    _require(results, [PIXEL_ACCURACY_KEY], "the pixel accuracy at full coverage is "
             "IoUMetric's aAcc (percent); evaluate with IoUMetric (or ClasswiseIoUMetric)")
    _check_range(results, PIXEL_ACCURACY_KEY, 0.0, 100.0, 'a percentage')
    summary, tables = results.summary, []
    prefixes = [CALIBRATION_PREFIX] + ([SCALED_CALIBRATION_PREFIX] if _has_prefix(
        results, SCALED_CALIBRATION_PREFIX) else [])
    for prefix in prefixes:
        key = metric_key(prefix, SELECTIVE_METRIC)
        _require(results, [key], 'run the sweep with --calibration')
        _check_range(results, key, 0.0, 1.0, 'a fraction')
        suffix = '' if prefix == CALIBRATION_PREFIX else '_ts'
        columns = {
            'acc90': (f'{key} (%)', [(summary, key, 100.0)]),
            'acc': (f'{PIXEL_ACCURACY_KEY} (%)', [(summary, PIXEL_ACCURACY_KEY, 1.0)]),
            'gain': ('gain (points)', [(summary, key, 100.0),
                                       (summary, PIXEL_ACCURACY_KEY, -1.0)])}
        tables.append(_delta_table(
            'selective_gain' + suffix,
            f'Selective prediction ({CALIBRATION_PREFIXES[prefix]}): accuracy at 90 % '
            'coverage − at full coverage',
            f'100 × {key} − {PIXEL_ACCURACY_KEY}, in percentage points: what abstaining on '
            'the 10 % least confident pixels gains', list(results.conditions), columns, {},
            [f'{PIXEL_ACCURACY_KEY} is rounded to 2 decimals by IoUMetric: the gain is '
             'uncertain by up to 0.005 points']))
    return tables


def signed_ece(summary: RobustnessSummary) -> Dict[str, Dict[str, Any]]:
    """The signed calibration error (``<prefix>/gap``, mean confidence − accuracy) per
    prefix present in every condition: ``{prefix: {'clean': v, 'per_corruption':
    {corruption: {severity: v}}}}``."""
    out = {}
    for prefix in CALIBRATION_PREFIXES:
        key = metric_key(prefix, GAP)
        if key not in summary.extra:
            continue
        curves: Dict[str, Dict[int, float]] = {}
        clean = math.nan
        for condition, result in summary.conditions.items():
            if condition.is_clean:
                clean = result.extra[key]
            else:
                curves.setdefault(condition.corruption, {})[condition.severity] = \
                    result.extra[key]
        out[prefix] = {'key': key, 'clean': clean,
                       'per_corruption': {n: curves[n] for n in summary.corruptions}}
    return out


# ----------------------------------------------------------------------------------
# The report
# ----------------------------------------------------------------------------------
@dataclass
class MitigationReport:
    """Everything :func:`mitigation_report` computes.

    Attributes:
        results: the results file of the temperature scaling, selective prediction and
            signed-ECE parts.
        tables: the tables, in print order.
        signed_ece: :func:`signed_ece` of ``results``.
        ensemble: None, or ``{'ensemble': {name, path}, 'members': [{name, path}],
            'best_member': name}``.
        notes: remarks on the whole (a part skipped, and why).
    """
    results: ResultsFile
    tables: List[DeltaTable]
    signed_ece: Dict[str, Dict[str, Any]]
    ensemble: Optional[Dict[str, Any]] = None
    notes: List[str] = field(default_factory=list)

    def table(self, name: str) -> DeltaTable:
        for table in self.tables:
            if table.name == name:
                return table
        raise KeyError(f'no table {name!r}; tables: {[t.name for t in self.tables]}')

    def to_dict(self) -> Dict[str, Any]:
        """The ``mitigation.json`` document (NaN as ``null``)."""
        return nan_to_null({
            'format': MITIGATION_FORMAT,
            'results': {'path': self.results.path, 'model': self.results.model,
                        'metric': self.results.metric, 'protocol': self.results.protocol},
            'ensemble': self.ensemble,
            'tables': {t.name: t.to_dict() for t in self.tables},
            'signed_ece': {p: {'key': v['key'], 'clean': v['clean'], 'per_corruption': {
                n: {str(s): x for s, x in c.items()} for n, c in v['per_corruption'].items()}}
                for p, v in self.signed_ece.items()},
            'notes': list(self.notes)})


def mitigation_report(results: str, ensemble: Optional[str] = None,
                      members: Optional[Sequence[str]] = None,
                      names: Optional[Sequence[Optional[str]]] = None, *,
                      common_conditions: bool = False) -> MitigationReport:
    """Read ``results`` (and, with ``ensemble``, the ensemble's and its ``members``'
    results) and compute every table of the module docstring: temperature scaling when
    ``results`` has the ``calib_ts/`` measures (a note otherwise), the ensemble's two
    tables with ``ensemble`` (``names``: of the ensemble and its members, as
    :func:`ensemble_tables` takes them), and the selective-prediction gain of ``results``.

    Raises:
        ValueError: ``ensemble`` without ``members`` or the other way round, and the
            refusals of the table functions.
    """
    if (ensemble is None) != (not members):
        raise ValueError('the ensemble comparison needs both the ensemble\'s results and '
                         'its members\' (--ensemble and --members)')
    if names is not None and ensemble is None:
        raise ValueError('names are those of the ensemble and its members: they need the '
                         'ensemble comparison (--ensemble and --members)')
    file = read_results(results)
    _check_segmentation(file)
    _require(file, [metric_key(CALIBRATION_PREFIX, m) for m in DELTA_MEASURES + (GAP, )],
             'run the sweep with --calibration')
    tables, notes, ensemble_info = [], [], None
    if _has_prefix(file, SCALED_CALIBRATION_PREFIX):
        tables.append(temperature_scaling_table(file))
    else:
        notes.append(f'{file.path} has no temperature-scaled measures '
                     f'({SCALED_CALIBRATION_PREFIX}/...): no temperature-scaling table '
                     '(run the sweep with --temperature-scaling)')
    if ensemble is not None:
        ensemble_part, model_set = ensemble_tables(ensemble, list(members), names,
                                                   common_conditions=common_conditions)
        tables += ensemble_part
        notes += model_set.notes
        named = [{'name': n, 'path': p} for n, p in zip(model_set.models, model_set.paths)]
        best = int(np.argmax(model_set.clean()[1:]))
        ensemble_info = {'ensemble': named[0], 'members': named[1:],
                         'best_member': named[1 + best]['name'],
                         'best_by': f'highest clean {model_set.metric}',
                         'conditions': [c.key for c in model_set.conditions]}
    tables += selective_gain_tables(file)
    return MitigationReport(file, tables, signed_ece(file.summary), ensemble_info, notes)


def _row_label(label: str) -> str:
    return {'clean': 'Clean', AVG: 'Avg'}.get(label, label)


def _cells(table: DeltaTable, values: Dict[str, float]) -> List[str]:
    signed = not table.name.startswith('selective')
    return [fmt_number(values[q], table.digits[q], signed=signed or q == 'gain')
            for q in table.columns]


def mitigation_markdown(report: MitigationReport) -> str:
    """``mitigation.md``: per table its definition, the severity rows (Table V layout),
    its notes, then every table per condition."""
    results = report.results
    lines = ['# Mitigations: what temperature scaling and ensembles change', '',
             f'Results: `{results.path}` ({results.model}; {results.metric}, protocol '
             f'{results.protocol}).', '']
    if report.ensemble:
        lines += [f'Ensemble: `{report.ensemble["ensemble"]["path"]}`; members: ' + ', '.join(
            f'{m["name"]} (`{m["path"]}`)' for m in report.ensemble['members']) + '.', '']
    lines += [f'- {n}' for n in report.notes] + ([''] if report.notes else [])
    lines += ['Rows: Clean; each severity, the mean over the corruptions evaluated at it '
              '(n); Avg, the mean over corruptions of each corruption\'s mean over its '
              'severities (REOBench).', '']
    for table in report.tables:
        lines += [f'## {table.title}', '', table.definition + '.', '']
        lines += markdown_table(['Severity', 'n'] + list(table.columns.values()),
                                [[_row_label(r.label), str(r.count)] + _cells(table, r.values)
                                 for r in table.rows])
        lines += [''] + [f'- {n}' for n in table.notes] + ([''] if table.notes else [])
    lines += ['## Per condition', '']
    for table in report.tables:
        lines += [f'### {table.title}', '']
        lines += markdown_table(['Condition'] + list(table.columns.values()),
                                [[key] + _cells(table, values)
                                 for key, values in table.per_condition.items()])
        lines.append('')
    return '\n'.join(lines)


def mitigation_csv_text(report: MitigationReport) -> str:
    """``mitigation.csv``: one row per table, level (``severity`` rows or ``condition``),
    row and quantity; values unrounded (empty where undefined)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    writer.writerow(['table', 'level', 'row', 'count', 'quantity', 'column', 'value'])

    def number(value: float) -> str:
        return repr(float(value)) if math.isfinite(value) else ''

    for table in report.tables:
        for row in table.rows:
            for q, title in table.columns.items():
                writer.writerow([table.name, 'severity', row.label, row.count, q, title,
                                 number(row.values[q])])
        for key, values in table.per_condition.items():
            for q, title in table.columns.items():
                writer.writerow([table.name, 'condition', key, 1, q, title,
                                 number(values[q])])
    return buffer.getvalue()


def write_mitigation(report: MitigationReport, out_dir: str,
                     plot: bool = True) -> Dict[str, str]:
    """Write :data:`MITIGATION_FILES` into ``out_dir``, each atomically (the plot only
    with ``plot``); returns ``{file name: path}``."""
    from .mitigation_plots import plot_signed_ece
    os.makedirs(out_dir, exist_ok=True)
    md, table_csv, doc, png = (osp.join(out_dir, n) for n in MITIGATION_FILES)
    files = {'mitigation.md': atomic_write_text(md, mitigation_markdown(report)),
             'mitigation.csv': atomic_write_text(table_csv, mitigation_csv_text(report))}
    dump_json_atomic(report.to_dict(), doc)
    files['mitigation.json'] = doc
    if plot:
        files['signed_ece.png'] = plot_signed_ece(report.signed_ece, png,
                                                  title=report.results.model)
    return files
