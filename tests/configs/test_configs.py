"""Every shipped task config builds its model (narrowed to tiny widths) and runs one
training step and one prediction on CPU; the optimiser and schedule build from it."""
import copy
import glob
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import MODELS, init_default_scope

import reobench_mm  # noqa: F401
from reobench_mm.models.backbones.convert import dense_backbone_types
from reobench_mm.transforms.placement import corruption_position, transform_name

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SEG_CONFIGS = sorted(p for p in glob.glob(osp.join(ROOT, 'configs/upernet/*.py'))
                     if not p.endswith('_robust.py'))
DET_CONFIGS = sorted(p for p in glob.glob(osp.join(ROOT, 'configs/oriented_rcnn/*.py'))
                     if not p.endswith('_robust.py'))
#: the corruption-aware training variant of every task config (tests/test_robust_configs.py)
ROBUST_CONFIGS = sorted(glob.glob(osp.join(ROOT, 'configs/*/*_robust.py')))
TINY_CHANNELS = 32


def _narrow_backbone(cfg, img_size):
    """Same backbone type and patch size, tiny widths and depth, no pretrained file."""
    backbone = cfg.model.backbone
    patch = cfg.patch_size
    backbone.arch = dict(embed_dims=TINY_CHANNELS, depth=4, num_heads=2, patch_size=patch)
    backbone.img_size = img_size
    backbone.out_indices = (0, 1, 2, 3)
    backbone.pop('init_cfg')
    return patch


def _config_names(paths):
    return [osp.basename(p) for p in paths]


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_one_config_per_backbone_and_task():
    assert len(SEG_CONFIGS) == len(DET_CONFIGS) == len(BACKBONES)
    kinds = {Config.fromfile(p).model.backbone.type for p in SEG_CONFIGS + DET_CONFIGS}
    # the baselines' ImageNetViT has its configs in configs/baselines/; the calibration
    # study's encoders have only FPN-probe configs (configs/probe/)
    assert kinds == set(dense_backbone_types()) - {'TimmViTBackbone', 'ImageNetViT', 'DOFA',
                                                   'ClayV15', 'PrithviV2', 'Panopticon',
                                                   'OlmoEarth', 'TerraMind'}


@pytest.mark.parametrize('path', SEG_CONFIGS, ids=_config_names(SEG_CONFIGS))
def test_segmentation_config_builds_and_trains_one_step(path):
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    cfg = Config.fromfile(path)
    assert cfg.model.backbone.init_cfg.checkpoint.startswith('checkpoints/')
    assert cfg.optim_wrapper.optimizer.lr == 6e-5 and cfg.train_dataloader.batch_size == 8
    assert cfg.train_cfg.max_epochs == 12
    # the test loop places ApplyCorruption after the loading, before Resize, for every
    # kind of corruption
    assert cfg.test_cfg.type == 'CorruptionTestLoop'
    names = [transform_name(t) for t in cfg.test_dataloader.dataset.pipeline]
    for geometric in (False, True):
        assert corruption_position(names) == names.index('Resize')
    init_default_scope(cfg.default_scope)
    _narrow_backbone(cfg, 64)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.data_preprocessor.size = (64, 64)
    model_cfg.neck.in_channels = TINY_CHANNELS
    model_cfg.decode_head.update(in_channels=[TINY_CHANNELS] * 4, channels=16,
                                 pool_scales=(1, 2), norm_cfg=dict(type='BN'))
    model_cfg.auxiliary_head.update(in_channels=TINY_CHANNELS, channels=16,
                                    norm_cfg=dict(type='BN'))
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    optim = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    assert {g['layer_id'] for g in optim.optimizer.param_groups} == set(range(6))
    samples = []
    for _ in range(2):
        sample = SegDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64),
                                             pad_shape=(64, 64)))
        sample.gt_sem_seg = PixelData(data=torch.randint(0, 6, (1, 64, 64)))
        samples.append(sample)
    data = dict(inputs=[torch.randint(0, 255, (3, 64, 64), dtype=torch.uint8)] * 2,
                data_samples=samples)
    model.train()
    losses = model.train_step(data, optim)
    assert all(torch.isfinite(v).all() for v in losses.values())
    model.eval()
    with torch.no_grad():
        predictions = model.test_step(data)
    assert predictions[0].pred_sem_seg.data.shape == (1, 64, 64)


