"""Robustness inside any MMEngine run: a test loop that evaluates clean plus every selected
corruption × severity, and a validation loop that evaluates a few conditions at each
validation interval while fine-tuning.

Both are registered in ``LOOPS``; with ``custom_imports=dict(imports=['reobench_mm'])``
every entry point that builds ``test_cfg``/``val_cfg`` uses them — this package's
``tools/test.py`` and ``tools/robustness_test.py``, the toolboxes' own ``tools/test.py``
and ``tools/train.py``, ``Runner.from_cfg(cfg).test()`` in a notebook::

    test_cfg = dict(type='RobustnessTestLoop', corruptions='all', severities=[1, 2, 3, 4, 5])
    val_cfg = dict(type='RobustnessValLoop', corruptions=['cloud', 'gaussian_noise', 'haze'],
                   severities=[3])

How a loop evaluates a condition: one ``ApplyCorruption`` step is placed in the
dataloader's pipelines before the dataloader is built (the placement rules of
:mod:`reobench_mm.transforms.placement`: after the image loading, or after the annotation
loading when a selected corruption is geometric); the loop switches that step's
condition in the main process, runs the iterations (the ``*_iter`` hooks see every one)
and evaluates the configured evaluator. Persistent dataloader workers are turned off, so
that the workers of each condition are started from the switched pipeline; every sample's
metainfo is checked to carry the condition.

What they return (and so what ``LoggerHook``, the visualizer backends and
``CheckpointHook(save_best=...)`` see): the clean condition's metrics under their own
keys (``mIoU``, ``dota/mAP``, ...), the robustness scores ``robust/clean``,
``robust/avg``, ``robust/delta_tp``, ``robust/mpc``, ``robust/rpc``, each corruption's
mean ``robust/<corruption>`` and each condition's task metric ``<tag>/<metric>`` (e.g.
``cloud_s3/mIoU``), on the 0-100 scale (:mod:`reobench_mm.evaluation.keys`). Avg and
ΔTP are REOBench's: the mean over corruptions of each corruption's mean over its
severities, and clean minus that.
"""
from __future__ import annotations

import copy
import logging
import os.path as osp
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from mmengine.logging import print_log
from mmengine.runner import TestLoop, ValLoop
from torch.utils.data import DataLoader

from ..analysis.report import Report, make_provenance, write_report
from ..analysis.results import ConditionResult, RobustnessSummary, aggregate
from ..corruptions import get_corruption, list_corruptions
from ..corruptions.base import resolve_corruptions
from ..corruptions.condition import Condition
from ..engine import checkpoint as _checkpoint
from ..engine.loops import check_batch_condition
from ..evaluation.keys import (CALIBRATION_PREFIX, HELD_OUT_SCORES, HELD_OUT_SUFFIX,
                               ROBUST_SCORES, ROTATED_DETECTION,
                               SCALED_CALIBRATION_PREFIX, TEMPERATURE_METRICS,
                               TEMPERATURE_PREFIX, condition_metric_key, get_task, metric_key,
                               robust_key)
from ..fileio import dump_json_atomic, file_sha256, json_round_trip
from ..registry import LOOPS
from ..transforms.placement import (Placement, corruption_steps, place_condition,
                                    stop_live_workers)
from ..transforms.random_corruption import training_corruptions
from ..utils.config import check_no_corruption_cfg, infer_task
from .decode_cache import DEFAULT_MAX_BYTES, cache_loading_steps, check_cache_bytes
from .fingerprint import (code_fingerprint, config_fingerprint, dataset_fingerprint,
                          result_options)
from .plan import SweepPlan
from .store import (ConditionStore, SweepError, WorkDirLock, condition_record_name,
                    calibration_details, read_json, write_error, write_shard_manifest)

__all__ = [
    'RobustnessTestLoop', 'RobustnessValLoop', 'SweepOutcome', 'classwise_evaluator',
    'calibration_metric_cfgs', 'robustness_metrics', 'TEMPERATURE_FILE'
]

TEMPERATURE_FILE = 'temperature.json'

# ----------------------------------------------------------------------------- evaluators

#: Toolbox metrics -> ours that return the same numbers plus the per-class values (and, for
#: DOTAMetric, without a process pool per evaluation).
_CLASSWISE_METRICS = {
    'IoUMetric': 'ClasswiseIoUMetric', 'mmseg.IoUMetric': 'ClasswiseIoUMetric',
    'DOTAMetric': 'InProcessDOTAMetric', 'mmrotate.DOTAMetric': 'InProcessDOTAMetric',
}


def _as_metric_list(evaluator: Any) -> List[Any]:
    """The metric configs of a test evaluator config (one metric, a list, or
    ``dict(metrics=...)``)."""
    if isinstance(evaluator, (list, tuple)):
        return list(evaluator)
    if isinstance(evaluator, dict) and 'metrics' in evaluator and 'type' not in evaluator:
        return _as_metric_list(evaluator['metrics'])
    return [evaluator]


def classwise_evaluator(evaluator: Any) -> List[Any]:
    """The metric configs of the test evaluator with MMSeg's ``IoUMetric`` and MMRotate's
    ``DOTAMetric`` replaced by :class:`ClasswiseIoUMetric` / :class:`InProcessDOTAMetric`
    (same arguments, same summary numbers, plus ``IoU.<class>`` / ``AP.<class>``); other
    metrics are kept as they are."""
    return [dict(metric, type=_CLASSWISE_METRICS[metric['type']])
            if isinstance(metric, dict) and metric.get('type') in _CLASSWISE_METRICS
            else metric for metric in _as_metric_list(evaluator)]


