"""Several models' results, read together: the one loader of several ``results.json``
files (:func:`load_model_set`), the clean metric of the same models on a shifted dataset
(:func:`load_shift_values`) and the comparison table of
``tools/analysis_tools/robustness_table.py`` (:func:`build_comparison`), a view of what
the loader returns.
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..corruptions.condition import Condition
from ..evaluation.keys import ECE_KEY
from .results import AVG, corruption_order, robustness_scores
from .results_file import ResultsFile, read_results
from .tables import ComparisonTable

__all__ = ['ModelSet', 'load_model_set', 'load_shift_values', 'build_comparison']


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _read_files(paths: Sequence[str], names: Optional[Sequence[Optional[str]]],
                what: str, distinct_names: bool = True
                ) -> Tuple[List[str], List[ResultsFile], Optional[str], str, str]:
    """Read results files; return names, files, task, metric and protocol
    (``distinct_names``: a name given to two files is an error)."""
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError(f'no {what} files given')
    if names is not None and len(names) != len(paths):
        raise ValueError(f'{len(names)} names given for {len(paths)} {what} files; give '
                         'one name per file')
    files = [read_results(p) for p in paths]
    model_names = [str((names[i] if names is not None else None) or file.model)
                   for i, file in enumerate(files)]
    repeated = sorted({n for n in model_names if model_names.count(n) > 1})
    if repeated and distinct_names:
        raise ValueError(f'model names must be unique among the {what} files; repeated: '
                         f'{repeated} (give distinct names, e.g. with --names)')
    for key in ('task', 'metric', 'protocol'):
        seen: Dict[str, List[str]] = {}
        for path, file in zip(paths, files):
            seen.setdefault(str(getattr(file, key)), []).append(path)
        if len(seen) > 1:
            detail = '; '.join(f'{k}: {", ".join(v)}' for k, v in seen.items())
            raise ValueError(f'the {what} files must share one {key}, got {detail}')
    first = files[0]
    return model_names, files, first.task, first.metric, first.protocol


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
        files: the results files, in the order of ``models`` (what each file itself
            holds: its own severities, per-corruption means, provenance).
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
    files: List[ResultsFile] = field(default_factory=list)

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
    models, files, task, metric, protocol = _read_files(paths, names, 'results',
                                                        distinct_names)
    rows = [file.conditions for file in files]
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
    values = {metric: np.array([[r[c].value for c in conditions] for r in rows])}
    calibration = [[r[c].extra.get(calibration_key) for c in conditions] for r in rows]
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
                    dropped=dropped, notes=notes, files=files)


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
    shift_names, files, task, metric, _ = _read_files(paths, names, 'shift results')
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
    return values, {m: os.fspath(by_name[m][0]) for m in model_set.models}, notes


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
    files, protocol = model_set.files, model_set.protocol
    msgs: List[str] = []
    common = set.intersection(*(set(f.summary.per_corruption) for f in files))
    if not common:
        raise ValueError('the files have no corruption in common')
    columns = corruption_order(common, protocol)
    severity_sets = {tuple(f.severities) for f in files}
    if len(severity_sets) > 1:
        msgs.append('the files average over different severities (' + '; '.join(
            f'{p}: {", ".join(map(str, f.severities))}'
            for p, f in zip(model_set.paths, files)) + '): their columns are not directly '
            'comparable')
    rows = []
    for name, path, file in zip(model_set.models, model_set.paths, files):
        summary = file.summary
        dropped = [c for c in summary.per_corruption if c not in common]
        if dropped:
            msgs.append(f'{path}: corruptions left out (not in every file): '
                        f'{", ".join(dropped)}; its Avg/ΔTP are recomputed over the '
                        f'{len(columns)} common corruptions')
        incomplete = {c: v for c, v in summary.missing_severities.items() if c in common}
        if incomplete:
            msgs.append(f'{path}: missing severities ' + '; '.join(
                f'{c}: {", ".join(map(str, v))}' for c, v in incomplete.items()))
        means = {c: summary.per_corruption[c] for c in columns}
        scores = robustness_scores(summary.clean, means, protocol)['overall']
        row = {'model': name, 'backbone': file.backbone, 'clean': summary.clean}
        row.update(means)
        row.update(avg=scores.avg, delta_tp=scores.delta_tp)
        rows.append(row)
    for msg in msgs:
        warnings.warn(msg, stacklevel=2)
    return ComparisonTable(model_set.metric, protocol, columns, rows, msgs)
