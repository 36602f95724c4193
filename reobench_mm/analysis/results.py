"""Aggregation of a robustness sweep.

A sweep evaluates one model under a set of *conditions*: the clean test set and
``(corruption, severity)`` pairs. Its result is a mapping ``condition -> result``:

* a condition is a :class:`~reobench_corruptions.condition.Condition`, its key
  (``'clean'``, ``'cloud@3'``) or its pair (``('clean', 0)``, ``('cloud', 3)``), with a
  corruption of the protocol (engine names, e.g. ``'salt_pepper_noise'``) and a
  severity in 1..5 (:func:`check_condition`). The analysis keys its results by
  ``Condition(corruption, severity, protocol=protocol)``: seed and border are the
  sweep's, not part of a results file, so conditions given with others are read as
  their pair;
* a result is a :class:`ConditionResult` (task metric on the 0-100 scale, optional
  per-class values, optional extra metrics), a dict with its fields
  (``{'value': 61.2, 'per_class': {...}, 'extra': {...}}``), a bare number, or the
  raw metrics dict of the task's evaluator (``IoUMetric``: ``{'aAcc', 'mIoU',
  'mAcc'}``; ``DOTAMetric``: ``{'dota/mAP', 'dota/AP50'}``), read with
  :func:`condition_result_from_metrics` when ``task`` is given.

:func:`aggregate` turns such a mapping into a :class:`RobustnessSummary`:

* per corruption, the mean over its severities;
* ``Avg``, the mean over corruptions of those means, and ``ΔTP = clean - Avg``
  (REOBench, Eq. 1);
* ``mPC``, the mean over every (corruption, severity) value, and
  ``rPC = mPC / clean`` (a fraction; MMDetection's robustness benchmark prints it as
  a percentage);
* the same four numbers per corruption category (environmental / sensor /
  geometric);
* which corruptions and severities were included, and the severities missing per
  corruption.

Subsets are fine: a corruption enters ``Avg`` with the mean of the severities it
has (and is listed in ``missing_severities``); ``Avg`` and ``mPC`` differ only
when severities are missing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from reobench_corruptions import CATEGORIES, get_corruption, list_corruptions
from reobench_corruptions.base import check_protocol, resolve_corruptions
from reobench_corruptions.condition import CLEAN_NAME, Condition
from ..evaluation.keys import RESULTS_TASKS, results_task
from ..fileio import nan_to_null

__all__ = [
    'SEVERITIES', 'AVG', 'SHIFT', 'REOBENCH_TABLE_ORDER', 'PAPER_COLUMN_NAMES',
    'ConditionResult', 'CategoryScores', 'RobustnessSummary', 'check_condition',
    'condition_result_from_metrics', 'as_condition_result', 'normalize_results',
    'merge_results', 'robustness_scores', 'aggregate', 'corruption_order',
    'paper_to_engine_name', 'engine_to_paper_name', 'results_to_jsonable',
    'results_from_jsonable', 'mean'
]

SEVERITIES = (1, 2, 3, 4, 5)
#: Name of the mean over the corruptions where it stands beside the conditions (a row of
#: the cross-model analysis, and its fit).
AVG = 'avg'
#: Name of the cross-model fit against the clean metric on a shifted dataset.
SHIFT = 'shift'

#: Engine name -> column name of the published tables, where they differ.
PAPER_COLUMN_NAMES = {'salt_pepper_noise': 'salt_pepper'}


def _reobench_table_order() -> Tuple[str, ...]:
    """REOBench's tables (Tables 2 and 3) order their corruption columns alphabetically
    by column name; the order is derived from the corruption registry by that rule, so a
    corruption added to the protocol gets its column and enters Avg and ΔTP."""
    return tuple(sorted(list_corruptions('reobench'),
                        key=lambda name: PAPER_COLUMN_NAMES.get(name, name)))


#: Column order of REOBench Tables 2 and 3 (engine names), from the registry.
REOBENCH_TABLE_ORDER = _reobench_table_order()

Number = Union[int, float]


def _as_float(value: Any, what: str) -> float:
    if isinstance(value, bool) or value is None:
        raise TypeError(f'{what} must be a number, got {value!r}')
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f'{what} must be a number, got {value!r}') from None


def _check_metric(value: Any, what: str) -> float:
    value = _as_float(value, what)
    if not math.isfinite(value) or not 0.0 <= value <= 100.0:
        raise ValueError(f'{what} must be a finite number on the 0-100 scale, got {value!r}')
    return value


@dataclass(frozen=True)
class ConditionResult:
    """The result of one condition.

    Attributes:
        value: the task metric (mIoU for segmentation, mAP for oriented detection)
            on the 0-100 scale.
        per_class: optional ``{class name: IoU or AP}`` on the 0-100 scale (NaN is
            allowed for classes absent from the test set).
        extra: optional other metrics (``aAcc``, ``mAcc``, calibration errors, ...),
            stored as given; NaN becomes ``null`` in JSON.
    """
    value: float
    per_class: Optional[Mapping[str, float]] = None
    extra: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, 'value', _check_metric(self.value, 'the task metric'))
        if self.per_class is not None:
            if not isinstance(self.per_class, Mapping):
                raise TypeError(f'per_class must be a mapping class -> value, got '
                                f'{type(self.per_class)}')
            per_class = {str(k): _as_float(v, f'per-class value of {k!r}')
                         for k, v in self.per_class.items()}
            object.__setattr__(self, 'per_class', per_class)
        if not isinstance(self.extra, Mapping):
            raise TypeError(f'extra must be a mapping name -> value, got {type(self.extra)}')
        extra = {str(k): _as_float(v, f'extra metric {k!r}') for k, v in self.extra.items()}
        object.__setattr__(self, 'extra', extra)

    def to_dict(self) -> Dict[str, Any]:
        """``{'value', 'per_class', 'extra'}`` (per-class and extra sorted by name)."""
        return {
            'value': self.value,
            'per_class': None if self.per_class is None else dict(self.per_class),
            'extra': {k: self.extra[k] for k in sorted(self.extra)},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> 'ConditionResult':
        unknown = set(data) - {'value', 'per_class', 'extra'}
        if unknown:
            raise ValueError(f'unknown condition-result fields {sorted(unknown)}; valid: '
                             "['value', 'per_class', 'extra']")
        if 'value' not in data:
            raise ValueError('a condition result needs a "value"')
        per_class = data.get('per_class')
        if per_class is not None:
            per_class = {k: math.nan if v is None else v for k, v in per_class.items()}
        extra = {k: math.nan if v is None else v for k, v in (data.get('extra') or {}).items()}
        return cls(data['value'], per_class, extra)


# ----------------------------------------------------------------------------------
# Conditions
# ----------------------------------------------------------------------------------
def paper_to_engine_name(column: str) -> str:
    """The engine name of a published table column (``'salt_pepper'`` ->
    ``'salt_pepper_noise'``; other names are identical)."""
    for engine, paper in PAPER_COLUMN_NAMES.items():
        if column == paper:
            return engine
    return column


def engine_to_paper_name(name: str) -> str:
    """The published table column of an engine corruption name."""
    return PAPER_COLUMN_NAMES.get(name, name)


def _check_corruption(name: Any, protocol: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f'a corruption name is a str, got {name!r}')
    valid = list_corruptions(protocol)
    if name not in valid:
        hint = ''
        if paper_to_engine_name(name) in valid:
            hint = f' (the engine calls it {paper_to_engine_name(name)!r})'
        raise ValueError(f'unknown corruption {name!r} for protocol {protocol!r}{hint}; '
                         f'valid: {valid}')
    return name


def check_condition(condition: Any, protocol: str = 'reobench') -> Condition:
    """The condition of a results entry: ``Condition(corruption, severity,
    protocol=protocol)``, from a :class:`~reobench_corruptions.condition.Condition`
    (read as its pair), a key (``'clean'``, ``'cloud@3'``) or a pair.

    Stricter than a ``Condition``: the clean condition is ``('clean', 0)`` (a corruption
    at severity 0 or ``'clean'`` at another severity is an error, not clean), the
    severity is 1..5 otherwise, and an unknown name is a ValueError that names the
    engine's name of a published column (``'salt_pepper'``).
    """
    if isinstance(condition, Condition):
        condition = condition.pair
    elif isinstance(condition, str):
        condition = _parse_key(condition)
    if not isinstance(condition, (tuple, list)) or len(condition) != 2:
        raise ValueError(f"a condition is ('clean', 0) or (corruption, severity), got "
                         f'{condition!r}')
    name, severity = condition
    if isinstance(severity, np.integer):
        severity = int(severity)
    if isinstance(severity, bool) or not isinstance(severity, int):
        raise ValueError(f'the severity of condition {condition!r} must be an integer, '
                         f'got {severity!r}')
    if name == CLEAN_NAME:
        if severity != 0:
            raise ValueError(f"the clean condition is ('clean', 0), got {condition!r}")
        return Condition(protocol=protocol)
    _check_corruption(name, protocol)
    if severity == 0:
        raise ValueError(f'condition {condition!r}: severity 0 is the clean condition; '
                         "write it as ('clean', 0)")
    if not 1 <= severity <= 5:
        raise ValueError(f'condition {condition!r}: severity must be in 1..5, got '
                         f'{severity}')
    return Condition(name, severity, protocol=protocol)


def _parse_key(key: str) -> Tuple[str, int]:
    """The pair of a condition key (``'clean'``, ``'<corruption>@<severity>'``)."""
    if key == CLEAN_NAME:
        return CLEAN_NAME, 0
    name, sep, severity = key.rpartition('@')
    if not sep or not severity.lstrip('-').isdigit():
        raise ValueError(f"a condition key is 'clean' or '<corruption>@<severity>', got "
                         f'{key!r}')
    return name, int(severity)


def corruption_order(names: Iterable[str], protocol: str = 'reobench') -> List[str]:
    """``names`` in table order: REOBench Table 2 order for ``'reobench'``, the
    engine's registration order otherwise."""
    names = set(names)
    # read from the registry on every call: a corruption registered later has its place
    reference = _reobench_table_order() if protocol == 'reobench' \
        else list_corruptions(protocol)
    unknown = names - set(reference)
    if unknown:  # an unregistered name (a registered one is in the reference)
        _check_corruption(sorted(unknown)[0], protocol)
    return [n for n in reference if n in names]


