"""Ranking of models across shift types: EarthShift's per-model table of effective
robustness.

For the points of one protocol and the fits of one space
(:func:`~reobench_mm.analysis.shifts.analyze_shifts`: one line per shift type over every
model and dataset pair of that type), :func:`rank_models` gives per model:

- per shift type, its mean effective robustness (ER: the mean residual ``OOD -
  predicted`` over its points of that type, metric points) and its rank among the models
  of that type (1 = highest mean ER; tied models share the average of their ranks,
  :func:`scipy.stats.rankdata` on the negated means);
- its mean ER over the shift types it has, and its mean rank over them (a model lacking
  a shift type is averaged over the types it has, and a note says so);
- percentile intervals of all of these from the bootstrap of the fits: for resample
  ``b`` of a shift type's fit, every model's residuals are recomputed against line
  ``b`` (all its points, also of models the resample did not draw: the line is what is
  resampled), then its mean ER and rank per type; resample ``b`` of every shift type's
  fit is paired (the resamples a fit keeps in
  :attr:`~reobench_mm.analysis.effective_robustness.EffectiveRobustnessFit.boot_draws`,
  the draws usable in every type) to give the mean ER and mean rank of resample ``b``.

Shift types without a fitted line (fewer than 2 points or one ID value) are left out,
with a note.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence

import numpy as np
from scipy import stats

from .effective_robustness import EffectiveRobustnessFit
from .results import mean

if TYPE_CHECKING:  # pragma: no cover
    from .shift_points import ShiftPoint

__all__ = ['ModelRank', 'ShiftRanking', 'rank_models']

#: The keys of a model's values per shift type (see :class:`ModelRank`).
TYPE_KEYS = ('points', 'er', 'er_low', 'er_high', 'rank', 'rank_low', 'rank_high')


def _interval(samples: np.ndarray, confidence: float) -> List[Optional[float]]:
    """``[low, high]`` percentile interval of ``samples`` (None when there are none or
    the samples are not finite)."""
    if samples.size == 0 or not np.all(np.isfinite(samples)):
        return [None, None]
    low, high = np.percentile(samples, [50.0 * (1.0 - confidence), 50.0 * (1.0 + confidence)])
    return [float(low), float(high)]


@dataclass
class ModelRank:
    """One model's row of the ranking table.

    Attributes:
        model: the model's name; group: its group (None, or several joined by ``/``).
        shift_types: shift type -> ``{'points', 'er', 'er_low', 'er_high', 'rank',
            'rank_low', 'rank_high'}`` for the types it has (ER in metric points).
        missing: the ranked shift types it has no point of.
        mean_er, mean_rank: ``{'value', 'low', 'high'}`` over the types it has.
    """
    model: str
    group: Optional[str]
    shift_types: Dict[str, Dict[str, Any]]
    missing: List[str]
    mean_er: Dict[str, Optional[float]]
    mean_rank: Dict[str, Optional[float]]

    def to_dict(self) -> Dict[str, Any]:
        return {'model': self.model, 'group': self.group, 'shift_types': self.shift_types,
                'missing': list(self.missing), 'mean_er': self.mean_er,
                'mean_rank': self.mean_rank}


@dataclass
class ShiftRanking:
    """The ranking table of one protocol in one fit space (see the module docstring).

    Attributes:
        protocol: the protocol (None: the points name none).
        space: ``'linear'`` or ``'logit'`` (the space of the fits).
        shift_types: the ranked shift types (those with a fitted line), in order.
        models: one row per model, by mean rank (then by mean ER, then by name).
        n_resamples: the bootstrap resamples paired across the shift types (0: no
            intervals).
        confidence: the intervals' coverage.
        notes: models lacking a shift type, shift types left out.
        draws: the paired resamples' indices among those drawn (``n_resamples``).
        er_resamples, rank_resamples: ``[b, i, j]``: the mean ER and the rank of model
            ``models[i]`` in shift type ``shift_types[j]`` against the line of resample
            ``draws[b]`` of that type's fit (NaN where the model lacks the type).
    """
    protocol: Optional[str]
    space: str
    shift_types: List[str]
    models: List[ModelRank]
    n_resamples: int
    confidence: float
    notes: List[str] = field(default_factory=list)
    draws: Optional[np.ndarray] = None
    er_resamples: Optional[np.ndarray] = None
    rank_resamples: Optional[np.ndarray] = None

    def mean_resamples(self) -> Dict[str, np.ndarray]:
        """``{'mean_er', 'mean_rank'}``: ``[b, i]`` the mean over the shift types model
        ``models[i]`` has, in resample ``draws[b]``."""
        shape = (self.n_resamples, len(self.models) if self.er_resamples is None else
                 self.er_resamples.shape[1])
        if not self.n_resamples:
            return {'mean_er': np.empty(shape), 'mean_rank': np.empty(shape)}
        # every model has a type, so no mean is over NaN alone
        return {'mean_er': np.nanmean(self.er_resamples, axis=2),
                'mean_rank': np.nanmean(self.rank_resamples, axis=2)}

    def to_dict(self) -> Dict[str, Any]:
        return {'protocol': self.protocol, 'space': self.space,
                'shift_types': list(self.shift_types), 'resamples': self.n_resamples,
                'confidence': self.confidence, 'models': [m.to_dict() for m in self.models],
                'notes': list(self.notes)}


def _common_draws(fits: Sequence[EffectiveRobustnessFit]) -> np.ndarray:
    """The resample indices usable in every fit (none when one fit has no bootstrap)."""
    if not fits or any(f.boot_draws is None or f.n_valid == 0 for f in fits):
        return np.empty(0, dtype=int)
    draws = fits[0].boot_draws
    for fit in fits[1:]:
        draws = np.intersect1d(draws, fit.boot_draws)
    return draws


def _model_group(points: Sequence['ShiftPoint'], model: str) -> Optional[str]:
    groups = list(dict.fromkeys(p.group for p in points if p.model == model and p.group))
    return '/'.join(groups) if groups else None


def rank_models(points: Sequence['ShiftPoint'],
                fits: Mapping[str, Optional[EffectiveRobustnessFit]], *,
                protocol: Optional[str] = None, space: str = 'linear',
                confidence: float = 0.95) -> ShiftRanking:
    """The ranking table of ``points`` (one protocol) against ``fits`` (shift type ->
    the fit over that type's points, in the points' order, as
    :func:`~reobench_mm.analysis.shifts.analyze_shifts` makes them; None: no line).

    Raises:
        ValueError: a fit whose points are not the points of its shift type, in order.
    """
    where = f'{protocol}: ' if protocol else ''
    order = list(dict.fromkeys(p.shift_type for p in points))
    types = [t for t in order if fits.get(t) is not None]
    notes = []
    if len(types) < len(order):
        notes.append(f'{where}shift type(s) {", ".join(t for t in order if t not in types)} '
                     'have no fitted line and are left out of the ranking')
    members = {t: [p for p in points if p.shift_type == t] for t in types}
    for shift_type, chosen in members.items():
        if fits[shift_type].models != [p.label for p in chosen]:
            raise ValueError(f'{where}the fit of {shift_type} is not over the points of '
                             'that shift type, in their order')
    models = list(dict.fromkeys(p.model for t in types for p in members[t]))
    draws = _common_draws([fits[t] for t in types])
    er = np.full((len(models), len(types)), math.nan)
    rank = np.full_like(er, math.nan)
    er_boot = np.full((draws.size, len(models), len(types)), math.nan)
    rank_boot = np.full_like(er_boot, math.nan)
    counts = np.zeros(er.shape, dtype=int)
    for j, shift_type in enumerate(types):
        fit, chosen = fits[shift_type], members[shift_type]
        owners = np.array([models.index(p.model) for p in chosen])
        present = list(dict.fromkeys(owners.tolist()))
        for i in present:
            counts[i, j] = int(np.sum(owners == i))
            er[i, j] = mean(fit.residuals[owners == i])
        rank[present, j] = stats.rankdata(-er[present, j], method='average')
        if draws.size:
            lines = fit.predict_resamples(fit.id_values)[np.searchsorted(fit.boot_draws,
                                                                         draws)]
            residuals = fit.ood_values[None] - lines
            for i in present:
                er_boot[:, i, j] = residuals[:, owners == i].mean(axis=1)
            rank_boot[:, present, j] = stats.rankdata(-er_boot[:, present, j], axis=1,
                                                      method='average')
    has = counts > 0
    ranking = ShiftRanking(protocol, space, types, [], int(draws.size), confidence, notes,
                           draws, er_boot, rank_boot)
    boot_means = ranking.mean_resamples()
    rows = []
    for i, model in enumerate(models):
        per_type = {}
        for j, shift_type in enumerate(types):
            if not has[i, j]:
                continue
            er_low, er_high = _interval(er_boot[:, i, j], confidence)
            rank_low, rank_high = _interval(rank_boot[:, i, j], confidence)
            per_type[shift_type] = dict(zip(TYPE_KEYS, (
                int(counts[i, j]), float(er[i, j]), er_low, er_high, float(rank[i, j]),
                rank_low, rank_high)))
        missing = [t for j, t in enumerate(types) if not has[i, j]]
        if missing:
            notes.append(f'{where}{model} has no point of shift type(s) {", ".join(missing)}: '
                         f'its mean ER and mean rank are over the {len(per_type)} shift '
                         'type(s) it has')
        interval_er = _interval(boot_means['mean_er'][:, i], confidence)
        interval_rank = _interval(boot_means['mean_rank'][:, i], confidence)
        rows.append(ModelRank(
            model, _model_group(points, model), per_type, missing,
            {'value': mean(er[i, has[i]]), 'low': interval_er[0], 'high': interval_er[1]},
            {'value': mean(rank[i, has[i]]), 'low': interval_rank[0],
             'high': interval_rank[1]}))
    order = sorted(range(len(rows)), key=lambda i: (rows[i].mean_rank['value'],
                                                    -rows[i].mean_er['value'], rows[i].model))
    ranking.models = [rows[i] for i in order]
    ranking.er_resamples, ranking.rank_resamples = er_boot[:, order], rank_boot[:, order]
    return ranking
