"""Several models' results, read together: the one loader of several ``results.json``
files (:func:`load_model_set`), the clean metric of the same models on a shifted dataset
(:func:`load_shift_values`) and the comparison table of
``tools/analysis_tools/robustness_table.py`` (:func:`comparison_table`,
:func:`build_comparison`), a view of what the loader returns.

Every table and comparison of several models goes through :func:`load_model_set`, so they
share its rules:

* **Conditions.** The files must hold the same conditions (clean and every corruption at
  every severity). Files whose conditions differ are refused with a message naming, per
  file, the conditions it lacks; ``common_conditions=True`` (``--common-conditions`` of
  the tools) restricts every model to the conditions all files have instead, and the
  notes say what was left out of which model.
* **Numbers.** Each model's per-corruption means, ``Avg`` and ``ΔTP`` are
  :func:`~reobench_mm.analysis.results.aggregate` of its results over those conditions:
  the aggregation of a single report (REOBench's ``Avg``, the mean over the corruptions
  of each corruption's mean over its severities). Without a restriction they are the
  numbers the file itself reports.
* **Names.** Names given are used and must be unique. Otherwise a model is named by its
  provenance ``model`` (else its folder); files whose provenance names repeat are told
  apart, with a note saying so: by their provenance ``backbone`` when it differs between
  all of them (``RemoteCLIP (ViT-L)``), else by the shortest end of their paths that
  does (several checkpoints of one config: ``upernet (seed1/robustness)``).
"""
from __future__ import annotations

import math
import os
import os.path as osp
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from reobench_corruptions.condition import Condition
from ..evaluation.keys import CALIBRATION_METRICS, CALIBRATION_PREFIXES, ECE_KEY, metric_key
from .results import AVG, RobustnessSummary, aggregate, corruption_order
from .results_file import ResultsFile, read_results
from .tables import ComparisonTable

__all__ = ['ModelSet', 'load_model_set', 'load_shift_values', 'comparison_table',
           'build_comparison', 'CALIBRATION_MEASURES', 'SEVERITY_MEAN_PREFIX']

#: The calibration numbers a model set carries when every model reports them (finite) in
#: every condition, in table order (``calib/ECE``, ``calib/gap``, ``calib/NLL``, ...,
#: ``calib_ts/ECE``, ...).
CALIBRATION_MEASURES = tuple(metric_key(prefix, name) for prefix in CALIBRATION_PREFIXES
                             for name in CALIBRATION_METRICS)
#: ``sev@<k>``: the mean over the corruptions at severity ``k`` (:meth:`ModelSet.values_at`).
SEVERITY_MEAN_PREFIX = 'sev'


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _severities(values) -> str:
    return ', '.join(map(str, sorted(values)))


# ----------------------------------------------------------------------------------
# Reading the files and naming the models
# ----------------------------------------------------------------------------------
def _read_files(paths: Sequence[str], what: str
                ) -> Tuple[List[str], List[ResultsFile], Optional[str], str, str]:
    """Read results files; return paths, files, task, metric and protocol (shared by
    every file, else an error naming the files of each)."""
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError(f'no {what} files given')
    files = [read_results(p) for p in paths]
    for key in ('task', 'metric', 'protocol'):
        seen: Dict[str, List[str]] = {}
        for path, file in zip(paths, files):
            seen.setdefault(str(getattr(file, key)), []).append(path)
        if len(seen) > 1:
            detail = '; '.join(f'{k}: {", ".join(v)}' for k, v in seen.items())
            raise ValueError(f'the {what} files must share one {key}, got {detail}')
    first = files[0]
    return paths, files, first.task, first.metric, first.protocol


def _distinct_ends(paths: Sequence[str]) -> Optional[List[str]]:
    """The shortest ends of ``paths`` (their folders, or the file names too when the
    files are named differently) that differ between all of them; None if none does."""
    parts = [osp.abspath(p).split(os.sep) for p in paths]
    if len({p[-1] for p in parts}) == 1:
        parts = [p[:-1] for p in parts]
    for k in range(1, max(len(p) for p in parts) + 1):
        ends = ['/'.join(p[-k:]) for p in parts]
        if len(set(ends)) == len(ends):
            return ends
    return None


