"""TerraMind v1 as an FPN-probe backbone (reobench_mm.models.backbones.terramind:
``TerraMind``).

- Forward parity: a tiny TerraMind (4 blocks of width 32, patch 16) loaded from a file
  with the official key names (the whole encoder-decoder layout: decoder, mask token,
  token and other raw modalities, position tables, LayerNorm bias buffers) gives, block
  by block, what the official ``TerraMindViT.forward`` computes, written out here with
  plain torch functions from the official source: patches cut one by one and flattened
  (row, column, band), bias-free projection, the official ``meshgrid(indexing='ij')``
  position table (bicubically resampled for another input size) + modality embedding,
  concatenation of the modalities, pre-norm blocks with explicit softmax attention and
  SwiGLU, the final norm on the last output only, the mean over modalities.
- Bands by name: Sentinel-2 inputs in ``SENTINEL2_BANDS`` order, reversed RGB.
- The converter keeps every encoder tensor and drops exactly the listed keys; missing,
  unknown, mis-shaped keys and a non-zero LayerNorm bias are refused with their names.
- Band and normalisation tables against the official values; the position table by hand.
- The probe config built whole on the meta device; the tiny variant trains 2 iterations
  through MMEngine's Runner at 224 px.
"""
import math
import os.path as osp

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT
from probe_helpers import (assert_decoder_moved, assert_encoder_saved_as,
                           assert_probe_is_the_task_base, build_on_meta, train_tiny_probe)
from reobench_mm.models.backbones.convert import convert_checkpoint
from reobench_mm.models.backbones.terramind import (TERRAMIND_BANDS, TerraMind,
                                                    terramind_band_indices,
                                                    terramind_input_stats,
                                                    terramind_pos_embed)
from reobench_mm.registry import MODELS
from reobench_mm.transforms.raster_loading import SENTINEL2_BANDS

CONFIG = osp.join(PROJECT_ROOT, 'configs', 'probe',
                  'fpn-probe_terramind-v1-b_frozen_1xb8-12e_potsdam-224x224.py')
TASK_BASE = osp.join(PROJECT_ROOT, 'configs', '_base_', 'tasks', 'fpn-probe_potsdam-224.py')
TINY = dict(embed_dims=32, depth=4, num_heads=2)
HIDDEN = 85  # int(2 * 32 * 4 / 3): the official GatedMlp width
PATCH, IMG = 16, 64
KEYS = {'S2L2A': 'untok_sen2l2a@224', 'RGB': 'untok_sen2rgb@224'}
NUM_CLASSES = 6


