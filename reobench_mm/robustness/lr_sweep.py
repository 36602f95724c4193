"""Learning-rate sweep: choose a model's learning rate on its clean test set, then train it
with several seeds at that rate and evaluate each run's robustness.

EarthShift (Doerksen & Kerner 2026) tunes each model's learning rate by sweeping 18 rates,
reuses the rate chosen for one pair of a shift type for every pair of that type, and then
trains 5 seeds at the chosen rate. Its code takes the rate on the command line and does
not list the 18 values, so :data:`DEFAULT_LRS` is this package's own grid of 18: 1, 2 and
5 × 10^k for k = −6 … −1.

:func:`run_lr_sweep` runs both stages through
:func:`~reobench_mm.robustness.data_budget.run_data_budget` on the whole training set
(fraction 1), so every run resumes and is reused:

1. **Selection.** One derived config per rate (:func:`write_lr_configs`: the config with
   ``optim_wrapper.optimizer.lr`` set) trained with the selection seed and evaluated on
   the config's test set: clean, plus one corruption at severity 1
   (:data:`SELECTION_OPTIONS`; the sweeps need one, and the selection never reads it),
   without the config's shift sets. The rule (:data:`SELECTION_RULE`,
   :func:`choose_lr`): the highest clean metric; a run whose weights hold a non-finite
   value (its loss diverged) or whose metric is not finite is never chosen; ties go to
   the smaller rate. The derived configs set ``test_cfg.shifts = None``; the final runs
   take the config's shift sets as options.
2. **Final runs.** The chosen rate's config trained with every seed and evaluated with the
   given options (corruptions, and the config's shift sets). The selection seed's run is
   not trained again: its record is handed to the final runs, which evaluate its
   checkpoint with the final options.

Given ``lr``, the selection is skipped (the rate chosen for another pair of the same
shift type, reused). Layout of the work dir::

    <work_dir>/configs/<stem>_lr<rate>.py          the derived configs (<stem>_frozen.py:
                                                    the frozen twin, with frozen=True)
    <work_dir>/selection/<stem>_lr<rate>/fraction_1/seed_<selection seed>/   stage 1
    <work_dir>/final/<stem>_lr<chosen>/fraction_1/seed_<s>/                  stage 2
    <work_dir>/{selection,final}/data_budget.{json,csv,md}, data_budget_seeds.csv
    <work_dir>/lr_sweep.{json,md}                   the record (written after each stage)

The selection is recomputed from the runs' ``results.json`` on every call, so a rerun
after a kill at any point chooses the same rate without training a finished run again;
other rates or another selection seed choose again, training only the new runs.
"""
from __future__ import annotations

import math
import numbers
import os
import os.path as osp
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..analysis.data_budget import seed_band
from ..analysis.results_file import read_results
from ..analysis.tables import fmt_number, markdown_table
from ..fileio import atomic_write_text, dump_json_atomic, file_sha256, read_json
from ..utils.config import read_config
from .data_budget import (RUN_FILE, budget_options, check_seeds, fraction_dirname,
                          run_data_budget, run_key, seed_dirname)
from .finetuning import FINETUNE_KEYS, finetune_row, write_frozen_twin
from .options import RobustnessOptions, registered_kind_options

__all__ = ['run_lr_sweep', 'choose_lr', 'check_lrs', 'check_lr', 'lr_tag', 'write_lr_configs',
           'lr_sweep_markdown', 'DEFAULT_LRS', 'DEFAULT_SEEDS', 'SELECTION_OPTIONS',
           'SELECTION_RULE', 'LR_SWEEP_FORMAT']

LR_SWEEP_FORMAT = 'reobench_mm.lr_sweep/1'
#: This package's grid (EarthShift sweeps 18 rates without listing them): 1, 2 and 5 ×
#: 10^k for k = −6 … −1, ascending.
DEFAULT_LRS: Tuple[float, ...] = tuple(float(f'{m}e{k}') for k in range(-6, 0)
                                       for m in (1, 2, 5))
#: EarthShift's 5 training seeds at the chosen rate.
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
#: The evaluation of the selection runs: the clean test set, plus the one corruption
#: condition a sweep needs (its summary is built on one), which the selection never reads;
#: no calibration, and no shift set (the derived configs drop the config's).
SELECTION_OPTIONS = dict(corruptions=('brightness_contrast', ), severities=(1, ),
                         calibration=False, seen_corruptions=None)
