"""Groups of models cell by cell: the group means of every measure in every condition
(each corruption at each severity, and clean) and the ECE ratio per corruption and
severity.

Two views of the calibration study of geospatial foundation models, added to the group
analysis of :mod:`~reobench_mm.analysis.groups`:

- its Table IV lists, per group of encoders, the metrics of each severity × corruption
  cell; :func:`group_cells` gives, per grouping and group, the mean over the group's
  models of every measure of the model set (the task metric, ``calib/ECE`` and every
  other calibration number all models report) in every condition;
- its Fig. 5 gives ``ECE(corruption at severity) / ECE(clean)`` per corruption, not
  averaged over the corruptions: :func:`ece_ratio` is that ratio for every model and
  every corrupted condition, and its group mean (the mean of the models' ratios, not
  the ratio of the group's mean ECEs) is one more measure of the cells,
  :data:`ECE_RATIO_KEY`. The study's figure is the severity-5 column.

The summary ratio of :func:`~reobench_mm.analysis.groups.group_numbers` (the strongest
severity averaged over the corruptions) is another number; both are reported.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from reobench_corruptions.condition import Condition
from ..evaluation.keys import ECE_KEY
from .model_set import ModelSet
from .tables import column_title, fmt_number, markdown_table

__all__ = ['ECE_RATIO_KEY', 'GroupCells', 'ece_ratio', 'group_cells', 'group_cells_csv_rows',
           'group_cells_markdown']

#: The measure name of the ECE ratio ``ECE(condition) / ECE(clean)`` in the cells.
ECE_RATIO_KEY = f'{ECE_KEY}/clean'


def ece_ratio(model_set: ModelSet) -> np.ndarray:
    """``ECE(condition) / ECE(clean)`` of every model (rows) in every condition of the
    model set (columns, in its order; the clean column is 1), NaN where a model's clean
    ECE is 0.

    Raises:
        ValueError: the model set has no ``calib/ECE``.
    """
    if ECE_KEY not in model_set.values:
        raise ValueError(f'the ECE ratio needs {ECE_KEY} of every model in every condition '
                         '(evaluate with --calibration)')
    ece = model_set.values[ECE_KEY]
    clean = model_set.clean(ECE_KEY)[:, None]
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.where(clean != 0, ece / np.where(clean != 0, clean, 1.0), math.nan)


@dataclass
class GroupCells:
    """Group means of every measure in every condition (:func:`group_cells`).

    Attributes:
        models: the models, in the model set's order.
        metric: the task metric (the first measure).
        measures: every measure of :attr:`values`: the task metric, the calibration
            numbers, then :data:`ECE_RATIO_KEY` when ``calib/ECE`` is present.
        conditions: clean first, then the corrupted conditions (the model set's order).
        corruptions, severities: those of the corrupted conditions.
        values: measure -> ``models × conditions`` (the model set's values, and the ECE
            ratio of :func:`ece_ratio`).
        members: grouping -> group label -> its models (labels in order of first
            appearance among the models).
        means: grouping -> group label -> measure -> one mean per condition.
    """
    models: List[str]
    metric: str
    measures: List[str]
    conditions: List[Condition]
    corruptions: List[str]
    severities: List[int]
    values: Dict[str, np.ndarray]
    members: Dict[str, Dict[str, List[str]]]
    means: Dict[str, Dict[str, Dict[str, np.ndarray]]]

    def mean(self, grouping: str, label: str, measure: str, condition: str) -> float:
        """The group mean of ``measure`` in ``condition`` (a key: ``'clean'``,
        ``'haze@3'``); NaN for a condition the model set does not have."""
        keys = [c.key for c in self.conditions]
        if condition not in keys:
            return math.nan
        return float(self.means[grouping][label][measure][keys.index(condition)])

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serialisable: the definition of the ratio, each model's ratio per
        corrupted condition, and per grouping and group its members and the mean of
        every measure per condition (undefined values None)."""
        keys = [c.key for c in self.conditions]
        corrupted = [j for j, c in enumerate(self.conditions) if not c.is_clean]
        ratio = self.values.get(ECE_RATIO_KEY)
        return {
            'measures': self.measures, 'conditions': keys,
            'ece_ratio': f'{ECE_KEY}(condition) / {ECE_KEY}(clean) per model; the group '
                         'value is the mean of its models\' ratios',
            'ece_ratio_per_model': None if ratio is None else {
                m: {keys[j]: _number(ratio[i, j]) for j in corrupted}
                for i, m in enumerate(self.models)},
            'groupings': {name: {label: {
                'members': members,
                'means': {measure: {keys[j]: _number(v) for j, v in enumerate(values)}
                          for measure, values in self.means[name][label].items()}}
                for label, members in by_label.items()}
                for name, by_label in self.members.items()}}


def _number(value: Any) -> Optional[float]:
    value = float(value)
    return value if math.isfinite(value) else None


def group_cells(model_set: ModelSet, groupings: Mapping[str, Mapping[str, str]]) -> GroupCells:
    """Per grouping and group, the mean over its models of every measure in every
    condition (with ``calib/ECE``, the ECE ratio of :func:`ece_ratio` too).

    Args:
        model_set: the models' results.
        groupings: ``{grouping: {model: label}}`` giving every model a label (as checked
            by :func:`~reobench_mm.analysis.groups.check_groupings`).
    """
    models = list(model_set.models)
    values = dict(model_set.values)
    if ECE_KEY in values:
        values[ECE_RATIO_KEY] = ece_ratio(model_set)
    members: Dict[str, Dict[str, List[str]]] = {}
    means: Dict[str, Dict[str, Dict[str, np.ndarray]]] = {}
    for name, mapping in groupings.items():
        labels = list(dict.fromkeys(mapping[m] for m in models))
        members[name] = {label: [m for m in models if mapping[m] == label]
                         for label in labels}
        means[name] = {}
        for label, group in members[name].items():
            rows = [models.index(m) for m in group]
            means[name][label] = {k: v[rows].mean(axis=0) for k, v in values.items()}
    corrupted = [c for c in model_set.conditions if not c.is_clean]
    return GroupCells(models, model_set.metric, list(values), list(model_set.conditions),
                      list(model_set.corruptions), sorted({c.severity for c in corrupted}),
                      values, members, means)


def group_cells_csv_rows(cells: GroupCells) -> Tuple[List[str], List[List[Any]]]:
    """``group_cells.csv``: one row per grouping × group × measure × condition (the
    group mean; the ECE ratio only in the corrupted conditions)."""
    rows: List[List[Any]] = []
    for name, by_label in cells.members.items():
        for label, group in by_label.items():
            for measure in cells.measures:
                for j, condition in enumerate(cells.conditions):
                    if measure == ECE_RATIO_KEY and condition.is_clean:
                        continue
                    rows.append([name, label, len(group), condition.key,
                                 condition.corruption, condition.severity, measure,
                                 float(cells.means[name][label][measure][j])])
    return ['grouping', 'group', 'n', 'condition', 'corruption', 'severity', 'measure',
            'mean'], rows


def _digits(measure: str, metric: str) -> int:
    return 2 if measure in (metric, ECE_RATIO_KEY) else 4


def group_cells_markdown(cells: Optional[GroupCells]) -> List[str]:
    """Per grouping, a table per measure (the task metric, ``calib/ECE`` and the ECE
    ratio): a row per group and severity (``clean`` first, its value in every column),
    a column per corruption. The other calibration numbers are in the CSV only."""
    if cells is None:
        return []
    shown = [m for m in (cells.metric, ECE_KEY, ECE_RATIO_KEY) if m in cells.measures]
    lines = ['### Per corruption and severity', '',
             'Group means of each cell (severity × corruption; severity 0 is the clean test '
             f'set, the same for every corruption). {ECE_RATIO_KEY}: per model '
             f'{ECE_KEY}(corruption at severity) / {ECE_KEY}(clean), per corruption and not '
             'averaged over the corruptions, then the mean over the group\'s models. The '
             'other calibration numbers are in group_cells.csv.', '']
    header_names = [column_title(c) for c in cells.corruptions]
    for name, by_label in cells.members.items():
        for measure in shown:
            rows = []
            for label, group in by_label.items():
                severities = ([] if measure == ECE_RATIO_KEY else [0]) + cells.severities
                for severity in severities:
                    row = [f'{label} (n={len(group)})', 'clean' if severity == 0
                           else str(severity)]
                    for corruption in cells.corruptions:
                        key = 'clean' if severity == 0 else f'{corruption}@{severity}'
                        row.append(fmt_number(cells.mean(name, label, measure, key),
                                              _digits(measure, cells.metric)))
                    rows.append(row)
            lines += [f'#### Grouping: {name} — {measure}', '']
            lines += markdown_table(['Group', 'Severity'] + header_names, rows, 2) + ['']
    return lines
