"""Panopticon as an FPN-probe backbone (reobench_mm.models.backbones.panopticon).

- The forward against the official computation written out here with
  ``torch.nn.functional`` step by step from the official ``dinov2/models/panopticon.py``
  and ``vision_transformer.py`` (the per-band 1×p×p 3-D convolution, the spectral
  embedding with the SAR table built as the official code builds it, the cross-attention
  with one learned query, DINOv2's position-embedding interpolation with its 0.1 offset,
  LayerScale blocks), on a tiny configuration loaded from a state dict with the official
  key names: at the stored grid, at another (non-square) grid, per-sample band sets
  mixing optical and SAR bands, to 1e-4.
- The spectral embedding against hand-computed values; the band-name table against the
  official Sentinel-2 table (whole nanometres).
- The loader: the hub file, the training code's teacher file and full checkpoint give the
  same model; exactly the mask token, the student and the DINO/iBOT heads are dropped;
  wrong keys and shapes are refused naming them; the full-size official key layout maps
  onto the model, and the trunk's keys are those of timm's ``vit_base_patch14_dinov2``.
- The probe configs: encoder, wavelengths, hooks; built whole on the meta device (16×16
  maps at 224 px); the tiny variant trains its decoder only, and through MMEngine's Runner.
"""
import copy
import math
import os.path as osp

import numpy as np
import pytest
import timm
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT
from probe_helpers import (assert_decoder_moved, assert_encoder_saved_as,
                           assert_probe_is_the_task_base, build_on_meta, crop_pipeline,
                           seg_samples, train_tiny_probe)
from reobench_mm.models.backbones.convert import convert_checkpoint
from reobench_mm.models.backbones.panopticon import (PANOPTICON_BAND_WAVELENGTHS, Panopticon,
                                                     wavelengths_from_band_names)
from reobench_mm.registry import MODELS
from reobench_mm.transforms.raster_loading import SENTINEL2_BANDS

PROBE = osp.join(PROJECT_ROOT, 'configs', 'probe',
                 'fpn-probe_panopticon-b14_frozen_1xb8-12e_potsdam-{}x{}.py')
TASK_224 = osp.join(PROJECT_ROOT, 'configs', '_base_', 'tasks', 'fpn-probe_potsdam-224.py')
#: the tiny shape of the parity tests: trunk 32 wide, 3 blocks of 2 heads, patch 4,
#: fusion 48 wide with 4 heads
D, DEPTH, HEADS, P, A, FUSION_HEADS = 32, 3, 2, 4, 48, 4
TINY_ARCH = dict(embed_dims=D, depth=DEPTH, num_heads=HEADS, patch_size=P, attn_dim=A,
                 fusion_heads=FUSION_HEADS)
TOL = dict(rtol=1e-4, atol=1e-4)
NUM_CLASSES = 6


