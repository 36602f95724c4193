"""Contracts every registered backbone keeps, plus the neck and the layer-decay
constructor, with tiny widths on CPU."""
import pytest
import torch
from mmengine.registry import MODELS, OPTIM_WRAPPER_CONSTRUCTORS

import reobench_mm  # noqa: F401
from reobench_mm.engine import parameter_group_of
from reobench_mm.models.backbones import resolve_out_indices
from reobench_mm.models.backbones.convert import dense_backbone_types
from reobench_mm.models.necks import SimpleFeaturePyramid, pyramid_scales

BACKBONES = sorted(dense_backbone_types())
TINY = dict(embed_dims=32, depth=4, num_heads=2)


def input_bands(model) -> int:
    """The band count a backbone takes: its ``in_channels`` (the multispectral encoders:
    6 for Prithvi's HLS bands, 12 for TerraMind's S2L2A), else RGB's 3."""
    return getattr(model, 'in_channels', None) or 3


def tiny_backbone(name, patch_size=None, **options):
    arch = dict(TINY, **({'patch_size': patch_size} if patch_size else {}))
    return MODELS.build(dict(type=name, arch=arch, img_size=64, out_indices=(0, 1, 2, 3),
                             **options))


def test_the_paper_backbones_are_registered():
    assert {'RVSA', 'ViTAENCRVSA', 'SatMAE', 'SatMAEPlusPlus', 'ScaleMAE',
            'CLIPVisionTransformer'} <= set(BACKBONES)


@pytest.mark.parametrize('name', BACKBONES)
def test_contract_shapes_finite_deterministic_backward(name):
    torch.manual_seed(0)
    model = tiny_backbone(name).eval()
    image = torch.rand(2, input_bands(model), 64, 64)
    with torch.no_grad():
        outputs, again = model(image), model(image)
    grid = 64 // model.patch_size
    assert len(outputs) == 4
    for out, repeat in zip(outputs, again):
        assert out.shape == (2, 32, grid, grid)
        assert torch.isfinite(out).all()
        assert torch.equal(out, repeat)
    # one sample alone gives the same maps as inside a batch (no cross-sample mixing)
    with torch.no_grad():
        single = model(image[:1])
    assert all(torch.allclose(s, o[:1], atol=1e-5) for s, o in zip(single, outputs))
    model.train()
    loss = sum(o.square().mean() for o in model(image))
    loss.backward()
    trained = [n for n, p in model.named_parameters() if p.grad is not None]
    assert trained, 'gradients reach the backbone'


@pytest.mark.parametrize('name', BACKBONES)
def test_contract_frozen_stages_and_layer_ids(name):
    model = tiny_backbone(name, frozen_stages=2)
    model.train()
    assert model.num_layers == 4 + 2
    for param_name, param in model.named_parameters():
        layer = model.layer_id(param_name)
        assert 0 <= layer < model.num_layers
        if param_name.startswith(model.block_prefix):
            block = int(param_name[len(model.block_prefix):].split('.')[0])
            assert layer == block + 1
            assert param.requires_grad == (block >= 2), param_name
        if layer == 0:
            assert not param.requires_grad, f'{param_name} (embeddings) is frozen'
    assert any(model.layer_id(n) == 0 for n, _ in model.named_parameters())
    no_decay = model.no_weight_decay_names()
    assert all(p.ndim > 1 for n, p in model.named_parameters() if n not in no_decay
               and not n.endswith('.bias'))


@pytest.mark.parametrize('name', BACKBONES)
def test_contract_with_the_neck_gives_strides_4_to_32(name):
    model = tiny_backbone(name)
    neck = SimpleFeaturePyramid(in_channels=model.embed_dims, patch_size=model.patch_size)
    with torch.no_grad():
        pyramid = neck(model(torch.rand(1, input_bands(model), 64, 64)))
    assert [tuple(p.shape[-2:]) for p in pyramid] == [(16, 16), (8, 8), (4, 4), (2, 2)]


