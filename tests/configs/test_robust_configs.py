"""The corruption-aware training configs (``*_robust.py``): one per task config and demo
config, identical to it except for the training loader (the epoch wrappers and the sensor
pool, which the dataset wrapper places by the placement rules), and a pipeline that runs;
and that placement on the toolboxes' own training pipelines, in their own step order."""
import copy
import glob
import os.path as osp

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.dataset import Compose
from mmengine.registry import init_default_scope

import reobench_mm  # noqa: F401
from reobench_corruptions import list_corruptions
from reobench_mm.transforms import training_corruptions
from reobench_mm.transforms.placement import (corruption_position, dataset_pipelines,
                                              is_valid_position, transform_name)

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TASK_CONFIGS = sorted(p for d in ('upernet', 'oriented_rcnn', 'demo')
                      for p in glob.glob(osp.join(ROOT, 'configs', d, '*.py'))
                      if not p.endswith('_robust.py') and 'ensemble' not in p
                      and 'linear-probe' not in p and 'fpn-probe' not in p
                      and 'svgp-probe' not in p)
ROBUST_CONFIGS = sorted(glob.glob(osp.join(ROOT, 'configs', '*', '*_robust.py')))


def _names(paths):
    return [osp.basename(p) for p in paths]


def test_every_task_config_has_a_robust_twin():
    twins = {p[:-len('_robust.py')] + '.py' for p in ROBUST_CONFIGS}
    assert twins == set(TASK_CONFIGS)
    assert len(ROBUST_CONFIGS) == 2 * 10 + 2  # 10 backbones x 2 tasks + 2 demo models


def _placed_pipeline(cfg):
    """The training pipeline of a ``_robust`` config as its EpochIndexedDataset builds it
    (the inner dataset is not read: lazy init)."""
    from reobench_mm.datasets.epoch import _place_corruption
    dataset = copy.deepcopy(cfg.train_dataloader.dataset.to_dict())
    inner = dataset['dataset']
    placements = _place_corruption(inner, dataset['corruption'])
    assert len(placements) == 1
    pipelines = [p for _, p in dataset_pipelines(inner)]
    return pipelines[0], placements[0]


@pytest.mark.parametrize('path', ROBUST_CONFIGS, ids=_names(ROBUST_CONFIGS))
def test_robust_config_changes_only_the_training_loader(path):
    robust = Config.fromfile(path)
    plain = Config.fromfile(path[:-len('_robust.py')] + '.py')
    extra = {'random_corruption'}
    assert set(robust.keys()) - set(plain.keys()) <= extra
    for key in plain.keys():
        if key != 'train_dataloader':
            assert robust[key] == plain[key], key
    loader, plain_loader = robust.train_dataloader, plain.train_dataloader
    assert {k: v for k, v in loader.items() if k not in ('sampler', 'dataset')} == \
        {k: v for k, v in plain_loader.items() if k not in ('sampler', 'dataset')}
    assert loader.sampler == dict(type='EpochIndexSampler', sampler=plain_loader.sampler)
    assert loader.dataset.type == 'EpochIndexedDataset'
    # the wrapped dataset is the plain one as written: no hand-placed step
    assert loader.dataset.dataset == plain_loader.dataset
    assert loader.dataset.corruption == dict(type='RandomCorruption', corruptions='sensor',
                                             severities=[1, 2, 3, 4, 5], prob=0.5, seed=0)
    # placed where the placement rules put a corruption step of a sensor pool
    steps, placement = _placed_pipeline(robust)
    index = [transform_name(s) for s in steps].index('RandomCorruption')
    assert steps[:index] + steps[index + 1:] == plain_loader.dataset.pipeline
    names = [transform_name(s) for s in plain_loader.dataset.pipeline]
    assert index == corruption_position(names) == placement.index
    assert is_valid_position(names, index, geometric=True)  # right after every loading step
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
    if 'Seg' in cfg.train_dataloader.dataset.dataset.pipeline[-1]['type']:  # PackSegInputs
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
    steps, _ = _placed_pipeline(cfg)
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


# ----------------------------------------------------------------------------- stock configs

def _stock_config(package, relative):
    """A config file shipped inside an installed toolbox (``.mim/configs``)."""
    import importlib
    root = osp.dirname(importlib.import_module(package).__file__)
    path = osp.join(root, '.mim', 'configs', relative)
    if not osp.isfile(path):
        pytest.skip(f'{package} does not ship {relative} ({path})')
    return path


@pytest.mark.parametrize('package,relative,pool,after', [
    # mmseg's Potsdam training pipeline: LoadImageFromFile, LoadAnnotations, RandomResize,
    # RandomCrop, RandomFlip, PhotoMetricDistortion, PackSegInputs
    ('mmseg', '_base_/datasets/potsdam.py', 'sensor', 'LoadAnnotations'),
    ('mmseg', '_base_/datasets/potsdam.py', 'geometric', 'LoadAnnotations'),
    ('mmseg', '_base_/datasets/loveda.py', 'all', 'LoadAnnotations'),
    # mmrotate's DOTA training pipeline: LoadImageFromFile, LoadAnnotations, ConvertBoxType,
    # Resize, RandomFlip, PackDetInputs
    ('mmrotate', '_base_/datasets/dota.py', 'sensor', 'ConvertBoxType'),
    ('mmrotate', '_base_/datasets/dota.py', 'geometric', 'ConvertBoxType'),
])
def test_wrapper_places_into_a_stock_training_pipeline(package, relative, pool, after):
    """A corruption-aware twin of a toolbox's own dataset config: the wrapper puts the step
    right after the loading steps of the stock pipeline, before its first resize, crop or
    flip, for appearance and geometric pools alike, and the built dataset runs it there."""
    from reobench_mm.datasets.epoch import EpochIndexedDataset
    cfg = Config.fromfile(_stock_config(package, relative))
    init_default_scope(package)
    stock = copy.deepcopy(cfg.train_dataloader.dataset.to_dict())
    stock['lazy_init'] = True  # the data is not there; the pipeline is built anyway
    names = [transform_name(s) for s in stock['pipeline']]
    wrapper = EpochIndexedDataset(stock, corruption=dict(type='RandomCorruption',
                                                         corruptions=pool), lazy_init=True)
    built = [transform_name(t) for t in wrapper.pipeline.transforms]
    index = built.index('RandomCorruption')
    assert built[:index] + built[index + 1:] == names
    assert built[index - 1] == after
    assert is_valid_position(names, index, geometric=True)
    assert [p.index for p in wrapper.placements] == [index]


def test_wrapper_refuses_a_second_corruption_step_and_other_steps():
    from reobench_mm.datasets.epoch import _place_corruption
    dataset = dict(type='BaseSegDataset', pipeline=[
        dict(type='LoadImageFromFile'), dict(type='LoadAnnotations'),
        dict(type='RandomCorruption', corruptions='sensor'), dict(type='PackSegInputs')])
    with pytest.raises(ValueError, match='already has a corruption step'):
        _place_corruption(dataset, dict(type='RandomCorruption', corruptions='sensor'))
    with pytest.raises(ValueError, match='must be a RandomCorruption config'):
        _place_corruption(dataset, dict(type='ApplyCorruption', corruption='cloud',
                                        severity=3))
    with pytest.raises(ValueError, match='no pipeline with an image-loading step'):
        _place_corruption(dict(type='BaseSegDataset', pipeline=[dict(type='PackSegInputs')]),
                          dict(type='RandomCorruption'))
