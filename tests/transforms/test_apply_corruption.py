"""ApplyCorruption in real toolbox pipelines: labels move with the pixels."""
import os.path as osp

import cv2
import numpy as np
import pytest
import torch
from mmcv.transforms import Compose
from mmdet.structures.bbox import HorizontalBoxes
from mmrotate.structures.bbox import QuadriBoxes, RotatedBoxes

from reobench_corruptions import corrupt, corrupt_geometric
from reobench_corruptions.appearance import jpeg_round_trip
from reobench_mm.transforms import ApplyCorruption, move_boxes


def _results(image, **extra):
    return dict(img=image, img_path='/data/x/tile_7.png', img_shape=image.shape[:2], **extra)


def _image(h=96, w=128):
    rng = np.random.default_rng(0)
    return (cv2.GaussianBlur(rng.random((h, w, 3)).astype(np.float32), (0, 0), 2) * 255
            ).astype(np.uint8)


@pytest.mark.parametrize('corruption,severity', [('clean', 3), ('rotate', 0), ('cloud', 0)])
def test_clean_and_severity_zero_are_noops(corruption, severity):
    image = _image()
    out = ApplyCorruption(corruption, severity)(_results(image.copy()))
    np.testing.assert_array_equal(out['img'], image)
    assert (out['corruption'], out['severity']) == ('clean', 0)


def test_appearance_corruption_uses_the_file_name_as_key():
    image = _image()
    out = ApplyCorruption('gaussian_noise', 2, seed=5)(_results(image.copy()))
    expected = corrupt(image, 'gaussian_noise', 2, seed=5, key='tile_7.png')
    np.testing.assert_array_equal(out['img'], expected)
    assert (out['corruption'], out['severity']) == ('gaussian_noise', 2)
    moved = _results(image.copy())
    moved['img_path'] = '/elsewhere/tile_7.png'
    np.testing.assert_array_equal(ApplyCorruption('gaussian_noise', 2, seed=5)(moved)['img'],
                                  expected)


def test_compression_respects_bgr_and_optional_reencoding():
    image = _image()
    out = ApplyCorruption('compression_artifacts', 1)(_results(image.copy()))
    expected = corrupt(image, 'compression_artifacts', 1, channel_order='bgr')
    np.testing.assert_array_equal(out['img'], expected)
    twice = ApplyCorruption('haze', 1, reencode_jpeg_quality=75)(_results(image.copy()))
    hazy = corrupt(image, 'haze', 1).astype(np.float32) / 255
    np.testing.assert_array_equal(
        twice['img'], np.rint(jpeg_round_trip(hazy, 75, 'bgr') * 255).astype(np.uint8))


def _polygon_masks_and_boxes(shape, quads):
    masks = []
    for quad in quads:
        mask = np.zeros(shape, np.uint8)
        cv2.fillPoly(mask, [np.round((quad.reshape(4, 2) - 0.5) * 8).astype(np.int32)], 1,
                     cv2.LINE_8, 3)
        masks.append(mask)
    return masks


def _raster(corners, shape):
    mask = np.zeros(shape, np.uint8)
    # corners are in pixel-edge coordinates; OpenCV rasterises in pixel-centre ones
    edge = np.asarray(corners).reshape(4, 2) - 0.5
    cv2.fillPoly(mask, [np.round(edge * 8).astype(np.int32)], 1,
                 cv2.LINE_8, 3)
    return mask.astype(bool)


def _check_boxes_cover_moved_masks(image, quads, corruption, severity):
    """Each moved box covers its moved object mask (IoU >= 0.9)."""
    shape = image.shape[:2]
    boxes = QuadriBoxes(torch.as_tensor(quads, dtype=torch.float32)).convert_to('rbox')
    masks = _polygon_masks_and_boxes(shape, quads)
    _, geometry = corrupt_geometric(image, corruption, severity, key='k', border='constant')
    moved = move_boxes(RotatedBoxes(boxes.tensor), geometry)
    tensor = moved.tensor
    assert torch.all(tensor[:, 2:4] > 0), 'no negative or zero sizes'
    assert torch.all((tensor[:, 4] >= -np.pi / 2) & (tensor[:, 4] < np.pi / 2)), 'le90 angles'
    area_ratio = abs(np.linalg.det(geometry.matrix[:, :2]))
    checked = 0
    for mask, box in zip(masks, moved.convert_to('qbox').tensor.numpy()):
        moved_mask = geometry.warp_label_map(mask, 0).astype(bool)
        if moved_mask.sum() < 0.95 * area_ratio * mask.sum() or mask.sum() < 200:
            continue  # partly moved out of the image or too small to rasterise stably
        box_mask = _raster(box, shape)
        iou = (box_mask & moved_mask).sum() / (box_mask | moved_mask).sum()
        assert iou >= 0.9, (corruption, severity, iou)
        checked += 1
    return checked


