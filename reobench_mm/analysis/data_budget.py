"""The data-budget report: robustness and calibration as functions of the training-set
size, over several training seeds (the numbers; the runs are
:func:`~reobench_mm.robustness.data_budget.run_data_budget`).

Numbers per run (:func:`budget_row`) are REOBench's, from
:func:`~reobench_mm.analysis.results.aggregate`: ``corrupted_avg`` is ``Avg``, the mean over
the corruptions of each corruption's mean over its severities, and ``delta_tp`` is
``ΔTP = clean − Avg``; the ECE average is formed the same way. Per model and fraction
(:func:`summarize_seeds`) each number is the mean over the seeds, with its seed-noise band
(:func:`seed_band`): the sample standard deviation (``n − 1``) and the minimum and maximum
over the seeds.

Kendall τ (:func:`~reobench_mm.analysis.rank_stability.kendall_tau`:
``scipy.stats.kendalltau``, τ-b) compares rankings of the seed means at each fraction with
the ranking at the largest fraction:

- two or more models: the ranking of the models by clean metric, by corrupted average,
  and by ECE (clean and corrupted average) — does a small budget already tell which
  model ends up best?
- one model: the ranking of the conditions (``corruption@severity``) by metric — is the
  order of the harmful corruptions already settled with little data?

τ is ``None`` where it is undefined (fewer than two items, or a constant ranking).

Beside the τ of the seed means, the *seed band of τ*: the same τ computed per training
seed (each seed's own ranking at fraction f against the same seed's ranking at the
largest fraction; the seeds that every model ran at both fractions), then the mean, the
sample standard deviation (``n − 1``), the minimum and the maximum over the seeds
(:func:`seed_band` of the defined per-seed τ). It says how much the answer "does a small
budget already tell the final ranking" depends on the training seed; the τ of the seed
means is not the mean of the per-seed τ.
"""
from __future__ import annotations

import csv
import io
import os.path as osp
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..evaluation.keys import ECE_KEY
from ..fileio import atomic_write_text, dump_json_atomic, finite_or_none
from .plotting import plot_data_budget
from .rank_stability import kendall_tau
from .results import RobustnessSummary
from .tables import fmt_number, markdown_table

__all__ = [
    'DATA_BUDGET_FORMAT', 'DATA_BUDGET_FILES', 'BAND_KEYS', 'MODEL_TAU_KEYS', 'budget_row',
    'seed_band', 'summarize_seeds', 'kendall_tau_by_fraction', 'data_budget_markdown',
    'data_budget_csv_text', 'data_budget_seeds_csv_text', 'write_data_budget_report'
]

DATA_BUDGET_FORMAT = 'reobench_mm.data_budget/2'
DATA_BUDGET_FILES = ('data_budget.json', 'data_budget.csv', 'data_budget_seeds.csv',
                     'data_budget.md', 'data_budget.png')
#: Numbers of a row that get a seed-noise band in the summary: row key -> title.
BAND_KEYS = {'clean': 'clean', 'corrupted_avg': 'corrupted avg', 'delta_tp': 'ΔTP',
             'ece_clean': 'ECE clean', 'ece_corrupted_avg': 'ECE corrupted avg'}
#: Ranked quantities of the several-model τ: row key -> title.
MODEL_TAU_KEYS = {'clean': 'clean', 'corrupted_avg': 'corrupted avg',
                  'ece_clean': 'ECE clean', 'ece_corrupted_avg': 'ECE corrupted avg'}


# ----------------------------------------------------------------------------- rows

