"""The evaluator of a robustness run: the configured test metrics, with MMSeg's
``IoUMetric`` and MMRotate's ``DOTAMetric`` evaluated by the package's per-class twins,
and the calibration metrics added when asked for."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..errors import SweepError
from ..evaluation.functional.condition_stats import ImageStats
from ..evaluation.evaluator_cfg import as_metric_list
from ..evaluation.keys import (CALIBRATION_PREFIX, CALIBRATION_PREFIXES, ROTATED_DETECTION,
                               SCALED_CALIBRATION_PREFIX, Task)

__all__ = ['CLASSWISE_METRICS', 'classwise_evaluator', 'calibration_metric_cfgs',
           'robustness_evaluator', 'calibration_metrics', 'condition_image_stats']

#: Toolbox metrics -> ours that return the same numbers plus the per-class values (and, for
#: DOTAMetric, without a process pool per evaluation).
CLASSWISE_METRICS = {
    'IoUMetric': 'ClasswiseIoUMetric', 'mmseg.IoUMetric': 'ClasswiseIoUMetric',
    'DOTAMetric': 'InProcessDOTAMetric', 'mmrotate.DOTAMetric': 'InProcessDOTAMetric',
}


def classwise_evaluator(evaluator: Any) -> List[Any]:
    """The metric configs of the test evaluator with MMSeg's ``IoUMetric`` and MMRotate's
    ``DOTAMetric`` replaced by :class:`ClasswiseIoUMetric` / :class:`InProcessDOTAMetric`
    (same arguments, same summary numbers, plus ``IoU.<class>`` / ``AP.<class>``); other
    metrics are kept as they are."""
    return [dict(metric, type=CLASSWISE_METRICS[metric['type']])
            if isinstance(metric, dict) and metric.get('type') in CLASSWISE_METRICS
            else metric for metric in as_metric_list(evaluator)]


def calibration_metric_cfgs(task: Task, temperature_scaling: bool = False,
                            ignore_index: Optional[int] = None) -> List[dict]:
    """The metric configs appended for calibration: ``SegCalibrationMetric``
    (segmentation, leaving out the pixels labelled ``ignore_index`` as the task metric
    does; plus a second one with prefix ``calib_ts`` for temperature scaling, whose
    temperature is set after fitting) or ``RotatedDetectionCalibrationMetric``, with the
    prefixes of :mod:`reobench_mm.evaluation.keys`.

    Raises:
        SweepError: temperature scaling for detection.
    """
    if task.name == ROTATED_DETECTION:
        if temperature_scaling:
            raise SweepError('temperature scaling is for segmentation (it rescales the '
                             'per-pixel class logits); detection scores have no such logits')
        return [dict(type='RotatedDetectionCalibrationMetric', prefix=CALIBRATION_PREFIX)]
    ignore = {} if ignore_index is None else dict(ignore_index=ignore_index)
    metrics = [dict(type='SegCalibrationMetric', prefix=CALIBRATION_PREFIX, **ignore)]
    if temperature_scaling:
        metrics.append(dict(type='SegCalibrationMetric', prefix=SCALED_CALIBRATION_PREFIX,
                            **ignore))
    return metrics


def robustness_evaluator(evaluator: Any, task: Task, calibration: bool,
                         temperature_scaling: bool, ignore_index: Optional[int] = None
                         ) -> Any:
    """The evaluator a robustness test loop builds: :func:`classwise_evaluator` of a
    config plus, with ``calibration``, :func:`calibration_metric_cfgs` (ignoring
    ``ignore_index``, the task metric's); a built ``Evaluator`` is kept as it is.

    Raises:
        SweepError: calibration with a built ``Evaluator`` (it cannot be given more
            metrics), or temperature scaling for detection.
    """
    if isinstance(evaluator, (dict, list, tuple)):
        metrics = classwise_evaluator(evaluator)
        if calibration:
            metrics += calibration_metric_cfgs(task, temperature_scaling, ignore_index)
        return metrics
    if calibration:
        raise SweepError('calibration needs the test evaluator as a config (dict or '
                         'list of metric configs), not a built Evaluator')
    return evaluator


def calibration_metrics(evaluator: Any) -> Dict[str, Any]:
    """prefix -> the calibration metric instances of a built evaluator."""
    return {m.prefix: m for m in getattr(evaluator, 'metrics', [])
            if getattr(m, 'prefix', None) in CALIBRATION_PREFIXES
            and hasattr(m, 'last_details')}


def condition_image_stats(evaluator: Any) -> Optional[ImageStats]:
    """The per-image statistics the metrics of a built evaluator kept in their last
    evaluation: the task metric's (``ClasswiseIoUMetric``, ``InProcessDOTAMetric``) with
    the calibration metrics' (None when the task metric kept none, e.g. a metric of
    another kind, or on a process other than the main one)."""
    task, calibration = None, {}
    for metric in getattr(evaluator, 'metrics', []):
        stats = getattr(metric, 'last_image_stats', None)
        if stats is None:
            continue
        if getattr(metric, 'prefix', None) in CALIBRATION_PREFIXES:
            calibration[metric.prefix] = stats
        elif isinstance(stats, tuple) and task is None:
            task = stats
    if task is None:
        return None
    image_ids, task_stats = task
    calibration = {p: s for p, s in calibration.items()
                   if s.num_images == len(image_ids)}
    return ImageStats(image_ids, task_stats, calibration)
