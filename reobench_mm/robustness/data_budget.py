"""Data-budget sweep: robustness and calibration as functions of the training-set size,
over several training seeds.

For every model (config), training fraction and seed, :func:`run_data_budget` trains on a
nested subset of the training set (:class:`~reobench_mm.datasets.subset.FractionDataset`
drawn with that seed, so for one seed a smaller budget's images are among a larger
one's) with the runner seeded by the same seed, then evaluates the final checkpoint clean
and under each corruption × severity with
:class:`~reobench_mm.robustness.sweep.RobustnessSweep` (the corruption draws use one seed
of their own, the same for every run). Layout of the work dir::

    <work_dir>/<model>/fraction_<f>/seed_<s>/              training work dir
    <work_dir>/<model>/fraction_<f>/seed_<s>/data_budget_run.json   what was run
    <work_dir>/<model>/fraction_<f>/seed_<s>/robustness/   the sweep (results.json, ...)
    <work_dir>/data_budget.{json,csv,md,png}, data_budget_seeds.csv   the report

``<model>`` is the config file's stem. A rerun skips every (fraction, seed) whose
checkpoint and ``results.json`` are there for the same settings (``resume=False`` starts
over); a training that was cut short resumes from its latest checkpoint. Adding seeds or
fractions to a finished sweep runs only the new ones.

Numbers per run (:func:`budget_row`) are REOBench's, from
:func:`~reobench_mm.analysis.results.aggregate`: ``corrupted_avg`` is ``Avg``, the mean over
the corruptions of each corruption's mean over its severities, and ``delta_tp`` is
``ΔTP = clean − Avg``; the ECE average is formed the same way. Per model and fraction
(:func:`summarize_seeds`) each number is the mean over the seeds, with its seed-noise band
(:func:`seed_band`): the sample standard deviation (``n − 1``) and the minimum and maximum
over the seeds.

Kendall τ (:func:`~reobench_mm.analysis.compare.kendall_tau`: ``scipy.stats.kendalltau``,
τ-b) compares rankings of the seed means at each fraction with the ranking at the
largest fraction:

- two or more models: the ranking of the models by clean metric, by corrupted average,
  and by ECE (clean and corrupted average) — does a small budget already tell which
  model ends up best?
- one model: the ranking of the conditions (``corruption@severity``) by metric — is the
  order of the harmful corruptions already settled with little data?

τ is ``None`` where it is undefined (fewer than two items, or a constant ranking).
"""
from __future__ import annotations

import csv
import io
import json
import numbers
import os.path as osp
import uuid
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
from mmengine.config import Config

from ..analysis.compare import kendall_tau
from ..analysis.plotting import plot_data_budget
from ..analysis.report import summary_from_results_json
from ..analysis.results import RobustnessSummary
from ..analysis.tables import fmt_number, markdown_table
from ..datasets.subset import FractionDataset, apply_data_fraction, check_fraction
from ..evaluation.keys import ECE_KEY, get_task
from ..fileio import (atomic_write_text, dump_json_atomic, file_sha256, finite_or_none,
                      json_round_trip)
from ..utils.config import infer_task, prepare_train_config
from .plan import select_corruptions, select_severities
from .sweep import RobustnessSweep

__all__ = [
    'DATA_BUDGET_FORMAT', 'DEFAULT_FRACTIONS', 'DEFAULT_SEEDS', 'DATA_BUDGET_FILES',
    'BAND_KEYS', 'run_data_budget', 'check_fractions', 'check_seeds', 'fraction_dirname',
    'seed_dirname', 'budget_row', 'seed_band', 'summarize_seeds', 'kendall_tau_by_fraction',
    'data_budget_markdown', 'data_budget_csv_text', 'data_budget_seeds_csv_text',
    'write_data_budget_report'
]

DATA_BUDGET_FORMAT = 'reobench_mm.data_budget/2'
RUN_FORMAT = 'reobench_mm.data_budget_run/2'
RUN_FILE = 'data_budget_run.json'
SWEEP_DIR = 'robustness'
DEFAULT_FRACTIONS = (0.01, 0.1, 0.25, 0.5, 0.75)
#: Training seeds of a sweep by default: the calibration study's 3 for segmentation.
DEFAULT_SEEDS = (0, 1, 2)
DATA_BUDGET_FILES = ('data_budget.json', 'data_budget.csv', 'data_budget_seeds.csv',
                     'data_budget.md', 'data_budget.png')