SELECTION_RULE = ('the rate whose run with the selection seed has the highest clean metric '
                  "on the config's test set; a run whose weights hold a non-finite value "
                  '(its loss diverged) or whose metric is not finite is never chosen; ties '
                  'go to the smaller rate')
#: The options of a config's test_cfg that evaluate other data than its test set, beyond
#: the shift sets (which the final runs take as options): refused, since the selection
#: runs would evaluate them too.
_OTHER_DATA_OPTIONS = ('attacks', 'corruption_files')
_SELECTION_DIR, _FINAL_DIR, _CONFIGS_DIR = 'selection', 'final', 'configs'


# ----------------------------------------------------------------------------- inputs

def check_lr(lr: Any) -> float:
    """``lr`` as a float.

    Raises:
        ValueError: not a number (booleans included), not finite, or not > 0.
    """
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real):
        raise ValueError(f'a learning rate must be a number > 0, got {lr!r}')
    value = float(lr)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f'a learning rate must be a finite number > 0, got {lr!r}')
    return value


def check_lrs(lrs: Sequence[Any]) -> List[float]:
    """The rates of a sweep as floats, ascending.

    Raises:
        ValueError: none given, a bad rate (:func:`check_lr`), or one given twice.
    """
    if isinstance(lrs, (str, bytes)) or not isinstance(lrs, Sequence):
        raise ValueError(f'lrs must be a list of learning rates, e.g. [1e-4, 1e-3], got '
                         f'{lrs!r}')
    if not lrs:
        raise ValueError('no learning rate given: give the rates to sweep, e.g. 1e-4 1e-3')
    checked = [check_lr(lr) for lr in lrs]
    repeated = sorted({lr for lr in checked if checked.count(lr) > 1})
    if repeated:
        raise ValueError(f'learning rates must differ, got {repeated} more than once')
    return sorted(checked)


def lr_tag(lr: float) -> str:
    """``'lr1e-04'``, ``'lr2.5e-04'``: the rate in the shortest exponent form that reads
    back as the same float (it names the derived configs and their runs)."""
    lr = check_lr(lr)
    for digits in range(16):
        text = f'{lr:.{digits}e}'
        if float(text) == lr:
            return 'lr' + text
    return f'lr{lr:.16e}'  # 17 significant digits: every double reads back


def write_lr_configs(config: str, lrs: Sequence[float], out_dir: str, *,
                     drop_shifts: bool = False, source: Optional[str] = None
                     ) -> Dict[float, str]:
    """Write ``<out_dir>/<config stem>_<lr_tag>.py`` for each rate: ``config`` (inherited
    by its absolute path) with ``optim_wrapper.optimizer.lr`` set to the rate. Each file
    states the SHA-256 of ``source`` (default ``config``), so that an edited source makes
    other configs for the data-budget driver's records; ``drop_shifts`` sets
    ``test_cfg.shifts = None`` (the sweep's selection runs see no shift set). A file that
    holds the same text already is left as it is.

    Returns:
        dict: rate -> the path of its config.

    Raises:
        ValueError: ``config`` has no ``optim_wrapper.optimizer.lr``, or a bad rate.
    """
    lrs = [check_lr(lr) for lr in lrs]
    cfg = read_config(config)
    optimizer = (cfg.get('optim_wrapper') or {}).get('optimizer') or {}
    if 'lr' not in optimizer:
        raise ValueError(f'{config} has no optim_wrapper.optimizer.lr: the learning-rate '
                         'sweep sets that rate (one optimizer in an optim_wrapper)')
    source = source or config
    head = (f'# {osp.basename(source)} SHA-256 {file_sha256(source)}\n'
            f'_base_ = [{osp.abspath(config)!r}]\n')
    tail = ('# the shift sets are evaluated by the final runs only (as options)\n'
            'test_cfg = dict(shifts=None)\n') if drop_shifts else ''
    stem = osp.splitext(osp.basename(config))[0]
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for lr in lrs:
        paths[lr] = path = osp.join(out_dir, f'{stem}_{lr_tag(lr)}.py')
        text = (f'# {osp.basename(config)} with the learning rate {lr!r} (a config of a '
                'learning-rate sweep)\n' + head
                + f'optim_wrapper = dict(optimizer=dict(lr={lr!r}))\n' + tail)
        if _read_text(path) != text:
            atomic_write_text(path, text)
    return paths


