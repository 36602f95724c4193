"""DOFA as an FPN-probe backbone (reobench_mm.models.backbones.dofa).

- Parity: a state dict with the official key names (a module laid out as the official
  ``OFAViT`` with ``Dynamic_MLP_OFA``: torch's ``nn.TransformerEncoder``, timm's
  ``Block``; random weights, plus the pre-training file's ``mask_token``, ``projector``
  and ``norm``) is saved and loaded through ``init_cfg=Pretrained``; the backbone's maps
  equal the official forward written out here in float64 with plain tensor operations
  (sin-cos of the wavelengths in nm, residual MLP, post-norm transformer over weight
  tokens / wavelengths / bias token, ``(C, p, p, D)`` weight layout, patch convolution
  with padding 1 as explicit patch sums, position embedding, class token, ViT blocks) to
  1e-4, for RGB and for five Sentinel-2 bands named by their band names.
- The converter: drops exactly the mask token, projector and head, takes ``fc_norm`` as
  the final norm, loads torchgeo's files (no ``norm``) unless the final norm is used, and
  refuses a missing, an unexpected or a misshapen key and a DOFA v2 file, naming them.
- Wavelengths: the Sentinel-2 table is the handbook's centre wavelengths; unknown names,
  wrong counts and bad values are refused with what is valid.
- The probe configs (224 and 512) build whole on the meta device with the hooked blocks;
  a tiny variant trains its decoder only, and through MMEngine's Runner (slow).
"""
import copy
import math
import os.path as osp
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import init_default_scope
from timm.models.vision_transformer import Block
from torch import nn

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT
from probe_helpers import (assert_decoder_moved, assert_encoder_saved_as, build_on_meta,
                           seg_samples, train_tiny_probe)
from reobench_mm.models.backbones.dofa import (DOFA, DOFA_BAND_WAVELENGTHS,
                                               resolve_wavelengths)
from reobench_mm.registry import MODELS

TINY = dict(embed_dims=32, depth=4, num_heads=2, patch_size=4)
RGB = [0.665, 0.56, 0.49]
PROBE_224 = osp.join(PROJECT_ROOT, 'configs', 'probe',
                     'fpn-probe_dofa-b16_frozen_1xb8-12e_potsdam-224x224.py')
PROBE_512 = PROBE_224.replace('224x224', '512x512')
NUM_CLASSES = 6


# ------------------------------------------------------------------ official layout
class _OfficialGenerator(nn.Module):
    """Attribute names of the official ``TransformerWeightGenerator``."""

    def __init__(self, weight_dims: int, embed_dims: int) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, activation='gelu',
                                           norm_first=False, batch_first=False, dropout=0.0)
        self.transformer_encoder = nn.TransformerEncoder(layer, num_layers=1,
                                                         enable_nested_tensor=False)
        self.fc_weight = nn.Linear(128, weight_dims)
        self.fc_bias = nn.Linear(128, embed_dims)
        self.weight_tokens = nn.Parameter(torch.empty(128, 128))
        self.bias_token = nn.Parameter(torch.empty(1, 128))


class _OfficialResMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1, self.w2 = nn.Linear(128, 128), nn.Linear(128, 128)


class _OfficialPatchEmbed(nn.Module):
    def __init__(self, patch: int, dims: int) -> None:
        super().__init__()
        self.weight_generator = _OfficialGenerator(patch * patch * dims, dims)
        self.fclayer = _OfficialResMLP()


class _OfficialPretrainFile(nn.Module):
    """The module layout of the pre-training file: ``OFAViT``'s encoder with the final
    ``norm``, the MAE ``mask_token`` and the distillation ``projector``."""

    def __init__(self, dims: int, depth: int, heads: int, patch: int, grid: int) -> None:
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dims))
        self.pos_embed = nn.Parameter(torch.zeros(1, grid * grid + 1, dims))
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dims))
        self.patch_embed = _OfficialPatchEmbed(patch, dims)
        self.blocks = nn.ModuleList([
            Block(dims, heads, 4.0, qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6))
            for _ in range(depth)])
        self.norm = nn.LayerNorm(dims, eps=1e-6)
        self.projector = nn.Linear(dims, 64)


def official_state_dict(dims=32, depth=4, heads=2, patch=4, grid=8, seed=0) -> dict:
    """Random weights under the official key names (norm weights around 1)."""
    module = _OfficialPretrainFile(dims, depth, heads, patch, grid)
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for name, value in module.state_dict().items():
        if name.endswith('norm1.weight') or name.endswith('norm2.weight') \
                or name == 'norm.weight':
            state[name] = 1.0 + 0.2 * torch.randn(value.shape, generator=gen)
        elif 'fc_weight' in name:
            state[name] = 0.5 * torch.randn(value.shape, generator=gen)
        else:
            state[name] = 0.1 * torch.randn(value.shape, generator=gen)
    return state


