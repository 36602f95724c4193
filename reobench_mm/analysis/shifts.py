"""Robustness to real distribution shifts across models: the EarthShift analysis.

A *shift point* is one model evaluated on one pair of test sets: in distribution (ID,
the set it was trained for) and out of distribution (OOD, a paired set of another place,
time, scale, sensor or source), each a metric on the 0-100 scale. For a set of points,
tagged with the dataset pair, its shift type and, optionally, a user group of the model
(``geofm``, ``imagenet``, ``random``), :func:`analyze_shifts` gives:

- per point the absolute OOD loss ``ID - OOD`` and the relative OOD loss
  ``(ID - OOD) / ID`` (a fraction; EarthShift reports it in percent);
- per shift type one baseline ``OOD = a * ID + b`` fitted by least squares pooled over
  every model *and* dataset pair of that type
  (:func:`~reobench_mm.analysis.effective_robustness.effective_robustness_fit`), in both
  spaces (``linear`` on the raw values and ``logit``, see that module), with a bootstrap
  band over models (a model is resampled with all its points);
- each point's effective robustness (its residual from its shift type's line, metric
  points; positive: more robust than its ID accuracy predicts) with a bootstrap interval;
- group means per shift type (and over all types): the number of points, mean ID, OOD,
  relative loss and residuals.

The points come from results files (:func:`load_shift_points`: a CSV naming, per row,
the model, its group, the dataset pair, the shift type and the ID and OOD
``results.json``; each side's value is its clean metric), or are built directly.
:func:`~reobench_mm.analysis.shift_report.write_shift_analysis` writes
``shift_analysis.json``, ``.csv``, ``.md`` and ``ood_vs_id.png``.
"""
from __future__ import annotations

import csv
import math
import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..fileio import nan_to_null
from .effective_robustness import FIT_SPACES, EffectiveRobustnessFit, effective_robustness_fit
from .results import mean
from .results_file import read_results

__all__ = ['ShiftPoint', 'ShiftAnalysis', 'analyze_shifts',
           'load_shift_points', 'POINT_COLUMNS']

#: The columns of the CSV that :func:`load_shift_points` reads (``group`` may be empty).
POINT_COLUMNS = ('model', 'group', 'dataset', 'shift_type', 'id_results', 'ood_results')
ALL = 'all'


@dataclass(frozen=True)
class ShiftPoint:
    """One model on one ID -> OOD pair (values 0-100)."""
    model: str
    dataset: str
    shift_type: str
    id_value: float
    ood_value: float
    group: Optional[str] = None

    def __post_init__(self) -> None:
        for name in ('model', 'dataset', 'shift_type'):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f'a shift point needs a non-empty {name}, got {value!r}')
        if self.group is not None and (not isinstance(self.group, str) or not self.group):
            raise ValueError(f'a group is a non-empty name or None, got {self.group!r}')
        for name in ('id_value', 'ood_value'):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or not 0.0 <= value <= 100.0:
                raise ValueError(f'{self.model} on {self.dataset}: {name} must be a metric '
                                 f'in 0..100, got {value!r}')
            object.__setattr__(self, name, float(value))

    @property
    def loss(self) -> float:
        """``ID - OOD`` (metric points)."""
        return self.id_value - self.ood_value

    @property
    def relative_loss(self) -> float:
        """``(ID - OOD) / ID`` (a fraction; NaN when ID is 0)."""
        return self.loss / self.id_value if self.id_value > 0 else math.nan

    @property
    def label(self) -> str:
        return f'{self.model} ({self.dataset})'


