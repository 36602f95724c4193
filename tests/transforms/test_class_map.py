"""Class maps between label sets: the checks and their messages, the mapping of label
maps (against a hand-computed confusion matrix) and of rotated boxes, the pipeline step
in mmseg's own pipeline, and the dataset wrapper in a real sweep against the same test
set relabelled on disk."""
import json
import os
import os.path as osp
import shutil

import cv2
import numpy as np
import pytest
import torch

import reobench_mm  # noqa: F401
from helpers import DET_DEMO_CONFIG, SEG_DEMO_CONFIG
from reobench_mm.structures.class_map import ClassMap
from reobench_mm.robustness.sweep import run_sweep
from reobench_mm.transforms.class_map import MapClasses
from sweep_helpers import sweep_options, untrained_checkpoint

SOURCE = ('road', 'path', 'forest', 'water', 'shadow')
TARGET = ('paved', 'vegetation', 'water')
MAPPING = {'road': 'paved', 'path': 'paved', 'forest': 'vegetation', 'water': 'water',
           'shadow': None}
POTSDAM = ('impervious_surface', 'building', 'low_vegetation', 'tree', 'car', 'clutter')


# ----------------------------------------------------------------------------- checks
@pytest.mark.parametrize('mapping,message', [
    ({k: v for k, v in MAPPING.items() if k != 'forest'},
     r"no entry for 'forest'.*one of \['paved', 'vegetation', 'water'\] or to None"),
    ([('road', 'paved'), ('path', 'paved'), ('path', 'water'), ('forest', 'vegetation'),
      ('water', 'water'), ('shadow', None)],
     r"two maps of 'path' disagree: 'paved' and 'water'"),
    (dict(MAPPING, raod='paved'), r"names 'raod', which is not a class of the test set "
                                  r"\(did you mean 'road'\?\)"),
    (dict(MAPPING, forest='vegetaton'), r"sends 'forest' to 'vegetaton', a class the model "
                                        r"does not have \(did you mean 'vegetation'\?\)"),
    ('road->paved', 'a class mapping is'),
])
def test_every_refusal_names_the_class(mapping, message):
    with pytest.raises(ValueError, match=message):
        ClassMap.create(SOURCE, TARGET, mapping)


def test_repeated_pairs_that_agree_are_accepted_and_described():
    pairs = list(MAPPING.items()) + [('road', 'paved')]
    class_map = ClassMap.create(SOURCE, TARGET + ('snow', ), pairs)
    assert class_map.as_dict() == MAPPING
    assert class_map.ignored == ('shadow', )
    assert class_map.unmapped_targets == ('snow', )
    assert class_map.describe() == ['paved <- road, path', 'vegetation <- forest',
                                    'water <- water', 'snow <- (none)', 'ignored: shadow']


# ----------------------------------------------------------------------------- label maps
def test_label_maps_against_a_hand_computed_confusion_matrix():
    rng = np.random.default_rng(0)
    source = rng.integers(0, 5, size=(64, 48)).astype(np.uint8)
    source[:3] = 255  # ignored already
    mapped = ClassMap.create(SOURCE, TARGET, MAPPING).map_seg(source, 255)
    assert mapped.dtype == np.uint8 and mapped.shape == source.shape
    # the confusion matrix source value x mapped value, by counting
    rows, columns = [0, 1, 2, 3, 4, 255], [0, 1, 2, 255]
    confusion = np.array([[np.sum((source == r) & (mapped == c)) for c in columns]
                          for r in rows])
    count = [int(np.sum(source == r)) for r in rows]
    # by hand: road, path -> paved (0); forest -> vegetation (1); water -> water (2);
    # shadow and the ignored pixels -> 255
    expected = np.array([[count[0], 0, 0, 0],
                         [count[1], 0, 0, 0],
                         [0, count[2], 0, 0],
                         [0, 0, count[3], 0],
                         [0, 0, 0, count[4]],
                         [0, 0, 0, count[5]]])
    np.testing.assert_array_equal(confusion, expected)


def test_a_label_value_without_a_class_is_named():
    class_map = ClassMap.create(SOURCE, TARGET, MAPPING)
    seg = np.zeros((4, 4), np.uint8)
    seg[2, 2] = 7
    with pytest.raises(ValueError, match=r'the label map of x\.png holds the label value 7, '
                                         r'which is no class of the test set'):
        class_map.map_seg(seg, 255, 'the label map of x.png')
    with pytest.raises(ValueError, match='instance label 9'):
        class_map.map_labels(np.array([0, 9]))