def budget_row(model: str, fraction: float, seed: int, summary: RobustnessSummary,
               num_train_images: int, full_train_images: int) -> dict:
    """One run's row (a model trained on one fraction with one seed) from the
    aggregation of its sweep.

    Args:
        model, fraction, seed: what was trained.
        summary: :func:`~reobench_mm.analysis.results.aggregate` of the run's conditions
            (e.g. the ``summary`` of :func:`~reobench_mm.analysis.results_file.read_results`).
        num_train_images, full_train_images: size of the subset and of the training set.

    Returns:
        dict: ``model``, ``fraction``, ``seed``, ``num_train_images``,
        ``full_train_images``, ``metric``, ``clean``, ``conditions`` (``'cloud@3' ->
        value``), ``per_corruption`` (corruption -> mean over its severities),
        ``corrupted_avg`` (REOBench's ``Avg``: the mean of ``per_corruption``),
        ``delta_tp`` (``clean − corrupted_avg``), ``ece_clean``, ``ece_conditions``,
        ``ece_corrupted_avg`` (ECE averaged as ``Avg`` is; ``None`` and ``{}`` without
        ``calib/ECE`` in every condition; ``None`` for a non-finite ECE).
    """
    conditions = {cond.key: float(result.value) for cond, result in summary.conditions.items()
                  if not cond.is_clean}
    ece = summary.extra.get(ECE_KEY)
    ece_conditions = {} if ece is None else {
        cond.key: finite_or_none(result.extra[ECE_KEY])
        for cond, result in summary.conditions.items() if not cond.is_clean}
    return dict(
        model=model, fraction=float(fraction), seed=int(seed),
        num_train_images=int(num_train_images), full_train_images=int(full_train_images),
        metric=summary.metric, clean=float(summary.clean), conditions=conditions,
        per_corruption={n: float(v) for n, v in summary.per_corruption.items()},
        corrupted_avg=float(summary.avg), delta_tp=float(summary.delta_tp),
        ece_clean=None if ece is None else finite_or_none(ece['clean']),
        ece_conditions=ece_conditions,
        ece_corrupted_avg=None if ece is None else finite_or_none(ece['avg']))


def seed_band(values: Sequence[Optional[float]]) -> Optional[Dict[str, Any]]:
    """The seed-noise band of one number over the seeds.

    Returns:
        ``{'n', 'mean', 'std', 'min', 'max'}``: the mean, the sample standard deviation
        (``n − 1`` in the denominator; None for one seed), the minimum and the maximum
        over the seeds; None when there is no value or one is missing (None).
    """
    if not len(values) or any(v is None for v in values):
        return None
    array = np.asarray(values, dtype=np.float64)
    return dict(n=int(array.size), mean=float(array.mean()),
                std=float(array.std(ddof=1)) if array.size > 1 else None,
                min=float(array.min()), max=float(array.max()))


def _mean(band: Optional[Mapping[str, Any]]) -> Optional[float]:
    return None if band is None else band['mean']


