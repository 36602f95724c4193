"""DINOv3-Sat (and its natural-image twin) as an FPN-probe backbone: timm's DINOv3 ViTs
through ``TimmFeatureEncoder``'s single-stride path
(reobench_mm.models.backbones.timm_features).

- Parity with timm itself: timm's own tiny DINOv3 ViT (``vit_small_patch16_dinov3_qkvb``
  at width 64, 8 blocks; every weight randomised, layer scales included, so that every
  block counts), its file saved as timm writes it, loaded through ``init_cfg=Pretrained``:
  the encoder returns timm's ``forward_intermediates`` of the hooked blocks to 1e-4.
- Meta's original file layout (``dinov3/models/vision_transformer.py``: ``storage_tokens``,
  ``ls1.gamma``, a masked ``qkv.bias``, ``rope_embed.periods``, ``local_cls_norm``):
  converted on load by timm's DINOv3 converter, the encoder equals Meta's computation
  written out below in plain torch (patch convolution, class + register tokens, RoPE with
  coordinates in [-1, 1] per axis and rotate-half, the key bias masked, layer scale);
  the model without attention biases refuses a file whose query/value biases are not zero.
- The converter: every tensor lands, only the final norm is dropped; typos, another
  width and the other bias variant are refused with the keys named.
- The two probe configs: timm's architecture and tag, Meta's normalisation for each,
  blocks 6/12/18/24 of 24 at stride 16, the 224 px task base; one tiny variant trains
  through MMEngine's Runner at 224 px.
"""
import copy
import functools
import math
import os.path as osp

import numpy as np
import pytest
import timm
import torch
import torch.nn.functional as F
from mmengine.config import Config

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT
from probe_helpers import (assert_decoder_moved, assert_encoder_saved_as,
                           assert_probe_is_the_task_base, build_on_meta, train_tiny_probe)
from reobench_mm.models.backbones import check_state_dict
from reobench_mm.models.backbones.timm_features import (block_feature_indices,
                                                        convert_original_layout)
from reobench_mm.registry import MODELS