def _sorted_conditions(conditions: Iterable[Condition], protocol: str) -> List[Condition]:
    conditions = list(conditions)
    order = {n: i for i, n in enumerate(corruption_order(
        {c.corruption for c in conditions if not c.is_clean}, protocol))}
    order[CLEAN_NAME] = -1
    return sorted(conditions, key=lambda c: (order[c.corruption], c.severity))


# ----------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------
def condition_result_from_metrics(metrics: Mapping[str, Any], task: str,
                                  per_class: Optional[Mapping[str, float]] = None,
                                  metric_key: Optional[str] = None,
                                  scale: Optional[float] = None) -> ConditionResult:
    """A :class:`ConditionResult` from an evaluator's metrics dict.

    Args:
        metrics: e.g. ``IoUMetric``'s ``{'aAcc': 97.1, 'mIoU': 61.2, 'mAcc': 70.4}``
            or ``DOTAMetric``'s ``{'dota/mAP': 0.612, 'dota/AP50': 0.612}``.
        task: ``'segmentation'`` or ``'detection'``.
        per_class: optional per-class values already on the 0-100 scale (e.g. read
            from ``IoUMetric``'s class table). Keys ``'IoU.<class>'`` / ``'AP.<class>'``
            in ``metrics`` are read too (scaled like the task metric).
        metric_key: the key of the task metric (default: the task's keys, e.g.
            ``'mIoU'``, ``'dota/mAP'`` then ``'mAP'``). Per-class keys carry the same
            evaluator prefix (``'dota/AP.<class>'`` beside ``'dota/mAP'``).
        scale: factor to 0-100 (default: the task's, 1 for ``mIoU``, 100 for ``mAP``).

    Every other numeric entry goes to ``extra`` unchanged.
    """
    spec = results_task(task)
    if not isinstance(metrics, Mapping):
        raise TypeError(f'metrics must be a mapping, got {type(metrics)}')
    keys = (metric_key, ) if metric_key else spec.metric_keys
    key = next((k for k in keys if k in metrics), None)
    if key is None:
        raise KeyError(f'the {task} metric ({" or ".join(keys)}) is not in the metrics; '
                       f'got keys {sorted(metrics)}')
    scale = spec.scale if scale is None else float(scale)
    value = _as_float(metrics[key], f'metric {key!r}') * scale
    if math.isfinite(value) and not 0.0 <= value <= 100.0:
        raise ValueError(f'metric {key!r} = {metrics[key]!r} times scale {scale:g} is '
                         f'{value:g}, outside 0..100; pass scale= matching the '
                         "evaluator's output")
    # per-class keys carry the task metric's evaluator prefix: 'dota/mAP' -> 'dota/AP.<class>'
    evaluator_prefix = key.rpartition('/')[0] + '/' if '/' in key else ''
    prefix = evaluator_prefix + spec.per_class_name + '.'
    found = {k[len(prefix):]: _as_float(v, k) * scale for k, v in metrics.items()
             if isinstance(k, str) and k.startswith(prefix)}
    if per_class is not None:
        found.update({str(k): _as_float(v, f'per-class {k!r}') for k, v in per_class.items()})
    extra = {}
    for k, v in metrics.items():
        if k == key or (isinstance(k, str) and k.startswith(prefix)):
            continue
        if isinstance(v, bool):
            continue
        try:
            extra[str(k)] = float(v)
        except (TypeError, ValueError):
            continue
    return ConditionResult(value, found or None, extra)