@dataclass
class ShiftAnalysis:
    """What :func:`analyze_shifts` computes (see the module docstring).

    Attributes:
        points: the points, in the order given.
        fits: space -> shift type -> the fit over that type's points (None where the
            points have one ID value, or are fewer than 2).
        groups: shift type (and ``'all'``) -> group (and ``'all'``) -> means.
        notes: what could not be computed, and why.
    """
    points: List[ShiftPoint]
    fits: Dict[str, Dict[str, Optional[EffectiveRobustnessFit]]]
    groups: Dict[str, Dict[str, Dict[str, Any]]]
    notes: List[str] = field(default_factory=list)

    @property
    def shift_types(self) -> List[str]:
        return list(dict.fromkeys(p.shift_type for p in self.points))

    def residual(self, index: int, space: str = 'linear') -> Dict[str, Optional[float]]:
        """Point ``index``'s effective robustness in ``space``: ``{'value', 'low',
        'high'}`` (None without a fit or a bootstrap)."""
        point = self.points[index]
        fit = self.fits[space].get(point.shift_type)
        if fit is None:
            return {'value': None, 'low': None, 'high': None}
        row = [i for i, p in enumerate(self.points)
               if p.shift_type == point.shift_type].index(index)
        bound = (lambda a: None if a is None else float(a[row]))  # noqa: E731
        return {'value': float(fit.residuals[row]), 'low': bound(fit.residual_low),
                'high': bound(fit.residual_high)}

    def to_dict(self) -> Dict[str, Any]:
        points = []
        for i, p in enumerate(self.points):
            points.append(dict(model=p.model, group=p.group, dataset=p.dataset,
                               shift_type=p.shift_type, id=p.id_value, ood=p.ood_value,
                               loss=p.loss, relative_loss=p.relative_loss,
                               effective_robustness={s: self.residual(i, s)
                                                     for s in self.fits}))
        fits = {space: {t: None if f is None else dict(
            slope=f.slope, intercept=f.intercept, r_squared=f.r_squared,
            points=len(f.models), bootstrap=f.n_bootstrap, usable_resamples=f.n_valid,
            confidence=f.confidence, seed=f.seed) for t, f in by_type.items()}
            for space, by_type in self.fits.items()}
        return nan_to_null({'points': points, 'fits': fits, 'groups': self.groups,
                            'notes': list(self.notes)})


def _check_points(points: Sequence[ShiftPoint]) -> List[ShiftPoint]:
    points = list(points)
    if not points:
        raise ValueError('no shift points to analyse')
    seen = set()
    for point in points:
        if not isinstance(point, ShiftPoint):
            raise TypeError(f'shift points are ShiftPoint, got {type(point).__name__}')
        key = (point.model, point.dataset)
        if key in seen:
            raise ValueError(f'{point.model} on {point.dataset} is given twice')
        seen.add(key)
    for dataset in {p.dataset for p in points}:
        types = {p.shift_type for p in points if p.dataset == dataset}
        if len(types) > 1:
            raise ValueError(f'dataset pair {dataset} is tagged with several shift types '
                             f'({sorted(types)}); one pair has one shift type')
    return points


def _group_means(points: Sequence[ShiftPoint], residuals: Sequence[Optional[float]]
                 ) -> Dict[str, Any]:
    finite = [r for r in residuals if r is not None]
    return {'points': len(points), 'models': len({p.model for p in points}),
            'id': mean(p.id_value for p in points), 'ood': mean(p.ood_value for p in points),
            'loss': mean(p.loss for p in points),
            'relative_loss': mean(p.relative_loss for p in points),
            'effective_robustness': mean(finite) if len(finite) == len(points) else None}


def analyze_shifts(points: Sequence[ShiftPoint], *, n_bootstrap: int = 1000,
                   seed: Optional[int] = 0, confidence: float = 0.95) -> ShiftAnalysis:
    """Fits per shift type in both spaces, residuals and group means (see the module
    docstring). Same seed, same bootstrap.

    Raises:
        ValueError: no points, a model and dataset pair given twice, a dataset pair with
            several shift types, or a bad value.
    """
    points = _check_points(points)
    notes: List[str] = []
    fits: Dict[str, Dict[str, Optional[EffectiveRobustnessFit]]] = {s: {} for s in FIT_SPACES}
    types = list(dict.fromkeys(p.shift_type for p in points))
    for shift_type in types:
        members = [p for p in points if p.shift_type == shift_type]
        ids = np.array([p.id_value for p in members])
        if len(members) < 2 or np.ptp(ids) == 0:
            notes.append(f'{shift_type}: {len(members)} point(s) with '
                         f'{len(set(ids.tolist()))} ID value(s): no line can be fitted')
            for space in FIT_SPACES:
                fits[space][shift_type] = None
            continue
        if len({p.model for p in members}) < 3:
            notes.append(f'{shift_type}: fewer than 3 models: the bootstrap over models has '
                         'at most 2 to draw from')
        for space in FIT_SPACES:
            fits[space][shift_type] = effective_robustness_fit(
                ids, [p.ood_value for p in members], models=[p.label for p in members],
                name=shift_type, space=space, n_bootstrap=n_bootstrap, seed=seed,
                confidence=confidence, clusters=[p.model for p in members])
    analysis = ShiftAnalysis(points, fits, {}, notes)
    residuals = [analysis.residual(i)['value'] for i in range(len(points))]
    groups = sorted({p.group for p in points if p.group is not None})
    for shift_type in types + [ALL]:
        chosen = [i for i, p in enumerate(points) if shift_type in (ALL, p.shift_type)]
        block = {ALL: _group_means([points[i] for i in chosen], [residuals[i] for i in chosen])}
        for group in groups:
            members = [i for i in chosen if points[i].group == group]
            if members:
                block[group] = _group_means([points[i] for i in members],
                                            [residuals[i] for i in members])
        analysis.groups[shift_type] = block
    return analysis