# ------------------------------------------------------ the official forward, written out
def _layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean)**2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def _attention(q, k, v, heads):
    """Multi-head attention of ``(..., N, E)`` queries, keys, values."""
    *lead, n, e = q.shape
    d = e // heads
    split = [t.reshape(*lead, t.shape[-2], heads, d).transpose(-3, -2) for t in (q, k, v)]
    scores = split[0] @ split[1].transpose(-1, -2) / math.sqrt(d)
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    weights = weights / weights.sum(-1, keepdim=True)
    out = (weights @ split[2]).transpose(-3, -2)
    return out.reshape(*lead, n, e)


def reference_kernel(sd: dict, wavelengths, patch: int, dims: int):
    """The generated patch-convolution weight ``(D, C, p, p)`` and bias, float64."""
    g = {k: v.double() for k, v in sd.items()}
    pre = 'patch_embed.'
    pos = torch.tensor(wavelengths, dtype=torch.float32).double() * 1000
    emb = torch.zeros(len(wavelengths), 128, dtype=torch.float64)
    for c in range(len(wavelengths)):
        for k in range(64):
            angle = float(pos[c]) * (1.0 / 10000**(k / 64.0))
            emb[c, k], emb[c, 64 + k] = math.sin(angle), math.cos(angle)
    hidden = torch.relu(emb @ g[pre + 'fclayer.w1.weight'].T + g[pre + 'fclayer.w1.bias'])
    waves = emb + torch.relu(hidden @ g[pre + 'fclayer.w2.weight'].T
                             + g[pre + 'fclayer.w2.bias'])
    gen = pre + 'weight_generator.'
    layer = gen + 'transformer_encoder.layers.0.'
    x = torch.cat([g[gen + 'weight_tokens'], waves, g[gen + 'bias_token']])
    qkv = x @ g[layer + 'self_attn.in_proj_weight'].T + g[layer + 'self_attn.in_proj_bias']
    q, k, v = qkv.split(128, dim=-1)
    attn = _attention(q, k, v, 4) @ g[layer + 'self_attn.out_proj.weight'].T \
        + g[layer + 'self_attn.out_proj.bias']
    x = _layer_norm(x + attn, g[layer + 'norm1.weight'], g[layer + 'norm1.bias'], 1e-5)
    ff = _gelu(x @ g[layer + 'linear1.weight'].T + g[layer + 'linear1.bias'])
    ff = ff @ g[layer + 'linear2.weight'].T + g[layer + 'linear2.bias']
    x = _layer_norm(x + ff, g[layer + 'norm2.weight'], g[layer + 'norm2.bias'], 1e-5)
    rows = (x[128:-1] + waves) @ g[gen + 'fc_weight.weight'].T + g[gen + 'fc_weight.bias']
    bias = x[-1] @ g[gen + 'fc_bias.weight'].T + g[gen + 'fc_bias.bias']
    # band c's vector is laid out (p, p, D): element [u, v, d] is weight[d, c, u, v]
    weight = torch.zeros(dims, len(wavelengths), patch, patch, dtype=torch.float64)
    for c in range(len(wavelengths)):
        weight[:, c] = rows[c].reshape(patch, patch, dims).permute(2, 0, 1)
    return weight * 0.01, bias * 0.01


def reference_levels(sd: dict, image: torch.Tensor, wavelengths, patch: int, heads: int,
                     out_indices) -> list:
    """The official ``forward_features`` up to the hooked blocks, float64."""
    g = {k: v.double() for k, v in sd.items()}
    dims = g['cls_token'].shape[-1]
    weight, bias = reference_kernel(sd, wavelengths, patch, dims)
    x = F.pad(image.double(), (1, 1, 1, 1))  # padding 1, then windows at stride p
    batch, _, height, width = x.shape
    rows, cols = (height - patch) // patch + 1, (width - patch) // patch + 1
    windows = x[:, :, :rows * patch, :cols * patch].reshape(batch, -1, rows, patch, cols, patch)
    maps = torch.einsum('bcipjq,dcpq->bdij', windows, weight) + bias[None, :, None, None]
    tokens = maps.flatten(2).transpose(1, 2) + g['pos_embed'][:, 1:]
    cls = (g['cls_token'] + g['pos_embed'][:, :1]).expand(batch, -1, -1)
    x = torch.cat([cls, tokens], dim=1)
    levels = []
    for i in range(max(out_indices) + 1):
        b = f'blocks.{i}.'
        h = _layer_norm(x, g[b + 'norm1.weight'], g[b + 'norm1.bias'], 1e-6)
        q, k, v = (h @ g[b + 'attn.qkv.weight'].T + g[b + 'attn.qkv.bias']).split(dims, -1)
        x = x + _attention(q, k, v, heads) @ g[b + 'attn.proj.weight'].T \
            + g[b + 'attn.proj.bias']
        h = _layer_norm(x, g[b + 'norm2.weight'], g[b + 'norm2.bias'], 1e-6)
        h = _gelu(h @ g[b + 'mlp.fc1.weight'].T + g[b + 'mlp.fc1.bias'])
        x = x + h @ g[b + 'mlp.fc2.weight'].T + g[b + 'mlp.fc2.bias']
        if i in out_indices:
            levels.append(x[:, 1:].transpose(1, 2).reshape(batch, dims, rows, cols))
    return levels


