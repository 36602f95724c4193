"""Frozen encoder against full fine-tuning: the same task trained both ways, evaluated the
same way.

EarthShift compares, per encoder, training only the task's decoder on a frozen encoder
with fine-tuning everything. :func:`compare_finetuning` trains a config (full
fine-tuning) and its frozen twin (:func:`write_frozen_twin`: the same config with every
encoder stage frozen, or a twin the user gives) with the same seeds, on the whole
training set, through :func:`~reobench_mm.robustness.data_budget.run_data_budget` (so
runs resume and are reused), evaluates both under the selected corruptions and the
config's shift sets, and writes ``finetune_comparison.{json,md}`` into ``work_dir``::

    <work_dir>/<config stem>/fraction_1/seed_<s>/...          (the data-budget layout)
    <work_dir>/<config stem>_frozen/fraction_1/seed_<s>/...
    <work_dir>/finetune_comparison.{json,md}

Numbers per run (:func:`finetune_row`, from each sweep's ``results.json``): the clean
metric, Avg and ΔTP over the corruptions, the clean ECE (with calibration), and per shift
set as it is the OOD metric and the relative OOD loss. Per training mode the seed mean
with its band (:func:`~reobench_mm.analysis.data_budget.seed_band`), and the difference
frozen − full of the seed means.
"""
from __future__ import annotations

import os
import os.path as osp
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ..analysis.data_budget import seed_band
from ..analysis.results import RobustnessSummary
from ..analysis.results_file import read_results
from ..analysis.tables import fmt_number, markdown_table
from ..evaluation.keys import ECE_KEY
from ..fileio import atomic_write_text, dump_json_atomic, finite_or_none
from ..utils.config import read_config
from .data_budget import budget_options, run_data_budget, run_key
from .options import RobustnessOptions

__all__ = ['compare_finetuning', 'finetune_row', 'finetune_markdown', 'write_frozen_twin',
           'frozen_stages_of', 'FINETUNE_FORMAT', 'FINETUNE_KEYS', 'FINETUNE_MODES']

FINETUNE_FORMAT = 'reobench_mm.finetune_comparison/1'
FINETUNE_MODES = ('full', 'frozen')
#: The numbers of a run, table order (and per shift set ``<name>/ood``,
#: ``<name>/relative_drop``).
FINETUNE_KEYS = ('clean', 'avg', 'delta_tp', 'ece_clean')
_LABELS = {'clean': 'Clean', 'avg': 'Avg', 'delta_tp': 'ΔTP', 'ece_clean': 'ECE clean'}


def frozen_stages_of(backbone: Mapping[str, Any]) -> Dict[str, Any]:
    """The settings that freeze every stage of ``backbone`` (a backbone config): for this
    package's ViTs ``frozen_stages`` = their depth (the embeddings and every block), for
    ResNets their number of stages with the batch norms in eval mode; a
    :class:`~reobench_mm.models.backbones.ChannelAdapter` freezes its wrapped backbone by
    these rules and its own convolution (``frozen=True``: the official EarthShift code's
    frozen mode leaves the adapter at its random initialisation).

    Raises:
        ValueError: a backbone type this cannot freeze (give the frozen config).
    """
    from ..models.backbones.convert import dense_backbone_types
    kind = str(backbone.get('type', '')).rsplit('.', 1)[-1]
    if kind == 'ChannelAdapter':
        wrapped = backbone.get('backbone')
        if not isinstance(wrapped, Mapping):
            raise ValueError(f'cannot freeze a ChannelAdapter whose backbone is {wrapped!r}: '
                             'it must be a backbone config dict')
        return dict(frozen=True, backbone=frozen_stages_of(wrapped))
    vits = dense_backbone_types()
    if kind in vits:
        import inspect
        arch = backbone.get('arch', inspect.signature(vits[kind]).parameters['arch'].default)
        depth = arch['depth'] if isinstance(arch, Mapping) else \
            vits[kind].arch_zoo[arch]['depth']
        return dict(frozen_stages=int(depth))
    if 'ResNet' in kind:
        return dict(frozen_stages=int(backbone.get('num_stages', 4)), norm_eval=True)
    raise ValueError(f'cannot freeze a backbone of type {kind!r}: give the frozen config '
                     f'(frozen_config=...) yourself; known: this package\'s ViTs '
                     f'{sorted(vits)} and ResNets')


def write_frozen_twin(config: str, out_dir: str) -> str:
    """Write ``<out_dir>/<config stem>_frozen.py``: ``config`` with its whole encoder
    frozen (:func:`frozen_stages_of`); returns its path."""
    cfg = read_config(config)
    settings = frozen_stages_of(cfg.model.backbone)
    os.makedirs(out_dir, exist_ok=True)
    path = osp.join(out_dir, osp.splitext(osp.basename(config))[0] + '_frozen.py')
    frozen = ', '.join(f'{k}={v!r}' for k, v in settings.items())
    text = (f'# {osp.basename(config)} with its whole encoder frozen: only the decoder and '
            'heads are trained\n'
            f'_base_ = [{osp.abspath(config)!r}]\n'
            f'model = dict(backbone=dict({frozen}))\n')
    atomic_write_text(path, text)
    return path


def finetune_row(model: str, seed: int, summary: RobustnessSummary) -> Dict[str, Any]:
    """One run's numbers (see the module docstring)."""
    ece = summary.extra.get(ECE_KEY)
    row: Dict[str, Any] = dict(
        model=model, seed=int(seed), metric=summary.metric, clean=float(summary.clean),
        avg=float(summary.avg), delta_tp=float(summary.delta_tp),
        ece_clean=None if ece is None else finite_or_none(ece['clean']))
    for entry in summary.blocks.get('shifts', {}).get('sets') or []:
        if entry['condition'] == 'clean':
            row[f'{entry["name"]}/ood'] = finite_or_none(entry['ood'])
            row[f'{entry["name"]}/relative_drop'] = finite_or_none(entry['relative_drop'])
    return row