def _model_names(paths: Sequence[str], files: Sequence[ResultsFile],
                 names: Optional[Sequence[Optional[str]]], what: str, derive: bool
                 ) -> Tuple[List[str], List[str]]:
    """Names of the models of ``files`` and the notes about them (module docstring;
    ``derive=False``: repeated provenance names are an error too)."""
    if names is not None and len(names) != len(paths):
        raise ValueError(f'{len(names)} names given for {len(paths)} {what} files; give '
                         'one name per file')
    real = [osp.realpath(p) for p in paths]
    twice = list(dict.fromkeys(p for p, r in zip(paths, real) if real.count(r) > 1))
    if twice:
        raise ValueError(f'the same {what} file is given more than once: '
                         f'{", ".join(twice)}; give each model\'s file once')
    given = [str(n) if n else None for n in (names or [None] * len(paths))]
    explicit = [n for n in given if n is not None]
    repeated = sorted({n for n in explicit if explicit.count(n) > 1})
    if repeated:
        raise ValueError(f'model names must be unique among the {what} files; given '
                         f'more than once: {repeated}')
    models = [g if g is not None else f.model for g, f in zip(given, files)]
    notes: List[str] = []
    for name in sorted({n for n in models if models.count(n) > 1}):
        count = models.count(name)
        members = [i for i, n in enumerate(models) if n == name and given[i] is None]
        backbones = [files[i].backbone for i in members]
        if all(backbones) and len(set(backbones)) == len(members):
            ends, by = [str(b) for b in backbones], 'backbones'
        else:
            ends, by = _distinct_ends([paths[i] for i in members]), 'paths'
        if not derive or ends is None:
            raise ValueError(
                f'model names must be unique among the {what} files; {name!r} is the '
                'name of ' + ', '.join(p for p, n in zip(paths, models) if n == name) +
                ' (give one name per file, e.g. with --names)')
        for i, end in zip(members, ends):
            models[i] = f'{name} ({end})'
        notes.append(f'model name {name!r} repeats in {count} {what} files; named by '
                     f'their {by}: ' + ', '.join(
                         f'{models[i]} = {paths[i]}' for i in members) +
                     ' (give names with --names to choose others)')
    repeated = sorted({n for n in models if models.count(n) > 1})
    if repeated:
        raise ValueError(f'model names must be unique among the {what} files; repeated: '
                         f'{repeated} (give one name per file, e.g. with --names)')
    return models, notes


# ----------------------------------------------------------------------------------
# The conditions
# ----------------------------------------------------------------------------------
def _lacking(have: Set[Condition], union: Set[Condition], protocol: str) -> str:
    """What a file of conditions ``have`` lacks of ``union``, in words."""
    missing = union - have
    by_corruption: Dict[str, Set[int]] = {}
    for c in missing:
        by_corruption.setdefault(c.corruption, set()).add(c.severity)
    everywhere = {c.corruption for c in union if not c.is_clean}
    absent = {n for n in by_corruption if not any(c.corruption == n for c in have)}
    if len({frozenset(s) for s in by_corruption.values()}) == 1 and \
            set(by_corruption) == everywhere and not absent:
        return f'severities {_severities(next(iter(by_corruption.values())))} of every ' \
            'corruption'
    parts = [f'{n} (not evaluated)' if n in absent else
             f'{n} at severities {_severities(by_corruption[n])}'
             for n in corruption_order(by_corruption, protocol)]
    return '; '.join(parts)