def calibration_metric_cfgs(task: str, temperature_scaling: bool = False) -> List[dict]:
    """The metric configs appended for calibration: ``SegCalibrationMetric``
    (segmentation; plus a second one with prefix ``calib_ts`` for temperature scaling,
    whose temperature is set after fitting) or ``RotatedDetectionCalibrationMetric``,
    with the prefixes of :mod:`reobench_mm.evaluation.keys`."""
    if task == ROTATED_DETECTION:
        if temperature_scaling:
            raise SweepError('temperature scaling is for segmentation (it rescales the '
                             'per-pixel class logits); detection scores have no such logits')
        return [dict(type='RotatedDetectionCalibrationMetric', prefix=CALIBRATION_PREFIX)]
    metrics = [dict(type='SegCalibrationMetric', prefix=CALIBRATION_PREFIX)]
    if temperature_scaling:
        metrics.append(dict(type='SegCalibrationMetric', prefix=SCALED_CALIBRATION_PREFIX))
    return metrics


def seen_in_training(cfg: Any, protocol: str,
                     seen: Union[None, str, Sequence[str]] = 'auto') -> List[str]:
    """The corruptions of ``protocol`` a model saw in training: ``'auto'`` reads the
    ``RandomCorruption`` pools of ``cfg``'s training pipeline (names of another protocol
    that ``protocol`` also has count), a list of names/groups is resolved, None is none.

    Raises:
        SweepError: an unknown name or group.
    """
    if seen is None:
        return []
    try:
        if isinstance(seen, str) and seen == 'auto':
            valid = list_corruptions(protocol)
            seen_names = {n for pool in training_corruptions(cfg).values() for n in pool}
            return [n for n in valid if n in seen_names]
        return resolve_corruptions(seen, protocol)
    except (KeyError, TypeError) as error:
        raise SweepError(f'seen_corruptions: {error}') from None


def check_held_out(corruptions: Sequence[str], seen: Sequence[str], held_out_only: bool
                   ) -> None:
    """With ``held_out_only``, refuse corruptions that were seen in training.

    Raises:
        SweepError: some of ``corruptions`` are in ``seen`` (named), or none is left.
    """
    if not isinstance(held_out_only, bool):
        raise SweepError(f'held_out_only must be True or False, got {held_out_only!r}')
    if not held_out_only:
        return
    overlap = [n for n in corruptions if n in seen]
    if overlap:
        held = [n for n in corruptions if n not in seen]
        raise SweepError(
            f'held_out_only: {", ".join(overlap)} {"was" if len(overlap) == 1 else "were"} '
            'in the training pool (RandomCorruption), so a held-out ΔTP over '
            f'{"it" if len(overlap) == 1 else "them"} would measure what the model learnt, '
            'not its robustness to unseen shifts. Evaluate only the held-out corruptions'
            + (f' ({", ".join(held)})' if held else ' (none is left)')
            + ', or set held_out_only=False to report both, seen ones marked')


def robustness_metrics(summary: RobustnessSummary, clean_metrics: Mapping[str, Any]
                       ) -> Dict[str, float]:
    """What a robustness loop returns: the clean condition's scalar metrics under their own
    keys, the robustness scores (``robust/avg``, ...), each corruption's mean
    (``robust/<corruption>``) and each condition's task metric (``<tag>/<metric>``)."""
    out = {str(k): float(v) for k, v in clean_metrics.items()
           if isinstance(v, (int, float)) and not isinstance(v, bool)}
    for name in ROBUST_SCORES:
        out[robust_key(name)] = float(getattr(summary, name))
    if summary.held_out is not None:
        for name in HELD_OUT_SCORES:
            out[robust_key(name + HELD_OUT_SUFFIX)] = float(getattr(summary.held_out, name))
    for corruption, value in summary.per_corruption.items():
        out[robust_key(corruption)] = float(value)
    for condition, result in summary.conditions.items():
        out[condition_metric_key(condition.tag, summary.metric)] = float(result.value)
    return out


# ----------------------------------------------------------------------------- shared parts