@pytest.mark.parametrize('name', BACKBONES)
def test_contract_last_block_pyramid_source(name):
    """``pyramid_source='last_block'``: the 4 pyramid inputs are the last block's map
    after the final norm, the same map 4 times (the ViTDet-style detection pyramid)."""
    torch.manual_seed(0)
    def build(**options):
        return MODELS.build(dict(type=name, arch=dict(TINY), img_size=64, **options)).eval()

    last = build(pyramid_source='last_block')
    assert (last.out_indices, last.final_norm) == ((3, ), True)
    normed = build(out_indices=(3, ), final_norm=True)
    with torch.no_grad():
        for module in last.modules():  # norms that are not the identity
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.normal_(1.0, 0.2)
                if module.bias is not None:  # (TerraMind's norms have none)
                    module.bias.normal_(0.0, 0.2)
        normed.load_state_dict(last.state_dict())
        image = torch.rand(2, input_bands(last), 64, 64)
        levels, expected = last(image), normed(image)
    assert len(expected) == 1 and len(levels) == 4
    assert all(torch.equal(level, expected[0]) for level in levels)
    with pytest.raises(ValueError, match='leave out_indices unset'):
        build(pyramid_source='last_block', out_indices=(1, 3))
    with pytest.raises(ValueError, match='final_norm must be True or unset'):
        build(pyramid_source='last_block', final_norm=False)
    with pytest.raises(ValueError, match="pyramid_source must be one of .'blocks', "
                                         "'last_block'."):
        build(pyramid_source='last_layer')


def test_out_index_presets_and_errors():
    assert resolve_out_indices(None, 12) == (3, 5, 7, 11)
    assert resolve_out_indices(None, 24) == (5, 11, 17, 23)
    assert resolve_out_indices('vit24_reobench_segmentation', 24) == (3, 5, 7, 11)
    assert resolve_out_indices(None, 8) == (1, 3, 5, 7)
    with pytest.raises(ValueError, match='valid'):
        resolve_out_indices('vit99', 12)
    with pytest.raises(ValueError, match='increasing'):
        resolve_out_indices((3, 12), 12)
    with pytest.raises(ValueError, match='increasing'):
        resolve_out_indices((5, 3), 12)


@pytest.mark.parametrize('patch,grid,expected', [
    (16, 32, [128, 64, 32, 16]),  # 512 px
    (16, 50, [200, 100, 50, 25]),  # 800 px
    (32, 16, [128, 64, 32, 16]),
    (32, 25, [200, 100, 50, 25]),
    (14, 37, [128, 64, 32, 16]),  # 512 px padded to 518: 37 tokens -> stride-16 grid 32
    (14, 57, [200, 100, 50, 25]),  # 800 px floored to 798: 57 tokens -> 50
])
def test_simple_feature_pyramid_strides(patch, grid, expected):
    neck = SimpleFeaturePyramid(in_channels=8, patch_size=patch)
    outputs = neck([torch.rand(1, 8, grid, grid) for _ in range(4)])
    assert [o.shape[-1] for o in outputs] == expected
    assert all(o.shape[1] == 8 for o in outputs)


def test_simple_feature_pyramid_layers_follow_the_protocol():
    neck = SimpleFeaturePyramid(in_channels=8, patch_size=16)
    up4 = [type(m).__name__ for m in neck.levels[0]]
    assert up4 == ['ConvTranspose2d', 'LayerNorm2d', 'GELU', 'ConvTranspose2d']
    assert [type(m).__name__ for m in neck.levels[1]] == ['ConvTranspose2d']
    assert type(neck.levels[2]).__name__ == 'Identity'
    assert type(neck.levels[3]).__name__ == 'MaxPool2d'
    assert pyramid_scales(32)[1] == (8.0, 4.0, 2.0, 1.0)
    assert len(SimpleFeaturePyramid(in_channels=8, patch_size=32).levels[0]) == 7
    with pytest.raises(ValueError, match='expects 4 maps'):
        neck([torch.rand(1, 8, 4, 4)] * 3)