def _read_text(path: str) -> Optional[str]:
    """The text of ``path``; None when it cannot be read (missing, say)."""
    try:
        with open(path, encoding='utf-8') as handle:
            return handle.read()
    except (OSError, ValueError):
        return None


def _check_cfg_options(cfg_options: Mapping[str, Any]) -> None:
    for key in cfg_options:
        key = str(key)
        if key in ('optim_wrapper', 'optim_wrapper.optimizer', 'optim_wrapper.optimizer.lr'):
            raise ValueError(f'cfg_options sets {key}: the learning-rate sweep sets the rate '
                             'of each run (give lrs, or lr)')
        if key == 'test_cfg' or key.startswith('test_cfg.shifts'):
            raise ValueError(f'cfg_options sets {key}: give the shift sets in the config\'s '
                             "test_cfg or in options['shifts'] (the selection runs drop them)")


# ----------------------------------------------------------------------------- the rule

def choose_lr(metrics: Mapping[float, Optional[float]],
              diverged: Callable[[float], bool]) -> Tuple[float, Dict[float, bool]]:
    """The rate :data:`SELECTION_RULE` chooses.

    Args:
        metrics: rate -> its run's clean metric (None: not finite).
        diverged: rate -> whether its run's weights hold a non-finite value; asked in the
            order of the ranking (best metric first, the smaller rate first on a tie)
            until a rate passes.

    Returns:
        ``(chosen rate, {rate: diverged} for the rates checked)``.

    Raises:
        ValueError: no rate with a finite metric and finite weights.
    """
    finite = [(float(m), lr) for lr, m in metrics.items()
              if m is not None and math.isfinite(m)]
    checked: Dict[float, bool] = {}
    for _, lr in sorted(finite, key=lambda pair: (-pair[0], pair[1])):
        checked[lr] = bool(diverged(lr))
        if not checked[lr]:
            return lr, checked
    raise ValueError(f'no learning rate of {sorted(metrics)} can be chosen: every run '
                     'diverged (non-finite weights) or has no finite clean metric')


def _weights_diverged(checkpoint: str) -> bool:
    """Whether a floating-point tensor of the checkpoint's ``state_dict`` is not finite."""
    import torch

    from ..fileio import load_local_checkpoint
    state = load_local_checkpoint(checkpoint, map_location='cpu')
    state = state.get('state_dict', state) if isinstance(state, Mapping) else {}
    return any(torch.is_tensor(v) and v.is_floating_point() and not bool(torch.isfinite(v).all())
               for v in state.values())


def _run_dir(root: str, model: str, seed: int) -> str:
    return osp.join(root, model, fraction_dirname(1.0), seed_dirname(seed))


def _trained_record(run_dir: str) -> Optional[dict]:
    record, problem = read_json(osp.join(run_dir, RUN_FILE))
    if problem is not None or not isinstance(record, dict) or \
            record.get('status') != 'trained' or not osp.isfile(record.get('checkpoint', '')):
        return None
    return record


def _hand_over(selection_run: str, final_run: str, retrained: bool, resume: bool) -> bool:
    """Give the final runs the selection run's training: its record, marked as not
    evaluated there (the data-budget driver then evaluates its checkpoint with the final
    options and trains nothing). A final run of its own, or the copy of a selection run
    not trained again, is kept while resuming. Returns whether the record was handed."""
    record = _trained_record(selection_run)
    if record is None:
        return False
    target = osp.join(final_run, RUN_FILE)
    existing, problem = read_json(target)
    if resume and problem is None and isinstance(existing, dict) and \
            (existing.get('checkpoint') != record['checkpoint'] or not retrained):
        return existing.get('checkpoint') == record['checkpoint']
    os.makedirs(final_run, exist_ok=True)
    dump_json_atomic(dict(record, evaluation=dict(handed_over_from=osp.abspath(selection_run))),
                     target)
    return True


# ----------------------------------------------------------------------------- the record

