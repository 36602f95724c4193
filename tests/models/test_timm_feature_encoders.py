"""The calibration study's natural-image encoders as FPN-probe backbones
(reobench_mm.models.backbones.timm_features, reobench_mm.models.backbones.rcf).

- ``TimmFeatureEncoder`` against timm itself: a timm classifier (random weights, batch norm
  statistics randomised so that they count) saved as timm writes it loads through
  ``init_cfg=Pretrained`` and returns timm's own ``forward_intermediates`` at strides 4 to
  32 (ResNet-18, Swin-T, ConvNeXt-Atto, MobileNetV3-Large); the converter drops exactly
  the heads, refuses a wrong key, another architecture's file and another size's shapes,
  and adapts the first convolution to other band counts as timm's rule says (written out).
- ``ImageNetViT`` (the ViT-B/16 and ViT-L/16 probes) against timm's ``vit_tiny_patch16_224``.
- ``RandomConvFeatures`` against the MOSAIKS / torchgeo RCF features written out with
  numpy (valid correlation, shared bias, relu of both signs, window means).
- Each probe config: its encoder, weights file and timm's normalisation for the tag; built
  whole on the meta device (every level and the logits at the right size); built at small
  widths for real, one training step leaves the encoder bit-identical; one config trains
  through MMEngine's Runner at 224 px on the demo data.
"""
import copy
import functools
import glob
import os.path as osp

import numpy as np
import pytest
import timm
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT
from probe_helpers import (assert_decoder_moved, assert_encoder_saved_as,
                           assert_probe_is_the_task_base, build_on_meta, crop_pipeline,
                           seg_samples, train_tiny_probe)
from reobench_mm.models.backbones import check_state_dict
from reobench_mm.models.backbones.rcf import RandomConvFeatures
from reobench_mm.models.backbones.timm_features import (read_timm_state_dict,
                                                        timm_feature_key_map)
from reobench_mm.registry import MODELS

PROBE_DIR = osp.join(PROJECT_ROOT, 'configs', 'probe')
TASK_BASE = osp.join(PROJECT_ROOT, 'configs', '_base_', 'tasks', 'fpn-probe_potsdam.py')
#: probe name -> timm model of its encoder (the tag names the weights); None: RCF
PROBES = {
    'resnet-18': 'resnet18.a1_in1k', 'resnet-50': 'resnet50.a1_in1k',
    'swin-t': 'swin_tiny_patch4_window7_224.ms_in1k',
    'convnext-l': 'convnext_large.dinov3_lvd1689m',
    'mobilenetv3': 'mobilenetv3_large_100.ra_in1k',
    'vit-b16': 'vit_base_patch16_224.augreg2_in21k_ft_in1k',
    'vit-l16': 'vit_large_patch16_224.augreg_in21k_ft_in1k', 'rcf': None,
}
#: ViT probes: depth, the hooked blocks (the last of each quarter)
VIT_HOOKS = {'vit-b16': (12, (2, 5, 8, 11)), 'vit-l16': (24, (5, 11, 17, 23))}
#: timm model -> (feature_info indices at strides 4, 8, 16, 32; its classifier keys that
#: come after the last level)
FEATURE_LEVELS = {
    'resnet18': ((1, 2, 3, 4), {'fc.weight', 'fc.bias'}),
    'swin_tiny_patch4_window7_224': ((0, 1, 2, 3), {'norm.weight', 'norm.bias',
                                                    'head.fc.weight', 'head.fc.bias'}),
    'convnext_atto': ((0, 1, 2, 3), {'head.norm.weight', 'head.norm.bias',
                                     'head.fc.weight', 'head.fc.bias'}),
    'mobilenetv3_large_100': ((1, 2, 3, 4), {'conv_head.weight', 'conv_head.bias',
                                             'classifier.weight', 'classifier.bias'}),
}
NUM_CLASSES = 6


def _probe_path(name: str) -> str:
    return osp.join(PROBE_DIR, f'fpn-probe_{name}_frozen_1xb8-12e_potsdam-512x512.py')


