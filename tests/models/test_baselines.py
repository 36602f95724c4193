"""The baseline encoders the Earth-observation models are compared with: ImageNetViT
against timm's own ViT on the same weights (official timm key layout, converted on load),
and every baseline config (ImageNet-pretrained and random ViT-B/16 and ResNet-50, both
tasks) building and training one step at tiny size."""
import copy
import glob
import os.path as osp

import pytest
import timm
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT
from reobench_mm.registry import MODELS

BASELINES = sorted(glob.glob(osp.join(PROJECT_ROOT, 'configs', 'baselines', '*.py')))
SEG = [p for p in BASELINES if osp.basename(p).startswith('upernet')]
DET = [p for p in BASELINES if osp.basename(p).startswith('oriented-rcnn')]
TINY = dict(embed_dims=32, depth=4, num_heads=2)


def test_imagenet_vit_loads_timms_weights_and_gives_timms_features(tmp_path):
    """A timm ViT (random weights, timm's own key layout with its classifier) saved as
    timm writes it: ImageNetViT converts it on load and returns timm's block outputs."""
    torch.manual_seed(0)
    reference = timm.models.vision_transformer.VisionTransformer(
        img_size=64, patch_size=16, embed_dim=32, depth=4, num_heads=2, num_classes=10)
    reference.eval()
    path = str(tmp_path / 'vit_timm.pth')
    torch.save(reference.state_dict(), path)
    model = MODELS.build(dict(type='ImageNetViT', arch=TINY, img_size=64,
                              out_indices=(1, 3),
                              init_cfg=dict(type='Pretrained', checkpoint=path)))
    model.init_weights()
    model.eval()
    image = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        ours = model(image)
        theirs = reference.forward_intermediates(image, indices=[1, 3], norm=False,
                                                 output_fmt='NCHW', intermediates_only=True)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    # the classifier was dropped, every encoder tensor loaded
    state = model.state_dict()
    assert not any(k.startswith('vit.head.') for k in state)
    torch.testing.assert_close(state['vit.blocks.3.mlp.fc2.weight'],
                               reference.state_dict()['blocks.3.mlp.fc2.weight'])


def test_imagenet_vit_resamples_timms_position_embedding_to_its_grid(tmp_path):
    torch.manual_seed(0)
    reference = timm.models.vision_transformer.VisionTransformer(
        img_size=64, patch_size=16, embed_dim=32, depth=2, num_heads=2, num_classes=0)
    path = str(tmp_path / 'vit_timm.pth')
    torch.save(reference.state_dict(), path)
    model = MODELS.build(dict(type='ImageNetViT', arch=dict(TINY, depth=2), img_size=128,
                              out_indices=(0, 1),
                              init_cfg=dict(type='Pretrained', checkpoint=path)))
    model.init_weights()
    expected = timm.layers.resample_abs_pos_embed(reference.pos_embed.detach(), (8, 8),
                                                  num_prefix_tokens=1)
    torch.testing.assert_close(model.vit.pos_embed.detach(), expected, rtol=0, atol=1e-5)


def _tiny_vit(model_cfg):
    model_cfg.backbone.arch = dict(TINY)
    model_cfg.backbone.out_indices = (0, 1, 2, 3)
    model_cfg.backbone.pop('init_cfg', None)


@pytest.mark.parametrize('path', SEG, ids=[osp.basename(p) for p in SEG])
def test_segmentation_baseline_builds_and_trains_one_step(path):
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    cfg = Config.fromfile(path)
    assert cfg.optim_wrapper.optimizer.lr == 6e-5 and cfg.train_dataloader.batch_size == 8
    pretrained = 'in1k' in osp.basename(path)
    assert (cfg.model.backbone.get('init_cfg') is not None) == pretrained
    init_default_scope(cfg.default_scope)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.data_preprocessor.size = (64, 64)
    if cfg.model.backbone.type == 'ImageNetViT':
        _tiny_vit(model_cfg)
        model_cfg.backbone.img_size = 64
        model_cfg.neck.in_channels = TINY['embed_dims']
        channels = [TINY['embed_dims']] * 4
    else:
        model_cfg.backbone.pop('init_cfg', None)
        model_cfg.backbone.norm_cfg = dict(type='BN', requires_grad=True)
        channels = [256, 512, 1024, 2048]
    model_cfg.decode_head.update(in_channels=channels, channels=16, pool_scales=(1, 2),
                                 norm_cfg=dict(type='BN'))
    model_cfg.auxiliary_head.update(in_channels=channels[2], channels=16,
                                    norm_cfg=dict(type='BN'))
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
    optim = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    sample = SegDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64),
                                         pad_shape=(64, 64)))
    sample.gt_sem_seg = PixelData(data=torch.randint(0, 6, (1, 64, 64)))
    data = dict(inputs=[torch.randint(0, 255, (3, 64, 64), dtype=torch.uint8)] * 2,
                data_samples=[sample, copy.deepcopy(sample)])
    model.train()
    losses = model.train_step(data, optim)
    assert all(torch.isfinite(v).all() for v in losses.values())


@pytest.mark.parametrize('path', DET, ids=[osp.basename(p) for p in DET])
def test_detection_baseline_builds_and_trains_one_step(path):
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData
    from mmrotate.structures.bbox import RotatedBoxes
    cfg = Config.fromfile(path)
    assert cfg.optim_wrapper.optimizer.lr == 1e-5 and cfg.model.roi_head.bbox_head.num_classes == 20
    pretrained = 'in1k' in osp.basename(path)
    assert (cfg.model.backbone.get('init_cfg') is not None) == pretrained
    init_default_scope(cfg.default_scope)
    model_cfg = copy.deepcopy(cfg.model)
    if cfg.model.backbone.type == 'ImageNetViT':
        _tiny_vit(model_cfg)
        model_cfg.backbone.img_size = 128
        model_cfg.neck[0].in_channels = TINY['embed_dims']
        model_cfg.neck[1].in_channels = [TINY['embed_dims']] * 4
    else:
        model_cfg.backbone.pop('init_cfg', None)
        assert model_cfg.neck.in_channels == [256, 512, 1024, 2048]
    model_cfg.roi_head.bbox_head.fc_out_channels = 64
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
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


def test_there_is_a_pretrained_and_a_random_baseline_per_encoder_and_task():
    names = {osp.basename(p) for p in BASELINES}
    for encoder in ('vit-b16', 'r50'):
        for init in ('in1k', 'scratch'):
            assert any(n.startswith('upernet') and f'_{encoder}-{init}_' in n for n in names)
            assert any(n.startswith('oriented-rcnn') and f'_{encoder}-{init}_' in n
                       for n in names)
