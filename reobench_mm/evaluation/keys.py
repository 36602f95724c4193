"""The task vocabulary and the metric keys of the package, in one place.

Tasks
    :data:`SEGMENTATION` (``'segmentation'``) and :data:`ROTATED_DETECTION`
    (``'rotated_detection'``), the names configs, condition records and metrics files
    use. A :class:`Task` says everything the package needs about one: how
    ``results.json`` (and shard manifests and reports) write it (``'segmentation'``,
    ``'detection'``), its task metric (``mIoU`` of ``IoUMetric``, already 0-100;
    ``dota/mAP`` of ``DOTAMetric``, a fraction, times 100), the metric's display name,
    the prefix of its per-class keys (``IoU.<class>``, ``AP.<class>``), the toolbox
    scopes (``default_scope``) and the packing transform that imply it.

Metric keys
    MMEngine writes a metric ``name`` of a metric with prefix ``p`` as ``'p/name'``
    (:func:`metric_key`). The calibration metrics (:data:`CALIBRATION_METRICS`) come
    with prefix :data:`CALIBRATION_PREFIX` (``calib``, as evaluated) and, with
    temperature scaling, :data:`SCALED_CALIBRATION_PREFIX` (``calib_ts``); the
    temperature fit reports :data:`TEMPERATURE_METRICS` with prefix
    :data:`TEMPERATURE_PREFIX` (``tscale``). :data:`ECE_KEY` (``'calib/ECE'``) is the
    calibration error the cross-model and data-budget analyses rank by.

Robustness keys
    The robustness loops return, besides the clean condition's own metrics under their
    own keys, :data:`ROBUST_SCORES` with prefix :data:`ROBUST_PREFIX`
    (``robust/avg``, ``robust/delta_tp``, ...; :func:`robust_key`), each corruption's
    mean over its severities (``robust/cloud``) and each condition's task metric under
    its tag (``cloud_s3/mIoU``; :func:`condition_metric_key`), all on the 0-100 scale.

Condition kinds
    A condition that is not a corruption of the test set has a key, file tag and logger
    keys that start with its kind's prefix: :data:`SHIFT_PREFIX` (``shift/vaihingen``,
    ``shift-vaihingen``, ``shift/vaihingen/mIoU``) for another test set,
    :data:`ATTACK_PREFIX` (``adv/pgd_eps8``, ``adv-pgd_eps8``, ``adv/worst_eps8``) for an
    attack.

Nothing here imports MMEngine or a toolbox.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

__all__ = [
    'SEGMENTATION', 'ROTATED_DETECTION', 'Task', 'TASKS', 'RESULTS_TASKS', 'TASK_OF_SCOPE',
    'TASK_OF_PACKING', 'get_task', 'results_task', 'metric_key', 'CALIBRATION_PREFIX',
    'SCALED_CALIBRATION_PREFIX', 'CALIBRATION_PREFIXES', 'CALIBRATION_METRICS', 'ECE',
    'ECE_KEY', 'TEMPERATURE_PREFIX', 'TEMPERATURE_METRICS', 'ROBUST_PREFIX', 'ROBUST_SCORES',
    'robust_key', 'condition_metric_key', 'HELD_OUT_SCORES', 'HELD_OUT_SUFFIX',
    'SHIFT_PREFIX', 'ATTACK_PREFIX'
]

SEGMENTATION = 'segmentation'
ROTATED_DETECTION = 'rotated_detection'


@dataclass(frozen=True)
class Task:
    """One task and how the package reads and writes it.

    Attributes:
        name: ``'segmentation'`` or ``'rotated_detection'`` (configs, condition records,
            metrics files).
        results_name: how ``results.json``, shard manifests and reports write it
            (``'segmentation'``, ``'detection'``).
        metric_keys: the evaluator keys of the task metric, tried in order (the first
            present is used).
        metric_name: its display name (``'mIoU'``, ``'mAP'``).
        scale: factor bringing the evaluator's value to 0-100 (``IoUMetric`` reports
            percentages, ``DOTAMetric`` fractions).
        per_class_name: prefix of the per-class keys (``'IoU.<class>'``, ``'AP.<class>'``).
        scopes: the ``default_scope`` values of the toolboxes that imply the task.
        packing: the packing transform of its test pipelines.
    """
    name: str
    results_name: str
    metric_keys: Tuple[str, ...]
    metric_name: str
    scale: float
    per_class_name: str
    scopes: Tuple[str, ...]
    packing: str


#: Task name -> :class:`Task`.
TASKS: Dict[str, Task] = {
    SEGMENTATION: Task(SEGMENTATION, 'segmentation', ('mIoU', ), 'mIoU', 1.0, 'IoU',
                       ('mmseg', ), 'PackSegInputs'),
    ROTATED_DETECTION: Task(ROTATED_DETECTION, 'detection', ('dota/mAP', 'mAP'), 'mAP', 100.0,
                            'AP', ('mmrotate', 'mmdet'), 'PackDetInputs'),
}
#: The name ``results.json`` writes -> :class:`Task`.
RESULTS_TASKS: Dict[str, Task] = {task.results_name: task for task in TASKS.values()}
#: ``default_scope`` -> task name.
TASK_OF_SCOPE: Dict[str, str] = {scope: task.name for task in TASKS.values()
                                 for scope in task.scopes}
#: Packing transform -> task name.
TASK_OF_PACKING: Dict[str, str] = {task.packing: task.name for task in TASKS.values()}


def get_task(name: str) -> Task:
    """The :class:`Task` of a task name (``'segmentation'``, ``'rotated_detection'``).

    Raises:
        ValueError: another name.
    """
    if name not in TASKS:
        raise ValueError(f'unknown task {name!r}; valid: {sorted(TASKS)}')
    return TASKS[name]


def results_task(name: str) -> Task:
    """The :class:`Task` of a name as ``results.json`` writes it (``'segmentation'``,
    ``'detection'``).

    Raises:
        ValueError: another name.
    """
    if name not in RESULTS_TASKS:
        raise ValueError(f'unknown task {name!r}; valid: {sorted(RESULTS_TASKS)}')
    return RESULTS_TASKS[name]


def metric_key(prefix: Optional[str], name: str) -> str:
    """The key MMEngine gives metric ``name`` of a metric with ``prefix``:
    ``'calib/ECE'``, or ``name`` itself without a prefix."""
    return f'{prefix}/{name}' if prefix else name


#: Prefix of the calibration metrics as evaluated (``SegCalibrationMetric``,
#: ``RotatedDetectionCalibrationMetric``).
CALIBRATION_PREFIX = 'calib'
#: Prefix of the segmentation calibration metrics with the fitted temperature.
SCALED_CALIBRATION_PREFIX = 'calib_ts'
#: Calibration prefix -> what its numbers are.
CALIBRATION_PREFIXES: Dict[str, str] = {CALIBRATION_PREFIX: 'as evaluated',
                                        SCALED_CALIBRATION_PREFIX: 'temperature-scaled'}
#: The calibration metrics, in table order: expected calibration error (equal-width
#: bins), adaptive ECE (equal-mass bins), maximum calibration error, mean confidence
#: minus accuracy, negative log-likelihood, Brier score, classwise ECE, area under the
#: risk-coverage curve and its excess over an oracle, accuracy at 90 % coverage. The
#: detection calibration metric reports ECE, MCE, gap and cwECE of them.
CALIBRATION_METRICS = ('ECE', 'aECE', 'MCE', 'gap', 'NLL', 'Brier', 'cwECE', 'AURC', 'eAURC',
                       'acc@90cov')
ECE = CALIBRATION_METRICS[0]
#: The calibration error analysed beside the task metric (lower is better).
ECE_KEY = metric_key(CALIBRATION_PREFIX, ECE)
#: Prefix of ``TemperatureFitMetric``.
TEMPERATURE_PREFIX = 'tscale'
#: What ``TemperatureFitMetric`` reports: the temperature, the mean NLL at T = 1 and at
#: the fitted T, and the pixels it was fitted on.
TEMPERATURE_METRICS = ('temperature', 'nll_before', 'nll_after', 'num_pixels')

#: Prefix of the robustness scores the robustness loops return.
ROBUST_PREFIX = 'robust'
#: The robustness scores: the clean metric, the mean over corruptions of the per-corruption
#: means (Avg), clean minus Avg (ΔTP), the mean corrupted performance and the relative one
#: (mPC, rPC = mPC / clean, a fraction).
ROBUST_SCORES = ('clean', 'avg', 'delta_tp', 'mpc', 'rpc')
#: The scores also given over the corruptions a model did not see in training
#: (``robust/avg_held_out``, ...), when its training pipeline corrupted images.
HELD_OUT_SCORES = ('avg', 'delta_tp', 'mpc', 'rpc')
HELD_OUT_SUFFIX = '_held_out'


def robust_key(name: str) -> str:
    """``'robust/avg'``, ``'robust/delta_tp'``, ``'robust/cloud'`` (a corruption's mean)."""
    return metric_key(ROBUST_PREFIX, name)


def condition_metric_key(tag: str, metric_name: str) -> str:
    """A condition's task metric: ``'cloud_s3/mIoU'`` (tag of the condition, display name
    of the metric)."""
    return f'{tag}/{metric_name}'


#: The first part of a shift condition's key, file tag and logger keys.
SHIFT_PREFIX = 'shift'
#: The first part of an attack condition's key, file tag and logger keys.
ATTACK_PREFIX = 'adv'
