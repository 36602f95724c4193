"""Frozen-encoder probe configs: every one builds (backbone narrowed to tiny widths), trains
one step and predicts on CPU; the step leaves the whole encoder exactly as it was (every
parameter and buffer) while the head changes, and the head is a single 1x1 convolution."""
import copy
import glob
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import MODELS, init_default_scope

import reobench_mm  # noqa: F401  (registration)

from helpers import PROJECT_ROOT, SEG_DEMO_CONFIG

PROBE_CONFIGS = sorted(glob.glob(osp.join(PROJECT_ROOT, 'configs/probe/linear-probe_*.py')))
DEMO_PROBE_CONFIG = osp.join(PROJECT_ROOT, 'configs', 'demo',
                             'linear-probe_r18-tiny_frozen_1xb4-600i_demo-potsdam-128x128.py')
BACKBONE_BASES = sorted(glob.glob(osp.join(PROJECT_ROOT, 'configs/_base_/backbones/*.py')))
#: backbone base -> number of blocks of its trunk (ViT-B 12, ViT-L 24, ViT-H 32)
DEPTHS = {'rvsa-b': 12, 'vitae-nc-rvsa-b': 12, 'satmae-l': 24, 'satmaepp-l': 24, 'scalemae-l': 24,
          'remoteclip-b32': 12, 'georsclip-b32': 12, 'remoteclip-l14': 24, 'georsclip-h14': 32,
          'georsclip-l14': 24}
TINY_CHANNELS, TINY_DEPTH, NUM_CLASSES = 32, 4, 6


def _names(paths):
    return [osp.basename(p) for p in paths]


def _backbone_of(path):
    """``linear-probe_{backbone}_frozen_...``."""
    return osp.basename(path).split('_')[1]


def _batch(size, num_images=2, seed=0):
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for _ in range(num_images):
        sample = SegDataSample(metainfo=dict(img_shape=(size, size), ori_shape=(size, size),
                                             pad_shape=(size, size)))
        labels = torch.randint(0, NUM_CLASSES, (1, size, size), generator=generator)
        sample.gt_sem_seg = PixelData(data=labels)
        samples.append(sample)
    inputs = [torch.randint(0, 255, (3, size, size), dtype=torch.uint8, generator=generator)
              for _ in range(num_images)]
    return dict(inputs=inputs, data_samples=samples)


