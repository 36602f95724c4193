"""Frozen-encoder FPN probes (the calibration study's segmentation probe): every config
resolves to its backbone base's pretrained encoder, frozen whole, hooked at the last block
of each quarter, with MMSegmentation's FPN neck and a resize-and-concatenate 1x1 head, and
is otherwise the linear probe of the same backbone. Narrowed to tiny widths, each builds,
predicts and trains its decoder only (the encoder stays bit-identical, without gradient);
the decoder's forward equals a direct computation with torch ops on the same weights. The
demo FPN probe loads and keeps its encoder and trains through ``tools/train.py``."""
import copy
import functools
import glob
import os.path as osp
from typing import List, Sequence

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import MODELS, init_default_scope

import reobench_mm  # noqa: F401  (registration)

import test_probe_configs
from helpers import PROJECT_ROOT, train_checkpoint
from test_probe_configs import (BACKBONE_BASES, DEMO_PROBE_CONFIG, DEPTHS, NUM_CLASSES,
                                TINY_CHANNELS, _batch, _names, _snapshot)

#: the linear probe tests' demo encoder checkpoint (a module-scoped fixture), shared
demo_encoder_checkpoint = test_probe_configs.demo_encoder_checkpoint

#: the 512x512 FPN probes of the backbone bases (the 224x224 ones:
#: test_fpn_probe_published.py; those of the natural-image encoders, which have no
#: backbone base: tests/models/test_timm_feature_encoders.py)
FPN_PROBE_CONFIGS = sorted(
    p for p in glob.glob(osp.join(PROJECT_ROOT, 'configs/probe/fpn-probe_*_potsdam-512x512.py'))
    if osp.isfile(osp.join(PROJECT_ROOT, 'configs/_base_/backbones',
                           osp.basename(p).split('_')[1] + '.py')))
LINEAR_PROBE_CONFIGS = sorted(glob.glob(osp.join(PROJECT_ROOT,
                                                 'configs/probe/linear-probe_*.py')))
DEMO_FPN_PROBE_CONFIG = osp.join(PROJECT_ROOT, 'configs', 'demo',
                                 'fpn-probe_r18-tiny_frozen_1xb4-600i_demo-potsdam-128x128.py')
#: depth -> the hooked blocks: the last block of each quarter of the trunk
HOOKED_BLOCKS = {12: (2, 5, 8, 11), 24: (5, 11, 17, 23), 32: (7, 15, 23, 31),
                 8: (1, 3, 5, 7)}
FPN_CHANNELS = 256
#: the narrowed models: an 8-block trunk of width TINY_CHANNELS, 8-channel FPN levels
TINY_DEPTH, TINY_FPN, SIZE = 8, 8, 64
#: the demo ResNet-18's stage widths and the demo FPN width
DEMO_STAGES, DEMO_FPN = [16, 32, 64, 128], 32


@functools.lru_cache(maxsize=None)
def _parsed(path: str) -> Config:
    return Config.fromfile(path)


def _config(path: str) -> Config:
    """``Config.fromfile``, parsed once per file (a copy each time)."""
    return copy.deepcopy(_parsed(path))


def _backbone_of(path: str) -> str:
    """``{linear,fpn}-probe_{backbone}_frozen_...``."""
    return osp.basename(path).split('_')[1]


def _linear_twin(path: str) -> str:
    return osp.join(osp.dirname(path), osp.basename(path).replace('fpn-probe_', 'linear-probe_'))


def _decoder_parameter_count(in_channels: Sequence[int], fpn_channels: int,
                             classes: int) -> int:
    """A lateral 1x1 conv per level, 4 fpn 3x3 convs (weights and biases), the 1x1
    classifier on the 4 concatenated levels."""
    laterals = sum(c * fpn_channels + fpn_channels for c in in_channels)
    fpn_convs = 4 * (9 * fpn_channels * fpn_channels + fpn_channels)
    return laterals + fpn_convs + 4 * fpn_channels * classes + classes


