"""Segmentation reproduction configs (configs/reproduction/upernet_*.py): each resolves to
the settings of REOBench's released MMSegmentation configs (the table below, row by row,
read from lx709/REOBench: Segmentation/configs/vit_base_win/*.py, its model and schedule
bases and backbones), builds at tiny width and runs a training step and a prediction; the
5-class Potsdam setting ignores clutter end to end (converter, loading, metric); the
recommended GeoRSCLIP ViT-L/14 configs build."""
import copy
import glob
import os.path as osp

import mmcv
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import MODELS, init_default_scope

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.datasets.converters.potsdam import (POTSDAM_CLASSES_5, POTSDAM_COLOURS,
                                                     colour_to_label)
from reobench_mm.engine import parameter_group_of
from reobench_mm.transforms.placement import corruption_position, transform_name

from helpers import PROJECT_ROOT
from test_configs import TINY_CHANNELS, _narrow_backbone

REPRO_CONFIGS = sorted(glob.glob(osp.join(PROJECT_ROOT, 'configs/reproduction/upernet_*.py')))
IMAGENET = ([123.675, 116.28, 103.53], [58.395, 57.12, 57.375])
# SatMAE's [0, 1] statistics, applied by the authors to 0-255 pixels
SATMAE_01 = ([0.4182007312774658, 0.4214799106121063, 0.3991275727748871],
             [0.28774282336235046, 0.27541765570640564, 0.2764017581939697])
B4 = (3, 5, 7, 11)
#: published row -> the authors' values: backbone base (our name), type, arch, pretrained
#: file, training crop, drop path, blocks read, normalisation, images per iteration,
#: layer-id rule of their optimiser constructor, CLIP activation (None: not a CLIP tower)
AUTHORS = {
    'RVSA': ('vitae-nc-rvsa-b', 'ViTAENCRVSA', 'b',
             'vitae-b-checkpoint-1599-transform-no-average.pth', 512, 0.1, B4, IMAGENET, 4,
             'recipe_blocks', None),
    'SatMAE': ('satmae-l', 'SatMAE', 'l', 'pretrain-vit-large-e199.pth', 512, 0.2, B4,
               SATMAE_01, 2, 'recipe_blocks', None),
    'SatMAE++': ('satmaepp-l', 'SatMAEPlusPlus', 'l', 'checkpoint_ViT-L_pretrain_fmow_rgb.pth',
                 512, 0.2, B4, SATMAE_01, 2, 'recipe_blocks', None),
    'Scale-MAE': ('scalemae-l', 'ScaleMAE', 'l', 'scalemae-vitlarge-800.pth', 512, 0.2, B4,
                  IMAGENET, 2, 'recipe_blocks', None),
    'RemoteCLIP-B/32': ('remoteclip-b32', 'CLIPVisionTransformer', 'ViT-B/32',
                        'RemoteCLIP-ViT-B-32.pt', 224, 0.0, B4, IMAGENET, 4, 'recipe_none',
                        'gelu'),
    'RemoteCLIP-L/14': ('remoteclip-l14', 'CLIPVisionTransformer', 'ViT-L/14',
                        'RemoteCLIP-ViT-L-14.pt', 224, 0.0, B4, IMAGENET, 4, 'recipe_none',
                        'gelu'),
    'GeoRSCLIP-B/32': ('georsclip-b32', 'CLIPVisionTransformer', 'ViT-B/32',
                       'RS5M_ViT-B-32.pt', 224, 0.0, B4, IMAGENET, 4, 'recipe_none', 'gelu'),
    'GeoRSCLIP-L/14': ('georsclip-l14', 'CLIPVisionTransformer', 'ViT-L/14',
                       'RS5M_ViT-L-14.pt', 224, 0.0, B4, IMAGENET, 4, 'recipe_none', 'gelu'),
    'GeoRSCLIP-H/14': ('georsclip-h14', 'CLIPVisionTransformer', 'ViT-H/14',
                       'RS5M_ViT-H-14.pt', 224, 0.0, B4, IMAGENET, 4, 'recipe_none', 'gelu'),
}
ROW_OF = {v[0]: row for row, v in AUTHORS.items()}
WIDTHS = {'b': 768, 'l': 1024, 'ViT-B/32': 768, 'ViT-L/14': 1024, 'ViT-H/14': 1280}
PATCHES = {'b': 16, 'l': 16, 'ViT-B/32': 32, 'ViT-L/14': 14, 'ViT-H/14': 14}
RECOMMENDED_GEORSCLIP_L14 = [
    osp.join(PROJECT_ROOT, 'configs/upernet/upernet_georsclip-l14_sfp_1xb8-12e_potsdam-512x512.py'),
    osp.join(PROJECT_ROOT,
             'configs/probe/linear-probe_georsclip-l14_frozen_1xb8-12e_potsdam-512x512.py'),
]


