"""The kinds of condition a robustness run evaluates, in one place: the plan's
corruption conditions (:class:`~reobench_corruptions.condition.Condition`), the shift
sets' (:class:`~reobench_mm.robustness.shift_sets.ShiftCondition`) and the attacks'
(:class:`~reobench_mm.robustness.attack_sets.AttackCondition`)."""
from __future__ import annotations

from typing import Any

from .attack_sets import AttackCondition
from .plan import SweepPlan
from .shift_sets import ShiftCondition

__all__ = ['OWN_KEY_CONDITIONS', 'coerce_condition']

#: The conditions that are not a (corruption, severity) pair of the plan: they are used as
#: they are.
OWN_KEY_CONDITIONS = (ShiftCondition, AttackCondition)


def coerce_condition(plan: SweepPlan, value: Any) -> Any:
    """A condition of a run: a shift set's or an attack's as it is, else
    :meth:`SweepPlan.condition` (a pair, key or corruption condition)."""
    return value if isinstance(value, OWN_KEY_CONDITIONS) else plan.condition(value)
