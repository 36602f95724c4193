"""Data-budget sweep: robustness and calibration as functions of the training-set size,
over several training seeds.

For every model (config), training fraction and seed, :func:`run_data_budget` trains on a
nested subset of the training set (:class:`~reobench_mm.datasets.subset.FractionDataset`
drawn with that seed, so for one seed a smaller budget's images are among a larger
one's) with the runner seeded by the same seed, then evaluates the final checkpoint clean
and under each corruption × severity with
:class:`~reobench_mm.robustness.sweep.RobustnessSweep` (the corruption draws use one seed
of their own, the options' ``seed``, the same for every run). Layout of the work dir::

    <work_dir>/<model>/fraction_<f>/seed_<s>/              training work dir
    <work_dir>/<model>/fraction_<f>/seed_<s>/data_budget_run.json   what was run
    <work_dir>/<model>/fraction_<f>/seed_<s>/robustness/   the sweep (results.json, ...)
    <work_dir>/data_budget.{json,csv,md,png}, data_budget_seeds.csv   the report

``<model>`` is the config file's stem. A rerun skips every (fraction, seed) whose
checkpoint and ``results.json`` are there for the same settings (``resume=False`` starts
over); a training that was cut short resumes from its latest checkpoint. Adding seeds or
fractions to a finished sweep runs only the new ones.

The numbers of the report (per run, per model and fraction with their seed bands, and
Kendall τ against the largest fraction) are :mod:`reobench_mm.analysis.data_budget`.
"""
from __future__ import annotations

import argparse
import numbers
import os.path as osp
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union


from ..analysis.data_budget import (DATA_BUDGET_FORMAT, budget_row, kendall_tau_by_fraction,
                                    summarize_seeds, write_data_budget_report)
from ..analysis.results_file import read_results
from ..datasets.subset import FractionDataset, apply_data_fraction, check_fraction
from ..evaluation.keys import get_task
from ..fileio import dump_json_atomic, file_sha256, json_round_trip, read_json
from ..utils.config import infer_task, prepare_train_config, read_config
from .options import RobustnessOptions
from .conditions.shifts import shifts_to_dict
from .sweep import RobustnessSweep

__all__ = [
    'DEFAULT_FRACTIONS', 'DEFAULT_SEEDS', 'DATA_BUDGET_OPTIONS', 'DATA_BUDGET_DEFAULTS',
    'TOOL_OPTIONS',
    'run_data_budget', 'check_fractions', 'check_seeds', 'fraction_dirname', 'seed_dirname',
    'run_key', 'budget_options', 'add_training_arguments'
]

RUN_FORMAT = 'reobench_mm.data_budget_run/2'
RUN_FILE = 'data_budget_run.json'
SWEEP_DIR = 'robustness'
DEFAULT_FRACTIONS = (0.01, 0.1, 0.25, 0.5, 0.75)
#: Training seeds of a sweep by default: the calibration study's 3 for segmentation.
DEFAULT_SEEDS = (0, 1, 2)
#: The robustness options a data-budget run takes (the driver sets the others).
DATA_BUDGET_OPTIONS = ('corruptions', 'severities', 'protocol', 'seed', 'border',
                       'calibration', 'decode_cache_bytes', 'seen_corruptions', 'shifts')
#: The robustness options the training drivers' tools (data_budget.py, finetune_compare.py,
#: robust_recipe.py, lr_sweep.py) give as flags; ``--seed`` is the corruptions' seed.
TOOL_OPTIONS = ('corruptions', 'severities', 'protocol', 'seed', 'calibration')
#: Their defaults where they differ from a sweep's: two corruptions at severity 3, with
#: calibration.
DATA_BUDGET_DEFAULTS = dict(corruptions=('cloud', 'gaussian_noise'), severities=(3, ),
                            calibration=True)


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


def run_key(model: str, fraction: float, seed: int) -> str:
    """``'<model>@<fraction>/seed<s>'``: how the results and status of a run are keyed."""
    return f'{model}@{fraction:g}/seed{seed}'


# ----------------------------------------------------------------------------- running


def _load_run_record(path: str) -> Optional[dict]:
    record, problem = read_json(path)
    if problem is not None:
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
    from ..engine.dataloader_workers import release_dataloader_workers
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
    try:
        runner.train()
    finally:  # not left to the garbage collector, which waits 5 s per worker
        release_dataloader_workers(runner)
    dataset = runner.train_dataloader.dataset
    while not isinstance(dataset, FractionDataset):  # e.g. inside EpochIndexedDataset
        dataset = dataset.dataset
    return dict(checkpoint=_final_checkpoint(runner), num_train_images=len(dataset),
                full_train_images=dataset.full_len)


def _run_one(config: str, model: str, fraction: float, seed: int, *, work_dir: str,
             iters: Optional[int], cfg_options: dict, train_settings: dict,
             options: RobustnessOptions, eval_settings: dict, resume: bool) -> tuple:
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
    RobustnessSweep(config, record['checkpoint'], work_dir=sweep_dir, cfg_options=cfg_options,
                    options=options.replace(force=not reuse_conditions)).run()
    record['evaluation'] = eval_settings
    dump_json_atomic(record, record_path)
    return record, 'evaluated' if trained else 'trained'


