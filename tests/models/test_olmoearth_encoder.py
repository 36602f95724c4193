"""OlmoEarth as an FPN-probe backbone (reobench_mm.models.backbones.olmoearth).

- Parity: a state dict with the official ``LatentMIM`` key names (random weights: the
  encoder with separate q/k/v projections, the Sentinel-2 L2A and Sentinel-1 patch
  embeddings, channel embeddings, the fixed month and time tables, the contrastive head,
  a decoder and the target encoder) is saved and loaded through ``init_cfg=Pretrained``;
  the backbone's maps equal the official encoder forward written out here in float64 with
  plain tensor operations (band sets by name, per-set patch convolution, the official
  image resize for another patch size, channel / time / month / space quarters with the
  official ``meshgrid(indexing='xy')`` and ``arange(d/2)/d/2`` frequencies, tokens in
  ``(row, column, band set)`` order, pre-norm blocks, final norm, band-set mean) to 1e-4,
  for all twelve bands and for RGB (the 20 m and 60 m sets left out, B08 zero).
- The converter drops exactly the listed keys, fuses q/k/v, checks the month table, and
  a missing or unexpected key is refused by name.
- Bad band names, months, patch sizes, resolutions and inputs are refused.
- The probe configs (base, tiny) build whole on the meta device with the hooked blocks;
  a tiny variant trains its decoder only, and through MMEngine's Runner (slow).
"""
import copy
import math
import os.path as osp

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import init_default_scope

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT
from probe_helpers import (assert_decoder_moved, assert_encoder_saved_as, build_on_meta,
                           seg_samples, train_tiny_probe)
from reobench_mm.models.backbones.base import check_state_dict
from reobench_mm.models.backbones.olmoearth import (DROPPED_OFFICIAL_KEYS, OlmoEarth,
                                                    olmoearth_band_index)
from reobench_mm.registry import MODELS

DIMS, DEPTH, HEADS, KERNEL = 32, 4, 2, 4
TINY = dict(embed_dims=DIMS, depth=DEPTH, num_heads=HEADS, patch_size=KERNEL)
# the official SENTINEL2_L2A band sets, typed out from data/constants.py
L2A_SETS = [['B02', 'B03', 'B04', 'B08'], ['B05', 'B06', 'B07', 'B8A', 'B11', 'B12'],
            ['B01', 'B09']]
ALL13 = ['B01', 'B02', 'B03', 'B04', 'B05', 'B06', 'B07', 'B08', 'B8A', 'B09', 'B10', 'B11',
         'B12']
PROBES = {arch: osp.join(PROJECT_ROOT, 'configs', 'probe',
                         f'fpn-probe_olmoearth-{arch}_frozen_1xb8-12e_potsdam-224x224.py')
          for arch in ('base', 'tiny')}
WIDTH = {'base': 768, 'tiny': 192}
NUM_CLASSES = 6