def _decoder_parameters(model) -> dict:
    return {n: p for n, p in model.named_parameters()
            if n.startswith('neck.') or n.startswith('decode_head.')}


# ----------------------------------------------------------------------------- checks

def _check_fpn_decoder(model, in_channels: Sequence[int], fpn_channels: int) -> None:
    """MMSegmentation's FPN (1x1 laterals, 3x3 convs, no norm, no activation, no extra
    levels) and an FCNHead without convolutions over the 4 resized, concatenated levels;
    no auxiliary head; the neck and the head are everything outside the encoder."""
    from mmseg.models.decode_heads import FCNHead
    from mmseg.models.necks import FPN
    assert not model.with_auxiliary_head
    neck, head = model.neck, model.decode_head
    assert type(neck) is FPN and neck.num_outs == 4 and not neck.add_extra_convs
    assert neck.upsample_cfg == dict(mode='bilinear', align_corners=False)
    assert len(neck.lateral_convs) == len(neck.fpn_convs) == 4
    for lateral, fpn, channels in zip(neck.lateral_convs, neck.fpn_convs, in_channels):
        assert (lateral.conv.in_channels, lateral.conv.out_channels) == (channels, fpn_channels)
        assert lateral.conv.kernel_size == (1, 1)
        assert (fpn.conv.in_channels, fpn.conv.out_channels) == (fpn_channels, fpn_channels)
        assert fpn.conv.kernel_size == (3, 3) and fpn.conv.padding == (1, 1)
        for conv in (lateral, fpn):
            assert not conv.with_norm and not conv.with_activation
            assert conv.conv.bias is not None
    assert type(head) is FCNHead and head.num_convs == 0 and not head.concat_input
    assert isinstance(head.convs, torch.nn.Identity) and head.dropout is None
    assert head.input_transform == 'resize_concat' and list(head.in_index) == [0, 1, 2, 3]
    assert head.conv_seg.kernel_size == (1, 1)
    assert (head.conv_seg.in_channels, head.conv_seg.out_channels) == \
        (4 * fpn_channels, NUM_CLASSES)
    outside = {n for n, p in model.named_parameters() if p.requires_grad
               and not n.startswith('backbone.')}
    assert outside == set(_decoder_parameters(model))
    assert sum(p.numel() for p in _decoder_parameters(model).values()) == \
        _decoder_parameter_count(in_channels, fpn_channels, NUM_CLASSES)


def _reference_decoder(model, feats: Sequence[torch.Tensor]) -> torch.Tensor:
    """The decoder written with torch ops on the model's weights: lateral 1x1 convs,
    top-down bilinear upsample-and-add (coarsest first), 3x3 convs, every level resized
    bilinearly to the first level's size and concatenated, a 1x1 classifier."""
    neck, head = model.neck, model.decode_head
    laterals: List[torch.Tensor] = [
        F.conv2d(x, m.conv.weight, m.conv.bias) for x, m in zip(feats, neck.lateral_convs)]
    for i in range(3, 0, -1):
        laterals[i - 1] = laterals[i - 1] + F.interpolate(
            laterals[i], size=laterals[i - 1].shape[-2:], mode='bilinear',
            align_corners=False)
    outs = [F.conv2d(x, m.conv.weight, m.conv.bias, padding=1)
            for x, m in zip(laterals, neck.fpn_convs)]
    size = outs[0].shape[-2:]
    concat = torch.cat([F.interpolate(x, size=size, mode='bilinear', align_corners=False)
                        for x in outs], dim=1)
    return F.conv2d(concat, head.conv_seg.weight, head.conv_seg.bias)