@pytest.mark.parametrize('corruption', ['rotate', 'scale', 'translate'])
@pytest.mark.parametrize('severity', [1, 3, 5])
def test_moved_boxes_cover_moved_objects_on_synthetic_scenes(corruption, severity):
    from reobench_mm.datasets.synthetic import draw_dior_scene
    image, objects = draw_dior_scene(np.random.default_rng(1), 256)
    quads = np.array([o.corners.reshape(-1) for o in objects])
    assert _check_boxes_cover_moved_masks(image, quads, corruption, severity) >= 3


@pytest.mark.parametrize('corruption', ['rotate', 'scale', 'translate'])
def test_moved_boxes_cover_moved_objects_on_real_dota(real_samples, corruption):
    name = 'P2805__1024__0___0'
    # the stored PNG is a thumbnail; the annotations are in the 1024x1024 patch's pixels
    image = np.zeros((1024, 1024, 3), np.uint8)
    lines = open(osp.join(real_samples, 'dota', name + '.txt')).read().split('\n')
    quads = np.array([[float(v) for v in line.split()[:8]] for line in lines
                      if len(line.split()) >= 9])
    assert _check_boxes_cover_moved_masks(image, quads, corruption, 4) >= 1


def test_horizontal_boxes_become_enclosing_boxes():
    image = _image(100, 100)
    _, geometry = corrupt_geometric(image, 'rotate', 2)  # 45 degrees
    moved = move_boxes(HorizontalBoxes(torch.tensor([[40., 40., 60., 60.]])), geometry)
    x1, y1, x2, y2 = moved.tensor[0].tolist()
    assert x2 - x1 == pytest.approx(20 * np.sqrt(2), abs=1e-3)
    assert y2 - y1 == pytest.approx(20 * np.sqrt(2), abs=1e-3)