def _segmentor(backbone_type):
    return MODELS.build(dict(
        type='mmseg.EncoderDecoder',
        data_preprocessor=dict(type='mmseg.SegDataPreProcessor', size=(64, 64)),
        backbone=dict(type=backbone_type, arch=dict(TINY, patch_size=16), img_size=64,
                      out_indices=(0, 1, 2, 3)),
        neck=dict(type='SimpleFeaturePyramid', in_channels=32, patch_size=16),
        decode_head=dict(type='mmseg.UPerHead', in_channels=[32] * 4, in_index=[0, 1, 2, 3],
                         pool_scales=(1, 2), channels=16, num_classes=3,
                         norm_cfg=dict(type='BN', requires_grad=True), align_corners=False,
                         loss_decode=dict(type='mmseg.CrossEntropyLoss')),
        auxiliary_head=dict(type='mmseg.FCNHead', in_channels=32, in_index=2, channels=16,
                            num_convs=1, num_classes=3, concat_input=False,
                            loss_decode=dict(type='mmseg.CrossEntropyLoss', loss_weight=0.4))))


def test_layer_decay_groups_on_an_mmseg_upernet():
    model = _segmentor('SatMAE')
    constructor = OPTIM_WRAPPER_CONSTRUCTORS.build(dict(
        type='ViTLayerDecayOptimWrapperConstructor',
        optim_wrapper_cfg=dict(optimizer=dict(type='AdamW', lr=6e-5, weight_decay=0.05)),
        paramwise_cfg=dict(layer_decay_rate=0.9, num_layers=6)))
    optimizer = constructor(model).optimizer
    group = lambda name: parameter_group_of(optimizer, name)  # noqa: E731
    assert group('backbone.vit.pos_embed')['lr'] == pytest.approx(6e-5 * 0.9**5)
    assert group('backbone.vit.pos_embed')['weight_decay'] == 0
    assert group('backbone.vit.cls_token')['weight_decay'] == 0
    assert group('backbone.vit.patch_embed.proj.weight')['lr'] == pytest.approx(6e-5 * 0.9**5)
    assert group('backbone.vit.blocks.0.attn.qkv.weight')['lr'] == pytest.approx(6e-5 * 0.9**4)
    assert group('backbone.vit.blocks.0.attn.qkv.weight')['weight_decay'] == 0.05
    assert group('backbone.vit.blocks.0.attn.qkv.bias')['weight_decay'] == 0
    assert group('backbone.vit.blocks.3.mlp.fc1.weight')['lr'] == pytest.approx(6e-5 * 0.9)
    assert group('decode_head.conv_seg.weight')['lr'] == pytest.approx(6e-5)
    assert group('neck.levels.0.0.weight')['lr'] == pytest.approx(6e-5)
    assert group('decode_head.bottleneck.bn.weight')['weight_decay'] == 0
    covered = {n for g in optimizer.param_groups for n in g['param_names']}
    assert covered == {n for n, p in model.named_parameters() if p.requires_grad}
    with pytest.raises(ValueError, match='num_layers'):
        OPTIM_WRAPPER_CONSTRUCTORS.build(dict(
            type='ViTLayerDecayOptimWrapperConstructor',
            optim_wrapper_cfg=dict(optimizer=dict(type='AdamW', lr=1e-4)),
            paramwise_cfg=dict(layer_decay_rate=0.9, num_layers=14)))(model)
    with pytest.raises(ValueError, match='layer_decay_rate'):
        OPTIM_WRAPPER_CONSTRUCTORS.build(dict(
            type='ViTLayerDecayOptimWrapperConstructor',
            optim_wrapper_cfg=dict(optimizer=dict(type='AdamW', lr=1e-4)),
            paramwise_cfg=dict(decay_rate=0.9)))


