"""The FPN probe as the calibration study describes it (its Sec. III-D) and its 224 px
configs.

- The neck and head that a probe config builds (MMSegmentation's ``MODELS`` registry,
  after ``import reobench_mm``) compute the published structure: 1x1 lateral convs, a
  top-down path that upsamples the coarser merged map *bilinearly* and adds it, 3x3
  output convs, then the head (every level resized bilinearly to the finest, concatenated,
  a 1x1 classifier). Checked against that structure written out with
  ``torch.nn.functional`` on the demo ResNet-18-tiny (strides 4 to 32), at input sizes
  where nearest and bilinear upsampling give different results (asserted, so a nearest
  top-down path would fail).
- Every FPN probe config (512 and 224, and the demo) loads, upsamples bilinearly in the
  top-down path and hooks four layers as Sec. III-D says per family (a ViT: four evenly
  spaced blocks, the last of each quarter; a CNN: its four stages), listed shallow to deep.
- The 224 configs: their 512 twin with every input image resized bilinearly to 224x224
  (``Resize`` in the training and test pipelines, checked against OpenCV on a real image:
  bilinear for the image, nearest for the label map), the encoders laid out for 224, the
  test labels kept at their original resolution (the evaluator scores them), and the
  corruption placed before the resize.
"""
import copy
import functools
import glob
import os
import os.path as osp
from typing import List, Sequence

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import init_default_scope

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.utils.config import insert_corruption

from helpers import PROJECT_ROOT
from test_probe_configs import BACKBONE_BASES, DEPTHS, NUM_CLASSES, TINY_CHANNELS, _names

PROBE_DIR = osp.join(PROJECT_ROOT, 'configs', 'probe')
FPN_512 = sorted(glob.glob(osp.join(PROBE_DIR, 'fpn-probe_*_potsdam-512x512.py')))
#: the backbone bases (configs/_base_/backbones/): each has a 512 and a 224 FPN probe
BASE_NAMES = sorted(osp.basename(p)[:-len('.py')] for p in BACKBONE_BASES)
#: the 224 probes of the backbone bases: each the 512 probe at 224 px
FPN_224 = sorted(p for p in glob.glob(osp.join(PROBE_DIR, 'fpn-probe_*_potsdam-224x224.py'))
                 if osp.basename(p).split('_')[1] in BASE_NAMES)
#: every other 224 probe (the calibration study's encoders, on Potsdam or other sets):
#: configs of their own, each built and trained by its encoder's tests
OWN_224 = sorted(set(glob.glob(osp.join(PROBE_DIR, 'fpn-probe_*-224x224.py'))) - set(FPN_224))
DEMO_FPN_PROBE = osp.join(PROJECT_ROOT, 'configs', 'demo',
                          'fpn-probe_r18-tiny_frozen_1xb4-600i_demo-potsdam-128x128.py')
BILINEAR_TOP_DOWN = dict(mode='bilinear', align_corners=False)
#: the keys in which a 224 config differs from its 512 twin
KEYS_224 = ('train_dataloader', 'val_dataloader', 'test_dataloader', 'train_pipeline',
            'test_pipeline', 'crop_size', 'input_size')
TINY_DEPTH, TINY_FPN = 8, 8


@functools.lru_cache(maxsize=None)
def _parsed(path: str) -> Config:
    return Config.fromfile(path)


def _config(path: str) -> Config:
    return copy.deepcopy(_parsed(path))


def _backbone_of(path: str) -> str:
    return osp.basename(path).split('_')[1]


