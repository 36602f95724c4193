"""Label rules declared per test set: parsing, the check against what the pipeline does,
and the comparison of a shift set with the test set (scored boundaries must agree; how
labels are stored may differ)."""
import os

import cv2
import numpy as np
import pytest
from mmengine.registry import DefaultScope

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.datasets.label_rules import (LabelRules, check_label_rules,
                                              declared_label_rules)
from reobench_mm.registry import DATASETS

FULL = dict(boundaries='full', ignore_index=255, reduce_zero_label=True, nodata=0)
ERODED = dict(FULL, boundaries='eroded', erosion_radius=3)
EROSION = dict(type='ErodeLabelBoundaries', radius=3, ignore_index=255)


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    folder = tmp_path_factory.mktemp('isprs')
    for sub in ('img', 'ann'):
        os.makedirs(folder / sub)
    cv2.imwrite(str(folder / 'img' / 'a.png'), np.zeros((16, 16, 3), np.uint8))
    cv2.imwrite(str(folder / 'ann' / 'a.png'), np.ones((16, 16), np.uint8))
    return str(folder)


def _dataset(root, rules, reduce=True, erosion=None):
    pipeline = [dict(type='LoadAnnotations', reduce_zero_label=reduce)]
    if erosion is not None:
        pipeline.append(erosion)
    cfg = dict(type='ISPRSDataset', data_root=root, pipeline=pipeline,
               data_prefix=dict(img_path='img', seg_map_path='ann'))
    if rules is not None:
        cfg['metainfo'] = dict(label_rules=rules)
    with DefaultScope.overwrite_default_scope('mmseg'):
        return DATASETS.build(cfg)


@pytest.mark.parametrize('rules, message', [
    ([1], 'label_rules must be a dict'),
    (dict(FULL, eroded=True), r"unknown label rule\(s\) \['eroded'\]; valid"),
    (dict(FULL, boundaries='thin'), "boundaries must be one of \\['full', 'eroded'\\]"),
    (dict(FULL, boundaries='eroded'), 'eroded boundaries need erosion_radius'),
    (dict(FULL, erosion_radius=3), 'erosion_radius goes with'),
    (dict(FULL, ignore_index=None), 'ignore_index must be the label of its ignored'),
    (dict(FULL, reduce_zero_label='yes'), 'reduce_zero_label must be True or False'),
    (dict(FULL, ignore_index=5), 'with reduce_zero_label the stored 0 is loaded as 255'),
    (dict(FULL, reduce_zero_label=False, ignore_index=5, nodata=0),
     'its no-data label 0 is loaded as a class and would be scored'),
])
def test_bad_rules(rules, message):
    with pytest.raises(ValueError, match=message):
        LabelRules.from_config(rules, 'the set X')


def test_rules_that_say_otherwise_than_the_pipeline(root):
    assert declared_label_rules(_dataset(root, FULL), 'x') == LabelRules.from_config(FULL, 'x')
    assert declared_label_rules(_dataset(root, None), 'x') is None
    with pytest.raises(ValueError, match='its label rules say reduce_zero_label=True, its '
                       'pipeline loads labels with reduce_zero_label=False'):
        declared_label_rules(_dataset(root, FULL, reduce=False), 'x')
    with pytest.raises(ValueError, match='its ErodeLabelBoundaries writes label 0, its '
                       'ignored label is 255'):
        declared_label_rules(_dataset(root, FULL, erosion=dict(EROSION, ignore_index=0)), 'x')


def test_eroded_against_full_is_refused_with_the_way_to_reconcile(root):
    test, shift = _dataset(root, FULL), _dataset(root, ERODED)
    with pytest.raises(ValueError) as error:
        check_label_rules(test, shift, 255, "shift set 'vaihingen'")
    assert str(error.value) == (
        "shift set 'vaihingen': it is scored with boundaries eroded by 3 px, the test set "
        "with full boundaries; score the test set alike: add dict(type='ErodeLabelBoundaries'"
        ", radius=3, ignore_index=255) to its pipeline after LoadAnnotations, or give the "
        'shift set full-boundary labels')
    # the other way round: the step goes into the shift set's pipeline
    with pytest.raises(ValueError, match="to the shift set's pipeline"):
        check_label_rules(shift, test, 255, 'y')
    with pytest.raises(ValueError, match='erode both by the same radius'):
        check_label_rules(_dataset(root, dict(ERODED, erosion_radius=2)), shift, 255, 'y')


def test_reconciled_by_eroding_the_test_set(root):
    test = _dataset(root, FULL, erosion=EROSION)
    assert check_label_rules(test, _dataset(root, ERODED), 255, 'y') == (None, 3)
    assert check_label_rules(_dataset(root, FULL), _dataset(root, FULL), 255, 'y') == \
        (None, None)
    with pytest.raises(ValueError, match="erodes them again .*without that step"):
        check_label_rules(test, _dataset(root, ERODED, erosion=EROSION), 255, 'y')


def test_stored_conventions_may_differ_the_ignored_label_may_not(root):
    stored_plainly = dict(FULL, reduce_zero_label=False, nodata=255)
    assert check_label_rules(_dataset(root, FULL), _dataset(root, stored_plainly,
                                                            reduce=False), 255, 'y')[0] is None
    with pytest.raises(ValueError, match='its ignored pixels have label 255, the evaluator '
                       'ignores 5: they would be scored'):
        check_label_rules(_dataset(root, FULL), _dataset(root, FULL), 5, 'y')


def test_one_side_without_rules_is_a_note(root):
    note, radius = check_label_rules(_dataset(root, FULL), _dataset(root, None), 255, 'y')
    assert note.startswith('the test set states label rules') and radius is None
    assert check_label_rules(_dataset(root, None), _dataset(root, None), 255, 'y') == \
        (None, None)
