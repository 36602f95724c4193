"""Offline analysis of robustness results (layer 8): results in, tables and plots out.

- :mod:`~reobench_mm.analysis.results`: conditions, condition results and their
  aggregation (Avg, ΔTP, mPC, rPC, per category);
- :mod:`~reobench_mm.analysis.report`: one model's ``results.json``, ``results.csv``,
  ``report.md`` and plots, and reading them back;
- :mod:`~reobench_mm.analysis.tables`: the number formatter, the Markdown-table writer,
  the paper layout and the several-model comparison table;
- :mod:`~reobench_mm.analysis.plotting`: every figure of the package;
- :mod:`~reobench_mm.analysis.compare`: several models' results (one loader), rank
  stability and effective robustness.

Nothing here runs a model: the experiment drivers of :mod:`reobench_mm.robustness` call
it. May import the layers below it (the base modules, ``corruptions``, ``transforms``,
``datasets``, ``models``, ``evaluation``, ``engine`` and ``utils``); never
``robustness``.
"""
from .compare import build_comparison, compare_models, load_model_set, write_cross_model
from .plotting import plot_reliability_diagrams
from .report import (Report, load_condition_results, load_results_json, make_provenance,
                     render_report_md, summary_from_results_json, write_report,
                     write_results_csv, write_results_json)
from .results import (REOBENCH_TABLE_ORDER, ConditionResult, RobustnessSummary, aggregate,
                      condition_result_from_metrics, merge_results, results_from_jsonable,
                      results_to_jsonable, robustness_scores)
from .tables import (ComparisonTable, comparison_csv_text, comparison_markdown,
                     paper_table_lines, write_comparison)

__all__ = [
    'REOBENCH_TABLE_ORDER', 'ConditionResult',
    'RobustnessSummary', 'aggregate', 'condition_result_from_metrics', 'merge_results',
    'results_to_jsonable', 'results_from_jsonable', 'robustness_scores', 'Report',
    'write_report', 'write_results_json', 'write_results_csv', 'render_report_md',
    'make_provenance', 'load_results_json', 'load_condition_results',
    'summary_from_results_json', 'paper_table_lines', 'ComparisonTable', 'build_comparison',
    'comparison_markdown', 'comparison_csv_text', 'write_comparison', 'load_model_set',
    'compare_models', 'write_cross_model', 'plot_reliability_diagrams'
]
