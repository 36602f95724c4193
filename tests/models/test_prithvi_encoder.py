"""Prithvi-EO-2.0 as an FPN-probe backbone (reobench_mm.models.backbones.prithvi, its
CloudSEN12 probe config and configs/_base_/tasks/fpn-probe_cloudsen12-224.py).

- The 3-D sin-cos position embedding against the formula written element by element with
  numpy (column, row, frame parts of 6/16, 6/16, 4/16 of the width).
- The forward against the official ``forward_features`` written out here with
  ``torch.nn.functional`` from a state dict in the official ``PrithviMAE`` layout (a tiny
  encoder + decoder with random weights and norms, saved with ``torch.save`` and loaded
  through ``init_cfg=Pretrained``): 3-D convolution, the numpy position embedding, the
  temporal and location encodings as the official torch helper computes them, the blocks
  (LayerNorm eps 1e-6, qkv attention, exact GELU), the final norm on the last block; one
  and two frames, with and without the metadata, to 1e-4.
- The converter drops exactly the listed keys (the MAE decoder, its mask token, both
  position embeddings), refuses other keys by name, a -TL file for a plain trunk and the
  other way round, other layouts and other band counts.
- Band selection by name (Sentinel-2 or HLS names), the metadata arguments' errors, the
  frozen trunk.
- The probe config: built whole on the meta device (hooked blocks, widths, logits), its
  normalisation at the right bands, its task base equal to the Potsdam 224 probe's decoder
  and schedule; a narrowed model trains one step with the encoder unchanged; and (slow) it
  trains through MMEngine's Runner at 224 px on a fake CloudSEN12 (the package's demo data
  is RGB only, which this encoder cannot read).
"""
import copy
import os.path as osp

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from timm.models.vision_transformer import Block
from torch import nn

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT
from probe_helpers import (assert_decoder_moved, assert_encoder_saved_as, build_on_meta,
                           seg_samples, train_tiny_probe)
from reobench_mm.models.backbones.base import check_state_dict
from reobench_mm.models.backbones.prithvi import (DROPPED_OFFICIAL_KEYS, PRITHVI_V2_MEAN,
                                                  PRITHVI_V2_STD, PrithviV2,
                                                  prithvi_band_indices, sincos_pos_embed_3d)
from reobench_mm.registry import MODELS
from reobench_mm.transforms.raster_loading import SENTINEL2_BANDS

CONFIG = osp.join(PROJECT_ROOT, 'configs', 'probe',
                  'fpn-probe_prithvi-v2-300m_frozen_1xb8-12e_cloudsen12-224x224.py')
TASK = osp.join(PROJECT_ROOT, 'configs', '_base_', 'tasks', 'fpn-probe_cloudsen12-224.py')
POTSDAM_TASK = osp.join(PROJECT_ROOT, 'configs', '_base_', 'tasks', 'fpn-probe_potsdam-224.py')
#: the tiny trunk of the parity tests: width 32, 4 blocks, 2 heads, patch 8
DIMS, DEPTH, HEADS, PATCH = 32, 4, 2, 8
TINY = dict(embed_dims=DIMS, depth=DEPTH, num_heads=HEADS, patch_size=PATCH)
#: B02, B03, B04, B8A, B11, B12 in SENTINEL2_BANDS (B01 ... B08, B8A, B09, B10, B11, B12)
S2_POSITIONS = (1, 2, 3, 8, 11, 12)
TOL = 1e-4


