"""Do corruptions predict real distribution shifts? Across the models of a comparison,
the rank correlation of each corruption's drop with each real shift's drop, and the
regression of the real OOD loss on ΔTP.

Per model (one value each, metric points):

* the *synthetic drops*: per corruption ``Clean − the corruption's mean over its
  severities``, and ``Avg``'s drop ``Clean − Avg``, which is ΔTP (one row, ``avg``);
* the *real drops*: per shift set the drop ``ID − OOD`` of the ``shifts`` block of the
  model's ``results.json`` (:func:`~reobench_mm.analysis.shift_table.shift_block`, the
  sets as they are, without corruptions on top; read, not recomputed) and, with separate
  shift results (``shift_paths`` of
  :func:`~reobench_mm.analysis.compare.compare_models`), the drop of the model's clean
  metric to its clean metric on the shifted dataset, computed by the same
  :func:`~reobench_mm.analysis.shift_table.shift_block` (named ``shift``).

For every synthetic row x real column: Spearman's ρ (``scipy.stats.spearmanr``) and
Kendall's τ-b (:func:`~reobench_mm.analysis.rank_stability.kendall_tau`, scipy) with
their p-values and percentile intervals from a bootstrap over models. The resamples are
``numpy.random.default_rng(seed).integers(0, n, size=(resamples, n))`` (row ``b`` lists
the models of resample ``b``), drawn once and shared by every cell, as the effective-
robustness bootstrap draws them; a resample with fewer than 3 distinct models, or whose
drops are constant on either side, is skipped and counted (``used`` of ``resamples``).
Per real shift, the least-squares line ``drop = slope · ΔTP + intercept`` across models
(``scipy.stats.linregress``: slope, intercept, R², the two-sided p-value of the slope).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from scipy import stats

from .intervals import interval_of
from .model_set import ModelSet
from .rank_stability import kendall_tau
from .results import AVG, SHIFT
from .shift_table import shift_block
from .tables import column_title, fmt_number, markdown_table

__all__ = ['Correlation', 'ShiftRegression', 'SyntheticVsReal', 'synthetic_drops',
           'shift_drops', 'synthetic_vs_real', 'bootstrap_rank_correlations',
           'synthetic_real_csv_rows', 'synthetic_real_markdown']

#: Fewest distinct models a resample needs to enter the intervals.
MIN_DISTINCT = 3
#: Resamples whose pairwise sign matrices are built at once (bounds the memory).
_CHUNK = 256


@dataclass
class Correlation:
    """A rank correlation with its p-value and its bootstrap interval (None without
    usable resamples); ``used`` of the drawn resamples entered the interval."""
    statistic: float
    p_value: float
    interval: Optional[List[float]]
    used: int

    def to_dict(self) -> Dict[str, Any]:
        return {'statistic': _number(self.statistic), 'p_value': _number(self.p_value),
                'interval': self.interval, 'used': self.used}


@dataclass
class ShiftRegression:
    """``drop = slope · ΔTP + intercept`` across models (``scipy.stats.linregress``)."""
    shift: str
    slope: float
    intercept: float
    r_squared: float
    p_value: float
    stderr: float

    def to_dict(self) -> Dict[str, Any]:
        return {k: _number(getattr(self, k)) for k in
                ('slope', 'intercept', 'r_squared', 'p_value', 'stderr')}


@dataclass
class SyntheticVsReal:
    """:func:`synthetic_vs_real`. ``predictors``/``shifts``: key -> one drop per model;
    ``spearman``/``kendall``: ``{(predictor, shift): Correlation}``."""
    models: List[str]
    metric: str
    predictors: Dict[str, np.ndarray]
    shifts: Dict[str, np.ndarray]
    shift_types: Dict[str, str]
    spearman: Dict[Tuple[str, str], Correlation]
    kendall: Dict[Tuple[str, str], Correlation]
    regressions: Dict[str, ShiftRegression]
    resamples: int
    level: float
    seed: Optional[int]
    notes: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {
            'models': self.models, 'resamples': self.resamples, 'level': self.level,
            'seed': self.seed, 'min_distinct_models': MIN_DISTINCT,
            'synthetic_drops': {k: {m: _number(v) for m, v in zip(self.models, values)}
                                for k, values in self.predictors.items()},
            'real_drops': {k: {m: _number(v) for m, v in zip(self.models, values)}
                           for k, values in self.shifts.items()},
            'shift_types': self.shift_types,
            'cells': [{'predictor': p, 'shift': s,
                       'spearman': self.spearman[p, s].to_dict(),
                       'kendall': self.kendall[p, s].to_dict()}
                      for p in self.predictors for s in self.shifts],
            'regression_on_delta_tp': {s: r.to_dict() for s, r in self.regressions.items()},
            'notes': self.notes}


def _number(value: Any) -> Optional[float]:
    value = float(value)
    return value if math.isfinite(value) else None


def synthetic_drops(model_set: ModelSet) -> Dict[str, np.ndarray]:
    """``{corruption: Clean − its mean, 'avg': Clean − Avg (= ΔTP)}``, per model."""
    clean = model_set.clean()
    out = {c: clean - model_set.corruption_mean(c) for c in model_set.corruptions}
    out[AVG] = model_set.delta_tp()
    return out


def shift_drops(model_set: ModelSet, shift_values: Optional[np.ndarray] = None
                ) -> Tuple[Dict[str, np.ndarray], Dict[str, str], List[str]]:
    """The real drops per model (module docstring): ``(drops, shift types, notes)``;
    shift sets missing from some model's results are left out with a note."""
    per_model = []
    for file in model_set.files:
        block = file.summary.blocks.get('shifts', {})
        per_model.append({s['name']: s for s in block.get('sets', [])
                          if s.get('condition') == 'clean'})
    names = list(dict.fromkeys(n for sets in per_model for n in sets))
    common = [n for n in names if all(n in sets for sets in per_model)]
    notes = []
    if len(common) < len(names):
        notes.append('shift sets not in every model\'s results, left out of the synthetic '
                     'vs real comparison: ' + ', '.join(n for n in names if n not in common))
    drops = {n: np.array([float(sets[n]['drop']) for sets in per_model]) for n in common}
    types = {n: str(per_model[0][n].get('shift_type')) for n in common}
    if shift_values is not None:
        name = SHIFT if SHIFT not in drops else f'{SHIFT} (results files)'
        clean = model_set.clean()
        drops[name] = np.array([
            shift_block([dict(name=name, shift_type='results files', condition='clean',
                              key=name, value=float(v), images=None, stats=None)],
                        id_value=float(c), metric=model_set.metric)['sets'][0]['drop']
            for c, v in zip(clean, shift_values)])
        types[name] = 'results files'
    return drops, types, notes


