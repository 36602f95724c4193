"""``corruption_device='model'``: the torch engine corrupts on the model's device in the
test step; the numbers against the pipeline's (the same for the deterministic
corruptions, close for the noise, the same bits for the geometric ones, whose labels
move on the device: label maps for segmentation, rotated boxes for detection), JPEG
left in the pipeline, fan-out, the fingerprint, and the refusals."""
import os.path as osp

import numpy as np
import pytest
import torch
from mmengine.runner import Runner

import reobench_mm  # noqa: F401
from reobench_mm.errors import FingerprintMismatchError, SweepError

from helpers import DET_DEMO_CONFIG, SEG_DEMO_CONFIG
from sweep_helpers import condition_records, robustness_cfg

DETERMINISTIC = ['haze', 'brightness_contrast', 'gaussian_blur', 'cloud', 'data_gaps']
GEOMETRIC = ['rotate', 'scale', 'translate']
IN_PIPELINE = ['compression_artifacts']


def _run(demo_data, work_dir, checkpoint, **options):
    cfg = robustness_cfg(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), work_dir, checkpoint,
                         corruptions=DETERMINISTIC + ['gaussian_noise'] + GEOMETRIC
                         + IN_PIPELINE,
                         severities=[3], bootstrap=0, **options)
    Runner.from_cfg(cfg).test()
    return condition_records(work_dir)


@pytest.fixture(scope='module')
def runs(demo_data, trained_seg_checkpoint, tmp_path_factory):
    root = tmp_path_factory.mktemp('device')
    return {name: _run(demo_data, str(root / name), trained_seg_checkpoint, **options)
            for name, options in (('pipeline', {}), ('model', dict(corruption_device='model')),
                                  ('fan_out', dict(corruption_device='model', fan_out=5)))}


def test_the_device_gives_the_pipelines_numbers(runs):
    pipeline, model = runs['pipeline'], runs['model']
    assert pipeline['clean']['metrics'] == model['clean']['metrics']
    for name in DETERMINISTIC:  # within one grey level: the same mIoU to 0.05
        assert model[f'{name}@3']['result']['value'] == pytest.approx(
            pipeline[f'{name}@3']['result']['value'], abs=0.05), name
    for name in IN_PIPELINE:  # not on the device: the same bits
        assert model[f'{name}@3']['metrics'] == pipeline[f'{name}@3']['metrics'], name
    for name in GEOMETRIC:  # the same pixels and labels: the same numbers
        assert model[f'{name}@3']['metrics'] == pipeline[f'{name}@3']['metrics'], name
        assert model[f'{name}@3']['metrics'] != model['clean']['metrics'], name
    # the noise is drawn by another generator: close, not equal
    noise = [r['gaussian_noise@3']['result']['value'] for r in (pipeline, model)]
    assert noise[0] == pytest.approx(noise[1], abs=2.0)
    assert noise[0] != pytest.approx(pipeline['clean']['result']['value'], abs=2.0)


def test_fan_out_on_the_device_equals_condition_by_condition(runs):
    model, fan = runs['model'], runs['fan_out']
    assert sorted(model) == sorted(fan)
    for key in model:
        assert model[key]['metrics'] == fan[key]['metrics'], key


def test_the_device_is_fingerprinted(runs, demo_data, trained_seg_checkpoint, tmp_path):
    assert runs['model']['haze@3']['fingerprint']['corruption_device'] == 'model'
    assert 'corruption_device' not in runs['pipeline']['haze@3']['fingerprint']
    work_dir = str(tmp_path / 'mixed')
    _run(demo_data, work_dir, trained_seg_checkpoint)
    with pytest.raises(FingerprintMismatchError, match='corruption_device'):
        _run(demo_data, work_dir, trained_seg_checkpoint, corruption_device='model')


def test_refusals(demo_data, trained_seg_checkpoint, tmp_path):
    with pytest.raises(SweepError, match='corruption_device must be one of'):
        _run(demo_data, str(tmp_path / 'a'), trained_seg_checkpoint, corruption_device='gpu')
    cfg = robustness_cfg(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), str(tmp_path / 'b'),
                         trained_seg_checkpoint, corruptions=['haze'], severities=[3], bootstrap=0,
                         corruption_device='model')
    pipeline = cfg.test_dataloader.dataset.pipeline
    pipeline.insert(1, dict(type='Resize', scale=(128, 128), keep_ratio=True))
    with pytest.raises(SweepError, match='not its original size'):
        Runner.from_cfg(cfg).test()


def test_rotated_detection_geometric_corruptions_on_the_device(demo_data, det_model, tmp_path):
    """Oriented R-CNN: the boxes move in the test step as the pipeline moves them: the
    same mAP and per-image statistics (``box_policy='drop_outside'``: the test below)."""
    root = osp.join(demo_data, 'dior')
    checkpoint = det_model.checkpoint
    records = {}
    for device in ('pipeline', 'model'):
        work_dir = str(tmp_path / device)
        cfg = robustness_cfg(DET_DEMO_CONFIG, root, work_dir, checkpoint,
                             corruptions=GEOMETRIC, severities=[2, 5], bootstrap=0,
                             corruption_device=device)
        Runner.from_cfg(cfg).test()
        records[device] = condition_records(work_dir)
    pipeline, model = records['pipeline'], records['model']
    assert sorted(pipeline) == sorted(model)
    for key in pipeline:
        assert model[key]['metrics'] == pipeline[key]['metrics'], key
        assert model[key]['images']['sha256'] == pipeline[key]['images']['sha256'], key
    assert pipeline['rotate@5']['metrics'] != pipeline['clean']['metrics']