# ----------------------------------------------------------------------------- reference
def official_state_dict(grid: int, seed: int = 0, depth: int = DEPTH, patch: int = P) -> dict:
    """Random tensors under the official checkpoint's key names and shapes (the torch-hub
    model's state dict: DINOv2 ViT with ``PanopticonPE``, ``layer_norm=False``, no key or
    value bias), position embedding for a ``grid×grid`` layout."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, mean=0.0, std=0.1):
        return torch.randn(*shape, generator=g) * std + mean

    third = A // 3
    sd = {
        'cls_token': rnd(1, 1, D, std=0.5), 'pos_embed': rnd(1, 1 + grid * grid, D, std=0.5),
        'mask_token': rnd(1, D),
        'patch_embed.conv3d.conv3d.weight': rnd(A, 1, 1, patch, patch, std=0.3),
        'patch_embed.conv3d.conv3d.bias': rnd(A),
        'patch_embed.chnfus.chnemb.embed_transmit': rnd(2, third, std=0.5),
        'patch_embed.chnfus.chnemb.embed_receive': rnd(2, third, std=0.5),
        'patch_embed.chnfus.chnemb.embed_orbit': rnd(2, A - 2 * third, std=0.5),
        'patch_embed.chnfus.query': rnd(1, 1, A, std=1.0),
        'patch_embed.chnfus.xattn.inproj_k.weight': rnd(A, A, std=0.2),
        'patch_embed.chnfus.xattn.inproj_v.weight': rnd(A, A, std=0.2),
        'patch_embed.proj.weight': rnd(D, A, std=0.2), 'patch_embed.proj.bias': rnd(D),
        'norm.weight': rnd(D, mean=1.0, std=0.2), 'norm.bias': rnd(D),
    }
    for i in range(depth):
        b = f'blocks.{i}.'
        sd.update({
            b + 'norm1.weight': rnd(D, mean=1.0, std=0.2), b + 'norm1.bias': rnd(D),
            b + 'attn.qkv.weight': rnd(3 * D, D, std=0.2), b + 'attn.qkv.bias': rnd(3 * D),
            b + 'attn.proj.weight': rnd(D, D, std=0.2), b + 'attn.proj.bias': rnd(D),
            b + 'ls1.gamma': rnd(D, mean=0.5, std=0.2),
            b + 'norm2.weight': rnd(D, mean=1.0, std=0.2), b + 'norm2.bias': rnd(D),
            b + 'mlp.fc1.weight': rnd(4 * D, D, std=0.2), b + 'mlp.fc1.bias': rnd(4 * D),
            b + 'mlp.fc2.weight': rnd(D, 4 * D, std=0.1), b + 'mlp.fc2.bias': rnd(D),
            b + 'ls2.gamma': rnd(D, mean=0.5, std=0.2),
        })
    return sd


def official_channel_embedding(sd: dict, chn_ids: torch.Tensor) -> torch.Tensor:
    """``ChnEmb.forward`` (``opt_coarsity=1``, means only): optical ids floored and sin-cos
    coded in float32; SAR ids ``-1..-12`` index the 12-row table the official code builds
    (transmit rows V,V,H,H; receive rows V,H,H,V; orbit both (mean), ascending,
    descending, each repeated over the 4 polarisations)."""
    t = sd['patch_embed.chnfus.chnemb.embed_transmit']
    r = sd['patch_embed.chnfus.chnemb.embed_receive']
    o = sd['patch_embed.chnfus.chnemb.embed_orbit']
    transmit = torch.cat([t[0].repeat(2, 1), t[1].repeat(2, 1)]).repeat(3, 1)
    receive = torch.cat([r[0][None], r[1].repeat(2, 1), r[0][None]]).repeat(3, 1)
    orbit = torch.stack([o.mean(dim=0), o[0], o[1]]).repeat_interleave(4, dim=0)
    sar_table = torch.cat([transmit, receive, orbit], dim=1)  # (12, A)
    omega = torch.arange(A // 2, dtype=torch.float32) / (A / 2.0)
    omega = 1.0 / 10000**omega
    embs = torch.zeros(*chn_ids.shape, A)
    for b in range(chn_ids.shape[0]):
        for c in range(chn_ids.shape[1]):
            mu = chn_ids[b, c]
            if mu < 0:
                embs[b, c] = sar_table[int(-(mu + 1))]
            else:
                out = torch.einsum('m,d->md', (mu // 1).reshape(1).float(), omega)
                embs[b, c] = torch.cat([out.sin(), out.cos()], dim=1)[0]
    return embs


def official_forward(sd: dict, imgs: torch.Tensor, chn_ids: torch.Tensor, take, norm=False):
    """The official torch-hub model's ``get_intermediate_layers(x_dict, n=take,
    norm=norm)`` written out, reshaped to ``B×D×rows×cols`` maps."""
    B, C, H, W = imgs.shape
    # PanopticonPE / Conv3dWrapper: a 1×p×p 3-D convolution over the band axis
    x = F.conv3d(imgs.unsqueeze(1), sd['patch_embed.conv3d.conv3d.weight'],
                 sd['patch_embed.conv3d.conv3d.bias'], stride=(1, P, P))  # B, A, C, h, w
    rows, cols = x.shape[-2:]
    x = x.flatten(-2).permute(0, 2, 3, 1)  # B, C, L, A
    L = rows * cols
    # ChnAttn: channel embeddings added, one query attends over the C tokens of a patch
    x = x + official_channel_embedding(sd, chn_ids).unsqueeze(2)
    x = x.permute(0, 2, 1, 3).flatten(0, 1)  # BL, C, A
    hd = A // FUSION_HEADS
    q = sd['patch_embed.chnfus.query'].expand(B * L, -1, -1)
    q = q.reshape(B * L, 1, FUSION_HEADS, hd).permute(0, 2, 1, 3) * hd**-0.5
    k = (x @ sd['patch_embed.chnfus.xattn.inproj_k.weight'].T)
    v = (x @ sd['patch_embed.chnfus.xattn.inproj_v.weight'].T)
    k = k.reshape(B * L, C, FUSION_HEADS, hd).permute(0, 2, 1, 3)
    v = v.reshape(B * L, C, FUSION_HEADS, hd).permute(0, 2, 1, 3)
    attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
    x = (attn @ v).transpose(1, 2).reshape(B, L, A)
    x = x @ sd['patch_embed.proj.weight'].T + sd['patch_embed.proj.bias']
    # prepare_tokens_with_masks + interpolate_pos_encoding (the hub model's variables
    # w, h are the image's rows and columns)
    x = torch.cat([sd['cls_token'].expand(B, -1, -1), x], dim=1)
    pos = sd['pos_embed']
    N = pos.shape[1] - 1
    if L == N and H == W:
        x = x + pos
    else:
        M = int(math.sqrt(N))
        patch_pos = F.interpolate(pos[:, 1:].reshape(1, M, M, D).permute(0, 3, 1, 2),
                                  scale_factor=((rows + 0.1) / M, (cols + 0.1) / M),
                                  mode='bicubic', antialias=False)
        patch_pos = patch_pos.permute(0, 2, 3, 1).reshape(1, -1, D)
        x = x + torch.cat([pos[:, :1], patch_pos], dim=1)
    outputs = []
    hd = D // HEADS
    for i in range(DEPTH):
        b = f'blocks.{i}.'
        y = F.layer_norm(x, (D, ), sd[b + 'norm1.weight'], sd[b + 'norm1.bias'], eps=1e-6)
        qkv = (y @ sd[b + 'attn.qkv.weight'].T + sd[b + 'attn.qkv.bias'])
        qkv = qkv.reshape(B, -1, 3, HEADS, hd).permute(2, 0, 3, 1, 4)
        a = ((qkv[0] * hd**-0.5) @ qkv[1].transpose(-2, -1)).softmax(dim=-1)
        y = (a @ qkv[2]).transpose(1, 2).reshape(B, -1, D)
        y = y @ sd[b + 'attn.proj.weight'].T + sd[b + 'attn.proj.bias']
        x = x + y * sd[b + 'ls1.gamma']
        y = F.layer_norm(x, (D, ), sd[b + 'norm2.weight'], sd[b + 'norm2.bias'], eps=1e-6)
        y = F.gelu(y @ sd[b + 'mlp.fc1.weight'].T + sd[b + 'mlp.fc1.bias'])
        y = y @ sd[b + 'mlp.fc2.weight'].T + sd[b + 'mlp.fc2.bias']
        x = x + y * sd[b + 'ls2.gamma']
        if i in take:
            outputs.append(x)
    if norm:
        outputs = [F.layer_norm(out, (D, ), sd['norm.weight'], sd['norm.bias'], eps=1e-6)
                   for out in outputs]
    return [out[:, 1:].reshape(B, rows, cols, D).permute(0, 3, 1, 2) for out in outputs]


def _loaded(tmp_path, checkpoint, name='official.pth', **options) -> Panopticon:
    path = str(tmp_path / name)
    torch.save(checkpoint, path)
    options.setdefault('img_size', 4 * P)
    options.setdefault('out_indices', (0, 2))
    model = MODELS.build(dict(type='Panopticon', arch=TINY_ARCH,
                              init_cfg=dict(type='Pretrained', checkpoint=path), **options))
    model.init_weights()
    return model.eval()


#: per sample: optical bands (the floor matters for 492.9971), SAR categories of both
#: orbits, ascending and descending
CHANNEL_IDS = torch.tensor([[664.63, 492.9971, -2.0, 1613.86],
                            [-1.0, -7.0, 2203.6182, -12.0]])


# ----------------------------------------------------------------------------- parity
def test_forward_equals_the_official_computation_at_the_stored_grid(tmp_path):
    """A 5×5 checkpoint grid loaded into a model laid out for 4×4 (16 px): resampled at
    load as the official forward resamples it at every call."""
    sd = official_state_dict(grid=5)
    model = _loaded(tmp_path, sd)
    assert model.grid_size == (4, 4) and model.pos_embed.shape == (1, 17, D)
    normed = _loaded(tmp_path, sd, final_norm=True)
    torch.manual_seed(1)
    imgs = torch.randn(2, 4, 4 * P + 3, 4 * P + 3)  # the remainder is dropped
    with torch.no_grad():
        levels = model(imgs, wavelengths=CHANNEL_IDS)
        levels_normed = normed(imgs, wavelengths=CHANNEL_IDS)
        expected = official_forward(sd, imgs, CHANNEL_IDS, take=(0, 2))
        expected_normed = official_forward(sd, imgs, CHANNEL_IDS, take=(0, 2), norm=True)
    assert [tuple(x.shape) for x in levels] == [(2, D, 4, 4)] * 2
    for got, want in zip(levels + levels_normed, expected + expected_normed):
        torch.testing.assert_close(got, want, **TOL)
    # the bands matter: another set of wavelengths, other maps; one sample alone equals
    # itself in the batch (per-sample ids)
    with torch.no_grad():
        swapped = model(imgs, wavelengths=CHANNEL_IDS.flip(0))
        single = model(imgs[1:], wavelengths=CHANNEL_IDS[1:])
    assert (swapped[1] - levels[1]).abs().max() > 1e-2
    torch.testing.assert_close(single[1], levels[1][1:], **TOL)


def test_forward_equals_the_official_computation_at_another_grid(tmp_path):
    """Model and checkpoint both at 5×5; a 3×6 (non-square) input grid: both resample the
    5×5 embedding with DINOv2's offset. The configured band names give the ids."""
    sd = official_state_dict(grid=5, seed=3)
    names = ('B04', 'B8A', 'VH', 'blue')
    model = _loaded(tmp_path, sd, img_size=5 * P, out_indices=(0, 1, 2), band_names=names)
    ids = torch.tensor([wavelengths_from_band_names(names)] * 2)
    imgs = torch.randn(2, 4, 3 * P, 6 * P, generator=torch.Generator().manual_seed(2))
    square = torch.randn(2, 4, 5 * P, 5 * P, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        levels = model(imgs)
        expected = official_forward(sd, imgs, ids, take=(0, 1, 2))
        at_grid = model(square)  # the stored grid: no resampling on either side
        expected_at_grid = official_forward(sd, square, ids, take=(0, 1, 2))
    assert [tuple(x.shape) for x in levels] == [(2, D, 3, 6)] * 3
    for got, want in zip(levels + at_grid, expected + expected_at_grid):
        torch.testing.assert_close(got, want, **TOL)


def test_spectral_embedding_hand_computed():
    """A = 6: optical ``[sin(μ), sin(μ/10000^(1/3)), sin(μ/10000^(2/3)), cos(...)]`` of the
    floored wavelength; SAR: transmit | receive | orbit parts picked by polarisation and
    orbit."""
    model = Panopticon(arch=dict(embed_dims=4, depth=1, num_heads=1, attn_dim=6,
                                 fusion_heads=1), img_size=14, out_indices=(0, ))
    embed = model.patch_embed
    with torch.no_grad():
        embed.sar_transmit.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))  # V, H
        embed.sar_receive.copy_(torch.tensor([[5.0, 6.0], [7.0, 8.0]]))  # V, H
        embed.sar_orbit.copy_(torch.tensor([[10.0, 20.0], [30.0, 40.0]]))  # asc., desc.
        got = embed.spectral_embedding(torch.tensor([[664.9, -1.0, -2.0, -3.0, -4.0,
                                                      -6.0, -12.0]]))[0]
    angles = [664 / 10000**(k / 3) for k in range(3)]
    want = [[math.sin(a) for a in angles] + [math.cos(a) for a in angles],
            [1, 2, 5, 6, 20, 30],  # VV, both orbits: the orbit mean
            [1, 2, 7, 8, 20, 30],  # VH
            [3, 4, 7, 8, 20, 30],  # HH
            [3, 4, 5, 6, 20, 30],  # HV
            [1, 2, 7, 8, 10, 20],  # VH ascending
            [3, 4, 5, 6, 30, 40]]  # HV descending
    np.testing.assert_allclose(got.numpy(), np.array(want), rtol=0, atol=1e-4)