def summarize_seeds(seed_rows: Sequence[Mapping[str, Any]]) -> List[dict]:
    """One row per model × fraction from the rows of its seeds (:func:`budget_row`).

    Returns:
        list: in the order the (model, fraction) pairs first appear; each row has the keys
        of :func:`budget_row` (without ``seed``) holding the means over the seeds, plus
        ``seeds`` (the seeds, in order), ``band`` (key of :data:`BAND_KEYS` ->
        :func:`seed_band`), ``condition_band`` (condition -> :func:`seed_band` of its
        metric) and ``per_seed`` (each :data:`MODEL_TAU_KEYS` number, and under
        ``conditions`` each condition's metric, as a list in the order of ``seeds``: what
        the per-seed τ of :func:`kendall_tau_by_fraction` ranks).

    Raises:
        ValueError: no rows, a seed twice for one model and fraction, or seeds of one
            model and fraction with other conditions or other subset sizes.
    """
    if not seed_rows:
        raise ValueError('no rows to summarise')
    groups: Dict[Tuple[str, float], List[Mapping[str, Any]]] = {}
    for row in seed_rows:
        groups.setdefault((row['model'], float(row['fraction'])), []).append(row)
    summary = []
    for (model, fraction), rows in groups.items():
        seeds = [r['seed'] for r in rows]
        if len(set(seeds)) != len(seeds):
            raise ValueError(f'{model} at fraction {fraction:g}: a seed appears twice in {seeds}')
        first = rows[0]
        for row in rows[1:]:
            for key in ('metric', 'num_train_images', 'full_train_images'):
                if row[key] != first[key]:
                    raise ValueError(f'{model} at fraction {fraction:g}: {key} differs between '
                                     f'seeds ({first[key]!r}, {row[key]!r})')
            if list(row['conditions']) != list(first['conditions']):
                raise ValueError(f'{model} at fraction {fraction:g}: seed {row["seed"]} has the '
                                 f'conditions {list(row["conditions"])}, seed {first["seed"]} '
                                 f'{list(first["conditions"])}')
        band = {key: seed_band([r[key] for r in rows]) for key in BAND_KEYS}
        conditions = list(first['conditions'])
        condition_band = {c: seed_band([r['conditions'][c] for r in rows]) for c in conditions}
        has_ece = all(r['ece_conditions'] for r in rows)
        per_seed: Dict[str, Any] = {key: [r[key] for r in rows] for key in MODEL_TAU_KEYS}
        per_seed['conditions'] = {c: [r['conditions'][c] for r in rows] for c in conditions}
        summary.append(dict(
            model=model, fraction=fraction, seeds=seeds,
            num_train_images=first['num_train_images'],
            full_train_images=first['full_train_images'], metric=first['metric'],
            clean=_mean(band['clean']),
            conditions={c: _mean(condition_band[c]) for c in conditions},
            per_corruption={n: _mean(seed_band([r['per_corruption'][n] for r in rows]))
                            for n in first['per_corruption']},
            corrupted_avg=_mean(band['corrupted_avg']), delta_tp=_mean(band['delta_tp']),
            ece_clean=_mean(band['ece_clean']),
            ece_conditions={c: _mean(seed_band([r['ece_conditions'][c] for r in rows]))
                            for c in conditions} if has_ece else {},
            ece_corrupted_avg=_mean(band['ece_corrupted_avg']),
            band=band, condition_band=condition_band, per_seed=per_seed))
    return summary


# ----------------------------------------------------------------------------- τ

def _tau_entry(values: Sequence[Optional[float]],
               reference: Sequence[Optional[float]]) -> Dict[str, Optional[float]]:
    """``{'tau', 'p_value'}`` of :func:`~reobench_mm.analysis.rank_stability.kendall_tau` between
    ``values`` and ``reference``, in the convention of ``data_budget.json``: None where τ
    is undefined (fewer than two items, a missing value, or a constant ranking, for which
    ``kendall_tau`` gives NaN)."""
    if len(values) < 2 or any(v is None for v in list(values) + list(reference)):
        return dict(tau=None, p_value=None)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # constant input: NaN, written as None
        tau, p_value = kendall_tau(values, reference)
    return dict(tau=finite_or_none(tau), p_value=finite_or_none(p_value))


def _seed_values(row: Mapping[str, Any], key: Optional[str] = None,
                 condition: Optional[str] = None) -> Optional[Dict[int, Optional[float]]]:
    """``seed -> value`` of ``key`` (a :data:`MODEL_TAU_KEYS` number) or of
    ``condition``'s metric in a summarised row; None for rows without ``per_seed``."""
    per_seed = row.get('per_seed')
    if per_seed is None:
        return None
    values = per_seed[key] if condition is None else per_seed['conditions'].get(condition)
    if values is None:
        return None
    return dict(zip(row['seeds'], values))


def _seed_tau(items: Sequence[Tuple[Optional[Dict[int, Optional[float]]],
                                    Optional[Dict[int, Optional[float]]]]]) -> dict:
    """The per-seed τ of ranked ``items`` (``(seed -> value at f, seed -> value at the
    reference)`` per item) over the seeds every item has at both: ``{'per_seed': {seed:
    τ or None}, 'seed_band': seed_band of the defined τ (None when none is)}``."""
    if any(a is None or b is None for a, b in items):
        return dict(per_seed={}, seed_band=None)
    seeds = sorted(set.intersection(*(set(a) & set(b) for a, b in items)))
    per_seed = {str(s): _tau_entry([a[s] for a, _ in items], [b[s] for _, b in items])['tau']
                for s in seeds}
    defined = [t for t in per_seed.values() if t is not None]
    return dict(per_seed=per_seed, seed_band=seed_band(defined) if defined else None)