class _ConditionSwitching:
    """What both robustness loops do: place one switchable ``ApplyCorruption`` step before
    the dataloader is built, switch it per condition, run the iterations and evaluate."""

    plan: SweepPlan
    runner: Any
    dataloader: DataLoader
    evaluator: Any

    def _place(self, dataloader: Union[DataLoader, Dict], scope: Optional[str],
               what: str) -> Tuple[Union[DataLoader, Dict], List[Placement]]:
        """The clean step placed (for geometric corruptions when one is selected) into a
        copy of the dataloader config (persistent workers off) or the built dataloader."""
        geometric = any(get_corruption(name, self.plan.protocol).moves_labels
                        for name in self.plan.corruptions)
        if isinstance(dataloader, dict):
            dataloader = copy.deepcopy(dataloader)
            if dataloader.get('persistent_workers'):
                print_log(f'{what}: persistent dataloader workers turned off (the workers of '
                          'each condition start from the switched pipeline)',
                          logger='current')
                dataloader['persistent_workers'] = False
        placements = place_condition(dataloader, self.plan.clean, scope, geometric=geometric,
                                     override=True)
        return dataloader, placements

    def _find_steps(self) -> None:
        self.steps = corruption_steps(self.dataloader.dataset)
        if not self.steps:
            raise SweepError('no ApplyCorruption step in the built dataset pipeline')
        self._current: Condition = self.plan.clean

    def _switch(self, condition: Condition) -> None:
        for step in self.steps:
            step.set_condition(condition)
        self._current = condition
        stop_live_workers(self.dataloader)

    def _evaluate_condition(self, condition: Condition) -> Tuple[Dict[str, float], float]:
        """Run the iterations under ``condition`` and evaluate: ``(metrics, seconds)``."""
        self._switch(condition)
        start = time.perf_counter()
        try:
            self.runner.model.eval()
            for idx, data_batch in enumerate(self.dataloader):
                self.run_iter(idx, data_batch)
            metrics = self.evaluator.evaluate(len(self.dataloader.dataset))
        finally:
            self._switch(self.plan.clean)
        return {str(k): float(v) for k, v in metrics.items()}, time.perf_counter() - start

    def _check_batch(self, idx: int, data_batch: Any) -> None:
        check_batch_condition(data_batch, self._current, idx)

    def _cache_decoding(self, cache_bytes: int) -> list:
        if cache_bytes <= 0:
            return []
        return cache_loading_steps(self.dataloader.dataset, self.steps, cache_bytes)


def temperature_fit_options(temperature_scaling: bool, split: Optional[int], seed: int,
                            on_test: bool) -> Dict[str, Any]:
    """The checked temperature-fit options (recorded in the fingerprint)."""
    if not temperature_scaling and (split is not None or on_test):
        raise SweepError('temperature_split and temperature_on_test need '
                         'temperature_scaling=True')
    if split is not None and (isinstance(split, bool) or not isinstance(split, int)
                              or split < 1):
        raise SweepError(f'temperature_split must be a number of images >= 1 (the '
                         f'calibration study holds out 400), got {split!r}')
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SweepError(f'temperature_split_seed must be an integer >= 0, got {seed!r}')
    if split is not None and on_test:
        raise SweepError('temperature_split holds images out of the evaluation; '
                         'temperature_on_test fits on evaluated ones: give one of them')
    if not temperature_scaling:
        return {}
    return dict(split=split, split_seed=seed if split is not None else None,
                on_test=bool(on_test))


def _image_names(dataset: Any) -> List[str]:
    """The image paths of a dataset's samples, in order."""
    return [str(dataset.get_data_info(i).get('img_path')) for i in range(len(dataset))]


# ----------------------------------------------------------------------------- test loop

@dataclass
class SweepOutcome:
    """What a :class:`RobustnessTestLoop` run did.

    Attributes:
        work_dir: the output folder.
        conditions: the conditions of this run (the shard's, or all).
        evaluated: those evaluated now; ``skipped``: those found finished.
        seconds: evaluation seconds per evaluated condition key.
        report_files: name -> path of the report files (empty for a shard).
        manifest: the shard manifest path (None without a shard).
        wall_seconds: wall time of the run.
        reevaluated: condition key -> why its file was not reused (a malformed or
            inconsistent record; those conditions are in ``evaluated``).
        metrics: what the loop returned.
    """
    work_dir: str
    conditions: List[Condition]
    evaluated: List[Condition] = field(default_factory=list)
    skipped: List[Condition] = field(default_factory=list)
    seconds: Dict[str, float] = field(default_factory=dict)
    report_files: Dict[str, str] = field(default_factory=dict)
    manifest: Optional[str] = None
    wall_seconds: float = 0.0
    reevaluated: Dict[str, str] = field(default_factory=dict)
    metrics: Dict[str, float] = field(default_factory=dict)