def _names(paths):
    return [osp.basename(p) for p in paths]


def _row(path):
    """``upernet_{backbone}_sfp_...`` -> the published row."""
    return ROW_OF[osp.basename(path).split('_')[1]]


def test_one_reproduction_config_per_published_row():
    assert sorted(map(_row, REPRO_CONFIGS)) == sorted(AUTHORS)
    for path in REPRO_CONFIGS:
        base, batch, crop = (AUTHORS[_row(path)][i] for i in (0, 8, 4))
        assert osp.basename(path) == \
            f'upernet_{base}_sfp_1xb{batch}-160k_potsdam-5cls-{crop}x{crop}.py'
        text = open(path, encoding='utf-8').read()
        assert f"'../_base_/backbones/{base}.py'" in text
        # names the authors' repository and config folder
        assert 'lx709/REOBench' in text and 'Segmentation/configs/vit_base_win/' in text


@pytest.mark.parametrize('path', REPRO_CONFIGS, ids=_names(REPRO_CONFIGS))
def test_reproduction_config_resolves_to_the_authors_settings(path):
    cfg = Config.fromfile(path)
    (_, type_, arch, pretrained, crop, drop_path, blocks, (mean, std), batch, layer_ids,
     act) = AUTHORS[_row(path)]
    backbone = cfg.model.backbone
    assert (backbone.type, backbone.arch, backbone.img_size) == (type_, arch, crop)
    assert backbone.init_cfg == dict(type='Pretrained', checkpoint='checkpoints/' + pretrained)
    assert backbone.drop_path_rate == drop_path
    assert tuple(backbone.out_indices) == blocks
    assert not backbone.get('final_norm', False)
    assert backbone.get('act_layer') == act
    if type_ in ('SatMAE', 'SatMAEPlusPlus'):
        assert backbone.pos_embed_resize == 'sincos'
    if type_ == 'ScaleMAE':
        assert backbone.input_res == 1.0
    preprocessor = cfg.model.data_preprocessor
    assert (preprocessor.mean, preprocessor.std) == (mean, std)
    assert preprocessor.bgr_to_rgb and preprocessor.size == (crop, crop)
    width, patch = WIDTHS[arch], PATCHES[arch]
    assert (cfg.model.neck.type, cfg.model.neck.in_channels, cfg.model.neck.patch_size) == \
        ('SimpleFeaturePyramid', width, patch)
    # heads: 5 classes, plain BN, UPerHead 512 channels, FCN on level 2 with weight 0.4
    head, aux = cfg.model.decode_head, cfg.model.auxiliary_head
    assert head.in_channels == [width] * 4 and aux.in_channels == width
    assert head.num_classes == aux.num_classes == 5
    assert head.norm_cfg == aux.norm_cfg == dict(type='BN', requires_grad=True)
    assert (head.channels, head.pool_scales, aux.in_index, aux.loss_decode.loss_weight) == \
        (512, (1, 2, 3, 6), 2, 0.4)
    assert cfg.model.test_cfg == dict(mode='slide', crop_size=(512, 512), stride=(384, 384))
    # schedule_160k + their optimizer / lr_config
    optim = cfg.optim_wrapper
    assert optim.optimizer == dict(type='AdamW', lr=6e-5, betas=(0.9, 0.999), weight_decay=0.05)
    assert 'clip_grad' not in optim
    assert optim.paramwise_cfg == dict(layer_decay_rate=0.9, num_layers=12, layer_ids=layer_ids)
    warmup, poly = cfg.param_scheduler
    assert (warmup.type, warmup.start_factor, warmup.begin, warmup.end) == \
        ('LinearLR', 1e-6, 0, 1500)
    assert (poly.type, poly.power, poly.eta_min, poly.begin, poly.end) == \
        ('PolyLR', 1.0, 0.0, 0, 160000)
    assert not warmup.by_epoch and not poly.by_epoch
    assert (cfg.train_cfg.type, cfg.train_cfg.max_iters, cfg.train_cfg.val_interval) == \
        ('IterBasedTrainLoop', 160000, 16000)
    assert cfg.test_evaluator.iou_metrics == ['mIoU', 'mFscore']
    # data: 5-class Potsdam, clutter -> 255, the authors' crops and batch
    train = cfg.train_dataloader
    assert train.batch_size == batch and train.sampler.type == 'InfiniteSampler'
    for loader in (train, cfg.val_dataloader, cfg.test_dataloader):
        assert loader.dataset.metainfo.classes == POTSDAM_CLASSES_5
        assert loader.dataset.data_root == 'data/potsdam_5cls'
        loads = [t for t in loader.dataset.pipeline if t.type == 'LoadAnnotations']
        assert [t.reduce_zero_label for t in loads] == [True]
    by_type = {t.type: t for t in train.dataset.pipeline}
    assert by_type['RandomResize'].scale == (crop, crop)
    assert by_type['RandomResize'].ratio_range == (0.5, 2.0)
    assert by_type['RandomCrop'].crop_size == (crop, crop)
    assert by_type['RandomCrop'].cat_max_ratio == 0.75
    assert 'PhotoMetricDistortion' in by_type and by_type['RandomFlip'].prob == 0.5
    test_resize = [t for t in cfg.test_dataloader.dataset.pipeline if t.type == 'Resize']
    assert [t.scale for t in test_resize] == [(512, 512)]  # tested on whole 512 px patches
    assert cfg.test_cfg.type == 'CorruptionTestLoop'
    names = [transform_name(t) for t in cfg.test_dataloader.dataset.pipeline]
    for geometric in (False, True):
        assert corruption_position(names) == names.index('Resize')