def _band_text(band: Optional[Mapping[str, Any]], digits: int, scale: float = 1.0) -> str:
    if band is None:
        return '–'
    text = fmt_number(scale * band['mean'], digits)
    if band.get('std') is not None:
        text += f' ± {fmt_number(scale * band["std"], digits)}'
    return text


def finetune_markdown(doc: Mapping[str, Any]) -> str:
    """The comparison table of :func:`compare_finetuning`'s document."""
    keys = list(doc['keys'])
    lines = ['# Frozen encoder against full fine-tuning', '',
             f'Task: {doc["task"]}; metric: {doc["metric"]}; seeds: '
             f'{", ".join(str(s) for s in doc["seeds"])} (mean ± sample standard deviation '
             f'over the seeds); corruptions: {", ".join(doc["corruptions"])} at severities '
             f'{", ".join(str(s) for s in doc["severities"])}.', '']

    def label(key: str) -> str:
        if key in _LABELS:
            return _LABELS[key]
        name, part = key.rsplit('/', 1)
        return f'{name} OOD' if part == 'ood' else f'{name} relative drop (%)'

    def cell(key: str, band: Optional[Mapping[str, Any]]) -> str:
        if key.endswith('relative_drop'):
            return _band_text(band, 1, 100.0)
        return _band_text(band, 4 if key.startswith('ece') else 2)

    rows = [[mode, f'`{doc["modes"][mode]["model"]}`']
            + [cell(k, doc['modes'][mode]['band'][k]) for k in keys] for mode in FINETUNE_MODES]
    diff = doc['difference']
    rows.append(['frozen − full', ''] + [
        '–' if diff[k] is None else (fmt_number(100 * diff[k], 1) if k.endswith('relative_drop')
                                     else fmt_number(diff[k], 4 if k.startswith('ece') else 2))
        for k in keys])
    lines += markdown_table(['Training', 'Config'] + [label(k) for k in keys], rows,
                            align_left=2)
    lines += ['', 'Avg is the mean over the corruptions (each the mean over its severities); '
              'ΔTP = Clean − Avg; OOD is the metric on a shift set and the relative drop '
              '(Clean − OOD) / Clean.', '']
    return '\n'.join(lines)


def compare_finetuning(config: str, frozen_config: Optional[str] = None, *,
                       work_dir: str = 'work_dirs/finetuning', seeds: Sequence[int] = (0, 1, 2),
                       options: Union[None, RobustnessOptions, Mapping[str, Any]] = None,
                       iters: Optional[int] = None, cfg_options: Optional[dict] = None,
                       resume: bool = True) -> Dict[str, Any]:
    """Train and evaluate ``config`` fully fine-tuned and with a frozen encoder, and write
    ``finetune_comparison.{json,md}``.

    Args:
        config: the training config (full fine-tuning).
        frozen_config: its frozen twin (default: :func:`write_frozen_twin` into
            ``work_dir``).
        options, work_dir, seeds, iters, cfg_options, resume: as
            :func:`~reobench_mm.robustness.data_budget.run_data_budget` (one fraction, the
            whole training set); the shift sets of ``options`` (or of the config's
            ``test_cfg``) are evaluated too.

    Returns:
        dict: the ``finetune_comparison.json`` document plus ``files``.

    Raises:
        ValueError: a backbone that cannot be frozen without a twin, or the errors of
            :func:`~reobench_mm.robustness.data_budget.run_data_budget`.
    """
    options = budget_options(options, owner='compare_finetuning')
    if frozen_config is None:
        frozen_config = write_frozen_twin(config, work_dir)
    budget = run_data_budget([config, frozen_config], fractions=[1.0], seeds=seeds,
                             options=options, work_dir=work_dir, cfg_options=cfg_options,
                             iters=iters, resume=resume, plot=False)
    modes: Dict[str, Any] = {}
    for mode, model in zip(FINETUNE_MODES, budget['models']):
        runs: List[dict] = [finetune_row(model, seed, read_results(
            budget['results'][run_key(model, 1.0, seed)]).summary) for seed in budget['seeds']]
        modes[mode] = dict(model=model, runs=runs)
    keys = list(FINETUNE_KEYS) + [k for k in modes['full']['runs'][0]
                                  if '/' in k and all(k in r for m in modes.values()
                                                      for r in m['runs'])]
    for entry in modes.values():
        entry['band'] = {k: seed_band([r.get(k) for r in entry['runs']]) for k in keys}
    difference = {}
    for key in keys:
        bands = [modes[m]['band'][key] for m in FINETUNE_MODES]
        difference[key] = None if None in bands else bands[1]['mean'] - bands[0]['mean']
    doc = dict(format=FINETUNE_FORMAT, task=budget['task'], metric=budget['metric'],
               seeds=budget['seeds'], severities=budget['severities'],
               corruptions=list(options.corruptions), iters=iters, keys=keys,
               modes=modes, difference=difference)
    files = dict(json=osp.join(work_dir, 'finetune_comparison.json'),
                 md=osp.join(work_dir, 'finetune_comparison.md'))
    dump_json_atomic(doc, files['json'])
    atomic_write_text(files['md'], finetune_markdown(doc))
    return dict(doc, files=files)