def test_segmentation_map_moves_exactly_with_the_image():
    label = np.zeros((64, 64), np.uint8)
    label[10:30, 20:50] = 3
    image = np.repeat((label * 60)[..., None], 3, axis=2)
    results = ApplyCorruption('translate', 2, seed=1)(
        _results(image, gt_seg_map=label.copy(), seg_fields=['gt_seg_map']))
    np.testing.assert_array_equal(results['img'][..., 0] // 60, results['gt_seg_map'])

    results = ApplyCorruption('scale', 5)(_results(image, gt_seg_map=label.copy()))
    seg, img = results['gt_seg_map'], results['img'][..., 0]
    assert np.all(seg[img > 0] == 3)  # content lands where its labels land
    assert np.all(seg[:16] == 255), 'the empty canvas is ignored, never a class'


def test_drop_outside_keeps_labels_and_flags_aligned():
    image = _image(100, 100)
    boxes = RotatedBoxes(torch.tensor([[50., 50., 10., 6., 0.], [3., 3., 4., 4., 0.],
                                       [90., 50., 6., 6., 0.2]]))
    results = _results(image, gt_bboxes=boxes, gt_bboxes_labels=np.array([0, 1, 2]),
                       gt_ignore_flags=np.array([False, True, False]))
    key = ApplyCorruption.sample_key(results)
    _, geometry = corrupt_geometric(image, 'translate', 5, key=key)  # ±35 px
    kept = [i for i, c in enumerate(geometry.apply_to_points(boxes.tensor[:, :2].numpy()))
            if 0 <= c[0] < 100 and 0 <= c[1] < 100]
    out = ApplyCorruption('translate', 5, box_policy='drop_outside')(dict(results))
    assert out['gt_bboxes_labels'].tolist() == kept
    assert out['gt_ignore_flags'].tolist() == [bool(i == 1) for i in kept]
    assert len(out['gt_bboxes']) == len(kept) < 3
    reference = ApplyCorruption('translate', 5)(_results(
        image, gt_bboxes=boxes, gt_bboxes_labels=np.array([0, 1, 2]),
        gt_ignore_flags=np.array([False, True, False])))
    assert len(reference['gt_bboxes']) == 3, 'the reference policy keeps every box'


def test_empty_annotations():
    out = ApplyCorruption('rotate', 3)(_results(
        _image(), gt_bboxes=RotatedBoxes(torch.zeros((0, 5))),
        gt_bboxes_labels=np.zeros(0, np.int64), gt_ignore_flags=np.zeros(0, bool)))
    assert len(out['gt_bboxes']) == 0


def test_in_an_mmrotate_dior_pipeline(demo_data):
    from mmrotate.datasets import DIORDataset
    import reobench_mm  # noqa: F401
    from mmengine.registry import init_default_scope
    init_default_scope('mmrotate')
    pipeline = [
        dict(type='mmdet.LoadImageFromFile'),
        dict(type='mmdet.LoadAnnotations', with_bbox=True, box_type='qbox'),
        dict(type='ConvertBoxType', box_type_mapping=dict(gt_bboxes='rbox')),
        dict(type='ApplyCorruption', corruption='rotate', severity=4),
        dict(type='mmdet.PackDetInputs',
             meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'corruption',
                        'severity')),
    ]
    dataset = DIORDataset(data_root=osp.join(demo_data, 'dior'),
                          ann_file='ImageSets/Main/test.txt',
                          data_prefix=dict(img_path='JPEGImages-test'), test_mode=True,
                          metainfo=dict(classes=('airplane', 'ship', 'storagetank',
                                                 'vehicle')), pipeline=pipeline)
    sample = dataset[0]['data_samples']
    assert sample.metainfo['corruption'] == 'rotate' and sample.metainfo['severity'] == 4
    boxes = sample.gt_instances.bboxes.tensor
    assert len(boxes) and torch.all(boxes[:, 2:4] > 0)
    assert torch.all((boxes[:, 4] >= -np.pi / 2) & (boxes[:, 4] < np.pi / 2))
    assert len(sample.gt_instances.labels) == len(boxes)