def _batch(size, num_images=2, seed=0):
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for _ in range(num_images):
        sample = SegDataSample(metainfo=dict(img_shape=(size, size), ori_shape=(size, size),
                                             pad_shape=(size, size)))
        labels = torch.randint(0, 5, (1, size, size), generator=generator)
        labels[:, :4] = 255  # some ignored (clutter) pixels
        sample.gt_sem_seg = PixelData(data=labels)
        samples.append(sample)
    inputs = [torch.randint(0, 255, (3, size, size), dtype=torch.uint8, generator=generator)
              for _ in range(num_images)]
    return dict(inputs=inputs, data_samples=samples)


@pytest.mark.parametrize('path', REPRO_CONFIGS, ids=_names(REPRO_CONFIGS))
def test_reproduction_config_builds_trains_one_step_and_predicts(path):
    cfg = Config.fromfile(path)
    layer_ids = AUTHORS[_row(path)][9]
    init_default_scope(cfg.default_scope)
    train_size, test_size = 64, 96  # test inputs larger than the training grid, as 224 -> 512
    _narrow_backbone(cfg, train_size)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.data_preprocessor.size = (train_size, train_size)
    model_cfg.neck.in_channels = TINY_CHANNELS
    model_cfg.decode_head.update(in_channels=[TINY_CHANNELS] * 4, channels=16,
                                 pool_scales=(1, 2))
    model_cfg.auxiliary_head.update(in_channels=TINY_CHANNELS, channels=16)
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    optim = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    # the authors' layer-wise lr: 0.9 ** (14 - 1 - layer) with num_layers=12 (14 groups)
    # whatever the depth (4 here); heads at the base lr
    base_lr = 6e-5
    block_names = [n for n, _ in model.named_parameters()
                   if n.startswith('backbone.') and '.blocks.3.' in n and n.endswith('weight')
                   and 'norm' not in n]
    head = parameter_group_of(optim.optimizer, 'decode_head.conv_seg.weight')
    assert head['lr'] == pytest.approx(base_lr) and head['weight_decay'] == 0.05
    block = parameter_group_of(optim.optimizer, block_names[0])
    expected_block = base_lr * (0.9**(14 - 1 - 4) if layer_ids == 'recipe_blocks' else 1.0)
    assert block['lr'] == pytest.approx(expected_block) and block['weight_decay'] == 0.05
    bias = next(n for n, p in model.named_parameters() if n.startswith('backbone.')
                and n.endswith('.bias'))
    assert parameter_group_of(optim.optimizer, bias)['weight_decay'] == 0.0
    data = _batch(train_size)
    model.train()
    losses = model.train_step(data, optim)
    assert all(torch.isfinite(v).all() for v in losses.values())
    model.eval()
    with torch.no_grad():
        predictions = model.test_step(_batch(test_size, num_images=1, seed=1))
    assert predictions[0].pred_sem_seg.data.shape == (1, test_size, test_size)
    assert predictions[0].seg_logits.data.shape == (5, test_size, test_size)


# ------------------------------------------------------------ 5-class Potsdam, clutter ignored