def as_condition_result(result: Any, task: Optional[str] = None) -> ConditionResult:
    """Coerce one result: a :class:`ConditionResult`, a number, a dict with a
    ``'value'`` field, or (with ``task``) an evaluator's metrics dict."""
    if isinstance(result, ConditionResult):
        return result
    if isinstance(result, Mapping):
        if 'value' in result:
            return ConditionResult.from_dict(result)
        if task is None:
            raise ValueError(f'a raw metrics dict (keys {sorted(result)}) needs task= '
                             f'(one of {sorted(RESULTS_TASKS)}) to find the task metric')
        return condition_result_from_metrics(result, task)
    if isinstance(result, bool):
        raise TypeError(f'a condition result cannot be a bool ({result!r})')
    if isinstance(result, (int, float)) or hasattr(result, '__float__'):
        return ConditionResult(float(result))
    raise TypeError(f'cannot read a condition result from {type(result)}')


def normalize_results(results: Mapping[Any, Any], protocol: str = 'reobench',
                      task: Optional[str] = None) -> Dict[Condition, ConditionResult]:
    """Validate a ``condition -> result`` mapping (conditions as :func:`check_condition`
    reads them). Returns ``Condition -> ConditionResult`` in table order."""
    check_protocol(protocol)
    if not isinstance(results, Mapping):
        raise TypeError(f'results must be a mapping condition -> result, got {type(results)}')
    out: Dict[Condition, ConditionResult] = {}
    for cond, result in results.items():
        cond = check_condition(cond, protocol)
        if cond in out:
            raise ValueError(f'condition {cond.key!r} appears twice')
        try:
            out[cond] = as_condition_result(result, task)
        except (TypeError, ValueError) as error:  # name the condition
            raise type(error)(f'condition {cond.key!r}: {error}') from None
    return {c: out[c] for c in _sorted_conditions(out, protocol)}