def test_an_ignore_index_that_does_not_fit_the_label_type_is_refused(demo_data):
    """ignore_index 300 on a uint8 label map wrapped to 44 (a silent wrong label); it is
    refused, and a uint16 map takes it."""
    class_map = ClassMap.create(SOURCE, TARGET, MAPPING)
    seg = np.zeros((4, 4), np.uint8)
    with pytest.raises(ValueError, match=r'the label map is uint8 \(values 0\.\.255\): '
                                         r'ignore_index 300 does not fit in it'):
        class_map.map_seg(seg, 300)
    wide = class_map.map_seg(seg.astype(np.uint16), 300)
    assert wide.dtype == np.uint16
    # the model's classes as one string are refused, not read letter by letter
    from reobench_mm.datasets.class_mapped import ClassMappedDataset
    from mmseg.datasets import PotsdamDataset
    inner = PotsdamDataset(data_root=osp.join(demo_data, 'potsdam'), pipeline=[],
                           data_prefix=dict(img_path='img_dir/val',
                                            seg_map_path='ann_dir/val'), lazy_init=True)
    with pytest.raises(ValueError, match="the target classes must be a non-empty list of "
                                         "class names, got 'car'"):
        ClassMappedDataset(inner, classes='car', mapping={})


def test_rotated_boxes_are_relabelled_and_ignored_ones_dropped():
    from mmrotate.structures.bbox import RotatedBoxes
    step = MapClasses(SOURCE, TARGET, MAPPING)
    boxes = torch.arange(25, dtype=torch.float32).reshape(5, 5)
    results = step({'img_path': 'a.png', 'gt_bboxes': RotatedBoxes(boxes),
                    'gt_bboxes_labels': np.array([4, 0, 2, 4, 1]),
                    'gt_ignore_flags': np.array([False, True, False, False, False])})
    np.testing.assert_array_equal(results['gt_bboxes_labels'], [0, 1, 0])
    np.testing.assert_array_equal(results['gt_ignore_flags'], [True, False, False])
    torch.testing.assert_close(results['gt_bboxes'].tensor, boxes[[1, 2, 4]])
    with pytest.raises(ValueError, match='put it after the LoadAnnotations step'):
        step({'img_path': 'a.png'})


def test_the_step_in_mmsegs_own_pipeline(tmp_path):
    from mmcv.transforms import Compose
    from mmengine.registry import init_default_scope
    init_default_scope('mmseg')
    image = np.zeros((8, 8, 3), np.uint8)
    label = np.tile(np.array([0, 1, 2, 3, 4, 255, 1, 0], np.uint8), (8, 1))
    cv2.imwrite(str(tmp_path / 'a.png'), image)
    cv2.imwrite(str(tmp_path / 'a_label.png'), label)
    pipeline = Compose([dict(type='LoadImageFromFile'), dict(type='LoadAnnotations'),
                        dict(type='reobench_mm.MapClasses', source_classes=SOURCE,
                             target_classes=TARGET, mapping=MAPPING),
                        dict(type='PackSegInputs')])
    packed = pipeline({'img_path': str(tmp_path / 'a.png'),
                       'seg_map_path': str(tmp_path / 'a_label.png'),
                       'reduce_zero_label': False, 'seg_fields': []})
    row = packed['data_samples'].gt_sem_seg.data[0, 0].tolist()
    assert row == [0, 0, 1, 2, 255, 255, 0, 0]


# ----------------------------------------------------------------------------- a sweep
def _mapped_options(data_root, mapping):
    options = sweep_options(data_root)[0]
    del options['test_dataloader.dataset.data_root']
    options['test_dataloader.dataset'] = dict(
        _delete_=True, type='reobench_mm.ClassMappedDataset', classes=POTSDAM, mapping=mapping,
        dataset=dict(type='PotsdamDataset', data_root=data_root,
                     data_prefix=dict(img_path='img_dir/val', seg_map_path='ann_dir/val'),
                     pipeline=[dict(type='LoadImageFromFile'), dict(type='LoadAnnotations'),
                               dict(type='PackSegInputs')]))
    return options


def _numbers(work_dir):
    with open(osp.join(work_dir, 'results.json')) as handle:
        rows = json.load(handle)['numbers']['conditions']
    return {r['condition']: (r['value'], r['per_class']) for r in rows}


