"""Helpers of the tests of the datasets read in their official layouts: samples loaded
through a dataset's pipeline, per-class pixel counts of label maps, a set built as the
robustness loops build a shift set, and a tiny segmentor config on a shipped dataset
config (for MMSegmentation's own ``tools/test.py``)."""
import os.path as osp
from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from mmengine.registry import DefaultScope
from mmengine.runner import Runner

from reobench_mm.registry import DATASETS
from reobench_mm.robustness.conditions.shifts import ShiftSet, parse_shifts
from reobench_mm.robustness.shifted_data import ConditionData, shift_dataloader_cfg

#: The ignored label of every shipped dataset config.
IGNORE = 255


def loaded_samples(dataset: Any) -> List[Tuple[dict, np.ndarray]]:
    """``[(data info, loaded label map)]`` of every sample, through the pipeline."""
    out = []
    for index in range(len(dataset)):
        sample = dataset[index]
        out.append((dataset.get_data_info(index), sample['data_samples'].gt_sem_seg.data
                    .numpy()[0]))
    return out


def label_counts(labels: Sequence[np.ndarray], num_classes: int) -> np.ndarray:
    """Per-class pixel counts of label maps (the ignored label left out); every other
    value must be a class."""
    total = np.zeros(num_classes, np.int64)
    for label in labels:
        kept = label[label != IGNORE].astype(np.int64)
        assert kept.size == 0 or kept.max() < num_classes, np.unique(kept)
        total += np.bincount(kept.ravel(), minlength=num_classes)
    return total


def as_shift_condition(test_loader_cfg: Mapping[str, Any], entry: Mapping[str, Any],
                       name: str) -> Tuple[ShiftSet, Any]:
    """The shift set ``entry`` built as the robustness loops build it beside the test set
    of ``test_loader_cfg``: parsed, its dataloader derived from the test dataloader, the
    corruption step placed, and the loops' checks (classes, label rules, the class map's
    ignored label) run. Returns the parsed set and the built dataset."""
    (shift, ) = parse_shifts({name: dict(entry)})
    what = f'shift set {name!r}'
    with DefaultScope.overwrite_default_scope('mmseg'):
        reference = DATASETS.build(test_loader_cfg['dataset'])
        data = ConditionData(lambda cfg: Runner.build_dataloader(cfg, seed=0), reference,
                             'mmseg', IGNORE)
        loader, steps = data.dataloader(
            f'shift:{name}',
            lambda: data.place(shift_dataloader_cfg(test_loader_cfg, shift.dataset, what),
                               what), what)
    assert steps  # the switchable corruption step is in its pipeline
    return shift, loader.dataset


def tiny_segmentor_config(path: str, dataset_config: str, bands: int, num_classes: int,
                          value_range: Tuple[float, float],
                          test_dataset: Optional[Mapping[str, Any]] = None) -> str:
    """Write a config at ``path`` (returned) that tests a narrow ResNet-18 behind a
    ``bands`` -> 3 :class:`~reobench_mm.models.backbones.channel_adapter.ChannelAdapter`
    with an FCN head of ``num_classes`` on the dataset config ``dataset_config``: inputs
    normalised by the mean and standard deviation of a uniform draw over ``value_range``,
    the test dataloader without workers and its dataset updated with ``test_dataset``
    (e.g. ``dict(data_root=...)``, or ``dict(size=2, dataset=dict(data_root=...))`` for a
    wrapped set); no training or validation. Its visualizer is named after the file, so
    that several such configs can be run in one process."""
    low, high = value_range
    mean, std = (low + high) / 2, (high - low) / 12 ** 0.5
    name = osp.splitext(osp.basename(path))[0]
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(f"""_base_ = ['mmseg::_base_/default_runtime.py', {dataset_config!r}]
custom_imports = dict(imports=['reobench_mm'], allow_failed_imports=False)
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    type='EncoderDecoder',
    data_preprocessor=dict(type='SegDataPreProcessor', mean=[{mean!r}] * {bands},
                           std=[{std!r}] * {bands}, bgr_to_rgb=False, pad_val=0,
                           seg_pad_val={IGNORE}),
    backbone=dict(type='ChannelAdapter', in_channels={bands}, out_channels=3, backbone=dict(
        type='ResNetV1c', depth=18, stem_channels=16, base_channels=16, num_stages=4,
        out_indices=(3, ), norm_cfg=norm_cfg, style='pytorch')),
    decode_head=dict(type='FCNHead', in_channels=128, in_index=-1, channels=16, num_convs=1,
                     concat_input=False, dropout_ratio=0.0, num_classes={num_classes},
                     norm_cfg=norm_cfg, align_corners=False,
                     loss_decode=dict(type='CrossEntropyLoss', loss_weight=1.0)),
    train_cfg=dict(), test_cfg=dict(mode='whole'))
test_dataloader = dict(num_workers=0, persistent_workers=False,
                       dataset={dict(test_dataset or {})!r})
train_dataloader = val_dataloader = val_evaluator = None  # testing only
train_cfg = val_cfg = None
test_cfg = dict(type='TestLoop')
visualizer = dict(name={'visualizer_' + name!r})
log_level = 'INFO'
""")
    return path
