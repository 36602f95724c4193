"""ChannelAdapter: a 1×1 convolution without bias in front of any backbone config.

Against a hand computation with the same weights (an ``nn.Conv2d`` and a second backbone
holding copies of the adapter's weights): the outputs are the backbone's for the adapted
input, bit for bit, for an mmseg ResNet and for this package's ViT; gradients reach the
convolution unless it is frozen, which survives ``train()``; equal channel counts give the
identity; ``init_weights`` runs the wrapped backbone's own pretrained loading and leaves
the convolution at PyTorch's default initialisation; bad arguments are refused."""
import copy

import pytest
import torch
from mmengine.registry import init_default_scope
from torch import nn

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.models.backbones import ChannelAdapter
from reobench_mm.registry import MODELS

RESNET = dict(type='ResNetV1c', depth=18, stem_channels=16, base_channels=16,
              out_indices=(0, 1, 2, 3), norm_cfg=dict(type='BN', requires_grad=True))
VIT = dict(type='ImageNetViT', arch=dict(embed_dims=32, depth=2, num_heads=2), img_size=64,
           out_indices=(0, 1), final_norm=True)
BACKBONES = {'resnet': RESNET, 'vit': VIT}


@pytest.fixture(autouse=True)
def _mmseg_scope():
    """Backbone configs name mmseg's modules as a segmentation config would."""
    init_default_scope('mmseg')


def _adapter(backbone, in_channels=13, seed=0, **options):
    torch.manual_seed(seed)
    return MODELS.build(dict(type='ChannelAdapter', in_channels=in_channels,
                             backbone=copy.deepcopy(backbone), **options))


def _by_hand(model):
    """The same computation from separate modules holding copies of the weights."""
    conv = nn.Conv2d(model.in_channels, model.out_channels, kernel_size=1, bias=False)
    with torch.no_grad():
        conv.weight.copy_(model.adapter.weight)
    backbone = MODELS.build(copy.deepcopy(BACKBONES[_kind(model)]))
    backbone.load_state_dict(model.backbone.state_dict())
    backbone.eval()  # (mmseg's ResNet.train returns None: no chaining)
    return conv.eval(), backbone


def _kind(model):
    return 'vit' if type(model.backbone).__name__ == 'ImageNetViT' else 'resnet'


@pytest.mark.parametrize('kind', sorted(BACKBONES))
def test_thirteen_bands_give_the_backbone_outputs_of_the_adapted_input(kind):
    model = _adapter(BACKBONES[kind]).eval()
    assert isinstance(model, ChannelAdapter)
    conv = model.adapter
    assert type(conv) is nn.Conv2d and conv.kernel_size == (1, 1) and conv.bias is None
    assert tuple(conv.weight.shape) == (3, 13, 1, 1)
    assert [n for n, _ in model.named_parameters() if not n.startswith('backbone.')] == \
        ['adapter.weight']
    image = torch.randn(2, 13, 64, 64)
    hand_conv, hand_backbone = _by_hand(model)
    with torch.no_grad():
        outputs = model(image)
        expected = hand_backbone(hand_conv(image))
        # and the convolution is the per-pixel linear map of the bands
        mixed = torch.einsum('oc,bchw->bohw', model.adapter.weight[:, :, 0, 0], image)
    assert isinstance(outputs, tuple) and len(outputs) == len(expected)
    assert all(torch.equal(o, e) for o, e in zip(outputs, expected))
    torch.testing.assert_close(hand_conv(image), mixed, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('kind', sorted(BACKBONES))
def test_gradients_reach_the_adapter(kind):
    model = _adapter(BACKBONES[kind]).train()
    sum(o.sum() for o in model(torch.randn(2, 13, 64, 64))).backward()
    grad = model.adapter.weight.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0
    assert all(p.grad is not None for p in model.backbone.parameters() if p.requires_grad)


def test_equal_channel_counts_give_the_identity():
    model = _adapter(RESNET, in_channels=3).eval()
    assert type(model.adapter) is nn.Identity
    assert all(n.startswith('backbone.') for n, _ in model.named_parameters())
    image = torch.randn(2, 3, 64, 64)
    backbone = MODELS.build(copy.deepcopy(RESNET))
    backbone.load_state_dict(model.backbone.state_dict())
    backbone.eval()
    with torch.no_grad():
        assert all(torch.equal(o, e) for o, e in zip(model(image), backbone(image)))
    # another channel count on both sides: the backbone says what it takes
    four = _adapter(dict(RESNET, in_channels=4), in_channels=13, out_channels=4)
    assert tuple(four.adapter.weight.shape) == (4, 13, 1, 1)
    assert four.backbone.stem[0].in_channels == 4


def test_a_frozen_adapter_stays_frozen_through_train():
    model = _adapter(RESNET, frozen=True)
    model.train()
    assert not model.adapter.weight.requires_grad
    model.eval().train(True)
    assert not model.adapter.weight.requires_grad
    before = model.adapter.weight.detach().clone()
    sum(o.sum() for o in model(torch.randn(2, 13, 64, 64))).backward()
    assert model.adapter.weight.grad is None
    # only the adapter: the wrapped backbone trains unless its own config freezes it
    assert all(p.requires_grad and p.grad is not None for p in model.backbone.parameters())
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.5)
    optimizer.step()
    assert torch.equal(model.adapter.weight, before)
    assert _adapter(RESNET, frozen=False).train().adapter.weight.requires_grad