# ------------------------------------------------------------- the official layout, written out
def _official_pos_emb(side: int, dims: int) -> torch.Tensor:
    """``build_2d_sincos_posemb(h=side, w=side)`` as the official code computes it."""
    grid_w, grid_h = torch.meshgrid(torch.arange(side), torch.arange(side), indexing='ij')
    omega = 1.0 / 10000.0**(torch.arange(dims // 4, dtype=torch.float) / (dims // 4))
    out_w = grid_w.reshape(-1)[:, None] * omega
    out_h = grid_h.reshape(-1)[:, None] * omega
    return torch.cat([out_w.sin(), out_w.cos(), out_h.sin(), out_h.cos()], dim=1)[None]


def _official_state(seed: int, raw=(('untok_sen2l2a@224', 12), ('untok_sen2rgb@224', 3),
                                    ('untok_sen1grd@224', 2))) -> dict:
    """A TerraMind encoder-decoder state dict with the official key names, random values
    (LayerNorm weights near 1, their bias buffers zero)."""
    g = torch.Generator().manual_seed(seed)
    d = TINY['embed_dims']

    def rnd(*shape, scale=0.2):
        return torch.randn(*shape, generator=g) * scale

    state = {}
    for key, channels in raw:
        state[f'encoder_embeddings.{key}.proj.weight'] = rnd(d, PATCH * PATCH * channels,
                                                             scale=0.05)
        state[f'encoder_embeddings.{key}.mod_emb'] = rnd(1, 1, d)
        state[f'encoder_embeddings.{key}.pos_emb'] = _official_pos_emb(IMG // PATCH, d)
    for key in ('tok_sen2l2a@224', 'tok_lulc@224'):
        state[f'encoder_embeddings.{key}.token_emb.weight'] = rnd(20, d)
        state[f'encoder_embeddings.{key}.mod_emb'] = rnd(1, 1, d)
        state[f'encoder_embeddings.{key}.pos_emb'] = _official_pos_emb(IMG // PATCH, d)
    state['encoder_embeddings.coords.token_emb.weight'] = rnd(20, d)
    for i in range(TINY['depth']):
        p = f'encoder.{i}.'
        for norm in ('norm1', 'norm2'):
            state[p + norm + '.weight'] = 1 + rnd(d, scale=0.1)
            state[p + norm + '.bias'] = torch.zeros(d)
        state[p + 'attn.qkv.weight'] = rnd(3 * d, d)
        state[p + 'attn.proj.weight'] = rnd(d, d)
        state[p + 'mlp.fc1.weight'] = rnd(HIDDEN, d)
        state[p + 'mlp.fc3.weight'] = rnd(HIDDEN, d)
        state[p + 'mlp.fc2.weight'] = rnd(d, HIDDEN)
    state['encoder_norm.weight'] = 1 + rnd(d, scale=0.1)
    state['encoder_norm.bias'] = torch.zeros(d)
    # the decoder side, all dropped on loading
    state['decoder_embeddings.tok_sen2l2a@224.token_emb.weight'] = rnd(20, d)
    state['decoder_embeddings.tok_sen2l2a@224.to_logits.weight'] = rnd(20, d)
    state['decoder_proj_context.weight'] = rnd(d, d)
    state['decoder_proj_context.bias'] = rnd(d)
    state['decoder.0.cross_attn.q.weight'] = rnd(d, d)
    state['decoder.0.norm1.bias'] = torch.zeros(d)
    state['decoder_norm.weight'] = 1 + rnd(d)
    state['mask_token'] = rnd(1, 1, d)
    return state


def _patches(x: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) → (B, N, p·p·C): patch by patch, row-major, each flattened in
    (row, column, band) order (the official einops pattern)."""
    rows, cols = x.shape[2] // PATCH, x.shape[3] // PATCH
    out = []
    for i in range(rows):
        for j in range(cols):
            patch = x[:, :, i * PATCH:(i + 1) * PATCH, j * PATCH:(j + 1) * PATCH]
            out.append(patch.permute(0, 2, 3, 1).reshape(x.shape[0], -1))
    return torch.stack(out, dim=1)


def _layer_norm(x, weight):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean)**2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-6) * weight


def _reference(state: dict, inputs: dict) -> list:
    """The official forward (merge 'mean'): ``inputs`` maps official modality keys to
    (B, C, H, W) tensors, bands in the official order. Returns every block's (B, N, D)."""
    d, heads = TINY['embed_dims'], TINY['num_heads']
    tokens, counts = [], []
    for key, x in inputs.items():
        pre = f'encoder_embeddings.{key}.'
        embedded = _patches(x) @ state[pre + 'proj.weight'].T
        rows, cols = x.shape[2] // PATCH, x.shape[3] // PATCH
        pos = state[pre + 'pos_emb']
        if x.shape[2] != IMG or x.shape[3] != IMG:  # official interpolate_pos_encoding
            side = int(math.sqrt(pos.shape[1]))
            grid = pos.reshape(1, side, side, d).permute(0, 3, 1, 2)
            grid = F.interpolate(grid, size=(rows, cols), mode='bicubic', align_corners=False)
            pos = grid.permute(0, 2, 3, 1).reshape(1, -1, d)
        tokens.append(embedded + pos + state[pre + 'mod_emb'])
        counts.append(embedded.shape[1])
    x = torch.cat(tokens, dim=1)
    b, n, _ = x.shape
    outs = []
    for i in range(TINY['depth']):
        p = f'encoder.{i}.'
        h = _layer_norm(x, state[p + 'norm1.weight'])
        qkv = (h @ state[p + 'attn.qkv.weight'].T).reshape(b, n, 3, heads, d // heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attn = torch.softmax(q @ k.transpose(-2, -1) * (d // heads)**-0.5, dim=-1)
        h = (attn @ v).transpose(1, 2).reshape(b, n, d) @ state[p + 'attn.proj.weight'].T
        x = x + h
        h = _layer_norm(x, state[p + 'norm2.weight'])
        gate = F.silu(h @ state[p + 'mlp.fc1.weight'].T) * (h @ state[p + 'mlp.fc3.weight'].T)
        x = x + gate @ state[p + 'mlp.fc2.weight'].T
        outs.append(x.clone())
    outs[-1] = _layer_norm(x, state['encoder_norm.weight'])
    return [torch.stack(torch.split(o, counts, dim=1), dim=1).mean(dim=1) for o in outs]


def _tiny(**kwargs) -> TerraMind:
    return TerraMind(arch=dict(TINY), img_size=IMG, out_indices=(0, 1, 2, 3), **kwargs)


def _loaded(tmp_path, state, **kwargs) -> TerraMind:
    path = str(tmp_path / 'TerraMind_v1_tiny.pt')
    torch.save(state, path)
    model = _tiny(init_cfg=dict(type='Pretrained', checkpoint=path), **kwargs)
    model.init_weights()
    return model.eval()


def _maps(tokens: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    return tokens.transpose(1, 2).reshape(tokens.shape[0], -1, rows, cols)


# ------------------------------------------------------------------------------- parity
S2_FROM_SENTINEL2 = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12]  # SENTINEL2_BANDS without B10


@pytest.mark.parametrize('case', ['s2l2a_13_bands', 's2l2a_and_rgb_80x48', 'rgb_reversed'])
def test_forward_equals_the_official_encoder_written_out(case, tmp_path):
    state = _official_state(seed=1)
    torch.manual_seed(2)
    if case == 's2l2a_13_bands':
        x = torch.randn(2, 13, IMG, IMG)
        model = _loaded(tmp_path, state, modalities=['S2L2A'], band_names=SENTINEL2_BANDS)
        inputs = {KEYS['S2L2A']: x[:, S2_FROM_SENTINEL2]}
    elif case == 's2l2a_and_rgb_80x48':
        x = torch.randn(2, 15, 80, 48)
        model = _loaded(tmp_path, state, modalities=['S2L2A', 'RGB'])
        inputs = {KEYS['S2L2A']: x[:, :12], KEYS['RGB']: x[:, 12:]}
    else:
        x = torch.randn(2, 3, IMG, IMG)
        model = _loaded(tmp_path, state, modalities=['RGB'],
                        band_names=['blue', 'green', 'red'])
        inputs = {KEYS['RGB']: x.flip(1)}
    with torch.no_grad():
        got = model(x)
        want = _reference(state, inputs)
    rows, cols = x.shape[2] // PATCH, x.shape[3] // PATCH
    assert len(got) == 4
    for level, (a, b) in enumerate(zip(got, want)):
        assert a.shape == (2, TINY['embed_dims'], rows, cols)
        torch.testing.assert_close(a, _maps(b, rows, cols), atol=1e-4, rtol=1e-4,
                                   msg=f'block {level}')
    # the last map is normalised, the others are not (the official encoder's outputs)
    assert abs(got[2].std().item() - got[3].std().item()) > 1e-3


def test_final_norm_choices(tmp_path):
    state = _official_state(seed=3)
    x = torch.randn(1, 12, IMG, IMG)
    with torch.no_grad():
        want = _reference(state, {KEYS['S2L2A']: x})
        every = _loaded(tmp_path, state, final_norm=True)(x)
        never = _loaded(tmp_path, state, final_norm=False)(x)
    rows = IMG // PATCH
    for level in range(3):
        normed = _layer_norm(want[level], state['encoder_norm.weight'])
        torch.testing.assert_close(every[level], _maps(normed, rows, rows), atol=1e-4,
                                   rtol=1e-4)
        torch.testing.assert_close(never[level], _maps(want[level], rows, rows), atol=1e-4,
                                   rtol=1e-4)
    torch.testing.assert_close(every[3], _maps(want[3], rows, rows), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(never[3], every[3], atol=1e-3)


# -------------------------------------------------------------------------- checkpoints
def test_converter_keeps_the_encoder_and_drops_exactly_the_rest():
    state = _official_state(seed=4)
    model = _tiny(modalities=['S2L2A', 'RGB'])
    got = model.prepare_state_dict(state)
    assert set(got) == set(model.state_dict())
    for key, value in got.items():
        assert torch.equal(value, state[key]), key
    dropped = sorted(set(state) - set(got))
    decoder = {'decoder_embeddings.tok_sen2l2a@224.token_emb.weight',
               'decoder_embeddings.tok_sen2l2a@224.to_logits.weight',
               'decoder_proj_context.weight', 'decoder_proj_context.bias',
               'decoder.0.cross_attn.q.weight', 'decoder.0.norm1.bias',
               'decoder_norm.weight', 'mask_token'}
    tables = {f'encoder_embeddings.{k}.pos_emb' for k in
              ('untok_sen2l2a@224', 'untok_sen2rgb@224', 'untok_sen1grd@224',
               'tok_sen2l2a@224', 'tok_lulc@224')}
    biases = {f'encoder.{i}.norm{j}.bias' for i in range(4) for j in (1, 2)}
    others = {'encoder_embeddings.untok_sen1grd@224.proj.weight',
              'encoder_embeddings.untok_sen1grd@224.mod_emb',
              'encoder_embeddings.tok_sen2l2a@224.token_emb.weight',
              'encoder_embeddings.tok_sen2l2a@224.mod_emb',
              'encoder_embeddings.tok_lulc@224.token_emb.weight',
              'encoder_embeddings.tok_lulc@224.mod_emb',
              'encoder_embeddings.coords.token_emb.weight'}
    assert set(dropped) == decoder | tables | biases | {'encoder_norm.bias'} | others
    # the recomputed position table is the official one
    torch.testing.assert_close(model.encoder_embeddings['untok_sen2rgb@224'].pos_emb,
                               state['encoder_embeddings.untok_sen2rgb@224.pos_emb'])


def test_wrong_files_are_refused_with_the_keys_named(tmp_path):
    model = _tiny(modalities=['S2L2A', 'RGB'])
    state = _official_state(seed=5, raw=(('untok_sen2l2a@224', 12), ))
    path = str(tmp_path / 'no_rgb.pt')
    torch.save(state, path)
    with pytest.raises(KeyError, match=r'untok_sen2rgb@224\.proj\.weight'):
        model.load_pretrained(path)
    state = _official_state(seed=5)
    state['register_tokens'] = torch.zeros(1, 4, 32)
    torch.save(state, path)
    with pytest.raises(KeyError, match='register_tokens'):
        model.load_pretrained(path)
    state = _official_state(seed=5)
    state['encoder.1.mlp.fc1.weight'] = torch.zeros(128, 32)  # a plain GELU MLP's width
    torch.save(state, path)
    with pytest.raises(ValueError, match=r'encoder\.1\.mlp\.fc1\.weight'):
        model.load_pretrained(path)
    state = _official_state(seed=5)
    state['encoder.2.norm2.bias'] = torch.ones(32)
    torch.save(state, path)
    with pytest.raises(ValueError, match=r'encoder\.2\.norm2\.bias is not zero'):
        model.load_pretrained(path)
    with pytest.raises(ValueError, match='not a TerraMind checkpoint'):
        model.prepare_state_dict({'blocks.0.attn.qkv.weight': torch.zeros(96, 32)})


def test_converted_file_gives_the_same_features(tmp_path):
    state = _official_state(seed=6)
    official = str(tmp_path / 'TerraMind_v1_tiny.pt')
    torch.save(state, official)
    cfg = dict(type='TerraMind', arch=dict(TINY), img_size=IMG, modalities=['RGB'],
               out_indices=(0, 1, 2, 3))
    meta = convert_checkpoint(official, str(tmp_path / 'converted.pth'), cfg)
    assert meta['missing_allowed'] == []
    direct = _loaded(tmp_path, state, modalities=['RGB'])
    converted = MODELS.build(dict(cfg, init_cfg=dict(type='Pretrained',
                                                     checkpoint=str(tmp_path /
                                                                    'converted.pth'))))
    converted.init_weights()
    x = torch.randn(1, 3, IMG, IMG)
    with torch.no_grad():
        for a, b in zip(direct(x), converted.eval()(x)):
            assert torch.equal(a, b)


# ------------------------------------------------------------------------------- tables
def test_band_names_select_the_official_order():
    assert terramind_band_indices('S2L2A', SENTINEL2_BANDS) == tuple(S2_FROM_SENTINEL2)
    official = list(TERRAMIND_BANDS['S2L2A'])
    assert official[8] == 'NIR_NARROW' and official[7] == 'NIR_BROAD'
    assert terramind_band_indices('S2L2A', official[::-1]) == tuple(range(11, -1, -1))
    assert terramind_band_indices('S2L1C', SENTINEL2_BANDS) == tuple(range(13))
    assert terramind_band_indices('RGB', ['B02', 'B03', 'B04']) == (2, 1, 0)
    assert terramind_band_indices('S1GRD', ['vh', 'vv']) == (1, 0)
    with pytest.raises(ValueError, match="NIR_NARROW is missing.*'B8A'"):
        terramind_band_indices('S2L2A', [b for b in SENTINEL2_BANDS if b != 'B8A'])
    with pytest.raises(ValueError, match='RED is named 2 times'):
        terramind_band_indices('RGB', ['RED', 'B04', 'GREEN', 'BLUE'])


def test_input_stats_are_the_official_v1_values():
    mean, std = terramind_input_stats(['RGB'])
    assert mean == [87.271, 80.931, 66.667] and std == [58.767, 47.663, 42.631]
    mean, std = terramind_input_stats(['S2L2A'], SENTINEL2_BANDS)
    assert len(mean) == 13 and (mean[10], std[10]) == (0.0, 1.0)  # B10: not used
    assert (mean[0], std[0]) == (1390.458, 2106.761)  # B01
    assert (mean[8], std[8]) == (3132.22, 1753.829)  # B8A, NIR_NARROW
    assert (mean[12], std[12]) == (1857.648, 1334.311)  # B12
    mean, std = terramind_input_stats(['S1GRD', 'DEM'])
    assert mean == [-12.599, -20.293, 670.665] and std == [5.195, 5.890, 951.272]


def test_position_table_by_hand():
    table = terramind_pos_embed(8, 2)  # omega = 1, 0.01
    row1_col0 = [math.sin(1), math.sin(0.01), math.cos(1), math.cos(0.01), 0, 0, 1, 1]
    torch.testing.assert_close(table[2], torch.tensor(row1_col0))
    torch.testing.assert_close(table, _official_pos_emb(2, 8)[0])


# ------------------------------------------------------------------------- bad settings
def test_bad_settings_and_inputs_are_refused():
    with pytest.raises(ValueError, match='unknown modality'):
        _tiny(modalities=['S2L2A', 'LULC'])
    with pytest.raises(ValueError, match='named twice'):
        _tiny(modalities=['RGB', 'RGB'])
    with pytest.raises(ValueError, match='dict'):
        _tiny(modalities=['S2L2A', 'RGB'], band_names=SENTINEL2_BANDS)
    with pytest.raises(ValueError, match='not among the modalities'):
        _tiny(modalities=['RGB'], band_names={'S2L2A': SENTINEL2_BANDS})
    with pytest.raises(ValueError, match='img_size'):
        TerraMind(arch=dict(TINY), img_size=70)
    with pytest.raises(ValueError, match='unknown arch'):
        TerraMind(arch='huge')
    model = _tiny(modalities=['S2L2A', 'RGB'], band_names={'S2L2A': SENTINEL2_BANDS})
    assert model.in_channels == 16
    with pytest.raises(ValueError, match=r'B×16×H×W .*S2L2A: 13, RGB: 3'):
        model(torch.zeros(1, 15, IMG, IMG))
    with pytest.raises(ValueError, match='multiples of the patch size'):
        model(torch.zeros(1, 16, 72, IMG))


def test_frozen_encoder_and_gradient_checkpointing():
    frozen = _tiny(frozen_stages=4)
    frozen.train()
    assert not [n for n, p in frozen.named_parameters() if p.requires_grad]
    assert not frozen.encoder_embeddings.training and not frozen.encoder[3].training
    partly = _tiny(frozen_stages=1).train()
    trainable = {n.split('.')[0] + '.' + n.split('.')[1]
                 for n, p in partly.named_parameters() if p.requires_grad}
    assert trainable == {'encoder.1', 'encoder.2', 'encoder.3', 'encoder_norm.weight'}
    torch.manual_seed(0)
    plain, checkpointed = _tiny(), _tiny(with_cp=True)
    checkpointed.load_state_dict(plain.state_dict())
    pixels = torch.randn(2, 12, IMG, IMG)
    for model in (plain.train(), checkpointed.train()):
        sum(level.square().mean() for level in model(pixels)).backward()
    for (name, a), (_, b) in zip(plain.named_parameters(), checkpointed.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-6, rtol=1e-5, msg=name)
    assert plain.layer_id('encoder_embeddings.untok_sen2l2a@224.proj.weight') == 0
    assert plain.layer_id('encoder.2.attn.qkv.weight') == 3
    assert plain.layer_id('encoder_norm.weight') == 5


# ----------------------------------------------------------------------------- the config
def _config() -> Config:
    return Config.fromfile(CONFIG)


def test_probe_config_names_terramind_its_inputs_and_the_task_decoder():
    cfg, task = _config(), Config.fromfile(TASK_BASE)
    backbone = cfg.model.backbone
    assert backbone.type == 'TerraMind' and backbone.arch == 'base'
    assert backbone.img_size == 224 and tuple(backbone.modalities) == ('RGB', )
    assert tuple(backbone.band_names) == ('RED', 'GREEN', 'BLUE')
    assert (backbone.frozen_stages, tuple(backbone.out_indices)) == (12, (2, 5, 8, 11))
    assert 'final_norm' not in backbone  # the official: the last block's map normalised
    assert backbone.init_cfg == dict(type='Pretrained',
                                     checkpoint='checkpoints/TerraMind_v1_base.pt')
    assert cfg.patch_size == 16 and cfg.model.neck.in_channels == [768] * 4
    preprocessor = cfg.model.data_preprocessor
    assert [preprocessor.mean, preprocessor.std] == list(terramind_input_stats(['RGB']))
    assert preprocessor.bgr_to_rgb is True and preprocessor.size == (224, 224)
    assert_probe_is_the_task_base(cfg, task)


def test_probe_config_builds_whole_on_the_meta_device():
    cfg = _config()
    model, levels, logits = build_on_meta(cfg, (1, 3, 224, 224))
    backbone = model.backbone
    assert isinstance(backbone, TerraMind) and len(backbone.encoder) == 12
    assert backbone.out_indices == (2, 5, 8, 11) and backbone.frozen_stages == 12
    assert list(backbone.encoder_embeddings) == ['untok_sen2rgb@224']
    assert backbone.encoder[0].mlp.fc1.out_features == 2048  # int(2 * 3072 / 3)
    assert [tuple(x.shape) for x in levels] == [(1, 768, 14, 14)] * 4
    assert logits.shape == (1, NUM_CLASSES, 14, 14)
    # by hand: RGB patch projection 768·768 + modality embedding 768; per block two
    # norms 2·768, qkv 768·2304, proj 768·768, SwiGLU 3·768·2048; the final norm 768
    block = 2 * 768 + 768 * 2304 + 768 * 768 + 3 * 768 * 2048
    assert sum(p.numel() for p in backbone.parameters()) == \
        768 * 768 + 768 + 12 * block + 768 == 85_544_448


@pytest.mark.trains('training the tiny TerraMind probe through the Runner is what it checks')
@pytest.mark.slow
def test_tiny_terramind_probe_trains_through_the_runner_at_224_px(demo_data, tmp_path):
    """The probe config with the tiny TerraMind, its encoder from an official-layout
    file, trained 2 iterations (batch 3 of the 6 demo images, the config's 224 px
    pipeline): the saved encoder is the file's, bit for bit, and the decoder moved."""
    state = _official_state(seed=7)
    weights = str(tmp_path / 'TerraMind_v1_tiny.pt')
    torch.save(state, weights)
    saved = train_tiny_probe(
        _config(), osp.join(demo_data, 'potsdam'), str(tmp_path / 'work'), iterations=2,
        checkpoint=weights, neck_channels=[32] * 4,
        backbone=dict(arch=dict(TINY), frozen_stages=4, out_indices=(0, 1, 2, 3)))
    encoder = {k: v for k, v in state.items() if k.startswith(
        ('encoder_embeddings.untok_sen2rgb@224.proj', 'encoder_embeddings.untok_sen2rgb@224.mod',
         'encoder.')) and not k.endswith('.bias')}
    encoder['encoder_norm.weight'] = state['encoder_norm.weight']
    assert_encoder_saved_as(saved, encoder, exact=True)
    assert_decoder_moved(saved)
