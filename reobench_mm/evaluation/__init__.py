"""MMEngine-facing metrics and their math (layer 5).

- :mod:`reobench_mm.evaluation.metrics`: the ``BaseMetric`` classes a config names in its
  evaluator (registered in :data:`reobench_mm.registry.METRICS` when this package is
  imported, as ``import reobench_mm`` does);
- :mod:`reobench_mm.evaluation.functional`: the statistics behind them, on plain arrays
  and tensors (calibration histograms, detection matching, streaming sums, temperature
  fitting, representation similarity);
- :mod:`reobench_mm.evaluation.keys`: the task vocabulary (task names, how
  ``results.json`` writes them, their metrics) and the metric keys and prefixes.

May import the layers below it: the base modules (``version``, ``fileio``, ``registry``),
``corruptions``, ``transforms``, ``datasets`` and ``models``; never ``engine``, ``utils``,
``analysis`` or ``robustness``. Reports and tables of the numbers are in
:mod:`reobench_mm.analysis`.
"""
from .functional import PixelCalibrationStats, fit_temperature
# importing the metrics registers them
from .metrics import (ClasswiseIoUMetric, InProcessDOTAMetric,
                      RotatedDetectionCalibrationMetric, SegCalibrationMetric,
                      TemperatureFitMetric, classwise_iou_metric_class, in_process_rbbox_map)

__all__ = [
    'PixelCalibrationStats', 'SegCalibrationMetric', 'ClasswiseIoUMetric',
    'classwise_iou_metric_class', 'RotatedDetectionCalibrationMetric', 'TemperatureFitMetric',
    'fit_temperature', 'InProcessDOTAMetric', 'in_process_rbbox_map'
]