@LOOPS.register_module()
class RobustnessTestLoop(_ConditionSwitching, TestLoop):
    """``TestLoop`` evaluating clean plus every selected corruption × severity in one run.

    Each finished condition is written to ``<out_dir>/conditions/<tag>.json`` (sealed,
    with a fingerprint of the inputs: the resolved config, the checkpoint, the test data,
    the code, the options); a rerun reuses the finished ones, so a killed run resumes
    where it stopped, and refuses files written for other inputs (naming the part that
    differs). At the end ``results.json``, ``results.csv``, ``report.md`` and the plots
    are written to ``out_dir`` (with ``shard``, a shard manifest instead), and the metrics
    described in :mod:`reobench_mm.robustness.loops` are returned (``after_test_epoch``
    hooks get them: ``LoggerHook`` logs them, the visualizer backends store them).

    The checkpoint the runner loaded (``load_from``; ``tools/test.py CONFIG CHECKPOINT``)
    is checked to fit the model strictly (every key, every shape) unless
    ``strict_checkpoint=False``; a checkpoint that does not fit is an error, not a
    warning with numbers of a half-loaded model.

    Args:
        runner, dataloader, evaluator, fp16: as ``TestLoop``. MMSeg's ``IoUMetric`` and
            MMRotate's ``DOTAMetric`` are evaluated by ``ClasswiseIoUMetric`` /
            ``InProcessDOTAMetric`` (same numbers, plus per-class values).
        corruptions: names and groups (``'all'``, ``'environmental'``, ``'sensor'``,
            ``'geometric'``, ``'appearance'``); default every corruption of ``protocol``.
        severities: severities 1..5 (default all five).
        protocol: ``'reobench'`` (default) or ``'geofm_calibration'``.
        seed: seed of the corruptions' random draws (default 0).
        border: ``'reflect'`` (default) or ``'constant'`` (rotate, translate).
        out_dir: where the condition files and the report go (default: the runner's
            ``work_dir``).
        shard: ``'i/n'``: only every n-th condition from i (clean is in shard 0); a
            manifest ``shard_<i>-of-<n>.json`` instead of the report
            (``tools/robustness_merge.py`` merges).
        force: evaluate again the conditions that have a file.
        calibration: also evaluate calibration in every condition (``calib/...``); the
            report gains reliability diagrams and ECE against severity.
        temperature_scaling: (segmentation; implies ``calibration``) fit one temperature
            on clean pixels of images that are not evaluated and report every condition
            calibrated with it too (``calib_ts/...``). The images: a held-out split of
            the test set (``temperature_split``), else the ``val_dataloader`` when it
            shares no image with the test set. Fitting on evaluated images (an optimistic
            calibration) is refused unless ``temperature_on_test=True``.
        temperature_split: hold out this many test images (seeded, stratified by each
            image's most frequent label; ``HeldOutSplitDataset``) for the temperature and
            evaluate the rest. The calibration study holds out 400.
        temperature_split_seed: seed of the held-out split.
        temperature_on_test: allow the temperature to be fitted on evaluated images (the
            ``val_dataloader`` when it shares images with the test set, or the clean test
            set without one); the report says so.
        plots: write the report's plots.
        decode_cache_bytes: decode each test image once for all conditions, keeping up to
            this many bytes of decoded samples in memory (0: off).
        strict_checkpoint: check that the loaded checkpoint fits the model exactly.
        seen_corruptions: the corruptions the model saw in training: ``'auto'`` (default)
            reads the pools of the ``RandomCorruption`` steps of the config's training
            pipeline (a corruption of another protocol with the same name counts as
            seen); a list of names/groups; None for none. The report marks them and adds
            the scores over the other corruptions (``robust/avg_held_out``, ...).
        held_out_only: refuse to evaluate corruptions that were seen in training (the
            held-out protocol of corruption-aware training).

    Raises:
        SweepError (a ``ValueError``): bad options (the message lists the valid ones),
            or, with ``held_out_only``, selected corruptions that were seen in training.
    """

    def __init__(self, runner, dataloader: Union[DataLoader, Dict],
                 evaluator: Union[Any, Dict, List], fp16: bool = False,
                 corruptions: Union[None, str, Sequence[str]] = None,
                 severities: Optional[Sequence[int]] = None, protocol: str = 'reobench',
                 seed: int = 0, border: str = 'reflect', out_dir: Optional[str] = None,
                 shard: Union[None, str, Sequence[int]] = None, force: bool = False,
                 calibration: bool = False, temperature_scaling: bool = False,
                 temperature_split: Optional[int] = None, temperature_split_seed: int = 0,
                 temperature_on_test: bool = False, plots: bool = True,
                 decode_cache_bytes: int = DEFAULT_MAX_BYTES,
                 strict_checkpoint: bool = True,
                 seen_corruptions: Union[None, str, Sequence[str]] = 'auto',
                 held_out_only: bool = False) -> None:
        check_no_corruption_cfg(runner.cfg)
        self.plan = SweepPlan.create(corruptions, severities, protocol, seed, border, shard)
        #: corruptions of the protocol the model saw in training (report marks them)
        self.seen_in_training = seen_in_training(runner.cfg, self.plan.protocol,
                                                 seen_corruptions)
        check_held_out(self.plan.corruptions, self.seen_in_training, held_out_only)
        check_cache_bytes(decode_cache_bytes)
        cfg = runner.cfg
        self.task = infer_task(cfg)
        self.metric_task = get_task(self.task).results_name
        self.temperature_scaling = bool(temperature_scaling)
        self.calibration = bool(calibration) or self.temperature_scaling
        if isinstance(evaluator, (dict, list, tuple)):
            metrics = classwise_evaluator(evaluator)
            if self.calibration:
                metrics += calibration_metric_cfgs(self.task, self.temperature_scaling)
        elif self.calibration:  # a built Evaluator cannot be given more metrics
            raise SweepError('calibration needs the test evaluator as a config (dict or '
                             'list of metric configs), not a built Evaluator')
        else:
            metrics = evaluator
        self.temperature_fit = temperature_fit_options(
            self.temperature_scaling, temperature_split, temperature_split_seed,
            temperature_on_test)
        dataloader, self.placements = self._place(dataloader, cfg.get('default_scope'),
                                                  'robustness test')
        self._held_out_cfg: Optional[dict] = None
        if temperature_split is not None:
            if not isinstance(dataloader, dict):
                raise SweepError('temperature_split needs the test dataloader as a config')
            split = dict(type='HeldOutSplitDataset', dataset=dataloader['dataset'],
                         size=temperature_split, seed=temperature_split_seed)
            self._held_out_cfg = dict(copy.deepcopy(dataloader), persistent_workers=False,
                                      dataset=dict(copy.deepcopy(split), part='held_out'))
            dataloader['dataset'] = dict(split, part='rest')
        self._dataloader_cfg = copy.deepcopy(dataloader) if isinstance(dataloader, dict) \
            else None
        super().__init__(runner, dataloader, metrics, fp16)
        self._find_steps()
        self._temperature_data: Any = None  # built by _temperature_dataset()
        if self.temperature_scaling and temperature_split is None and \
                not temperature_on_test:
            self._check_temperature_images()
        self.force, self.plots = bool(force), bool(plots)
        self.decode_cache_bytes = decode_cache_bytes
        self.strict_checkpoint = bool(strict_checkpoint)
        self.work_dir = out_dir or runner.work_dir
        #: the condition records of ``out_dir``
        self.store = ConditionStore(self.work_dir, self.plan.condition, self.task,
                                    self.metric_task, self.calibration,
                                    lambda: self.fingerprint)
        self.conditions_dir = self.store.conditions_dir
        self.decode_caches: list = []
        self.temperature: Optional[float] = None
        self.last_calibration: Dict[str, dict] = {}
        self.outcome: Optional[SweepOutcome] = None
        #: True once the first condition started (a failure after it keeps what was written)
        self.evaluating = False
        self._source: Dict[str, Any] = dict(config=getattr(cfg, 'filename', None),
                                            checkpoint=None,
                                            cfg_options={}, loaded=False)
        self._fingerprint: Optional[Dict[str, Any]] = None
        #: one run at a time per output folder
        self.lock = WorkDirLock(self.work_dir)

    # ------------------------------------------------------------------ inputs
    @property
    def conditions(self) -> List[Condition]:
        """The conditions of this run (the shard's, or all)."""
        return self.plan.conditions

    def set_source(self, *, config: Optional[str] = None, checkpoint: Optional[str] = None,
                   cfg_options: Optional[Mapping[str, Any]] = None,
                   checkpoint_loaded: bool = False,
                   lock: Optional[WorkDirLock] = None) -> None:
        """For drivers that build the Runner themselves (``tools/robustness_test.py``):
        the config file, the checkpoint, the command-line overrides (recorded in the
        report), whether the checkpoint was already loaded strictly, and the output
        folder's lock when the driver holds it already."""
        if lock is not None:
            self.lock = lock
        self._source.update(config=config or self._source['config'], checkpoint=checkpoint,
                            cfg_options=dict(cfg_options or {}),
                            loaded=bool(checkpoint_loaded))
        self._fingerprint = None

    @property
    def checkpoint(self) -> Optional[str]:
        return self._source['checkpoint'] or getattr(self.runner, '_load_from', None)

    def _check_checkpoint(self) -> None:
        """Check that the runner's checkpoint fits the model (loading it again strictly:
        the same weights) when nobody did."""
        if self._source['loaded'] or not self.strict_checkpoint or self.checkpoint is None:
            return
        try:
            _checkpoint.load_checkpoint_strict(self.runner.model, self.checkpoint,
                                               config=self._source['config'])
        except _checkpoint.CheckpointMismatchError as error:
            raise _checkpoint.CheckpointMismatchError(
                f'{error} (test_cfg.strict_checkpoint=False evaluates it anyway)',
                error.mismatch) from None
        self._source['loaded'] = True

    def _fingerprinted_config(self) -> dict:
        """The resolved config as it determines the numbers: the test dataloader as the
        loop built it, the loop's settings instead of its bookkeeping options, no
        checkpoint path (the checkpoint part covers it)."""
        data = copy.deepcopy(self.runner.cfg.to_dict())
        if self._dataloader_cfg is not None:
            data['test_dataloader'] = copy.deepcopy(self._dataloader_cfg)
        data['test_cfg'] = dict(type=type(self).__name__, fp16=self.fp16)
        for key in ('load_from', 'resume'):
            data.pop(key, None)
        return data

    @property
    def fingerprint(self) -> Dict[str, Any]:
        """What the numbers depend on (:mod:`~reobench_mm.robustness.fingerprint`); the
        ``data`` part lists the built test dataset (and, with temperature scaling, the
        validation data)."""
        if self._fingerprint is None:
            checkpoint = self.checkpoint
            self._checkpoint_sha256 = file_sha256(checkpoint) if checkpoint and \
                osp.isfile(checkpoint) else checkpoint
            data = dataset_fingerprint(self.dataloader.dataset)
            if self.temperature_scaling and self._temperature_dataset() is not None:
                data['val'] = dataset_fingerprint(self._temperature_dataset())
            plan = self.plan
            self._fingerprint = json_round_trip(dict(
                resolved_config_sha256=config_fingerprint(self._fingerprinted_config()),
                task=self.task, checkpoint_sha256=self._checkpoint_sha256,
                **code_fingerprint(),
                cfg_options=result_options(self._source['cfg_options']), seed=plan.seed,
                protocol=plan.protocol, border=plan.border, calibration=self.calibration,
                temperature_scaling=self.temperature_scaling,
                temperature_fit=self.temperature_fit, data=data))
        return self._fingerprint

    def _temperature_dataset(self) -> Any:
        """The dataset the temperature is fitted on when it is not the test loop's own:
        the held-out part of the split, else the ``val_dataloader``'s (None without
        either). Built once, for the check, the fingerprint and the fit."""
        if self._temperature_data is None:
            if self._held_out_cfg is not None:
                dataset_cfg = self._held_out_cfg['dataset']
            elif self.runner.cfg.get('val_dataloader'):
                dataset_cfg = self.runner.cfg.val_dataloader.dataset
            else:
                return None
            self._temperature_data = self._build_dataset(dataset_cfg)
        return self._temperature_data

    def _build_dataset(self, dataset_cfg: dict):
        """A dataset of the config built alone, in the config's default scope."""
        from mmengine.registry import DATASETS, DefaultScope
        with DefaultScope.overwrite_default_scope(self.runner.cfg.get('default_scope')):
            dataset = DATASETS.build(copy.deepcopy(dataset_cfg))
        if hasattr(dataset, 'full_init'):
            dataset.full_init()
        return dataset

    # ------------------------------------------------------------------ records
    def condition_file(self, condition: Any) -> str:
        return self.store.condition_file(condition)

    def reuse_problem(self, condition: Any) -> Optional[str]:
        """Why the condition's record cannot be reused (None when it can; see
        :meth:`ConditionStore.reuse_problem`)."""
        return self.store.reuse_problem(condition)

    def load_records(self, conditions: Sequence[Any]) -> Dict[Condition, dict]:
        """``condition -> record`` (see :meth:`ConditionStore.load`)."""
        return self.store.load(conditions)

    def provenance(self) -> dict:
        """The provenance block of the report and of a shard manifest."""
        config = self._source['config']
        plan = self.plan
        return make_provenance(
            model=osp.splitext(osp.basename(config))[0] if config
            else getattr(self.runner, 'experiment_name', None), task=self.metric_task,
            config=config, checkpoint=self.checkpoint,
            checkpoint_sha256=self.fingerprint['checkpoint_sha256'], seed=plan.seed,
            protocol=plan.protocol,
            extra=json_round_trip(dict(corruptions=plan.corruptions,
                                       severities=plan.severities, border=plan.border,
                                       cfg_options=result_options(self._source['cfg_options']),
                                       calibration=self.calibration,
                                       temperature=self.recorded_temperature(),
                                       seen_in_training=self.seen_in_training,
                                       fingerprint=self.fingerprint)))

    # ------------------------------------------------------------------ temperature
    def _temperature_record(self) -> Optional[dict]:
        path = osp.join(self.work_dir, TEMPERATURE_FILE)
        if not self.temperature_scaling or not osp.isfile(path):
            return None
        record, _ = read_json(path)
        if not isinstance(record, dict) or \
                not isinstance(record.get('temperature'), (int, float)) or \
                record.get('fingerprint') != self.fingerprint:
            return None
        return record

    def recorded_temperature(self) -> Optional[dict]:
        """The fitted temperature (temperature, source, NLL before/after), or None."""
        record = self._temperature_record()
        if record is not None:
            record.pop('fingerprint')
        return record

    def _fit_temperature(self) -> float:
        """The temperature fitted on clean pixels of unevaluated images (``temperature.json``,
        reused when it was fitted for the same inputs)."""
        from mmengine.dist import is_main_process
        from mmengine.evaluator import Evaluator
        record = None if self.force else self._temperature_record()
        if record is not None:
            return float(record['temperature'])
        runner, cfg = self.runner, self.runner.cfg
        if self._held_out_cfg is not None:
            source = (f'held-out split of the test set ({self.temperature_fit["split"]} '
                      f'images, seed {self.temperature_fit["split_seed"]}; not evaluated)')
            loader = runner.build_dataloader(
                dict(self._held_out_cfg, dataset=self._temperature_dataset()), seed=runner.seed)
        elif cfg.get('val_dataloader'):
            source = 'val_dataloader'
            if self.temperature_fit['on_test']:
                source += ' (may share the evaluated images: temperature_on_test)'
            loader = runner.build_dataloader(
                dict(cfg.val_dataloader, dataset=self._temperature_dataset()), seed=runner.seed)
        else:  # the corruption steps are clean between conditions
            source = 'the evaluated test images, clean (temperature_on_test)'
            loader = self.dataloader
        evaluator = Evaluator([dict(type='TemperatureFitMetric', seed=self.plan.seed)])
        evaluator.dataset_meta = getattr(loader.dataset, 'metainfo', None)
        model = runner.model
        model.eval()
        start = time.perf_counter()
        with torch.no_grad():
            for batch in loader:
                evaluator.process(model.test_step(batch), batch)
        metrics = evaluator.evaluate(len(loader.dataset))
        fit = {name: metrics[metric_key(TEMPERATURE_PREFIX, name)]
               for name in TEMPERATURE_METRICS}
        temperature = float(fit['temperature'])
        if is_main_process():
            print_log(f'temperature fitted on {source}: T = {temperature:.4f} (NLL '
                      f'{fit["nll_before"]:.4f} -> {fit["nll_after"]:.4f}, '
                      f'{int(fit["num_pixels"])} pixels, '
                      f'{time.perf_counter() - start:.1f} s)', logger='current')
            path = osp.join(self.work_dir, TEMPERATURE_FILE)
            try:
                dump_json_atomic(dict(
                    temperature=temperature, source=source,
                    nll_before=float(fit['nll_before']), nll_after=float(fit['nll_after']),
                    num_pixels=int(fit['num_pixels']), num_images=len(loader.dataset),
                    images=_image_names(loader.dataset), fingerprint=self.fingerprint), path)
            except OSError as error:
                raise write_error(path, error) from None
        return temperature

    def _check_temperature_images(self) -> None:
        """Refuse a temperature that would be fitted on evaluated images."""
        cfg = self.runner.cfg
        tested = set(_image_names(self.dataloader.dataset))
        if cfg.get('val_dataloader'):
            shared = tested & set(_image_names(self._temperature_dataset()))
            if not shared:
                return
            what = (f'val_dataloader shares {len(shared)} of the {len(tested)} evaluated '
                    'images with the test set')
        else:
            what = 'there is no val_dataloader, so it would be the evaluated test images'
        raise SweepError(
            f'the temperature would be fitted on evaluated images ({what}): an optimistic '
            'calibration. Hold out test images instead (temperature_split=N, '
            '--temperature-split N: N images, seeded and stratified, not evaluated; the '
            'calibration study holds out 400), give a val_dataloader of other images, or '
            'accept it with temperature_on_test=True (--temperature-on-test)')

    def _calibration_metrics(self) -> Dict[str, Any]:
        """prefix -> the calibration metric instances of the evaluator."""
        if not self.calibration:
            return {}
        prefixes = (CALIBRATION_PREFIX, SCALED_CALIBRATION_PREFIX)
        return {m.prefix: m for m in self.evaluator.metrics
                if getattr(m, 'prefix', None) in prefixes and hasattr(m, 'last_details')}

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, condition: Any) -> Tuple[Dict[str, float], float]:
        """Evaluate one condition (a pair, key or condition): ``(metrics, seconds)``."""
        metrics, seconds = self._evaluate_condition(self.plan.condition(condition))
        # the report needs the curves and bins of the calibration metrics
        self.last_calibration = {
            prefix: {k: v for k, v in (metric.last_details or {}).items() if k != 'stats'}
            for prefix, metric in self._calibration_metrics().items()}
        return metrics, seconds

    def run_iter(self, idx, data_batch: Sequence[dict]) -> None:
        self._check_batch(idx, data_batch)
        super().run_iter(idx, data_batch)

    def run(self, on_condition: Optional[Callable[[Condition, dict], None]] = None
            ) -> Dict[str, float]:
        """Evaluate the conditions not yet finished, write the report (or the shard
        manifest) and return the robustness metrics. ``on_condition(condition, record)``
        is called after each condition file is written. :attr:`outcome` says what was
        done.

        Raises:
            WorkDirLockedError: another run holds the output folder.
            FingerprintMismatchError: a finished condition was written for other inputs.
            CheckpointMismatchError: the runner's checkpoint does not fit the model.
            SweepError: a file cannot be written (the conditions finished before are kept).
        """
        from mmengine.dist import broadcast_object_list, get_world_size, is_main_process

        from ..engine.progress import Progress
        start = time.perf_counter()
        main = is_main_process()
        self._check_checkpoint()
        outcome = SweepOutcome(self.work_dir, list(self.conditions))
        self.outcome = outcome
        lock = self.lock
        try:
            todo, outcome.reevaluated = self.store.todo(self.conditions, lock, self.force)
            outcome.skipped = [c for c in self.conditions if c not in todo]
            if main:
                for placement in self.placements:
                    print_log(f'robustness test: {placement.describe()}', logger='current')
                for reason in outcome.reevaluated.values():
                    print_log(f'{reason}; evaluating it again', logger='current',
                              level=logging.WARNING)
                if outcome.skipped:
                    print_log(f'{len(outcome.skipped)} of {len(self.conditions)} conditions '
                              f'already finished in {self.conditions_dir}; skipped',
                              logger='current')
            self.runner.call_hook('before_test')
            self.runner.call_hook('before_test_epoch')
            if todo:
                self.evaluating = True
                if not self.decode_caches:
                    self.decode_caches = self._cache_decoding(self.decode_cache_bytes)
                if self.temperature_scaling and self.temperature is None:
                    self.temperature = self._fit_temperature()
                    for metric in self._calibration_metrics().values():
                        if metric.prefix == SCALED_CALIBRATION_PREFIX:
                            metric.temperature = self.temperature
                metric = get_task(self.task).metric_name
                bar = Progress(len(todo), desc='robustness', unit='condition') if main \
                    else None
                for number, condition in enumerate(todo, 1):
                    metrics, seconds = self.evaluate(condition)
                    outcome.seconds[condition.key] = seconds
                    outcome.evaluated.append(condition)
                    if main:
                        record = self.store.write(condition, metrics, seconds,
                                                  self.last_calibration)
                        bar.break_line()
                        print_log(f'robustness [{number}/{len(todo)}] {condition.tag}: '
                                  f'{metric} {record["result"]["value"]:.2f} '
                                  f'({seconds:.1f} s)', logger='current')
                        bar.update()
                        if on_condition is not None:
                            on_condition(condition, record)
                if main:
                    bar.close()
            results: Dict[str, float] = {}
            if main:
                results = self._finish(outcome)
            if get_world_size() > 1:
                box = [results]
                broadcast_object_list(box)
                results = box[0]
        finally:
            lock.release()
        outcome.metrics = results
        self.runner.call_hook('after_test_epoch', metrics=results)
        self.runner.call_hook('after_test')
        outcome.wall_seconds = time.perf_counter() - start
        return results

    def _finish(self, outcome: SweepOutcome) -> Dict[str, float]:
        """Write the report (or the manifest); the run's metrics (empty for a shard
        without the clean condition or without a corrupted one)."""
        if self.plan.shard is None:
            records = self.load_records(self.plan.all_conditions)
            report = self.write_report(records)
            outcome.report_files = dict(report.files)
            return robustness_metrics(report.summary, records[self.plan.clean]['metrics'])
        outcome.manifest = self.write_manifest()
        return {}

    def write_report(self, records: Optional[Dict[Condition, dict]] = None) -> Report:
        """Write ``results.json``, ``results.csv``, ``report.md`` and the plots from the
        condition files.

        Raises:
            SweepError: a condition file is missing or malformed, or a report file cannot
                be written (named, with the reason).
        """
        if records is None:
            records = self.load_records(self.plan.all_conditions)
        try:
            return write_report(
                self.work_dir,
                {c: ConditionResult.from_dict(r['result']) for c, r in records.items()},
                protocol=self.plan.protocol, task=self.metric_task,
                expected_severities=self.plan.severities, provenance=self.provenance(),
                plots=self.plots, calibration_details=calibration_details(records),
                seen_in_training=self.seen_in_training)
        except OSError as error:
            raise write_error(error.filename or f'the report in {self.work_dir}',
                              error) from None

    def write_manifest(self) -> str:
        """Write the shard manifest ``shard_<i>-of-<n>.json``; returns its path."""
        plan = self.plan
        return write_shard_manifest(
            self.work_dir, plan.shard, task=self.metric_task, protocol=plan.protocol,
            corruptions=plan.corruptions, severities=plan.severities,
            condition_files={c.key: condition_record_name(c) for c in self.conditions},
            num_conditions=len(plan.all_conditions), fingerprint=self.fingerprint,
            provenance=self.provenance())


