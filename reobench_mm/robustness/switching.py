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
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Tuple, Union

from mmengine.logging import MMLogger, print_log
from torch.utils.data import DataLoader

from ..analysis.intervals import SUMMARY_INTERVAL_KEYS
from ..analysis.results import RobustnessSummary
from ..analysis.result_blocks import block_metric_keys
from reobench_corruptions.condition import Condition
from ..engine.corruption_loop import check_batch_condition, check_not_empty
from ..errors import SweepError
from ..fileio import plain_float
from ..evaluation.keys import (HELD_OUT_SCORES, HELD_OUT_SUFFIX, ROBUST_SCORES,
                               condition_metric_key, robust_key)
from ..transforms.placement import (Placement, corruption_steps, place_condition,
                                    stop_live_workers)
from .decode_cache import cache_loading_steps

__all__ = ['ActiveCondition', 'ConditionSwitch', 'Feed', 'place_switch_step', 'find_steps',
           'robustness_metrics', 'quiet_metric_tables']


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



class Feed(NamedTuple):
    """Where a condition's images come from: a built dataloader and the switchable
    ``ApplyCorruption`` steps of its dataset's pipeline."""
    dataloader: DataLoader
    steps: List[Any]


@dataclass(frozen=True)
class ActiveCondition:
    """The condition being evaluated and what it does to the data: what the pipeline's
    steps apply (``pipeline``: the condition itself, or clean where the model's device
    corrupts instead), what the model's device applies to each batch (``device``, or
    None) and the batch transform of the condition's kind (``transform``: an attack run
    that attacks each batch; or None)."""
    condition: Condition
    pipeline: Condition
    device: Optional[Condition] = None
    transform: Any = None


def place_switch_step(dataloader: Union[DataLoader, Dict], clean: Condition,
                      scope: Optional[str], what: str, ignore_index: Optional[int]
                      ) -> Tuple[Union[DataLoader, Dict], List[Placement]]:
    """The clean step placed into a copy of the dataloader config (persistent workers
    off) or the built dataloader, for geometric corruptions whatever the selection (with
    the label step where the annotations are loaded after the image), so that the
    pipeline, and the fingerprint of the records, is the same for any selection."""
    if isinstance(dataloader, dict):
        dataloader = copy.deepcopy(dataloader)
        if dataloader.get('persistent_workers'):
            print_log(f'{what}: persistent dataloader workers turned off (the workers of '
                      'each condition start from the switched pipeline)', logger='current')
            dataloader['persistent_workers'] = False
    placements = place_condition(dataloader, clean, scope, geometric=True, override=True,
                                 ignore_index=ignore_index)
    return dataloader, placements


def find_steps(dataloader: DataLoader, owner: str) -> Feed:
    """The built test dataloader and its switchable steps.

    Raises:
        SweepError: the dataset is empty, or its pipeline has no ``ApplyCorruption`` step.
    """
    check_not_empty(dataloader.dataset, owner)
    steps = corruption_steps(dataloader.dataset)
    if not steps:
        raise SweepError('no ApplyCorruption step in the built dataset pipeline')
    return Feed(dataloader, steps)


class ConditionSwitch:
    """Switches the placed steps to a condition and prepares each batch for it.

    It holds the run's :class:`ActiveCondition` (replaced as a whole, never changed in
    place) and, with ``corruption_device='model'``, the device corruption that applies
    the conditions it covers to each batch instead of the pipeline.

    Args:
        test: the test set's feed.
        clean: the run's clean condition.
        device_corruption: the :class:`~reobench_mm.robustness.device_corruption.
            DeviceCorruption` of the run, or None (everything in the pipeline).
    """

    def __init__(self, test: Feed, clean: Condition, device_corruption: Any = None) -> None:
        self.test, self.clean = test, clean
        self.device_corruption = device_corruption
        self.active = self.active_for(clean)

    @property
    def steps(self) -> List[Any]:
        """The test set's switchable ``ApplyCorruption`` steps."""
        return self.test.steps

    def active_for(self, condition: Condition, in_pipeline: bool = False,
                   transform: Any = None) -> ActiveCondition:
        """What evaluating ``condition`` means here (nothing switched): with a device
        corruption covering it, the pipeline stays clean and the device applies it (unless
        ``in_pipeline``)."""
        device = self.device_corruption
        pipeline = condition if device is None or in_pipeline else \
            device.pipeline_condition(condition)
        return ActiveCondition(condition, pipeline,
                               None if pipeline is condition else condition, transform)

    def activate(self, condition: Condition, feed: Optional[Feed] = None,
                 in_pipeline: bool = False, transform: Any = None) -> ActiveCondition:
        """Switch ``feed``'s steps (default: the test set's) to ``condition`` and make it
        the active one (``in_pipeline``: all of it in the pipeline, e.g. for the
        thumbnails of the worst cases)."""
        feed = feed or self.test
        active = self.active_for(condition, in_pipeline, transform)
        for step in feed.steps:
            step.set_condition(active.pipeline)
        stop_live_workers(feed.dataloader)
        self.active = active
        return active

    def reset(self, feed: Optional[Feed] = None) -> None:
        """Switch ``feed`` (default: the test set) back to clean; clean is active."""
        self.activate(self.clean, feed)  # the active condition: clean, whatever the feed

    def prepare(self, idx: int, data_batch: Any, active: ActiveCondition) -> Any:
        """The batch as the model gets it under ``active``: checked (every sample's
        metainfo carries what the pipeline applied), corrupted on the model's device,
        then transformed by the condition's kind (an attack on a corrupted image)."""
        check_batch_condition(data_batch, active.pipeline, idx)
        if active.device is not None:
            data_batch = self.device_corruption.apply(data_batch, active.device)
        if active.transform is not None:
            data_batch = active.transform.apply(data_batch)
        return data_batch

    def cache_decoding(self, cache_bytes: int) -> list:
        """Cache the test set's decoded samples (``decode_cache_bytes``; 0: off)."""
        if cache_bytes <= 0:
            return []
        return cache_loading_steps(self.test.dataloader.dataset, self.test.steps,
                                   cache_bytes)
