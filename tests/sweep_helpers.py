"""Helpers shared by the sweep tests: tiny checkpoints, the demo-data options of a
sweep, and listings of work dirs."""
import glob
import json
import os
import os.path as osp

import torch


def untrained_checkpoint(config, path):
    """A checkpoint of the config's freshly initialised model."""
    from mmengine.config import Config
    from mmengine.registry import DefaultScope

    from reobench_mm.registry import MODELS
    cfg = Config.fromfile(config)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(cfg.model)
    model.init_weights()
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, path)
    return path


def sweep_options(data_root, log_level='WARNING'):
    """--cfg-options of a test run on the demo data (as a dict and as arguments)."""
    options = {'log_level': log_level, 'test_dataloader.dataset.data_root': data_root,
               'test_dataloader.num_workers': 0, 'test_dataloader.persistent_workers': False}
    arguments = [f'{k}={v}' for k, v in options.items()]
    return options, arguments


def probe_training_options(data_root, encoder_checkpoint):
    """--cfg-options of a training driver's tiny run of the demo probe on the demo data:
    batch 2, the encoder from ``encoder_checkpoint``, no dataloader workers."""
    options = {'train_dataloader.batch_size': 2, 'log_level': 'WARNING',
               'model.backbone.init_cfg.checkpoint': encoder_checkpoint}
    for split in ('train', 'val', 'test'):
        options[f'{split}_dataloader.dataset.data_root'] = data_root
        options[f'{split}_dataloader.num_workers'] = 0
        options[f'{split}_dataloader.persistent_workers'] = False
    return options


def listing(folder):
    """``{relative path: file bytes or None for a folder}`` of everything under ``folder``
    (empty when it does not exist)."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            found[osp.relpath(osp.join(root, name), folder)] = None
        for name in files:
            with open(osp.join(root, name), 'rb') as handle:
                found[osp.relpath(osp.join(root, name), folder)] = handle.read()
    return found


def condition_records(folder):
    """``{condition key: record}`` of the condition files a robustness run wrote."""
    out = {}
    for path in sorted(glob.glob(osp.join(folder, 'conditions', '*.json'))):
        with open(path) as handle:
            record = json.load(handle)
        out[record['condition']] = record
    return out


def robustness_cfg(config, data_root, work_dir, checkpoint, batch_size=1, workers=0,
                   **test_cfg):
    """``config`` on ``data_root`` with ``RobustnessTestLoop(**test_cfg)`` (no plots unless
    asked), the checkpoint, quiet logs and no progress hook."""
    from mmengine.config import Config
    cfg = Config.fromfile(config)
    cfg.work_dir = work_dir
    cfg.log_level = 'WARNING'
    cfg.test_dataloader.dataset.data_root = data_root
    cfg.test_dataloader.num_workers = workers
    cfg.test_dataloader.persistent_workers = False
    cfg.test_dataloader.batch_size = batch_size
    cfg.custom_hooks = []
    cfg.load_from = checkpoint
    cfg.test_cfg = dict(type='RobustnessTestLoop', **dict(dict(plots=False), **test_cfg))
    return cfg


def assert_same_up_to_batching(records: dict, work_dir: str, other: dict, other_dir: str
                               ) -> None:
    """Two runs that differ in how the images were batched (test batch size, conditions
    joined in one forward) give the same records: the same task metrics and integer
    per-image statistics; the calibration metrics, which read the logits, and the
    detection scores equal to float32 rounding (the last bits of a convolution depend on
    the batch's summation order)."""
    import numpy as np
    import pytest
    from reobench_mm.evaluation.functional.condition_stats import read_stats_file
    assert sorted(records) == sorted(other)
    for key in records:
        one, two = records[key]['metrics'], other[key]['metrics']
        assert sorted(one) == sorted(two)
        assert {k: v for k, v in one.items() if not k.startswith('calib')} == \
            {k: v for k, v in two.items() if not k.startswith('calib')}, key
        for name in (k for k in one if k.startswith('calib')):
            # (rank metrics such as eAURC sort the confidences: rounding can swap
            # near-ties of an untrained model's confidences)
            assert two[name] == pytest.approx(one[name], rel=1e-5, abs=1e-9), \
                (key, name, one[name], two[name])
        task = [read_stats_file(osp.join(folder, 'conditions', runs[key]['images']['file'])).task
                for folder, runs in ((work_dir, records), (other_dir, other))]
        arrays = [t.to_arrays() for t in task]
        assert arrays[0].keys() == arrays[1].keys()
        for name, array in arrays[0].items():
            if array.dtype.kind == 'f':  # detection scores: the same to float32 rounding
                assert np.allclose(array, arrays[1][name], rtol=1e-5, atol=1e-7), (key, name)
            else:
                assert (array == arrays[1][name]).all(), (key, name)
