"""Where the corruption step runs, and that a wrong place is an error, never a silently
different number: the placement rules, ApplyCorruption's run-time checks, the toolboxes'
own test pipelines (in their own step order, from their installed packages), and
CorruptionTestLoop through every test entry point (the toolboxes' own tools/test.py
included)."""
import json
import os.path as osp
import re
import subprocess
import sys
import warnings

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DATASETS, DefaultScope

import reobench_mm  # noqa: F401  (registration)
from helpers import (PROJECT_ROOT, SEG_DEMO_CONFIG, call_tool, run_tools_together,
                     toolbox_file)
from reobench_mm.utils.config import get_test_pipelines, insert_corruption, prepare_test_config
from reobench_mm.transforms import ApplyCorruption
from reobench_mm.transforms.placement import (Placement, corruption_position,
                                              is_valid_position, label_step_position,
                                              place_corruption)

SITE = osp.dirname(osp.dirname(reobench_mm.__file__))
TEST_TOOL = osp.join(PROJECT_ROOT, 'tools', 'test.py')



def _types(pipeline):
    return [step['type'] if isinstance(step, dict) else type(step).__name__
            for step in pipeline]


# ----------------------------------------------------------------------------- the rules

STOCK_SEG = ['LoadImageFromFile', 'Resize', 'LoadAnnotations', 'PackSegInputs']
STOCK_ROT = ['LoadImageFromFile', 'Resize', 'LoadAnnotations', 'ConvertBoxType',
             'PackDetInputs']
PROJECT_ROT = ['LoadImageFromFile', 'LoadAnnotations', 'ConvertBoxType', 'Resize',
               'PackDetInputs']


@pytest.mark.parametrize('names,image,labels', [
    (STOCK_SEG, 1, 3),  # the image before Resize; geometric labels after their loading
    (STOCK_ROT, 1, 4),
    (PROJECT_ROT, 3, None),  # annotations first: the image step moves them
    (['LoadImageFromFile', 'Resize', 'PackDetInputs'], 1, None),  # unlabelled test images
    (['LoadImageFromNDArray', 'PackSegInputs'], 1, None),
])
def test_position_rules(names, image, labels):
    assert corruption_position(names) == image
    assert label_step_position(names) == labels
    assert is_valid_position(names, image, geometric=False)
    assert is_valid_position(names, image, geometric=True)
    with pytest.raises(ValueError, match='no image-loading step'):
        corruption_position(['Resize', 'PackSegInputs'])


def _label_step():
    return dict(type='ApplyCorruptionToLabels')


def test_misplaced_steps_are_moved_and_described():
    # in a stock pipeline the image part goes right after image loading, and the label
    # part of a geometric corruption after the annotation loading (after Resize)
    pipeline = [dict(type=n) for n in STOCK_SEG]
    pipeline.insert(3, dict(type='ApplyCorruption', corruption='rotate', severity=5))
    step, placement = place_corruption(pipeline, True, dict, make_label_step=_label_step)
    assert _types(pipeline) == ['LoadImageFromFile', 'ApplyCorruption', 'Resize',
                                'LoadAnnotations', 'ApplyCorruptionToLabels', 'PackSegInputs']
    assert step['corruption'] == 'rotate' and step['labels_later'] is True
    assert placement.moved_from == 3 and placement.label_index == 4
    text = placement.describe()
    assert 'after LoadImageFromFile, before Resize (step 2 of 6)' in text
    assert 'moved from step 4' in text
    assert 'moved by ApplyCorruptionToLabels after LoadAnnotations (step 5)' in text
    # placed again: nothing moves, the one label step stays
    again = list(pipeline)
    _, placement = place_corruption(pipeline, True, dict, make_label_step=_label_step)
    assert pipeline == again and placement.moved_from is None
    # in this project's order (annotations first) the image step moves the labels itself
    pipeline = [dict(type=n) for n in PROJECT_ROT]
    step, placement = place_corruption(pipeline, True, lambda: dict(type='ApplyCorruption'),
                                       make_label_step=_label_step)
    assert _types(pipeline) == ['LoadImageFromFile', 'LoadAnnotations', 'ConvertBoxType',
                                'ApplyCorruption', 'Resize', 'PackDetInputs']
    assert 'labels_later' not in step and placement.label_index is None
    # a pixel corruption after Resize goes back in front of it
    pipeline = [dict(type=n) for n in STOCK_SEG]
    pipeline.insert(3, dict(type='ApplyCorruption'))
    _, placement = place_corruption(pipeline, False, dict)
    assert _types(pipeline)[1] == 'ApplyCorruption' and placement.moved_from == 3
    # at a right place: left alone
    before = list(pipeline)
    _, placement = place_corruption(pipeline, False, dict)
    assert pipeline == before and placement == Placement(1, tuple(_types(pipeline)))
    # without moving (a clean run): left where it is
    pipeline = [dict(type=n) for n in STOCK_SEG] + [dict(type='ApplyCorruption')]
    _, placement = place_corruption(pipeline, True, dict, move_misplaced=False)
    assert _types(pipeline)[-1] == 'ApplyCorruption' and placement.moved_from is None
    with pytest.raises(ValueError, match='2 ApplyCorruption steps'):
        place_corruption([dict(type='LoadImageFromFile'), dict(type='ApplyCorruption'),
                          dict(type='ApplyCorruption')], True, dict)