#: Numbers of a row that get a seed-noise band in the summary: row key -> title.
BAND_KEYS = {'clean': 'clean', 'corrupted_avg': 'corrupted avg', 'delta_tp': 'ΔTP',
             'ece_clean': 'ECE clean', 'ece_corrupted_avg': 'ECE corrupted avg'}
#: Ranked quantities of the several-model τ: row key -> title.
MODEL_TAU_KEYS = {'clean': 'clean', 'corrupted_avg': 'corrupted avg',
                  'ece_clean': 'ECE clean', 'ece_corrupted_avg': 'ECE corrupted avg'}


# ----------------------------------------------------------------------------- inputs

def check_fractions(fractions: Sequence[float]) -> List[float]:
    """The fractions as floats in (0, 1], sorted, without duplicates.

    Raises:
        ValueError: none given, or one outside (0, 1].
    """
    if isinstance(fractions, (int, float)):
        fractions = [fractions]
    checked = sorted({check_fraction(f) for f in fractions})
    if not checked:
        raise ValueError('no training fraction given; give some in (0, 1], e.g. 0.1 0.5 1')
    return checked


def check_seeds(seeds: Sequence[int]) -> List[int]:
    """The training seeds as ints, in the order given.

    Raises:
        ValueError: none given, one that is not an integer ≥ 0 (booleans included), or one
            given twice.
    """
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        seeds = [seeds]
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
        raise ValueError(f'seeds must be a list of integers >= 0, e.g. [0, 1, 2], got {seeds!r}')
    bad = [s for s in seeds
           if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0]
    if bad:
        raise ValueError(f'seeds must be integers >= 0, got {bad}')
    checked = [int(s) for s in seeds]
    if not checked:
        raise ValueError('no training seed given; give one or more, e.g. 0 1 2')
    repeated = sorted({s for s in checked if checked.count(s) > 1})
    if repeated:
        raise ValueError(f'seeds must differ, got {repeated} more than once')
    return checked


def fraction_dirname(fraction: float) -> str:
    """``fraction_0.01``, ``fraction_0.5``, ``fraction_1``."""
    return f'fraction_{check_fraction(fraction):g}'


def seed_dirname(seed: int) -> str:
    """``seed_0``, ``seed_1``, ..."""
    return f'seed_{check_seeds([seed])[0]}'


def _model_name(config: str) -> str:
    return osp.splitext(osp.basename(config))[0]


def _run_key(model: str, fraction: float, seed: int) -> str:
    return f'{model}@{fraction:g}/seed{seed}'


# ----------------------------------------------------------------------------- rows

