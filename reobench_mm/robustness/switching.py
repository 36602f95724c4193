"""What both robustness loops do: one switchable ``ApplyCorruption`` step placed in the
dataloader's pipelines before the dataloader is built, switched per condition in the main
process, the iterations run (the ``*_iter`` hooks see every one) and the configured
evaluator evaluated; and what they return.

Placement follows :mod:`reobench_mm.transforms.placement` (after the image loading, with
the label step of geometric corruptions after the annotation loading where the pipeline
loads them later), the same for any selection. Persistent
dataloader workers are turned off, so that the workers of each condition are started
from the switched pipeline; every sample's metainfo is checked to carry the condition.

What the loops return (and so what ``LoggerHook``, the visualizer backends and
``CheckpointHook(save_best=...)`` see, :func:`robustness_metrics`): the clean condition's
metrics under their own keys (``mIoU``, ``dota/mAP``, ...), the robustness scores
``robust/clean``, ``robust/avg``, ``robust/delta_tp``, ``robust/mpc``, ``robust/rpc``,
each corruption's mean ``robust/<corruption>`` and each condition's task metric
``<tag>/<metric>`` (e.g. ``cloud_s3/mIoU``), on the 0-100 scale
(:mod:`reobench_mm.evaluation.keys`). Avg and ΔTP are REOBench's: the mean over
corruptions of each corruption's mean over its severities, and clean minus that.
"""
from __future__ import annotations

import copy
import logging
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from mmengine.logging import MMLogger, print_log
from torch.utils.data import DataLoader

from ..analysis.intervals import SUMMARY_INTERVAL_KEYS
from ..analysis.results import RobustnessSummary, condition_result_from_metrics
from ..analysis.result_blocks import block_metric_keys
from reobench_corruptions.condition import Condition
from ..engine.corruption_loop import check_batch_condition, check_not_empty
from ..errors import SweepError
from ..fileio import plain_float
from ..evaluation.keys import (HELD_OUT_SCORES, HELD_OUT_SUFFIX, ROBUST_SCORES,
                               condition_metric_key, robust_key)
from ..transforms.placement import (Placement, corruption_steps, place_condition,
                                    stop_live_workers)
from .attack_sets import AttackCondition
from .conditions import kind_of
from .fingerprint import FILE_SET_PART, SHIFT_SET_PART
from .decode_cache import cache_loading_steps
from .plan import SweepPlan
from .released_sets import files_dataset_cfg
from .shifted_data import ConditionData, shift_dataloader_cfg

__all__ = ['ConditionSwitching', 'robustness_metrics', 'quiet_metric_tables']