# ----------------------------------------------------------------------------- run time

def _sample(**extra):
    image = np.random.default_rng(0).integers(0, 256, (32, 48, 3), dtype=np.uint8)
    return dict(img=image, img_path='/data/tile_0.png', ori_shape=(32, 48), **extra)


def test_geometric_corruption_before_annotation_loading_is_refused():
    step = ApplyCorruption('rotate', 5)
    for pending in (dict(seg_map_path='/data/ann_0.png'),
                    dict(instances=[dict(bbox=[0, 0, 4, 4], bbox_label=0)])):
        with pytest.raises(RuntimeError, match='before the annotations are loaded.*'
                           'after LoadAnnotations'):
            step(_sample(**pending))
    # loaded: fine; a pixel corruption does not need the labels
    step(_sample(seg_map_path='/data/ann_0.png', gt_seg_map=np.zeros((32, 48), np.uint8)))
    ApplyCorruption('haze', 5)(_sample(seg_map_path='/data/ann_0.png'))
    # an image without annotations to load (inference, unlabelled test sets): fine
    step(_sample(instances=[]))
    with pytest.raises(RuntimeError, match='cannot move'):
        step(_sample(gt_masks=object()))


def test_the_label_part_moves_labels_loaded_later_as_one_step_would():
    """ApplyCorruption(labels_later=True) then ApplyCorruptionToLabels (the labels loaded
    between them, at the original size): the same image and labels as one step on a sample
    whose labels were loaded first; a label map resized in between is refused."""
    from reobench_mm.transforms import ApplyCorruptionToLabels
    labels = np.random.default_rng(1).integers(0, 6, (32, 48), dtype=np.uint8)
    for name, severity in (('rotate', 3), ('scale', 5), ('translate', 4)):
        one = ApplyCorruption(name, severity, ignore_index=5)(
            _sample(gt_seg_map=labels.copy(), seg_fields=['gt_seg_map']))
        first = ApplyCorruption(name, severity, ignore_index=5, labels_later=True)(
            _sample(seg_map_path='/data/ann_0.png'))
        assert 'corruption_geometry' in first
        first.update(gt_seg_map=labels.copy(), seg_fields=['gt_seg_map'])  # loaded now
        two = ApplyCorruptionToLabels()(first)
        assert 'corruption_geometry' not in two
        np.testing.assert_array_equal(two['img'], one['img'])
        np.testing.assert_array_equal(two['gt_seg_map'], one['gt_seg_map'])
        assert (two['gt_seg_map'] == 5).any()  # the padding is the ignored label
    # nothing recorded (clean, pixel corruptions): the label part does nothing
    untouched = ApplyCorruptionToLabels()(dict(gt_seg_map=labels))
    assert untouched['gt_seg_map'] is labels
    first = ApplyCorruption('rotate', 3, labels_later=True)(_sample())
    first['gt_seg_map'] = np.zeros((64, 96), np.uint8)
    with pytest.raises(RuntimeError, match='a step between resized the labels'):
        ApplyCorruptionToLabels()(first)