def kendall_tau_by_fraction(rows: Sequence[Mapping[str, Any]]) -> dict:
    """Kendall τ between the ranking at each fraction and at the largest fraction.

    Args:
        rows: one per model × fraction (:func:`summarize_seeds`: the seed means).

    With two or more models the models are ranked (by ``clean``, ``corrupted_avg``,
    ``ece_clean`` and ``ece_corrupted_avg``); with one model its conditions are ranked
    by metric.

    Returns:
        dict: ``mode`` (``'models'`` or ``'conditions'``), ``reference_fraction``,
        ``items`` (the ranked models or conditions) and ``by_fraction``: one entry per
        fraction, ``{'fraction': f, <quantity>: {'tau', 'p_value', 'per_seed',
        'seed_band'}, ...}`` (quantities as above, or ``'conditions'``): τ of the seed
        means, and the τ of each training seed's own rankings (``per_seed``: seed ->
        τ) with their :func:`seed_band` (mean, sample std, min, max over the seeds whose
        τ is defined).
    """
    models = list(dict.fromkeys(r['model'] for r in rows))
    fractions = sorted({float(r['fraction']) for r in rows})
    if not rows:
        raise ValueError('no rows to rank')
    table = {(r['model'], float(r['fraction'])): r for r in rows}
    missing = [(m, f) for m in models for f in fractions if (m, f) not in table]
    if missing:
        raise ValueError(f'rows missing for (model, fraction) {missing}')
    reference = fractions[-1]
    by_fraction = []
    if len(models) >= 2:
        for fraction in fractions:
            entry: Dict[str, Any] = dict(fraction=fraction)
            for key in MODEL_TAU_KEYS:
                entry[key] = _tau_entry([table[(m, fraction)][key] for m in models],
                                        [table[(m, reference)][key] for m in models])
                entry[key].update(_seed_tau([(_seed_values(table[(m, fraction)], key),
                                              _seed_values(table[(m, reference)], key))
                                             for m in models]))
            by_fraction.append(entry)
        return dict(mode='models', reference_fraction=reference, items=models,
                    by_fraction=by_fraction)
    model = models[0]
    conditions = list(table[(model, reference)]['conditions'])
    for fraction in fractions:
        values = table[(model, fraction)]['conditions']
        entry = _tau_entry([values.get(c) for c in conditions],
                           [table[(model, reference)]['conditions'][c] for c in conditions])
        entry.update(_seed_tau([(_seed_values(table[(model, fraction)], condition=c),
                                 _seed_values(table[(model, reference)], condition=c))
                                for c in conditions]))
        by_fraction.append(dict(fraction=fraction, conditions=entry))
    return dict(mode='conditions', reference_fraction=reference, items=conditions,
                by_fraction=by_fraction)


# ----------------------------------------------------------------------------- report

def _has_ece(doc: Mapping[str, Any]) -> bool:
    return any(r['ece_clean'] is not None for r in doc['rows'])


def _band_cell(band: Optional[Mapping[str, Any]], digits: int) -> str:
    """``mean ± std`` (``mean`` alone for one seed)."""
    if band is None:
        return fmt_number(None)
    if band['std'] is None:
        return fmt_number(band['mean'], digits)
    return f'{fmt_number(band["mean"], digits)} ± {fmt_number(band["std"], digits)}'


def _range_cell(band: Optional[Mapping[str, Any]], digits: int) -> str:
    if band is None:
        return fmt_number(None)
    return f'{fmt_number(band["min"], digits)} – {fmt_number(band["max"], digits)}'


