"""The conditions a robustness run evaluates, by kind, in one place.

- :mod:`~reobench_mm.robustness.conditions.kinds`: the table of the kinds of condition
  (:data:`CONDITION_KINDS`), which every path of a run asks, and
  :func:`register_condition_kind` for a new one;
- :mod:`~reobench_mm.robustness.conditions.shifts`: other test sets as conditions (the
  ``shifts`` option);
- :mod:`~reobench_mm.robustness.conditions.attacks`: adversarial attacks as conditions (the
  ``attacks`` option);
- :mod:`~reobench_mm.robustness.conditions.released`: corruption conditions read from the
  files of a released set (the ``corruption_files`` option).

The corruption conditions themselves are
:class:`~reobench_corruptions.condition.Condition`, selected by
:mod:`~reobench_mm.robustness.plan`.
"""
from .kinds import (CONDITION_KINDS, BatchContext, ConditionKind, blocks_of, check_task,
                    coerce_condition, get_condition_kind, is_corruption, kind_of,
                    kinds_markdown, records_by_block, register_condition_kind,
                    unregister_condition_kind)

__all__ = ['CONDITION_KINDS', 'BatchContext', 'ConditionKind', 'blocks_of', 'check_task',
           'coerce_condition', 'get_condition_kind', 'is_corruption', 'kind_of',
           'kinds_markdown', 'records_by_block', 'register_condition_kind',
           'unregister_condition_kind']