def _recipe_layer(name, num_max_layer):
    """The RVSA recipe's ``get_num_layer_for_vit`` (REOBench's segmentation configs),
    written out from its published description."""
    if name in ('backbone.cls_token', 'backbone.mask_token', 'backbone.pos_embed') \
            or name.startswith('backbone.patch_embed'):
        return 0
    if name.startswith('backbone.blocks'):
        return int(name.split('.')[2]) + 1
    return num_max_layer - 1


def _recipe_optimizer(model, rule, num_layers=12):
    return OPTIM_WRAPPER_CONSTRUCTORS.build(dict(
        type='ViTLayerDecayOptimWrapperConstructor',
        optim_wrapper_cfg=dict(optimizer=dict(type='AdamW', lr=6e-5, weight_decay=0.05)),
        paramwise_cfg=dict(layer_decay_rate=0.9, num_layers=num_layers,
                           layer_ids=rule)))(model).optimizer


@pytest.mark.parametrize('backbone', ['RVSA', 'ViTAENCRVSA'])
def test_recipe_layer_ids_equal_the_rvsa_recipe_rule(backbone):
    """``layer_ids='recipe_blocks'``: num_layers from the config (2 here for a 4-block
    model, as REOBench gives 12 to 24-block models), deep blocks above the base lr, the
    recipe's weight-decay exclusions."""
    model = _segmentor(backbone)
    optimizer = _recipe_optimizer(model, 'recipe_blocks', num_layers=2)
    seen = 0
    for name, param in model.named_parameters():
        group = parameter_group_of(optimizer, name)
        layer = _recipe_layer(name, 2 + 2)
        assert group['lr'] == pytest.approx(6e-5 * 0.9**(2 + 2 - 1 - layer)), name
        no_decay = param.ndim == 1 or name.endswith('.bias') or any(
            k in name for k in ('pos_embed', 'cls_token', 'rel_pos_'))
        assert group['weight_decay'] == (0.0 if no_decay else 0.05), name
        seen += 1
    assert seen == len(list(model.parameters()))
    assert parameter_group_of(optimizer, 'backbone.blocks.3.mlp.fc1.weight')['lr'] == \
        pytest.approx(6e-5 / 0.9)  # block 3 → layer 4 > num_layers + 1: scale 0.9^-1
    if backbone == 'RVSA':  # a 2-D bias table is decayed by the recipe, not by default
        name = 'backbone.blocks.0.attn.relative_position_bias_table'
        assert parameter_group_of(optimizer, name)['weight_decay'] == 0.05


def test_recipe_rules_on_wrapped_blocks_and_without_decay():
    model = _segmentor('SatMAE')  # blocks under backbone.vit.blocks: the recipe's blocks
    optimizer = _recipe_optimizer(model, 'recipe_blocks')
    group = lambda name: parameter_group_of(optimizer, name)  # noqa: E731
    assert group('backbone.vit.blocks.2.attn.qkv.weight')['lr'] == \
        pytest.approx(6e-5 * 0.9**(14 - 1 - 3))
    assert group('backbone.vit.pos_embed')['lr'] == pytest.approx(6e-5 * 0.9**13)
    assert group('decode_head.conv_seg.weight')['lr'] == pytest.approx(6e-5)
    flat = _recipe_optimizer(model, 'recipe_none')
    assert {g['lr'] for g in flat.param_groups} == {6e-5}
    assert parameter_group_of(flat, 'backbone.vit.blocks.0.attn.qkv.weight')['weight_decay'] \
        == 0.05
    with pytest.raises(ValueError, match='needs num_layers'):
        OPTIM_WRAPPER_CONSTRUCTORS.build(dict(
            type='ViTLayerDecayOptimWrapperConstructor',
            optim_wrapper_cfg=dict(optimizer=dict(type='AdamW', lr=1e-4)),
            paramwise_cfg=dict(layer_decay_rate=0.9, layer_ids='recipe_blocks')))
    with pytest.raises(ValueError, match='layer_ids must be one of'):
        OPTIM_WRAPPER_CONSTRUCTORS.build(dict(
            type='ViTLayerDecayOptimWrapperConstructor',
            optim_wrapper_cfg=dict(optimizer=dict(type='AdamW', lr=1e-4)),
            paramwise_cfg=dict(layer_decay_rate=0.9, num_layers=12, layer_ids='blocks')))


