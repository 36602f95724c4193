"""Offline analysis of robustness results (layer 8): results in, tables and plots out.

- :mod:`~reobench_mm.analysis.results`: conditions, condition results and their
  aggregation (Avg, ΔTP, mPC, rPC, per category);
- :mod:`~reobench_mm.analysis.report`: one model's ``results.json``, ``results.csv``,
  ``report.md`` and plots;
- :mod:`~reobench_mm.analysis.results_file`: reading a ``results.json`` back (the one
  typed reader);
- :mod:`~reobench_mm.analysis.tables`: the number formatter, the Markdown-table writer,
  the paper layout and the several-model comparison table;
- :mod:`~reobench_mm.analysis.plotting`: every figure of the package;
- :mod:`~reobench_mm.analysis.model_set`: several models' results (one loader) and the
  comparison table;
- :mod:`~reobench_mm.analysis.rank_stability`, :mod:`~reobench_mm.analysis.effective_robustness`:
  the cross-model statistics; :mod:`~reobench_mm.analysis.compare` puts them together
  and writes them;
- :mod:`~reobench_mm.analysis.data_budget`: the numbers of the data-budget report.

Nothing here runs a model: the experiment drivers of :mod:`reobench_mm.robustness` call
it. May import the layers below it (the base modules, ``corruptions``, ``transforms``,
``datasets``, ``models``, ``evaluation``, ``engine`` and ``utils``); never
``robustness``.

The names below are importable from this package; each loads its module on first use
(the cross-model modules import scipy, which the plugin line does not need).
"""
import importlib
from typing import Any

#: public name -> the module that defines it
_EXPORTS = {
    'REOBENCH_TABLE_ORDER': 'results', 'ConditionResult': 'results',
    'RobustnessSummary': 'results', 'aggregate': 'results',
    'condition_result_from_metrics': 'results', 'merge_results': 'results',
    'results_to_jsonable': 'results', 'results_from_jsonable': 'results',
    'robustness_scores': 'results', 'Report': 'report', 'write_report': 'report',
    'write_results_json': 'report', 'write_results_csv': 'report',
    'render_report_md': 'report', 'make_provenance': 'report', 'ResultsFile': 'results_file',
    'read_results': 'results_file', 'paper_table_lines': 'tables',
    'ComparisonTable': 'tables', 'comparison_markdown': 'tables',
    'comparison_csv_text': 'tables', 'write_comparison': 'tables',
    'build_comparison': 'model_set', 'load_model_set': 'model_set',
    'compare_models': 'compare', 'write_cross_model': 'compare',
    'plot_reliability_diagrams': 'plotting',
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f'{__name__}.{_EXPORTS[name]}'), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__():
    return sorted(set(globals()) | set(__all__))
