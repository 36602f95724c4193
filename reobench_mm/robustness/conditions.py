"""The kinds of condition a robustness run evaluates, in one table.

Every condition of a run is one of the kinds of :data:`CONDITION_KINDS`:

- ``corruption``: :class:`~reobench_corruptions.condition.Condition` (clean included),
  declared by ``corruptions`` and ``severities``, key ``cloud@3``, reported in the run's
  table;
- ``shift``: :class:`~reobench_mm.robustness.shift_sets.ShiftCondition`, declared by
  ``shifts``, key ``shift/<set>``, reported in the ``shifts`` block, evaluated on the
  set's own data;
- ``attack``: :class:`~reobench_mm.robustness.attack_sets.AttackCondition`, declared by
  ``attacks``, key ``adv/<attack>_eps<ε>``, reported in the ``attacks`` block, its
  batches attacked.

A :class:`ConditionKind` says what the loops need to know of its conditions: the option
that declares them, their key prefix (:mod:`reobench_mm.evaluation.keys`), the result
block that reports them (:data:`~reobench_mm.analysis.result_blocks.RESULT_BLOCKS`; the
corruptions make the run's table), whether they are evaluated on a test set of their own
(a shift set: the condition's :attr:`label` names it) and whether each batch is attacked
before the model predicts it (then the condition's ``base`` gives the images). The loops
ask :func:`kind_of` instead of testing a condition's class.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple, TypeVar

from reobench_corruptions.condition import Condition
from .attack_sets import AttackCondition
from .plan import SweepPlan
from .shift_sets import ShiftCondition

__all__ = ['ConditionKind', 'CONDITION_KINDS', 'kind_of', 'is_corruption',
           'records_by_block', 'coerce_condition']

Record = TypeVar('Record')


@dataclass(frozen=True)
class ConditionKind:
    """One kind of condition (see the module docstring).

    Attributes:
        name: ``'corruption'``, ``'shift'``, ``'attack'``.
        condition_type: the class of its conditions.
        option: the option of ``test_cfg`` (and the sweep) that declares them.
        block: the result block that reports them (None: the run's corruption table).
        own_data: evaluated on a test set of its own, named by the condition's ``label``.
        attacked: every batch attacked before the model predicts it; the condition's
            ``base`` is evaluated.
    """
    name: str
    condition_type: type
    option: str
    block: Optional[str]
    own_data: bool = False
    attacked: bool = False

    @property
    def prefix(self) -> Optional[str]:
        """The first part of its conditions' keys and file tags, as their class defines
        it (None: a corruption's key, ``'cloud@3'``)."""
        return getattr(self.condition_type, 'prefix', None)


#: Every kind of condition, in the order a run evaluates them.
CONDITION_KINDS: Tuple[ConditionKind, ...] = (
    ConditionKind('corruption', Condition, 'corruptions', None),
    ConditionKind('shift', ShiftCondition, 'shifts', 'shifts', own_data=True),
    ConditionKind('attack', AttackCondition, 'attacks', 'attacks', attacked=True),
)
_BY_TYPE: Dict[type, ConditionKind] = {k.condition_type: k for k in CONDITION_KINDS}


def kind_of(condition: Any) -> ConditionKind:
    """The kind of ``condition``.

    Raises:
        TypeError: not a condition of any kind (the kinds are named).
    """
    kind = _BY_TYPE.get(type(condition))
    if kind is None:
        raise TypeError(f'{condition!r} is not a condition of a robustness run; the kinds '
                        f'are {[k.name for k in CONDITION_KINDS]}')
    return kind


def is_corruption(condition: Any) -> bool:
    """Whether ``condition`` is of the corruption kind (clean included): a condition of
    the test set's own images, corrupted in the pipeline, on the device or read from
    files, not a shift set's or an attack's."""
    return kind_of(condition).prefix is None


def records_by_block(records: Mapping[Any, Record]
                     ) -> Tuple[Dict[Any, Record], Dict[str, Dict[Any, Record]]]:
    """``records`` (condition -> anything) split into those of the run's table (the
    corruption kind) and, per result block, those the block reports (every block of
    :data:`CONDITION_KINDS`, empty where the run has none), in the given order."""
    table: Dict[Any, Record] = {}
    blocks: Dict[str, Dict[Any, Record]] = {k.block: {} for k in CONDITION_KINDS if k.block}
    for condition, record in records.items():
        block = kind_of(condition).block
        (table if block is None else blocks[block])[condition] = record
    return table, blocks


def coerce_condition(plan: SweepPlan, value: Any) -> Any:
    """A condition of a run: a condition with a key prefix (a shift set's, an attack's)
    as it is, else :meth:`SweepPlan.condition` (a pair, key or corruption condition)."""
    kind = _BY_TYPE.get(type(value))
    return value if kind is not None and kind.prefix is not None else plan.condition(value)