PROBE_DIR = osp.join(PROJECT_ROOT, 'configs', 'probe')
TASK_BASE = osp.join(PROJECT_ROOT, 'configs', '_base_', 'tasks', 'fpn-probe_potsdam-224.py')
#: probe name -> (timm model and tag, Meta's file, Meta's normalisation of [0, 1] pixels)
PROBES = {
    'dinov3-sat-l16': ('vit_large_patch16_dinov3_qkvb.sat493m',
                       'dinov3_vitl16_pretrain_sat493m-eadcf0ff.pth',
                       (0.430, 0.411, 0.296), (0.213, 0.156, 0.143)),
    'dinov3-l16': ('vit_large_patch16_dinov3_qkvb.lvd1689m',
                   'dinov3_vitl16_pretrain_lvd1689m-8aa4cbdd.pth',
                   (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
}
#: the tiny configuration: timm's DINOv3 ViT-S/16 narrowed (head width 32) and shortened
TINY_NAME = 'vit_small_patch16_dinov3_qkvb'
TINY = dict(embed_dim=64, num_heads=2, depth=8)
TINY_HOOKS = (1, 3, 5, 7)  # the last block of each quarter
REGISTERS = 4
NUM_CLASSES = 6


def _encoder(name=TINY_NAME, checkpoint=None, model_args=TINY, out_indices=TINY_HOOKS,
             **options):
    cfg = dict(type='TimmFeatureEncoder', model_name=name, model_args=dict(model_args),
               out_indices=out_indices, **options)
    if checkpoint is not None:
        cfg['init_cfg'] = dict(type='Pretrained', checkpoint=checkpoint)
    model = MODELS.build(cfg)
    model.init_weights()
    return model


def _timm_reference(name=TINY_NAME, seed=0):
    """timm's tiny DINOv3 ViT with every tensor drawn at random (layer scales near 1,
    not timm's 1e-5, and non-zero query/value biases), in evaluation mode."""
    torch.manual_seed(seed)
    model = timm.create_model(name, pretrained=False, **TINY)
    with torch.no_grad():
        for key, tensor in model.named_parameters():
            if key.endswith(('gamma_1', 'gamma_2')) or key.endswith('norm1.weight') \
                    or key.endswith('norm2.weight'):
                tensor.uniform_(0.5, 1.0)
            elif key.endswith(('bias', 'q_bias', 'v_bias')):
                tensor.normal_(0, 0.1)
            elif key.endswith(('cls_token', 'reg_token')):
                tensor.normal_(0, 1.0)
    return model.eval()


# ----------------------------------------------------------------------------- timm parity

@pytest.mark.parametrize('size', [(224, 224), (64, 96)])
def test_encoder_returns_timms_dinov3_blocks(size, tmp_path):
    reference = _timm_reference()
    path = str(tmp_path / 'tiny.pth')
    torch.save(reference.state_dict(), path)
    model = _encoder(checkpoint=path, frozen=True)
    model.train()  # frozen: stays in evaluation mode, no gradients
    assert not any(m.training for m in model.trunk.modules())
    assert not any(p.requires_grad for p in model.parameters())
    image = torch.rand(2, 3, *size)
    with torch.no_grad():
        ours = model(image)
        theirs = reference.forward_intermediates(image, indices=list(TINY_HOOKS), norm=False,
                                                 output_fmt='NCHW', intermediates_only=True)
    assert model.out_indices == TINY_HOOKS and model.strides == (16, ) * 4
    assert model.channels == (64, ) * 4
    for a, b in zip(ours, theirs):
        assert a.shape == (2, 64, size[0] // 16, size[1] // 16)
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    # the hooked blocks differ from each other (the blocks count), the tokens from the input
    assert (ours[0] - ours[3]).abs().mean() > 0.1


def test_converter_maps_every_tensor_and_drops_only_the_final_norm():
    reference = _timm_reference()
    official = reference.state_dict()
    model = _encoder()
    converted = model.convert_official_state_dict(official)
    assert set(official) - {k[len('trunk.model.'):] for k in converted} == {'norm.weight',
                                                                          'norm.bias'}
    assert set(converted) == set(model.state_dict())
    assert check_state_dict(model, converted) == []
    for key, value in official.items():
        if not key.startswith('norm.'):
            assert torch.equal(converted[f'trunk.model.{key}'], value), key
    # the blocks after the last hooked one are pruned, and their keys dropped
    short = _encoder(out_indices=(0, 1, 2, 3))
    assert len(short.trunk.model.blocks) == 4
    assert not any('blocks.4.' in k for k in short.convert_official_state_dict(official))


def test_wrong_files_are_refused_with_the_keys_named(tmp_path):
    state = _timm_reference().state_dict()
    wrong = dict(state)
    wrong['blocks.2.attn.qkv.wieght'] = wrong.pop('blocks.2.attn.qkv.weight')
    torch.save(wrong, str(tmp_path / 'typo.pth'))
    with pytest.raises(KeyError, match=r'1 missing keys.*trunk\.model\.blocks\.2\.attn\.qkv'
                                       r'\.weight.*1 unexpected keys.*qkv\.wieght'):
        _encoder(checkpoint=str(tmp_path / 'typo.pth'))
    # the variant without attention biases: its file lacks them
    torch.manual_seed(0)
    plain = timm.create_model('vit_small_patch16_dinov3', pretrained=False, **TINY)
    torch.save(plain.state_dict(), str(tmp_path / 'plain.pth'))
    with pytest.raises(KeyError, match=r'missing keys.*q_bias'):
        _encoder(checkpoint=str(tmp_path / 'plain.pth'))
    # another width
    with pytest.raises(ValueError, match=r'shape mismatches.*cls_token'):
        _encoder(checkpoint=str(tmp_path / 'plain.pth'), name='vit_small_patch16_dinov3',
                 model_args=dict(TINY, embed_dim=32))


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match=r'out_indices.*ImageNetViT'):
        _encoder(out_indices=None)  # a single-stride trunk needs its blocks
    with pytest.raises(ValueError, match='four blocks'):
        _encoder(out_indices=(1, 3, 5))
    with pytest.raises(ValueError, match=r'increasing block indices in 0\.\.7'):
        _encoder(out_indices=(1, 3, 5, 8))
    with pytest.raises(ValueError, match='unknown out_indices preset'):
        _encoder(out_indices='vit16')
    with pytest.raises(ValueError, match='four block indices'):
        _encoder(out_indices=7)
    with pytest.raises(ValueError, match='single-stride trunks'):
        _encoder('resnet18', model_args={}, out_indices=(1, 2, 3, 4))
    assert block_feature_indices('vit_large_patch16_dinov3', 'vit24') == (5, 11, 17, 23)
    model = _encoder()
    with pytest.raises(ValueError, match='expects B×3×H×W'):
        model(torch.rand(1, 4, 64, 64))


# ----------------------------------------------------------------------------- Meta's layout

def _meta_state_dict(width=64, heads=2, depth=8, seed=0, zero_qv_bias=False):
    """A state dict with the key names and shapes of Meta's ``DinoVisionTransformer``
    (``dinov3_vitl16``'s settings: 4 storage tokens, layer scale, masked key bias, the
    SAT-493M file's extra ``local_cls_norm``), random values."""
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape, scale=1.0, low=None):
        if low is not None:  # uniform in [low, scale]
            return low + (scale - low) * torch.rand(*shape, generator=generator)
        return scale * torch.randn(*shape, generator=generator)

    head_dim = width // heads
    state = {
        'cls_token': draw(1, 1, width), 'storage_tokens': draw(1, REGISTERS, width),
        'mask_token': torch.zeros(1, width),
        'patch_embed.proj.weight': draw(width, 3, 16, 16, scale=0.05),
        'patch_embed.proj.bias': draw(width, scale=0.1),
        'rope_embed.periods': 100.0**(2 * torch.arange(head_dim // 4) / (head_dim // 2)),
        'norm.weight': draw(width, low=0.5), 'norm.bias': draw(width, scale=0.1),
        'local_cls_norm.weight': draw(width, low=0.5),
        'local_cls_norm.bias': draw(width, scale=0.1),
    }
    mask = torch.ones(3 * width)
    mask[width:2 * width] = 0
    for i in range(depth):
        p = f'blocks.{i}.'
        bias = draw(3 * width, scale=0.1)
        if zero_qv_bias:
            bias = bias * (1 - mask)  # only the (masked) key third left
        state.update({
            p + 'norm1.weight': draw(width, low=0.5), p + 'norm1.bias': draw(width, scale=0.1),
            p + 'attn.qkv.weight': draw(3 * width, width, scale=width**-0.5),
            p + 'attn.qkv.bias': bias, p + 'attn.qkv.bias_mask': mask.clone(),
            p + 'attn.proj.weight': draw(width, width, scale=width**-0.5),
            p + 'attn.proj.bias': draw(width, scale=0.1),
            p + 'ls1.gamma': draw(width, low=0.3), p + 'ls2.gamma': draw(width, low=0.3),
            p + 'norm2.weight': draw(width, low=0.5), p + 'norm2.bias': draw(width, scale=0.1),
            p + 'mlp.fc1.weight': draw(4 * width, width, scale=width**-0.5),
            p + 'mlp.fc1.bias': draw(4 * width, scale=0.1),
            p + 'mlp.fc2.weight': draw(width, 4 * width, scale=(4 * width)**-0.5),
            p + 'mlp.fc2.bias': draw(width, scale=0.1),
        })
    return state


def _meta_dinov3_blocks(state, image, hooks, heads=2, eps=1e-5):
    """Meta's DINOv3 ViT forward written out (dinov3/models/vision_transformer.py,
    dinov3/layers/{patch_embed,attention,block,rope_position_encoding}.py):
    ``get_intermediate_layers(n=hooks, reshape=True, norm=False)``."""
    weight = state['patch_embed.proj.weight']
    x = F.conv2d(image, weight, state['patch_embed.proj.bias'], stride=weight.shape[-1])
    batch, width, rows, cols = x.shape
    x = x.flatten(2).transpose(1, 2)  # row-major patches
    prefix = 1 + REGISTERS
    x = torch.cat([state['cls_token'].expand(batch, -1, -1),
                   state['storage_tokens'].expand(batch, -1, -1), x], dim=1)
    tokens, head_dim = x.shape[1], width // heads
    # RoPE: patch centres in [-1, 1] per axis ("separate"), periods 100^(2j / (D/2))
    periods = 100.0**(2 * torch.arange(head_dim // 4, dtype=torch.float32) / (head_dim // 2))
    ys = 2 * (torch.arange(rows, dtype=torch.float32) + 0.5) / rows - 1
    xs = 2 * (torch.arange(cols, dtype=torch.float32) + 0.5) / cols - 1
    coords = torch.stack(torch.meshgrid(ys, xs, indexing='ij'), dim=-1).reshape(-1, 2)
    angles = 2 * math.pi * coords[:, :, None] / periods  # (hw, 2, D/4): y then x
    angles = angles.reshape(rows * cols, head_dim // 2).repeat(1, 2)  # (hw, D)
    sin, cos = angles.sin(), angles.cos()

    def rope(t):
        half = head_dim // 2
        rotated = torch.cat([-t[..., prefix:, half:], t[..., prefix:, :half]], dim=-1)
        return torch.cat([t[..., :prefix, :], t[..., prefix:, :] * cos + rotated * sin], -2)

    out = []
    for i in range(max(hooks) + 1):
        p = f'blocks.{i}.'
        y = F.layer_norm(x, (width, ), state[p + 'norm1.weight'], state[p + 'norm1.bias'], eps)
        bias = state[p + 'attn.qkv.bias'] * state[p + 'attn.qkv.bias_mask']
        qkv = (y @ state[p + 'attn.qkv.weight'].T + bias).reshape(batch, tokens, 3, heads,
                                                                   head_dim)
        q, k, v = (qkv[:, :, j].transpose(1, 2) for j in range(3))
        q, k = rope(q), rope(k)
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(head_dim), dim=-1)
        attended = (weights @ v).transpose(1, 2).reshape(batch, tokens, width)
        attended = attended @ state[p + 'attn.proj.weight'].T + state[p + 'attn.proj.bias']
        x = x + state[p + 'ls1.gamma'] * attended
        y = F.layer_norm(x, (width, ), state[p + 'norm2.weight'], state[p + 'norm2.bias'], eps)
        hidden = F.gelu(y @ state[p + 'mlp.fc1.weight'].T + state[p + 'mlp.fc1.bias'])
        x = x + state[p + 'ls2.gamma'] * (hidden @ state[p + 'mlp.fc2.weight'].T
                                          + state[p + 'mlp.fc2.bias'])
        if i in hooks:
            out.append(x[:, prefix:].transpose(1, 2).reshape(batch, width, rows, cols))
    return out


def test_metas_file_loads_and_gives_metas_computation(tmp_path):
    state = _meta_state_dict()
    path = str(tmp_path / 'dinov3_tiny_pretrain_sat493m.pth')
    torch.save(state, path)
    model = _encoder(checkpoint=path, frozen=True)
    image = torch.rand(2, 3, 64, 96)
    with torch.no_grad():
        ours = model(image)
        expected = _meta_dinov3_blocks(state, image, TINY_HOOKS)
    for a, b in zip(ours, expected):
        assert a.shape == b.shape == (2, 64, 4, 6)
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    # what the conversion kept: registers, layer scales, the query and value biases
    loaded = model.trunk.model
    torch.testing.assert_close(loaded.reg_token, state['storage_tokens'], rtol=0, atol=0)
    torch.testing.assert_close(loaded.blocks[3].gamma_2, state['blocks.3.ls2.gamma'],
                               rtol=0, atol=0)
    torch.testing.assert_close(loaded.blocks[3].attn.v_bias,
                               state['blocks.3.attn.qkv.bias'][128:], rtol=0, atol=0)
    # what it dropped: pretraining-only tensors, the masked key bias, the final norm
    converted = convert_original_layout(TINY_NAME, state, model_args=TINY)
    assert {'mask_token', 'rope_embed.periods', 'storage_tokens', 'local_cls_norm.weight',
            'blocks.0.attn.qkv.bias_mask', 'blocks.0.attn.qkv.bias'}.isdisjoint(converted)
    # a file already in timm's layout passes through unchanged
    timm_state = _timm_reference().state_dict()
    assert convert_original_layout(TINY_NAME, timm_state, model_args=TINY) is timm_state


def test_model_without_biases_takes_metas_file_only_if_its_biases_are_zero(tmp_path):
    torch.save(_meta_state_dict(), str(tmp_path / 'biased.pth'))
    with pytest.raises(ValueError, match=r'non-zero query/value biases \(8 blocks.*'
                                         r'blocks\.0\.attn\.qkv\.bias.*'
                                         r'vit_small_patch16_dinov3_qkvb'):
        _encoder(name='vit_small_patch16_dinov3', checkpoint=str(tmp_path / 'biased.pth'))
    state = _meta_state_dict(zero_qv_bias=True)  # the key third is masked anyway
    torch.save(state, str(tmp_path / 'zero.pth'))
    model = _encoder(name='vit_small_patch16_dinov3', checkpoint=str(tmp_path / 'zero.pth'))
    image = torch.rand(1, 3, 48, 48)
    with torch.no_grad():
        for a, b in zip(model.eval()(image), _meta_dinov3_blocks(state, image, TINY_HOOKS)):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="timm's converter.*cannot read"):
        convert_original_layout(TINY_NAME, {'storage_tokens': torch.zeros(1, 4, 64),
                                            'patch_embed.proj.weight': torch.zeros(64)},
                                model_args=TINY)


# ----------------------------------------------------------------------------- configs

@functools.lru_cache(maxsize=None)
def _parsed(path: str) -> Config:
    return Config.fromfile(path)


def _config(name: str) -> Config:
    path = osp.join(PROBE_DIR, f'fpn-probe_{name}_frozen_1xb8-12e_potsdam-224x224.py')
    return copy.deepcopy(_parsed(path))


@pytest.mark.parametrize('name', sorted(PROBES))
def test_probe_config_resolves_to_dinov3_and_the_224_task(name):
    cfg, task = _config(name), copy.deepcopy(_parsed(TASK_BASE))
    model_name, official_file, mean, std = PROBES[name]
    backbone = cfg.model.backbone
    assert dict(backbone) == dict(
        type='TimmFeatureEncoder', model_name=model_name, frozen=True,
        out_indices=(5, 11, 17, 23),
        init_cfg=dict(type='Pretrained', checkpoint=f'checkpoints/{official_file}'))
    pretrained = timm.models.get_pretrained_cfg(model_name)  # timm's for the tag = Meta's
    assert pretrained.license == 'dinov3-license'
    np.testing.assert_allclose(pretrained.mean, mean)
    np.testing.assert_allclose(pretrained.std, std)
    np.testing.assert_allclose(cfg.model.data_preprocessor.mean, np.array(mean) * 255)
    np.testing.assert_allclose(cfg.model.data_preprocessor.std, np.array(std) * 255)
    assert list(cfg.model.neck.in_channels) == [1024] * 4
    assert_probe_is_the_task_base(cfg, task)


@pytest.mark.parametrize('name', sorted(PROBES))
def test_probe_config_builds_whole_on_the_meta_device(name):
    """ViT-L/16 itself without allocating it: 24 blocks, the hooked ones the last of each
    quarter, four 1024-channel maps at stride 16 of the 224 px input, logits at 14x14."""
    cfg = _config(name)
    model, levels, logits = build_on_meta(cfg, (1, 3, 224, 224))
    trunk = model.backbone.trunk.model
    assert type(trunk).__name__ == 'Eva' and len(trunk.blocks) == 24
    assert trunk.num_prefix_tokens == 1 + REGISTERS and trunk.patch_embed.patch_size == (16, 16)
    assert trunk.blocks[0].attn.q_bias is not None  # the variant with attention biases
    assert model.backbone.out_indices == (5, 11, 17, 23)
    assert model.backbone.strides == (16, ) * 4
    assert [tuple(x.shape) for x in levels] == [(1, 1024, 14, 14)] * 4
    assert logits.shape == (1, NUM_CLASSES, 14, 14)
    assert model.backbone.frozen and not any(p.requires_grad
                                             for p in model.backbone.parameters())


@pytest.mark.trains('training the tiny DINOv3-Sat probe through the Runner is what it checks')
@pytest.mark.slow
def test_tiny_probe_trains_through_the_runner_at_224_px(demo_data, tmp_path):
    """The DINOv3-Sat probe config with the tiny DINOv3 ViT from a file in Meta's layout,
    trained 2 iterations (batch 3) on the demo data resized to 224 px (a narrow decoder):
    the encoder in the checkpoint is the loaded one, bit for bit, and the decoder's biases
    (zero at first) moved."""
    state = _meta_state_dict()
    weights = str(tmp_path / 'tiny_meta.pth')
    torch.save(state, weights)
    reference = _encoder(checkpoint=weights).state_dict()
    saved = train_tiny_probe(
        _config('dinov3-sat-l16'), osp.join(demo_data, 'potsdam'), str(tmp_path / 'work'),
        iterations=2, checkpoint=weights, neck_channels=[TINY['embed_dim']] * 4,
        backbone=dict(model_name=TINY_NAME, model_args=dict(TINY), out_indices=TINY_HOOKS))
    assert_encoder_saved_as(saved, reference)
    assert_decoder_moved(saved, 9)