def test_band_table_and_wavelength_errors():
    # the official Sentinel-2 table's centres, in the whole nanometres the embedding uses
    official = [442, 492, 559, 664, 704, 740, 782, 827, 864, 945, 1373, 1613, 2203]
    assert [math.floor(v) for v in wavelengths_from_band_names(SENTINEL2_BANDS)] == official
    assert [math.floor(v) for v in wavelengths_from_band_names(('red', 'green', 'blue'))] \
        == [664, 559, 492]
    assert wavelengths_from_band_names(('VV', 'VH', 'HH', 'HV')) == (-1, -2, -3, -4)
    assert set(SENTINEL2_BANDS) <= set(PANOPTICON_BAND_WAVELENGTHS)
    default = Panopticon(arch=dict(TINY_ARCH, depth=1), out_indices=(0, ))
    assert default.channel_ids.tolist() == [664, 559, 492]  # RGB when nothing is named
    with pytest.raises(ValueError, match=r"no wavelength for the band names \['B13'\]"):
        wavelengths_from_band_names(('B02', 'B13'))
    for bad in ((0.0, ), (-13, ), (-1.5, ), ()):
        with pytest.raises(ValueError, match='centre wavelengths in nm'):
            Panopticon(arch=dict(TINY_ARCH, depth=1), out_indices=(0, ), wavelengths=bad)
    model = Panopticon(arch=dict(TINY_ARCH, depth=1), img_size=16, out_indices=(0, ))
    with pytest.raises(ValueError, match=r'the image has 4 bands .* shape \(3,\)'):
        model(torch.rand(1, 4, 16, 16))
    with pytest.raises(ValueError, match='SAR categories'):
        model(torch.rand(1, 2, 16, 16), wavelengths=torch.tensor([500.0, -20.0]))
    with pytest.raises(ValueError, match='unknown arch'):
        Panopticon(arch='l')
    with pytest.raises(ValueError, match='square'):
        Panopticon(arch=dict(TINY_ARCH, depth=1), out_indices=(0, ), img_size=(16, 32))