# ------------------------------------------------------------------------ references
def numpy_pos_embed(dims: int, grid) -> np.ndarray:
    """The official 3-D sin-cos table, token by token in float64: token (f, r, c) is
    ``[enc_{6D/16}(c), enc_{6D/16}(r), enc_{4D/16}(f)]`` with
    ``enc_d(p) = [sin(p ω_k), cos(p ω_k)]``, ``ω_k = 10000^(-k/(d/2))``."""
    def enc(position, width):
        omega = np.array([10000.0**(-k / (width / 2)) for k in range(width // 2)])
        return np.concatenate([np.sin(position * omega), np.cos(position * omega)])

    frames, rows, cols = grid
    part = dims // 16
    table = [np.concatenate([enc(c, 6 * part), enc(r, 6 * part), enc(f, 4 * part)])
             for f in range(frames) for r in range(rows) for c in range(cols)]
    return np.stack(table)


def official_coords_code(dims: int, positions: torch.Tensor) -> torch.Tensor:
    """The official torch helper of the metadata encodings, step by step (float32)."""
    omega = torch.arange(dims // 2, dtype=positions.dtype)
    omega /= dims / 2.0
    omega = 1.0 / 10000**omega
    out = torch.einsum('m,d->md', positions.reshape(-1), omega)
    return torch.cat([torch.sin(out), torch.cos(out)], dim=1)


def official_features(sd, x, temporal=None, location=None, eps=1e-6):
    """The official ``PrithviViT.forward_features`` on ``x`` ``(B, C, T, H, W)`` with the
    weights of ``sd`` (official keys): every block's tokens, and the last after the final
    norm. ``temporal`` ``(B, T, 2)``, ``location`` ``(B, 2)``."""
    weight = sd['encoder.patch_embed.proj.weight']
    dims, patch = weight.shape[0], weight.shape[-1]
    tokens = F.conv3d(x, weight, sd['encoder.patch_embed.proj.bias'], stride=(1, patch, patch))
    batch, _, frames, rows, cols = tokens.shape
    tokens = tokens.flatten(2).transpose(1, 2)
    tokens = tokens + torch.from_numpy(numpy_pos_embed(dims, (frames, rows, cols))).float()
    half = dims // 2
    if temporal is not None:
        year = official_coords_code(half, temporal[:, :, 0].flatten()).reshape(batch, frames, -1)
        day = official_coords_code(dims - half, temporal[:, :, 1].flatten()).reshape(
            batch, frames, -1)
        code = sd['encoder.temporal_embed_enc.scale'] * torch.cat([year, day], dim=-1)
        tokens = tokens + torch.repeat_interleave(code, rows * cols, dim=1)
    if location is not None:
        lat = official_coords_code(half, location[:, 0]).reshape(batch, 1, -1)
        lon = official_coords_code(dims - half, location[:, 1]).reshape(batch, 1, -1)
        tokens = tokens + sd['encoder.location_embed_enc.scale'] * torch.cat([lat, lon], -1)
    cls = sd['encoder.cls_token'].expand(batch, -1, -1)  # + its zero position row
    x = torch.cat([cls, tokens], dim=1)
    heads_dims = dims // HEADS
    outs = []
    for i in range(len({k.split('.')[2] for k in sd if k.startswith('encoder.blocks.')})):
        p = f'encoder.blocks.{i}.'
        y = F.layer_norm(x, (dims, ), sd[p + 'norm1.weight'], sd[p + 'norm1.bias'], eps)
        qkv = F.linear(y, sd[p + 'attn.qkv.weight'], sd[p + 'attn.qkv.bias'])
        q, k, v = qkv.reshape(batch, -1, 3, HEADS, heads_dims).permute(2, 0, 3, 1, 4)
        attn = torch.softmax(q @ k.transpose(-2, -1) * heads_dims**-0.5, dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(batch, -1, dims)
        x = x + F.linear(y, sd[p + 'attn.proj.weight'], sd[p + 'attn.proj.bias'])
        y = F.layer_norm(x, (dims, ), sd[p + 'norm2.weight'], sd[p + 'norm2.bias'], eps)
        y = F.gelu(F.linear(y, sd[p + 'mlp.fc1.weight'], sd[p + 'mlp.fc1.bias']))
        x = x + F.linear(y, sd[p + 'mlp.fc2.weight'], sd[p + 'mlp.fc2.bias'])
        outs.append(x)
    normed = F.layer_norm(x, (dims, ), sd['encoder.norm.weight'], sd['encoder.norm.bias'], eps)
    return outs, normed


def to_map(tokens, frames, rows, cols):
    """``b (t h w) e -> b (t e) h w`` without the class token (official
    ``prepare_features_for_image_model``)."""
    batch, _, dims = tokens.shape
    grid = tokens[:, 1:].reshape(batch, frames, rows, cols, dims)
    return grid.permute(0, 1, 4, 2, 3).reshape(batch, frames * dims, rows, cols)


class _Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.full((1, ), 0.1))


class _Holder(nn.Module):
    pass


def official_mae(tl: bool, in_channels: int = 6, pretrain_frames: int = 4, grid: int = 4,
                 seed: int = 0) -> nn.Module:
    """A tiny module in the official ``PrithviMAE`` layout (encoder + MAE decoder), random
    weights and norms; the stored position embeddings are the pre-training grid's."""
    torch.manual_seed(seed)
    mae, enc, dec = _Holder(), _Holder(), _Holder()
    enc.cls_token = nn.Parameter(torch.randn(1, 1, DIMS))
    table = numpy_pos_embed(DIMS, (pretrain_frames, grid, grid))
    enc.register_buffer('pos_embed', torch.from_numpy(
        np.concatenate([np.zeros((1, DIMS)), table])).float()[None])
    enc.patch_embed = _Holder()
    enc.patch_embed.proj = nn.Conv3d(in_channels, DIMS, (1, PATCH, PATCH), (1, PATCH, PATCH))
    enc.blocks = nn.ModuleList(Block(DIMS, HEADS, 4.0, qkv_bias=True) for _ in range(DEPTH))
    enc.norm = nn.LayerNorm(DIMS)
    dec.decoder_embed = nn.Linear(DIMS, 16)
    dec.mask_token = nn.Parameter(torch.randn(1, 1, 16))
    dec.register_buffer('decoder_pos_embed', torch.randn(1, 1 + pretrain_frames * grid**2, 16))
    dec.decoder_blocks = nn.ModuleList([Block(16, 2, 4.0, qkv_bias=True)])
    dec.decoder_norm = nn.LayerNorm(16)
    dec.decoder_pred = nn.Linear(16, PATCH * PATCH * in_channels)
    if tl:
        enc.temporal_embed_enc, enc.location_embed_enc = _Scale(), _Scale()
        dec.temporal_embed_dec, dec.location_embed_dec = _Scale(), _Scale()
    with torch.no_grad():
        for name, param in list(enc.named_parameters()) + list(dec.named_parameters()):
            if name.endswith('norm1.weight') or name.endswith('norm2.weight') \
                    or name in ('norm.weight', 'decoder_norm.weight'):
                param.normal_(1.0, 0.2)
            elif name.endswith('scale'):
                param.uniform_(0.3, 0.8)
            else:
                param.normal_(0.0, 0.15)
    mae.encoder, mae.decoder = enc, dec
    return mae


def _saved(tmp_path, tl, name='official.pt', **options):
    state = official_mae(tl, **options).state_dict()
    path = str(tmp_path / name)
    torch.save(state, path)
    return state, path


def _loaded(path, **options):
    options.setdefault('arch', dict(TINY))
    model = MODELS.build(dict(type='PrithviV2', img_size=32, out_indices=(0, 1, 2, 3),
                              init_cfg=dict(type='Pretrained', checkpoint=path), **options))
    model.init_weights()
    return model.eval()


# --------------------------------------------------------------------- the embedding
@pytest.mark.parametrize('dims,grid', [(32, (2, 3, 4)), (64, (1, 5, 2)), (1024, (1, 14, 14))])
def test_pos_embed_is_the_numpy_formula(dims, grid):
    table = sincos_pos_embed_3d(dims, grid)
    assert table.dtype == torch.float32 and table.shape == (np.prod(grid), dims)
    np.testing.assert_allclose(table.numpy(), numpy_pos_embed(dims, grid), atol=1e-6)
    with pytest.raises(ValueError, match='divisible by 16'):
        sincos_pos_embed_3d(40, grid)


# ----------------------------------------------------------------------- the forward
@pytest.mark.parametrize('frames,tl,coords', [
    (1, False, False), (1, True, False), (1, True, True), (2, True, True), (2, False, False)])
def test_forward_is_the_official_computation(frames, tl, coords, tmp_path):
    state, path = _saved(tmp_path, tl)
    temporal = [[2020.0, 152.0], [2021.0, 17.0]][:frames] if coords else None
    location = [46.5, -121.25] if coords else None
    model = _loaded(path, arch=dict(TINY), num_frames=frames,
                    coords_encoding=('time', 'location') if tl else (),
                    temporal_coords=temporal, location_coords=location)
    # the loaded trunk is the file's encoder, tensor for tensor
    for key, value in model.state_dict().items():
        assert torch.equal(value, state['encoder.' + key]), key
    torch.manual_seed(1)
    x = torch.randn(2, 6, frames, 32, 32)  # the official layout B×C×T×H×W
    t_in = torch.tensor(temporal).expand(2, -1, -1) if coords else None
    l_in = torch.tensor(location).expand(2, -1) if coords else None
    with torch.no_grad():
        expected, normed = official_features(state, x, t_in, l_in)
        levels = model(x)
        stacked = model(x.transpose(1, 2).reshape(2, frames * 6, 32, 32))  # frames one by one
    assert len(levels) == 4
    for level, again, tokens in zip(levels, stacked, expected):
        assert level.shape == (2, frames * DIMS, 4, 4)
        torch.testing.assert_close(level, to_map(tokens, frames, 4, 4), atol=TOL, rtol=0)
        assert torch.equal(level, again)
    # the official last output is normalised: final_norm=True on the last block
    normed_model = _loaded(path, arch=dict(TINY), num_frames=frames, final_norm=True,
                           coords_encoding=('time', 'location') if tl else (),
                           temporal_coords=temporal, location_coords=location)
    with torch.no_grad():
        last = normed_model(x)[-1]
    torch.testing.assert_close(last, to_map(normed, frames, 4, 4), atol=TOL, rtol=0)
    if coords:  # the metadata changes the features: they are really added
        with torch.no_grad():
            plain, _ = official_features(state, x)
        assert (levels[0] - to_map(plain[0], frames, 4, 4)).abs().max() > 1e-2


def test_the_tolerance_tells_layernorm_eps_apart(tmp_path):
    """PyTorch's default LayerNorm eps (1e-5, TerraTorch's) instead of the official 1e-6
    already misses the parity tolerance on the same file and input."""
    state, path = _saved(tmp_path, False)
    x = torch.randn(2, 6, 1, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, _ = official_features(state, x)
        levels = _loaded(path, norm_eps=1e-5)(x)
    worst = max((level - to_map(tokens, 1, 4, 4)).abs().max().item()
                for level, tokens in zip(levels, expected))
    assert worst > TOL


def test_converted_once_loads_the_same(tmp_path):
    from reobench_mm.models.backbones.convert import convert_checkpoint
    _, path = _saved(tmp_path, True)
    options = dict(type='PrithviV2', arch=dict(TINY), img_size=32, out_indices=(0, 1, 2, 3),
                   coords_encoding=('time', 'location'))
    meta = convert_checkpoint(path, str(tmp_path / 'converted.pth'), options)
    assert meta['missing_allowed'] == []
    direct = _loaded(path, arch=dict(TINY), coords_encoding=('time', 'location'))
    again = _loaded(str(tmp_path / 'converted.pth'), arch=dict(TINY),
                    coords_encoding=('time', 'location'))
    assert direct.state_dict().keys() == again.state_dict().keys()
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in direct.state_dict().items())


def test_other_input_sizes_get_their_own_grids_sincos(tmp_path):
    state, path = _saved(tmp_path, False)
    model = _loaded(path)
    x = torch.randn(1, 6, 1, 48, 40)
    with torch.no_grad():
        expected, _ = official_features(state, x)
        levels = model(x)
    torch.testing.assert_close(levels[2], to_map(expected[2], 1, 6, 5), atol=TOL, rtol=0)


def test_the_dropped_position_embedding_is_the_recomputed_one():
    """The file's ``encoder.pos_embed`` (4 frames) is the sin-cos the model computes for
    that grid, behind a zero class row: dropping it loses nothing."""
    stored = official_mae(False).state_dict()['encoder.pos_embed'][0]
    assert torch.equal(stored[0], torch.zeros(DIMS))
    torch.testing.assert_close(stored[1:], sincos_pos_embed_3d(DIMS, (4, 4, 4)), atol=1e-6,
                               rtol=0)


# -------------------------------------------------------------------- the converter
@pytest.mark.parametrize('tl', [False, True])
def test_converter_drops_exactly_the_decoder_and_the_position_embeddings(tl):
    official = official_mae(tl).state_dict()
    dropped = {'encoder.pos_embed', 'decoder.decoder_embed.weight', 'decoder.decoder_embed.bias',
               'decoder.mask_token', 'decoder.decoder_pos_embed', 'decoder.decoder_norm.weight',
               'decoder.decoder_norm.bias', 'decoder.decoder_pred.weight',
               'decoder.decoder_pred.bias'}
    dropped |= {k for k in official if k.startswith('decoder.decoder_blocks.')}
    if tl:
        dropped |= {'decoder.temporal_embed_dec.scale', 'decoder.location_embed_dec.scale'}
    converted = PrithviV2.convert_official_state_dict(official)
    assert set(converted) == {k[len('encoder.'):] for k in set(official) - dropped}
    assert all(torch.equal(converted[k[len('encoder.'):]], official[k])
               for k in set(official) - dropped)
    model = PrithviV2(arch=dict(TINY), img_size=32, coords_encoding=('time', 'location')
                      if tl else ())
    assert check_state_dict(model, model.adapt_state_dict(converted)) == []
    assert len(DROPPED_OFFICIAL_KEYS) == 9


def test_wrong_files_are_refused_naming_the_keys(tmp_path):
    plain = official_mae(False).state_dict()
    extra = dict(plain, **{'decoder.unknown_head.weight': torch.zeros(2)})
    torch.save(extra, str(tmp_path / 'extra.pt'))
    with pytest.raises(KeyError, match=r"unexpected keys.*decoder\.unknown_head\.weight"):
        _loaded(str(tmp_path / 'extra.pt'))
    missing = {k: v for k, v in plain.items() if k != 'encoder.blocks.1.mlp.fc2.bias'}
    torch.save(missing, str(tmp_path / 'missing.pt'))
    with pytest.raises(KeyError, match=r"missing keys.*blocks\.1\.mlp\.fc2\.bias"):
        _loaded(str(tmp_path / 'missing.pt'))
    _, tl_path = _saved(tmp_path, True, 'tl.pt')
    with pytest.raises(ValueError, match=r"-TL checkpoint.*use a '_tl' arch"):
        _loaded(tl_path)
    _, plain_path = _saved(tmp_path, False, 'plain.pt')
    with pytest.raises(ValueError, match=r"plain \(not -TL\) checkpoint.*without '_tl'"):
        _loaded(plain_path, coords_encoding=('time', 'location'))
    _, bands_path = _saved(tmp_path, False, 'rgb.pt', in_channels=3)
    with pytest.raises(ValueError, match='shape mismatches.*patch_embed.proj.weight'):
        _loaded(bands_path)
    torch.save({'blocks.0.norm1.weight': torch.ones(DIMS)}, str(tmp_path / 'flat.pt'))
    with pytest.raises(ValueError, match="not a Prithvi-EO-2.0 checkpoint"):
        _loaded(str(tmp_path / 'flat.pt'))


def test_a_tl_trunk_without_metadata_skips_the_encodings(tmp_path):
    """The TL weights without coordinates: the official 'no metadata' input (the
    encodings left out, as TerraTorch does; pre-training zeroed them at random)."""
    state, path = _saved(tmp_path, True)
    model = _loaded(path, arch=dict(TINY), coords_encoding=('time', 'location'))
    assert model.temporal_encoding() is None and model.location_encoding() is None
    x = torch.randn(1, 6, 32, 32)
    with torch.no_grad():
        expected, _ = official_features(state, x[:, :, None])
        levels = model(x)
    torch.testing.assert_close(levels[1], to_map(expected[1], 1, 4, 4), atol=TOL, rtol=0)


# ------------------------------------------------------------------- bands and errors
def test_bands_are_selected_by_name():
    assert prithvi_band_indices(SENTINEL2_BANDS) == S2_POSITIONS
    hls = ('SWIR_2', 'RED', 'x', 'BLUE', 'GREEN', 'SWIR_1', 'NIR_NARROW')
    assert prithvi_band_indices(hls) == (3, 4, 1, 6, 5, 0)
    with pytest.raises(ValueError, match=r'NIR_NARROW \(Sentinel-2 B8A\) is missing'):
        prithvi_band_indices(('B02', 'B03', 'B04', 'B08', 'B11', 'B12'))
    with pytest.raises(ValueError, match='BLUE .* is named 2 times'):
        prithvi_band_indices(('B02', 'BLUE', 'B03', 'B04', 'B8A', 'B11', 'B12'))
    torch.manual_seed(0)
    named = PrithviV2(arch=dict(TINY), img_size=32, band_names=SENTINEL2_BANDS,
                      out_indices=(0, 1, 2, 3)).eval()
    plain = PrithviV2(arch=dict(TINY), img_size=32, out_indices=(0, 1, 2, 3)).eval()
    plain.load_state_dict(named.state_dict())
    x = torch.randn(2, 13, 32, 32)
    with torch.no_grad():
        for a, b in zip(named(x), plain(x[:, list(S2_POSITIONS)])):
            assert torch.equal(a, b)
    with pytest.raises(ValueError, match=r'expected B×13×H×W \(1 frame\(s\) of 13 bands\)'):
        named(torch.randn(1, 6, 32, 32))


def test_bad_settings_are_refused():
    def build(**options):
        return PrithviV2(**dict(dict(arch=dict(TINY), img_size=32), **options))

    with pytest.raises(ValueError, match="unknown arch '300M'"):
        build(arch='300M')
    with pytest.raises(ValueError, match='divisible by 16'):
        build(arch=dict(embed_dims=40, depth=4, num_heads=2))
    with pytest.raises(ValueError, match="temporal_coords given but the trunk has no 'time'"):
        build(temporal_coords=[2020, 100])
    with pytest.raises(ValueError, match='location_coords must be 1 finite pair'):
        build(coords_encoding=('location', ), location_coords=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match='temporal_coords must be 2 finite pair'):
        build(coords_encoding=('time', ), num_frames=2, temporal_coords=[2020, 100])
    with pytest.raises(ValueError, match='coords_encoding must be a list drawn from'):
        build(coords_encoding=('date', ))
    with pytest.raises(ValueError, match='in_channels must then be 6'):
        build(band_names=SENTINEL2_BANDS, in_channels=13)
    with pytest.raises(ValueError, match='num_frames must be an int >= 1'):
        build(num_frames=0)
    with torch.device('meta'):  # the release shapes, without allocating them
        tl = PrithviV2(arch='300m_tl', img_size=32)
        huge = PrithviV2(arch='600m', img_size=224)
    assert tl.coords_encoding == ('time', 'location') and tl.patch_size == 16
    assert tl.out_indices == (5, 11, 17, 23) and huge.out_indices == (7, 15, 23, 31)
    assert (huge.embed_dims, huge.patch_size, huge.grid_size) == (1280, 14, (1, 16, 16))


def test_frozen_trunk_gets_no_gradient_and_keeps_its_norms_still():
    model = PrithviV2(arch=dict(TINY), img_size=32, frozen_stages=DEPTH, final_norm=True,
                      coords_encoding=('time', 'location'), temporal_coords=[2020, 3],
                      location_coords=[0.0, 0.0], out_indices=(0, 1, 2, 3))
    model.train()
    assert all(not p.requires_grad for p in model.parameters())
    holders = [m for m in model.modules() if m is not model and list(m.parameters(False))]
    assert holders and all(not m.training for m in holders)  # norms, dropouts: eval mode
    partly = PrithviV2(arch=dict(TINY), img_size=32, frozen_stages=2)
    partly.train()
    trainable = {n for n, p in partly.named_parameters() if p.requires_grad}
    assert 'norm.weight' in trainable and 'blocks.2.attn.qkv.weight' in trainable
    assert not {'cls_token', 'patch_embed.proj.weight', 'blocks.1.norm1.weight'} & trainable


# ---------------------------------------------------------------------- the config
def _config() -> Config:
    return Config.fromfile(CONFIG)


def test_task_base_is_the_potsdam_probes_decoder_and_schedule_on_cloudsen12():
    task, potsdam = Config.fromfile(TASK), Config.fromfile(POTSDAM_TASK)
    for key in ('optim_wrapper', 'param_scheduler', 'model_wrapper_cfg', 'train_cfg',
                'val_cfg', 'test_cfg', 'default_hooks', 'default_scope'):
        assert task[key] == potsdam[key], key
    assert task.model.neck == potsdam.model.neck
    assert dict(task.model.decode_head, num_classes=6) == potsdam.model.decode_head
    assert task.model.decode_head.num_classes == 4 and task.model.auxiliary_head is None
    assert task.train_dataloader.dataset.type == 'CloudSEN12Dataset'
    assert task.model.data_preprocessor.size == (224, 224)
    assert task.model.data_preprocessor.bgr_to_rgb is False


def test_probe_config_builds_whole_on_the_meta_device():
    cfg = _config()
    backbone = cfg.model.backbone
    assert (backbone.type, backbone.arch, backbone.img_size, backbone.num_frames) == (
        'PrithviV2', '300m', 224, 1)
    assert backbone.init_cfg == dict(type='Pretrained',
                                     checkpoint='checkpoints/Prithvi_EO_V2_300M.pt')
    assert backbone.frozen_stages == 24 and backbone.out_indices == (5, 11, 17, 23)
    assert tuple(backbone.band_names) == SENTINEL2_BANDS
    mean, std = cfg.model.data_preprocessor.mean, cfg.model.data_preprocessor.std
    assert len(mean) == len(std) == 13
    assert tuple(mean[i] for i in S2_POSITIONS) == PRITHVI_V2_MEAN
    assert tuple(std[i] for i in S2_POSITIONS) == PRITHVI_V2_STD
    others = [i for i in range(13) if i not in S2_POSITIONS]
    assert {mean[i] for i in others} == {0.0} and {std[i] for i in others} == {1.0}
    model, levels, logits = build_on_meta(cfg, (1, 13, 224, 224))
    assert model.backbone.band_indices == S2_POSITIONS
    assert (model.backbone.depth, model.backbone.embed_dims) == (24, 1024)
    assert [tuple(x.shape) for x in levels] == [(1, 1024, 14, 14)] * 4
    assert list(cfg.model.neck.in_channels) == [1024] * 4
    assert tuple(logits.shape) == (1, 4, 14, 14)


def _tiny_model_cfg(checkpoint=None):
    cfg = _config()
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.update(arch=dict(embed_dims=32, depth=4, num_heads=2),
                              frozen_stages=4, out_indices=(0, 1, 2, 3))
    if checkpoint is None:
        model_cfg.backbone.pop('init_cfg')
    else:
        model_cfg.backbone.init_cfg.checkpoint = checkpoint
    model_cfg.neck.in_channels = [32] * 4
    return cfg, model_cfg


def test_narrowed_probe_trains_its_decoder_only():
    cfg, model_cfg = _tiny_model_cfg()
    model_cfg.data_preprocessor.size = (64, 64)
    init_default_scope(cfg.default_scope)
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
    optim_cfg = copy.deepcopy(cfg.optim_wrapper)
    optim_cfg.optimizer.lr = 0.5
    optim = build_optim_wrapper(model, optim_cfg)
    samples = seg_samples(64, 4)
    data = dict(inputs=[torch.randint(0, 10000, (13, 64, 64), dtype=torch.int16)] * 2,
                data_samples=samples)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.train()
    losses = model.train_step(data, optim)
    assert all(torch.isfinite(v).all() for v in losses.values())
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in after if k.startswith('backbone.'))
    assert not torch.equal(before['decode_head.conv_seg.weight'],
                           after['decode_head.conv_seg.weight'])


@pytest.mark.slow
@pytest.mark.trains('training the tiny Prithvi probe through the Runner is what it checks')
def test_probe_trains_through_the_runner_at_224_px(tmp_path):
    """The probe config, narrowed, its encoder from a tiny official-layout file, trained
    2 iterations (batch 1) on a fake CloudSEN12 (13 int16 bands, 112 px, resized to 224
    by the config's pipeline): the encoder in the checkpoint is the file's, bit for bit;
    the decoder moved."""
    from calibration_fakes import write_cloudsen12
    fake_root = str(tmp_path / 'cloudsen12')
    write_cloudsen12(fake_root)
    torch.manual_seed(0)
    official = official_mae(False, grid=14)
    official.encoder.patch_embed.proj = nn.Conv3d(6, 32, (1, 16, 16), (1, 16, 16))
    state = official.state_dict()
    weights = str(tmp_path / 'Prithvi_tiny.pt')
    torch.save(state, weights)
    cfg, model_cfg = _tiny_model_cfg(weights)
    model_cfg.backbone.arch['patch_size'] = 16
    cfg.model = model_cfg
    saved = train_tiny_probe(cfg, fake_root, str(tmp_path / 'work'), iterations=2,
                             batch_size=1)
    assert_encoder_saved_as(saved, PrithviV2.convert_official_state_dict(state))
    assert not any(k.startswith('backbone.decoder') for k in saved)
    assert_decoder_moved(saved, 9)