def _select_conditions(paths: Sequence[str], models: Sequence[str],
                       files: Sequence[ResultsFile], protocol: str, common_conditions: bool
                       ) -> Tuple[List[Condition], List[str], Dict[str, List[str]], List[str]]:
    """The conditions to compare (clean first, then table order), their corruptions, the
    left-out conditions per model and the notes; files of different conditions are
    refused unless ``common_conditions``."""
    sets = [set(file.conditions) for file in files]
    common = set.intersection(*sets)
    union = set.union(*sets)
    notes: List[str] = []
    dropped: Dict[str, List[str]] = {}
    if common != union:
        if not common_conditions:
            detail = '; '.join(
                f'{path} (evaluated at severities {_severities(file.severities)}) lacks '
                f'{_lacking(have, union, protocol)}'
                for path, file, have in zip(paths, files, sets)
                if have != union)
            raise ValueError(
                f'the results files do not hold the same conditions, so their Avg and ΔTP '
                f'would average different things: {detail}. Give files of the same '
                f'conditions, or pass --common-conditions (common_conditions=True) to '
                f'restrict every model to the {len(common)} conditions all files have')
        clean = Condition(protocol=protocol)
        if clean not in common or not any(not c.is_clean for c in common):
            raise ValueError('the results files have no corrupted condition in common (a '
                             'corruption at the same severity); nothing to compare: ' +
                             '; '.join(f'{p}: {", ".join(c.key for c in f.conditions)}'
                                       for p, f in zip(paths, files)))
        for model, file in zip(models, files):
            left_out = [c.key for c in file.conditions if c not in common]
            if left_out:
                dropped[model] = left_out
    corrupted = sorted(c for c in common if not c.is_clean)
    corruptions = corruption_order({c.corruption for c in corrupted}, protocol)
    conditions = [Condition(protocol=protocol)] + [
        c for name in corruptions for c in corrupted if c.corruption == name]
    if dropped:
        notes.append(f'restricted, as asked (--common-conditions), to the {len(conditions)} '
                     f'conditions common to every file: {len(corruptions)} corruptions, '
                     f'severities {_severities({c.severity for c in corrupted})}; Avg and '
                     'ΔTP are over them')
        notes += [f'{model}: conditions left out (not in every file): {", ".join(keys)}'
                  for model, keys in dropped.items()]
    per_corruption = {n: tuple(c.severity for c in corrupted if c.corruption == n)
                      for n in corruptions}
    if len(set(per_corruption.values())) > 1:
        notes.append('the corruptions have different severities (' + '; '.join(
            f'{n}: {_severities(s)}' for n, s in per_corruption.items()) + '): each enters '
            'Avg with its mean over the severities it has')
    return conditions, corruptions, dropped, notes