# ------------------------------------------------------------------ official layout
def official_month_table(n):
    """``get_month_encoding_table`` as the official code computes it (13 angles, the
    last dropped)."""
    angles = torch.arange(0, 13) / (12 / (2 * np.pi))
    sin = torch.sin(torch.stack([angles] * (n // 2), dim=-1))
    cos = torch.cos(torch.stack([angles] * (n // 2), dim=-1))
    return torch.cat([sin[:-1], cos[:-1]], dim=-1)


def official_state_dict(dims=DIMS, depth=DEPTH, kernel=KERNEL, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=gen) * 0.2

    n = dims // 4
    enc = {}
    for s, group in enumerate(L2A_SETS):
        prefix = f'patch_embeddings.per_modality_embeddings.sentinel2_l2a.sentinel2_l2a__{s}'
        enc[f'{prefix}.proj.weight'] = rand(dims, len(group), kernel, kernel)
        enc[f'{prefix}.proj.bias'] = rand(dims)
    s1 = 'patch_embeddings.per_modality_embeddings.sentinel1.sentinel1__0'
    enc[f'{s1}.proj.weight'] = rand(dims, 2, kernel, kernel)
    enc[f'{s1}.proj.bias'] = rand(dims)
    enc['composite_encodings.month_embed.weight'] = official_month_table(n)
    enc['composite_encodings.pos_embed'] = rand(12, n)
    enc['composite_encodings.per_modality_channel_embeddings.sentinel2_l2a'] = rand(3, n)
    enc['composite_encodings.per_modality_channel_embeddings.sentinel1'] = rand(1, n)
    for i in range(depth):
        for name, shape in (('norm1', (dims, )), ('norm2', (dims, ))):
            enc[f'blocks.{i}.{name}.weight'] = 1 + rand(*shape)
            enc[f'blocks.{i}.{name}.bias'] = rand(*shape)
        for name, out, inp in (('attn.q', dims, dims), ('attn.k', dims, dims),
                               ('attn.v', dims, dims), ('attn.proj', dims, dims),
                               ('mlp.fc1', 4 * dims, dims), ('mlp.fc2', dims, 4 * dims)):
            enc[f'blocks.{i}.{name}.weight'] = rand(out, inp)
            enc[f'blocks.{i}.{name}.bias'] = rand(out)
    enc['norm.weight'], enc['norm.bias'] = 1 + rand(dims), rand(dims)
    enc['project_and_aggregate.projection.0.weight'] = rand(dims, dims)
    enc['project_and_aggregate.projection.0.bias'] = rand(dims)
    state = {f'encoder.{k}': v for k, v in enc.items()}
    state.update({f'target_encoder.{k}': v.clone() for k, v in enc.items()})
    state['decoder.blocks.0.attn.q.weight'] = rand(dims, dims)
    state['decoder.mask_token'] = rand(dims)
    return state


def official_1d(pos, d):
    """``get_1d_sincos_pos_encoding``."""
    omega = torch.arange(d // 2, dtype=torch.float64) / d / 2.0
    omega = 1.0 / 10000**omega
    out = torch.einsum('l,d->ld', pos.reshape(-1).double(), omega)
    return torch.cat([torch.sin(out), torch.cos(out)], dim=1)


def official_forward(state, image, present, patch_size, month_index, input_res, heads=HEADS,
                     kernel=KERNEL):
    """The official encoder on one L2A time step, float64: ``image`` is ``B×H×W×12`` in
    the modality's band order; ``present`` the band sets not missing. Returns each block's
    output and the normalised last one, as ``B×h×w×S×D``."""
    sd = {k[len('encoder.'):]: v.double() for k, v in state.items()
          if k.startswith('encoder.')}
    dims = sd['norm.weight'].shape[0]
    n = dims // 4
    order = [b for g in L2A_SETS for b in g]
    x = image.permute(0, 3, 1, 2).double()  # b c h w
    if patch_size != kernel:
        size = (x.shape[-2] // patch_size * kernel, x.shape[-1] // patch_size * kernel)
        x = F.interpolate(x, size=size, mode='bicubic', antialias=True)
    tokens = []
    for s in present:
        idx = [order.index(b) for b in L2A_SETS[s]]
        prefix = f'patch_embeddings.per_modality_embeddings.sentinel2_l2a.sentinel2_l2a__{s}'
        out = F.conv2d(x[:, idx], sd[f'{prefix}.proj.weight'], sd[f'{prefix}.proj.bias'],
                       stride=kernel)
        tokens.append(out.permute(0, 2, 3, 1))  # b h w d
    tok = torch.stack(tokens, dim=-2)  # b h w S d
    b, h, w, nsets, _ = tok.shape
    embed = torch.zeros_like(tok)
    channel = sd['composite_encodings.per_modality_channel_embeddings.sentinel2_l2a']
    embed[..., :n] += channel[list(present)][None, None, None]
    embed[..., n:2 * n] += official_1d(torch.arange(1), n)[0]
    embed[..., 2 * n:3 * n] += official_month_table(n).double()[month_index]
    ratio = input_res * patch_size / 10
    grid = torch.meshgrid(torch.arange(w), torch.arange(h), indexing='xy')
    grid = torch.stack(grid, dim=0).double() * ratio  # 2 x h x w
    space = torch.cat([official_1d(grid[0], n // 2), official_1d(grid[1], n // 2)], dim=1)
    embed[..., 3 * n:] += space.reshape(h, w, n)[:, :, None]
    t = (tok + embed).reshape(b, h * w * nsets, dims)

    def ln(v, name):
        return F.layer_norm(v, (dims, ), sd[f'{name}.weight'], sd[f'{name}.bias'], 1e-5)

    def lin(v, name):
        return v @ sd[f'{name}.weight'].T + sd[f'{name}.bias']

    outputs = []
    for i in range(len([k for k in sd if k.endswith('.norm1.weight')])):
        p = f'blocks.{i}'
        y = ln(t, f'{p}.norm1')
        q, k, v = (lin(y, f'{p}.attn.{c}').reshape(b, -1, heads, dims // heads).transpose(1, 2)
                   for c in 'qkv')
        att = torch.softmax(q @ k.transpose(-2, -1) * (dims // heads)**-0.5, dim=-1)
        t = t + lin((att @ v).transpose(1, 2).reshape(b, -1, dims), f'{p}.attn.proj')
        y = lin(ln(t, f'{p}.norm2'), f'{p}.mlp.fc1')
        y = 0.5 * y * (1 + torch.erf(y / math.sqrt(2)))
        t = t + lin(y, f'{p}.mlp.fc2')
        outputs.append(t.reshape(b, h, w, nsets, dims))
    return outputs, ln(t, 'norm').reshape(b, h, w, nsets, dims)


def _loaded(tmp_path, state, **kwargs):
    path = str(tmp_path / 'weights.pth')
    torch.save(state, path)
    model = OlmoEarth(arch=dict(TINY), out_indices=(0, 1, 2, 3),
                      init_cfg=dict(type='Pretrained', checkpoint=path), **kwargs)
    model.init_weights()
    return model.double().eval()


def _l2a_image(x, band_names):
    """``B×C×H×W`` named bands → ``B×H×W×12`` in the official order, absent bands 0."""
    order = [b for g in L2A_SETS for b in g]
    out = torch.zeros(x.shape[0], x.shape[2], x.shape[3], 12, dtype=x.dtype)
    for j, band in enumerate(order):
        if band in band_names:
            out[..., j] = x[:, band_names.index(band)]
    return out


def _pooled(maps):
    return maps.mean(dim=3).permute(0, 3, 1, 2)


# ---------------------------------------------------------------------------- parity
@pytest.mark.parametrize('band_names,present,patch,month,res', [
    (ALL13, (0, 1, 2), KERNEL, 3, 10.0),
    (list(reversed(ALL13)), (0, 1, 2), 2, 12, 5.0),
    (['B04', 'B03', 'B02'], (0, ), KERNEL, 7, 10.0),
    (['B04', 'B03', 'B02', 'B11'], (0, 1), 8, 1, 10.0),
])
def test_maps_equal_the_official_forward(tmp_path, band_names, present, patch, month, res):
    state = official_state_dict()
    model = _loaded(tmp_path, state, band_names=band_names, patch_size=patch, month=month,
                    input_res=res)
    assert model.used_sets == present
    x = torch.rand(2, len(band_names), 16, 16, generator=torch.Generator().manual_seed(1),
                   dtype=torch.float64)
    with torch.no_grad():
        levels = model(x)
        model.final_norm = True
        last = model(x)[-1]
    blocks, normed = official_forward(state, _l2a_image(x, band_names), present, patch,
                                      month - 1, res)
    grid = 16 // patch
    assert [tuple(m.shape) for m in levels] == [(2, DIMS, grid, grid)] * 4
    for got, want in zip(levels, blocks):
        torch.testing.assert_close(got, _pooled(want), atol=1e-4, rtol=0)
    torch.testing.assert_close(last, _pooled(normed), atol=1e-4, rtol=0)
    assert (levels[0] - levels[3]).abs().max() > 1e-2  # the blocks do something
    # the encodings kept for img_size's grid are the ones computed per forward
    cached = _loaded(tmp_path, state, img_size=16, band_names=band_names, patch_size=patch,
                     month=month, input_res=res)
    assert cached.fixed_cache.shape[:2] == (grid, grid)
    with torch.no_grad():
        assert all(torch.equal(a, b) for a, b in zip(cached(x), levels))


def test_encoding_quarters_depend_on_month_position_and_resolution(tmp_path):
    state = official_state_dict()
    a = _loaded(tmp_path, state, month=1, band_names=ALL13)
    enc = a.token_encoding(3, 2, torch.device('cpu'))
    n = DIMS // 4
    assert enc.shape == (3, 2, 3, DIMS)
    # month January: sin 0, cos 1; the time quarter of step 0 likewise
    assert torch.equal(enc[..., 2 * n:3 * n], torch.cat([torch.zeros(n // 2),
                                                         torch.ones(n // 2)]).expand(3, 2, 3, n)
                       .to(enc.dtype))
    assert torch.equal(enc[..., n:2 * n], enc[..., 2 * n:3 * n])
    # token (0, 0) has zero positions: sin 0 / cos 1 in both halves of the space quarter
    assert torch.equal(enc[0, 0, 0, 3 * n:], torch.tensor([0., 0., 1., 1., 0., 0., 1., 1.],
                                                          dtype=enc.dtype))
    # column 1, row 0 at ratio 10*4/10 = 4: first frequency sin(4)
    assert enc[0, 1, 0, 3 * n].item() == pytest.approx(math.sin(4.0), abs=1e-6)
    assert enc[1, 0, 0, 3 * n + n // 2].item() == pytest.approx(math.sin(4.0), abs=1e-6)


# ------------------------------------------------------------------------- converter
def test_converter_drops_exactly_the_listed_keys_and_fuses_qkv():
    state = official_state_dict()
    converted = OlmoEarth.convert_official_state_dict(state)
    model = OlmoEarth(arch=dict(TINY))
    assert sorted(converted) == sorted(model.state_dict())
    assert check_state_dict(model, converted) == []
    dropped = {k for k in state if k.startswith(('decoder.', 'target_encoder.'))}
    dropped |= {'encoder.project_and_aggregate.projection.0.weight',
                'encoder.project_and_aggregate.projection.0.bias',
                'encoder.composite_encodings.pos_embed',
                'encoder.composite_encodings.month_embed.weight',
                'encoder.composite_encodings.per_modality_channel_embeddings.sentinel1'}
    dropped |= {k for k in state if '.sentinel1.sentinel1__0.' in k}
    used = (len(state) - len(dropped) - 3 * DEPTH * 2 + DEPTH * 2)
    assert len(converted) == used
    assert 'decoder.*' in DROPPED_OFFICIAL_KEYS and 'target_encoder.*' in DROPPED_OFFICIAL_KEYS
    qkv = converted['blocks.1.attn.qkv.weight']
    assert torch.equal(qkv, torch.cat([state[f'encoder.blocks.1.attn.{c}.weight']
                                       for c in 'qkv']))
    assert torch.equal(converted['patch_embed.2.weight'], state[
        'encoder.patch_embeddings.per_modality_embeddings.sentinel2_l2a.sentinel2_l2a__2'
        '.proj.weight'])


def test_converter_and_loader_refuse_wrong_files(tmp_path):
    state = official_state_dict()
    with pytest.raises(ValueError, match='not an OlmoEarth checkpoint'):
        OlmoEarth.convert_official_state_dict({'blocks.0.norm1.weight': torch.ones(2)})
    bad_month = dict(state)
    bad_month['encoder.composite_encodings.month_embed.weight'] = torch.zeros(12, DIMS // 4)
    with pytest.raises(ValueError, match='month table'):
        OlmoEarth.convert_official_state_dict(bad_month)
    no_v = {k: v for k, v in state.items() if k != 'encoder.blocks.2.attn.v.bias'}
    with pytest.raises(ValueError, match=r"blocks.2.attn.qkv.bias.*\['k', 'q'\]"):
        OlmoEarth.convert_official_state_dict(no_v)
    extra = dict(state, **{'encoder.register_tokens': torch.zeros(4, DIMS)})
    path = str(tmp_path / 'extra.pth')
    torch.save(extra, path)
    model = OlmoEarth(arch=dict(TINY))
    with pytest.raises(KeyError, match='unexpected keys.*register_tokens'):
        model.load_pretrained(path)
    missing = {k: v for k, v in state.items() if not k.startswith('encoder.norm.')}
    torch.save(missing, path)
    with pytest.raises(KeyError, match=r"missing keys.*'norm.weight'"):
        model.load_pretrained(path)


# ------------------------------------------------------------------------ bad input
def test_band_index_and_bad_arguments_are_refused():
    assert olmoearth_band_index(['B04', 'B03', 'B02']) == [[2, 1, 0, -1], [-1] * 6, [-1, -1]]
    for names, match in ((['B04', 'R'], r"unknown \['R'\]"), (['B04', 'B04'], 'repeated'),
                         (['B10'], 'none of the L2A bands')):
        with pytest.raises(ValueError, match=match):
            OlmoEarth(arch=dict(TINY), band_names=names)
    for kwargs, match in ((dict(month=0), 'month must be'), (dict(month=13), 'month must be'),
                          (dict(patch_size=0), 'patch_size must be'),
                          (dict(input_res=-1.0), 'input_res must be'),
                          (dict(img_size=18), 'img_size must be'),
                          (dict(arch=dict(embed_dims=40, depth=4, num_heads=2)),
                           'divisible by 16')):
        with pytest.raises(ValueError, match=match):
            OlmoEarth(**dict(dict(arch=dict(TINY)), **kwargs))
    model = OlmoEarth(arch=dict(TINY), band_names=['B04', 'B03', 'B02'])
    with pytest.raises(ValueError, match=r'expected B×3×H×W'):
        model(torch.rand(1, 4, 16, 16))
    with pytest.raises(ValueError, match='not a multiple of patch_size 4'):
        model(torch.rand(1, 3, 18, 16))


# ---------------------------------------------------------------------------- configs
@pytest.mark.parametrize('arch', ['base', 'tiny'])
def test_probe_config_builds_whole_on_the_meta_device(arch):
    cfg = Config.fromfile(PROBES[arch])
    backbone = cfg.model.backbone
    assert (backbone.type, backbone.arch, backbone.patch_size) == ('OlmoEarth', arch, 8)
    assert tuple(backbone.band_names) == ('B04', 'B03', 'B02')
    assert cfg.model.data_preprocessor.bgr_to_rgb
    assert list(cfg.model.data_preprocessor.std) == [255.0] * 3
    name = 'Base' if arch == 'base' else 'Tiny'
    assert backbone.init_cfg.checkpoint == f'checkpoints/OlmoEarth-v1-{name}/weights.pth'
    assert (backbone.frozen_stages, tuple(backbone.out_indices)) == (12, (2, 5, 8, 11))
    model, levels, logits = build_on_meta(cfg, (1, 3, 224, 224))
    width = WIDTH[arch]
    assert [tuple(x.shape) for x in levels] == [(1, width, 28, 28)] * 4
    assert list(cfg.model.neck.in_channels) == [width] * 4
    assert logits.shape == (1, NUM_CLASSES, 28, 28)
    assert model.backbone.out_indices == (2, 5, 8, 11) and len(model.backbone.blocks) == 12


def _tiny_probe(checkpoint=None):
    cfg = Config.fromfile(PROBES['tiny'])
    init_default_scope(cfg.default_scope)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.update(arch=dict(embed_dims=DIMS, depth=DEPTH, num_heads=HEADS,
                                        patch_size=8),
                              frozen_stages=DEPTH, out_indices=(0, 1, 2, 3))
    if checkpoint is None:
        model_cfg.backbone.pop('init_cfg')
    else:
        model_cfg.backbone.init_cfg.checkpoint = checkpoint
    model_cfg.neck.update(in_channels=[DIMS] * 4, out_channels=16)
    model_cfg.decode_head.update(in_channels=[16] * 4, channels=64)
    return cfg, model_cfg


def test_tiny_probe_trains_its_decoder_only():
    from mmengine.optim import build_optim_wrapper
    cfg, model_cfg = _tiny_probe()
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
    optim = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    encoder = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    gen = torch.Generator().manual_seed(0)
    samples = seg_samples(224, NUM_CLASSES, gen)
    inputs = [torch.randint(0, 255, (3, 224, 224), dtype=torch.uint8, generator=gen)
              for _ in range(2)]
    model.train()
    assert not model.backbone.patch_embed.training and not model.backbone.norm.training
    losses = model.train_step(dict(inputs=inputs, data_samples=samples), optim)
    assert all(torch.isfinite(v).all() for v in losses.values())
    after = model.backbone.state_dict()
    assert [k for k in encoder if not torch.equal(encoder[k], after[k])] == []
    assert [n for n, p in model.backbone.named_parameters() if p.requires_grad] == []


@pytest.mark.trains('training the tiny OlmoEarth probe through the Runner is what it checks')
@pytest.mark.slow
def test_tiny_olmoearth_probe_trains_through_the_runner_at_224_px(demo_data, tmp_path):
    """The tiny-config probe with a 4-block, 32-wide OlmoEarth (patch 8, official-layout
    file) trained 2 iterations (6 demo images resized to 224, batch 3): the saved encoder
    is the file's, and the decoder's biases (zero at first) moved."""
    state = official_state_dict(kernel=8)
    weights = str(tmp_path / 'weights.pth')
    torch.save(state, weights)
    cfg, model_cfg = _tiny_probe(weights)
    cfg.model = model_cfg
    saved = train_tiny_probe(cfg, osp.join(demo_data, 'potsdam'), str(tmp_path / 'work'),
                             iterations=2)
    assert_encoder_saved_as(saved, OlmoEarth.convert_official_state_dict(state))
    assert_decoder_moved(saved, 9)