def budget_row(model: str, fraction: float, seed: int, summary: RobustnessSummary,
               num_train_images: int, full_train_images: int) -> dict:
    """One run's row (a model trained on one fraction with one seed) from the
    aggregation of its sweep.

    Args:
        model, fraction, seed: what was trained.
        summary: :func:`~reobench_mm.analysis.results.aggregate` of the run's conditions
            (e.g. :func:`~reobench_mm.analysis.report.summary_from_results_json`).
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
        :func:`seed_band`) and ``condition_band`` (condition -> :func:`seed_band` of its
        metric).

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
            band=band, condition_band=condition_band))
    return summary


# ----------------------------------------------------------------------------- τ

def _tau_entry(values: Sequence[Optional[float]],
               reference: Sequence[Optional[float]]) -> Dict[str, Optional[float]]:
    """``{'tau', 'p_value'}`` of :func:`~reobench_mm.analysis.compare.kendall_tau` between
    ``values`` and ``reference``, in the convention of ``data_budget.json``: None where τ
    is undefined (fewer than two items, a missing value, or a constant ranking, for which
    ``kendall_tau`` gives NaN)."""
    if len(values) < 2 or any(v is None for v in list(values) + list(reference)):
        return dict(tau=None, p_value=None)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # constant input: NaN, written as None
        tau, p_value = kendall_tau(values, reference)
    return dict(tau=finite_or_none(tau), p_value=finite_or_none(p_value))


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
        fraction, ``{'fraction': f, <quantity>: {'tau', 'p_value'}, ...}`` (quantities
        as above, or ``'conditions'``).
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
            by_fraction.append(entry)
        return dict(mode='models', reference_fraction=reference, items=models,
                    by_fraction=by_fraction)
    model = models[0]
    conditions = list(table[(model, reference)]['conditions'])
    for fraction in fractions:
        values = table[(model, fraction)]['conditions']
        by_fraction.append(dict(fraction=fraction, conditions=_tau_entry(
            [values.get(c) for c in conditions],
            [table[(model, reference)]['conditions'][c] for c in conditions])))
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
    else:
        lines += ['Ranking of the conditions by metric (seed means) at each fraction against '
                  'their ranking at the largest fraction (one model; 1: same order).', '']
        lines += markdown_table(
            ['Fraction', 'τ conditions', 'p-value'],
            [[f'{entry["fraction"]:g}', fmt_number(entry['conditions']['tau'], 3),
              fmt_number(entry['conditions']['p_value'], 3)] for entry in tau['by_fraction']],
            align_left=None)
    return '\n'.join(lines) + '\n'


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


# ----------------------------------------------------------------------------- running


def _load_run_record(path: str) -> Optional[dict]:
    try:
        with open(path, encoding='utf-8') as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get('format') == RUN_FORMAT else None


def _final_checkpoint(runner) -> str:
    """The checkpoint the ``CheckpointHook`` saved last, else one saved now."""
    pointer = osp.join(runner.work_dir, 'last_checkpoint')
    if osp.isfile(pointer):
        with open(pointer, encoding='utf-8') as handle:
            path = handle.read().strip()
        if osp.isfile(path):
            return osp.abspath(path)
    name = 'data_budget_final.pth'
    runner.save_checkpoint(runner.work_dir, name, save_optimizer=False,
                           save_param_scheduler=False)
    return osp.abspath(osp.join(runner.work_dir, name))


def _train(config: str, model: str, fraction: float, seed: int, run_dir: str,
           cfg_options: dict, iters: Optional[int], resume_training: bool) -> dict:
    from mmengine.runner import Runner

    from ..engine import rescale_iter_schedule
    cfg = prepare_train_config(config, work_dir=run_dir, cfg_options=cfg_options,
                               resume='auto' if resume_training else None)
    if iters is not None:
        rescale_iter_schedule(cfg, iters)
    apply_data_fraction(cfg, fraction, seed)
    randomness = dict(cfg.get('randomness') or {})
    randomness['seed'] = seed
    cfg.randomness = randomness
    # a name of its own: MMEngine's logger and visualizer are global per experiment name
    cfg.experiment_name = (f'data_budget_{model}_{fraction:g}_seed{seed}_'
                           f'{uuid.uuid4().hex[:8]}')
    if isinstance(cfg.get('visualizer'), dict):
        cfg.visualizer.name = cfg.experiment_name
    runner = Runner.from_cfg(cfg)
    runner.train()
    dataset = runner.train_dataloader.dataset
    while not isinstance(dataset, FractionDataset):  # e.g. inside EpochIndexedDataset
        dataset = dataset.dataset
    return dict(checkpoint=_final_checkpoint(runner), num_train_images=len(dataset),
                full_train_images=dataset.full_len)


def _run_one(config: str, model: str, fraction: float, seed: int, *, work_dir: str,
             iters: Optional[int], cfg_options: dict, train_settings: dict,
             sweep_kwargs: dict, eval_settings: dict, resume: bool) -> tuple:
    """Train (unless done) and evaluate (unless done) one model at one fraction with one
    seed: ``(run record, 'trained' | 'evaluated' | 'skipped')``."""
    run_dir = osp.join(work_dir, model, fraction_dirname(fraction), seed_dirname(seed))
    record_path = osp.join(run_dir, RUN_FILE)
    sweep_dir = osp.join(run_dir, SWEEP_DIR)
    record = _load_run_record(record_path)
    if record is not None and record.get('train_settings') != train_settings:
        if resume:
            raise ValueError(
                f'{run_dir} holds a run of other settings (config, iters or cfg_options '
                'differ); use resume=False (--no-resume) to start over, or another work dir')
        record = None
    trained = bool(resume and record is not None and record.get('status') == 'trained'
                   and osp.isfile(record.get('checkpoint', '')))
    evaluated = record.get('evaluation') if trained else None
    if evaluated == eval_settings and osp.isfile(osp.join(sweep_dir, 'results.json')):
        return record, 'skipped'
    if not trained:
        # a training cut short (a record, no 'trained') goes on from its last checkpoint
        resume_training = bool(resume and record is not None
                               and osp.isfile(osp.join(run_dir, 'last_checkpoint')))
        record = dict(format=RUN_FORMAT, model=model, fraction=fraction, seed=seed,
                      status='training', train_settings=train_settings)
        dump_json_atomic(record, record_path)
        record.update(_train(config, model, fraction, seed, run_dir, cfg_options, iters,
                             resume_training), status='trained')
        dump_json_atomic(record, record_path)
    # condition files of this checkpoint and settings are reused (an interrupted sweep)
    reuse_conditions = trained and evaluated is None
    RobustnessSweep(config, record['checkpoint'], work_dir=sweep_dir,
                    force=not reuse_conditions, **sweep_kwargs).run()
    record['evaluation'] = eval_settings
    dump_json_atomic(record, record_path)
    return record, 'evaluated' if trained else 'trained'


def run_data_budget(configs: Sequence[str],
                    fractions: Sequence[float] = DEFAULT_FRACTIONS,
                    seeds: Sequence[int] = DEFAULT_SEEDS,
                    corruptions: Sequence[str] = ('cloud', 'gaussian_noise'),
                    severities: Sequence[int] = (3, ), protocol: str = 'reobench',
                    corruption_seed: int = 0, work_dir: str = 'work_dirs/data_budget',
                    cfg_options: Optional[dict] = None, iters: Optional[int] = None,
                    calibration: bool = True, resume: bool = True,
                    plots: bool = True,
                    seen_corruptions: Union[None, str, Sequence[str]] = 'auto') -> dict:
    """Train every model on every fraction of its training set with every seed, evaluate
    each run clean and under corruptions, and write the data-budget report.

    Args:
        configs: training configs (segmentation or rotated detection, all of one task);
            the models are named by the config file stems, which must differ.
        fractions: shares of the training set in (0, 1] (nested subsets, see
            :class:`~reobench_mm.datasets.subset.FractionDataset`).
        seeds: training seeds (integers ≥ 0; default 3, as the calibration study for
            segmentation). Seed ``s`` draws the subsets (``FractionDataset(seed=s)``) and
            seeds the runner (``randomness.seed = s``, over any config value).
        corruptions: names or groups of ``protocol`` (see
            :func:`~reobench_mm.robustness.plan.select_corruptions`).
        severities: severities 1..5.
        protocol: ``'reobench'`` or ``'geofm_calibration'``.
        corruption_seed: seed of the corruptions' random draws, the same for every run.
        work_dir: output folder (layout in the module docstring).
        cfg_options: config overrides for training and evaluation (``--cfg-options``).
        iters: training iterations of each run (the schedule is rescaled with
            :func:`~reobench_mm.engine.rescale_iter_schedule`); None keeps the config's.
        calibration: also evaluate ``calib/ECE`` (segmentation: ``SegCalibrationMetric``,
            detection: ``RotatedDetectionCalibrationMetric``).
        resume: skip the runs finished with the same settings, resume cut-short
            trainings; False trains and evaluates everything again.
        plots: write ``data_budget.png``.
        seen_corruptions: the corruptions each model saw in training, for the sweeps'
            held-out scores (``RobustnessTestLoop``'s option: ``'auto'`` reads each
            config's ``RandomCorruption`` pools).

    Returns:
        dict: the ``data_budget.json`` document (``rows``: one per model × fraction with
        seed means and bands, :func:`summarize_seeds`; ``seed_rows``: one per run,
        :func:`budget_row`; ``kendall_tau``; the settings) plus ``files`` (name -> path)
        and ``status`` (``'<model>@<fraction>/seed<s>'`` -> ``'trained'``,
        ``'evaluated'`` or ``'skipped'``).

    Raises:
        ValueError: bad fractions, seeds, corruptions, severities, protocol or iters,
            missing or duplicate configs, configs of different tasks, or a run folder
            that holds a run of other settings while ``resume`` is True.
    """
    if isinstance(configs, str):
        configs = [configs]
    configs = list(configs)
    if not configs:
        raise ValueError('no config given; give one training config per model')
    for config in configs:
        if not osp.isfile(config):
            raise ValueError(f'config {config!r} does not exist')
    models = [_model_name(c) for c in configs]
    duplicates = sorted({m for m in models if models.count(m) > 1})
    if duplicates:
        raise ValueError(f'config file names must differ (they name the models); '
                         f'{duplicates} appear more than once')
    fractions = check_fractions(fractions)
    seeds = check_seeds(seeds)
    corruptions = select_corruptions(corruptions, protocol)
    severities = select_severities(severities)
    if iters is not None and (isinstance(iters, bool) or not isinstance(iters, int)
                              or iters < 1):
        raise ValueError(f'iters must be a positive integer or None, got {iters!r}')
    if isinstance(corruption_seed, bool) or not isinstance(corruption_seed, int) \
            or corruption_seed < 0:
        raise ValueError(f'corruption_seed must be a non-negative integer, got '
                         f'{corruption_seed!r}')
    cfg_options = dict(cfg_options or {})
    tasks = {}
    for config in configs:
        cfg = Config.fromfile(config)
        cfg.merge_from_dict(cfg_options)
        tasks[config] = infer_task(cfg)
    if len(set(tasks.values())) > 1:
        raise ValueError(f'all configs must be of one task, got {tasks}')

    status: Dict[str, str] = {}
    seed_rows, results_files = [], {}
    eval_settings = json_round_trip(dict(corruptions=corruptions, severities=severities,
                                         protocol=protocol, corruption_seed=corruption_seed,
                                         calibration=bool(calibration),
                                         cfg_options=cfg_options,
                                         seen_corruptions=seen_corruptions))
    sweep_kwargs = dict(corruptions=corruptions, severities=severities, protocol=protocol,
                        seed=corruption_seed, cfg_options=dict(cfg_options), plots=False,
                        calibration=bool(calibration), seen_corruptions=seen_corruptions)
    for config, model in zip(configs, models):
        train_settings = json_round_trip(dict(config=osp.abspath(config),
                                              config_sha256=file_sha256(config),
                                              iters=iters, cfg_options=cfg_options))
        for fraction in fractions:
            for seed in seeds:
                key = _run_key(model, fraction, seed)
                record, status[key] = _run_one(
                    config, model, fraction, seed, work_dir=work_dir, iters=iters,
                    cfg_options=cfg_options,
                    train_settings=dict(train_settings, fraction=fraction, seed=seed),
                    sweep_kwargs=sweep_kwargs, eval_settings=eval_settings, resume=resume)
                results_path = osp.join(work_dir, model, fraction_dirname(fraction),
                                        seed_dirname(seed), SWEEP_DIR, 'results.json')
                seed_rows.append(budget_row(model, fraction, seed,
                                            summary_from_results_json(results_path),
                                            record['num_train_images'],
                                            record['full_train_images']))
                results_files[key] = results_path

    conditions = list(seed_rows[0]['conditions'])
    for row in seed_rows:
        if list(row['conditions']) != conditions:
            raise ValueError(f'{row["model"]} at fraction {row["fraction"]:g}, seed '
                             f'{row["seed"]} has the conditions {list(row["conditions"])}, '
                             f'expected {conditions}')
    rows = summarize_seeds(seed_rows)
    task = get_task(tasks[configs[0]]).results_name
    doc = dict(format=DATA_BUDGET_FORMAT, task=task, metric=rows[0]['metric'], models=models,
               configs={m: osp.abspath(c) for m, c in zip(models, configs)},
               fractions=fractions, seeds=seeds, corruptions=corruptions,
               severities=severities, protocol=protocol, conditions=conditions,
               corruption_seed=corruption_seed, iters=iters, calibration=bool(calibration),
               results=results_files, rows=rows, seed_rows=seed_rows,
               kendall_tau=kendall_tau_by_fraction(rows))
    files = write_data_budget_report(work_dir, doc, plots=plots)
    return dict(doc, files=files, status=status)
