"""The shipped ID -> OOD pair configs (configs/shifts/): both sides scored by the same label
rules, the corruption step placed after the label rules."""
import glob
import os.path as osp

from mmengine.config import Config

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT
from reobench_corruptions.condition import Condition
from reobench_mm.datasets.label_rules import LabelRules
from reobench_mm.transforms.placement import place_condition, transform_name

PAIRS = sorted(glob.glob(osp.join(PROJECT_ROOT, 'configs', 'shifts', '*.py')))


def _names(pipeline):
    return [transform_name(t) for t in pipeline]


def test_the_vaihingen_pair_scores_potsdam_as_isprs_eroded_reference():
    assert [osp.basename(p) for p in PAIRS] == [
        'upernet_rvsa-b_sfp_1xb8-12e_potsdam-512x512_vaihingen.py']
    cfg = Config.fromfile(PAIRS[0])
    test = cfg.test_dataloader.dataset
    shift = cfg.test_cfg.shifts.vaihingen
    assert cfg.test_cfg.type == 'RobustnessTestLoop' and shift.shift_type == 'geographic'
    # the test set: full boundaries stored, eroded by 3 px in its pipeline; the shift set:
    # stored eroded by 3 px, the same steps without the erosion
    assert LabelRules.from_config(test.metainfo.label_rules, 't').boundaries == 'full'
    stored = LabelRules.from_config(shift.dataset.metainfo.label_rules, 's')
    assert (stored.boundaries, stored.erosion_radius, stored.ignore_index) == ('eroded', 3, 255)
    assert _names(test.pipeline) == ['LoadImageFromFile', 'LoadAnnotations',
                                     'ErodeLabelBoundaries', 'Resize', 'PackSegInputs']
    assert test.pipeline[2].radius == 3 and test.pipeline[2].ignore_index == 255
    assert _names(shift.dataset.pipeline) == ['LoadImageFromFile', 'LoadAnnotations',
                                              'Resize', 'PackSegInputs']
    # a geometric corruption moves labels already eroded (the reference, then the move)
    placed = cfg.test_dataloader.to_dict()
    place_condition(placed, Condition('rotate', 3), 'mmseg', geometric=True, override=True,
                    ignore_index=255)
    assert _names(placed['dataset']['pipeline'])[2:4] == ['ErodeLabelBoundaries',
                                                          'ApplyCorruption']