def merge_results(partials: Sequence[Mapping[Any, Any]], protocol: str = 'reobench',
                  task: Optional[str] = None) -> Dict[Condition, ConditionResult]:
    """Merge the condition maps of several shards into one.

    A condition present in several shards must have the same result in each
    (identical duplicates are accepted, e.g. the clean condition evaluated by every
    shard); different results raise a ValueError naming the condition and shards.
    """
    if isinstance(partials, Mapping):
        raise TypeError('merge_results takes a sequence of condition maps, got one map')
    merged: Dict[Condition, ConditionResult] = {}
    source: Dict[Condition, int] = {}
    for index, partial in enumerate(partials):
        for cond, result in normalize_results(partial, protocol, task).items():
            if cond in merged and nan_to_null(merged[cond].to_dict()) != \
                    nan_to_null(result.to_dict()):  # NaN == NaN here
                raise ValueError(
                    f'conflicting results for condition {cond.key!r}: shard '
                    f'{source[cond]} has {merged[cond].value!r}, shard {index} has '
                    f'{result.value!r}' + ('' if merged[cond].value != result.value else
                                           ' (per-class or extra metrics differ)'))
            merged.setdefault(cond, result)
            source.setdefault(cond, index)
    return {c: merged[c] for c in _sorted_conditions(merged, protocol)}


