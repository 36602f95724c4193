"""``corruption_device='model'``: the torch engine corrupts on the model's device in the
test step; the numbers against the pipeline's (the same for the deterministic
corruptions, close for the noise), JPEG and geometric corruptions left in the pipeline,
fan-out, the fingerprint, and the refusals."""
import os.path as osp

import pytest
from mmengine.runner import Runner

import reobench_mm  # noqa: F401
from reobench_mm.errors import FingerprintMismatchError, SweepError

from conftest import SEG_DEMO_CONFIG, train_checkpoint
from sweep_helpers import condition_records, robustness_cfg

DETERMINISTIC = ['haze', 'brightness_contrast', 'gaussian_blur', 'cloud', 'data_gaps']
IN_PIPELINE = ['rotate', 'compression_artifacts']


@pytest.fixture(scope='module')
def checkpoint(demo_data, tmp_path_factory):
    return train_checkpoint(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'),
                            str(tmp_path_factory.mktemp('train')), 200)


def _run(demo_data, work_dir, checkpoint, **options):
    cfg = robustness_cfg(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), work_dir, checkpoint,
                         corruptions=DETERMINISTIC + ['gaussian_noise'] + IN_PIPELINE,
                         severities=[3], bootstrap=0, **options)
    Runner.from_cfg(cfg).test()
    return condition_records(work_dir)


@pytest.fixture(scope='module')
def runs(demo_data, checkpoint, tmp_path_factory):
    root = tmp_path_factory.mktemp('device')
    return {name: _run(demo_data, str(root / name), checkpoint, **options)
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
    # the noise is drawn by another generator: close, not equal
    noise = [r['gaussian_noise@3']['result']['value'] for r in (pipeline, model)]
    assert noise[0] == pytest.approx(noise[1], abs=2.0)
    assert noise[0] != pytest.approx(pipeline['clean']['result']['value'], abs=2.0)


def test_fan_out_on_the_device_equals_condition_by_condition(runs):
    model, fan = runs['model'], runs['fan_out']
    assert sorted(model) == sorted(fan)
    for key in model:
        assert model[key]['metrics'] == fan[key]['metrics'], key


def test_the_device_is_fingerprinted(runs, demo_data, checkpoint, tmp_path):
    assert runs['model']['haze@3']['fingerprint']['corruption_device'] == 'model'
    assert 'corruption_device' not in runs['pipeline']['haze@3']['fingerprint']
    work_dir = str(tmp_path / 'mixed')
    _run(demo_data, work_dir, checkpoint)
    with pytest.raises(FingerprintMismatchError, match='corruption_device'):
        _run(demo_data, work_dir, checkpoint, corruption_device='model')


def test_refusals(demo_data, checkpoint, tmp_path):
    with pytest.raises(SweepError, match='corruption_device must be one of'):
        _run(demo_data, str(tmp_path / 'a'), checkpoint, corruption_device='gpu')
    cfg = robustness_cfg(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), str(tmp_path / 'b'),
                         checkpoint, corruptions=['haze'], severities=[3], bootstrap=0,
                         corruption_device='model')
    pipeline = cfg.test_dataloader.dataset.pipeline
    pipeline.insert(1, dict(type='Resize', scale=(128, 128), keep_ratio=True))
    with pytest.raises(SweepError, match='not its original size'):
        Runner.from_cfg(cfg).test()