def _check_forward_matches_reference(model, same_size_levels: bool) -> None:
    """With random decoder weights and biases (none zero, so a bias, a norm or an
    activation that should not be there would show), the head's logits and the model's
    upsampled logits equal the direct computation."""
    torch.manual_seed(5)
    with torch.no_grad():
        for param in _decoder_parameters(model).values():
            param.copy_(torch.randn_like(param) * 0.2)
    model.eval()
    images = torch.randn(2, 3, SIZE, SIZE)
    with torch.no_grad():
        feats = model.extract_feat(images)  # backbone, then neck
        levels = model.backbone(images)
        sizes = [tuple(x.shape[-2:]) for x in levels]
        if same_size_levels:  # a ViT's blocks all have stride = patch size
            assert len(set(sizes)) == 1, sizes
        else:  # the demo ResNet: strides 4, 8, 16, 32
            assert sizes == [(SIZE // s, SIZE // s) for s in (4, 8, 16, 32)], sizes
        expected = _reference_decoder(model, levels)
        assert len(feats) == 4 and [tuple(x.shape[-2:]) for x in feats] == sizes
        logits = model.decode_head(feats)
        metas = [dict(img_shape=(SIZE, SIZE), ori_shape=(SIZE, SIZE),
                      pad_shape=(SIZE, SIZE))] * 2
        upsampled = model.encode_decode(images, metas)
    assert logits.shape == (2, NUM_CLASSES) + sizes[0]
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        upsampled, F.interpolate(expected, size=(SIZE, SIZE), mode='bilinear',
                                 align_corners=False), rtol=1e-5, atol=1e-5)


def _check_training_steps(model, optim_cfg, steps: int = 2) -> None:
    """Training steps at a large learning rate: the encoder (parameters and buffers)
    stays bit-identical and gets no gradient, every decoder tensor moves; then a
    prediction."""
    optim_cfg = copy.deepcopy(optim_cfg)
    optim_cfg.optimizer.lr = 0.5  # any update would show
    optim = build_optim_wrapper(model, optim_cfg)
    encoder_before = _snapshot(model.backbone)
    decoder_before = {**{f'neck.{k}': v for k, v in _snapshot(model.neck).items()},
                      **{f'decode_head.{k}': v for k, v in _snapshot(model.decode_head).items()}}
    assert set(decoder_before) == set(_decoder_parameters(model))  # no buffers
    model.train()
    for step in range(steps):
        losses = model.train_step(_batch(SIZE, seed=step), optim)
        assert all(torch.isfinite(v).all() for v in losses.values())
    encoder_after = _snapshot(model.backbone)
    assert encoder_after.keys() == encoder_before.keys()
    changed = [k for k in encoder_before if not torch.equal(encoder_before[k], encoder_after[k])]
    assert changed == [], f'the frozen encoder changed: {changed}'
    assert all(p.grad is None for p in model.backbone.parameters())
    decoder_after = {n: p.detach() for n, p in _decoder_parameters(model).items()}
    unchanged = [k for k in decoder_before if torch.equal(decoder_before[k], decoder_after[k])]
    assert unchanged == [], f'decoder tensors that did not train: {unchanged}'
    model.eval()
    with torch.no_grad():
        predictions = model.test_step(_batch(SIZE))
    assert predictions[0].pred_sem_seg.data.shape == (1, SIZE, SIZE)
    assert predictions[0].seg_logits.data.shape == (NUM_CLASSES, SIZE, SIZE)


# ----------------------------------------------------------------------------- Potsdam probes

def test_one_fpn_probe_per_linear_probe_and_backbone():
    names = sorted(osp.basename(p)[:-len('.py')] for p in BACKBONE_BASES)
    assert sorted(map(_backbone_of, FPN_PROBE_CONFIGS)) == names
    assert sorted(map(_backbone_of, LINEAR_PROBE_CONFIGS)) == names
    for path in FPN_PROBE_CONFIGS:
        assert osp.basename(path) == \
            f'fpn-probe_{_backbone_of(path)}_frozen_1xb8-12e_potsdam-512x512.py'


def test_hooked_blocks_are_the_last_of_each_quarter():
    for depth, blocks in HOOKED_BLOCKS.items():
        assert len(blocks) == 4 and blocks[-1] == depth - 1
        assert [b - a for a, b in zip((-1, ) + blocks, blocks)] == [depth // 4] * 4


@pytest.mark.parametrize('path', FPN_PROBE_CONFIGS, ids=_names(FPN_PROBE_CONFIGS))
def test_fpn_probe_config_resolves_to_a_frozen_encoder_and_the_fpn_decoder(path):
    cfg = _config(path)
    name = _backbone_of(path)
    base = _config(osp.join(PROJECT_ROOT, 'configs/_base_/backbones', f'{name}.py'))
    backbone, depth = cfg.model.backbone, DEPTHS[name]
    # the backbone base's pretrained encoder, every block frozen, 4 evenly spaced blocks
    assert backbone.type == base.backbone.type and backbone.arch == base.backbone.arch
    assert backbone.init_cfg == base.backbone.init_cfg
    assert backbone.init_cfg.type == 'Pretrained'
    assert backbone.frozen_stages == depth
    assert tuple(backbone.out_indices) == HOOKED_BLOCKS[depth]
    assert not backbone.get('final_norm', False)
    assert backbone.get('pyramid_source', 'blocks') == 'blocks'
    assert (cfg.model.data_preprocessor.mean, cfg.model.data_preprocessor.std) == \
        (base.img_norm_cfg.mean, base.img_norm_cfg.std)
    # the decoder: mmseg's FPN (no norm, no activation) and a resize-concat 1x1 head
    neck, head = cfg.model.neck, cfg.model.decode_head
    assert neck == dict(type='FPN', in_channels=[base.vit_channels] * 4,
                        out_channels=FPN_CHANNELS, num_outs=4, norm_cfg=None, act_cfg=None,
                        upsample_cfg=dict(mode='bilinear', align_corners=False))
    assert (head.type, head.num_convs, head.concat_input, head.input_transform) == \
        ('FCNHead', 0, False, 'resize_concat')
    assert head.in_channels == [FPN_CHANNELS] * 4 and head.in_index == [0, 1, 2, 3]
    assert head.channels == 4 * FPN_CHANNELS
    assert (head.dropout_ratio, head.num_classes) == (0.0, NUM_CLASSES)
    assert cfg.model.auxiliary_head is None
    # everything else is the linear probe of the same backbone: data, schedule,
    # optimiser (plain AdamW on what trains), evaluation, loss
    linear = _config(_linear_twin(path))
    keys = set(cfg.keys()) - {'model', 'fpn_channels'}
    assert keys == set(linear.keys()) - {'model'}
    for key in sorted(keys):
        assert cfg[key] == linear[key], key
    model, linear_model = copy.deepcopy(cfg.model), copy.deepcopy(linear.model)
    for m in (model, linear_model):
        m.pop('neck')
        m.backbone.pop('out_indices')
        for key in ('in_channels', 'in_index', 'channels', 'input_transform'):
            m.decode_head.pop(key, None)
    assert model == linear_model
    assert cfg.optim_wrapper.optimizer.type == 'AdamW' and 'paramwise_cfg' not in \
        cfg.optim_wrapper and cfg.model_wrapper_cfg.find_unused_parameters is True


def _tiny_model(cfg: Config):
    """The config's model with the trunk narrowed (same type and patch size, 8 blocks of
    width 32, hooked at 1, 3, 5, 7) and 8-channel FPN levels, without pretrained
    weights."""
    init_default_scope(cfg.default_scope)
    model_cfg = copy.deepcopy(cfg.model)
    backbone = model_cfg.backbone
    backbone.arch = dict(embed_dims=TINY_CHANNELS, depth=TINY_DEPTH, num_heads=2,
                         patch_size=cfg.patch_size)
    backbone.img_size = SIZE
    backbone.frozen_stages, backbone.out_indices = TINY_DEPTH, HOOKED_BLOCKS[TINY_DEPTH]
    backbone.pop('init_cfg')
    model_cfg.data_preprocessor.size = (SIZE, SIZE)
    model_cfg.neck.update(in_channels=[TINY_CHANNELS] * 4, out_channels=TINY_FPN)
    model_cfg.decode_head.update(in_channels=[TINY_FPN] * 4, channels=4 * TINY_FPN)
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
    return model


@pytest.mark.parametrize('path', FPN_PROBE_CONFIGS, ids=_names(FPN_PROBE_CONFIGS))
def test_fpn_probe_trains_only_its_decoder(path):
    cfg = _config(path)
    model = _tiny_model(cfg)
    model.train()
    _check_fpn_decoder(model, [TINY_CHANNELS] * 4, TINY_FPN)
    # everything in the forward is frozen: embeddings and every block; what still asks
    # for gradients is at most the trunk's final norm, which the forward leaves out
    trainable = [n for n, p in model.backbone.named_parameters() if p.requires_grad]
    assert all(n.split('.')[-2] in ('norm', 'ln_post') for n in trainable), trainable
    assert not any(m.training for block in model.backbone.blocks_list for m in block.modules())
    _check_training_steps(model, cfg.optim_wrapper)


@pytest.mark.parametrize('path', FPN_PROBE_CONFIGS[:1] + FPN_PROBE_CONFIGS[-1:],
                         ids=_names(FPN_PROBE_CONFIGS[:1] + FPN_PROBE_CONFIGS[-1:]))
def test_fpn_probe_forward_equals_a_direct_computation(path):
    model = _tiny_model(_config(path))
    _check_forward_matches_reference(model, same_size_levels=True)


@pytest.mark.parametrize('name, width', [('rvsa-b', 768), ('satmae-l', 1024),
                                         ('georsclip-h14', 1280)])
def test_full_width_decoder_parameters(name, width):
    """The decoder at the configs' widths (ViT-B 768, ViT-L 1024, ViT-H 1280 -> 256):
    3,153,926, 3,416,070 and 3,678,214 parameters."""
    cfg = _config(osp.join(PROJECT_ROOT, 'configs/probe',
                                   f'fpn-probe_{name}_frozen_1xb8-12e_potsdam-512x512.py'))
    init_default_scope(cfg.default_scope)
    neck, head = MODELS.build(cfg.model.neck), MODELS.build(cfg.model.decode_head)
    count = sum(p.numel() for m in (neck, head) for p in m.parameters())
    expected = {768: 3_153_926, 1024: 3_416_070, 1280: 3_678_214}[width]
    assert count == _decoder_parameter_count([width] * 4, FPN_CHANNELS, NUM_CLASSES) == expected


# ----------------------------------------------------------------------------- demo probe

def test_demo_fpn_probe_config():
    cfg = _config(DEMO_FPN_PROBE_CONFIG)
    linear = _config(DEMO_PROBE_CONFIG)
    task = _config(osp.join(PROJECT_ROOT, 'configs/_base_/tasks/fpn-probe_potsdam.py'))
    # the demo linear probe's frozen encoder, read at its 4 stages
    backbone = copy.deepcopy(cfg.model.backbone)
    assert tuple(backbone.pop('out_indices')) == (0, 1, 2, 3)
    linear_backbone = copy.deepcopy(linear.model.backbone)
    linear_backbone.pop('out_indices')
    assert backbone == linear_backbone and backbone.frozen_stages == 4
    assert backbone.init_cfg == dict(
        type='Pretrained', checkpoint='work_dirs/demo/seg/iter_600.pth', prefix='backbone.')
    # the Potsdam probes' decoder at the demo's widths
    neck, task_neck = copy.deepcopy(cfg.model.neck), copy.deepcopy(task.model.neck)
    assert neck.pop('in_channels') == DEMO_STAGES and neck.pop('out_channels') == DEMO_FPN
    task_neck.pop('in_channels'), task_neck.pop('out_channels')
    assert neck == task_neck
    head, task_head = copy.deepcopy(cfg.model.decode_head), copy.deepcopy(task.model.decode_head)
    assert head.pop('in_channels') == [DEMO_FPN] * 4 and head.pop('channels') == 4 * DEMO_FPN
    task_head.pop('in_channels'), task_head.pop('channels')
    assert head == task_head
    assert cfg.model.auxiliary_head is None
    # the rest is the demo linear probe's: data, schedule, optimiser
    for key in ('train_dataloader', 'test_dataloader', 'optim_wrapper', 'param_scheduler',
                'train_cfg', 'data_preprocessor', 'encoder_checkpoint'):
        assert cfg[key] == linear[key], key


def _demo_model(checkpoint: str):
    cfg = _config(DEMO_FPN_PROBE_CONFIG)
    cfg.model.backbone.init_cfg.checkpoint = checkpoint
    init_default_scope('mmseg')
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return model, cfg


def test_demo_fpn_probe_loads_the_encoder_and_trains_only_its_decoder(demo_encoder_checkpoint):
    path, encoder = demo_encoder_checkpoint
    model, cfg = _demo_model(path)
    loaded = model.backbone.state_dict()
    assert loaded.keys() == encoder.keys()
    assert all(torch.equal(loaded[k], encoder[k]) for k in encoder)
    # the decoder starts from mmseg's initialisation: every bias zero
    assert all(not p.any() for n, p in _decoder_parameters(model).items() if n.endswith('bias'))
    model.train()
    _check_fpn_decoder(model, DEMO_STAGES, DEMO_FPN)
    assert sum(p.numel() for p in _decoder_parameters(model).values()) == 45_574
    assert all(not p.requires_grad for p in model.backbone.parameters())
    assert not any(m.training for m in model.backbone.modules()
                   if isinstance(m, torch.nn.BatchNorm2d))
    _check_training_steps(model, cfg.optim_wrapper)
    after = model.backbone.state_dict()
    assert all(torch.equal(after[k], encoder[k]) for k in encoder)


def test_demo_fpn_probe_forward_equals_a_direct_computation(demo_encoder_checkpoint):
    """Strides 4..32: the top-down path and the concatenation really upsample."""
    model, _ = _demo_model(demo_encoder_checkpoint[0])
    _check_forward_matches_reference(model, same_size_levels=False)


@pytest.mark.trains('training a probe with a frozen encoder is what it checks')
def test_demo_fpn_probe_trains_through_the_runner(demo_data, demo_encoder_checkpoint, tmp_path):
    """``tools/train.py`` on the demo data, 8 iterations: the checkpoint's encoder is the
    loaded one, bit for bit (BatchNorm statistics included), and every decoder bias (zero
    at initialisation) has moved."""
    path, encoder = demo_encoder_checkpoint
    config = tmp_path / 'fpn_probe.py'
    config.write_text(f'_base_ = [{DEMO_FPN_PROBE_CONFIG!r}]\n'
                      f'model = dict(backbone=dict(init_cfg=dict(checkpoint={path!r})))\n')
    iters = 8
    checkpoint = train_checkpoint(str(config), osp.join(demo_data, 'potsdam'),
                                  str(tmp_path / 'train'), iters)
    state = torch.load(checkpoint, map_location='cpu', weights_only=False)
    assert state['meta']['iter'] == iters
    state = state['state_dict']
    assert {k[len('backbone.'):] for k in state if k.startswith('backbone.')} == set(encoder)
    changed = [k for k in encoder if not torch.equal(state[f'backbone.{k}'], encoder[k])]
    assert changed == [], f'the frozen encoder changed: {changed}'
    model, _ = _demo_model(path)
    decoder = _decoder_parameters(model)
    assert {k for k in state if k.startswith(('neck.', 'decode_head.'))} == set(decoder)
    biases = [k for k in decoder if k.endswith('bias')]
    assert len(biases) == 9 and all(not decoder[k].any() for k in biases)
    assert all(state[k].abs().min() > 0 for k in biases)