def results_to_jsonable(results: Mapping[Condition, Any],
                        protocol: str = 'reobench') -> Dict[str, Any]:
    """``{'clean': {...}, 'cloud@3': {...}}`` (NaN as ``null``), for shard files."""
    results = normalize_results(results, protocol)
    return {c.key: nan_to_null(r.to_dict()) for c, r in results.items()}


def results_from_jsonable(data: Mapping[str, Any],
                          protocol: str = 'reobench') -> Dict[Condition, ConditionResult]:
    """Inverse of :func:`results_to_jsonable`."""
    return normalize_results(data, protocol)


# ----------------------------------------------------------------------------------
# Aggregation
# ----------------------------------------------------------------------------------
def mean(values: Iterable[float]) -> float:
    """Order-independent, correctly rounded mean (``math.fsum``); NaN if empty."""
    values = [float(v) for v in values]
    return math.fsum(values) / len(values) if values else math.nan


@dataclass(frozen=True)
class CategoryScores:
    """Scores of one corruption category (or of all corruptions)."""
    corruptions: Tuple[str, ...]
    avg: float
    delta_tp: float
    mpc: float
    rpc: float

    def to_dict(self) -> Dict[str, Any]:
        return {'corruptions': list(self.corruptions), 'avg': self.avg,
                'delta_tp': self.delta_tp, 'mpc': self.mpc, 'rpc': self.rpc}


def robustness_scores(clean: Number, per_corruption: Mapping[str, Number],
                      protocol: str = 'reobench',
                      per_severity: Optional[Mapping[str, Mapping[int, Number]]] = None
                      ) -> Dict[str, Any]:
    """``Avg``, ``ΔTP`` (and ``mPC``, ``rPC``), overall and per category, from the
    clean metric and the per-corruption means.

    ``per_severity`` (corruption -> severity -> value) gives ``mPC`` as the mean over
    all values; without it ``mPC`` is the mean of the per-corruption means (the same
    number when every corruption has the same severities).

    Returns ``{'overall': CategoryScores, 'per_category': {category: CategoryScores}}``.
    """
    clean = _check_metric(clean, 'the clean metric')
    if not per_corruption:
        raise ValueError('no corruption results: Avg needs at least one corruption')
    names = corruption_order(per_corruption, protocol)
    means = {n: _check_metric(per_corruption[n], f'the mean of {n!r}') for n in names}

    def scores(members: List[str]) -> CategoryScores:
        avg = mean(means[n] for n in members)
        if per_severity is not None:
            mpc = mean(v for n in members for v in per_severity[n].values())
        else:
            mpc = avg
        rpc = mpc / clean if clean > 0 else math.nan
        return CategoryScores(tuple(members), avg, clean - avg, mpc, rpc)

    per_category = {}
    for category in CATEGORIES:
        members = [n for n in names if get_corruption(n, protocol).category == category]
        if members:
            per_category[category] = scores(members)
    return {'overall': scores(names), 'per_category': per_category}


