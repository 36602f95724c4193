"""Clay v1.5 as an FPN-probe backbone (reobench_mm.models.backbones.clay: ``ClayV15``).

- Forward parity: a tiny Clay (4 blocks of width 32, patch 8) loaded from a Lightning-style
  file with the official key names gives, block by block and after the final norm, what
  the official encoder computes, written out here with plain torch functions from the
  official source (1-D wavelength code, residual FC block, the weight generator's post-norm
  transformer layer, patch projection as an explicit sum, GSD-scaled 2-D sin-cos code,
  time and location values, identity masking, class token, pre-norm blocks, final norm).
- The converter maps every encoder tensor, drops exactly the decoder, teacher and
  projection keys; missing, unknown and mis-shaped keys are refused with their names.
- The band table (Clay's metadata for Sentinel-2 and NAIP, ESA's centre wavelengths for
  B01, B09, B10), the time and location values and the position code against hand values.
- The probe config: its encoder, inputs, hooks and normalisation, built whole on the meta
  device; the tiny variant trains 2 iterations through MMEngine's Runner at 224 px.
"""
import math
import os.path as osp

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from torch import nn

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT
from probe_helpers import (assert_decoder_moved, assert_encoder_saved_as,
                           assert_probe_is_the_task_base, build_on_meta, train_tiny_probe)
from reobench_mm.models.backbones.clay import (CLAY_BAND_WAVELENGTHS, ClayV15,
                                               clay_position_code, convert_clay_state_dict)
from reobench_mm.models.backbones.convert import convert_checkpoint
from reobench_mm.registry import MODELS
from reobench_mm.transforms.raster_loading import SENTINEL2_BANDS

CONFIG = osp.join(PROJECT_ROOT, 'configs', 'probe',
                  'fpn-probe_clay-v1.5-l8_frozen_1xb8-12e_potsdam-224x224.py')
TASK_BASE = osp.join(PROJECT_ROOT, 'configs', '_base_', 'tasks', 'fpn-probe_potsdam-224.py')
#: tiny shape: inner attention width 2 x 24 = 48, not the model width 32 (Clay's dim_head)
TINY = dict(embed_dims=32, depth=4, num_heads=2, head_dims=24)
NUM_CLASSES = 6


# ------------------------------------------------------------- the official layout, written out
class _Attention(nn.Module):  # official backbone.Attention: norm, to_qkv, to_out
    def __init__(self, dim, heads, dim_head):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, 3 * heads * dim_head, bias=False)
        self.to_out = nn.Linear(heads * dim_head, dim, bias=False)


class _FeedForward(nn.Module):  # official backbone.FeedForward: net = LN, Linear, GELU, Linear
    def __init__(self, dim, hidden):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden), nn.GELU(),
                                 nn.Linear(hidden, dim))


