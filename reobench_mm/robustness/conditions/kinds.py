"""The kinds of condition a robustness run evaluates, in one table.

Every condition of a run is one of the kinds of :data:`CONDITION_KINDS`:

- ``corruption``: :class:`~reobench_corruptions.condition.Condition` (clean included),
  declared by ``corruptions`` and ``severities``, key ``cloud@3``, reported in the run's
  table;
- ``shift``: :class:`~reobench_mm.robustness.conditions.shifts.ShiftCondition`, declared by
  ``shifts``, key ``shift/<set>``, reported in the ``shifts`` block, evaluated on the
  set's own data;
- ``attack``: :class:`~reobench_mm.robustness.conditions.attacks.AttackCondition`, declared by
  ``attacks``, key ``adv/<attack>_eps<ε>``, reported in the ``attacks`` block, its
  batches attacked.

A :class:`ConditionKind` says everything the loops, the store, the shards and the report
need to know of its conditions: the option that declares them and how its value is
parsed, turned into conditions and written back; their key prefix (from their class); the
result block that reports them and how the block is built from their records; whether
they are evaluated on a test set of their own; what is done to each batch before the
model predicts it (an attack; the condition's ``base`` gives the images); and what the
task must allow. The loops ask :func:`kind_of` instead of testing a condition's class.

A new kind is one :class:`ConditionKind` and one
:class:`~reobench_mm.analysis.result_blocks.ResultBlock`, registered together with
:func:`register_condition_kind` (``docs/development.md`` walks through one).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar

from reobench_corruptions.condition import Condition
from ...analysis.attack_table import attack_block
from ...analysis.result_blocks import (ResultBlock, register_result_block,
                                      unregister_result_block)
from ...analysis.shift_table import shift_block
from ...errors import SweepError
from .attacks import (AttackCondition, attack_conditions, attack_row, attacks_to_dict,
                          check_attack_task, parse_attacks)
from ..fingerprint import SHIFT_SET_PART
from ..plan import SweepPlan
from .shifts import (ShiftCondition, parse_shifts, shift_conditions, shift_row,
                         shifts_to_dict)

__all__ = ['ConditionKind', 'CONDITION_KINDS', 'kind_of', 'is_corruption',
           'records_by_block', 'coerce_condition', 'register_condition_kind',
           'unregister_condition_kind', 'get_condition_kind', 'BatchContext', 'blocks_of',
           'check_task', 'kinds_markdown']

Record = TypeVar('Record')
Records = Mapping[Any, Mapping[str, Any]]


@dataclass(frozen=True)
class BatchContext:
    """What a kind's batch transform is made with: the model, the task, the label the
    evaluator ignores and the number of classes."""
    model: Any
    task: Any
    ignore_index: Optional[int]
    num_classes: int


@dataclass(frozen=True)
class ConditionKind:
    """One kind of condition (see the module docstring).

    Attributes:
        name: ``'corruption'``, ``'shift'``, ``'attack'``, or a registered kind's.
        condition_type: the class of its conditions (a
            :class:`~reobench_mm.robustness.plan.ConditionOnBase` for every kind but the
            corruptions: a key ``<prefix>/<label>``, a file tag, settings, a ``base``).
        option: the option of ``test_cfg`` (and the sweep) that declares them.
        block: the result block that reports them (None: the run's corruption table).
        parse: ``(option value, protocol) -> entries`` (a tuple; empty for None), checked:
            a bad value raises ``SweepError`` naming the entry and what is valid.
        conditions: ``(entries, clean condition) -> its conditions``, in run order.
        to_dict: ``entries -> the option value`` that parses to them again (None: none).
        build_block: ``(clean record, clean statistics, the kind's records, statistics by
            condition, metric name, interval settings) -> its result block``.
        own_data: ``(entries, condition) -> (set name, dataset config)``: the condition is
            evaluated on a test set of its own, under its ``base`` (None: the test set).
        batches: ``(condition, BatchContext) -> transform``: every batch of the
            condition's ``base`` is transformed before the model predicts it
            (``transform.apply(batch)``); ``transform.record(value)`` is kept in the
            record under ``<name>_run`` (None: batches as they come).
        check_task: ``(entries, task name)``: raises ``SweepError`` for entries the task
            cannot evaluate (None: any task).
    """
    name: str
    condition_type: type
    option: str
    block: Optional[str]
    parse: Optional[Callable[[Any, str], Tuple[Any, ...]]] = None
    conditions: Optional[Callable[[Tuple[Any, ...], Condition], List[Any]]] = None
    to_dict: Optional[Callable[[Tuple[Any, ...]], Any]] = None
    build_block: Optional[Callable[..., dict]] = None
    own_data: Optional[Callable[[Tuple[Any, ...], Any], Tuple[str, dict]]] = None
    batches: Optional[Callable[[Any, BatchContext], Any]] = None
    check_task: Optional[Callable[[Tuple[Any, ...], str], None]] = None

    @property
    def prefix(self) -> Optional[str]:
        """The first part of its conditions' keys and file tags, as their class defines
        it (None: a corruption's key, ``'cloud@3'``)."""
        return getattr(self.condition_type, 'prefix', None)

    @property
    def transforms_batches(self) -> bool:
        """Whether its batches are transformed (its ``base`` gives the images)."""
        return self.batches is not None

    @property
    def record_field(self) -> str:
        """The field of a condition record holding what its batch transform recorded."""
        return f'{self.name}_run'


def _shift_block(clean: Mapping[str, Any], clean_stats: Any, records: Records,
                 stats: Mapping[Any, Any], metric: str, intervals: Mapping[str, Any]) -> dict:
    def data(record: Mapping[str, Any]) -> Mapping[str, Any]:
        return ((record.get('fingerprint') or {}).get('data') or {}).get(SHIFT_SET_PART, {})

    rows = [shift_row(c, r['result']['value'], stats.get(c),
                      None if stats.get(c) is None else stats[c].num_images,
                      data(r).get('class_map_notes'), data(r).get('compared_classes'))
            for c, r in records.items()]
    return shift_block(rows, id_value=clean['result']['value'], metric=metric,
                       id_stats=clean_stats, **intervals)


def _attack_block(clean: Mapping[str, Any], clean_stats: Any, records: Records,
                  stats: Mapping[Any, Any], metric: str, intervals: Mapping[str, Any]) -> dict:
    rows = [attack_row(c, r['result']['value'], stats.get(c), r.get('attack_run'))
            for c, r in records.items()]
    return attack_block(rows, clean_value=clean['result']['value'], metric=metric,
                        clean_stats=clean_stats, **intervals)


def _shift_data(entries: Tuple[Any, ...], condition: ShiftCondition) -> Tuple[str, dict]:
    shift = next(s for s in entries if s.name == condition.label)
    return shift.name, shift.dataset


def _attack_run(condition: AttackCondition, context: BatchContext) -> Any:
    from ..attack_run import AttackRun  # torch autograd; loaded when an attack runs
    return AttackRun(condition, context.model, context.task, context.ignore_index,
                     context.num_classes)


#: Every kind of condition, in the order a run evaluates them (the built-in ones; a
#: registered kind joins the end: :func:`register_condition_kind`).
CONDITION_KINDS: List[ConditionKind] = [
    ConditionKind('corruption', Condition, 'corruptions', None),
    ConditionKind('shift', ShiftCondition, 'shifts', 'shifts', parse_shifts,
                  shift_conditions, shifts_to_dict, _shift_block, own_data=_shift_data),
    ConditionKind('attack', AttackCondition, 'attacks', 'attacks', parse_attacks,
                  attack_conditions, attacks_to_dict, _attack_block, batches=_attack_run,
                  check_task=check_attack_task),
]
_BY_TYPE: Dict[type, ConditionKind] = {k.condition_type: k for k in CONDITION_KINDS}
_BUILT_IN = tuple(k.name for k in CONDITION_KINDS)


def register_condition_kind(kind: ConditionKind, block: ResultBlock) -> None:
    """Add a kind of condition and the result block that reports it: its option is then
    taken by ``RobustnessTestLoop``, ``RobustnessValLoop`` and ``RobustnessSweep`` (in a
    config, as ``shifts`` and ``attacks`` are), its conditions are evaluated, recorded,
    resumed, sharded, merged, reported and read back like every other kind's.

    Raises:
        SweepError: a kind or block of that name, condition class, option or key prefix
            exists, or the kind and the block do not agree (name, prefix), or a part is
            missing.
    """
    missing = [n for n in ('parse', 'conditions', 'to_dict', 'build_block')
               if getattr(kind, n) is None]
    if missing:
        raise SweepError(f'condition kind {kind.name!r} needs {", ".join(missing)}')
    if kind.block != block.name or kind.prefix != block.prefix or not kind.prefix:
        raise SweepError(f'condition kind {kind.name!r} (block {kind.block!r}, prefix '
                         f'{kind.prefix!r}) and result block {block.name!r} (prefix '
                         f'{block.prefix!r}) must agree, with a prefix')
    for other in CONDITION_KINDS:
        clash = [what for what, a, b in (
            ('name', kind.name, other.name), ('condition class', kind.condition_type,
                                               other.condition_type),
            ('option', kind.option, other.option), ('key prefix', kind.prefix, other.prefix))
                 if a == b]
        if clash:
            raise SweepError(f'condition kind {kind.name!r}: its {clash[0]} is kind '
                             f'{other.name!r}\'s')
    try:
        register_result_block(block)
    except ValueError as error:
        raise SweepError(str(error)) from None
    CONDITION_KINDS.append(kind)
    _BY_TYPE[kind.condition_type] = kind


def unregister_condition_kind(name: str) -> None:
    """Remove a registered kind and its result block (the built-in ones stay).

    Raises:
        SweepError: a built-in kind, or no kind of that name.
    """
    if name in _BUILT_IN:
        raise SweepError(f'condition kind {name!r} is built in')
    kind = get_condition_kind(name)
    CONDITION_KINDS.remove(kind)
    del _BY_TYPE[kind.condition_type]
    unregister_result_block(kind.block)


def get_condition_kind(name: str) -> ConditionKind:
    """The kind called ``name``.

    Raises:
        SweepError: no such kind (the kinds are named).
    """
    for kind in CONDITION_KINDS:
        if kind.name == name:
            return kind
    raise SweepError(f'no condition kind {name!r}; the kinds are '
                     f'{[k.name for k in CONDITION_KINDS]}')


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


def blocks_of(by_block: Mapping[str, Records], clean: Mapping[str, Any], clean_stats: Any,
              stats: Mapping[Any, Any], metric: str, intervals: Mapping[str, Any]
              ) -> Dict[str, dict]:
    """Every result block the records have (``by_block``: block name -> its conditions'
    records, as :func:`records_by_block` splits them), each built by its kind's
    ``build_block`` from the clean condition's record and per-image statistics, the
    statistics of the block's conditions (None where a record has none: no intervals),
    the task metric's display name and the run's interval settings (``resamples``,
    ``level``, ``seed``); built the same way by the test loop, the validation loop and
    the merge of shards."""
    builders = {k.block: k.build_block for k in CONDITION_KINDS if k.block}
    return {name: builders[name](clean, clean_stats, records, stats, metric, intervals)
            for name, records in by_block.items() if records}


def check_task(options: Any, task: str) -> None:
    """Refuse what the run's options declare that ``task`` cannot evaluate (each kind's
    ``check_task``: attacks without an objective for the task, ...).

    Raises:
        SweepError: naming the entry and what the task takes.
    """
    for kind in CONDITION_KINDS:
        if kind.check_task is not None:
            kind.check_task(options.entries(kind), task)


def kinds_markdown() -> str:
    """The kinds of :data:`CONDITION_KINDS` and what each goes through, as the Markdown
    table of ``docs/robustness_loops.md`` (a test checks the page holds it)."""
    rows = ['| kind | declared by | key | images | each batch | fan-out | reported in | '
            'paired tests |', '|---|---|---|---|---|---|---|---|']
    for kind in CONDITION_KINDS:
        corruption = kind.prefix is None
        key = f'`{kind.prefix}/<name>`' if kind.prefix else '`cloud@3`'
        images = 'its own test set' if kind.own_data is not None else \
            "its base condition's" if kind.transforms_batches else \
            'the test set (or the files of a released set)'
        batches = f'transformed (`{kind.record_field}` recorded)' \
            if kind.transforms_batches else 'as they come'
        fan_out = 'one pass for many' if corruption else 'one by one, after the passes'
        block = f'the `{kind.block}` block' if kind.block else 'the corruption table'
        paired = 'yes' if corruption else 'no (the corruption table only)'
        rows.append(f'| {kind.name} | `{kind.option}` | {key} | {images} | {batches} | '
                    f'{fan_out} | {block} | {paired} |')
    return '\n'.join(rows)
