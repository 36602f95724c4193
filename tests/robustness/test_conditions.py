"""The table of condition kinds (``robustness/conditions/kinds.py``): one kind per condition
class, consistent with the table of result blocks, and the helpers the loops ask instead
of testing a condition's class."""
import os.path as osp

import pytest

from reobench_corruptions.condition import Condition
from reobench_mm.analysis.result_blocks import RESULT_BLOCKS
from reobench_mm.robustness.conditions.attacks import parse_attacks
from reobench_mm.robustness.conditions.kinds import (CONDITION_KINDS, coerce_condition,
                                               is_corruption, kind_of, kinds_markdown,
                                               records_by_block)
from helpers import PROJECT_ROOT
from reobench_mm.robustness.options import RobustnessOptions
from reobench_mm.robustness.plan import SweepPlan
from reobench_mm.robustness.conditions.shifts import parse_shifts

CLEAN = Condition()
SHIFTS = parse_shifts(dict(other=dict(shift_type='sensor', dataset=dict(type='X'),
                                      corruptions=['haze'], severities=[3])))
ATTACKS = parse_attacks(dict(pgd=dict(eps=[4], steps=2)))


def _conditions():
    shifted = [c for s in SHIFTS for c in s.conditions(CLEAN)]
    attacked = [c for e in ATTACKS for c in e.conditions(CLEAN)]
    return [CLEAN, Condition('cloud', 3)], shifted, attacked


def test_each_kind_once_and_its_block_in_the_result_blocks():
    assert [k.name for k in CONDITION_KINDS] == ['corruption', 'shift', 'attack']
    assert len({k.condition_type for k in CONDITION_KINDS}) == len(CONDITION_KINDS)
    blocks = {b.name: b for b in RESULT_BLOCKS}
    for kind in CONDITION_KINDS:
        if kind.block is None:
            assert kind.prefix is None  # the corruptions: the run's own table
            continue
        assert blocks[kind.block].prefix == kind.prefix, kind.name
    # every result block reports one kind
    assert sorted(blocks) == sorted(k.block for k in CONDITION_KINDS if k.block)
    # every kind is declared by an option of the loop
    options = set(RobustnessOptions.__dataclass_fields__)
    assert {k.option for k in CONDITION_KINDS} <= options


def test_kind_of_each_condition_and_refusal_of_anything_else():
    corrupted, shifted, attacked = _conditions()
    assert {kind_of(c).name for c in corrupted} == {'corruption'}
    assert {kind_of(c).name for c in shifted} == {'shift'}
    assert {kind_of(c).name for c in attacked} == {'attack'}
    assert [is_corruption(c) for c in corrupted + shifted + attacked] == \
        [True, True] + [False] * (len(shifted) + len(attacked))
    # a condition's key starts with its kind's prefix
    for condition in shifted + attacked:
        assert condition.key.startswith(kind_of(condition).prefix + '/'), condition.key
    with pytest.raises(TypeError, match=r"\('cloud', 3\) is not a condition of a robustness "
                                        r"run; the kinds are \['corruption', 'shift', "
                                        r"'attack'\]"):
        kind_of(('cloud', 3))


def test_records_split_into_the_table_and_the_blocks_in_order():
    corrupted, shifted, attacked = _conditions()
    records = {c: c.key for c in [attacked[0], corrupted[0], shifted[1], corrupted[1],
                                  shifted[0]]}
    table, blocks = records_by_block(records)
    assert list(table) == corrupted
    assert list(blocks) == ['shifts', 'attacks']
    assert list(blocks['shifts']) == [shifted[1], shifted[0]]  # the order given
    assert list(blocks['attacks']) == attacked
    assert records_by_block({CLEAN: 1}) == ({CLEAN: 1}, {'shifts': {}, 'attacks': {}})


def test_coerce_keeps_prefixed_conditions_and_reads_pairs_and_keys():
    plan = SweepPlan.create(['cloud'], [3], seed=2)
    _, shifted, attacked = _conditions()
    assert coerce_condition(plan, shifted[0]) is shifted[0]
    assert coerce_condition(plan, attacked[0]) is attacked[0]
    pair = coerce_condition(plan, ('cloud', 3))
    assert pair == Condition('cloud', 3, seed=2) and pair.seed == 2
    assert coerce_condition(plan, 'cloud@3').seed == 2


def test_the_manual_holds_the_table_of_kinds_as_the_code_has_it():
    with open(osp.join(PROJECT_ROOT, 'docs', 'robustness_loops.md'), encoding='utf-8') as f:
        page = f.read()
    table = kinds_markdown()
    assert table in page, 'docs/robustness_loops.md: paste kinds_markdown() again'
    assert table.count('\n') == len(CONDITION_KINDS) + 1
