"""The package's MMEngine metrics, registered in :data:`reobench_mm.registry.METRICS`.

Each is a ``BaseMetric`` (``process`` per batch, ``compute_metrics`` at the end) that a
config names in its evaluator; the statistics they compute live in
:mod:`reobench_mm.evaluation.functional`. Part of the evaluation layer: imports the base
modules and :mod:`reobench_mm.evaluation.functional`, nothing above the evaluation layer.
"""
from .base import DatasetSizeMixin
from .classwise_iou import ClasswiseIoUMetric, classwise_iou_metric_class
from .detection_calibration import RotatedDetectionCalibrationMetric
from .rotated_map import InProcessDOTAMetric, in_process_rbbox_map
from .seg_calibration import SegCalibrationMetric
from .temperature import TemperatureFitMetric

__all__ = [
    'DatasetSizeMixin', 'ClasswiseIoUMetric', 'classwise_iou_metric_class',
    'RotatedDetectionCalibrationMetric', 'InProcessDOTAMetric', 'in_process_rbbox_map',
    'SegCalibrationMetric', 'TemperatureFitMetric'
]