def add_training_arguments(parser: argparse.ArgumentParser, seeds: Sequence[int],
                           work_dir: str) -> None:
    """The command-line options of the training side, shared by the data-budget and
    recipe tools: ``--seeds`` (default ``seeds``), ``--iters``, ``--work-dir`` (default
    ``work_dir``), ``--no-resume`` and ``--cfg-options``."""
    from mmengine.config import DictAction
    parser.add_argument('--seeds', nargs='+', type=int, default=list(seeds), metavar='S',
                        help='training seeds: each draws its own subsets (data budget) and '
                        'seeds the training (default: %(default)s)')
    parser.add_argument('--iters', type=int,
                        help='training iterations per run (default: the config schedule)')
    parser.add_argument('--work-dir', default=work_dir,
                        help='output folder (default: %(default)s)')
    parser.add_argument('--no-resume', action='store_true',
                        help='train and evaluate every run again')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, KEY=VALUE (lists: key="[a,b]")')


def budget_options(options: Union[None, RobustnessOptions, Mapping[str, Any]] = None,
                   defaults: Mapping[str, Any] = DATA_BUDGET_DEFAULTS,
                   owner: str = 'run_data_budget') -> RobustnessOptions:
    """The sweeps' options of a data-budget run: ``options`` (a
    :class:`~reobench_mm.robustness.options.RobustnessOptions`, or option values of
    :data:`DATA_BUDGET_OPTIONS`) over ``defaults``; no plots in the sweeps.

    Raises:
        SweepError: an option the driver sets itself, or a bad value.
    """
    if isinstance(options, RobustnessOptions):
        options = {n: getattr(options, n) for n in DATA_BUDGET_OPTIONS}
    return RobustnessOptions.create(options, allowed=DATA_BUDGET_OPTIONS, defaults=defaults,
                                    owner=owner).replace(plots=False)


def run_data_budget(configs: Sequence[str],
                    fractions: Sequence[float] = DEFAULT_FRACTIONS,
                    seeds: Sequence[int] = DEFAULT_SEEDS, *,
                    options: Union[None, RobustnessOptions, Mapping[str, Any]] = None,
                    work_dir: str = 'work_dirs/data_budget',
                    cfg_options: Optional[dict] = None, iters: Optional[int] = None,
                    resume: bool = True, plot: bool = True) -> dict:
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
        options: the evaluation of each run (:func:`budget_options`: the robustness
            options of :data:`DATA_BUDGET_OPTIONS`, default :data:`DATA_BUDGET_DEFAULTS`:
            ``cloud`` and ``gaussian_noise`` at severity 3 with calibration; ``seed`` is
            the corruptions' seed, the same for every run; ``seen_corruptions='auto'``
            reads each config's ``RandomCorruption`` pools for the held-out scores).
        work_dir: output folder (layout in the module docstring).
        cfg_options: config overrides for training and evaluation (``--cfg-options``).
        iters: training iterations of each run (the schedule is rescaled with
            :func:`~reobench_mm.engine.rescale_iter_schedule`); None keeps the config's.
        resume: skip the runs finished with the same settings, resume cut-short
            trainings; False trains and evaluates everything again.
        plot: write ``data_budget.png`` (the runs' sweeps write no plots).

    Returns:
        dict: the ``data_budget.json`` document (``rows``: one per model × fraction with
        seed means and bands; ``seed_rows``: one per run; ``kendall_tau``; the settings;
        see :mod:`reobench_mm.analysis.data_budget`) plus ``files`` (name -> path) and
        ``status`` (``'<model>@<fraction>/seed<s>'`` -> ``'trained'``, ``'evaluated'`` or
        ``'skipped'``).

    Raises:
        ValueError: bad fractions, seeds, options or iters, missing or duplicate
            configs, configs of different tasks, or a run folder that holds a run of
            other settings while ``resume`` is True.
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
    options = budget_options(options)
    if iters is not None and (isinstance(iters, bool) or not isinstance(iters, int)
                              or iters < 1):
        raise ValueError(f'iters must be a positive integer or None, got {iters!r}')
    cfg_options = dict(cfg_options or {})
    tasks = {}
    for config in configs:
        cfg = read_config(config)
        cfg.merge_from_dict(cfg_options)
        tasks[config] = infer_task(cfg)
    if len(set(tasks.values())) > 1:
        raise ValueError(f'all configs must be of one task, got {tasks}')

    status: Dict[str, str] = {}
    seed_rows, results_files = [], {}
    eval_settings = json_round_trip(dict(
        corruptions=options.corruptions, severities=options.severities,
        protocol=options.protocol, corruption_seed=options.seed,
        calibration=options.calibration, cfg_options=cfg_options,
        seen_corruptions=options.seen_corruptions, shifts=shifts_to_dict(options.shifts)))
    for config, model in zip(configs, models):
        train_settings = json_round_trip(dict(config=osp.abspath(config),
                                              config_sha256=file_sha256(config),
                                              iters=iters, cfg_options=cfg_options))
        for fraction in fractions:
            for seed in seeds:
                key = run_key(model, fraction, seed)
                record, status[key] = _run_one(
                    config, model, fraction, seed, work_dir=work_dir, iters=iters,
                    cfg_options=cfg_options,
                    train_settings=dict(train_settings, fraction=fraction, seed=seed),
                    options=options, eval_settings=eval_settings, resume=resume)
                results_path = osp.join(work_dir, model, fraction_dirname(fraction),
                                        seed_dirname(seed), SWEEP_DIR, 'results.json')
                seed_rows.append(budget_row(model, fraction, seed,
                                            read_results(results_path).summary,
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
               fractions=fractions, seeds=seeds, corruptions=list(options.corruptions),
               severities=list(options.severities), protocol=options.protocol,
               conditions=conditions, corruption_seed=options.seed, iters=iters,
               calibration=options.calibration, results=results_files, rows=rows,
               seed_rows=seed_rows, kendall_tau=kendall_tau_by_fraction(rows))
    files = write_data_budget_report(work_dir, doc, plots=plot)
    return dict(doc, files=files, status=status)