def _label(key: str) -> str:
    labels = {'clean': 'Clean', 'avg': 'Avg', 'delta_tp': 'ΔTP', 'ece_clean': 'ECE clean'}
    if key in labels:
        return labels[key]
    name, part = key.rsplit('/', 1)
    return f'{name} OOD' if part == 'ood' else f'{name} relative drop (%)'


def _cell(key: str, value: Optional[float]) -> str:
    if key.endswith('relative_drop'):
        return fmt_number(None if value is None else 100 * value, 1)
    return fmt_number(value, 4 if key.startswith('ece') else 2)


def _band_cell(key: str, band: Optional[Mapping[str, Any]]) -> str:
    if band is None:
        return '–'
    text = _cell(key, band['mean'])
    return text if band.get('std') is None else f'{text} ± {_cell(key, band["std"])}'


def lr_sweep_markdown(doc: Mapping[str, Any]) -> str:
    """The report of :func:`run_lr_sweep`'s document: the rates' clean metrics and the
    choice, then the final runs per seed with their mean ± sample standard deviation."""
    metric = doc['metric']
    lines = ['# Learning-rate sweep', '',
             f'Config: `{doc["config"]}`' + (' (its frozen twin swept)' if doc['frozen']
                                              else '') + f'; metric: {metric}.', '']
    if doc['lr_given']:
        lines += [f'Rate given: {doc["lr"]:g} (no selection: a rate chosen before, e.g. for '
                  'another pair of the same shift type).', '']
    else:
        lines += [f'Selection with seed {doc["selection_seed"]}: {doc["rule"]}.', '']
        rows = [[f'{r["lr"]:g}', f'`{r["model"]}`', fmt_number(r['clean']),
                 {None: '–', True: 'yes', False: 'no'}[r['diverged']],
                 'chosen' if r['lr'] == doc['lr'] else '']
                for r in doc['rates']]
        lines += markdown_table(['Rate', 'Config', f'Clean {metric}', 'Diverged', ''],
                                rows, align_left=2)
        lines += ['', 'Diverged: the run\'s weights hold a non-finite value (– : not '
                  'checked, ranked below the chosen rate).', '']
    if not doc['complete']:
        return '\n'.join(lines + [f'Final runs at {doc["lr"]:g}: not finished (a rerun '
                                  'resumes them).', ''])
    keys = doc['keys']
    lines += [f'## Final runs at {doc["lr"]:g}', '',
              f'Seeds: {", ".join(str(s) for s in doc["seeds"])} (mean ± sample standard '
              f'deviation); corruptions: {", ".join(doc["corruptions"])} at severities '
              f'{", ".join(str(s) for s in doc["severities"])}.', '']
    rows = [[str(r['seed']), r['training']] + [_cell(k, r.get(k)) for k in keys]
            for r in doc['runs']]
    rows.append(['mean ± SD', ''] + [_band_cell(k, doc['band'][k]) for k in keys])
    lines += markdown_table(['Seed', 'Training'] + [_label(k) for k in keys], rows,
                            align_left=2)
    lines += ['', 'Avg is the mean over the corruptions, ΔTP = Clean − Avg; OOD is the '
              'metric on a shift set and the relative drop (Clean − OOD) / Clean.', '']
    return '\n'.join(lines)


def _write_record(work_dir: str, doc: Mapping[str, Any]) -> Dict[str, str]:
    files = dict(json=osp.join(work_dir, 'lr_sweep.json'),
                 md=osp.join(work_dir, 'lr_sweep.md'))
    dump_json_atomic(doc, files['json'])
    atomic_write_text(files['md'], lr_sweep_markdown(doc))
    return files


# ----------------------------------------------------------------------------- the driver

def _stem(path: str) -> str:
    return osp.splitext(osp.basename(path))[0]