def data_budget_markdown(doc: Mapping[str, Any]) -> str:
    """The report as Markdown: the seed means with their bands (one row per model ×
    fraction), every seed's numbers, then the τ table."""
    metric, conditions, has_ece = doc['metric'], doc['conditions'], _has_ece(doc)
    header = ['Model', 'Fraction', 'Train images', 'Seeds', f'Clean {metric}'] + conditions \
        + ['Corrupted avg', 'ΔTP', 'ΔTP min – max']
    if has_ece:
        header += ['ECE clean', 'ECE corrupted avg']
    rows = []
    for row in doc['rows']:
        band = row['band']
        cells = [row['model'], f'{row["fraction"]:g}',
                 f'{row["num_train_images"]} / {row["full_train_images"]}',
                 str(len(row['seeds'])), _band_cell(band['clean'], 2)]
        cells += [_band_cell(row['condition_band'].get(c), 2) for c in conditions]
        cells += [_band_cell(band['corrupted_avg'], 2), _band_cell(band['delta_tp'], 2),
                  _range_cell(band['delta_tp'], 2)]
        if has_ece:
            cells += [_band_cell(band['ece_clean'], 4), _band_cell(band['ece_corrupted_avg'], 4)]
        rows.append(cells)
    lines = [f'# Data budget: {metric} and calibration vs training data', '',
             f'Conditions: {", ".join(conditions)} (protocol {doc["protocol"]}, corruption '
             f'seed {doc["corruption_seed"]}). Training seeds: '
             f'{", ".join(map(str, doc["seeds"]))}; each seed draws its own nested subsets '
             'and seeds the training. Cells: mean ± sample standard deviation over the '
             'seeds. Corrupted avg = mean over the corruptions of each corruption\'s mean '
             'over its severities; ΔTP = clean − corrupted avg (REOBench).', '']
    lines += markdown_table(header, rows, align_left=None)
    lines += ['', '## Every seed', '']
    seed_header = ['Model', 'Fraction', 'Seed', f'Clean {metric}'] + conditions + \
        ['Corrupted avg', 'ΔTP'] + (['ECE clean', 'ECE corrupted avg'] if has_ece else [])
    seed_cells = []
    for row in doc['seed_rows']:
        cells = [row['model'], f'{row["fraction"]:g}', str(row['seed']),
                 fmt_number(row['clean'], 2)]
        cells += [fmt_number(row['conditions'].get(c), 2) for c in conditions]
        cells += [fmt_number(row['corrupted_avg'], 2), fmt_number(row['delta_tp'], 2)]
        if has_ece:
            cells += [fmt_number(row['ece_clean'], 4), fmt_number(row['ece_corrupted_avg'], 4)]
        seed_cells.append(cells)
    lines += markdown_table(seed_header, seed_cells, align_left=None)
    tau = doc['kendall_tau']
    lines += ['', f'## Kendall τ vs the largest fraction ({tau["reference_fraction"]:g})', '']
    if tau['mode'] == 'models':
        keys = [k for k in MODEL_TAU_KEYS if has_ece or not k.startswith('ece')]
        lines += ['Ranking of the models (seed means) at each fraction against their '
                  'ranking at the largest fraction (1: same order, −1: reversed).', '']
        lines += markdown_table(
            ['Fraction'] + [f'τ {MODEL_TAU_KEYS[k]}' for k in keys],
            [[f'{entry["fraction"]:g}'] + [fmt_number(entry[k]['tau'], 3) for k in keys]
             for entry in tau['by_fraction']], align_left=None)
        lines += _seed_tau_lines(tau, keys, [MODEL_TAU_KEYS[k] for k in keys])
    else:
        lines += ['Ranking of the conditions by metric (seed means) at each fraction against '
                  'their ranking at the largest fraction (one model; 1: same order).', '']
        lines += markdown_table(
            ['Fraction', 'τ conditions', 'p-value'],
            [[f'{entry["fraction"]:g}', fmt_number(entry['conditions']['tau'], 3),
              fmt_number(entry['conditions']['p_value'], 3)] for entry in tau['by_fraction']],
            align_left=None)
        lines += _seed_tau_lines(tau, ['conditions'], ['conditions'])
    return '\n'.join(lines) + '\n'