def test_corruption_of_a_resized_image_is_refused():
    resized = _sample()
    resized['ori_shape'] = (64, 96)
    rescaled = _sample(scale_factor=(0.5, 0.5))
    for results in (resized, rescaled):
        for name in ('gaussian_blur', 'rotate'):
            with pytest.raises(RuntimeError, match='resized, cropped or padded.*'
                               'allow_resized=True'):
                ApplyCorruption(name, 3)(dict(results))
    # a resize that kept the size (REOBench's test images have the test size): fine
    ApplyCorruption('gaussian_blur', 3)(_sample(scale_factor=(1.0, 1.0)))
    # on purpose: one warning per transform, then silence
    step = ApplyCorruption('gaussian_blur', 3, allow_resized=True)
    with pytest.warns(UserWarning, match='corrupts resized images'):
        step(dict(resized))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        out = step(dict(resized))
    assert out['corruption'] == 'gaussian_blur'
    # clean runs never complain
    assert ApplyCorruption('clean', 0)(dict(resized))['corruption'] == 'clean'


def test_samples_need_a_key_and_settings_are_checked_at_once():
    keyless = _sample()
    del keyless['img_path']
    with pytest.raises(RuntimeError, match='neither img_path nor sample_idx'):
        ApplyCorruption('gaussian_noise', 1)(keyless)
    ApplyCorruption('gaussian_noise', 1)(dict(keyless, sample_idx=3))
    for options, message in ((dict(seed='abc'), 'seed'), (dict(seed=1.7), 'seed'),
                             (dict(seed=True), 'seed'), (dict(seed=-1), 'seed'),
                             (dict(max_value=0), 'max_value'),
                             (dict(ignore_index='255'), 'ignore_index'),
                             (dict(allow_resized='yes'), 'allow_resized'),
                             (dict(reencode_jpeg_quality=7.5), 'reencode_jpeg_quality')):
        with pytest.raises(ValueError, match=message):
            ApplyCorruption('gaussian_noise', 1, **options)
    step = ApplyCorruption('gaussian_noise', 1)
    with pytest.raises(ValueError, match='seed'):
        step.set_condition('gaussian_noise', 1, seed='1')


# ----------------------------------------------------------------------------- stock configs

def _stock_dataset(tmp_path, base: str, scope: str, data_root: str, edit=None):
    """The test dataset of a toolbox's own dataset config (its own step order), pointed
    at the generated data; ``edit(cfg)`` may change the config before it is built."""
    path = tmp_path / f'{scope}_{osp.basename(base)}'
    path.write_text(f"_base_ = ['{base}']\ndefault_scope = '{scope}'\n")
    cfg = Config.fromfile(str(path))
    cfg.test_dataloader.dataset.data_root = data_root
    if edit is not None:
        edit(cfg)
    return cfg


def _build(cfg, scope):
    with DefaultScope.overwrite_default_scope(scope):
        return DATASETS.build(cfg.test_dataloader.dataset)