def robustness_metrics(summary: RobustnessSummary, clean_metrics: Mapping[str, Any]
                       ) -> Dict[str, float]:
    """What a robustness loop returns: the clean condition's scalar metrics under their own
    keys, the robustness scores (``robust/avg``, ...), each corruption's mean
    (``robust/<corruption>``), each condition's task metric (``<tag>/<metric>``) and, with
    bootstrap intervals, the bounds of the overall scores (``robust/avg_ci_low``,
    ``robust/avg_ci_high``, ... for clean, avg, delta_tp, mpc, rpc); and the keys of each
    block of the summary (shift sets: ``shift/<name>/<metric>``, ...; attacks:
    ``adv/worst_eps<ε>``, ...: :func:`~reobench_mm.analysis.result_blocks.block_metric_keys`)."""
    out = {str(k): plain_float(v) for k, v in clean_metrics.items()
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
    out.update(block_metric_keys(summary.blocks))
    intervals = summary.intervals
    if isinstance(intervals, dict) and intervals.get('available'):
        for name in SUMMARY_INTERVAL_KEYS:
            if intervals.get(name):
                out[robust_key(f'{name}_ci_low')] = float(intervals[name][0])
                out[robust_key(f'{name}_ci_high')] = float(intervals[name][1])
    return out


@contextmanager
def quiet_metric_tables(quiet: bool) -> Iterator[None]:
    """Hold back what the metrics log at INFO while they compute (mmseg's ``IoUMetric``
    and mmrotate's ``DOTAMetric`` log a per-class table at every evaluation: 13 lines per
    condition, 800 of a 61-condition sweep's log) when ``quiet``; warnings still show.
    The robustness loops log each condition's metric in one line, and every condition's
    per-class numbers are in its record and the report; the clean condition's table is
    kept."""
    logger = MMLogger.get_current_instance()
    level = logger.level
    if quiet:
        logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


class ConditionSwitching:
    """The part both robustness loops share (a mixin before MMEngine's ``TestLoop`` or
    ``ValLoop``): placing the step, switching it, evaluating one condition, checking
    batches and caching the decoded samples."""

    plan: SweepPlan
    runner: Any
    dataloader: DataLoader
    evaluator: Any
    #: the label the evaluator's segmentation metrics ignore (None for detection): the
    #: corruption step pads moved label maps with it
    ignore_index: Optional[int] = None

    def _place(self, dataloader: Union[DataLoader, Dict], scope: Optional[str],
               what: str) -> Tuple[Union[DataLoader, Dict], List[Placement]]:
        """The clean step placed into a copy of the dataloader config (persistent workers
        off) or the built dataloader, for geometric corruptions whatever the selection
        (with the label step where the annotations are loaded after the image), so that
        the pipeline, and the fingerprint of the records, is the same for any selection."""
        if isinstance(dataloader, dict):
            dataloader = copy.deepcopy(dataloader)
            if dataloader.get('persistent_workers'):
                print_log(f'{what}: persistent dataloader workers turned off (the workers of '
                          'each condition start from the switched pipeline)',
                          logger='current')
                dataloader['persistent_workers'] = False
        placements = place_condition(dataloader, self.plan.clean, scope, geometric=True,
                                     override=True, ignore_index=self.ignore_index)
        return dataloader, placements

    def _find_steps(self) -> None:
        check_not_empty(self.dataloader.dataset, type(self).__name__)
        self.steps = corruption_steps(self.dataloader.dataset)
        if not self.steps:
            raise SweepError('no ApplyCorruption step in the built dataset pipeline')
        self._set_current(self.plan.clean)

    #: the corruptions applied on the model's device (``corruption_device='model'``)
    device_corruption: Any = None

    def _pipeline_condition(self, condition: Any, in_pipeline: bool = False) -> Any:
        """What the pipeline applies for ``condition``: clean when the model's device
        corrupts instead (unless ``in_pipeline``)."""
        device = self.device_corruption
        return condition if device is None or in_pipeline else \
            device.pipeline_condition(condition)

    def _set_current(self, condition: Any, in_pipeline: bool = False) -> Any:
        """Make ``condition`` the one evaluated; returns what the pipeline applies."""
        applied = self._pipeline_condition(condition, in_pipeline)
        self._current, self._pipeline_current = condition, applied
        self._device_condition = None if applied is condition else condition
        return applied

    def _switch(self, condition: Condition, in_pipeline: bool = False) -> None:
        """Switch the run to ``condition`` (``in_pipeline``: all of it in the pipeline,
        e.g. for the thumbnails of the worst cases)."""
        applied = self._set_current(condition, in_pipeline)
        for step in self.steps:
            step.set_condition(applied)
        stop_live_workers(self.dataloader)

    def _device_corrupted(self, data_batch: Any) -> Any:
        """The batch with the current condition applied on the model's device, when the
        device applies it."""
        if getattr(self, '_device_condition', None) is None:
            return data_batch
        return self.device_corruption.apply(data_batch, self._device_condition)

    def _evaluate_condition(self, condition: Condition, quiet: Optional[bool] = None
                            ) -> Tuple[Dict[str, float], float]:
        """Run the iterations under ``condition`` and evaluate: ``(metrics, seconds)``
        (the metrics' own tables logged for the clean condition only, or unless
        ``quiet``)."""
        self._switch(condition)
        start = time.perf_counter()
        try:
            self.runner.model.eval()
            for idx, data_batch in enumerate(self.dataloader):
                self.run_iter(idx, data_batch)
            with quiet_metric_tables(not condition.is_clean if quiet is None else quiet):
                metrics = self.evaluator.evaluate(len(self.dataloader.dataset))
        finally:
            self._switch(self.plan.clean)
        return ({str(k): plain_float(v) for k, v in metrics.items()},
                time.perf_counter() - start)

    #: the data of the conditions with test data of their own (None without any)
    condition_data: Optional[ConditionData] = None

    def _make_condition_data(self, options: Any, given: Any, placed: Any,
                             cfg_key: str) -> None:
        """Set up the data of the shift sets and of the corrupted sets read from files of
        ``options``: the shift sets are built from the dataloader config the loop was given
        (``given``, before placement; the runner config's ``cfg_key`` for a built
        dataloader), the files' sets from the placed config (``placed``)."""
        shifts = getattr(options, 'shifts', ())
        files = getattr(options, 'corruption_files', None)
        if not shifts and files is None:
            return
        base = given if isinstance(given, dict) else self.runner.cfg.get(cfg_key)
        if shifts and not isinstance(base, dict):
            raise SweepError(f'shift sets need the {cfg_key} config to build their '
                             'dataloaders from')
        if files is not None and not isinstance(placed, dict):
            raise SweepError('corruption_files needs the test dataloader as a config')
        self._given_cfg, self._placed_cfg = base, placed
        self._shift_sets = {s.name: s for s in shifts}
        runner = self.runner
        self.condition_data = ConditionData(
            lambda cfg: runner.build_dataloader(cfg, seed=runner.seed),
            self.dataloader.dataset, runner.cfg.get('default_scope'), self.ignore_index)

    def _own_data(self, condition: Any) -> Optional[Tuple[str, Callable[[], dict], str]]:
        """``(key, make_cfg, what)`` of a condition with test data of its own (a shift set,
        or a corruption read from files), else None."""
        data = self.condition_data
        if data is None:
            return None
        kind = kind_of(condition)
        if kind.attacked:  # an attack reads its base's images
            return self._own_data(condition.base)
        if kind.own_data:
            shift = self._shift_sets[condition.label]
            what = f'shift set {shift.name!r}'
            return (f'shift:{shift.name}', lambda: data.place(
                shift_dataloader_cfg(self._given_cfg, shift), what), what)
        files = getattr(self.options, 'corruption_files', None)
        if files is not None and files.reads(condition):
            placed = self._placed_cfg
            return (f'files:{condition.tag}', lambda: dict(
                copy.deepcopy(placed), persistent_workers=False,
                dataset=files_dataset_cfg(placed['dataset'], files, condition)),
                f'the files of {condition.key}')
        return None

    def _own_fingerprint(self, run: Mapping[str, Any], condition: Any) -> Dict[str, Any]:
        """The fingerprint of ``condition``'s record: the run's (``run``), with the data of
        a shift set (``data.shift_set``) or of the files read (``data.file_set``)."""
        own = self._own_data(condition)
        if own is None:
            return run
        out = copy.deepcopy(dict(run))
        shift = kind_of(condition).own_data
        part = SHIFT_SET_PART if shift else FILE_SET_PART
        name = condition.label if shift else getattr(condition, 'base', condition).key
        out['data'] = dict(out.get('data') or {},
                           **{part: dict(name=name, **self.condition_data.fingerprint(*own))})
        return out

    #: the attack being evaluated (None outside an attack condition)
    attack_run: Any = None
    #: what the last attack condition recorded beside its metrics
    last_attack: Optional[Dict[str, Any]] = None

    def _evaluate_attack(self, condition: AttackCondition) -> Tuple[Dict[str, float], float]:
        """Evaluate an attack condition: its base condition (clean, or a corruption at a
        severity), with every batch attacked before the model predicts it
        (:class:`~reobench_mm.robustness.attack_run.AttackRun`)."""
        from .attack_run import AttackRun
        classes = (getattr(self.dataloader.dataset, 'metainfo', None) or {}).get('classes')
        self.attack_run = AttackRun(condition, self.runner.model, self.task,
                                    self.ignore_index, len(classes or ()))
        try:
            metrics, seconds = self._evaluate_any(condition.base, quiet=True)
            run = self.attack_run
        finally:
            self.attack_run = None
        self.last_attack = run.record(
            condition_result_from_metrics(metrics, self.task.results_name).value)
        return metrics, seconds

    def _attacked(self, data_batch: Any) -> Any:
        """The batch as the model sees it: attacked while an attack condition is
        evaluated, else as it is."""
        if self.attack_run is None:
            return data_batch
        return self.attack_run.attack_batch(data_batch)

    def _evaluate_any(self, condition: Any, quiet: Optional[bool] = None
                      ) -> Tuple[Dict[str, float], float]:
        """Evaluate a condition, on its own data where it has some: that data's
        dataloader and steps in place of the test set's for the time it takes (a shift
        set under its base condition, the files of a corruption clean); an attack
        condition through :meth:`_evaluate_attack`."""
        self.last_attack = None
        kind = kind_of(condition)
        if kind.attacked:
            return self._evaluate_attack(condition)
        own = self._own_data(condition)
        if own is None:
            return self._evaluate_condition(condition, quiet=quiet)
        loader, steps = self.condition_data.dataloader(*own)
        base = condition.base if kind.own_data else condition.clean()
        saved = self.dataloader, self.steps
        self.dataloader, self.steps = loader, steps
        try:
            return self._evaluate_condition(base, quiet=True)
        finally:
            self.dataloader, self.steps = saved

    def _check_batch(self, idx: int, data_batch: Any) -> None:
        check_batch_condition(data_batch, self._pipeline_current, idx)

    def _cache_decoding(self, cache_bytes: int) -> list:
        if cache_bytes <= 0:
            return []
        return cache_loading_steps(self.dataloader.dataset, self.steps, cache_bytes)