class _Transformer(nn.Module):
    def __init__(self, dim, depth, heads, dim_head, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.layers = nn.ModuleList(nn.ModuleList([_Attention(dim, heads, dim_head),
                                                   _FeedForward(dim, hidden)])
                                    for _ in range(depth))


class _WavesTransformer(nn.Module):
    def __init__(self, out_dim, embed_dim, decoder=False):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, activation='gelu', dropout=0,
                                           norm_first=False, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.fc_weight = nn.Linear(128, out_dim)
        self.fc_bias = None if decoder else nn.Linear(128, embed_dim)
        self.weight_tokens = nn.Parameter(torch.zeros(128, 128))
        self.bias_token = nn.Parameter(torch.zeros(1, 128))


class _FCBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(128, 128), nn.Linear(128, 128)


class _DynamicEmbedding(nn.Module):
    def __init__(self, patch, dim, decoder=False):
        super().__init__()
        self.weight_generator = _WavesTransformer(patch * patch * dim, dim, decoder)
        self.fclayer = _FCBlock()


class _Encoder(nn.Module):
    def __init__(self, dim, depth, heads, dim_head, patch=8):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.patch_embedding = _DynamicEmbedding(patch, dim)
        self.transformer = _Transformer(dim, depth, heads, dim_head, 4 * dim)


class _Decoder(nn.Module):  # enough of the official MAE decoder for its key names
    def __init__(self, dim, patch=8):
        super().__init__()
        self.enc_to_dec = nn.Linear(dim, 16)
        self.mask_patch = nn.Parameter(torch.zeros(16))
        self.transformer = _Transformer(16, 1, 2, 8, 32)
        self.embed_to_pixels = _DynamicEmbedding(patch, 16, decoder=True)


class _ClayMAE(nn.Module):  # official model.ClayMAE: encoder, decoder, teacher, proj
    def __init__(self, dim=32, depth=4, heads=2, dim_head=24):
        super().__init__()
        self.teacher = nn.Sequential(nn.Conv2d(3, 8, 4), nn.LayerNorm(8))
        self.proj = nn.Linear(dim, 8)
        self.encoder = _Encoder(dim, depth, heads, dim_head)
        self.decoder = _Decoder(dim)


def _official_state(seed=0, **shape):
    """Random tensors under the official Lightning file's keys (``model.`` prefix)."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for key, value in _ClayMAE(**shape).state_dict().items():
        noise = torch.randn(value.shape, generator=generator)
        if value.ndim >= 2 and 'token' not in key:  # weights: unit-variance outputs
            noise = noise / math.sqrt(value[0].numel())
        elif value.ndim == 1 and key.endswith('weight'):  # LayerNorm scales
            noise = 1.0 + 0.2 * noise
        else:  # biases, tokens
            noise = 0.2 * noise
        state['model.' + key] = noise
    return state


def _save_lightning(state, path):
    torch.save({'state_dict': state, 'epoch': 3, 'global_step': 120,
                'pytorch-lightning_version': '2.4.0',
                'hyper_parameters': {'model_size': 'large', 'patch_size': 8}}, path)
    return str(path)


# ------------------------------------------------- the official forward, written out
def _layer_norm(x, sd, prefix, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], sd[prefix + 'weight'], sd[prefix + 'bias'], eps)


def _softmax_attention(q, k, v):
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1) @ v


def _wave_generator(sd, waves):
    """``DynamicEmbedding`` of the encoder: wavelengths → conv weights ``(C, D·P·P)``, bias."""
    p = 'patch_embedding.'
    omega = 1.0 / 10000 ** (torch.arange(64) / 63)  # posemb_sincos_1d, dim 128
    angles = waves[:, None] * omega[None]
    code = torch.cat([angles.sin(), angles.cos()], dim=1)
    hidden = F.gelu(F.linear(code, sd[p + 'fclayer.l1.weight'], sd[p + 'fclayer.l1.bias']))
    code = code + F.gelu(F.linear(hidden, sd[p + 'fclayer.l2.weight'],
                                  sd[p + 'fclayer.l2.bias']))
    g = p + 'weight_generator.'
    x = torch.cat([sd[g + 'weight_tokens'], code, sd[g + 'bias_token']], dim=0)
    layer = g + 'encoder.layers.0.'
    qkv = F.linear(x, sd[layer + 'self_attn.in_proj_weight'], sd[layer + 'self_attn.in_proj_bias'])
    q, k, v = (t.reshape(x.shape[0], 4, 32).transpose(0, 1) for t in qkv.chunk(3, dim=-1))
    attended = _softmax_attention(q, k, v).transpose(0, 1).reshape(x.shape[0], 128)
    attended = F.linear(attended, sd[layer + 'self_attn.out_proj.weight'],
                        sd[layer + 'self_attn.out_proj.bias'])
    y = _layer_norm(x + attended, sd, layer + 'norm1.')  # post-norm
    ff = F.linear(F.gelu(F.linear(y, sd[layer + 'linear1.weight'], sd[layer + 'linear1.bias'])),
                  sd[layer + 'linear2.weight'], sd[layer + 'linear2.bias'])
    out = _layer_norm(y + ff, sd, layer + 'norm2.')
    bands = slice(128, x.shape[0] - 1)
    weight = F.linear(out[bands] + x[bands], sd[g + 'fc_weight.weight'], sd[g + 'fc_weight.bias'])
    bias = F.linear(out[-1], sd[g + 'fc_bias.weight'], sd[g + 'fc_bias.bias'])
    return weight, bias


def _official_encoder(state, pixels, waves, gsd, time, latlon, heads, patch=8):
    """``(tokens after each block, the encoder's output)``, class token first, as
    ``claymodel.model.Encoder`` computes them with mask_ratio 0 and shuffle off."""
    sd = {k[len('model.encoder.'):]: v for k, v in state.items()
          if k.startswith('model.encoder.')}
    batch, bands, height, width = pixels.shape
    dim = sd['cls_token'].shape[-1]
    weight, bias = _wave_generator(sd, waves)
    # patch projection: "cin (cout k1 k2)" weights times 0.02, as an explicit sum
    kernel = weight.reshape(bands, dim, patch, patch) * 0.02
    rows, cols = height // patch, width // patch
    cells = pixels.reshape(batch, bands, rows, patch, cols, patch)
    tokens = torch.einsum('bcikjl,cdkl->bijd', cells, kernel) + bias
    tokens = tokens.reshape(batch, rows * cols, dim)
    # posemb_sincos_2d_with_gsd on dim - 8 channels, then time and latlon (4 + 4)
    quarter = (dim - 8) // 4
    omega = torch.arange(quarter) / (quarter - 1)
    omega = 1.0 / (10000 ** (2 * omega / (dim - 8))) * gsd
    y, x = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing='ij')
    y, x = y.flatten()[:, None] * omega[None], x.flatten()[:, None] * omega[None]
    position = torch.cat([x.sin(), x.cos(), y.sin(), y.cos()], dim=1)
    metadata = torch.hstack([time, latlon])  # (B, 8)
    tokens = tokens + torch.cat([position[None].expand(batch, -1, -1),
                                 metadata[:, None].expand(-1, rows * cols, -1)], dim=-1)
    # mask_out with shuffle off and mask ratio 0 keeps every patch, in order
    order = torch.argsort(torch.arange(batch * rows * cols).reshape(batch, -1), dim=-1)
    tokens = tokens[torch.arange(batch)[:, None], order]
    x = torch.cat([sd['cls_token'].expand(batch, -1, -1), tokens], dim=1)
    per_block = []
    for i in range(len({k.split('.')[2] for k in sd if k.startswith('transformer.layers.')})):
        a, f = f'transformer.layers.{i}.0.', f'transformer.layers.{i}.1.net.'
        qkv = F.linear(_layer_norm(x, sd, a + 'norm.'), sd[a + 'to_qkv.weight'])
        q, k, v = (t.reshape(batch, -1, heads, t.shape[-1] // heads).transpose(1, 2)
                   for t in qkv.chunk(3, dim=-1))
        attended = _softmax_attention(q, k, v).transpose(1, 2).reshape(batch, x.shape[1], -1)
        x = x + F.linear(attended, sd[a + 'to_out.weight'])
        hidden = F.gelu(F.linear(_layer_norm(x, sd, f + '0.'), sd[f + '1.weight'],
                                 sd[f + '1.bias']))
        x = x + F.linear(hidden, sd[f + '3.weight'], sd[f + '3.bias'])
        per_block.append(x)
    return per_block, _layer_norm(x, sd, 'transformer.norm.')


def _as_map(tokens, rows, cols):
    return tokens[:, 1:].transpose(1, 2).reshape(tokens.shape[0], -1, rows, cols)


def _tiny(**options):
    options.setdefault('img_size', None)
    options.setdefault('out_indices', (0, 1, 2, 3))
    return MODELS.build(dict(type='ClayV15', arch=dict(TINY), **options))


# ------------------------------------------------------------------------------ parity
CASES = {
    'rgb-potsdam': dict(size=(32, 32), options=dict(band_names=('red', 'green', 'blue'),
                                                    gsd=0.05),
                        time=None, latlon=None),
    's2-with-time-and-place': dict(size=(32, 32),
                                   options=dict(band_names=('B02', 'B04', 'B8A', 'B11'),
                                                gsd=10.0, time=(26, 6), latlon=(30.0, -90.0)),
                                   time=(26, 6), latlon=(30.0, -90.0)),
    'wavelengths-rectangular': dict(size=(24, 40), options=dict(wavelengths=(0.45, 3.5),
                                                                gsd=2.0),
                                    time=None, latlon=None),
}


def _hand_metadata(time, latlon, batch):
    """The official notebooks' normalisation, by hand: week·2π/52, hour·2π/24, degrees."""
    values = [0.0] * 8
    if time is not None:
        week, hour = time[0] * 2 * math.pi / 52, time[1] * 2 * math.pi / 24
        values[:4] = [math.sin(week), math.cos(week), math.sin(hour), math.cos(hour)]
    if latlon is not None:
        lat, lon = math.radians(latlon[0]), math.radians(latlon[1])
        values[4:] = [math.sin(lat), math.cos(lat), math.sin(lon), math.cos(lon)]
    meta = torch.tensor(values).expand(batch, -1)
    return meta[:, :4], meta[:, 4:]


@pytest.mark.parametrize('case', sorted(CASES))
def test_forward_equals_the_official_encoder_written_out(case, tmp_path):
    spec = CASES[case]
    state = _official_state(seed=1)
    path = _save_lightning(state, tmp_path / 'clay-v1.5.ckpt')
    model = _tiny(init_cfg=dict(type='Pretrained', checkpoint=path), **spec['options'])
    model.init_weights()
    model.eval()
    normed = _tiny(out_indices=(3, ), final_norm=True, **spec['options']).eval()
    normed.load_state_dict(model.state_dict())
    torch.manual_seed(0)
    pixels = torch.randn(2, model.in_channels, *spec['size'])
    time, latlon = _hand_metadata(spec['time'], spec['latlon'], 2)
    waves = model.wavelengths.clone()
    with torch.no_grad():
        levels, (last, ) = model(pixels), normed(pixels)
        per_block, output = _official_encoder(state, pixels, waves, model.gsd, time, latlon,
                                              heads=2)
    rows, cols = spec['size'][0] // 8, spec['size'][1] // 8
    assert len(levels) == 4
    for level, tokens in zip(levels, per_block):
        assert level.shape == (2, 32, rows, cols)
        torch.testing.assert_close(level, _as_map(tokens, rows, cols), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(last, _as_map(output, rows, cols), atol=1e-4, rtol=1e-4)
    assert output.abs().mean() > 0.1 and per_block[-1].std() > 0.1  # non-trivial numbers


def test_metadata_and_wavelengths_change_the_features():
    """The encodings are large enough in the tiny model to matter (so the parity test sees
    them): another GSD, time, location or wavelength gives other maps."""
    torch.manual_seed(0)
    base = dict(band_names=('red', 'green', 'blue'), gsd=1.0)
    model = _tiny(**base).eval()
    pixels = torch.randn(1, 3, 32, 32)
    variants = [dict(base, gsd=3.0), dict(base, time=(10, 12)), dict(base, latlon=(45, 7)),
                dict(band_names=('red', 'green', 'nir'), gsd=1.0)]
    with torch.no_grad():
        reference = model(pixels)[0]
        for options in variants:
            other = _tiny(**options).eval()
            other.load_state_dict(model.state_dict())
            assert (other(pixels)[0] - reference).abs().max() > 1e-2, options


# --------------------------------------------------------------------------- the converter
def test_converter_maps_every_encoder_tensor_and_drops_exactly_the_rest():
    state = _official_state()
    converted = convert_clay_state_dict(state)
    model = _tiny()
    assert set(converted) == set(model.state_dict())
    kept = {k for k in state if k.startswith('model.encoder.')}
    dropped = set(state) - kept
    assert dropped and all(k.startswith(('model.decoder.', 'model.teacher.', 'model.proj.'))
                           for k in dropped)
    assert sorted(id(v) for v in converted.values()) == sorted(id(state[k]) for k in kept)
    assert converted['blocks.2.attn.qkv.weight'] is \
        state['model.encoder.transformer.layers.2.0.to_qkv.weight']
    assert converted['blocks.2.mlp.fc2.bias'] is \
        state['model.encoder.transformer.layers.2.1.net.3.bias']
    assert converted['norm.weight'] is state['model.encoder.transformer.norm.weight']
    # the encoder's own state dict (as the official embedder loads it) converts the same
    bare = {k[len('model.encoder.'):]: v for k, v in state.items() if k in kept}
    assert convert_clay_state_dict(bare).keys() == converted.keys()


def _load(model, state, path):
    return model.load_pretrained(_save_lightning(state, path))


def test_wrong_files_are_refused_with_the_keys_named(tmp_path):
    state = _official_state()
    missing = dict(state)
    del missing['model.encoder.transformer.layers.1.0.to_qkv.weight']
    with pytest.raises(KeyError, match=r'missing keys.*blocks\.1\.attn\.qkv\.weight'):
        _load(_tiny(), missing, tmp_path / 'a.ckpt')
    extra = dict(state)
    extra['model.encoder.transformer.layers.0.0.to_v.weight'] = torch.zeros(4, 4)
    extra['model.head.weight'] = torch.zeros(3)
    with pytest.raises(KeyError, match=r"unexpected keys.*'transformer\.layers\.0\.0\.to_v"
                                       r"\.weight', 'head\.weight'"):
        _load(_tiny(), extra, tmp_path / 'b.ckpt')
    wider = _official_state(dim=48, dim_head=24)
    with pytest.raises(ValueError, match=r'shape mismatches.*cls_token'):
        _load(_tiny(), wider, tmp_path / 'c.ckpt')


def test_converted_file_gives_the_same_features(tmp_path):
    state = _official_state(seed=3)
    source = _save_lightning(state, tmp_path / 'clay-v1.5.ckpt')
    cfg = dict(type='ClayV15', arch=dict(TINY), img_size=32, out_indices=(0, 1, 2, 3))
    meta = convert_checkpoint(source, str(tmp_path / 'converted.pth'), cfg)
    assert meta['missing_allowed'] == []
    direct = MODELS.build(dict(cfg, init_cfg=dict(type='Pretrained', checkpoint=source)))
    again = MODELS.build(dict(cfg, init_cfg=dict(type='Pretrained',
                                                 checkpoint=str(tmp_path / 'converted.pth'))))
    direct.init_weights(), again.init_weights()
    pixels = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert all(torch.equal(a, b) for a, b in zip(direct.eval()(pixels),
                                                     again.eval()(pixels)))


# ------------------------------------------------------------------- inputs and encodings
def test_band_table_is_clays_metadata_and_esas_handbook():
    # configs/metadata.yaml of the official repository: naip, sentinel-2-l2a
    naip = dict(red=0.65, green=0.56, blue=0.48, nir=0.842)
    s2 = dict(B02=0.493, B03=0.56, B04=0.665, B05=0.704, B06=0.74, B07=0.783, B08=0.842,
              B8A=0.865, B11=1.61, B12=2.19)
    esa = dict(B01=0.443, B09=0.945, B10=1.375)  # Sentinel-2A centres, not in Clay's file
    assert CLAY_BAND_WAVELENGTHS == {**naip, **s2, **esa}
    assert set(SENTINEL2_BANDS) <= set(CLAY_BAND_WAVELENGTHS)
    model = _tiny(band_names=('B12', 'nir', 'B03'))
    assert model.wavelengths.tolist() == pytest.approx([2.19, 0.842, 0.56])
    assert model.in_channels == 3
    assert _tiny().wavelengths.tolist() == pytest.approx([0.65, 0.56, 0.48])  # default RGB


def test_time_and_location_values_by_hand():
    model = _tiny(time=(26, 6), latlon=(30, -90))
    # week 26 -> pi, hour 6 -> pi/2; 30 deg, -90 deg
    expected = [0.0, -1.0, 1.0, 0.0, 0.5, math.sqrt(3) / 2, -1.0, 0.0]
    np.testing.assert_allclose(model.metadata_code.numpy(), expected, atol=1e-6)
    assert model.metadata_code.abs().sum() > 0
    assert torch.equal(_tiny().metadata_code, torch.zeros(8))


def test_position_code_by_hand():
    code = clay_position_code(4, 6, 24, gsd=2.0)  # 6 frequencies per quarter
    assert code.shape == (24, 24)
    omega5 = 1.0 / 10000 ** (2 * 1.0 / 24) * 2.0  # k = 5 = quarter - 1: step 1
    omega2 = 1.0 / 10000 ** (2 * (2 / 5) / 24) * 2.0
    row, col = 3, 4
    token = code[row * 6 + col]
    assert token[5].item() == pytest.approx(math.sin(col * omega5), abs=1e-6)
    assert token[6 + 5].item() == pytest.approx(math.cos(col * omega5), abs=1e-6)
    assert token[12 + 2].item() == pytest.approx(math.sin(row * omega2), abs=1e-6)
    assert token[18 + 2].item() == pytest.approx(math.cos(row * omega2), abs=1e-6)


def test_bad_settings_and_inputs_are_refused():
    with pytest.raises(ValueError, match="unknown: \\['B8'\\]"):
        _tiny(band_names=('B02', 'B8'))
    with pytest.raises(ValueError, match='not both'):
        _tiny(band_names=('red', ), wavelengths=(0.6, ))
    with pytest.raises(ValueError, match='µm'):
        _tiny(wavelengths=(650.0, ))
    with pytest.raises(ValueError, match='gsd must be a positive'):
        _tiny(gsd=0)
    with pytest.raises(ValueError, match='ISO week, hour'):
        _tiny(time=(60, 1))
    with pytest.raises(ValueError, match='latlon'):
        _tiny(latlon=(100, 0))
    with pytest.raises(ValueError, match='multiples of the patch size 8'):
        _tiny(img_size=30)
    with pytest.raises(ValueError, match='unknown arch'):
        MODELS.build(dict(type='ClayV15', arch='b'))
    with pytest.raises(ValueError, match="unknown \\['depths'\\]"):
        MODELS.build(dict(type='ClayV15', arch=dict(TINY, depths=3)))
    model = _tiny(img_size=32)
    with pytest.raises(ValueError, match='B×3×H×W'):
        model(torch.zeros(1, 4, 32, 32))
    with pytest.raises(ValueError, match='img_size'):
        model(torch.zeros(1, 3, 64, 64))
    with pytest.raises(ValueError, match='multiples of the patch size'):
        _tiny()(torch.zeros(1, 3, 36, 32))


def test_frozen_encoder_and_gradient_checkpointing():
    frozen = _tiny(frozen_stages=4)
    frozen.train()
    trainable = [n for n, p in frozen.named_parameters() if p.requires_grad]
    assert trainable == ['norm.weight', 'norm.bias']  # unused without final_norm
    assert not frozen.patch_embedding.training and not frozen.blocks[3].training
    torch.manual_seed(0)
    plain, checkpointed = _tiny(), _tiny(with_cp=True)
    checkpointed.load_state_dict(plain.state_dict())
    pixels = torch.randn(2, 3, 32, 32)
    for model in (plain.train(), checkpointed.train()):
        sum(level.square().mean() for level in model(pixels)).backward()
    for (name, a), (_, b) in zip(plain.named_parameters(), checkpointed.named_parameters()):
        if a.grad is not None:
            torch.testing.assert_close(a.grad, b.grad, atol=1e-6, rtol=1e-5, msg=name)
    assert plain.patch_embedding.weight_generator.fc_weight.weight.grad.abs().sum() > 0


# ----------------------------------------------------------------------------- the config
def _config() -> Config:
    return Config.fromfile(CONFIG)


def test_probe_config_names_clay_its_inputs_and_the_task_decoder():
    cfg, task = _config(), Config.fromfile(TASK_BASE)
    backbone = cfg.model.backbone
    assert backbone.type == 'ClayV15' and backbone.arch == 'l' and backbone.img_size == 224
    assert tuple(backbone.band_names) == ('red', 'green', 'blue')
    assert backbone.gsd == pytest.approx(0.05 * 512 / 224)  # an input pixel's ground
    assert 'time' not in backbone and 'latlon' not in backbone  # zeros: unknown
    assert (backbone.frozen_stages, tuple(backbone.out_indices)) == (24, (5, 11, 17, 23))
    assert not backbone.get('final_norm', False)
    assert backbone.init_cfg == dict(type='Pretrained', checkpoint='checkpoints/clay-v1.5.ckpt')
    assert cfg.patch_size == 8 and cfg.model.neck.in_channels == [1024] * 4
    preprocessor = cfg.model.data_preprocessor
    assert preprocessor.mean == [110.16, 115.41, 98.15]  # Clay's NAIP red, green, blue
    assert preprocessor.std == [47.23, 39.82, 35.43]
    assert preprocessor.bgr_to_rgb is True and preprocessor.size == (224, 224)
    assert_probe_is_the_task_base(cfg, task)


def test_probe_config_builds_whole_on_the_meta_device():
    cfg = _config()
    model, levels, logits = build_on_meta(cfg, (1, 3, 224, 224))
    backbone = model.backbone
    assert isinstance(backbone, ClayV15) and len(backbone.blocks) == 24
    assert backbone.out_indices == (5, 11, 17, 23) and backbone.frozen_stages == 24
    assert [tuple(x.shape) for x in levels] == [(1, 1024, 28, 28)] * 4  # all at stride 8
    assert logits.shape == (1, NUM_CLASSES, 28, 28)
    assert sum(p.numel() for p in backbone.parameters()) == 311_442_944


@pytest.mark.trains('training the tiny Clay probe through the Runner is what it checks')
@pytest.mark.slow
def test_tiny_clay_probe_trains_through_the_runner_at_224_px(demo_data, tmp_path):
    """The probe config with the tiny Clay, its encoder from an official-layout file,
    trained 2 iterations (batch 3 of the 6 demo images, the config's 224 px pipeline):
    the saved encoder is the file's, bit for bit, and the decoder moved."""
    state = _official_state(seed=5)
    weights = _save_lightning(state, tmp_path / 'clay-v1.5.ckpt')
    saved = train_tiny_probe(
        _config(), osp.join(demo_data, 'potsdam'), str(tmp_path / 'work'), iterations=2,
        checkpoint=weights, neck_channels=[32] * 4,
        backbone=dict(arch=dict(TINY), frozen_stages=4, out_indices=(0, 1, 2, 3)))
    assert_encoder_saved_as(saved, convert_clay_state_dict(state), exact=True)
    assert_decoder_moved(saved)