def _set_resize(cfg, scale):
    for _, pipeline in get_test_pipelines(cfg):
        for step in pipeline:
            if step['type'].endswith('Resize'):
                step['scale'] = scale


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_stock_mmseg_pipeline_never_gives_a_silent_wrong_number(demo_data, tmp_path):
    root = osp.join(demo_data, 'potsdam')  # 256x256 tiles; mmseg's pipeline resizes to 512
    base = 'mmseg::_base_/datasets/potsdam.py'

    # the natural place, right after LoadImageFromFile: rotate would move the image only
    naive = _stock_dataset(tmp_path, base, 'mmseg', root)
    naive.test_dataloader.dataset.pipeline.insert(
        1, dict(type='ApplyCorruption', corruption='rotate', severity=5))
    with pytest.raises(RuntimeError, match='before the annotations are loaded'):
        _build(naive, 'mmseg')[0]

    # placed by the package: the image before mmseg's Resize (to 512), the labels after
    # their loading, both at the original size; the labels are scored at that size
    samples = {}
    for name, severity in (('clean', 0), ('rotate', 5)):
        cfg = _stock_dataset(tmp_path, base, 'mmseg', root)
        insert_corruption(cfg, name, severity)
        if name == 'rotate':
            assert _types(cfg.test_dataloader.dataset.pipeline) == [
                'LoadImageFromFile', 'ApplyCorruption', 'Resize', 'LoadAnnotations',
                'ApplyCorruptionToLabels', 'PackSegInputs']
        samples[name] = _build(cfg, 'mmseg')[0]
    clean, moved = samples['clean'], samples['rotate']
    assert tuple(moved['inputs'].shape[1:]) == (512, 512)
    labels = moved['data_samples'].gt_sem_seg.data[0].numpy()
    assert labels.shape == (256, 256)
    np.testing.assert_array_equal(  # an independent rotation of the original-size labels
        labels[1:], np.rot90(clean['data_samples'].gt_sem_seg.data[0].numpy())[:-1])

    # a pixel corruption goes before Resize and works whatever the resize
    cfg = _stock_dataset(tmp_path, base, 'mmseg', root)
    insert_corruption(cfg, 'haze', 3)
    sample = _build(cfg, 'mmseg')[0]
    assert sample['data_samples'].metainfo['corruption'] == 'haze'
    assert tuple(sample['inputs'].shape[1:]) == (512, 512)

    # with a resize that keeps the tiles (REOBench's test data has the test size), the
    # geometric corruption moves the labels exactly with the image: severity 5 of rotate
    # is 90 degrees about OpenCV's pixel (W/2, H/2) (as the authors' generator turns), i.e.
    # numpy's rot90 shifted down by one row (the first row is the reflected border)
    def keep_size(cfg):
        _set_resize(cfg, (256, 256))
    for name, severity in (('clean', 0), ('rotate', 5)):
        cfg = _stock_dataset(tmp_path, base, 'mmseg', root, keep_size)
        insert_corruption(cfg, name, severity)
        samples[name] = _build(cfg, 'mmseg')[0]
    clean, moved = samples['clean'], samples['rotate']
    assert moved['data_samples'].metainfo['severity'] == 5
    np.testing.assert_array_equal(
        moved['data_samples'].gt_sem_seg.data[0].numpy()[1:],
        np.rot90(clean['data_samples'].gt_sem_seg.data[0].numpy())[:-1])
    np.testing.assert_array_equal(moved['inputs'].numpy()[:, 1:],
                                  np.rot90(clean['inputs'].numpy(), axes=(1, 2))[:, :-1])


def test_stock_mmrotate_pipeline_moves_the_boxes(demo_data, tmp_path):
    root = osp.join(demo_data, 'dior')
    base = 'mmrotate::_base_/datasets/dior.py'

    def to_demo(cfg):
        _set_resize(cfg, (256, 256))
        dataset = cfg.test_dataloader.dataset
        dataset.metainfo = dict(classes=('airplane', 'ship', 'storagetank', 'vehicle'))
        dataset.ann_file = 'ImageSets/Main/test.txt'
        dataset.data_prefix = dict(img_path='JPEGImages-test')

    naive = _stock_dataset(tmp_path, base, 'mmrotate', root, to_demo)
    naive.test_dataloader.dataset.pipeline.insert(
        1, dict(type='ApplyCorruption', corruption='rotate', severity=5))
    with pytest.raises(RuntimeError, match='instances but no gt_bboxes'):
        _build(naive, 'mmrotate')[0]

    samples = {}
    for name, severity in (('clean', 0), ('rotate', 5)):
        cfg = _stock_dataset(tmp_path, base, 'mmrotate', root, to_demo)
        _set_resize(cfg, (512, 512))  # the stock resize changes the image: still exact
        insert_corruption(cfg, name, severity)
        if name == 'rotate':
            assert _types(cfg.test_dataloader.dataset.pipeline) == [
                'mmdet.LoadImageFromFile', 'ApplyCorruption', 'mmdet.Resize',
                'mmdet.LoadAnnotations', 'ConvertBoxType', 'ApplyCorruptionToLabels',
                'mmdet.PackDetInputs']
        samples[name] = _build(cfg, 'mmrotate')[0]
    clean, moved = (samples[k]['data_samples'] for k in ('clean', 'rotate'))
    assert len(clean.gt_instances) > 0
    # independent reference: rotate each box's corners by +90 degrees (counter-clockwise
    # on screen) about OpenCV's pixel (W/2, H/2), the point (W/2 + 0.5, H/2 + 0.5) of the
    # pixel-edge coordinates boxes use
    centre = clean.metainfo['ori_shape'][0] / 2 + 0.5
    corners = clean.gt_instances.bboxes.convert_to('qbox').tensor.double().view(-1, 4, 2)
    x, y = corners[..., 0] - centre, corners[..., 1] - centre
    expected = torch.stack([y + centre, -x + centre], -1)
    got = moved.gt_instances.bboxes.convert_to('qbox').tensor.double().view(-1, 4, 2)

    # every corner of each moved box is one of the expected corners, and vice versa
    distances = torch.cdist(got, expected)
    assert distances.min(-1).values.max() < 0.02 and distances.min(-2).values.max() < 0.02
    assert moved.gt_instances.labels.tolist() == clean.gt_instances.labels.tolist()

    # scale and translate: the boxes at the original size moved by the transform the
    # engine gives the original image (not the resized one)
    from reobench_corruptions import corrupt_geometric
    image = cv2.imread(clean.metainfo['img_path'], cv2.IMREAD_COLOR)
    key = osp.basename(clean.metainfo['img_path'])
    for name, severity in (('scale', 5), ('translate', 3)):
        cfg = _stock_dataset(tmp_path, base, 'mmrotate', root, to_demo)
        _set_resize(cfg, (512, 512))
        insert_corruption(cfg, name, severity)
        moved = _build(cfg, 'mmrotate')[0]['data_samples']
        _, geometry = corrupt_geometric(image, name, severity, key=key)
        expected = torch.as_tensor(geometry.apply_to_points(corners.numpy()))
        got = moved.gt_instances.bboxes.convert_to('qbox').tensor.double().view(-1, 4, 2)
        distances = torch.cdist(got, expected)
        assert distances.min(-1).values.max() < 0.02, name