@pytest.mark.parametrize('path', DET_CONFIGS, ids=_config_names(DET_CONFIGS))
@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_detection_config_builds_and_trains_one_step(path):
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData
    from mmrotate.structures.bbox import RotatedBoxes
    cfg = Config.fromfile(path)
    assert cfg.model.backbone.init_cfg.checkpoint.startswith('checkpoints/')
    assert cfg.optim_wrapper.optimizer.lr == 1e-5 and cfg.train_dataloader.batch_size == 1
    assert cfg.param_scheduler[-1].milestones == [8, 11]
    assert cfg.model.roi_head.bbox_head.num_classes == 20
    assert cfg.test_evaluator.iou_thrs == [0.5]
    assert cfg.test_cfg.type == 'CorruptionTestLoop'
    names = [transform_name(t) for t in cfg.test_dataloader.dataset.pipeline]
    for geometric in (False, True):
        assert corruption_position(names) == names.index('ConvertBoxType') + 1 \
            == names.index('Resize')
    init_default_scope(cfg.default_scope)
    _narrow_backbone(cfg, 128)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.neck[0].in_channels = TINY_CHANNELS
    model_cfg.neck[1].in_channels = [TINY_CHANNELS] * 4
    model_cfg.roi_head.bbox_head.fc_out_channels = 64
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    optim = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    sample = DetDataSample(metainfo=dict(img_shape=(128, 128), ori_shape=(128, 128),
                                         pad_shape=(128, 128), scale_factor=(1.0, 1.0)))
    sample.gt_instances = InstanceData(
        bboxes=RotatedBoxes(torch.tensor([[40.0, 50.0, 30.0, 12.0, 0.3]])),
        labels=torch.tensor([7]))
    data = dict(inputs=[torch.randint(0, 255, (3, 128, 128), dtype=torch.uint8)],
                data_samples=[sample])
    model.train()
    losses = model.train_step(data, optim)
    assert all(torch.isfinite(v).all() for v in losses.values())
    model.eval()
    with torch.no_grad():
        result = model.test_step(data)[0]
    boxes = result.pred_instances.bboxes
    assert getattr(boxes, 'tensor', boxes).shape[-1] == 5


# ----------------------------------------------------------------- resolved settings

IMAGENET = ([123.675, 116.28, 103.53], [58.395, 57.12, 57.375])
FMOW_RGB = ([106.59, 107.355, 101.745], [73.44, 70.125, 70.38])
CLIP = ([122.771, 116.746, 104.094], [68.501, 66.632, 70.323])
L_SEG = 'vit24_reobench_segmentation'
#: backbone base -> type, arch, pretrained file, channels, patch size, normalisation,
#: segmentation out_indices, detection (out_indices, final_norm)
BACKBONES = {
    'rvsa-b': ('RVSA', 'b', 'vit-b-checkpoint-1599.pth', 768, 16, IMAGENET,
               'vit12', ('vit12', False)),
    'vitae-nc-rvsa-b': ('ViTAENCRVSA', 'b', 'vitae-b-checkpoint-1599-transform-no-average.pth',
                        768, 16, IMAGENET, 'vit12', ('vit12', False)),
    'satmae-l': ('SatMAE', 'l', 'fmow_pretrain.pth', 1024, 16, FMOW_RGB,
                 L_SEG, ('vit24', True)),
    'satmaepp-l': ('SatMAEPlusPlus', 'l', 'checkpoint_ViT-L_pretrain_fmow_rgb.pth', 1024, 16,
                   FMOW_RGB, L_SEG, ('vit24', True)),
    'scalemae-l': ('ScaleMAE', 'l', 'scalemae-vitlarge-800.pth', 1024, 16, IMAGENET,
                   L_SEG, ('vit24', True)),
    'remoteclip-b32': ('CLIPVisionTransformer', 'ViT-B/32', 'RemoteCLIP-ViT-B-32.pt', 768, 32,
                       CLIP, 'vit12', ('vit12', False)),
    'georsclip-b32': ('CLIPVisionTransformer', 'ViT-B/32', 'RS5M_ViT-B-32.pt', 768, 32, CLIP,
                      'vit12', ('vit12', False)),
    'remoteclip-l14': ('CLIPVisionTransformer', 'ViT-L/14', 'RemoteCLIP-ViT-L-14.pt', 1024, 14,
                       CLIP, L_SEG, ('vit24', True)),
    'georsclip-h14': ('CLIPVisionTransformer', 'ViT-H/14', 'RS5M_ViT-H-14.pt', 1280, 14, CLIP,
                      'vit32', ('vit32', True)),
    'georsclip-l14': ('CLIPVisionTransformer', 'ViT-L/14', 'RS5M_ViT-L-14.pt', 1024, 14, CLIP,
                      L_SEG, ('vit24', True)),
}
BACKBONE_BASES = sorted(glob.glob(osp.join(ROOT, 'configs/_base_/backbones/*.py')))