def run_lr_sweep(config: str, lrs: Sequence[float] = DEFAULT_LRS,
                 seeds: Sequence[int] = DEFAULT_SEEDS, *, lr: Optional[float] = None,
                 selection_seed: int = 0, frozen: bool = False,
                 options: Union[None, RobustnessOptions, Mapping[str, Any]] = None,
                 work_dir: str = 'work_dirs/lr_sweep', iters: Optional[int] = None,
                 cfg_options: Optional[dict] = None, resume: bool = True) -> Dict[str, Any]:
    """Choose the learning rate of ``config`` on its clean test set, train it with every
    seed at that rate and evaluate each run (the module docstring has the stages and the
    layout), and write ``lr_sweep.{json,md}``.

    Selection rule (:data:`SELECTION_RULE`): the rate whose run with ``selection_seed``
    has the highest clean metric on the config's test set; a run whose weights hold a
    non-finite value (its loss diverged) or whose metric is not finite is never chosen;
    ties go to the smaller rate.

    Args:
        config: the training config; it must set ``optim_wrapper.optimizer.lr``.
        lrs: the rates swept (default :data:`DEFAULT_LRS`, this package's 18).
        seeds: the training seeds of the final runs (default EarthShift's 5).
        lr: a rate chosen before (for another pair of the same shift type): no selection,
            ``lrs`` and ``selection_seed`` are not used; recorded as given.
        selection_seed: the seed of the selection runs. It need not be among ``seeds``;
            when it is, its final run reuses the selection run's training.
        frozen: sweep the config's frozen twin
            (:func:`~reobench_mm.robustness.finetuning.write_frozen_twin`, into
            ``<work_dir>/configs``) instead of the config.
        options: the evaluation of the final runs, as
            :func:`~reobench_mm.robustness.data_budget.run_data_budget` takes it (default
            ``cloud`` and ``gaussian_noise`` at severity 3 with calibration); the shift sets
            of the config's ``test_cfg`` unless ``options`` gives some. The selection runs
            are evaluated with :data:`SELECTION_OPTIONS`.
        work_dir, iters, cfg_options, resume: as
            :func:`~reobench_mm.robustness.data_budget.run_data_budget` (``resume=False``
            trains and evaluates every run again, the final run of the selection seed still
            taking the new selection run's training).

    Returns:
        dict: the ``lr_sweep.json`` document plus ``files`` (``json``, ``md``) and
        ``status`` (``selection`` and ``final``: run key -> ``'trained'``,
        ``'evaluated'`` or ``'skipped'``, as the data-budget driver reports them).

    Raises:
        ValueError: a missing config or one without ``optim_wrapper.optimizer.lr``; no,
            repeated, non-finite or non-positive rates; bad seeds, options or iters;
            ``cfg_options`` that set the rate or the shift sets; a ``test_cfg`` with
            attacks or files of corruptions; no rate that can be chosen; or the errors of
            :func:`~reobench_mm.robustness.data_budget.run_data_budget`.
    """
    if not isinstance(config, str) or not osp.isfile(config):
        raise ValueError(f'config {config!r} does not exist')
    given = lr is not None
    rates = [check_lr(lr)] if given else check_lrs(lrs)
    seeds = check_seeds(seeds)
    selection_seed = check_seeds([selection_seed])[0]
    options = budget_options(options, owner='run_lr_sweep')
    cfg_options = dict(cfg_options or {})
    _check_cfg_options(cfg_options)
    configs_dir = osp.join(work_dir, _CONFIGS_DIR)
    swept = write_frozen_twin(config, configs_dir) if frozen else config
    cfg = read_config(swept)
    cfg.merge_from_dict(cfg_options)
    test_cfg = cfg.get('test_cfg') or {}
    other = [k for k in _OTHER_DATA_OPTIONS + registered_kind_options() if test_cfg.get(k)]
    if other:
        raise ValueError(f'the test_cfg of {swept} gives {", ".join(other)}: the selection '
                         'runs would evaluate them; evaluate them on the final checkpoints '
                         'with tools/robustness_test.py instead')
    shifts = test_cfg.get('shifts')
    if shifts and not options.shifts:
        options = options.replace(shifts=shifts.to_dict() if hasattr(shifts, 'to_dict')
                                  else dict(shifts))
    rate_configs = write_lr_configs(swept, rates, configs_dir, drop_shifts=bool(shifts),
                                    source=config)
    models = {r: _stem(path) for r, path in rate_configs.items()}
    doc: Dict[str, Any] = dict(
        format=LR_SWEEP_FORMAT, config=osp.abspath(config), config_sha256=file_sha256(config),
        frozen=bool(frozen), swept_config=osp.abspath(swept), lr_given=given,
        lrs=[] if given else rates, selection_seed=None if given else selection_seed,
        rule=None if given else SELECTION_RULE, rates=[], seeds=seeds, iters=iters)
    status: Dict[str, Dict[str, str]] = {}
    selection_dir = osp.join(work_dir, _SELECTION_DIR)
    if given:
        chosen = rates[0]
    else:
        chosen = _select(doc, rate_configs, models, status, selection_dir, dict(
            cfg_options=cfg_options, iters=iters, resume=resume,
            decode_cache_bytes=options.decode_cache_bytes))
        _write_record(work_dir, dict(doc, lr=chosen, model=models[chosen], complete=False))

    model = models[chosen]
    final_dir = osp.join(work_dir, _FINAL_DIR)
    handed = False
    if not given and selection_seed in seeds:
        retrained = status['selection'][run_key(model, 1.0, selection_seed)] == 'trained'
        handed = _hand_over(_run_dir(selection_dir, model, selection_seed),
                            _run_dir(final_dir, model, selection_seed), retrained, resume)

    def final_runs(run_seeds: List[int], again: bool) -> dict:
        return run_data_budget([rate_configs[chosen]], fractions=[1.0], seeds=run_seeds,
                               options=options, work_dir=final_dir, cfg_options=cfg_options,
                               iters=iters, resume=again, plot=False)

    if resume or not handed:
        final = final_runs(seeds, resume)
        status['final'] = dict(final['status'])
    else:  # everything again, but the selection seed's training is the new selection run's
        others = [s for s in seeds if s != selection_seed]
        trained = final_runs(others, False)['status'] if others else {}
        final = final_runs(seeds, True)
        status['final'] = {**final['status'], **trained}

    runs = []
    for seed in seeds:
        results = final['results'][run_key(model, 1.0, seed)]
        row = finetune_row(model, seed, read_results(results).summary)
        record = _trained_record(_run_dir(final_dir, model, seed))
        reused = record is not None and osp.abspath(record['checkpoint']).startswith(
            osp.join(osp.abspath(selection_dir), ''))
        row.update(results=results, training='selection run' if reused else 'own')
        runs.append(row)
    keys = list(FINETUNE_KEYS) + [k for k in runs[0] if '/' in k
                                  and all(k in r for r in runs)]
    doc.update(lr=chosen, model=model, complete=True, task=final['task'],
               metric=final['metric'], corruptions=final['corruptions'],
               severities=final['severities'], protocol=final['protocol'],
               corruption_seed=final['corruption_seed'], calibration=final['calibration'],
               shifts=[s.name for s in options.shifts], keys=keys, runs=runs,
               band={k: seed_band([r.get(k) for r in runs]) for k in keys})
    files = _write_record(work_dir, doc)
    return dict(doc, files=files, status=status)


