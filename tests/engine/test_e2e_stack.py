"""End-to-end proof of the stack: real Runners, real toolbox models, compiled ops, CPU."""
import os.path as osp

import numpy as np
import pytest
import torch
from mmengine.runner import Runner

from helpers import DET_DEMO_CONFIG, SEG_DEMO_CONFIG, demo_config


def _train_reload_resume(config_path, data_root, work_root, name):
    """Train 3 iterations, reload the checkpoint for testing, resume to 5."""
    cfg = demo_config(config_path, data_root, osp.join(work_root, name), iters=3)
    cfg.experiment_name = f'{name}-train'
    runner = Runner.from_cfg(cfg)
    runner.train()
    losses, _ = runner.message_hub.get_scalar('train/loss').data
    assert len(losses) == 3 and np.all(np.isfinite(losses)), losses
    checkpoint = osp.join(cfg.work_dir, 'iter_3.pth')
    assert osp.isfile(checkpoint)

    cfg = demo_config(config_path, data_root, osp.join(work_root, name), iters=3)
    cfg.experiment_name = f'{name}-test'
    cfg.load_from = checkpoint
    tester = Runner.from_cfg(cfg)
    metrics = tester.test()
    trained = runner.model.state_dict()
    for key, value in tester.model.state_dict().items():
        torch.testing.assert_close(value, trained[key], msg=f'{key} differs after reload')

    cfg = demo_config(config_path, data_root, osp.join(work_root, name), iters=5)
    cfg.experiment_name = f'{name}-resume'
    cfg.load_from = checkpoint
    cfg.resume = True
    resumed = Runner.from_cfg(cfg)
    resumed.train()
    assert resumed.iter == 5
    losses, _ = resumed.message_hub.get_scalar('train/loss').data
    assert len(losses) == 5, 'the message hub history is restored on resume'
    return runner, metrics


@pytest.mark.trains('training, reloading and resuming is what it checks')
@pytest.mark.slow
def test_upernet_on_synthetic_potsdam(demo_data, tmp_path):
    runner, metrics = _train_reload_resume(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'),
                                           str(tmp_path), 'seg')
    assert set(metrics) >= {'mIoU', 'aAcc', 'mAcc'}
    assert 0.0 <= metrics['mIoU'] <= 100.0
    assert runner.model.decode_head.num_classes == 6


@pytest.mark.trains('training, reloading and resuming is what it checks')
@pytest.mark.slow
def test_oriented_rcnn_on_synthetic_dior(demo_data, tmp_path):
    from mmcv.ops import RoIAlignRotated
    runner, metrics = _train_reload_resume(DET_DEMO_CONFIG, osp.join(demo_data, 'dior'),
                                           str(tmp_path), 'det')
    assert 'dota/mAP' in metrics and 0.0 <= metrics['dota/mAP'] <= 1.0
    roi_layer = runner.model.roi_head.bbox_roi_extractor.roi_layers[0]
    assert type(roi_layer) is RoIAlignRotated
    assert runner.model.roi_head.bbox_head.bbox_coder.angle_version == 'le90'


def test_compiled_rotated_ops_against_direct_computation():
    """mmcv's compiled rotated NMS and RoIAlignRotated, checked on cases with known answers."""
    from mmcv.ops import RoIAlignRotated, box_iou_rotated, nms_rotated
    from mmcv.utils import ext_loader
    ext_loader.load_ext('_ext', ['nms_rotated', 'roi_align_rotated_forward'])

    boxes = torch.tensor([[10., 10., 8., 4., 0.], [11., 10., 8., 4., 0.],
                          [40., 40., 8., 4., 0.5]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    # axis-aligned boxes shifted by 1 px: overlap 7x4 over union 36
    iou = box_iou_rotated(boxes[:1], boxes[1:2])
    assert iou.item() == pytest.approx(28 / 36, abs=1e-4)
    rotated_90 = torch.tensor([[10., 10., 4., 8., np.pi / 2]])
    assert box_iou_rotated(boxes[:1], rotated_90).item() == pytest.approx(1.0, abs=1e-4)
    _, keep = nms_rotated(boxes, scores, iou_threshold=0.5)
    assert keep.tolist() == [0, 2]

    # RoIAlignRotated of a linear ramp at angle 0 samples the ramp at the bin centres
    ramp = torch.arange(16.).repeat(16, 1)[None, None]  # value = x
    roi = torch.tensor([[0., 8., 8., 8., 4., 0.]])
    out = RoIAlignRotated(output_size=(1, 4), spatial_scale=1.0, sampling_ratio=2,
                          aligned=True, clockwise=True)(ramp, roi)
    np.testing.assert_allclose(out.flatten().numpy(), [4.5, 6.5, 8.5, 10.5], atol=1e-4)


@pytest.mark.trains('that the model learns is what it checks')
@pytest.mark.slow
def test_tiny_upernet_learns_the_synthetic_scenes(demo_data, tmp_path):
    """A few CPU-seconds of training already separate the large classes."""
    cfg = demo_config(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), str(tmp_path), iters=60)
    cfg.train_dataloader.batch_size = 4
    cfg.experiment_name = 'seg-learns'
    runner = Runner.from_cfg(cfg)
    runner.train()
    losses, _ = runner.message_hub.get_scalar('train/loss').data
    assert losses[-10:].mean() < 0.7 * losses[:10].mean(), losses
    metrics = runner.test()
    assert metrics["aAcc"] > 70.0, metrics  # predicting grass everywhere scores ~60