@dataclass
class RobustnessSummary:
    """Everything :func:`aggregate` computes; :meth:`to_dict` is the numbers part
    of ``results.json``.

    Attributes:
        protocol, task, metric: the corruption protocol, the task (or None) and the
            metric's display name.
        clean: the clean metric.
        conditions: the validated ``condition -> ConditionResult`` map, table order.
        corruptions: included corruptions, table order.
        severities: the expected severities (default: every severity seen).
        per_severity: corruption -> {severity: metric}.
        per_corruption: corruption -> mean over its severities.
        missing_severities: corruption -> expected severities it lacks (only
            corruptions that lack some).
        not_evaluated: corruptions of the protocol absent from the results.
        avg, delta_tp, mpc, rpc: overall scores (``rpc`` is a fraction).
        per_category: category -> :class:`CategoryScores`.
        per_class: None, or ``{'clean': {cls: v}, 'per_corruption': {c: {cls: v}},
            'avg': {cls: v}, 'delta_tp': {cls: v}}`` when every condition has
            per-class values for the same classes.
        extra: extra metric -> ``{'clean', 'per_corruption', 'avg'}`` for the extra
            metrics every condition has.
        seen_in_training: the corruptions the model's training pipeline could apply
            (empty: none, or not known).
        held_out: the scores over the included corruptions *not* in
            ``seen_in_training`` (None when nothing was seen, or everything included
            was seen).
        intervals: None, or the bootstrap intervals of these numbers
            (:func:`~reobench_mm.analysis.intervals.summary_intervals`; a block saying why
            there are none when the records have no per-image statistics).
        corruption_seeds: None, or, when random corruptions were evaluated with several
            corruption seeds and their cells are the means over the seeds, the block of
            :func:`~reobench_mm.analysis.corruption_seeds.fold_seeds`.
        blocks: the blocks of the conditions that are not corruptions of the test set,
            by name, in the order of
            :data:`~reobench_mm.analysis.result_blocks.RESULT_BLOCKS` (``'shifts'``: the
            shift sets' :func:`~reobench_mm.analysis.shift_table.shift_block`,
            ``'attacks'``: :func:`~reobench_mm.analysis.attack_table.attack_block`);
            empty: none.
    """
    protocol: str
    task: Optional[str]
    metric: str
    clean: float
    conditions: Dict[Condition, ConditionResult]
    corruptions: Tuple[str, ...]
    severities: Tuple[int, ...]
    per_severity: Dict[str, Dict[int, float]]
    per_corruption: Dict[str, float]
    missing_severities: Dict[str, Tuple[int, ...]]
    not_evaluated: Tuple[str, ...]
    avg: float
    delta_tp: float
    mpc: float
    rpc: float
    per_category: Dict[str, CategoryScores]
    per_class: Optional[Dict[str, Any]] = None
    extra: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    seen_in_training: Tuple[str, ...] = ()
    held_out: Optional[CategoryScores] = None
    intervals: Optional[Dict[str, Any]] = None
    corruption_seeds: Optional[Dict[str, Any]] = None
    blocks: Dict[str, Dict[str, Any]] = field(default_factory=dict)

    def category(self, name: str) -> str:
        """The category of corruption ``name``."""
        return get_corruption(name, self.protocol).category

    def to_dict(self) -> Dict[str, Any]:
        """The numbers (deterministic order, NaN as ``null``)."""
        conditions = []
        for cond, result in self.conditions.items():
            row = {'condition': cond.key, 'corruption': cond.corruption,
                   'severity': cond.severity,
                   'category': None if cond.is_clean else self.category(cond.corruption)}
            row.update(result.to_dict())
            conditions.append(row)
        data = {
            'task': self.task,
            'metric': self.metric,
            'protocol': self.protocol,
            'clean': self.clean,
            'avg': self.avg,
            'delta_tp': self.delta_tp,
            'mpc': self.mpc,
            'rpc': self.rpc,
            'per_corruption': {
                n: {'category': self.category(n), 'mean': self.per_corruption[n],
                    'drop': self.clean - self.per_corruption[n],
                    'severities': {str(s): v for s, v in self.per_severity[n].items()},
                    'missing_severities': list(self.missing_severities.get(n, ()))}
                for n in self.corruptions
            },
            'per_category': {c: s.to_dict() for c, s in self.per_category.items()},
            'included': {
                'corruptions': list(self.corruptions),
                'severities': list(self.severities),
                'missing_severities': {n: list(s) for n, s in self.missing_severities.items()},
                'not_evaluated': list(self.not_evaluated),
                'complete': not self.missing_severities and not self.not_evaluated,
            },
            'per_class': self.per_class,
            'extra': self.extra,
            'conditions': conditions,
        }
        if self.seen_in_training:
            data['training'] = {
                'seen_corruptions': list(self.seen_in_training),
                'held_out': None if self.held_out is None else self.held_out.to_dict()}
        if self.intervals is not None:
            data['intervals'] = self.intervals
        if self.corruption_seeds is not None:
            data['corruption_seeds'] = self.corruption_seeds
        data.update(self.blocks)
        return nan_to_null(data)


