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
  relative loss and residuals;
- per fit space, the ranking of the models across shift types
  (:mod:`~reobench_mm.analysis.shift_ranking`: per type a model's mean residual and
  rank, then their means over the types, with bootstrap intervals).

A point may name its *protocol* (``frozen``, ``full``: how the model was adapted): the
fits, group means and rankings are then per protocol (one line per protocol and shift
type; a model and dataset pair appears once per protocol). A point may name its
*metric* (``mIoU``, ``mAP``...): a shift type's points share one metric unless the
analysis pools them (``pool_metrics=True``: one line over all the points of a shift type
whatever their metric, as EarthShift fits accuracy, F1 and mIoU together).

The points come from results files (:func:`load_shift_points`: a CSV naming, per row,
the model, its group, the dataset pair, the shift type and the ID and OOD
``results.json``, optionally the protocol; each side's value is its clean metric), or are
built directly. :func:`~reobench_mm.analysis.shift_report.write_shift_analysis` writes
``shift_analysis.json``, ``.csv``, ``.md``, ``shift_ranking.csv`` and ``ood_vs_id.png``
(one per protocol).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..fileio import nan_to_null
from .effective_robustness import FIT_SPACES, EffectiveRobustnessFit, effective_robustness_fit
from .results import mean
from .shift_points import POINT_COLUMNS, POOLED, ShiftPoint, load_shift_points, read_csv_rows
from .shift_ranking import ShiftRanking, rank_models

__all__ = ['ShiftPoint', 'ShiftAnalysis', 'analyze_shifts',
           'load_shift_points', 'read_csv_rows', 'POINT_COLUMNS', 'POOLED']

ALL = 'all'

#: space -> shift type -> the fit over that type's points (None: no line).
Fits = Dict[str, Dict[str, Optional[EffectiveRobustnessFit]]]


def _where(protocol: Optional[str], shift_type: str) -> str:
    """How notes and errors name a shift type (of a protocol)."""
    return shift_type if protocol is None else f'{protocol} / {shift_type}'


def _fits_dict(fits: Fits) -> Dict[str, Any]:
    return {space: {t: None if f is None else dict(
        slope=f.slope, intercept=f.intercept, r_squared=f.r_squared,
        points=len(f.models), bootstrap=f.n_bootstrap, usable_resamples=f.n_valid,
        confidence=f.confidence, seed=f.seed) for t, f in by_type.items()}
        for space, by_type in fits.items()}


@dataclass
class ShiftAnalysis:
    """What :func:`analyze_shifts` computes (see the module docstring).

    Attributes:
        points: the points, in the order given.
        protocol_fits: protocol (None: unnamed) -> space -> shift type -> the fit over
            that type's points of that protocol (None where the points have one ID
            value, or are fewer than 2).
        protocol_groups: protocol -> shift type (and ``'all'``) -> group (and
            ``'all'``) -> means.
        notes: what could not be computed, and why.
        rankings: protocol -> space -> the models ranked across shift types.
        pool_metrics: whether a shift type's points may have several metrics.
    """
    points: List[ShiftPoint]
    protocol_fits: Dict[Optional[str], Fits]
    protocol_groups: Dict[Optional[str], Dict[str, Dict[str, Dict[str, Any]]]]
    notes: List[str] = field(default_factory=list)
    rankings: Dict[Optional[str], Dict[str, ShiftRanking]] = field(default_factory=dict)
    pool_metrics: bool = False

    @property
    def protocols(self) -> List[Optional[str]]:
        """The protocols, in the points' order (``[None]``: the points name none)."""
        return list(self.protocol_fits)

    @property
    def named_protocols(self) -> bool:
        return self.protocols != [None]

    def _single(self, what: str) -> Optional[str]:
        if len(self.protocols) > 1:
            raise ValueError(f'the points have several protocols ({self.protocols}): take '
                             f'protocol_{what}[protocol] or for_protocol(protocol)')
        return self.protocols[0]

    @property
    def fits(self) -> Fits:
        """space -> shift type -> fit, of the only protocol (ValueError with several)."""
        return self.protocol_fits[self._single('fits')]

    @property
    def groups(self) -> Dict[str, Dict[str, Dict[str, Any]]]:
        """The group means of the only protocol (ValueError with several)."""
        return self.protocol_groups[self._single('groups')]

    @property
    def shift_types(self) -> List[str]:
        return list(dict.fromkeys(p.shift_type for p in self.points))

    @property
    def metrics(self) -> List[str]:
        """The points' metric names, in order (points without one left out)."""
        return list(dict.fromkeys(p.metric for p in self.points if p.metric is not None))

    def for_protocol(self, protocol: Optional[str]) -> 'ShiftAnalysis':
        """The analysis of one protocol's points alone (its fits, groups and rankings;
        the notes stay with the whole analysis)."""
        return ShiftAnalysis([p for p in self.points if p.protocol == protocol],
                             {protocol: self.protocol_fits[protocol]},
                             {protocol: self.protocol_groups.get(protocol, {})}, [],
                             {protocol: self.rankings.get(protocol, {})}, self.pool_metrics)

    def residual(self, index: int, space: str = 'linear') -> Dict[str, Optional[float]]:
        """Point ``index``'s effective robustness in ``space``: ``{'value', 'low',
        'high'}`` (None without a fit or a bootstrap)."""
        point = self.points[index]
        fit = self.protocol_fits[point.protocol][space].get(point.shift_type)
        if fit is None:
            return {'value': None, 'low': None, 'high': None}
        row = [i for i, p in enumerate(self.points) if p.shift_type == point.shift_type
               and p.protocol == point.protocol].index(index)
        bound = (lambda a: None if a is None else float(a[row]))  # noqa: E731
        return {'value': float(fit.residuals[row]), 'low': bound(fit.residual_low),
                'high': bound(fit.residual_high)}

    def to_dict(self) -> Dict[str, Any]:
        """Points, fits, groups, rankings and notes; fits, groups and rankings keyed by
        protocol first when the points name protocols."""
        points = []
        for i, p in enumerate(self.points):
            row = {'protocol': p.protocol} if self.named_protocols else {}
            row.update(model=p.model, group=p.group, dataset=p.dataset,
                       shift_type=p.shift_type, metric=p.metric, id=p.id_value,
                       ood=p.ood_value, loss=p.loss, relative_loss=p.relative_loss,
                       effective_robustness={s: self.residual(i, s) for s in FIT_SPACES})
            points.append(row)
        fits = {k: _fits_dict(v) for k, v in self.protocol_fits.items()}
        rankings = {k: {s: r.to_dict() for s, r in self.rankings.get(k, {}).items()}
                    for k in self.protocols}
        document: Dict[str, Any] = {'points': points, 'metrics': self.metrics,
                                    'pool_metrics': self.pool_metrics}
        if self.named_protocols:
            document.update(protocols=self.protocols, fits=fits, groups=self.protocol_groups,
                            ranking=rankings)
        else:
            document.update(fits=fits[None], groups=self.protocol_groups[None],
                            ranking=rankings[None])
        document['notes'] = list(self.notes)
        return nan_to_null(document)


def _check_points(points: Sequence[ShiftPoint], pool_metrics: bool) -> List[ShiftPoint]:
    points = list(points)
    if not points:
        raise ValueError('no shift points to analyse')
    seen = set()
    for point in points:
        if not isinstance(point, ShiftPoint):
            raise TypeError(f'shift points are ShiftPoint, got {type(point).__name__}')
        key = (point.protocol, point.model, point.dataset)
        if key in seen:
            under = '' if point.protocol is None else f' under protocol {point.protocol}'
            raise ValueError(f'{point.model} on {point.dataset} is given twice{under}')
        seen.add(key)
    protocols = list(dict.fromkeys(p.protocol for p in points))
    if None in protocols and len(protocols) > 1:
        unnamed = next(p for p in points if p.protocol is None)
        raise ValueError(f'{unnamed.model} on {unnamed.dataset} names no protocol while '
                         f'other points do ({[p for p in protocols if p]}): name the '
                         'protocol of every point, or of none')
    for dataset in {p.dataset for p in points}:
        types = {p.shift_type for p in points if p.dataset == dataset}
        if len(types) > 1:
            raise ValueError(f'dataset pair {dataset} is tagged with several shift types '
                             f'({sorted(types)}); one pair has one shift type')
    if not pool_metrics:
        for protocol in protocols:
            for shift_type in dict.fromkeys(p.shift_type for p in points):
                metrics = list(dict.fromkeys(p.metric for p in points if p.protocol ==
                                             protocol and p.shift_type == shift_type))
                if len(metrics) > 1:
                    names = ', '.join(m or 'unnamed' for m in metrics)
                    raise ValueError(f'{_where(protocol, shift_type)}: points of several '
                                     f'metrics ({names}); pool_metrics=True (--pool-metrics) '
                                     'fits one line over them, as EarthShift does')
    return points


def _group_means(points: Sequence[ShiftPoint], residuals: Sequence[Optional[float]]
                 ) -> Dict[str, Any]:
    finite = [r for r in residuals if r is not None]
    return {'points': len(points), 'models': len({p.model for p in points}),
            'id': mean(p.id_value for p in points), 'ood': mean(p.ood_value for p in points),
            'loss': mean(p.loss for p in points),
            'relative_loss': mean(p.relative_loss for p in points),
            'effective_robustness': mean(finite) if len(finite) == len(points) else None}


def _groups(points: Sequence[ShiftPoint], residuals: Sequence[Optional[float]]
            ) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """Shift type (and ``'all'``) -> group (and ``'all'``) -> means, of one protocol."""
    blocks = {}
    groups = sorted({p.group for p in points if p.group is not None})
    for shift_type in list(dict.fromkeys(p.shift_type for p in points)) + [ALL]:
        chosen = [i for i, p in enumerate(points) if shift_type in (ALL, p.shift_type)]
        block = {ALL: _group_means([points[i] for i in chosen], [residuals[i] for i in chosen])}
        for group in groups:
            members = [i for i in chosen if points[i].group == group]
            if members:
                block[group] = _group_means([points[i] for i in members],
                                            [residuals[i] for i in members])
        blocks[shift_type] = block
    return blocks


def _fit_types(points: Sequence[ShiftPoint], protocol: Optional[str], notes: List[str],
               **options: Any) -> Fits:
    """The fits per shift type and space of one protocol's points."""
    fits: Fits = {s: {} for s in FIT_SPACES}
    for shift_type in dict.fromkeys(p.shift_type for p in points):
        members = [p for p in points if p.shift_type == shift_type]
        ids = np.array([p.id_value for p in members])
        where = _where(protocol, shift_type)
        if len(members) < 2 or np.ptp(ids) == 0:
            notes.append(f'{where}: {len(members)} point(s) with '
                         f'{len(set(ids.tolist()))} ID value(s): no line can be fitted')
            for space in FIT_SPACES:
                fits[space][shift_type] = None
            continue
        if len({p.model for p in members}) < 3:
            notes.append(f'{where}: fewer than 3 models: the bootstrap over models has '
                         'at most 2 to draw from')
        for space in FIT_SPACES:
            fits[space][shift_type] = effective_robustness_fit(
                ids, [p.ood_value for p in members], models=[p.label for p in members],
                name=shift_type, space=space, clusters=[p.model for p in members],
                **options)
    return fits


def analyze_shifts(points: Sequence[ShiftPoint], *, n_bootstrap: int = 1000,
                   seed: Optional[int] = 0, confidence: float = 0.95,
                   pool_metrics: bool = False) -> ShiftAnalysis:
    """Fits per protocol, shift type and space, residuals, group means and the rankings
    across shift types (see the module docstring). Same seed, same bootstrap.

    Raises:
        ValueError: no points, a model and dataset pair given twice (in one protocol), a
            dataset pair with several shift types, points with and without a protocol,
            points of several metrics in one shift type without ``pool_metrics``, or a
            bad value.
    """
    points = _check_points(points, pool_metrics)
    notes: List[str] = []
    protocols = list(dict.fromkeys(p.protocol for p in points))
    fits = {protocol: _fit_types([p for p in points if p.protocol == protocol], protocol,
                                 notes, n_bootstrap=n_bootstrap, seed=seed,
                                 confidence=confidence)
            for protocol in protocols}
    analysis = ShiftAnalysis(points, fits, {}, notes, pool_metrics=pool_metrics)
    residuals = [analysis.residual(i)['value'] for i in range(len(points))]
    for protocol in protocols:
        chosen = [i for i, p in enumerate(points) if p.protocol == protocol]
        members = [points[i] for i in chosen]
        analysis.protocol_groups[protocol] = _groups(members, [residuals[i] for i in chosen])
        analysis.rankings[protocol] = {space: rank_models(
            members, fits[protocol][space], protocol=protocol, space=space,
            confidence=confidence) for space in FIT_SPACES}
        for ranking in analysis.rankings[protocol].values():
            notes.extend(n for n in ranking.notes if n not in notes)
    return analysis