# ----------------------------------------------------------------------------- validation

@LOOPS.register_module()
class RobustnessValLoop(_ConditionSwitching, ValLoop):
    """``ValLoop`` evaluating clean plus a few corruptions at each validation.

    For fine-tuning: ``val_cfg = dict(type='RobustnessValLoop', corruptions=['cloud',
    'gaussian_noise', 'haze'], severities=[3])`` adds ``robust/avg``, ``robust/delta_tp``
    and the per-condition metrics (see :mod:`reobench_mm.robustness.loops`) to the
    validation metrics, next to the clean metrics under their own keys, so that
    ``CheckpointHook(save_best='robust/avg')``, ``LoggerHook`` and the visualizer backends
    (TensorBoard, W&B, ...) use them as any validation metric. The seconds each validation
    took are logged. Nothing is written to disk.

    Args:
        runner, dataloader, evaluator, fp16: as ``ValLoop``.
        corruptions: names and groups (default ``['cloud', 'gaussian_noise', 'haze']``).
        severities: severities 1..5 (default ``[3]``).
        protocol, seed, border: the corruption settings (see ``ApplyCorruption``).
        decode_cache_bytes: keep up to this many bytes of decoded validation samples in
            memory between conditions and validations (default 0: off).
    """

    def __init__(self, runner, dataloader: Union[DataLoader, Dict],
                 evaluator: Union[Any, Dict, List], fp16: bool = False,
                 corruptions: Union[None, str, Sequence[str]] = (
                     'cloud', 'gaussian_noise', 'haze'),
                 severities: Optional[Sequence[int]] = (3, ), protocol: str = 'reobench',
                 seed: int = 0, border: str = 'reflect', decode_cache_bytes: int = 0) -> None:
        check_no_corruption_cfg(runner.cfg)
        self.plan = SweepPlan.create(list(corruptions) if corruptions is not None else None,
                                     list(severities) if severities is not None else None,
                                     protocol, seed, border)
        check_cache_bytes(decode_cache_bytes)
        cfg = runner.cfg
        self.task = infer_task(cfg)
        self.metric_task = get_task(self.task).results_name
        dataloader, self.placements = self._place(dataloader, cfg.get('default_scope'),
                                                  'robustness validation')
        super().__init__(runner, dataloader, evaluator, fp16)
        self._find_steps()
        self.decode_cache_bytes = decode_cache_bytes
        self.decode_caches: list = []

    def run_iter(self, idx, data_batch: Sequence[dict]):
        self._check_batch(idx, data_batch)
        super().run_iter(idx, data_batch)

    def run(self) -> dict:
        """Validate under every condition; the metrics go to ``after_val_epoch``."""
        start = time.perf_counter()
        self.runner.call_hook('before_val')
        self.runner.call_hook('before_val_epoch')
        if not self.decode_caches:
            self.decode_caches = self._cache_decoding(self.decode_cache_bytes)
        self.val_loss.clear()
        raw: Dict[Condition, Dict[str, float]] = {}
        for condition in self.plan.conditions:
            raw[condition], _ = self._evaluate_condition(condition)
        summary = aggregate(raw, protocol=self.plan.protocol, task=self.metric_task,
                            expected_severities=self.plan.severities)
        metrics = robustness_metrics(summary, raw[self.plan.clean])
        seconds = time.perf_counter() - start
        print_log(f'robustness validation: {len(raw)} conditions in {seconds:.1f} s; '
                  f'{summary.metric} clean {summary.clean:.2f}, avg {summary.avg:.2f}, '
                  f'delta_tp {summary.delta_tp:.2f}', logger='current')
        self.runner.call_hook('after_val_epoch', metrics=metrics)
        self.runner.call_hook('after_val')
        return metrics