# ----------------------------------------------------------------------------- test loop

def test_corruption_loop_places_and_reports_the_condition(demo_data, tmp_path):
    """Runner.from_cfg(cfg).test() of a config whose test_cfg is CorruptionTestLoop."""
    from mmengine.runner import Runner
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.merge_from_dict({'test_dataloader.dataset.data_root': osp.join(demo_data, 'potsdam'),
                         'test_dataloader.num_workers': 0,
                         'test_dataloader.persistent_workers': False,
                         'work_dir': str(tmp_path), 'log_level': 'WARNING',
                         'test_cfg.corruption': 'rotate', 'test_cfg.severity': 5})
    runner = Runner.from_cfg(cfg)
    loop = runner.test_loop
    pipeline = loop.dataloader.dataset.pipeline.transforms
    assert _types(pipeline) == ['LoadImageFromFile', 'LoadAnnotations', 'ApplyCorruption',
                                'PackSegInputs']
    assert loop.condition['corruption'] == 'rotate' and 'rotate severity 5' in \
        loop.condition_text
    batch = next(iter(loop.dataloader))
    assert {s.metainfo['corruption'] for s in batch['data_samples']} == {'rotate'}
    metrics = runner.test()
    assert 'mIoU' in metrics
    # the loop edited its own copy of the dataloader config
    assert 'ApplyCorruption' not in _types(cfg.test_dataloader.dataset.pipeline)

    stale = Config.fromfile(SEG_DEMO_CONFIG)
    stale.merge_from_dict({'work_dir': str(tmp_path / 'stale'), 'log_level': 'WARNING',
                           'corruption_cfg': dict(corruption='cloud', severity=3)})
    with pytest.raises(ValueError, match='corruption_cfg, which nothing reads'):
        Runner.from_cfg(stale).test_loop


# ----------------------------------------------------------------------------- entry points

def _stock_order_seg_config(tmp_path, data_root: str, test_cfg: str) -> str:
    """The demo UperNet on mmseg's own Potsdam dataset config, in its own step order
    (Resize before LoadAnnotations), with ``test_cfg`` as given."""
    path = tmp_path / f'stock_order_{abs(hash(test_cfg))}.py'
    path.write_text(f"""_base_ = [
    'mmseg::_base_/default_runtime.py',
    '{PROJECT_ROOT}/configs/_base_/models/upernet_r18-tiny.py',
    'mmseg::_base_/datasets/potsdam.py',
]
custom_imports = dict(imports=['reobench_mm'], allow_failed_imports=False)
data_root = '{data_root}'
test_dataloader = dict(num_workers=0, persistent_workers=False,
                       dataset=dict(data_root=data_root, pipeline=[
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(256, 256), keep_ratio=True),  # the tiles have the test size
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]))
test_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
train_dataloader = val_dataloader = val_evaluator = None  # testing only
test_cfg = {test_cfg}
log_level = 'INFO'
""")
    return str(path)