def _pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Pearson correlation of two ``(B, n)`` arrays (NaN for a constant row)."""
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    with np.errstate(divide='ignore', invalid='ignore'):
        return (a * b).sum(axis=1) / np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))


def bootstrap_rank_correlations(x: np.ndarray, y: np.ndarray, index: np.ndarray
                                ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spearman's ρ and Kendall's τ-b of every resample (row of ``index``) and which
    resamples are usable (at least :data:`MIN_DISTINCT` distinct models, neither side
    constant); ``(rho, tau, usable)``, NaN where not usable.

    Vectorised here because neither ``scipy.stats.spearmanr`` nor ``kendalltau`` works
    row by row: ρ is the Pearson correlation of the average ranks
    (``scipy.stats.rankdata(axis=1)``), τ-b is ``Σ sx·sy / sqrt(Σ|sx| · Σ|sy|)`` over
    the pairs of the resample, ``sx = sign(x_i − x_j)`` (the tau-b formula of
    ``scipy.stats.kendalltau``, ``(P − Q) / sqrt((P + Q + T)(P + Q + U))``)."""
    xb, yb = x[index], y[index]
    distinct = (np.diff(np.sort(index, axis=1), axis=1) != 0).sum(axis=1) + 1
    usable = (distinct >= MIN_DISTINCT) & (np.ptp(xb, axis=1) > 0) & (np.ptp(yb, axis=1) > 0)
    rho = np.where(usable, _pearson_rows(stats.rankdata(xb, axis=1),
                                         stats.rankdata(yb, axis=1)), math.nan)
    tau = np.full(len(index), math.nan)
    for start in range(0, len(index), _CHUNK):
        part = slice(start, start + _CHUNK)
        sx = np.sign(xb[part, :, None] - xb[part, None, :])
        sy = np.sign(yb[part, :, None] - yb[part, None, :])
        with np.errstate(divide='ignore', invalid='ignore'):
            tau[part] = (sx * sy).sum(axis=(1, 2)) / np.sqrt(
                np.abs(sx).sum(axis=(1, 2)) * np.abs(sy).sum(axis=(1, 2)))
    return rho, np.where(usable, tau, math.nan), usable


def _correlation(value: Tuple[float, float], replicates: np.ndarray, usable: np.ndarray,
                 level: float) -> Correlation:
    kept = replicates[usable]
    interval = interval_of(kept, level) if kept.size else None
    return Correlation(float(value[0]), float(value[1]), interval, int(kept.size))