# ----------------------------------------------------------------------------- loading
def test_every_official_layout_loads_the_same_encoder(tmp_path):
    sd = official_state_dict(grid=4, seed=5)
    plain = _loaded(tmp_path, sd, 'hub.pth').state_dict()
    head = {'dino_head.mlp.0.weight': torch.ones(3, D), 'dino_head.last_layer.weight_g':
            torch.ones(8, 1), 'ibot_head.mlp.0.weight': torch.ones(3, D)}
    teacher = {f'backbone.{k}': v for k, v in sd.items()}
    teacher.update(head)
    full = {f'teacher.{k}': v for k, v in teacher.items()}
    full.update({f'student.{k}': v + 1 for k, v in teacher.items()})
    layouts = {'teacher_checkpoint.pth': {'teacher': teacher},
               'model_final.pth': {'model': full, 'iteration': 7}}
    for name, checkpoint in layouts.items():
        loaded = _loaded(tmp_path, checkpoint, name).state_dict()
        assert loaded.keys() == plain.keys()
        assert all(torch.equal(loaded[k], plain[k]) for k in plain), name
    # exactly the mask token is dropped from the hub file; the conv kernel loses its
    # band axis; every other tensor arrives unchanged
    converted = Panopticon.convert_official_state_dict(sd)
    assert 'mask_token' not in converted and len(converted) == len(sd) - 1
    assert set(converted) == set(plain)
    assert torch.equal(converted['patch_embed.band_conv.weight'],
                       sd['patch_embed.conv3d.conv3d.weight'][:, :, 0])
    assert torch.equal(plain['patch_embed.query'], sd['patch_embed.chnfus.query'])
    assert torch.equal(plain['pos_embed'], sd['pos_embed'])  # same 4×4 grid: unchanged
    # the training code's heads and student never reach the model
    assert Panopticon.convert_official_state_dict(full).keys() == converted.keys()


