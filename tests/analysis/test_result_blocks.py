"""The table of result blocks (shift sets, attacks): every block is written into
``results.json`` and the report, read back by ``read_results`` and turned into logger
keys by going over the one table."""
import json
import os.path as osp

import pytest

from reobench_mm.analysis import make_provenance, write_report
from reobench_mm.analysis.attack_table import attack_block, attack_metric_keys
from reobench_mm.analysis.result_blocks import (result_block_names, RESULT_BLOCKS,
                                                block_metric_keys, check_blocks,
                                                get_result_block)
from reobench_mm.analysis.results import ConditionResult
from reobench_mm.analysis.results_file import read_results
from reobench_mm.analysis.shift_table import shift_block, shift_metric_keys
from reobench_mm.evaluation.keys import ATTACK_PREFIX, SHIFT_PREFIX

RESULTS = {('clean', 0): ConditionResult(60.0), ('cloud', 3): ConditionResult(50.0),
           ('haze', 3): ConditionResult(55.0)}


def _blocks():
    shifts = shift_block([
        dict(name='vaihingen', shift_type='geographic', condition='clean',
             key='shift/vaihingen', value=41.5, images=4, stats=None),
        dict(name='vaihingen', shift_type='geographic', condition='cloud@3',
             key='shift/vaihingen/cloud@3', value=30.25, images=4, stats=None)],
        id_value=60.0, metric='mIoU')
    attacks = attack_block([
        dict(attack='pgd', type='pgd', eps='4', norm='linf', base='clean', key='adv/pgd_eps4',
             value=12.5, stats=None,
             record=dict(images=4, seconds=2.0, seconds_per_image=0.5,
                         peak_memory='process_rss_high_water', peak_memory_bytes=2 ** 30,
                         curve=dict(steps=[0, 1, 2], values=[60.0, 30.0, 12.5])))],
        clean_value=60.0, metric='mIoU')
    return dict(shifts=shifts, attacks=attacks)


def test_the_table_names_each_kind_once_with_the_shared_prefixes():
    assert result_block_names() == ('shifts', 'attacks')
    assert [b.prefix for b in RESULT_BLOCKS] == [SHIFT_PREFIX, ATTACK_PREFIX]
    assert get_result_block('attacks').plot_file == 'attack_curves.png'
    with pytest.raises(ValueError, match=r"no result block 'shift'; the blocks are "
                                         r"\['shifts', 'attacks'\]"):
        get_result_block('shift')


def test_blocks_are_checked_and_put_in_the_tables_order():
    blocks = _blocks()
    checked = check_blocks(dict(attacks=blocks['attacks'], shifts=blocks['shifts']))
    assert list(checked) == ['shifts', 'attacks']
    assert check_blocks(dict(shifts=None, attacks={})) == {}  # empty blocks: none
    with pytest.raises(ValueError, match=r"unknown result block\(s\) \['attack'\]"):
        check_blocks(dict(attack=blocks['attacks']))
    with pytest.raises(ValueError, match='the shifts block must be a mapping, got list'):
        check_blocks(dict(shifts=[1]))


def test_every_block_is_written_read_back_and_logged(tmp_path):
    """Each block survives results.json and read_results as it was written (the attacks'
    block included), the report has each section and plot, and the logger keys are
    each block's own."""
    blocks = _blocks()
    out = str(tmp_path / 'run')
    report = write_report(out, RESULTS, task='segmentation', blocks=blocks,
                          provenance=make_provenance(model='m'))
    with open(osp.join(out, 'results.json'), encoding='utf-8') as handle:
        numbers = json.load(handle)['numbers']
    assert [k for k in numbers if k in result_block_names()] == ['shifts', 'attacks']
    read = read_results(osp.join(out, 'results.json')).summary
    assert list(read.blocks) == ['shifts', 'attacks']
    for name in result_block_names():
        assert read.blocks[name] == json.loads(json.dumps(blocks[name])), name
    text = open(report.files['report.md'], encoding='utf-8').read()
    assert '## Real distribution shifts' in text and '## Adversarial robustness' in text
    assert '| vaihingen | geographic | cloud@3 |' in text
    assert 'attack_curves.png' in report.files
    keys = block_metric_keys(read.blocks)
    assert keys == {**shift_metric_keys(blocks['shifts']),
                    **attack_metric_keys(blocks['attacks'])}
    assert 'shift/vaihingen/mIoU' in keys and any(k.startswith('adv/') for k in keys)


def test_a_summary_without_blocks_writes_none(tmp_path):
    out = str(tmp_path / 'bare')
    write_report(out, RESULTS, task='segmentation', plots=False)
    with open(osp.join(out, 'results.json'), encoding='utf-8') as handle:
        numbers = json.load(handle)['numbers']
    assert not set(numbers) & set(result_block_names())
    summary = read_results(osp.join(out, 'results.json')).summary
    assert summary.blocks == {} and block_metric_keys(summary.blocks) == {}


def test_the_paired_tests_say_which_blocks_they_leave_out():
    """The paired tests of a comparison cover the corruption table: results files with
    blocks get one note naming them (none without)."""
    from types import SimpleNamespace

    from reobench_mm.analysis.paired_models import blocks_not_paired

    def model_set(*blocks):
        return SimpleNamespace(files=[SimpleNamespace(summary=SimpleNamespace(blocks=b))
                                      for b in blocks])

    assert blocks_not_paired(model_set({}, {})) is None
    assert blocks_not_paired(model_set({'attacks': {'attacks': []}}, {})) == (
        'paired tests: the corruption table only; the attacks block of the results files '
        'is not paired (compare its numbers in each report)')
    note = blocks_not_paired(model_set({'shifts': {'sets': []}}, {'attacks': {'x': 1}}))
    assert note.startswith('paired tests: the corruption table only; the shifts, attacks '
                           'blocks of the results files are not paired')
