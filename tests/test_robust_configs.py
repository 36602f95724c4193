"""The corruption-aware training configs (``*_robust.py``): one per task config and demo
config, identical to it except for the training loader, the corruption step where the
placement rules put a corruption step, the sensor pool, and a pipeline that runs."""
import copy
import glob
import os.path as osp

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.dataset import Compose
from mmengine.registry import init_default_scope

import reobench_mm  # noqa: F401
from reobench_mm.corruptions import list_corruptions
from reobench_mm.transforms import training_corruptions
from reobench_mm.transforms.placement import is_valid_position, transform_name

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
TASK_CONFIGS = sorted(p for d in ('upernet', 'oriented_rcnn', 'demo')
                      for p in glob.glob(osp.join(ROOT, 'configs', d, '*.py'))
                      if not p.endswith('_robust.py') and 'ensemble' not in p
                      and 'linear-probe' not in p)
ROBUST_CONFIGS = sorted(glob.glob(osp.join(ROOT, 'configs', '*', '*_robust.py')))


def _names(paths):
    return [osp.basename(p) for p in paths]


def test_every_task_config_has_a_robust_twin():
    twins = {p[:-len('_robust.py')] + '.py' for p in ROBUST_CONFIGS}
    assert twins == set(TASK_CONFIGS)
    assert len(ROBUST_CONFIGS) == 2 * 10 + 2  # 10 backbones x 2 tasks + 2 demo models


@pytest.mark.parametrize('path', ROBUST_CONFIGS, ids=_names(ROBUST_CONFIGS))
def test_robust_config_changes_only_the_training_loader(path):
    robust = Config.fromfile(path)
    plain = Config.fromfile(path[:-len('_robust.py')] + '.py')
    extra = {'_pipeline', 'random_corruption'}
    assert set(robust.keys()) - set(plain.keys()) <= extra
    for key in plain.keys():
        if key != 'train_dataloader':
            assert robust[key] == plain[key], key
    loader, plain_loader = robust.train_dataloader, plain.train_dataloader
    assert {k: v for k, v in loader.items() if k not in ('sampler', 'dataset')} == \
        {k: v for k, v in plain_loader.items() if k not in ('sampler', 'dataset')}
    assert loader.sampler == dict(type='EpochIndexSampler', sampler=plain_loader.sampler)
    assert loader.dataset.type == 'EpochIndexedDataset'
    inner = copy.deepcopy(loader.dataset.dataset)
    steps = inner.pop('pipeline')
    expected = {k: v for k, v in plain_loader.dataset.items() if k != 'pipeline'}
    assert inner == expected
    # the plain pipeline with one RandomCorruption where a geometric corruption step goes
    index = [transform_name(s) for s in steps].index('RandomCorruption')
    assert steps[:index] + steps[index + 1:] == plain_loader.dataset.pipeline
    names = [transform_name(s) for s in plain_loader.dataset.pipeline]
    assert is_valid_position(names, index, geometric=True)
    assert steps[index] == dict(type='RandomCorruption', corruptions='sensor',
                                severities=[1, 2, 3, 4, 5], prob=0.5, seed=0)
    assert training_corruptions(robust) == {
        'reobench': list_corruptions('reobench', 'sensor')}
    assert training_corruptions(plain) == {}


def _fake_sample(cfg, size):
    """A loaded sample as the steps before the corruption leave it: an image and its
    labels (a label map, or rotated boxes)."""
    rng = np.random.default_rng(0)
    sample = dict(img=rng.integers(0, 255, (size, size, 3), dtype=np.uint8),
                  img_path=f'/data/tile_{size}.png', ori_shape=(size, size),
                  img_shape=(size, size), data_epoch=3, sample_idx=0)
    if 'Seg' in cfg.train_dataloader.dataset.dataset.pipeline[-1]['type']:
        sample.update(gt_seg_map=rng.integers(0, 6, (size, size), dtype=np.uint8),
                      seg_fields=['gt_seg_map'], reduce_zero_label=True)
    else:
        import torch
        from mmrotate.structures.bbox import RotatedBoxes
        sample.update(gt_bboxes=RotatedBoxes(torch.tensor([[60.0, 70.0, 40.0, 20.0, 0.3]])),
                      gt_bboxes_labels=np.array([1]), gt_ignore_flags=np.array([False]))
    return sample


@pytest.mark.parametrize('path', [p for p in ROBUST_CONFIGS if '/demo/' in p
                                  or 'rvsa-b_' in osp.basename(p)],
                         ids=_names([p for p in ROBUST_CONFIGS if '/demo/' in p
                                     or 'rvsa-b_' in osp.basename(p)]))
def test_robust_training_pipeline_runs_from_the_corruption_step(path):
    """The steps from RandomCorruption on, built from the config, on a loaded sample of
    the task: the sample comes out corrupted (or clean) as drawn for its epoch."""
    cfg = Config.fromfile(path)
    init_default_scope(cfg.default_scope)
    steps = cfg.train_dataloader.dataset.dataset.pipeline
    index = [transform_name(s) for s in steps].index('RandomCorruption')
    pipeline = Compose(copy.deepcopy(steps[index:]))
    conditions = set()
    for epoch in range(8):
        sample = _fake_sample(cfg, 256)
        sample['data_epoch'] = epoch
        out = pipeline(sample)
        assert out is not None and 'inputs' in out
        conditions.add(pipeline.transforms[0].condition.corruption)
    assert 'clean' in conditions and conditions - {'clean'}
    assert conditions - {'clean'} <= set(list_corruptions('reobench', 'sensor'))
