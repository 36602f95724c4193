"""Checks shared by the FPN-probe encoder tests: the probe config against its task base,
the whole probe built on the meta device, a tiny probe trained through MMEngine's Runner
and the checkpoint it saves (the encoder bit for bit, the decoder moved)."""
import copy
import os.path as osp
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from mmengine.config import Config, ConfigDict
from mmengine.registry import init_default_scope
from torch import nn

from reobench_mm.registry import MODELS


def crop_pipeline(size: int) -> List[dict]:
    """The training pipeline that takes random ``size`` px crops (no resize)."""
    return [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', reduce_zero_label=True),
            dict(type='RandomCrop', crop_size=(size, size)), dict(type='PackSegInputs')]


def train_tiny_probe(cfg: Config, data_root: str, work_dir: str, *, iterations: int,
                     batch_size: int = 3, checkpoint: Optional[str] = None,
                     backbone: Optional[dict] = None,
                     neck_channels: Optional[Sequence[int]] = None,
                     pipeline: Optional[List[dict]] = None) -> Dict[str, torch.Tensor]:
    """Train ``cfg`` one epoch through ``Runner.from_cfg`` and return the saved state dict.

    ``cfg`` is changed in place: ``backbone`` entries update the backbone, ``checkpoint``
    becomes its ``Pretrained`` ``init_cfg``, ``neck_channels`` narrows the decoder (the
    neck takes those widths and gives 16 channels, the head's 64), ``pipeline`` replaces
    the training pipeline; the loader reads ``data_root`` in batches of ``batch_size``
    without workers, validation is off, the seed 0. Asserts the epoch ran ``iterations``
    steps with finite losses, then loads ``epoch_1.pth`` from ``work_dir``.
    """
    from mmengine.runner import Runner
    cfg.work_dir = work_dir
    cfg.log_level = 'WARNING'
    if backbone is not None:
        cfg.model.backbone.update(backbone)
    if checkpoint is not None:
        cfg.model.backbone.init_cfg = dict(type='Pretrained', checkpoint=checkpoint)
    if neck_channels is not None:
        cfg.model.neck.update(in_channels=list(neck_channels), out_channels=16)
        cfg.model.decode_head.update(in_channels=[16] * 4, channels=64)
    options = {
        'train_dataloader.batch_size': batch_size, 'train_dataloader.num_workers': 0,
        'train_dataloader.persistent_workers': False,
        'train_dataloader.dataset.data_root': data_root,
        'train_cfg.max_epochs': 1, 'val_cfg': None, 'val_dataloader': None,
        'val_evaluator': None, 'randomness': dict(seed=0)}
    if pipeline is not None:
        options['train_dataloader.dataset.pipeline'] = pipeline
    cfg.merge_from_dict(options)
    runner = Runner.from_cfg(cfg)
    runner.train()
    losses, _ = runner.message_hub.get_scalar('train/loss').data
    assert len(losses) == iterations and np.all(np.isfinite(losses))
    return torch.load(osp.join(work_dir, 'epoch_1.pth'), map_location='cpu',
                      weights_only=False)['state_dict']


def assert_encoder_saved_as(saved: Dict[str, torch.Tensor],
                            encoder: Dict[str, torch.Tensor], *, prefix: str = 'backbone.',
                            exact: bool = False) -> None:
    """Every ``encoder`` tensor is in ``saved`` under ``prefix``, bit for bit; with
    ``exact`` the saved keys under ``prefix`` are exactly the encoder's."""
    if exact:
        assert {k[len(prefix):] for k in saved if k.startswith(prefix)} == set(encoder)
    for key, value in encoder.items():
        assert torch.equal(saved[f'{prefix}{key}'], value), key


def assert_decoder_moved(saved: Dict[str, torch.Tensor],
                         count: Optional[int] = None) -> None:
    """The neck's and the head's biases (zero at first) all moved off zero; ``count``:
    how many there are (``None``: at least one)."""
    biases = [k for k in saved if k.startswith(('neck.', 'decode_head.')) and
              k.endswith('bias')]
    if count is None:
        assert biases
    else:
        assert len(biases) == count
    assert all(saved[k].abs().min() > 0 for k in biases)


def assert_probe_is_the_task_base(cfg: Config, task: Config) -> None:
    """The probe's model is the task base's but for the backbone, the neck's input widths
    and the preprocessor's mean and std; every other top-level key is the task's."""
    ours, theirs = copy.deepcopy(cfg.model), copy.deepcopy(task.model)
    for m in (ours, theirs):
        m.pop('backbone'), m.neck.pop('in_channels')
        m.data_preprocessor.pop('mean'), m.data_preprocessor.pop('std')
    assert ours == theirs
    for key in set(task.keys()) - {'model'}:
        assert cfg[key] == task[key], key


def build_on_meta(cfg: Config, input_shape: Tuple[int, ...],
                  model_cfg: Optional[ConfigDict] = None
                  ) -> Tuple[nn.Module, List[torch.Tensor], torch.Tensor]:
    """Build the whole probe (``model_cfg``, else ``cfg.model``) on the meta device in the
    config's scope and run an empty ``input_shape`` batch through the backbone, the neck
    and the head: the model, the backbone's levels and the logits."""
    init_default_scope(cfg.default_scope)
    with torch.device('meta'):
        model = MODELS.build(cfg.model if model_cfg is None else model_cfg)
        levels = model.backbone(torch.empty(*input_shape))
        logits = model.decode_head(model.neck(levels))
    return model, levels, logits


def seg_samples(size: int, num_classes: int, generator: Optional[torch.Generator] = None,
                count: int = 2) -> list:
    """``count`` segmentation samples of ``size`` px with random labels below
    ``num_classes`` (drawn from ``generator``, else torch's global one)."""
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    samples = []
    for _ in range(count):
        sample = SegDataSample(metainfo=dict(img_shape=(size, size), ori_shape=(size, size),
                                             pad_shape=(size, size)))
        sample.gt_sem_seg = PixelData(data=torch.randint(0, num_classes, (1, size, size),
                                                         generator=generator))
        samples.append(sample)
    return samples