def _timm_reference(name: str, seed: int = 0) -> torch.nn.Module:
    """timm's classifier, random weights, batch norm statistics and affine parameters
    randomised (so that they matter), in evaluation mode."""
    torch.manual_seed(seed)
    model = timm.create_model(name, pretrained=False)
    with torch.no_grad():
        for key, tensor in model.state_dict().items():
            if key.endswith('running_mean'):
                tensor.normal_(0, 0.1)
            elif key.endswith('running_var'):
                tensor.uniform_(0.5, 1.5)
            elif key.endswith('bias') and tensor.dtype.is_floating_point:
                tensor.normal_(0, 0.05)
    return model.eval()


def _encoder(name: str, checkpoint: str = None, **options):
    cfg = dict(type='TimmFeatureEncoder', model_name=name, **options)
    if checkpoint is not None:
        cfg['init_cfg'] = dict(type='Pretrained', checkpoint=checkpoint)
    model = MODELS.build(cfg)
    model.init_weights()
    return model


# ----------------------------------------------------------------------------- timm parity

@pytest.mark.parametrize('name, size', [('resnet18', 64), ('swin_tiny_patch4_window7_224', 224),
                                        ('convnext_atto', 64), ('mobilenetv3_large_100', 64)])
def test_encoder_loads_timms_file_and_returns_timms_features(name, size, tmp_path):
    reference = _timm_reference(name)
    path = str(tmp_path / f'{name}.pth')
    torch.save(reference.state_dict(), path)
    model = _encoder(name, path, frozen=True)
    model.train()  # frozen: stays in evaluation mode, no gradients
    assert not any(m.training for m in model.trunk.modules())
    assert not any(p.requires_grad for p in model.parameters())
    indices, _ = FEATURE_LEVELS[name]
    image = torch.rand(1, 3, size, size)
    with torch.no_grad():
        ours = model(image)
        theirs = reference.forward_intermediates(image, indices=list(indices),
                                                 intermediates_only=True)
    assert model.out_indices == indices and model.strides == (4, 8, 16, 32)
    assert [tuple(x.shape[-2:]) for x in ours] == [(size // s, size // s) for s in (4, 8, 16, 32)]
    assert tuple(x.shape[1] for x in ours) == model.channels
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('name', sorted(FEATURE_LEVELS))
def test_converter_maps_every_tensor_and_drops_only_the_head(name):
    """Swin at 512 px, as the probe config builds it: a 224 px file fits (the same
    windows and tables at every stage)."""
    reference = _timm_reference(name)
    with torch.device('meta'):  # the layout only
        model = MODELS.build(dict(type='TimmFeatureEncoder', model_name=name, model_args=(
            dict(img_size=512) if 'swin' in name else None)))
    official = reference.state_dict()
    converted = model.convert_official_state_dict(official)
    _, head = FEATURE_LEVELS[name]
    assert head <= set(official)
    assert set(converted) == set(model.state_dict())
    assert check_state_dict(model, converted) == []  # every shape fits
    assert len(converted) == len(official) - len(head)
    mapping, unused, _ = timm_feature_key_map(name, set(model.trunk.state_dict()))
    assert unused == head
    for key, target in mapping.items():  # the same tensor, under the extractor's name
        assert torch.equal(converted[f'trunk.{target}'], official[key])
        assert target in (key, key.replace('.', '_', 1))


def test_hub_safetensors_file_loads_like_the_torch_file(tmp_path):
    from safetensors.torch import save_file
    reference = _timm_reference('convnext_atto')
    state = {k: v.contiguous() for k, v in reference.state_dict().items()}
    save_file(state, str(tmp_path / 'model.safetensors'))
    torch.save(state, str(tmp_path / 'model.pth'))
    read = read_timm_state_dict(str(tmp_path / 'model.safetensors'))
    assert read.keys() == state.keys() and all(torch.equal(read[k], state[k]) for k in state)
    a = _encoder('convnext_atto', str(tmp_path / 'model.safetensors')).state_dict()
    b = _encoder('convnext_atto', str(tmp_path / 'model.pth')).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    (tmp_path / 'broken.safetensors').write_bytes(b'not a safetensors file')
    with pytest.raises(ValueError, match='safetensors'):
        read_timm_state_dict(str(tmp_path / 'broken.safetensors'))


def test_wrong_files_are_refused_with_the_keys_named(tmp_path):
    state = _timm_reference('resnet18').state_dict()
    wrong = dict(state)
    wrong['layer1.0.conv1.wieght'] = wrong.pop('layer1.0.conv1.weight')
    torch.save(wrong, str(tmp_path / 'typo.pth'))
    with pytest.raises(KeyError, match=r"1 missing keys.*trunk\.layer1\.0\.conv1\.weight.*"
                                       r"1 unexpected keys.*layer1\.0\.conv1\.wieght"):
        _encoder('resnet18', str(tmp_path / 'typo.pth'))
    # another architecture (ResNet-34's extra blocks), another family, another size
    torch.save(timm.create_model('resnet34').state_dict(), str(tmp_path / 'r34.pth'))
    with pytest.raises(KeyError, match=r'unexpected keys.*layer1\.2\.'):
        _encoder('resnet18', str(tmp_path / 'r34.pth'))
    torch.save(timm.create_model('convnext_atto').state_dict(), str(tmp_path / 'cnx.pth'))
    with pytest.raises(KeyError, match='missing keys'):
        _encoder('resnet18', str(tmp_path / 'cnx.pth'))
    with pytest.raises(ValueError, match=r'shape mismatches.*stem_0\.weight'):
        _encoder('convnext_femto', str(tmp_path / 'cnx.pth'))
    # without the batch norm counters (torch fills them in too), the file still loads
    lean = {k: v for k, v in state.items() if not k.endswith('num_batches_tracked')}
    torch.save(lean, str(tmp_path / 'lean.pth'))
    assert torch.equal(_encoder('resnet18', str(tmp_path / 'lean.pth')).state_dict()[
        'trunk.layer4.1.bn2.running_var'], state['layer4.1.bn2.running_var'])


@pytest.mark.parametrize('bands', [1, 4])
def test_other_band_counts_adapt_the_first_convolution_as_timm_does(bands, tmp_path):
    """timm's rule written out: 1 band sums the RGB filters; otherwise the RGB filters
    repeat cyclically over the bands, scaled by 3 / bands."""
    state = _timm_reference('resnet18').state_dict()
    torch.save(state, str(tmp_path / 'rgb.pth'))
    model = _encoder('resnet18', str(tmp_path / 'rgb.pth'), in_channels=bands).eval()
    rgb = state['conv1.weight']
    if bands == 1:
        expected = rgb.sum(dim=1, keepdim=True)
    else:
        expected = torch.cat([rgb[:, [c % 3]] for c in range(bands)], dim=1) * (3 / bands)
    torch.testing.assert_close(model.trunk.conv1.weight, expected)
    assert len(model(torch.rand(1, bands, 64, 64))) == 4
    with pytest.raises(ValueError, match=f'expects B×{bands}×H×W'):
        model(torch.rand(1, 3, 64, 64))


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match='no model'):
        _encoder('resnet181')
    with pytest.raises(ValueError, match='no pretrained tag'):
        _encoder('convnext_large.dinov3_nosuch')
    with pytest.raises(ValueError, match='ImageNetViT'):
        _encoder('vit_tiny_patch16_224')
    with pytest.raises(ValueError, match='may not set'):
        _encoder('resnet18', model_args=dict(features_only=False))
    with pytest.raises(TypeError, match='unexpected keyword'):
        _encoder('resnet18', model_args=dict(img_sise=64))
    with pytest.raises(ValueError, match='in_channels'):
        _encoder('resnet18', in_channels=0)
    with pytest.raises(ValueError, match='frozen'):
        _encoder('resnet18', frozen='yes')
    with pytest.raises(ValueError, match='takes only checkpoint'):
        MODELS.build(dict(type='TimmFeatureEncoder', model_name='resnet18', init_cfg=dict(
            type='Pretrained', checkpoint='x.pth', prefix='backbone.'))).init_weights()


def test_not_frozen_trains_and_keeps_timms_initialisation():
    torch.manual_seed(0)
    model = _encoder('resnet18')
    torch.manual_seed(0)
    reference = timm.create_model('resnet18', features_only=True, out_indices=(1, 2, 3, 4))
    state = model.state_dict()  # MMEngine's init_weights left timm's initialisation
    assert all(torch.equal(state[f'trunk.{k}'], v) for k, v in reference.state_dict().items())
    model.train()
    assert model.trunk.training and all(p.requires_grad for p in model.parameters())
    sum(x.mean() for x in model(torch.rand(2, 3, 64, 64))).backward()
    assert all(p.grad is not None for p in model.parameters())


# ----------------------------------------------------------------------------- ViT (timm)

def test_imagenet_vit_returns_timms_vit_blocks(tmp_path):
    """The ViT probes' encoder on timm's own ``vit_tiny_patch16_224`` file."""
    torch.manual_seed(0)
    reference = timm.create_model('vit_tiny_patch16_224', pretrained=False).eval()
    path = str(tmp_path / 'vit_tiny.pth')
    torch.save(reference.state_dict(), path)
    model = MODELS.build(dict(type='ImageNetViT', arch=dict(embed_dims=192, depth=12,
                                                            num_heads=3),
                              img_size=224, frozen_stages=12, out_indices=(2, 5, 8, 11),
                              init_cfg=dict(type='Pretrained', checkpoint=path)))
    model.init_weights()
    model.eval()
    image = torch.rand(2, 3, 224, 224)
    with torch.no_grad():
        ours = model(image)
        theirs = reference.forward_intermediates(image, indices=[2, 5, 8, 11], norm=False,
                                                 output_fmt='NCHW', intermediates_only=True)
    for a, b in zip(ours, theirs):
        assert a.shape == (2, 192, 14, 14)
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    wrong = reference.state_dict()
    wrong['blocks.0.attn.qkv.wieght'] = wrong.pop('blocks.0.attn.qkv.weight')
    torch.save(wrong, str(tmp_path / 'typo.pth'))
    with pytest.raises(KeyError, match='blocks.0.attn.qkv'):
        model.load_pretrained(str(tmp_path / 'typo.pth'))


# ----------------------------------------------------------------------------- RCF

def _rcf_reference(x: np.ndarray, weights: np.ndarray, bias: float, strides):
    """MOSAIKS / torchgeo written out: the valid correlation of every filter plus the
    bias, relu of both signs (filters first, then the negated half), then the mean of
    each s×s window (the last one of a row or column cut at the map's edge)."""
    filters, _, k, _ = weights.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))
    response = np.einsum('bchwuv,fcuv->bfhw', windows, weights) + bias
    maps = np.concatenate([np.maximum(response, 0), np.maximum(-response, 0)], axis=1)
    height, width = maps.shape[-2:]
    levels = []
    for s in strides:
        rows, cols = -(-height // s), -(-width // s)
        level = np.zeros(maps.shape[:2] + (rows, cols))
        for i in range(rows):
            for j in range(cols):
                level[:, :, i, j] = maps[:, :, i * s:(i + 1) * s, j * s:(j + 1) * s].mean((2, 3))
        levels.append(level)
    return levels, maps.mean(axis=(2, 3))


def test_rcf_features_equal_the_mosaiks_formula():
    # 45 filters: two passes of 32 and a remainder; 37x45: partial windows at every level
    model = MODELS.build(dict(type='RandomConvFeatures', in_channels=4, features=90,
                              kernel_size=3, bias=-0.5, seed=7))
    assert type(model) is RandomConvFeatures
    generator = torch.Generator().manual_seed(7)  # torchgeo's draw: shape, order, dtype
    torch.testing.assert_close(model.weights, torch.randn(45, 4, 3, 3, generator=generator),
                               rtol=0, atol=0)
    assert list(model.parameters()) == [] and set(model.state_dict()) == {'weights', 'biases'}
    x = torch.randn(2, 4, 37, 45)
    with torch.no_grad():
        levels, pooled = model(x), model.pooled(x)
    expected, expected_pooled = _rcf_reference(x.double().numpy(), model.weights.double().numpy(),
                                               -0.5, (4, 8, 16, 32))
    assert [tuple(t.shape) for t in levels] == \
        [(2, 90, -(-35 // s), -(-43 // s)) for s in (4, 8, 16, 32)]
    for got, want in zip(levels, expected):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(pooled.numpy(), expected_pooled, rtol=1e-4, atol=1e-4)
    # a 512 px input: the FPN's strides exactly; another seed, other filters
    sizes = [tuple(t.shape[-2:]) for t in model(torch.rand(1, 4, 512, 512))]
    assert sizes == [(128, 128), (64, 64), (32, 32), (16, 16)]
    other = MODELS.build(dict(type='RandomConvFeatures', in_channels=4, features=90, seed=8))
    assert not torch.equal(other.weights, model.weights)


def test_rcf_refuses_bad_settings():
    for options, match in [(dict(features=7), 'even'), (dict(kernel_size=0), 'kernel_size'),
                           (dict(strides=(4, 8, 16)), 'strides'),
                           (dict(strides=(8, 4, 16, 32)), 'strides'), (dict(seed=1.5), 'seed')]:
        with pytest.raises(ValueError, match=match):
            MODELS.build(dict(type='RandomConvFeatures', **options))
    model = MODELS.build(dict(type='RandomConvFeatures', features=8))
    with pytest.raises(ValueError, match='expects B×3×H×W'):
        model(torch.rand(1, 4, 32, 32))
    with pytest.raises(ValueError, match='smaller than the kernel'):
        model(torch.rand(1, 3, 2, 8))


# ----------------------------------------------------------------------------- configs

@functools.lru_cache(maxsize=None)
def _parsed(path: str) -> Config:
    return Config.fromfile(path)


def _config(name: str) -> Config:
    """The probe config, parsed once (a copy each time)."""
    return copy.deepcopy(_parsed(_probe_path(name)))


def test_one_probe_config_per_natural_image_encoder():
    found = {osp.basename(p).split('_')[1]
             for p in glob.glob(osp.join(PROBE_DIR, 'fpn-probe_*_potsdam-512x512.py'))}
    assert set(PROBES) <= found
    assert timm.list_pretrained('convnext_large.dinov3*') == ['convnext_large.dinov3_lvd1689m']


@pytest.mark.parametrize('name', sorted(PROBES))
def test_probe_config_resolves_to_its_encoder_and_the_task_decoder(name):
    cfg, task = _config(name), copy.deepcopy(_parsed(TASK_BASE))
    backbone, model_name = cfg.model.backbone, PROBES[name]
    if model_name is None:
        assert backbone.type == 'RandomConvFeatures' and 'init_cfg' not in backbone
        mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet's
    else:
        assert backbone.init_cfg == dict(type='Pretrained',
                                         checkpoint=f'checkpoints/{model_name}.pth')
        pretrained = timm.models.get_pretrained_cfg(model_name)
        mean, std = pretrained.mean, pretrained.std
        if name in VIT_HOOKS:
            depth, hooks = VIT_HOOKS[name]
            assert backbone.type == 'ImageNetViT'
            assert dict(b=12, l=24)[backbone.arch] == depth
            assert f'vit_{dict(b="base", l="large")[backbone.arch]}_patch16' in model_name
            assert (backbone.frozen_stages, tuple(backbone.out_indices)) == (depth, hooks)
            assert not backbone.get('final_norm', False) and backbone.img_size == 512
        else:
            assert backbone.type == 'TimmFeatureEncoder' and backbone.frozen is True
            assert backbone.model_name == model_name
    np.testing.assert_allclose(cfg.model.data_preprocessor.mean, np.array(mean) * 255)
    np.testing.assert_allclose(cfg.model.data_preprocessor.std, np.array(std) * 255)
    # the decoder, data, schedule and optimiser are the task base's
    assert_probe_is_the_task_base(cfg, task)


@pytest.mark.parametrize('name', sorted(PROBES))
def test_probe_config_builds_whole_on_the_meta_device(name):
    """The configured encoder itself, without allocating it: the neck's widths are the
    encoder's, the levels are at strides 4 to 32 (a ViT: all at 16), the logits at the
    finest level's size."""
    cfg = _config(name)
    model, levels, logits = build_on_meta(cfg, (1, 3, 512, 512))
    assert [x.shape[1] for x in levels] == list(cfg.model.neck.in_channels)
    strides = (16, ) * 4 if name in VIT_HOOKS else (4, 8, 16, 32)
    assert [tuple(x.shape[-2:]) for x in levels] == [(512 // s, 512 // s) for s in strides]
    assert logits.shape == (1, NUM_CLASSES) + tuple(levels[0].shape[-2:])
    if name not in VIT_HOOKS:
        assert model.backbone.channels == tuple(cfg.model.neck.in_channels)


#: the small variant each probe is built with for real (same family and code path)
SMALL = {'resnet-50': dict(model_name='resnet26'),
         'convnext-l': dict(model_name='convnext_atto'),
         'swin-t': dict(model_args=dict(img_size=64)),
         'vit-b16': dict(arch=dict(embed_dims=32, depth=4, num_heads=2), frozen_stages=4,
                         out_indices=(0, 1, 2, 3), img_size=64),
         'rcf': dict(features=16)}
SMALL['vit-l16'] = SMALL['vit-b16']


def _small_model(name: str):
    cfg = _config(name)
    init_default_scope(cfg.default_scope)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.pop('init_cfg', None)
    model_cfg.backbone.update(SMALL.get(name, {}))
    model_cfg.data_preprocessor.size = (64, 64)
    model_cfg.neck.out_channels = 16
    model_cfg.decode_head.update(in_channels=[16] * 4, channels=64)
    if name in VIT_HOOKS:
        model_cfg.neck.in_channels = [32] * 4
    else:
        with torch.device('meta'):  # the small variant's widths
            model_cfg.neck.in_channels = list(MODELS.build(model_cfg.backbone).channels)
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
    return model, cfg


def _batch(seed: int = 0) -> dict:
    generator = torch.Generator().manual_seed(seed)
    samples = seg_samples(64, NUM_CLASSES, generator)
    inputs = [torch.randint(0, 255, (3, 64, 64), dtype=torch.uint8, generator=generator)
              for _ in range(2)]
    return dict(inputs=inputs, data_samples=samples)


@pytest.mark.parametrize('name', sorted(PROBES))
def test_probe_trains_its_decoder_only(name):
    """A training step at a large learning rate: every encoder tensor (batch norm
    statistics included) stays bit-identical without gradients, the decoder moves."""
    model, cfg = _small_model(name)
    optim_cfg = copy.deepcopy(cfg.optim_wrapper)
    optim_cfg.optimizer.lr = 0.5
    optim = build_optim_wrapper(model, optim_cfg)
    encoder = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    decoder = {k: v.clone() for k, v in model.named_parameters()
               if not k.startswith('backbone.')}
    model.train()
    losses = model.train_step(_batch(), optim)
    assert all(torch.isfinite(v).all() for v in losses.values())
    after = model.backbone.state_dict()
    assert [k for k in encoder if not torch.equal(encoder[k], after[k])] == []
    assert all(p.grad is None for p in model.backbone.parameters())
    moved = dict(model.named_parameters())
    assert [k for k in decoder if torch.equal(decoder[k], moved[k])] == []
    model.eval()
    with torch.no_grad():
        predictions = model.test_step(_batch(1))
    assert predictions[0].seg_logits.data.shape == (NUM_CLASSES, 64, 64)


@pytest.mark.trains('training the ResNet-18 probe through the Runner is what it checks')
@pytest.mark.slow
def test_resnet18_probe_trains_through_the_runner_at_224_px(demo_data, tmp_path):
    """The ResNet-18 probe config, its encoder from a timm file (random weights), trained
    one epoch (3 iterations, batch 2) on 224 px crops of the demo data: the checkpoint's
    encoder is the file's, bit for bit, and the decoder's biases (zero at first) moved."""
    state = _timm_reference('resnet18').state_dict()
    weights = str(tmp_path / 'resnet18.pth')
    torch.save(state, weights)
    cfg = _config('resnet-18')
    cfg.model.data_preprocessor.size = (224, 224)
    saved = train_tiny_probe(cfg, osp.join(demo_data, 'potsdam'), str(tmp_path / 'work'),
                             iterations=3, batch_size=2, checkpoint=weights,
                             pipeline=crop_pipeline(224))
    assert all(f'backbone.trunk.{k}' not in saved for k in state if k.startswith('fc.'))
    assert_encoder_saved_as(saved, {k: v for k, v in state.items() if not k.startswith('fc.')},
                            prefix='backbone.trunk.')
    assert_decoder_moved(saved, 9)