def _seed_tau_lines(tau: Mapping[str, Any], keys: Sequence[str],
                    titles: Sequence[str]) -> List[str]:
    """The table of the per-seed τ bands (none without per-seed τ)."""
    entries = tau['by_fraction']
    if not any(entry[k].get('seed_band') for entry in entries for k in keys):
        return []
    rows = []
    for entry in entries:
        cells = [f'{entry["fraction"]:g}']
        for key in keys:
            band = entry[key].get('seed_band')
            cells.append(fmt_number(None) if band is None else
                         f'{_band_cell(band, 3)} [{_range_cell(band, 3)}] (n = {band["n"]})')
        rows.append(cells)
    return ['', 'The same τ per training seed (each seed\'s ranking at the fraction against '
            'the same seed\'s at the largest fraction): mean ± sample standard deviation '
            '[min – max] over the seeds where it is defined.', ''] + markdown_table(
                ['Fraction'] + [f'τ {t} per seed' for t in titles], rows, align_left=None)


def _cell(value: Optional[float]) -> str:
    return '' if value is None else repr(float(value))


def data_budget_csv_text(doc: Mapping[str, Any]) -> str:
    """The summary as CSV: one line per model × fraction; each condition and
    :data:`BAND_KEYS` number as its seed mean, the latter also with ``_std``, ``_min``
    and ``_max`` columns (empty cells for missing values)."""
    conditions, has_ece = doc['conditions'], _has_ece(doc)
    keys = [k for k in BAND_KEYS if has_ece or not k.startswith('ece')]
    header = ['model', 'fraction', 'num_train_images', 'full_train_images', 'metric',
              'seeds'] + conditions
    for key in keys:
        header += [key, f'{key}_std', f'{key}_min', f'{key}_max']
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    writer.writerow(header)
    for row in doc['rows']:
        cells = [row['model'], repr(row['fraction']), row['num_train_images'],
                 row['full_train_images'], row['metric'], ' '.join(map(str, row['seeds']))]
        cells += [_cell(row['conditions'].get(c)) for c in conditions]
        for key in keys:
            band = row['band'][key] or {}
            cells += [_cell(row[key])] + [_cell(band.get(s)) for s in ('std', 'min', 'max')]
        writer.writerow(cells)
    return buffer.getvalue()


def data_budget_seeds_csv_text(doc: Mapping[str, Any]) -> str:
    """Every run as CSV: one line per model × fraction × seed (empty cells for missing
    values)."""
    conditions, has_ece = doc['conditions'], _has_ece(doc)
    header = ['model', 'fraction', 'seed', 'num_train_images', 'full_train_images', 'metric',
              'clean'] + conditions + ['corrupted_avg', 'delta_tp']
    if has_ece:
        header += ['ece_clean'] + [f'ece_{c}' for c in conditions] + ['ece_corrupted_avg']
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    writer.writerow(header)
    for row in doc['seed_rows']:
        cells = [row['model'], repr(row['fraction']), row['seed'], row['num_train_images'],
                 row['full_train_images'], row['metric'], _cell(row['clean'])]
        cells += [_cell(row['conditions'].get(c)) for c in conditions]
        cells += [_cell(row['corrupted_avg']), _cell(row['delta_tp'])]
        if has_ece:
            cells += [_cell(row['ece_clean'])]
            cells += [_cell(row['ece_conditions'].get(c)) for c in conditions]
            cells += [_cell(row['ece_corrupted_avg'])]
        writer.writerow(cells)
    return buffer.getvalue()


def write_data_budget_report(work_dir: str, doc: Mapping[str, Any],
                             plots: bool = True) -> Dict[str, str]:
    """Write ``data_budget.json``, ``.csv``, ``_seeds.csv``, ``.md`` (and ``.png``: the
    seed means) into ``work_dir`` atomically; returns ``file name -> path``."""
    files = {}
    path = osp.join(work_dir, 'data_budget.json')
    dump_json_atomic(doc, path)
    files['data_budget.json'] = path
    for name, text in (('data_budget.csv', data_budget_csv_text(doc)),
                       ('data_budget_seeds.csv', data_budget_seeds_csv_text(doc)),
                       ('data_budget.md', data_budget_markdown(doc))):
        files[name] = atomic_write_text(osp.join(work_dir, name), text)
    if plots:
        files['data_budget.png'] = plot_data_budget(doc, osp.join(work_dir,
                                                                  'data_budget.png'))
    return files