def _tiny(path=None, **options) -> DOFA:
    cfg = dict(type='DOFA', arch=dict(TINY), img_size=32, out_indices=(0, 1, 2, 3))
    if path is not None:
        cfg['init_cfg'] = dict(type='Pretrained', checkpoint=str(path))
    cfg.update(options)
    model = MODELS.build(cfg)
    model.init_weights()
    return model.eval()


# ----------------------------------------------------------------------------- parity
@pytest.mark.parametrize('bands', [
    dict(wavelengths=RGB),
    dict(wavelengths='from_band_names', band_names=['B04', 'b8a', 'B11', ' B02 ', 'B12'])])
def test_forward_equals_the_official_computation(bands, tmp_path):
    state = official_state_dict()
    torch.save(state, tmp_path / 'dofa.pth')
    model = _tiny(tmp_path / 'dofa.pth', **bands)
    channels = len(model.wavelengths)
    image = torch.randn(2, channels, 32, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        got = model(image)
    expected = reference_levels(state, image, list(model.wavelengths), 4, 2, (0, 1, 2, 3))
    assert [tuple(x.shape) for x in got] == [(2, 32, 8, 8)] * 4
    for level, ref in zip(got, expected):
        assert ref.abs().max() > 0.5  # the maps carry signal
        torch.testing.assert_close(level.double(), ref, rtol=0, atol=1e-4)
    # a width that is no multiple of the patch: the padded windows give the same grid
    with torch.no_grad():
        odd = model(image[..., :31])
    torch.testing.assert_close(odd[-1].double(), reference_levels(
        state, image[..., :31], list(model.wavelengths), 4, 2, (3, ))[0], rtol=0, atol=1e-4)


def test_generated_kernel_follows_the_wavelengths(tmp_path):
    """The kernel equals the written-out generator; bands moved together with their
    wavelengths give the same maps (the generator treats bands as a set), other
    wavelengths give other maps."""
    state = official_state_dict(seed=1)
    torch.save(state, tmp_path / 'dofa.pth')
    model = _tiny(tmp_path / 'dofa.pth', wavelengths=[0.49, 0.842, 1.61, 5.405])
    with torch.no_grad():
        weight, bias = model.patch_embed.generate(torch.tensor(model.wavelengths))
    ref_weight, ref_bias = reference_kernel(state, list(model.wavelengths), 4, 32)
    torch.testing.assert_close(weight.double(), ref_weight, rtol=0, atol=1e-4)
    torch.testing.assert_close(bias.double(), ref_bias, rtol=0, atol=1e-4)
    assert ref_weight.abs().max() > 1e-2 and ref_bias.abs().max() > 1e-2
    image = torch.randn(1, 4, 32, 32)
    order = [2, 0, 3, 1]
    moved = _tiny(tmp_path / 'dofa.pth', wavelengths=[model.wavelengths[i] for i in order])
    other = _tiny(tmp_path / 'dofa.pth', wavelengths=[0.49, 0.842, 1.61, 2.19])
    with torch.no_grad():
        base, same, changed = model(image)[-1], moved(image[:, order])[-1], other(image)[-1]
    torch.testing.assert_close(same, base, rtol=0, atol=1e-4)
    assert (changed - base).abs().max() > 1e-2


# -------------------------------------------------------------------------- converter
def test_converter_drops_exactly_the_non_encoder_keys():
    state = official_state_dict()
    state['head.weight'], state['head.bias'] = torch.randn(45, 32), torch.randn(45)
    converted = DOFA.convert_official_state_dict(state)
    dropped = {'mask_token', 'projector.weight', 'projector.bias', 'head.weight', 'head.bias'}
    assert set(state) - set(converted) == dropped
    assert all(converted[k] is state[k] for k in converted)
    assert set(converted) == set(_tiny().state_dict())


def test_fine_tuned_and_torchgeo_files_load(tmp_path):
    state = official_state_dict()
    finetuned = {k: v for k, v in state.items() if not k.startswith(('norm.', 'mask_token',
                                                                       'projector.'))}
    torchgeo = dict(finetuned)
    finetuned['fc_norm.weight'], finetuned['fc_norm.bias'] = state['norm.weight'], \
        state['norm.bias']
    torch.save(finetuned, tmp_path / 'finetuned.pth')
    model = _tiny(tmp_path / 'finetuned.pth', final_norm=True)
    assert torch.equal(model.norm.weight, state['norm.weight'])
    torch.save(torchgeo, tmp_path / 'torchgeo.pth')
    assert _tiny(tmp_path / 'torchgeo.pth').load_pretrained(str(tmp_path / 'torchgeo.pth')) \
        == ['norm.weight', 'norm.bias']
    with pytest.raises(KeyError, match=r"2 missing keys.*'norm.weight', 'norm.bias'"):
        _tiny(tmp_path / 'torchgeo.pth', final_norm=True)


def test_wrong_files_are_refused_with_the_keys_named(tmp_path):
    state = official_state_dict()
    renamed = dict(state)
    renamed['patch_embed.fclayer.w3.weight'] = renamed.pop('patch_embed.fclayer.w2.weight')
    torch.save(renamed, tmp_path / 'renamed.pth')
    with pytest.raises(KeyError, match=r'fclayer\.w2\.weight.*unexpected.*fclayer\.w3\.weight'):
        _tiny(tmp_path / 'renamed.pth')
    torch.save(official_state_dict(dims=48, heads=2), tmp_path / 'wide.pth')
    with pytest.raises(ValueError, match=r'shape mismatches.*cls_token: checkpoint '
                                         r'\(1, 1, 48\) vs model \(1, 1, 32\)'):
        _tiny(tmp_path / 'wide.pth')
    v2 = {'model.blocks.0.norm1.weight': torch.ones(32), 'norm.weight': torch.ones(32)}
    torch.save(v2, tmp_path / 'v2.pth')
    with pytest.raises(ValueError, match='DOFA v2 checkpoint'):
        _tiny(tmp_path / 'v2.pth')


def test_position_embedding_is_resampled_to_another_grid(tmp_path):
    """A 224-px file (14x14) in a 512-px model: bicubic without antialias, class row
    kept, as torch's interpolate computes it."""
    state = official_state_dict(patch=16, grid=14)
    torch.save(state, tmp_path / 'dofa.pth')
    model = _tiny(tmp_path / 'dofa.pth', arch=dict(TINY, patch_size=16), img_size=512)
    grid = state['pos_embed'][0, 1:].reshape(1, 14, 14, 32).permute(0, 3, 1, 2)
    expected = F.interpolate(grid, size=(32, 32), mode='bicubic', align_corners=False)
    assert torch.equal(model.pos_embed[0, :1], state['pos_embed'][0, :1])
    torch.testing.assert_close(model.pos_embed[0, 1:],
                               expected.permute(0, 2, 3, 1).reshape(1024, 32))


# ------------------------------------------------------------------------ wavelengths
def test_sentinel2_table_is_the_handbook_centre_wavelengths():
    handbook_nm = [443, 490, 560, 665, 705, 740, 783, 842, 865, 945, 1375, 1610, 2190]
    names = ['B01', 'B02', 'B03', 'B04', 'B05', 'B06', 'B07', 'B08', 'B8A', 'B09', 'B10',
             'B11', 'B12']
    got = resolve_wavelengths('from_band_names', names)
    np.testing.assert_allclose(np.array(got) * 1000, handbook_nm, rtol=0, atol=1e-9)
    assert resolve_wavelengths('from_band_names', ['red', 'Green', 'B']) == tuple(RGB)
    assert resolve_wavelengths(None) == tuple(RGB) == _tiny().wavelengths
    assert DOFA_BAND_WAVELENGTHS['VV'] == 5.405  # DOFA's Sentinel-1 input


def test_bad_wavelength_settings_are_refused():
    with pytest.raises(ValueError, match=r"no DOFA wavelength for band names \['B13'\]; "
                                         r"known: \['B', 'B01'"):
        resolve_wavelengths('from_band_names', ['B02', 'B13'])
    with pytest.raises(ValueError, match='needs band_names'):
        resolve_wavelengths('from_band_names')
    with pytest.raises(ValueError, match='used only with'):
        resolve_wavelengths([0.5], ['B02'])
    for bad in ([], [0.5, -1.0], [float('nan')], 'rgb', [True]):
        with pytest.raises(ValueError, match='wavelengths must be'):
            resolve_wavelengths(bad)
    model = _tiny(wavelengths=[0.49, 0.56])
    with pytest.raises(ValueError, match='given 2 wavelengths but the input has 3 bands'):
        model(torch.rand(1, 3, 32, 32))


# ---------------------------------------------------------------------------- configs
@pytest.mark.parametrize('path,size', [(PROBE_224, 224), (PROBE_512, 512)])
def test_probe_config_builds_whole_on_the_meta_device(path, size):
    cfg = Config.fromfile(path)
    backbone = cfg.model.backbone
    assert (backbone.type, backbone.arch, backbone.img_size) == ('DOFA', 'b', size)
    assert list(backbone.wavelengths) == RGB and cfg.model.data_preprocessor.bgr_to_rgb
    assert backbone.init_cfg.checkpoint == 'checkpoints/DOFA_ViT_base_e100.pth'
    assert (backbone.frozen_stages, tuple(backbone.out_indices)) == (12, (2, 5, 8, 11))
    model, levels, logits = build_on_meta(cfg, (1, 3, size, size))
    grid = size // 16
    assert [tuple(x.shape) for x in levels] == [(1, 768, grid, grid)] * 4
    assert list(cfg.model.neck.in_channels) == [768] * 4
    assert logits.shape == (1, NUM_CLASSES, grid, grid)
    assert model.backbone.out_indices == (2, 5, 8, 11) and len(model.backbone.blocks) == 12


def _tiny_probe(checkpoint=None):
    cfg = Config.fromfile(PROBE_224)
    init_default_scope(cfg.default_scope)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.update(arch=dict(embed_dims=32, depth=4, num_heads=2),
                              frozen_stages=4, out_indices=(0, 1, 2, 3))
    if checkpoint is None:
        model_cfg.backbone.pop('init_cfg')
    else:
        model_cfg.backbone.init_cfg.checkpoint = checkpoint
    model_cfg.neck.update(in_channels=[32] * 4, out_channels=16)
    model_cfg.decode_head.update(in_channels=[16] * 4, channels=64)
    return cfg, model_cfg


def test_tiny_probe_trains_its_decoder_only():
    from mmengine.optim import build_optim_wrapper
    cfg, model_cfg = _tiny_probe()
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
    optim_cfg = copy.deepcopy(cfg.optim_wrapper)
    optim_cfg.optimizer.lr = 0.5
    optim = build_optim_wrapper(model, optim_cfg)
    encoder = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    gen = torch.Generator().manual_seed(0)
    samples = seg_samples(224, NUM_CLASSES, gen)
    inputs = [torch.randint(0, 255, (3, 224, 224), dtype=torch.uint8, generator=gen)
              for _ in range(2)]
    model.train()
    assert not model.backbone.patch_embed.training and not model.backbone.blocks[3].training
    losses = model.train_step(dict(inputs=inputs, data_samples=samples), optim)
    assert all(torch.isfinite(v).all() for v in losses.values())
    after = model.backbone.state_dict()
    assert [k for k in encoder if not torch.equal(encoder[k], after[k])] == []
    trainable = [n for n, p in model.backbone.named_parameters() if p.requires_grad]
    assert trainable == ['norm.weight', 'norm.bias']  # outside the forward (final_norm off)
    assert all(p.grad is None for p in model.backbone.parameters())


@pytest.mark.trains('training the tiny DOFA probe through the Runner is what it checks')
@pytest.mark.slow
def test_tiny_dofa_probe_trains_through_the_runner_at_224_px(demo_data, tmp_path):
    """The 224 probe config with a tiny DOFA (patch 16, official-layout file) trained 2
    iterations (6 demo images resized to 224, batch 3): the saved encoder is the file's,
    bit for bit, and the decoder's biases (zero at first) moved."""
    state = official_state_dict(patch=16, grid=14)
    weights = str(tmp_path / 'dofa.pth')
    torch.save(state, weights)
    cfg, model_cfg = _tiny_probe(weights)
    cfg.model = model_cfg
    saved = train_tiny_probe(cfg, osp.join(demo_data, 'potsdam'), str(tmp_path / 'work'),
                             iterations=2)
    assert_encoder_saved_as(saved, DOFA.convert_official_state_dict(state))
    assert_decoder_moved(saved, 9)