@pytest.mark.parametrize('name', BACKBONES)
def test_every_backbone_trains_in_an_mmseg_upernet(name):
    from mmseg.structures import SegDataSample
    from mmengine.structures import PixelData
    torch.manual_seed(0)
    model = _segmentor(name)
    samples = []
    for _ in range(2):
        sample = SegDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64),
                                             pad_shape=(64, 64)))
        sample.gt_sem_seg = PixelData(data=torch.randint(0, 3, (1, 64, 64)))
        samples.append(sample)
    bands = input_bands(model.backbone)
    data = dict(inputs=[torch.randint(0, 255, (bands, 64, 64), dtype=torch.uint8)] * 2,
                data_samples=samples)
    optim = OPTIM_WRAPPER_CONSTRUCTORS.build(dict(
        type='ViTLayerDecayOptimWrapperConstructor',
        optim_wrapper_cfg=dict(optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05)),
        paramwise_cfg=dict(layer_decay_rate=0.9)))(model)
    model.train()
    before = {n: p.detach().clone() for n, p in model.backbone.named_parameters()}
    losses = model.train_step(data, optim)
    assert all(torch.isfinite(v).all() for v in losses.values())
    changed = [n for n, p in model.backbone.named_parameters() if not torch.equal(p, before[n])]
    assert any(n.startswith(f'{model.backbone.block_prefix}0.') or 'blocks.0.' in n
               for n in changed)


def test_oriented_rcnn_with_a_vit_pyramid_and_fpn_trains_and_predicts():
    """neck = [SimpleFeaturePyramid, FPN] builds as one sequential neck in mmrotate."""
    from mmdet.structures import DetDataSample
    from mmengine.config import Config
    from mmengine.structures import InstanceData
    from mmrotate.structures.bbox import RotatedBoxes
    from mmengine.registry import init_default_scope
    init_default_scope('mmrotate')
    cfg = Config.fromfile('configs/_base_/models/oriented-rcnn-le90_r18-tiny_fpn.py')
    cfg.model.backbone = dict(type='SatMAE', arch=dict(TINY, patch_size=16), img_size=128,
                              out_indices=(0, 1, 2, 3))
    cfg.model.neck = [dict(type='SimpleFeaturePyramid', in_channels=32, patch_size=16),
                      dict(type='mmdet.FPN', in_channels=[32] * 4, out_channels=64,
                           num_outs=5)]
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    sample = DetDataSample(metainfo=dict(img_shape=(128, 128), ori_shape=(128, 128),
                                         pad_shape=(128, 128), scale_factor=(1.0, 1.0)))
    sample.gt_instances = InstanceData(
        bboxes=RotatedBoxes(torch.tensor([[40.0, 50.0, 30.0, 12.0, 0.3],
                                          [90.0, 80.0, 20.0, 20.0, -0.5]])),
        labels=torch.tensor([0, 2]))
    data = dict(inputs=[torch.randint(0, 255, (3, 128, 128), dtype=torch.uint8)],
                data_samples=[sample])
    optim = OPTIM_WRAPPER_CONSTRUCTORS.build(dict(
        type='ViTLayerDecayOptimWrapperConstructor',
        optim_wrapper_cfg=dict(optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.05)),
        paramwise_cfg=dict(layer_decay_rate=0.9)))(model)
    model.train()
    losses = model.train_step(data, optim)
    assert {'loss_rpn_cls', 'loss_cls', 'loss_bbox'} <= set(losses)
    assert all(torch.isfinite(v).all() for v in losses.values())
    model.eval()
    with torch.no_grad():
        result = model.test_step(data)[0]
    boxes = result.pred_instances.bboxes
    assert getattr(boxes, 'tensor', boxes).shape[-1] == 5  # (cx, cy, w, h, angle)