def test_wrong_checkpoints_are_refused_naming_the_keys(tmp_path):
    sd = official_state_dict(grid=4)
    missing = {k: v for k, v in sd.items() if k != 'patch_embed.proj.bias'}
    with pytest.raises(KeyError, match=r"1 missing keys, first: \['patch_embed.proj.bias'\]"):
        _loaded(tmp_path, missing)
    extra = dict(sd, **{'patch_embed.chnfus.layer_norm.weight': torch.ones(A)})
    with pytest.raises(KeyError, match='patch_embed.chnfus.layer_norm.weight'):
        _loaded(tmp_path, extra)
    other = official_state_dict(grid=4, patch=P + 1)  # another patch size
    with pytest.raises(ValueError, match='patch_embed.band_conv.weight'):
        _loaded(tmp_path, other)


def test_converted_file_gives_the_official_outputs(tmp_path):
    sd = official_state_dict(grid=5, seed=2)
    src, dst = str(tmp_path / 'hub.pth'), str(tmp_path / 'converted.pth')
    torch.save(sd, src)
    cfg = dict(type='Panopticon', arch=TINY_ARCH, img_size=4 * P, out_indices=(1, ))
    meta = convert_checkpoint(src, dst, cfg)
    assert meta['missing_allowed'] == [] and meta['source'] == 'hub.pth'
    model = _loaded(tmp_path, torch.load(dst), 'again.pth', out_indices=(1, ))
    imgs = torch.randn(1, 3, 4 * P, 4 * P)
    ids = torch.tensor([[664.0, 559.0, 492.0]])
    with torch.no_grad():
        torch.testing.assert_close(model(imgs)[0], official_forward(sd, imgs, ids, (1, ))[0],
                                   **TOL)