@dataclass
class ModelSet:
    """Several models' results over the same conditions.

    Attributes:
        task, metric, protocol: shared by every file.
        models: model names (unique; see the module docstring).
        paths: the files, in the order of ``models``.
        conditions: clean first, then the corrupted conditions in table order
            (:class:`~reobench_corruptions.condition.Condition` of ``protocol``): every
            file's conditions, or those common to all when restricted.
        corruptions: the corruptions of ``conditions`` (table order).
        severities: the severities of ``conditions`` (sorted).
        values: ``{measure: array (models x conditions)}``: ``metric``, then the
            calibration error ``calibration_key`` (``'calib/ECE'``) and every other
            number of :data:`CALIBRATION_MEASURES` (``calib/NLL``, ``calib/eAURC``, ...)
            that every model has, finite, in every condition (none when
            ``calibration_key`` is None).
        summaries: each model's :func:`~reobench_mm.analysis.results.aggregate` over
            ``conditions`` (per-corruption means, ``avg``, ``delta_tp``; ``extra`` for
            the calibration measure): the numbers every table and comparison shows.
        dropped: ``{model: [condition keys left out]}`` when restricted to the common
            conditions (models with none left out are absent).
        notes: human-readable remarks (names derived, conditions left out, calibration
            skipped), also issued as warnings.
        files: the results files, in the order of ``models``.
        calibration_key: the calibration error of :attr:`measures` (None: none asked).
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
    summaries: List[RobustnessSummary]
    dropped: Dict[str, List[str]] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    files: List[ResultsFile] = field(default_factory=list)
    calibration_key: Optional[str] = ECE_KEY

    @property
    def measures(self) -> List[str]:
        """The measures of rank stability, the per-model tables and
        ``model_conditions.csv``: the task metric, then ``calibration_key``
        (``calib/ECE``) if present."""
        return [m for m in (self.metric, self.calibration_key) if m in self.values]

    @property
    def all_measures(self) -> List[str]:
        """Every measure of :attr:`values`: the task metric, then every calibration
        number present (``calibration_key`` first)."""
        return list(self.values)

    @property
    def full_severities(self) -> List[int]:
        """The severities every corruption was evaluated at: those of ``sev@<k>``."""
        sets = [{c.severity for c in self.conditions if c.corruption == n}
                for n in self.corruptions]
        return sorted(set.intersection(*sets)) if sets else []

    def condition_keys(self) -> List[str]:
        """Every condition name :meth:`values_at` takes, in table order: ``clean``,
        each ``<corruption>@<severity>``, each ``<corruption>@mean``, each ``sev@<k>``
        (:attr:`full_severities`) and ``avg``."""
        return ([c.key for c in self.conditions] + [f'{n}@mean' for n in self.corruptions]
                + [f'{SEVERITY_MEAN_PREFIX}@{s}' for s in self.full_severities] + [AVG])

    def values_at(self, measure: str, condition: str) -> np.ndarray:
        """Values of ``measure`` under a condition named as :meth:`condition_keys`
        names them, one per model: ``'clean'`` and ``'<corruption>@<severity>'`` (the
        cell), ``'<corruption>@mean'`` (its mean over its severities), ``'sev@<k>'``
        (the mean over the corruptions of their cells at severity ``k``; only for a
        severity every corruption has) or ``'avg'`` (REOBench's Avg).

        Raises:
            ValueError: an unknown measure or condition (the valid ones named).
        """
        if measure not in self.values:
            raise ValueError(f'unknown measure {measure!r}; valid: {self.all_measures}')
        keys = self.condition_keys()
        if condition not in keys:
            raise ValueError(f'unknown condition {condition!r}; valid: clean, '
                             '<corruption>@<severity>, <corruption>@mean, sev@<k>, avg '
                             f'with corruptions {self.corruptions}, severities '
                             f'{self.severities} (sev@<k>: {self.full_severities})')
        name, _, rest = condition.partition('@')
        if condition == AVG or rest == 'mean':
            return self.corruption_mean(AVG if condition == AVG else name, measure)
        if name == SEVERITY_MEAN_PREFIX:
            severity = int(rest)
            columns = [self.column(measure, c) for c in self.conditions
                       if not c.is_clean and c.severity == severity]
            return np.mean(np.stack(columns), axis=0)
        return self.column(measure, self.conditions[[c.key for c in self.conditions]
                                                    .index(condition)])

    def column(self, measure: str, condition: Condition) -> np.ndarray:
        """Values of ``measure`` under ``condition``, one per model."""
        return self.values[measure][:, self.conditions.index(condition)]

    def clean(self, measure: Optional[str] = None) -> np.ndarray:
        """Clean values of ``measure`` (default the task metric), one per model."""
        return self.column(measure or self.metric, Condition(protocol=self.protocol))

    def corruption_mean(self, corruption: str, measure: Optional[str] = None) -> np.ndarray:
        """Mean of ``measure`` over the severities of ``corruption``, or ``Avg`` (the
        mean over the corruption means) for ``corruption == 'avg'``, one per model
        (from :attr:`summaries`)."""
        measure = measure or self.metric
        if measure not in self.values:
            raise ValueError(f'unknown measure {measure!r}; valid: {self.measures}')
        if corruption != AVG and corruption not in self.corruptions:
            raise ValueError(f'unknown corruption {corruption!r}; valid: '
                             f'{self.corruptions + [AVG]}')
        out = []
        for summary in self.summaries:
            if measure == self.metric:
                out.append(summary.avg if corruption == AVG
                           else summary.per_corruption[corruption])
            else:
                scores = summary.extra[measure]
                out.append(scores['avg'] if corruption == AVG
                           else scores['per_corruption'][corruption])
        return np.array(out, dtype=float)

    def delta_tp(self) -> np.ndarray:
        """``ΔTP = clean − Avg`` of the task metric, one per model."""
        return np.array([s.delta_tp for s in self.summaries], dtype=float)


def load_model_set(paths: Sequence[str], names: Optional[Sequence[Optional[str]]] = None,
                   calibration_key: Optional[str] = ECE_KEY, *, min_models: int = 2,
                   common_conditions: bool = False) -> ModelSet:
    """Read several ``results.json`` files into a :class:`ModelSet`: the one loader of
    several models' results, for the cross-model analysis
    (:func:`~reobench_mm.analysis.compare.compare_models`) and the comparison table
    (:func:`build_comparison`). Its rules are those of the module docstring.

    Args:
        paths: results files of the same task, metric and protocol.
        names: optional model names, one per file (``None`` entries fall back to
            the provenance ``model``, then the file's folder name).
        calibration_key: the ``extra`` key analysed as calibration error (None: no
            calibration measure, as in the comparison table).
        min_models: the fewest files accepted (2 for a cross-model comparison; the
            table of :func:`build_comparison` takes a single model too).
        common_conditions: when the files' conditions differ, restrict every model to
            the conditions all files have (default: refuse).

    Raises:
        ValueError: fewer than ``min_models`` files, names not one per file or
            repeated, the same file twice, different task/metric/protocol, different
            conditions (without ``common_conditions``), or no corrupted condition common
            to all.
    """
    if len(paths) < max(min_models, 1):
        raise ValueError(f'a cross-model comparison needs at least {min_models} results '
                         f'files, got {len(paths)}' if min_models > 1 else
                         'no results files given')
    paths, files, task, metric, protocol = _read_files(paths, 'results')
    models, notes = _model_names(paths, files, names, 'results', derive=True)
    conditions, corruptions, dropped, condition_notes = _select_conditions(
        paths, models, files, protocol, common_conditions)
    notes += condition_notes
    rows = [file.conditions for file in files]
    values = {metric: np.array([[r[c].value for c in conditions] for r in rows])}
    if calibration_key is not None:
        values.update(_calibration_values(models, rows, conditions, calibration_key, notes))
    summaries = [aggregate({c: r[c] for c in conditions}, protocol=protocol, task=task,
                           metric=metric) for r in rows]
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return ModelSet(task=task, metric=metric, protocol=protocol, models=models,
                    paths=paths, conditions=conditions, corruptions=corruptions,
                    severities=sorted({c.severity for c in conditions[1:]}), values=values,
                    summaries=summaries, dropped=dropped, notes=notes, files=files,
                    calibration_key=calibration_key)


def _calibration_values(models: Sequence[str], rows: Sequence[Any],
                        conditions: Sequence[Condition], calibration_key: str,
                        notes: List[str]) -> Dict[str, np.ndarray]:
    """``calibration_key`` and every other :data:`CALIBRATION_MEASURES` key that every
    model reports, finite, in every condition (``calibration_key`` first, then table
    order), as ``models x conditions`` arrays; a note for ``calibration_key`` when it is
    lacking and for every other key some but not all models have."""
    present = {k for r in rows for c in conditions for k in r[c].extra}
    keys = [calibration_key] + [k for k in CALIBRATION_MEASURES
                                if k != calibration_key and k in present]
    out: Dict[str, np.ndarray] = {}
    for key in keys:
        table = [[r[c].extra.get(key) for c in conditions] for r in rows]
        if all(_finite(v) for row in table for v in row):
            out[key] = np.array(table, dtype=float)
            continue
        lacking = [m for m, row in zip(models, table) if not all(map(_finite, row))]
        if key == calibration_key:
            notes.append(f'{key} is not reported (finite) by every model in every '
                         f'condition (lacking: {", ".join(lacking)}): its analysis is skipped')
        else:
            notes.append(f'{key} is not reported (finite) by every model in every '
                         f'condition (lacking: {", ".join(lacking)}): not ranked')
    return out


def load_shift_values(model_set: ModelSet, paths: Sequence[str],
                      names: Optional[Sequence[Optional[str]]] = None
                      ) -> Tuple[np.ndarray, Dict[str, str], List[str]]:
    """Clean metric of every model of ``model_set`` on a shifted dataset.

    Args:
        model_set: the in-distribution results.
        paths: results files of the same models evaluated on the shifted dataset
            (same task and metric); paired with ``model_set.models`` by name.
        names: optional names for ``paths`` (default: provenance ``model``, else the
            folder name). They must be unique: a name derived from a folder would not
            pair with the other files.

    Returns:
        ``(values, {model: path}, notes)``: one clean value per model of
        ``model_set`` in its order, the file used for each, and remarks (shifted
        files whose model is not in ``model_set`` are ignored).

    Raises:
        ValueError: a model of ``model_set`` has no shifted result, names repeat, or
            the task or metric differs.
    """
    paths, files, task, metric, _ = _read_files(paths, 'shift results')
    shift_names, _ = _model_names(paths, files, names, 'shift results', derive=False)
    if (task, metric) != (model_set.task, model_set.metric):
        raise ValueError(f'the shift results report {metric} for task {task}, the results '
                         f'{model_set.metric} for task {model_set.task}; they must match')
    by_name = dict(zip(shift_names, zip(paths, files)))
    missing = [m for m in model_set.models if m not in by_name]
    if missing:
        raise ValueError(f'no shift result for model(s) {missing}; shift results are paired '
                         f'by model name and are named {sorted(by_name)} (set the names '
                         'with shift_names / --shift-names)')
    notes = [f'shift result {n} ({by_name[n][0]}) has no model of that name in the results: '
             'ignored' for n in shift_names if n not in model_set.models]
    values = np.array([by_name[m][1].summary.clean for m in model_set.models])
    return values, {m: by_name[m][0] for m in model_set.models}, notes


# ----------------------------------------------------------------------------------
# The comparison table
# ----------------------------------------------------------------------------------
def comparison_table(model_set: ModelSet) -> ComparisonTable:
    """The :class:`~reobench_mm.analysis.tables.ComparisonTable` of ``model_set``: one
    row per model (its name, the provenance's ``backbone``, Clean, the mean of each
    corruption, Avg and ΔTP, all from :attr:`ModelSet.summaries`), the model set's notes
    as its warnings."""
    ms = model_set
    clean, avg, delta = ms.clean(), ms.corruption_mean(AVG), ms.delta_tp()
    means = {c: ms.corruption_mean(c) for c in ms.corruptions}
    rows = []
    for i, (name, file) in enumerate(zip(ms.models, ms.files)):
        row: Dict[str, Any] = {'model': name, 'backbone': file.backbone,
                               'clean': float(clean[i])}
        row.update({c: float(v[i]) for c, v in means.items()})
        row.update(avg=float(avg[i]), delta_tp=float(delta[i]))
        rows.append(row)
    return ComparisonTable(ms.metric, ms.protocol, list(ms.corruptions), rows,
                           list(ms.notes))


def build_comparison(paths: Sequence[str], names: Optional[Sequence[Optional[str]]] = None,
                     *, common_conditions: bool = False) -> ComparisonTable:
    """Read several ``results.json`` files (one is enough) with :func:`load_model_set`
    and return their :func:`comparison_table`: the numbers of the cross-model
    comparison of the same files, under the same rules (conditions, names).

    Raises:
        ValueError: as :func:`load_model_set`.
    """
    return comparison_table(load_model_set(paths, names, None, min_models=1,
                                           common_conditions=common_conditions))