def _stock_miou(output: str) -> float:
    """The mIoU MMEngine's logger prints at the end of a test (4 decimals)."""
    found = re.findall(r'Iter\(test\).*?mIoU: ([0-9.]+)', output)
    assert found, output[-3000:]
    return float(found[-1])


@pytest.mark.slow
def test_stock_mmseg_test_tool_applies_the_condition(demo_data, tmp_path, seg_model):
    """mmseg's own tools/test.py, run from its installed package in a subprocess, on
    configs in mmseg's own step order: the same corrupted numbers as tools/test.py."""
    stock = toolbox_file('mmseg', 'tools', 'test.py')
    data_root = osp.join(demo_data, 'potsdam')
    checkpoint = seg_model.checkpoint
    plain = _stock_order_seg_config(tmp_path, data_root, "dict(type='TestLoop')")
    looped = _stock_order_seg_config(
        tmp_path, data_root, "dict(type='CorruptionTestLoop', corruption='rotate', "
        "severity=5)")
    outputs = [None, None, None, *run_tools_together(
        [stock, looped, checkpoint, '--work-dir', str(tmp_path / 'stock_rotate')],
        [stock, looped, checkpoint, '--work-dir', str(tmp_path / 'stock_noise'),
         '--cfg-options', 'test_cfg.corruption=gaussian_noise'])]
    # this package's tools/test.py gives the reference numbers: in this process (the stock
    # tool's process boundary is what is checked)
    for folder, condition in (('ours_rotate', ['--corruption', 'rotate', '--severity', '5']),
                              ('ours_noise', ['--corruption', 'gaussian_noise',
                                              '--severity', '5']),
                              ('ours_clean', [])):
        assert call_tool('test.py', [plain, checkpoint, '--work-dir', tmp_path / folder,
                                     *condition]) == 0, folder
    ours = {}
    for tag in ('rotate_s5', 'gaussian_noise_s5', 'clean'):
        folder = {'rotate_s5': 'ours_rotate', 'gaussian_noise_s5': 'ours_noise',
                  'clean': 'ours_clean'}[tag]
        with open(tmp_path / folder / f'metrics_{tag}.json') as handle:
            ours[tag] = json.load(handle)['metrics']['mIoU']
    assert _stock_miou(outputs[3]) == pytest.approx(ours['rotate_s5'], abs=5e-5)
    assert _stock_miou(outputs[4]) == pytest.approx(ours['gaussian_noise_s5'], abs=5e-5)
    assert len({ours['rotate_s5'], ours['gaussian_noise_s5'], ours['clean']}) == 3, ours
    # the stock tool's log says what ran and where
    assert 'test condition: rotate severity 5' in outputs[3]
    assert 'ApplyCorruption after LoadImageFromFile, before Resize' in outputs[3]
    assert 'moved by ApplyCorruptionToLabels after LoadAnnotations' in outputs[3]
    assert 'test condition: gaussian_noise severity 5' in outputs[4]
    assert 'ApplyCorruption after LoadImageFromFile, before Resize' in outputs[4]

    # a config that names a condition nothing would apply fails loudly in the stock tool
    stale = tmp_path / 'stale.py'
    stale.write_text(f"_base_ = ['{looped}']\n"
                     "corruption_cfg = dict(corruption='cloud', severity=3)\n")
    result = subprocess.run([sys.executable, stock, str(stale), checkpoint, '--work-dir',
                             str(tmp_path / 'stale')], cwd=PROJECT_ROOT, capture_output=True,
                            text=True)
    assert result.returncode != 0
    assert 'corruption_cfg, which nothing reads' in result.stdout + result.stderr


# ----------------------------------------------------------------------------- edge cases

