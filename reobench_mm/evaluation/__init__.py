"""Metrics and robustness aggregation."""
from .calibration import PixelCalibrationStats, SegCalibrationMetric, plot_reliability_diagrams
from .classwise_iou import ClasswiseIoUMetric, classwise_iou_metric_class
from .compare import compare_models, write_cross_model
from .detection_calibration import RotatedDetectionCalibrationMetric
from .temperature import TemperatureFitMetric, fit_temperature
from .report import (ComparisonTable, Report, build_comparison, comparison_csv_text,
                     comparison_markdown, load_condition_results, load_results_json,
                     make_provenance, package_versions, render_report_md,
                     summary_from_results_json, write_comparison, write_report,
                     write_results_csv, write_results_json)
from .rotated_map import InProcessDOTAMetric, in_process_rbbox_map
from .robustness import (CLEAN_CONDITION, REOBENCH_TABLE_ORDER, TASK_METRICS, ConditionResult,
                         RobustnessSummary, aggregate, condition_result_from_metrics,
                         merge_results, results_from_jsonable, results_to_jsonable,
                         robustness_scores)

__all__ = [
    'PixelCalibrationStats', 'SegCalibrationMetric', 'plot_reliability_diagrams',
    'ClasswiseIoUMetric', 'classwise_iou_metric_class', 'compare_models', 'write_cross_model',
    'RotatedDetectionCalibrationMetric', 'TemperatureFitMetric', 'fit_temperature',
    'InProcessDOTAMetric',
    'in_process_rbbox_map',
    'CLEAN_CONDITION', 'REOBENCH_TABLE_ORDER', 'TASK_METRICS', 'ConditionResult',
    'RobustnessSummary', 'aggregate', 'condition_result_from_metrics', 'merge_results',
    'results_to_jsonable', 'results_from_jsonable', 'robustness_scores', 'Report',
    'write_report', 'write_results_json', 'write_results_csv', 'render_report_md',
    'make_provenance', 'package_versions', 'load_results_json', 'load_condition_results',
    'summary_from_results_json', 'ComparisonTable', 'build_comparison', 'comparison_markdown',
    'comparison_csv_text', 'write_comparison'
]