def test_same_bits_with_0_and_2_dataloader_workers(demo_data):
    from mmengine.dataset import pseudo_collate
    from mmseg.datasets import PotsdamDataset
    from torch.utils.data import DataLoader
    pipeline = Compose([
        dict(type='LoadImageFromFile'),  # found whatever the current default scope
        ApplyCorruption('gaussian_noise', 3, seed=9),
    ])
    dataset = PotsdamDataset(data_root=osp.join(demo_data, 'potsdam'),
                             data_prefix=dict(img_path='img_dir/val',
                                              seg_map_path='ann_dir/val'),
                             pipeline=[])
    dataset.pipeline = pipeline

    def images(workers, batch):
        loader = DataLoader(dataset, batch_size=batch, num_workers=workers,
                            collate_fn=pseudo_collate)
        return [img for batch_ in loader for img in batch_['img']]

    serial, parallel = images(0, 1), images(2, 2)
    assert len(serial) == len(dataset) == len(parallel)
    for a, b in zip(serial, parallel):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('kwargs,error,match', [
    (dict(corruption='fog', severity=1), KeyError, "valid: .*'haze'"),
    (dict(corruption='haze', severity=6), ValueError, 'severity must be'),
    (dict(corruption='haze', severity=1, protocol='x'), ValueError, 'unknown protocol'),
    (dict(corruption='rotate', severity=1, border='wrap'), ValueError, 'border'),
    (dict(corruption='rotate', severity=1, box_policy='clip'), ValueError, 'box_policy'),
    (dict(corruption='rotate', severity=1, angle_version='le45'), ValueError, 'angle_version'),
    (dict(corruption='haze', severity=1, reencode_jpeg_quality=0), ValueError, 'reencode'),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        ApplyCorruption(**kwargs)


def test_set_condition_switches_a_built_transform():
    image = _image()
    transform = ApplyCorruption('clean', 0)
    assert transform(_results(image.copy()))['corruption'] == 'clean'
    transform.set_condition('haze', 2, seed=3)
    switched = transform(_results(image.copy()))
    direct = ApplyCorruption('haze', 2, seed=3)(_results(image.copy()))
    assert switched['corruption'] == 'haze' and switched['severity'] == 2
    np.testing.assert_array_equal(switched['img'], direct['img'])
    with pytest.raises(ValueError, match='severity'):
        transform.set_condition('haze', 7)
    assert transform.severity == 2, 'a rejected switch leaves the transform as it was'


# ----------------------------------------------------------------------------- bad inputs

def _input_kinds():
    """Images a pipeline may hand the transform: ``(name, image, options)``."""
    base = _image(24, 20)
    read_only = base.copy()
    read_only.flags.writeable = False
    wide = np.ascontiguousarray(np.concatenate([base] * 5, axis=2)[..., :13])
    return [
        ('uint8', base, {}),
        ('uint8 read-only', read_only, {}),
        ('uint8 non-contiguous', np.concatenate([base, base], axis=1)[:, ::2], {}),
        ('uint8 2-D', base[..., 0].copy(), {}),
        ('uint8 13 bands', wide, {}),
        ('uint8 1x1', base[:1, :1].copy(), {}),
        ('uint16', base.astype(np.uint16) * 40, dict(max_value=10200)),
        ('float32 0..1', base.astype(np.float32) / 255, {}),
        ('float32 0..255', base.astype(np.float32), dict(max_value=255)),
        ('float64 2-D', base[..., 1].astype(np.float64) / 255, {}),
    ]


@pytest.mark.parametrize('protocol', ['reobench', 'geofm_calibration'])
def test_every_corruption_on_every_kind_of_input(protocol):
    """A documented result for every dtype, band count and memory layout: the same
    shape and dtype back, the input never modified, equal to the contiguous input's."""
    from reobench_corruptions import list_corruptions
    for name in list_corruptions(protocol):
        for kind, image, options in _input_kinds():
            before = image.copy()
            out = ApplyCorruption(name, 3, protocol=protocol, **options)(_results(image))
            assert out['img'].shape == image.shape and out['img'].dtype == image.dtype, \
                (name, kind)
            np.testing.assert_array_equal(image, before, err_msg=f'{name} {kind} modified')
            again = ApplyCorruption(name, 3, protocol=protocol, **options)(
                _results(np.ascontiguousarray(image).copy()))
            np.testing.assert_array_equal(out['img'], again['img'], err_msg=f'{name} {kind}')


@pytest.mark.parametrize('image,options,message', [
    (_image().astype(np.float32), {}, r'max_value'),  # 0..255 floats need max_value=255
    (_image().astype(np.float32) / 255 - 0.5, {}, r'negative|normali'),  # after Normalize
    (_image().astype(np.uint16) * 300, dict(max_value=1000), r'max_value'),
    (_image().astype(np.uint16), dict(max_value=70000), r'65535'),
    (_image().astype(np.int32), {}, r'dtype'),
    (np.zeros((4, 4, 3, 2), np.uint8), {}, r'shape'),
])
def test_inputs_outside_the_contract_are_clear_errors(image, options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        ApplyCorruption('haze', 2, **options)(_results(image))


@pytest.mark.parametrize('policy', ['reference', 'drop_outside'])
@pytest.mark.parametrize('corruption', ['rotate', 'scale', 'translate'])
def test_empty_and_out_of_frame_boxes(policy, corruption):
    """No box, and boxes partly or wholly outside the image: moved like any other point
    set (the reference policy keeps them), dropped when their centre is outside
    (drop_outside); labels and flags stay aligned."""
    image = _image(100, 100)
    empty = ApplyCorruption(corruption, 4, box_policy=policy)(_results(
        image, gt_bboxes=HorizontalBoxes(torch.zeros((0, 4))),
        gt_bboxes_labels=np.zeros(0, np.int64), gt_ignore_flags=np.zeros(0, bool)))
    assert len(empty['gt_bboxes']) == 0 and len(empty['gt_bboxes_labels']) == 0
    boxes = RotatedBoxes(torch.tensor([[-30., -30., 10., 6., 0.], [98., 50., 20., 8., 0.5],
                                       [50., 50., 10., 10., 0.]]))
    out = ApplyCorruption(corruption, 4, box_policy=policy)(_results(
        image, gt_bboxes=boxes, gt_bboxes_labels=np.array([0, 1, 2]),
        gt_ignore_flags=np.array([True, False, False])))
    _, geometry = corrupt_geometric(image, corruption, 4, key='tile_7.png')
    centres = geometry.apply_to_points(boxes.tensor[:, :2].numpy())
    inside = [bool(0 <= x < 100 and 0 <= y < 100) for x, y in centres]
    kept = [i for i in range(3) if policy == 'reference' or inside[i]]
    assert out['gt_bboxes_labels'].tolist() == kept
    assert out['gt_ignore_flags'].tolist() == [i == 0 for i in kept]
    np.testing.assert_allclose(out['gt_bboxes'].centers.numpy(), centres[kept], atol=1e-3)
    assert torch.isfinite(out['gt_bboxes'].tensor).all()


def test_corruption_options_reach_the_engine():
    """corruption_options: cloud_shadow's bands and scale's canvas, by corruption name,
    give exactly the engine's results; other corruptions are unaffected; bad options are
    refused at construction."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (64, 64, 4), dtype=np.uint8)
    options = dict(cloud_shadow=dict(bands=[0, 1, 2]), scale=dict(canvas='black'))
    sample = dict(img=image.copy(), img_path='/d/tile.tif', sample_idx=0,
                  ori_shape=(64, 64))
    out = ApplyCorruption('cloud_shadow', 4, protocol='geofm_calibration',
                          corruption_options=options)(dict(sample))['img']
    expected = corrupt(image, 'cloud_shadow', 4, key='tile.tif', protocol='geofm_calibration',
                       bands=[0, 1, 2])
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(out[..., 3], image[..., 3])  # the band left alone
    assert not np.array_equal(out[..., :3], image[..., :3])

    label = rng.integers(0, 6, (64, 64), dtype=np.uint8)
    moved = ApplyCorruption('scale', 5, corruption_options=options)(
        dict(sample, gt_seg_map=label.copy(), seg_fields=['gt_seg_map']))
    reference, geometry = corrupt_geometric(image, 'scale', 5, key='tile.tif', canvas='black')
    np.testing.assert_array_equal(moved['img'], reference)
    np.testing.assert_array_equal(moved['gt_seg_map'], geometry.warp_label_map(label, 255))
    default, _ = corrupt_geometric(image, 'scale', 5, key='tile.tif')
    assert not np.array_equal(reference, default)  # the option made a difference

    haze = ApplyCorruption('haze', 3, corruption_options=options)(dict(sample))['img']
    np.testing.assert_array_equal(haze, corrupt(image, 'haze', 3, key='tile.tif'))

    for bad, match in ((dict(fog=dict()), "'fog', which is not a corruption"),
                       (dict(scale=dict(bands=[0])), r"options \['border', 'canvas'\]|canvas"),
                       (dict(scale=dict(border='constant')), 'canvas'),
                       (dict(rotate=dict(bands=[0])), 'it has none'),
                       ([('scale', {})], 'must map corruption names')):
        with pytest.raises(ValueError, match=match):
            ApplyCorruption('haze', 3, corruption_options=bad)


@pytest.mark.parametrize('corruption', ['haze', 'gaussian_noise', 'translate'])
@pytest.mark.parametrize('image', ['missing', None, 'tensor'])
def test_a_step_before_image_loading_says_where_it_belongs(corruption, image):
    """Placed before LoadImageFromFile (no image yet) or after the image became a tensor,
    the step says that it needs a loaded numpy image and belongs right after loading
    (it gave a bare KeyError: 'img')."""
    results = dict(img_path='/data/x/tile_7.png', sample_idx=0)
    if image == 'tensor':
        results['img'] = torch.zeros(3, 8, 8)
    elif image is None:
        results['img'] = None
    step = ApplyCorruption(corruption, 2)
    with pytest.raises(RuntimeError) as error:
        step(results)
    message = str(error.value)
    for part in ('loaded image', 'right after', 'LoadImageFromFile', corruption):
        assert part in message, (part, message)
    if image == 'tensor':
        assert 'numpy array' in message and 'Tensor' in message, message
    # a clean step stays a no-op wherever it is
    assert ApplyCorruption('clean', 0)(dict(results))['corruption'] == 'clean'