def _backbone_of(path):
    """The backbone field of a task config name: ``{algorithm}_{backbone}_{neck}_...``."""
    return osp.basename(path).split('_')[1]


def _check_backbone(cfg, name, img_size):
    type_, arch, pretrained, channels, patch, (mean, std) = BACKBONES[name][:6]
    backbone = cfg.model.backbone
    assert (backbone.type, backbone.arch, backbone.img_size) == (type_, arch, img_size)
    assert backbone.drop_path_rate == 0.1
    assert backbone.init_cfg == dict(type='Pretrained', checkpoint='checkpoints/' + pretrained)
    assert cfg.checkpoint == backbone.init_cfg.checkpoint
    assert (cfg.vit_channels, cfg.patch_size) == (channels, patch)
    assert (cfg.model.data_preprocessor.mean, cfg.model.data_preprocessor.std) == (mean, std)
    return channels, patch


def test_every_backbone_base_has_one_config_per_task():
    names = [osp.basename(p)[:-len('.py')] for p in BACKBONE_BASES]
    assert sorted(names) == sorted(BACKBONES)
    assert sorted(map(_backbone_of, SEG_CONFIGS)) == sorted(BACKBONES)
    assert sorted(map(_backbone_of, DET_CONFIGS)) == sorted(BACKBONES)
    for path in SEG_CONFIGS + DET_CONFIGS:
        text = open(path, encoding='utf-8').read()
        assert f"'../_base_/backbones/{_backbone_of(path)}.py'" in text, path


@pytest.mark.parametrize('path', SEG_CONFIGS, ids=_config_names(SEG_CONFIGS))
def test_segmentation_config_resolves_to_its_backbone_settings(path):
    cfg = Config.fromfile(path)
    name = _backbone_of(path)
    channels, patch = _check_backbone(cfg, name, 512)
    assert cfg.model.backbone.out_indices == BACKBONES[name][6]
    assert 'final_norm' not in cfg.model.backbone
    assert cfg.model.data_preprocessor.size == (512, 512)
    assert (cfg.model.neck.type, cfg.model.neck.in_channels) == ('SimpleFeaturePyramid', channels)
    assert cfg.model.neck.patch_size == patch
    assert cfg.model.decode_head.in_channels == [channels] * 4
    assert cfg.model.decode_head.channels == 512
    assert cfg.model.auxiliary_head.in_channels == channels
    optim = cfg.optim_wrapper
    assert (optim.optimizer.type, optim.optimizer.lr) == ('AdamW', 6e-5)
    assert optim.constructor == 'ViTLayerDecayOptimWrapperConstructor'
    assert optim.paramwise_cfg == dict(layer_decay_rate=0.9)


@pytest.mark.parametrize('path', DET_CONFIGS, ids=_config_names(DET_CONFIGS))
def test_detection_config_resolves_to_its_backbone_settings(path):
    cfg = Config.fromfile(path)
    name = _backbone_of(path)
    channels, patch = _check_backbone(cfg, name, 800)
    out_indices, final_norm = BACKBONES[name][7]
    assert cfg.model.backbone.out_indices == out_indices
    assert cfg.model.backbone.final_norm is final_norm
    pyramid, fpn = cfg.model.neck
    assert (pyramid.type, pyramid.in_channels, pyramid.patch_size) == \
        ('SimpleFeaturePyramid', channels, patch)
    assert (fpn.type, fpn.in_channels) == ('mmdet.FPN', [channels] * 4)
    assert (fpn.out_channels, fpn.num_outs) == (256, 5)
    assert cfg.model.rpn_head.in_channels == cfg.model.roi_head.bbox_head.in_channels == 256
    optim = cfg.optim_wrapper
    assert (optim.optimizer.type, optim.optimizer.lr) == ('AdamW', 1e-5)
    assert 'constructor' not in optim and 'paramwise_cfg' not in optim