def _potsdam_like_label(size=512):
    """A colour label (RGB) of a converted patch's size with all six ISPRS colours: five
    class stripes, clutter in the top-left block."""
    colours = [POTSDAM_COLOURS[name] for name in
               ('impervious_surface', 'building', 'low_vegetation', 'tree', 'car')]
    rgb = np.zeros((size, size, 3), np.uint8)
    for k, colour in enumerate(colours):  # vertical stripes of the five classes
        rgb[:, k * size // 5:(k + 1) * size // 5] = colour
    rgb[:, 5 * size // 5:] = colours[-1]
    rgb[:100, :150] = POTSDAM_COLOURS['clutter']
    return rgb


def test_five_class_potsdam_ignores_clutter_in_loading_and_metric(tmp_path):
    from mmseg.registry import DATASETS, METRICS
    cfg = Config.fromfile(REPRO_CONFIGS[0])
    init_default_scope('mmseg')
    rgb = _potsdam_like_label()
    clutter = np.all(rgb == POTSDAM_COLOURS['clutter'], axis=-1)
    ids = colour_to_label(rgb, num_classes=5)
    assert set(np.unique(ids[clutter])) == {0} and ids[~clutter].min() == 1
    name = '2_13_0_0_512_512.png'
    for folder, array in (('img_dir/val', np.full((512, 512, 3), 90, np.uint8)),
                          ('ann_dir/val', ids.astype(np.uint8))):
        mmcv.imwrite(array, str(tmp_path / folder / name))
    dataset_cfg = copy.deepcopy(cfg.test_dataloader.dataset)
    dataset_cfg.data_root = str(tmp_path)
    dataset = DATASETS.build(dataset_cfg)
    assert dataset.metainfo['classes'] == POTSDAM_CLASSES_5
    gt = dataset[0]['data_samples'].gt_sem_seg.data[0].numpy()
    assert (gt[clutter] == 255).all()
    np.testing.assert_array_equal(gt[~clutter], ids[~clutter] - 1)
    assert set(np.unique(gt[~clutter])) == set(range(5))
    # a prediction right everywhere but on clutter, where it says "building": a perfect
    # score over exactly 5 classes, since clutter pixels count nowhere
    metric = METRICS.build(cfg.test_evaluator)
    metric.dataset_meta = dataset.metainfo
    pred = torch.from_numpy(np.where(clutter, 1, gt)).long()[None]
    metric.process({}, [dict(pred_sem_seg=dict(data=pred),
                             gt_sem_seg=dict(data=torch.from_numpy(gt).long()[None]))])
    area_intersect, area_union, area_pred, area_label = metric.results[0]
    assert area_label.numel() == 5 and int(area_label.sum()) == int((~clutter).sum())
    assert int(area_pred.sum()) == int((~clutter).sum())
    scores = metric.compute_metrics(metric.results)
    assert scores['mIoU'] == pytest.approx(100.0) and scores['aAcc'] == pytest.approx(100.0)
    # the same prediction counted with clutter as a sixth class would not be perfect
    assert int(area_intersect[1]) == int(((gt == 1) & ~clutter).sum())


# ----------------------------------------------------------- recommended GeoRSCLIP ViT-L/14

def test_recommended_georsclip_l14_configs_build():
    upernet, probe = (Config.fromfile(p) for p in RECOMMENDED_GEORSCLIP_L14)
    remote = Config.fromfile(osp.join(
        PROJECT_ROOT, 'configs/upernet/upernet_remoteclip-l14_sfp_1xb8-12e_potsdam-512x512.py'))
    for cfg in (upernet, probe):
        backbone = cfg.model.backbone
        assert (backbone.type, backbone.arch) == ('CLIPVisionTransformer', 'ViT-L/14')
        assert backbone.init_cfg == dict(type='Pretrained',
                                         checkpoint='checkpoints/RS5M_ViT-L-14.pt')
        assert 'act_layer' not in backbone  # the preset's QuickGELU (OpenAI-initialised)
    # the recommended segmentation config is RemoteCLIP L/14's with the other file
    for backbone in (remote.model.backbone, remote.backbone):
        backbone.init_cfg.checkpoint = 'checkpoints/RS5M_ViT-L-14.pt'
    remote.checkpoint = 'checkpoints/RS5M_ViT-L-14.pt'
    assert upernet.to_dict() == remote.to_dict()
    assert probe.model.backbone.frozen_stages == 24
    assert tuple(probe.model.backbone.out_indices) == (23, )
    init_default_scope('mmseg')
    model_cfg = copy.deepcopy(probe.model)
    model_cfg.backbone.update(arch=dict(embed_dims=TINY_CHANNELS, depth=2, num_heads=2,
                                        patch_size=14), img_size=56, frozen_stages=2,
                              out_indices=(1, ))
    model_cfg.backbone.pop('init_cfg')
    model_cfg.decode_head.update(in_channels=TINY_CHANNELS, channels=TINY_CHANNELS)
    model = MODELS.build(model_cfg)
    model.eval()
    with torch.no_grad():
        out = model.test_step(_batch(56, num_images=1))
    assert out[0].pred_sem_seg.data.shape == (1, 56, 56)