def aggregate(results: Mapping[Any, Any], protocol: str = 'reobench',
              task: Optional[str] = None, metric: Optional[str] = None,
              expected_severities: Optional[Sequence[int]] = None,
              seen_in_training: Optional[Sequence[str]] = None) -> RobustnessSummary:
    """Aggregate a sweep's ``condition -> result`` map (see the module docstring).

    Args:
        results: ``{('clean', 0): r, ('cloud', 1): r, ...}``; results are
            :class:`ConditionResult`, dicts, numbers, or evaluator metrics dicts
            (with ``task``).
        protocol: corruption protocol of the names.
        task: ``'segmentation'`` / ``'detection'``; needed for raw metrics dicts,
            and gives the metric's display name.
        metric: display name (default: the task's, else ``'metric'``).
        expected_severities: the severities the sweep ran (default: every severity
            present); corruptions lacking some are listed in ``missing_severities``.
        seen_in_training: corruptions (names or groups of ``protocol``) the model's
            training pipeline applied; the summary then also scores the included
            corruptions outside them (``held_out``) and the report marks the seen ones.

    Raises:
        ValueError: empty results, no clean condition, no corruption condition, an
            unknown corruption, a severity outside 1..5, an expected severity
            outside 1..5.
    """
    check_protocol(protocol)
    if task is not None:
        results_task(task)
    if not results:
        raise ValueError('empty results: nothing to aggregate')
    conditions = normalize_results(results, protocol, task)
    clean_result = conditions.get(Condition(protocol=protocol))
    if clean_result is None:
        raise ValueError("no clean condition ('clean', 0) in the results: ΔTP and rPC "
                         'need the clean metric')
    clean = clean_result.value

    per_severity: Dict[str, Dict[int, float]] = {}
    for cond, result in conditions.items():
        if not cond.is_clean:
            per_severity.setdefault(cond.corruption, {})[cond.severity] = result.value
    if not per_severity:
        raise ValueError('the results hold only the clean condition: no corruption to '
                         'aggregate')
    corruptions = tuple(corruption_order(per_severity, protocol))
    per_severity = {n: dict(sorted(per_severity[n].items())) for n in corruptions}
    if expected_severities is None:
        severities = tuple(sorted({s for v in per_severity.values() for s in v}))
    else:
        severities = tuple(sorted({_check_severity(s) for s in expected_severities}))
        extra_sev = sorted({s for v in per_severity.values() for s in v} - set(severities))
        if extra_sev:
            raise ValueError(f'results hold severities {extra_sev} not in '
                             f'expected_severities {list(severities)}')
    missing = {n: tuple(s for s in severities if s not in per_severity[n])
               for n in corruptions}
    missing = {n: s for n, s in missing.items() if s}
    per_corruption = {n: mean(per_severity[n].values()) for n in corruptions}
    scores = robustness_scores(clean, per_corruption, protocol, per_severity)
    overall = scores['overall']
    not_evaluated = tuple(n for n in corruption_order(list_corruptions(protocol), protocol)
                          if n not in per_severity)
    if metric is None:
        metric = results_task(task).metric_name if task else 'metric'
    seen = tuple(resolve_corruptions(list(seen_in_training or ()), protocol))
    held = [n for n in corruptions if n not in seen]
    held_out = None
    if seen and held:
        held_out = robustness_scores(clean, {n: per_corruption[n] for n in held}, protocol,
                                     {n: per_severity[n] for n in held})['overall']
    return RobustnessSummary(
        protocol=protocol, task=task, metric=metric, clean=clean, conditions=conditions,
        corruptions=corruptions, severities=severities, per_severity=per_severity,
        per_corruption=per_corruption, missing_severities=missing,
        not_evaluated=not_evaluated, avg=overall.avg, delta_tp=overall.delta_tp,
        mpc=overall.mpc, rpc=overall.rpc, per_category=scores['per_category'],
        per_class=_per_class_scores(conditions, clean_result, corruptions),
        extra=_extra_scores(conditions, clean_result, corruptions),
        seen_in_training=seen, held_out=held_out)