def test_geometric_corruption_of_a_resized_labelled_sample_is_refused_even_on_purpose():
    """allow_resized accepts a resized image for pixel corruptions; a geometric one would
    move original-size labels with the resized image's geometry."""
    from mmrotate.structures.bbox import RotatedBoxes
    image = np.zeros((64, 64, 3), np.uint8)
    sample = dict(img=image, img_path='/d/a.png', ori_shape=(50, 50), scale_factor=(1.28, 1.28),
                  gt_bboxes=RotatedBoxes(torch.tensor([[25., 25., 8., 4., 0.]])))
    with pytest.raises(RuntimeError, match='cannot be moved together'):
        ApplyCorruption('rotate', 3, allow_resized=True)(dict(sample))
    with pytest.warns(UserWarning, match='corrupts resized images'):
        ApplyCorruption('haze', 3, allow_resized=True)(dict(sample))


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_conditions_in_two_places_and_half_conditions_are_refused(demo_data, tmp_path):
    from mmengine.runner import Runner
    options = {'test_dataloader.dataset.data_root': osp.join(demo_data, 'potsdam'),
               'test_dataloader.num_workers': 0, 'test_dataloader.persistent_workers': False,
               'log_level': 'WARNING'}

    def config(work_dir, **extra):
        cfg = Config.fromfile(SEG_DEMO_CONFIG)
        cfg.merge_from_dict(dict(options, work_dir=str(tmp_path / work_dir), **extra))
        return cfg

    # a step written into the pipeline: the default loop runs it as written
    cfg = config('written')
    cfg.test_dataloader.dataset.pipeline.insert(
        2, dict(type='ApplyCorruption', corruption='cloud', severity=3))
    loop = Runner.from_cfg(cfg).test_loop
    assert loop.condition is None and loop.condition_text.startswith('cloud severity 3')
    batch = next(iter(loop.dataloader))
    assert batch['data_samples'][0].metainfo['corruption'] == 'cloud'
    # ... and a loop naming another condition is a conflict, not a silent override
    cfg = config('conflict', **{'test_cfg.corruption': 'clean', 'test_cfg.severity': 0})
    cfg.test_dataloader.dataset.pipeline.insert(
        2, dict(type='ApplyCorruption', corruption='cloud', severity=3))
    with pytest.raises(ValueError, match='two conditions in one config'):
        Runner.from_cfg(cfg).test_loop
    # a corruption without a severity would run clean under the corruption's name
    for extra, message in (({'test_cfg.corruption': 'cloud'}, 'severity None'),
                           ({'test_cfg.severity': 3}, 'name a corruption'),
                           ({'test_cfg.seed': 3}, 'without test_cfg.corruption')):
        with pytest.raises(ValueError, match=message):
            Runner.from_cfg(config('half', **extra)).test_loop
        checkpoint = tmp_path / 'model.pth'
        checkpoint.write_bytes(b'')
        with pytest.raises(ValueError, match=message):
            prepare_test_config(SEG_DEMO_CONFIG, str(checkpoint), cfg_options=extra)


def test_a_built_dataloader_gets_the_condition_and_fresh_workers(demo_data, tmp_path):
    """A DataLoader built (and iterated, with persistent workers) before the loop: its
    pipeline gets the step and its workers restart, so no batch comes from the old
    pipeline; a batch made under another condition is refused."""
    from mmengine.runner import Runner
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.merge_from_dict({'test_dataloader.dataset.data_root': osp.join(demo_data, 'potsdam'),
                         'test_dataloader.num_workers': 1,
                         'test_dataloader.persistent_workers': True,
                         'work_dir': str(tmp_path), 'log_level': 'WARNING'})
    runner = Runner.from_cfg(cfg)
    loader = Runner.build_dataloader(cfg.test_dataloader)
    assert 'corruption' not in next(iter(loader))['data_samples'][0].metainfo  # workers up
    from reobench_mm.engine import CorruptionTestLoop
    loop = CorruptionTestLoop(runner, loader, cfg.test_evaluator, corruption='gaussian_noise',
                              severity=5)
    assert loop.dataloader is loader
    metas = [s.metainfo for batch in loop.dataloader for s in batch['data_samples']]
    assert {(m['corruption'], m['severity']) for m in metas} == {('gaussian_noise', 5)}
    stale = next(iter(loop.dataloader))
    for sample in stale['data_samples']:
        sample.set_metainfo(dict(corruption='clean', severity=0))
    with pytest.raises(RuntimeError, match='workers started before the condition'):
        loop.run_iter(0, stale)
    # a dataloader config holding an already built dataset
    dataset = Runner.build_dataloader(dict(cfg.test_dataloader, num_workers=0,
                                           persistent_workers=False)).dataset
    built = dict(cfg.test_dataloader, num_workers=0, persistent_workers=False,
                 dataset=dataset)
    loop = CorruptionTestLoop(runner, built, cfg.test_evaluator, corruption='haze', severity=2)
    assert loop.condition_text.startswith('haze severity 2')