def _select(doc: Dict[str, Any], rate_configs: Mapping[float, str],
            models: Mapping[float, str], status: Dict[str, Dict[str, str]],
            selection_dir: str, settings: Mapping[str, Any]) -> float:
    """Stage 1: train and evaluate every rate with the selection seed, apply the rule, and
    fill ``doc``'s ``rates``, ``task`` and ``metric``; returns the chosen rate."""
    seed = doc['selection_seed']
    budget = run_data_budget(
        list(rate_configs.values()), fractions=[1.0], seeds=[seed],
        options=dict(SELECTION_OPTIONS, decode_cache_bytes=settings['decode_cache_bytes']),
        work_dir=selection_dir, cfg_options=settings['cfg_options'], iters=settings['iters'],
        resume=settings['resume'], plot=False)
    status['selection'] = dict(budget['status'])
    metrics = {}
    for lr, model in models.items():
        metrics[lr] = read_results(budget['results'][run_key(model, 1.0, seed)]).summary.clean

    def diverged(lr: float) -> bool:
        record = _trained_record(_run_dir(selection_dir, models[lr], seed))
        if record is None:
            raise ValueError(f'the selection run of {models[lr]} has no checkpoint')
        return _weights_diverged(record['checkpoint'])

    chosen, checked = choose_lr(metrics, diverged)
    doc.update(task=budget['task'], metric=budget['metric'], rates=[
        dict(lr=lr, model=models[lr], config=osp.abspath(rate_configs[lr]),
             results=budget['results'][run_key(models[lr], 1.0, seed)],
             clean=metrics[lr] if math.isfinite(metrics[lr]) else None,
             diverged=checked.get(lr)) for lr in rate_configs])
    return chosen