def _shift_value(results: Any, name: str, where: str) -> float:
    """The OOD value of shift set ``name`` (as it is) in a results file's shifts block."""
    block = results.summary.blocks.get('shifts', {})
    for row in block.get('sets') or []:
        if row.get('name') == name and row.get('condition') == 'clean':
            return float(row['ood'])
    known = sorted({r.get('name') for r in block.get('sets') or []})
    raise ValueError(f'{where}: {results.path} has no shift set {name!r} (its shift sets: '
                     f'{known or "none"})')


def read_csv_rows(path: str) -> List[Dict[str, str]]:
    """The rows of a CSV file with a header line (UTF-8, with or without the byte-order
    mark spreadsheet programs write), each a ``{column: value}`` dict.

    Raises:
        ValueError: the file cannot be read, is not UTF-8 text, has no rows, or a row
            with fewer or more fields than the header (each naming the file and line).
    """
    try:
        with open(path, newline='', encoding='utf-8-sig') as handle:
            reader = csv.DictReader(handle)
            numbered = [(reader.line_num, row) for row in reader]
            header = reader.fieldnames or []
    except UnicodeDecodeError as error:
        raise ValueError(f'{path} is not UTF-8 text (byte 0x{error.object[error.start]:02x} '
                         f'at offset {error.start}): save it as UTF-8 (CSV UTF-8 in a '
                         'spreadsheet program)') from None
    except OSError as error:
        raise ValueError(f'{path} cannot be read: {error.strerror or error}') from None
    if not numbered:
        raise ValueError(f'{path} has no rows')
    for number, row in numbered:
        extra = row.get(None)  # type: ignore[call-overload]
        short = [c for c in header if row.get(c) is None]
        if extra or short:
            given = len(header) + len(extra or ()) - len(short)
            raise ValueError(f'{path} line {number} has {given} field(s), the header '
                             f'{len(header)} ({", ".join(header)})')
    return [row for _, row in numbered]


def load_shift_points(path: str) -> Tuple[List[ShiftPoint], str]:
    """The points of a CSV with the columns :data:`POINT_COLUMNS` (result paths relative
    to the CSV's folder), and the metric: each side's value is the clean metric of its
    results file. With an optional ``shift`` column naming a shift set of the ID results
    (a run that evaluated the OOD set as a condition), the OOD value is that set's and
    ``ood_results`` may be empty.

    Raises:
        ValueError: a missing column, an unreadable results file, ID and OOD results of
            other tasks or metrics, or of other checkpoints, or a shift set the results
            do not have (named, with the row).
    """
    folder = osp.dirname(osp.abspath(path))
    rows = read_csv_rows(path)
    lacking = [c for c in POINT_COLUMNS if c not in rows[0]]
    if lacking:
        raise ValueError(f'{path} lacks the column(s) {lacking}; columns: {list(POINT_COLUMNS)}')
    points, metric = [], None
    for number, row in enumerate(rows, 2):
        where = f'{path} line {number} ({row["model"]} on {row["dataset"]})'
        shift = (row.get('shift') or '').strip()
        if shift:
            results = read_results(osp.join(folder, row['id_results']))
            metric = metric or (results.task, results.metric)
            if (results.task, results.metric) != metric:
                raise ValueError(f'{where}: results of another task or metric '
                                 f'({(results.task, results.metric)}, expected {metric})')
            points.append(ShiftPoint(row['model'], row['dataset'], row['shift_type'],
                                     results.summary.clean,
                                     _shift_value(results, shift, where),
                                     row['group'] or None))
            continue
        files = [read_results(osp.join(folder, row[k])) for k in ('id_results', 'ood_results')]
        kinds = {(f.task, f.metric) for f in files}
        if metric is None:
            metric = next(iter(kinds))
        if len(kinds) > 1 or next(iter(kinds)) != metric:
            raise ValueError(f'{where}: results of other tasks or metrics ({sorted(kinds)}, '
                             f'expected {metric})')
        digests = {f.provenance.get('checkpoint_sha256') for f in files} - {None}
        if len(digests) > 1:
            raise ValueError(f'{where}: the ID and OOD results come from different '
                             'checkpoints (their checkpoint SHA-256 differ)')
        points.append(ShiftPoint(row['model'], row['dataset'], row['shift_type'],
                                 files[0].summary.clean, files[1].summary.clean,
                                 row['group'] or None))
    return points, metric[1]