@pytest.mark.slow
def test_a_mapped_test_set_equals_the_same_labels_written_to_disk(demo_data, tmp_path):
    """clutter ignored by the wrapper in the pipeline gives the numbers of the test set
    whose label files have clutter replaced by the ignored value."""
    data_root = osp.join(demo_data, 'potsdam')
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    # the reference: clutter (label 6 on disk) written as 0 (ignored: reduce_zero_label)
    relabelled = str(tmp_path / 'relabelled')
    shutil.copytree(data_root, relabelled)
    folder = osp.join(relabelled, 'ann_dir', 'val')
    clutter = 0
    for name in os.listdir(folder):
        label = cv2.imread(osp.join(folder, name), cv2.IMREAD_UNCHANGED)
        clutter += int((label == 6).sum())
        label[label == 6] = 0
        cv2.imwrite(osp.join(folder, name), label)
    assert clutter > 0
    common = dict(corruptions=['haze'], severities=[2], bootstrap=0, plots=False)
    run_sweep(SEG_DEMO_CONFIG, checkpoint, work_dir=str(tmp_path / 'reference'),
              cfg_options=sweep_options(relabelled)[0], **common)
    mapping = {name: (None if name == 'clutter' else name) for name in POTSDAM}
    run_sweep(SEG_DEMO_CONFIG, checkpoint, work_dir=str(tmp_path / 'mapped'),
              cfg_options=_mapped_options(data_root, mapping), **common)
    reference, mapped = _numbers(str(tmp_path / 'reference')), _numbers(str(tmp_path / 'mapped'))
    assert mapped == reference
    # the identity map gives the numbers of the plain test set
    run_sweep(SEG_DEMO_CONFIG, checkpoint, work_dir=str(tmp_path / 'plain'),
              cfg_options=sweep_options(data_root)[0], **common)
    run_sweep(SEG_DEMO_CONFIG, checkpoint, work_dir=str(tmp_path / 'identity'),
              cfg_options=_mapped_options(data_root, {n: n for n in POTSDAM}), **common)
    assert _numbers(str(tmp_path / 'identity')) == _numbers(str(tmp_path / 'plain'))
    assert mapped['clean'] != _numbers(str(tmp_path / 'plain'))['clean']


def _dior_dataset(data_root, mapping=None):
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    from reobench_mm.registry import DATASETS
    init_default_scope('mmrotate')
    inner = Config.fromfile(DET_DEMO_CONFIG).test_dataloader.dataset.to_dict()
    inner['data_root'] = data_root
    if mapping is None:
        return DATASETS.build(inner)
    classes = tuple(inner['metainfo']['classes'])
    return DATASETS.build(dict(type='reobench_mm.ClassMappedDataset', classes=classes,
                               mapping=mapping, dataset=inner))


def test_a_mapped_detection_set_equals_the_same_objects_removed_on_disk(demo_data, tmp_path):
    """DIOR-R with ship ignored by the wrapper: every sample's packed boxes and labels are
    those of the same test set with the ship objects deleted from its XML files."""
    import xml.etree.ElementTree as ET
    data_root = osp.join(demo_data, 'dior')
    relabelled = str(tmp_path / 'dior')
    shutil.copytree(data_root, relabelled)
    folder = osp.join(relabelled, 'Annotations', 'Oriented Bounding Boxes')
    removed = 0
    for name in os.listdir(folder):
        tree = ET.parse(osp.join(folder, name))
        for item in tree.getroot().findall('object'):
            if item.findtext('name') == 'ship':
                tree.getroot().remove(item)
                removed += 1
        tree.write(osp.join(folder, name))
    reference = _dior_dataset(relabelled)
    classes = reference.metainfo['classes']
    assert 'ship' in classes
    mapped = _dior_dataset(data_root, {c: (None if c == 'ship' else c) for c in classes})
    assert tuple(mapped.metainfo['classes']) == tuple(classes)
    assert len(mapped) == len(reference) and removed > 0
    kept = 0
    for index in range(len(reference)):
        a, b = mapped[index]['data_samples'], reference[index]['data_samples']
        torch.testing.assert_close(a.gt_instances.bboxes.tensor, b.gt_instances.bboxes.tensor)
        torch.testing.assert_close(a.gt_instances.labels, b.gt_instances.labels)
        kept += len(b.gt_instances.labels)
    assert kept > 0