def test_init_weights_loads_the_backbones_checkpoint_and_keeps_the_default_conv(tmp_path):
    """The wrapped backbone's init_cfg (here a whole segmentor's checkpoint read with
    prefix='backbone.', as the demo config does) is loaded; the convolution keeps the
    weights PyTorch's default initialisation drew at construction."""
    torch.manual_seed(1)
    source = MODELS.build(copy.deepcopy(RESNET))
    source.train()
    with torch.no_grad():  # batch-norm statistics that differ from the defaults
        source(torch.randn(2, 3, 64, 64) * 3 + 1)
    path = str(tmp_path / 'segmentor.pth')
    torch.save(dict(meta=dict(iter=1), state_dict={
        **{f'backbone.{k}': v for k, v in source.state_dict().items()},
        'decode_head.conv_seg.weight': torch.zeros(6, 8, 1, 1)}), path)
    init_cfg = dict(type='Pretrained', checkpoint=path, prefix='backbone.')
    model = _adapter(dict(RESNET, init_cfg=init_cfg), seed=2)
    torch.manual_seed(2)
    default_conv = nn.Conv2d(13, 3, kernel_size=1, bias=False)  # drawn first, as there
    assert torch.equal(model.adapter.weight, default_conv.weight)
    expected = source.state_dict()
    assert not all(torch.equal(v, expected[k]) for k, v in model.backbone.state_dict().items())
    model.init_weights()
    loaded = model.backbone.state_dict()
    assert loaded.keys() == expected.keys()
    assert all(torch.equal(loaded[k], expected[k]) for k in expected)
    assert torch.equal(model.adapter.weight, default_conv.weight)


@pytest.mark.parametrize('options, message', [
    (dict(in_channels=0), r'in_channels must be a positive number of channels .* got 0'),
    (dict(in_channels=-13), r'in_channels must be a positive number .* got -13'),
    (dict(in_channels=2.5), r'in_channels must be .*\(an int >= 1\), got 2.5'),
    (dict(in_channels=True), r'in_channels must be .* got True'),
    (dict(out_channels=0), r'out_channels must be a positive number of channels .* got 0'),
    (dict(backbone='ResNetV1c'), r'backbone must be a config dict with a type'),
    (dict(backbone=None), r'backbone must be a config dict with a type'),
    (dict(backbone=dict(depth=18)), r'backbone must be a config dict with a type'),
    (dict(backbone=dict(RESNET, in_channels=4)),
     r'wrapped backbone takes in_channels=4 but the adapter gives out_channels=3'),
    (dict(frozen='yes'), r'frozen must be True or False'),
])
def test_bad_arguments_are_refused(options, message):
    kwargs = dict(dict(in_channels=13, backbone=copy.deepcopy(RESNET)), **options)
    with pytest.raises(ValueError, match=message):
        ChannelAdapter(**kwargs)


def test_an_input_of_another_band_count_is_refused():
    model = _adapter(RESNET)
    with pytest.raises(ValueError, match=r'expects B×13×H×W inputs, got shape \(2, 3, 64, 64\)'):
        model(torch.randn(2, 3, 64, 64))
    identity = _adapter(RESNET, in_channels=3)
    with pytest.raises(ValueError, match=r'expects B×3×H×W inputs, got shape \(2, 13, 8, 8\)'):
        identity(torch.randn(2, 13, 8, 8))