def _check_severity(severity: Any) -> int:
    if isinstance(severity, np.integer):
        severity = int(severity)
    if isinstance(severity, bool) or not isinstance(severity, int) or not 1 <= severity <= 5:
        raise ValueError(f'expected severities are integers in 1..5, got {severity!r}')
    return severity


def _group_means(conditions: Mapping[Condition, ConditionResult], corruptions: Sequence[str],
                 get) -> Dict[str, Any]:
    """Per-corruption means of ``get(result)`` (a dict of values)."""
    out = {}
    for name in corruptions:
        rows = [get(r) for (n, _), r in conditions.items() if n == name]
        out[name] = {k: mean(row[k] for row in rows) for k in rows[0]}
    return out


def _per_class_scores(conditions: Mapping[Condition, ConditionResult],
                      clean_result: ConditionResult,
                      corruptions: Sequence[str]) -> Optional[Dict[str, Any]]:
    tables = [r.per_class for r in conditions.values()]
    if any(t is None for t in tables):
        return None
    classes = list(tables[0])
    if any(set(t) != set(classes) for t in tables):
        return None
    clean = dict(clean_result.per_class)
    per_corruption = _group_means(conditions, corruptions,
                                  lambda r: {k: r.per_class[k] for k in classes})
    avg = {k: mean(per_corruption[n][k] for n in corruptions) for k in classes}
    return {'classes': classes, 'clean': clean, 'per_corruption': per_corruption,
            'avg': avg, 'delta_tp': {k: clean[k] - avg[k] for k in classes}}


def _extra_scores(conditions: Mapping[Condition, ConditionResult],
                  clean_result: ConditionResult,
                  corruptions: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    keys = set.intersection(*(set(r.extra) for r in conditions.values()))
    out = {}
    for key in sorted(keys):
        per_corruption = {n: v[key] for n, v in _group_means(
            conditions, corruptions, lambda r: {key: r.extra[key]}).items()}
        out[key] = {'clean': clean_result.extra[key],
                    'per_corruption': per_corruption,
                    'avg': mean(per_corruption.values())}
    return out
