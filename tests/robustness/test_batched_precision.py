"""Test batches larger than one give the numbers of batch size one (both tasks, geometric
corruptions included); the forward precision (bf16 under autocast) runs, changes the
numbers only a little, is part of the fingerprint, and is checked."""
import os.path as osp

import pytest
from mmengine.runner import Runner

import reobench_mm  # noqa: F401
from reobench_mm.errors import FingerprintMismatchError, SweepError

from helpers import DET_DEMO_CONFIG, SEG_DEMO_CONFIG
from sweep_helpers import (assert_same_up_to_batching, condition_records, robustness_cfg,
                           untrained_checkpoint)


def _run(config, data_root, work_dir, checkpoint, batch_size=1, fp16=False, **options):
    cfg = robustness_cfg(config, data_root, work_dir, checkpoint, batch_size,
                         corruptions=['haze', 'rotate'], severities=[3], bootstrap=0,
                         fp16=fp16, **options)
    Runner.from_cfg(cfg).test()
    return condition_records(work_dir)


@pytest.mark.slow  # 7 s or more: left out of make test-fast
@pytest.mark.parametrize('config, folder', [(SEG_DEMO_CONFIG, 'potsdam'),
                                            (DET_DEMO_CONFIG, 'dior')])
def test_batch_sizes_one_and_four_give_the_same_numbers(demo_data, tmp_path, config, folder):
    checkpoint = untrained_checkpoint(config, str(tmp_path / 'model.pth'))
    runs = [_run(config, osp.join(demo_data, folder), str(tmp_path / f'b{b}'), checkpoint, b,
                 calibration=folder == 'potsdam')
            for b in (1, 4)]
    assert sorted(runs[0]) == ['clean', 'haze@3', 'rotate@3']
    assert_same_up_to_batching(runs[0], str(tmp_path / 'b1'), runs[1], str(tmp_path / 'b4'))


def test_bf16_changes_the_numbers_only_a_little_and_is_fingerprinted(demo_data, tmp_path,
                                                                     trained_seg_checkpoint):
    root = osp.join(demo_data, 'potsdam')
    fp32 = _run(SEG_DEMO_CONFIG, root, str(tmp_path / 'fp32'), trained_seg_checkpoint)
    bf16 = _run(SEG_DEMO_CONFIG, root, str(tmp_path / 'bf16'), trained_seg_checkpoint,
                precision='bf16')
    for key in fp32:
        a, b = fp32[key]['result']['value'], bf16[key]['result']['value']
        assert abs(a - b) < 2.0, (key, a, b)
        assert bf16[key]['fingerprint']['precision'] == 'bf16'
        assert 'precision' not in fp32[key]['fingerprint']
    assert any(fp32[k]['metrics'] != bf16[k]['metrics'] for k in fp32)  # it did run in bf16
    with pytest.raises(FingerprintMismatchError, match='precision'):
        _run(SEG_DEMO_CONFIG, root, str(tmp_path / 'fp32'), trained_seg_checkpoint, precision='bf16')


def test_bad_precisions_are_refused(demo_data, tmp_path, trained_seg_checkpoint):
    root = osp.join(demo_data, 'potsdam')
    with pytest.raises(SweepError, match="precision must be one of"):
        _run(SEG_DEMO_CONFIG, root, str(tmp_path / 'a'), trained_seg_checkpoint, precision='int8')
    with pytest.raises(SweepError, match='give one of them'):
        _run(SEG_DEMO_CONFIG, root, str(tmp_path / 'b'), trained_seg_checkpoint, fp16=True,
             precision='bf16')


@pytest.mark.parametrize('precision', ['bf16', 'fp16'])
def test_half_precision_is_refused_for_a_rotated_detector_before_the_run(
        demo_data, tmp_path, precision):
    """MMRotate's box post-processing needs float32: a half-precision forward ended inside
    it (NumPy has no bfloat16; OpenCV's convex hull takes no float16). Refused when the loop
    is built, nothing written; the reason is real (the forward fails that way)."""
    import torch
    checkpoint = untrained_checkpoint(DET_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    cfg = robustness_cfg(DET_DEMO_CONFIG, osp.join(demo_data, 'dior'), str(tmp_path / 'w'),
                         checkpoint, 1, corruptions=['haze'], severities=[3],
                         precision=precision)
    runner = Runner.from_cfg(cfg)
    with pytest.raises(SweepError, match=rf"precision='{precision}' is for segmentation "
                                         r"models: MMRotate's post-processing"):
        runner.test()
    assert not osp.exists(tmp_path / 'w' / 'conditions')
    # what the refusal prevents
    from reobench_mm.engine.precision import forward_precision
    runner.model.eval()
    batch = next(iter(Runner.build_dataloader(cfg.test_dataloader)))
    import cv2
    with pytest.raises((TypeError, cv2.error)) as failed, torch.no_grad(), \
            forward_precision(precision, runner.model):
        runner.model.test_step(batch)
    assert 'BFloat16' in str(failed.value) or 'convexHull' in str(failed.value)