def _snapshot(module):
    """Every parameter and buffer, copied."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _check_one_step(model, optim_cfg, size):
    """A training step at a large learning rate: the encoder (parameters and buffers)
    stays bit-identical and gets no gradient, the head moves; then a prediction."""
    optim_cfg = copy.deepcopy(optim_cfg)
    optim_cfg.optimizer.lr = 0.5  # any update would show
    optim = build_optim_wrapper(model, optim_cfg)
    encoder_before, head_before = _snapshot(model.backbone), _snapshot(model.decode_head)
    data = _batch(size)
    model.train()
    losses = model.train_step(data, optim)
    assert all(torch.isfinite(v).all() for v in losses.values())
    encoder_after, head_after = _snapshot(model.backbone), _snapshot(model.decode_head)
    assert encoder_after.keys() == encoder_before.keys()
    changed = [k for k in encoder_before if not torch.equal(encoder_before[k], encoder_after[k])]
    assert changed == [], f'the frozen encoder changed: {changed}'
    assert all(p.grad is None for p in model.backbone.parameters())
    assert all(not torch.equal(head_before[k], head_after[k])
               for k in ('conv_seg.weight', 'conv_seg.bias'))
    model.eval()
    with torch.no_grad():
        predictions = model.test_step(data)
    assert predictions[0].pred_sem_seg.data.shape == (1, size, size)
    assert predictions[0].seg_logits.data.shape == (NUM_CLASSES, size, size)


def _check_light_head(model, channels):
    """One 1x1 convolution channels -> classes is everything that trains; no neck, no
    auxiliary head."""
    from mmseg.models.decode_heads import FCNHead
    assert not model.with_neck and not model.with_auxiliary_head
    head = model.decode_head
    assert type(head) is FCNHead and head.num_convs == 0 and not head.concat_input
    assert isinstance(head.convs, torch.nn.Identity) and head.dropout is None
    assert head.conv_seg.kernel_size == (1, 1)
    assert (head.conv_seg.in_channels, head.conv_seg.out_channels) == (channels, NUM_CLASSES)
    trainable = {n: p.numel() for n, p in model.named_parameters() if p.requires_grad
                 and not n.startswith('backbone.')}
    assert trainable == {'decode_head.conv_seg.weight': channels * NUM_CLASSES,
                         'decode_head.conv_seg.bias': NUM_CLASSES}


# ----------------------------------------------------------------------------- Potsdam probes

def test_one_probe_per_backbone():
    names = sorted(osp.basename(p)[:-len('.py')] for p in BACKBONE_BASES)
    assert sorted(DEPTHS) == names
    assert sorted(map(_backbone_of, PROBE_CONFIGS)) == names
    for path in PROBE_CONFIGS:
        assert osp.basename(path) == \
            f'linear-probe_{_backbone_of(path)}_frozen_1xb8-12e_potsdam-512x512.py'


@pytest.mark.parametrize('path', PROBE_CONFIGS, ids=_names(PROBE_CONFIGS))
def test_probe_config_resolves_to_a_frozen_encoder_and_a_linear_head(path):
    cfg = Config.fromfile(path)
    name = _backbone_of(path)
    base = Config.fromfile(osp.join(PROJECT_ROOT, 'configs/_base_/backbones', f'{name}.py'))
    backbone, depth = cfg.model.backbone, DEPTHS[name]
    # the backbone base's pretrained encoder, every block frozen, the last block read
    assert backbone.type == base.backbone.type and backbone.arch == base.backbone.arch
    assert backbone.init_cfg == base.backbone.init_cfg
    assert backbone.init_cfg.type == 'Pretrained'
    assert backbone.frozen_stages == depth
    assert tuple(backbone.out_indices) == (depth - 1, )
    assert not backbone.get('final_norm', False)
    assert (cfg.model.data_preprocessor.mean, cfg.model.data_preprocessor.std) == \
        (base.img_norm_cfg.mean, base.img_norm_cfg.std)
    assert cfg.model.neck is None and cfg.model.auxiliary_head is None
    head = cfg.model.decode_head
    assert (head.type, head.num_convs, head.concat_input) == ('FCNHead', 0, False)
    assert head.in_channels == head.channels == base.vit_channels
    assert (head.in_index, head.dropout_ratio, head.num_classes) == (0, 0.0, NUM_CLASSES)
    # the head alone trains: plain AdamW, no layer decay
    optim = cfg.optim_wrapper
    assert (optim.type, optim.optimizer.type, optim.optimizer.lr) == \
        ('OptimWrapper', 'AdamW', 1e-3)
    assert 'constructor' not in optim and 'paramwise_cfg' not in optim
    assert cfg.model_wrapper_cfg.find_unused_parameters is True
    # the task around it is the segmentation task's
    assert cfg.train_cfg.max_epochs == 12 and cfg.train_dataloader.batch_size == 8
    assert cfg.test_cfg.type == 'CorruptionTestLoop'
    assert all(s.by_epoch and s.convert_to_iter_based for s in cfg.param_scheduler)


@pytest.mark.parametrize('path', PROBE_CONFIGS, ids=_names(PROBE_CONFIGS))
def test_probe_config_trains_only_its_head(path):
    cfg = Config.fromfile(path)
    init_default_scope(cfg.default_scope)
    model_cfg = copy.deepcopy(cfg.model)
    backbone = model_cfg.backbone
    backbone.arch = dict(embed_dims=TINY_CHANNELS, depth=TINY_DEPTH, num_heads=2,
                         patch_size=cfg.patch_size)
    backbone.img_size = 64
    backbone.frozen_stages, backbone.out_indices = TINY_DEPTH, (TINY_DEPTH - 1, )
    backbone.pop('init_cfg')
    model_cfg.data_preprocessor.size = (64, 64)
    model_cfg.decode_head.update(in_channels=TINY_CHANNELS, channels=TINY_CHANNELS)
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.train()
    _check_light_head(model, TINY_CHANNELS)
    # everything in the forward is frozen: embeddings and every block; what still asks
    # for gradients is at most the trunk's final norm, which the forward leaves out
    # (final_norm=False) and which therefore gets none (checked in the step)
    trainable = [n for n, p in model.backbone.named_parameters() if p.requires_grad]
    assert all(n.split('.')[-2] in ('norm', 'ln_post') for n in trainable), trainable
    assert not any(m.training for block in model.backbone.blocks_list for m in block.modules())
    _check_one_step(model, cfg.optim_wrapper, 64)


# ----------------------------------------------------------------------------- demo probe

@pytest.fixture(scope='module')
def demo_encoder_checkpoint(tmp_path_factory):
    """A checkpoint of the demo UperNet (random weights, non-trivial BatchNorm
    statistics), in the layout the training writes."""
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    init_default_scope('mmseg')
    torch.manual_seed(1)
    model = MODELS.build(cfg.model)
    model.train()
    with torch.no_grad():  # BatchNorm running statistics that differ from the defaults
        model.extract_feat(torch.randn(2, 3, 64, 64) * 3 + 1)
    path = str(tmp_path_factory.mktemp('demo_encoder') / 'iter_600.pth')
    torch.save(dict(meta=dict(iter=600), state_dict=model.state_dict()), path)
    return path, {k[len('backbone.'):]: v.clone() for k, v in model.state_dict().items()
                  if k.startswith('backbone.')}


def test_demo_probe_config():
    cfg = Config.fromfile(DEMO_PROBE_CONFIG)
    demo = Config.fromfile(SEG_DEMO_CONFIG)
    assert cfg.model.backbone.type == demo.model.backbone.type == 'ResNetV1c'
    assert cfg.model.backbone.frozen_stages == demo.model.backbone.num_stages == 4
    assert tuple(cfg.model.backbone.out_indices) == (3, )
    assert cfg.model.backbone.init_cfg == dict(
        type='Pretrained', checkpoint='work_dirs/demo/seg/iter_600.pth', prefix='backbone.')
    assert cfg.model.decode_head.in_channels == cfg.model.decode_head.channels == \
        demo.model.decode_head.in_channels[-1]
    assert 'neck' not in cfg.model and cfg.model.auxiliary_head is None
    # the rest is the demo's: data, schedule, optimiser
    for key in ('train_dataloader', 'test_dataloader', 'optim_wrapper', 'param_scheduler',
                'train_cfg', 'data_preprocessor'):
        assert cfg[key] == demo[key], key


def test_demo_probe_loads_the_encoder_and_trains_only_its_head(demo_encoder_checkpoint):
    path, encoder = demo_encoder_checkpoint
    cfg = Config.fromfile(DEMO_PROBE_CONFIG)
    cfg.model.backbone.init_cfg.checkpoint = path
    init_default_scope('mmseg')
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    loaded = model.backbone.state_dict()
    assert loaded.keys() == encoder.keys()
    assert all(torch.equal(loaded[k], encoder[k]) for k in encoder)
    model.train()
    _check_light_head(model, 128)
    assert all(not p.requires_grad for p in model.backbone.parameters())
    assert not any(m.training for m in model.backbone.modules()
                   if isinstance(m, torch.nn.BatchNorm2d))
    _check_one_step(model, cfg.optim_wrapper, 64)
    after = model.backbone.state_dict()
    assert all(torch.equal(after[k], encoder[k]) for k in encoder)