def _quarters(depth: int) -> tuple:
    """Four evenly spaced blocks, the last of each quarter (counted from 0)."""
    return tuple(depth * q // 4 - 1 for q in (1, 2, 3, 4))


# ----------------------------------------------------------------------------- Sec. III-D

def _published_decoder(feats: Sequence[torch.Tensor], neck, head,
                       mode: str) -> torch.Tensor:
    """Sec. III-D written out: a 1x1 lateral conv per hooked layer; from the coarsest
    down, each merged map upsampled (``mode``) to the next finer layer's size and added
    to its lateral; a 3x3 conv on every merged map; the head resizes every level
    bilinearly to the finest one, concatenates them and applies a 1x1 classifier."""
    laterals = [F.conv2d(x, m.conv.weight, m.conv.bias)
                for x, m in zip(feats, neck.lateral_convs)]
    merged: List[torch.Tensor] = [torch.empty(0)] * 4
    merged[3] = laterals[3]
    for i in (2, 1, 0):
        size = laterals[i].shape[-2:]
        if mode == 'bilinear':
            up = F.interpolate(merged[i + 1], size=size, mode='bilinear',
                               align_corners=False)
        else:
            up = F.interpolate(merged[i + 1], size=size, mode='nearest')
        merged[i] = laterals[i] + up
    outs = [F.conv2d(x, m.conv.weight, m.conv.bias, padding=1)
            for x, m in zip(merged, neck.fpn_convs)]
    finest = outs[0].shape[-2:]
    concat = torch.cat([F.interpolate(x, size=finest, mode='bilinear', align_corners=False)
                        for x in outs], dim=1)
    return F.conv2d(concat, head.conv_seg.weight, head.conv_seg.bias)


@pytest.mark.parametrize('size', [64, 100])
def test_fpn_probe_forward_is_the_published_structure(size):
    """The demo probe's neck and head, built from its config through mmseg's registry,
    on the demo ResNet-18-tiny's four stages (64 px: levels 16, 8, 4, 2; 100 px: 25, 13,
    7, 4, not a factor of 2 apart), with random weights and biases."""
    from mmseg.registry import MODELS
    cfg = _config(DEMO_FPN_PROBE)
    init_default_scope('mmseg')
    torch.manual_seed(0)
    backbone_cfg = copy.deepcopy(cfg.model.backbone)
    backbone_cfg.pop('init_cfg')  # random weights: no checkpoint needed
    backbone = MODELS.build(backbone_cfg)
    neck, head = MODELS.build(cfg.model.neck), MODELS.build(cfg.model.decode_head)
    for module in (backbone, neck, head):
        module.eval()  # (ResNet's train() returns None, so not chained)
    with torch.no_grad():
        for param in list(neck.parameters()) + list(head.parameters()):
            param.copy_(torch.randn_like(param) * 0.2)  # biases too: none zero
        feats = backbone(torch.randn(2, 3, size, size))
        got = head(neck(feats))
        bilinear = _published_decoder(feats, neck, head, 'bilinear')
        nearest = _published_decoder(feats, neck, head, 'nearest')
    sizes = [tuple(x.shape[-2:]) for x in feats]
    assert sizes == [(-(-size // s),) * 2 for s in (4, 8, 16, 32)], sizes  # fine to coarse
    assert got.shape == (2, NUM_CLASSES) + sizes[0]
    torch.testing.assert_close(got, bilinear, rtol=1e-5, atol=1e-5)
    # the inputs make the two upsamplings differ, so a nearest top-down path would fail
    assert (bilinear - nearest).abs().max() > 100 * 1e-5
    assert not torch.allclose(got, nearest, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- every config

def test_every_backbone_base_has_a_512_and_a_224_probe():
    assert len(BASE_NAMES) == 10 and set(BASE_NAMES) <= set(DEPTHS)
    assert sorted(map(_backbone_of, FPN_224)) == BASE_NAMES
    assert set(BASE_NAMES) <= set(map(_backbone_of, FPN_512))
    for path in FPN_224:
        assert osp.basename(path) == \
            f'fpn-probe_{_backbone_of(path)}_frozen_1xb8-12e_potsdam-224x224.py'
        assert osp.isfile(path.replace('224x224', '512x512'))


@pytest.mark.parametrize('path', FPN_512 + FPN_224 + OWN_224 + [DEMO_FPN_PROBE],
                         ids=_names(FPN_512 + FPN_224 + OWN_224 + [DEMO_FPN_PROBE]))
def test_probe_config_has_bilinear_top_down_and_the_published_hooks(path):
    """Every FPN probe config; the hooks are checked for the ViTs (``out_indices``) and
    the demo CNN (encoders that always return their four stages have no setting)."""
    cfg = _config(path)
    neck, backbone = cfg.model.neck, cfg.model.backbone
    assert neck.type == 'FPN' and neck.num_outs == 4
    assert neck.upsample_cfg == BILINEAR_TOP_DOWN
    assert cfg.model.decode_head.input_transform == 'resize_concat'
    assert cfg.model.decode_head.align_corners is False
    assert len(neck.in_channels) == 4
    if path == DEMO_FPN_PROBE:  # a CNN: its four stages, shallow (fine) to deep (coarse)
        assert tuple(backbone.out_indices) == (0, 1, 2, 3)
        assert neck.in_channels == [16, 32, 64, 128]
    elif _backbone_of(path) in DEPTHS or 'out_indices' in backbone:
        # a ViT: four evenly spaced blocks, the last of each quarter, shallow to deep;
        # frozen_stages is its depth (every block frozen)
        # (a timm encoder is frozen whole by frozen=True; its depth is the last block's)
        blocks = tuple(backbone.out_indices)
        depth = DEPTHS.get(_backbone_of(path),
                           backbone.get('frozen_stages', blocks[-1] + 1))
        assert blocks == _quarters(depth)
        assert len({b - a for a, b in zip((-1, ) + blocks, blocks)}) == 1
        assert backbone.get('frozen_stages', depth) == depth
        assert backbone.get('frozen', True) is True


def _resize_steps(pipeline) -> list:
    return [s for s in pipeline if s['type'] == 'Resize']


@pytest.mark.parametrize('path', FPN_224, ids=_names(FPN_224))
def test_224_probe_is_its_512_twin_at_224_px(path):
    cfg = _config(path)
    twin = _config(path.replace('224x224', '512x512'))
    bilinear_224 = dict(type='Resize', scale=(224, 224), keep_ratio=False,
                        interpolation='bilinear')
    pipelines = {'train': cfg.train_dataloader.dataset.pipeline,
                 'val': cfg.val_dataloader.dataset.pipeline,
                 'test': cfg.test_dataloader.dataset.pipeline}
    for name, pipeline in pipelines.items():
        assert _resize_steps(pipeline) == [bilinear_224], name
        assert not any(s['type'] in ('RandomResize', 'RandomCrop') for s in pipeline), name
    # test: the image is resized, the labels are loaded after it (original resolution)
    kinds = [s['type'] for s in pipelines['test']]
    assert kinds == ['LoadImageFromFile', 'Resize', 'LoadAnnotations', 'PackSegInputs']
    assert [s['type'] for s in pipelines['train']][:3] == \
        ['LoadImageFromFile', 'LoadAnnotations', 'Resize']
    assert cfg.model.backbone.img_size == 224 and twin.model.backbone.img_size == 512
    assert cfg.model.data_preprocessor.size == (224, 224)
    # everything else is the 512 probe's
    model, twin_model = copy.deepcopy(cfg.model), copy.deepcopy(twin.model)
    for m in (model, twin_model):
        m.backbone.pop('img_size')
        m.data_preprocessor.pop('size')
    assert model == twin_model
    assert set(cfg.keys()) == set(twin.keys()) | {'input_size'}
    for key in sorted(set(cfg.keys()) - set(KEYS_224) - {'model'}):
        assert cfg[key] == twin[key], key
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        ours, theirs = copy.deepcopy(cfg[loader]), copy.deepcopy(twin[loader])
        ours.dataset.pop('pipeline'), theirs.dataset.pop('pipeline')
        assert ours == theirs, loader


@pytest.mark.parametrize('path', OWN_224, ids=_names(OWN_224))
def test_every_other_224_probe_takes_the_studys_input(path):
    """The calibration study's encoders' own 224 probes: every pipeline resizes the image
    bilinearly to 224x224 once (no random rescale or crop), the test pipeline loads the
    labels after the resize (scored at their resolution), and the preprocessor pads to
    224 where it pads at all."""
    cfg = _config(path)
    bilinear_224 = dict(type='Resize', scale=(224, 224), keep_ratio=False,
                        interpolation='bilinear')
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        pipeline = cfg[loader].dataset.pipeline
        assert _resize_steps(pipeline) == [bilinear_224], loader
        assert not any(s['type'] in ('RandomResize', 'RandomCrop') for s in pipeline), loader
    kinds = [s['type'] for s in cfg.test_dataloader.dataset.pipeline]
    assert kinds.index('Resize') < kinds.index('LoadAnnotations')
    assert cfg.model.data_preprocessor.get('size', (224, 224)) == (224, 224)


def _tiny_224_model(cfg: Config):
    """The config's model with the trunk narrowed (same type and patch size, 8 blocks of
    width TINY_CHANNELS) at the config's img_size, without pretrained weights."""
    from mmseg.registry import MODELS
    init_default_scope(cfg.default_scope)
    model_cfg = copy.deepcopy(cfg.model)
    backbone = model_cfg.backbone
    backbone.arch = dict(embed_dims=TINY_CHANNELS, depth=TINY_DEPTH, num_heads=2,
                         patch_size=cfg.patch_size)
    backbone.frozen_stages, backbone.out_indices = TINY_DEPTH, _quarters(TINY_DEPTH)
    backbone.pop('init_cfg')
    model_cfg.neck.update(in_channels=[TINY_CHANNELS] * 4, out_channels=TINY_FPN)
    model_cfg.decode_head.update(in_channels=[TINY_FPN] * 4, channels=4 * TINY_FPN)
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
    model.eval()
    return model


@pytest.mark.parametrize('path', FPN_224, ids=_names(FPN_224))
def test_224_probe_builds_at_224(path):
    """Narrowed, each encoder is laid out for 224 px (its patch grid: 224 / patch) and the
    model predicts a 224 px input through its data preprocessor."""
    cfg = _config(path)
    model = _tiny_224_model(cfg)
    grid = 224 // cfg.patch_size
    with torch.no_grad():
        levels = model.backbone(torch.randn(1, 3, 224, 224))
        assert [tuple(x.shape[-2:]) for x in levels] == [(grid, grid)] * 4
        image = torch.randint(0, 255, (3, 224, 224), dtype=torch.uint8)
        inputs = model.data_preprocessor(dict(inputs=[image]), False)['inputs']
        assert inputs.shape == (1, 3, 224, 224)
        logits = model.decode_head(model.neck(model.backbone(inputs)))
    assert logits.shape == (1, NUM_CLASSES, grid, grid)


# ----------------------------------------------------------------------------- the resize

def _potsdam_tile(root: str, size: int = 512) -> tuple:
    """One Potsdam-format tile (RGB png, labels 1..6 in blocks with a no-data corner)."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    image = cv2.GaussianBlur(image, (0, 0), 3)  # smooth enough to tell bilinear apart
    labels = np.kron(rng.integers(1, 7, (size // 32, size // 32)),
                     np.ones((32, 32), np.int64)).astype(np.uint8)
    labels[:37, :41] = 0  # no data: 255 after reduce_zero_label
    bgr = np.ascontiguousarray(image[..., ::-1])  # cv2 writes BGR arrays
    for folder, array in (('img_dir/val', bgr), ('ann_dir/val', labels)):
        path = osp.join(root, folder)
        os.makedirs(path, exist_ok=True)
        cv2.imwrite(osp.join(path, 'tile.png'), array)
    return image, labels


def _dataset(cfg: Config, root: str):
    from mmseg.registry import DATASETS
    init_default_scope('mmseg')
    dataset_cfg = copy.deepcopy(cfg.test_dataloader.dataset)
    dataset_cfg.data_root = root
    return DATASETS.build(dataset_cfg)


def test_224_resize_is_bilinear_for_images_and_nearest_for_labels(tmp_path):
    """The configs' ``Resize`` on a real tile against OpenCV: the image as cv2's
    INTER_LINEAR (not INTER_NEAREST), the labels as INTER_NEAREST (class ids only, not
    INTER_LINEAR's blends)."""
    from mmseg.registry import TRANSFORMS
    init_default_scope('mmseg')
    cfg = _config(FPN_224[0])
    image, labels = _potsdam_tile(str(tmp_path))
    steps = cfg.train_dataloader.dataset.pipeline
    load = [TRANSFORMS.build(s) for s in steps[:3]]  # image, labels, resize
    results = dict(img_path=str(tmp_path / 'img_dir/val/tile.png'),
                   seg_map_path=str(tmp_path / 'ann_dir/val/tile.png'),
                   reduce_zero_label=True, seg_fields=[])
    for transform in load:
        results = transform(results)
    bgr = image[..., ::-1]
    reduced = labels.astype(np.int64) - 1
    reduced[labels == 0] = 255
    reduced = reduced.astype(np.uint8)
    want_image = cv2.resize(bgr, (224, 224), interpolation=cv2.INTER_LINEAR)
    want_labels = cv2.resize(reduced, (224, 224), interpolation=cv2.INTER_NEAREST)
    assert results['img'].shape == (224, 224, 3)
    np.testing.assert_array_equal(results['img'], want_image)
    assert not np.array_equal(want_image,
                              cv2.resize(bgr, (224, 224), interpolation=cv2.INTER_NEAREST))
    np.testing.assert_array_equal(results['gt_seg_map'], want_labels)
    blended = cv2.resize(reduced, (224, 224), interpolation=cv2.INTER_LINEAR)
    assert not np.array_equal(blended, want_labels)  # bilinear would blend class ids
    assert set(np.unique(results['gt_seg_map'])) <= set(np.unique(reduced))


def test_224_test_pipeline_scores_labels_at_their_resolution(tmp_path):
    """The test pipeline as the dataset runs it: a 224 px input and the labels at 512, the
    model's logits upsampled to 512 and scored by the config's evaluator; with a
    corruption (a geometric one, which moves the labels), the corruption comes before
    the resize and the labels stay at 512."""
    from mmseg.registry import METRICS
    _potsdam_tile(str(tmp_path))
    cfg = _config(osp.join(PROBE_DIR, 'fpn-probe_rvsa-b_frozen_1xb8-12e_potsdam-224x224.py'))
    dataset = _dataset(cfg, str(tmp_path))
    sample = dataset[0]
    assert sample['inputs'].shape == (3, 224, 224)
    assert sample['data_samples'].gt_sem_seg.data.shape == (1, 512, 512)
    assert sample['data_samples'].ori_shape == (512, 512)
    model = _tiny_224_model(cfg)
    batch = dict(inputs=[sample['inputs']], data_samples=[sample['data_samples']])
    with torch.no_grad():
        outputs = model.test_step(batch)
    assert outputs[0].seg_logits.data.shape == (NUM_CLASSES, 512, 512)
    metric = METRICS.build(copy.deepcopy(cfg.test_evaluator))
    metric.dataset_meta = dataset.metainfo
    metric.process(batch, [o.to_dict() for o in outputs])
    assert 0 <= metric.compute_metrics(metric.results)['mIoU'] <= 100
    insert_corruption(cfg, 'rotate', 3)
    kinds = [s['type'] for s in cfg.test_dataloader.dataset.pipeline]
    assert kinds.index('ApplyCorruption') < kinds.index('Resize')
    corrupted = _dataset(cfg, str(tmp_path))[0]
    assert corrupted['inputs'].shape == (3, 224, 224)
    assert corrupted['data_samples'].gt_sem_seg.data.shape == (1, 512, 512)
    assert not torch.equal(corrupted['data_samples'].gt_sem_seg.data,
                           sample['data_samples'].gt_sem_seg.data)
