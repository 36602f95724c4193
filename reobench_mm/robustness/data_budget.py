"""Data-budget sweep: robustness and calibration as functions of the training-set size.

For every model (config) and training fraction, :func:`run_data_budget` trains on a
nested subset of the training set (:class:`~reobench_mm.datasets.subset.FractionDataset`,
one permutation per seed, so a smaller budget's images are among a larger one's), then
evaluates the final checkpoint clean and under each corruption × severity with
:class:`~reobench_mm.robustness.sweep.RobustnessSweep`. Layout of the work dir::

    <work_dir>/<model>/fraction_<f>/              training work dir (checkpoints, logs)
    <work_dir>/<model>/fraction_<f>/data_budget_run.json   what was trained/evaluated
    <work_dir>/<model>/fraction_<f>/robustness/   the sweep (results.json, conditions/)
    <work_dir>/data_budget.{json,csv,md,png}      the report

``<model>`` is the config file's stem. A rerun skips every fraction whose checkpoint and
``results.json`` are there for the same settings (``resume=False`` starts over); a
training that was cut short resumes from its latest checkpoint.

Kendall τ (:func:`~reobench_mm.analysis.compare.kendall_tau`: ``scipy.stats.kendalltau``,
τ-b) compares rankings at each fraction with the ranking at the largest fraction:

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
import os.path as osp
import uuid
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np
from mmengine.config import Config

from ..analysis.compare import kendall_tau
from ..analysis.plotting import plot_data_budget
from ..analysis.report import load_results_json
from ..analysis.tables import fmt_number, markdown_table
from ..corruptions.condition import CLEAN
from ..datasets.subset import apply_data_fraction, check_fraction
from ..evaluation.keys import ECE_KEY, get_task
from ..fileio import (atomic_write_text, dump_json_atomic, file_sha256, finite_or_none,
                      json_round_trip)
from ..utils.config import infer_task, prepare_train_config
from .plan import select_corruptions, select_severities
from .sweep import RobustnessSweep

__all__ = [
    'DATA_BUDGET_FORMAT', 'DEFAULT_FRACTIONS', 'DATA_BUDGET_FILES',
    'run_data_budget', 'check_fractions', 'fraction_dirname', 'budget_row',
    'kendall_tau_by_fraction', 'data_budget_markdown', 'data_budget_csv_text',
    'write_data_budget_report'
]

DATA_BUDGET_FORMAT = 'reobench_mm.data_budget/1'
RUN_FORMAT = 'reobench_mm.data_budget_run/1'
RUN_FILE = 'data_budget_run.json'
SWEEP_DIR = 'robustness'
DEFAULT_FRACTIONS = (0.01, 0.1, 0.25, 0.5, 0.75)
DATA_BUDGET_FILES = ('data_budget.json', 'data_budget.csv', 'data_budget.md',
                     'data_budget.png')
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


def fraction_dirname(fraction: float) -> str:
    """``fraction_0.01``, ``fraction_0.5``, ``fraction_1``."""
    return f'fraction_{check_fraction(fraction):g}'


def _model_name(config: str) -> str:
    return osp.splitext(osp.basename(config))[0]


def _mean_or_none(values: Sequence[Optional[float]]) -> Optional[float]:
    if not values or any(v is None for v in values):
        return None
    return float(np.mean(values))


# ----------------------------------------------------------------------------- rows, τ

def budget_row(model: str, fraction: float, results: Mapping[str, Any],
               num_train_images: int, full_train_images: int) -> dict:
    """One report row from a sweep's ``results.json`` document.

    Returns:
        dict: ``model``, ``fraction``, ``num_train_images``, ``full_train_images``,
        ``metric``, ``clean``, ``conditions`` (``'cloud@3' -> value``), ``corrupted_avg``
        (mean over the corrupted conditions), ``delta_tp`` (clean − corrupted average),
        ``ece_clean``, ``ece_conditions``, ``ece_corrupted_avg`` (``None`` without
        ``calib/ECE``).
    """
    numbers = results['numbers']
    clean_value, ece_clean = None, None
    conditions: Dict[str, float] = {}
    ece_conditions: Dict[str, Optional[float]] = {}
    for entry in numbers['conditions']:
        extra = entry.get('extra') or {}
        ece = finite_or_none(extra.get(ECE_KEY))
        if entry['condition'] == CLEAN.key:
            clean_value, ece_clean = float(entry['value']), ece
        else:
            conditions[entry['condition']] = float(entry['value'])
            ece_conditions[entry['condition']] = ece
    if clean_value is None or not conditions:
        raise ValueError(f'the results of {model} at fraction {fraction} lack the clean '
                         'condition or every corrupted one')
    corrupted_avg = float(np.mean(list(conditions.values())))
    has_ece = ece_clean is not None or any(v is not None for v in ece_conditions.values())
    return dict(
        model=model, fraction=float(fraction), num_train_images=int(num_train_images),
        full_train_images=int(full_train_images), metric=numbers['metric'],
        clean=clean_value, conditions=conditions, corrupted_avg=corrupted_avg,
        delta_tp=clean_value - corrupted_avg, ece_clean=ece_clean,
        ece_conditions=ece_conditions if has_ece else {},
        ece_corrupted_avg=_mean_or_none(list(ece_conditions.values())))


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


def data_budget_markdown(doc: Mapping[str, Any]) -> str:
    """The report as Markdown: one row per model × fraction, then the τ table."""
    metric, conditions, has_ece = doc['metric'], doc['conditions'], _has_ece(doc)
    header = ['Model', 'Fraction', 'Train images', f'Clean {metric}'] + conditions + \
        ['Corrupted avg', 'ΔTP']
    if has_ece:
        header += ['ECE clean', 'ECE corrupted avg']
    rows = []
    for row in doc['rows']:
        cells = [row['model'], f'{row["fraction"]:g}',
                 f'{row["num_train_images"]} / {row["full_train_images"]}',
                 fmt_number(row['clean'], 2)] + [fmt_number(row['conditions'].get(c), 2)
                                                 for c in conditions]
        cells += [fmt_number(row['corrupted_avg'], 2), fmt_number(row['delta_tp'], 2)]
        if has_ece:
            cells += [fmt_number(row['ece_clean'], 4), fmt_number(row['ece_corrupted_avg'], 4)]
        rows.append(cells)
    lines = [f'# Data budget: {metric} and calibration vs training data', '',
             f'Conditions: {", ".join(conditions)}; subset seed {doc["seed"]} (nested '
             'subsets: a smaller fraction\'s images are among a larger one\'s). ΔTP = '
             'clean − corrupted average.', '']
    lines += markdown_table(header, rows, align_left=None)
    tau = doc['kendall_tau']
    lines += ['', f'## Kendall τ vs the largest fraction ({tau["reference_fraction"]:g})', '']
    if tau['mode'] == 'models':
        keys = [k for k in MODEL_TAU_KEYS if has_ece or not k.startswith('ece')]
        lines += ['Ranking of the models at each fraction against their ranking at the '
                  'largest fraction (1: same order, −1: reversed).', '']
        lines += markdown_table(
            ['Fraction'] + [f'τ {MODEL_TAU_KEYS[k]}' for k in keys],
            [[f'{entry["fraction"]:g}'] + [fmt_number(entry[k]['tau'], 3) for k in keys]
             for entry in tau['by_fraction']], align_left=None)
    else:
        lines += ['Ranking of the conditions by metric at each fraction against their '
                  'ranking at the largest fraction (one model; 1: same order).', '']
        lines += markdown_table(
            ['Fraction', 'τ conditions', 'p-value'],
            [[f'{entry["fraction"]:g}', fmt_number(entry['conditions']['tau'], 3),
              fmt_number(entry['conditions']['p_value'], 3)] for entry in tau['by_fraction']],
            align_left=None)
    return '\n'.join(lines) + '\n'


def data_budget_csv_text(doc: Mapping[str, Any]) -> str:
    """The rows as CSV (one per model × fraction; empty cells for missing values)."""
    conditions, has_ece = doc['conditions'], _has_ece(doc)
    header = ['model', 'fraction', 'num_train_images', 'full_train_images', 'metric',
              'clean'] + conditions + ['corrupted_avg', 'delta_tp']
    if has_ece:
        header += ['ece_clean'] + [f'ece_{c}' for c in conditions] + ['ece_corrupted_avg']
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    writer.writerow(header)

    def cell(value):
        return '' if value is None else repr(float(value))

    for row in doc['rows']:
        cells = [row['model'], repr(row['fraction']), row['num_train_images'],
                 row['full_train_images'], row['metric'], cell(row['clean'])]
        cells += [cell(row['conditions'].get(c)) for c in conditions]
        cells += [cell(row['corrupted_avg']), cell(row['delta_tp'])]
        if has_ece:
            cells += [cell(row['ece_clean'])]
            cells += [cell(row['ece_conditions'].get(c)) for c in conditions]
            cells += [cell(row['ece_corrupted_avg'])]
        writer.writerow(cells)
    return buffer.getvalue()


def write_data_budget_report(work_dir: str, doc: Mapping[str, Any],
                             plots: bool = True) -> Dict[str, str]:
    """Write ``data_budget.json``, ``.csv``, ``.md`` (and ``.png``) into ``work_dir``
    atomically; returns ``file name -> path``."""
    files = {}
    path = osp.join(work_dir, 'data_budget.json')
    dump_json_atomic(doc, path)
    files['data_budget.json'] = path
    files['data_budget.csv'] = atomic_write_text(osp.join(work_dir, 'data_budget.csv'),
                                                 data_budget_csv_text(doc))
    files['data_budget.md'] = atomic_write_text(osp.join(work_dir, 'data_budget.md'),
                                                data_budget_markdown(doc))
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
    # a name of its own: MMEngine's logger and visualizer are global per experiment name
    cfg.experiment_name = f'data_budget_{model}_{fraction:g}_{uuid.uuid4().hex[:8]}'
    if isinstance(cfg.get('visualizer'), dict):
        cfg.visualizer.name = cfg.experiment_name
    runner = Runner.from_cfg(cfg)
    runner.train()
    dataset = runner.train_dataloader.dataset
    return dict(checkpoint=_final_checkpoint(runner), num_train_images=len(dataset),
                full_train_images=dataset.full_len)


def _run_fraction(config: str, model: str, fraction: float, *, seed: int, work_dir: str,
                  iters: Optional[int], cfg_options: dict, train_settings: dict,
                  sweep_kwargs: dict, eval_settings: dict, resume: bool) -> tuple:
    """Train (unless done) and evaluate (unless done) one model at one fraction:
    ``(run record, 'trained' | 'evaluated' | 'skipped')``."""
    run_dir = osp.join(work_dir, model, fraction_dirname(fraction))
    record_path = osp.join(run_dir, RUN_FILE)
    sweep_dir = osp.join(run_dir, SWEEP_DIR)
    record = _load_run_record(record_path)
    if record is not None and record.get('train_settings') != train_settings:
        if resume:
            raise ValueError(
                f'{run_dir} holds a run of other settings (config, seed, iters or '
                'cfg_options differ); use resume=False (--no-resume) to start over, or '
                'another work dir')
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
        record = dict(format=RUN_FORMAT, model=model, fraction=fraction,
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
                    corruptions: Sequence[str] = ('cloud', 'gaussian_noise'),
                    severities: Sequence[int] = (3, ), seed: int = 0,
                    work_dir: str = 'work_dirs/data_budget',
                    cfg_options: Optional[dict] = None, iters: Optional[int] = None,
                    calibration: bool = True, resume: bool = True,
                    plots: bool = True) -> dict:
    """Train every model on every fraction of its training set, evaluate it clean and
    under corruptions, and write the data-budget report.

    Args:
        configs: training configs (segmentation or rotated detection, all of one task);
            the models are named by the config file stems, which must differ.
        fractions: shares of the training set in (0, 1] (nested subsets, see
            :class:`~reobench_mm.datasets.subset.FractionDataset`).
        corruptions: names or groups (see
            :func:`~reobench_mm.robustness.plan.select_corruptions`).
        severities: severities 1..5.
        seed: seed of the training subsets and of the corruption draws.
        work_dir: output folder (layout in the module docstring).
        cfg_options: config overrides for training and evaluation (``--cfg-options``).
        iters: training iterations of each run (the schedule is rescaled with
            :func:`~reobench_mm.engine.rescale_iter_schedule`); None keeps the config's.
        calibration: also evaluate ``calib/ECE`` (segmentation: ``SegCalibrationMetric``,
            detection: ``RotatedDetectionCalibrationMetric``).
        resume: skip the fractions finished with the same settings, resume cut-short
            trainings; False trains and evaluates everything again.
        plots: write ``data_budget.png``.

    Returns:
        dict: the ``data_budget.json`` document (``rows``, ``kendall_tau``, settings) plus
        ``files`` (name -> path) and ``status`` (``'<model>@<fraction>'`` -> ``'trained'``,
        ``'evaluated'`` or ``'skipped'``).

    Raises:
        ValueError: bad fractions, corruptions, severities or iters, missing or
            duplicate configs, configs of different tasks, or a fraction folder that
            holds a run of other settings while ``resume`` is True.
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
    corruptions = select_corruptions(corruptions)
    severities = select_severities(severities)
    if iters is not None and (isinstance(iters, bool) or not isinstance(iters, int)
                              or iters < 1):
        raise ValueError(f'iters must be a positive integer or None, got {iters!r}')
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f'seed must be a non-negative integer, got {seed!r}')
    cfg_options = dict(cfg_options or {})
    tasks = {}
    for config in configs:
        cfg = Config.fromfile(config)
        cfg.merge_from_dict(cfg_options)
        tasks[config] = infer_task(cfg)
    if len(set(tasks.values())) > 1:
        raise ValueError(f'all configs must be of one task, got {tasks}')

    status: Dict[str, str] = {}
    rows, results_files = [], {}
    for config, model in zip(configs, models):
        sweep_options = dict(cfg_options)
        train_settings = json_round_trip(dict(config=osp.abspath(config),
                                              config_sha256=file_sha256(config), seed=seed,
                                              iters=iters, cfg_options=cfg_options))
        eval_settings = json_round_trip(dict(corruptions=corruptions, severities=severities,
                                             seed=seed, calibration=bool(calibration),
                                             cfg_options=sweep_options))
        sweep_kwargs = dict(corruptions=corruptions, severities=severities, seed=seed,
                            cfg_options=sweep_options, plots=False,
                            calibration=bool(calibration))
        for fraction in fractions:
            key = f'{model}@{fraction:g}'
            record, status[key] = _run_fraction(
                config, model, fraction, seed=seed, work_dir=work_dir, iters=iters,
                cfg_options=cfg_options, train_settings=dict(train_settings, fraction=fraction),
                sweep_kwargs=sweep_kwargs, eval_settings=eval_settings, resume=resume)
            results_path = osp.join(work_dir, model, fraction_dirname(fraction), SWEEP_DIR,
                                    'results.json')
            rows.append(budget_row(model, fraction, load_results_json(results_path),
                                   record['num_train_images'], record['full_train_images']))
            results_files[key] = results_path

    conditions = list(rows[0]['conditions'])
    for row in rows:
        if list(row['conditions']) != conditions:
            raise ValueError(f'{row["model"]} at fraction {row["fraction"]:g} has the '
                             f'conditions {list(row["conditions"])}, expected {conditions}')
    task = get_task(tasks[configs[0]]).results_name
    doc = dict(format=DATA_BUDGET_FORMAT, task=task, metric=rows[0]['metric'], models=models,
               configs={m: osp.abspath(c) for m, c in zip(models, configs)},
               fractions=fractions, corruptions=corruptions, severities=severities,
               conditions=conditions, seed=seed, iters=iters, calibration=bool(calibration),
               results=results_files, rows=rows, kendall_tau=kendall_tau_by_fraction(rows))
    files = write_data_budget_report(work_dir, doc, plots=plots)
    return dict(doc, files=files, status=status)