def test_a_corruption_inside_test_time_augmentation_is_found_and_refused():
    from mmcv.transforms import TestTimeAug
    from reobench_mm.transforms import corruption_steps
    pipeline = [dict(type='LoadImageFromFile'),
                dict(type='TestTimeAug', transforms=[
                    [dict(type='ApplyCorruption', corruption='cloud', severity=3)],
                    [dict(type='PackSegInputs')]])]
    with pytest.raises(ValueError, match='inside TestTimeAug is not supported'):
        place_corruption(pipeline, False, dict)
    from mmcv.transforms import LoadImageFromFile
    tta = TestTimeAug([[ApplyCorruption('cloud', 3)], [dict(type='mmseg.PackSegInputs')]])

    class Dataset:
        pipeline = type('Compose', (), {'transforms': [LoadImageFromFile(), tta]})()
    found = corruption_steps(Dataset())
    assert len(found) == 1 and found[0].corruption == 'cloud'


@pytest.mark.slow  # 7 s or more: left out of make test-fast
def test_the_test_tool_moves_a_misplaced_written_step_and_refuses_without_leftovers(
        demo_data, tmp_path, monkeypatch, capsys):
    """tools/test.py on a config in mmseg's own step order whose pipeline names a
    geometric corruption after Resize: the step is moved in front of Resize and the label
    step put after the annotations (logged); with an evaluator that ignores label 5 while
    the written step pads moved labels with 255, the run is refused before anything is
    written (work dir, --out, --show-dir)."""
    from sweep_helpers import untrained_checkpoint

    from reobench_cli import run_tool
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    config = tmp_path / 'written_rotate.py'
    config.write_text(f"""_base_ = [
    'mmseg::_base_/default_runtime.py',
    '{PROJECT_ROOT}/configs/_base_/models/upernet_r18-tiny.py',
    'mmseg::_base_/datasets/potsdam.py',
]
custom_imports = dict(imports=['reobench_mm'], allow_failed_imports=False)
test_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root='{osp.join(demo_data, 'potsdam')}', pipeline=[
        dict(type='LoadImageFromFile'),
        dict(type='Resize', scale=(512, 512), keep_ratio=True),
        dict(type='ApplyCorruption', corruption='rotate', severity=3),
        dict(type='LoadAnnotations', reduce_zero_label=True),
        dict(type='PackSegInputs')]))
test_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'], ignore_index=5)
train_dataloader = val_dataloader = val_evaluator = None
default_hooks = dict(visualization=dict(type='SegVisualizationHook'))
""")
    setup = prepare_test_config(str(config), checkpoint)
    placement = setup.placements[0]  # (the base's top-level test_pipeline gets one too)
    assert setup.tag == 'rotate_s3' and placement.moved_from == 2
    assert _types(setup.cfg.test_dataloader.dataset.pipeline) == [
        'LoadImageFromFile', 'ApplyCorruption', 'Resize', 'LoadAnnotations',
        'ApplyCorruptionToLabels', 'PackSegInputs']
    assert setup.cfg.test_cfg.type == 'CorruptionTestLoop'

    import importlib.util
    spec = importlib.util.spec_from_file_location('tool_test', TEST_TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    work_dir = tmp_path / 'old_work'
    work_dir.mkdir()
    dumped = work_dir / config.name
    dumped.write_text('# dumped by an earlier run\n')
    monkeypatch.setattr('sys.argv', [
        'test.py', str(config), checkpoint, '--work-dir', str(work_dir), '--out',
        str(tmp_path / 'maps'), '--show-dir', str(tmp_path / 'painted')])
    assert run_tool(tool.main) == 2
    err = capsys.readouterr().err
    assert re.search(r'error: the ApplyCorruption step of .* pads moved label maps with '
                     r'ignore_index=255, but the test evaluator ignores label 5', err), err
    assert sorted(p.name for p in work_dir.iterdir()) == [config.name]
    assert dumped.read_text() == '# dumped by an earlier run\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ['model.pth', config.name, 'old_work'])