def test_full_size_official_layout_maps_onto_the_model_and_timm_blocks():
    """The released ViT-B/14 (keys and shapes of the official model file at its 518 px
    layout) converts onto ``arch='b'``; its trunk keys are timm's ``vit_base_patch14_dinov2``
    ones with the same shapes (LayerScale ``ls1``/``ls2``, no register tokens)."""
    from reobench_mm.models.backbones import check_state_dict
    with torch.device('meta'):
        model = Panopticon(arch='b', img_size=518)
        reference = timm.create_model('vit_base_patch14_dinov2', pretrained=False)
    e, a = 768, 2304
    official = {'cls_token': (1, 1, e), 'pos_embed': (1, 1 + 37 * 37, e), 'mask_token': (1, e),
                'patch_embed.conv3d.conv3d.weight': (a, 1, 1, 14, 14),
                'patch_embed.conv3d.conv3d.bias': (a, ),
                'patch_embed.chnfus.chnemb.embed_transmit': (2, a // 3),
                'patch_embed.chnfus.chnemb.embed_receive': (2, a // 3),
                'patch_embed.chnfus.chnemb.embed_orbit': (2, a // 3),
                'patch_embed.chnfus.query': (1, 1, a),
                'patch_embed.chnfus.xattn.inproj_k.weight': (a, a),
                'patch_embed.chnfus.xattn.inproj_v.weight': (a, a),
                'patch_embed.proj.weight': (e, a), 'patch_embed.proj.bias': (e, ),
                'norm.weight': (e, ), 'norm.bias': (e, )}
    block = {'norm1.weight': (e, ), 'norm1.bias': (e, ), 'attn.qkv.weight': (3 * e, e),
             'attn.qkv.bias': (3 * e, ), 'attn.proj.weight': (e, e), 'attn.proj.bias': (e, ),
             'ls1.gamma': (e, ), 'norm2.weight': (e, ), 'norm2.bias': (e, ),
             'mlp.fc1.weight': (4 * e, e), 'mlp.fc1.bias': (4 * e, ),
             'mlp.fc2.weight': (e, 4 * e), 'mlp.fc2.bias': (e, ), 'ls2.gamma': (e, )}
    official.update({f'blocks.{i}.{k}': v for i in range(12) for k, v in block.items()})
    trunk = {k: tuple(v.shape) for k, v in reference.state_dict().items()
             if k.startswith(('blocks.', 'norm.', 'cls_token', 'pos_embed'))}
    assert trunk == {k: v for k, v in official.items()
                     if k.startswith(('blocks.', 'norm.', 'cls_token', 'pos_embed'))}
    converted = Panopticon.convert_official_state_dict(
        {k: torch.empty(s, device='meta') for k, s in official.items()})
    assert check_state_dict(model, converted) == []
    ours = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert {k: ours[k] for k in trunk} == trunk


# ----------------------------------------------------------------------------- configs
def _config(size: int = 224) -> Config:
    return Config.fromfile(PROBE.format(size, size))


def test_probe_config_resolves_to_the_encoder_and_the_task_decoder():
    cfg, task = _config(), Config.fromfile(TASK_224)
    backbone = cfg.model.backbone
    assert backbone == dict(type='Panopticon', arch='b', img_size=224,
                            wavelengths=(664, 559, 492), frozen_stages=12,
                            out_indices=(2, 5, 8, 11),
                            init_cfg=dict(type='Pretrained',
                                          checkpoint='checkpoints/panopticon_vitb14_teacher.pth'))
    # Sentinel-2 red, green, blue in whole nanometres: the official RGB convention
    assert list(backbone.wavelengths) == [
        math.floor(v) for v in wavelengths_from_band_names(('B04', 'B03', 'B02'))]
    assert cfg.model.data_preprocessor.bgr_to_rgb is True  # the bands arrive as R, G, B
    assert (cfg.patch_size, cfg.model.neck.in_channels) == (14, [768] * 4)
    assert_probe_is_the_task_base(cfg, task)
    twin = _config(512)
    assert twin.model.backbone == dict(backbone, img_size=512)


def test_probe_config_builds_whole_on_the_meta_device():
    """The configured ViT-B/14 without allocating it: 16×16 maps (stride 14) at 224 px from
    the hooked blocks, 768 channels, the logits at the maps' size."""
    cfg = _config()
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.pop('init_cfg')
    model, levels, logits = build_on_meta(cfg, (2, 3, 224, 224), model_cfg)
    assert [tuple(x.shape) for x in levels] == [(2, 768, 16, 16)] * 4
    assert logits.shape == (2, NUM_CLASSES, 16, 16)
    assert model.backbone.out_indices == (2, 5, 8, 11) and len(model.backbone.blocks) == 12
    assert model.backbone.channel_ids.shape == (3, )


def _tiny_probe(cfg: Config, checkpoint=None):
    """The probe with the tiny trunk (patch 14, 4 blocks of width 32, all frozen, each
    hooked) and 16-channel FPN levels."""
    cfg = copy.deepcopy(cfg)
    backbone = cfg.model.backbone
    backbone.update(arch=dict(embed_dims=D, depth=4, num_heads=HEADS, attn_dim=A,
                              fusion_heads=FUSION_HEADS), frozen_stages=4,
                    out_indices=(0, 1, 2, 3))
    if checkpoint is None:
        backbone.pop('init_cfg')
    else:
        backbone.init_cfg.checkpoint = checkpoint
    cfg.model.neck.update(in_channels=[D] * 4, out_channels=16)
    cfg.model.decode_head.update(in_channels=[16] * 4, channels=64)
    return cfg


def test_tiny_probe_trains_its_decoder_only():
    cfg = _tiny_probe(_config())
    init_default_scope(cfg.default_scope)
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    optim_cfg = copy.deepcopy(cfg.optim_wrapper)
    optim_cfg.optimizer.lr = 0.5
    optim = build_optim_wrapper(model, optim_cfg)
    samples = seg_samples(224, NUM_CLASSES)
    batch = dict(inputs=[torch.randint(0, 255, (3, 224, 224), dtype=torch.uint8)] * 2,
                 data_samples=samples)
    encoder = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    decoder = {k: v.clone() for k, v in model.named_parameters() if not k.startswith('backbone.')}
    model.train()
    assert all(torch.isfinite(v).all() for v in model.train_step(batch, optim).values())
    after = model.backbone.state_dict()
    assert [k for k in encoder if not torch.equal(encoder[k], after[k])] == []
    assert all(p.grad is None for p in model.backbone.parameters())
    moved = dict(model.named_parameters())
    assert [k for k in decoder if torch.equal(decoder[k], moved[k])] == []


@pytest.mark.trains('training the Panopticon probe through the Runner is what it checks')
@pytest.mark.slow
def test_tiny_probe_trains_through_the_runner_at_224_px(demo_data, tmp_path):
    """The probe config with the tiny trunk, its encoder from a file in the official
    layout, trained one epoch (2 iterations of 3 images) on 224 px crops of the demo data:
    the saved encoder is the file's, converted, bit for bit; the decoder moved."""
    sd = official_state_dict(grid=37, seed=4, depth=4, patch=14)
    weights = str(tmp_path / 'panopticon_vitb14_teacher.pth')
    torch.save(sd, weights)
    saved = train_tiny_probe(_tiny_probe(_config(), weights), osp.join(demo_data, 'potsdam'),
                             str(tmp_path / 'work'), iterations=2, pipeline=crop_pipeline(224))
    tiny = Panopticon(arch=_tiny_probe(_config()).model.backbone.arch, img_size=224)
    expected = tiny.adapt_state_dict(Panopticon.convert_official_state_dict(sd))
    assert expected['pos_embed'].shape == (1, 1 + 16 * 16, D)
    assert_encoder_saved_as(saved, expected)
    assert_decoder_moved(saved, 9)