def synthetic_vs_real(model_set: ModelSet, shift_values: Optional[np.ndarray] = None, *,
                      resamples: int = 1000, level: float = 0.95,
                      seed: Optional[int] = 0) -> Optional[SyntheticVsReal]:
    """The comparison of the module docstring; None when there is no real shift."""
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 0:
        raise ValueError(f'resamples must be an integer >= 0, got {resamples!r}')
    shifts, types, notes = shift_drops(model_set, shift_values)
    if not shifts:
        return None
    predictors = synthetic_drops(model_set)
    n = len(model_set.models)
    if n < 3:
        notes.append(f'only {n} models: rank correlations of 2 models are ±1 and no '
                     'resample has 3 distinct models')
    index = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    spearman, kendall = {}, {}
    for p, x in predictors.items():
        for s, y in shifts.items():
            with warnings.catch_warnings():  # constant input: NaN, said below
                warnings.simplefilter('ignore')
                rho = stats.spearmanr(x, y)
                point_rho = (float(rho.statistic), float(rho.pvalue))
                point_tau = kendall_tau(x, y)
            rhos, taus, usable = bootstrap_rank_correlations(x, y, index)
            spearman[p, s] = _correlation(point_rho, rhos, usable, level)
            kendall[p, s] = _correlation(point_tau, taus, usable, level)
    regressions = {}
    delta = predictors[AVG]
    for s, y in shifts.items():
        if n < 3 or np.ptp(delta) == 0:
            regressions[s] = ShiftRegression(s, *([math.nan] * 5))
            continue
        fit = stats.linregress(delta, y)
        regressions[s] = ShiftRegression(s, float(fit.slope), float(fit.intercept),
                                         float(fit.rvalue) ** 2, float(fit.pvalue),
                                         float(fit.stderr))
    constant = [k for k, v in {**predictors, **shifts}.items() if np.ptp(v) == 0]
    if constant:
        notes.append(f'the same drop for every model (no ranking): {", ".join(constant)}; '
                     'their correlations are undefined')
    return SyntheticVsReal(list(model_set.models), model_set.metric, predictors, shifts,
                           types, spearman, kendall, regressions, resamples, level, seed,
                           notes)


def predictor_title(key: str) -> str:
    """Display title of a synthetic row."""
    return 'Avg (ΔTP)' if key == AVG else column_title(key)


def synthetic_real_csv_rows(result: SyntheticVsReal) -> Tuple[List[str], List[List[Any]]]:
    """``synthetic_vs_real.csv``: one row per synthetic predictor x real shift: the
    correlations with p-values, intervals and resamples used; the ``avg`` rows (ΔTP)
    also hold the shift's regression on ΔTP."""
    header = ['predictor', 'shift', 'shift_type', 'models', 'spearman', 'spearman_p',
              'spearman_low', 'spearman_high', 'kendall', 'kendall_p', 'kendall_low',
              'kendall_high', 'resamples_used', 'resamples', 'slope', 'intercept',
              'r_squared', 'regression_p']
    rows = []
    for p in result.predictors:
        for s in result.shifts:
            cells = [p, s, result.shift_types[s], len(result.models)]
            for c in (result.spearman[p, s], result.kendall[p, s]):
                low, high = c.interval or (None, None)
                cells += [c.statistic, c.p_value, low, high]
            cells += [result.spearman[p, s].used, result.resamples]
            r = result.regressions[s]
            cells += [r.slope, r.intercept, r.r_squared, r.p_value] if p == AVG \
                else [None] * 4
            rows.append(cells)
    return header, rows


def _cell(c: Correlation) -> str:
    text = fmt_number(c.statistic, 2, signed=True)
    if c.interval:
        text += f' [{c.interval[0]:+.2f}, {c.interval[1]:+.2f}]'
    return text


def synthetic_real_markdown(result: SyntheticVsReal) -> List[str]:
    """The Markdown section: the Spearman and Kendall tables and the regressions."""
    metric = result.metric
    shifts = list(result.shifts)
    lines = ['## Do corruptions predict real shifts?', '',
             f'Across the {len(result.models)} models: rank correlation of each corruption\'s '
             f'drop (Clean − its mean, {metric} points; Avg: Clean − Avg = ΔTP) with each '
             f'real shift\'s drop (ID − OOD). Brackets: {100 * result.level:g}% percentile '
             f'bootstrap over models ({result.resamples} resamples, seed {result.seed}; '
             f'resamples of fewer than {MIN_DISTINCT} distinct models or constant drops '
             'skipped; p-values and used counts in synthetic_vs_real.csv).', '']
    lines += [f'- {n}' for n in result.notes]
    if result.notes:
        lines.append('')
    header = ['Corruption'] + [f'{s} ({result.shift_types[s]})' for s in shifts]
    for name, table in (('Spearman ρ', result.spearman), ('Kendall τ-b', result.kendall)):
        rows = [[predictor_title(p)] + [_cell(table[p, s]) for s in shifts]
                for p in result.predictors]
        lines += [f'### {name}: which corruptions predict which real shifts', ''] + \
            markdown_table(header, rows) + ['']
    rows = [[s, fmt_number(r.slope, 3), fmt_number(r.intercept, 2),
             fmt_number(r.r_squared, 3),
             '–' if not math.isfinite(r.p_value) else f'{r.p_value:.3g}']
            for s, r in result.regressions.items()]
    lines += ['### Real OOD loss against ΔTP', '',
              'Least-squares line drop = slope · ΔTP + intercept across models '
              '(scipy.stats.linregress; p: two-sided test of slope 0).', '']
    lines += markdown_table(['Shift', 'Slope', 'Intercept', 'R²', 'p'], rows) + ['']
    return lines