def _packed_samples():
    """A segmentation and a rotated-detection data sample as the toolboxes pack them
    (labels on the CPU, 60×80), and the pipeline dicts they come from."""
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData, PixelData
    from mmrotate.structures.bbox import RotatedBoxes
    from mmseg.structures import SegDataSample
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 6, (60, 80)).astype(np.uint8)
    seg = SegDataSample(metainfo=dict(img_shape=(60, 80), ori_shape=(60, 80)))
    seg.gt_sem_seg = PixelData(data=torch.from_numpy(labels.astype(np.int64))[None])
    boxes = RotatedBoxes(torch.tensor([[10.0, 10, 8, 4, 0.3], [40, 30, 20, 10, -0.7],
                                       [75, 55, 6, 6, 1.2], [5, 50, 10, 3, 0.0]]))
    det = DetDataSample(metainfo=dict(img_shape=(60, 80), ori_shape=(60, 80)))
    det.gt_instances = InstanceData(bboxes=boxes[:3], labels=torch.tensor([0, 1, 2]))
    det.ignored_instances = InstanceData(bboxes=boxes[3:], labels=torch.tensor([3]))
    results = dict(gt_seg_map=labels, gt_bboxes=boxes.clone(),
                   gt_bboxes_labels=np.array([0, 1, 2, 3]),
                   gt_ignore_flags=np.array([False, False, False, True]))
    return seg, det, results


@pytest.mark.parametrize('name,severity', [('rotate', 2), ('scale', 5), ('translate', 5)])
@pytest.mark.parametrize('box_policy', ['reference', 'drop_outside'])
def test_packed_sample_labels_move_as_in_the_pipeline(name, severity, box_policy):
    from reobench_corruptions import corrupt_geometric
    from reobench_mm.transforms.corruption import move_labels, move_sample_labels
    seg, det, results = _packed_samples()
    _, geometry = corrupt_geometric(np.zeros((60, 80, 3), np.uint8), name, severity, key='k')
    move_labels(results, geometry, 255, 'le90', box_policy)
    moved_seg = move_sample_labels(seg, geometry, 255, 'le90', box_policy)
    np.testing.assert_array_equal(moved_seg.gt_sem_seg.data[0].numpy(), results['gt_seg_map'])
    assert torch.equal(seg.gt_sem_seg.data, _packed_samples()[0].gt_sem_seg.data)  # kept
    moved_det = move_sample_labels(det, geometry, 255, 'le90', box_policy)
    flags = results['gt_ignore_flags']
    kept = results['gt_bboxes'].tensor
    assert torch.equal(moved_det.gt_instances.bboxes.tensor, kept[torch.from_numpy(~flags)])
    assert torch.equal(moved_det.ignored_instances.bboxes.tensor, kept[torch.from_numpy(flags)])
    assert moved_det.gt_instances.labels.tolist() == results['gt_bboxes_labels'][~flags].tolist()
    if box_policy == 'drop_outside' and name == 'rotate':
        assert len(kept) < 4  # the corner boxes leave the image and are dropped


def test_the_device_corrupts_the_bands_the_pipeline_does():
    """A Sentinel-2 + Sentinel-1 stack (13 optical, 2 SAR bands) under ``cloud``: on the
    device the SAR bands stay bit-exact and the optical ones change, as in the pipeline
    (the sample's band_names in its metainfo); without band_names, more than 4 bands are
    refused rather than clouded whole."""
    import numpy as np
    import torch
    from mmengine.structures import BaseDataElement
    from reobench_corruptions import corrupt
    from reobench_corruptions.condition import Condition
    from reobench_mm.errors import SweepError
    from reobench_mm.robustness.device_corruption import DeviceCorruption
    from reobench_mm.transforms.corruption import ApplyCorruption
    from reobench_mm.transforms.raster_loading import SENTINEL2_BANDS
    names = list(SENTINEL2_BANDS) + ['VV', 'VH']
    rng = np.random.default_rng(0)
    image = rng.integers(0, 10000, (len(names), 32, 40), dtype=np.uint16)
    device = DeviceCorruption([ApplyCorruption(max_value=10000)], torch.nn.Linear(1, 1))
    condition = Condition('cloud', 3)

    def batch(**meta):
        sample = BaseDataElement(metainfo=dict(img_path='tile.tif', **meta))
        return dict(inputs=[torch.from_numpy(image.copy())], data_samples=[sample])

    out = device.apply(batch(band_names=names), condition)['inputs'][0].numpy()
    np.testing.assert_array_equal(out[13:], image[13:])
    assert (out[:13] != image[:13]).mean() > 0.1
    # the optical bands as the numpy engine clouds them alone (same draw key), within the
    # torch engine's one grey level of the numpy engine's
    alone = corrupt(image[:13].transpose(1, 2, 0), 'cloud', 3, seed=0,
                    key=ApplyCorruption.sample_key(dict(img_path='tile.tif')),
                    max_value=10000).transpose(2, 0, 1)
    assert np.abs(out[:13].astype(int) - alone.astype(int)).max() <= 10000 / 255 + 1
    with pytest.raises(SweepError, match="cloud acts on optical bands only, and image "
                       r"tile.tif \(15 bands\) reaches the test step without its band_names"):
        device.apply(batch(), condition)
