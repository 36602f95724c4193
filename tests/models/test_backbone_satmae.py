"""SatMAE, SatMAE++ and Scale-MAE backbones: official checkpoint layouts, equivalence
with timm's ViT carrying the same weights, GSD-aware position embedding, shapes,
training behaviour."""
import argparse
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from timm.models.vision_transformer import VisionTransformer
from torch import nn

import reobench_mm  # noqa: F401  (registers the package's modules)
from reobench_mm.models.backbones.base import check_state_dict, load_checkpoint_file
from reobench_mm.models.backbones.satmae import SatMAE, SatMAEPlusPlus
from reobench_mm.models.backbones.scale_mae import ScaleMAE, gsd_sincos_pos_embed
from reobench_mm.registry import MODELS

TINY = dict(embed_dims=64, depth=4, num_heads=4)
ATOL = 1e-5


# ----------------------------------------------------------------------------- helpers
def mae_sincos_pos_embed(dim: int, side: int, ratio: float = 1.0) -> np.ndarray:
    """2-D sin-cos embedding of a ``side×side`` grid with a zero class row, written from
    the MAE/Scale-MAE description: patch (row i, column j) at (x, y) = (j·r, i·r);
    channels [sin(xω), cos(xω), sin(yω), cos(yω)], ω_k = 10000^(-k/(dim/4)).
    Element by element in float64 (independent of the package's vectorised code)."""
    quarter = dim // 4
    out = np.zeros((1 + side * side, dim), dtype=np.float64)
    omegas = [1.0 / 10000**(k / quarter) for k in range(quarter)]
    for i in range(side):
        for j in range(side):
            row = 1 + i * side + j
            for k, omega in enumerate(omegas):
                out[row, k] = np.sin(j * ratio * omega)
                out[row, quarter + k] = np.cos(j * ratio * omega)
                out[row, 2 * quarter + k] = np.sin(i * ratio * omega)
                out[row, 3 * quarter + k] = np.cos(i * ratio * omega)
    return out


def timm_reference(embed_dims: int, depth: int, num_heads: int, img_size: int = 224,
                   seed: int = 0, pos_ratio: float = 1.0) -> VisionTransformer:
    """timm ViT (MAE settings) with random weights, random norms and the fixed sin-cos
    position embedding of the official encoders (built on the meta device and filled
    once, which keeps the ViT-L reference cheap)."""
    with torch.device('meta'):
        model = VisionTransformer(img_size=img_size, patch_size=16, embed_dim=embed_dims,
                                  depth=depth, num_heads=num_heads, mlp_ratio=4.0,
                                  qkv_bias=True, num_classes=0, global_pool='',
                                  class_token=True, norm_layer=partial(nn.LayerNorm, eps=1e-6),
                                  weight_init='skip')
    model.to_empty(device='cpu')
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(('norm1.weight', 'norm2.weight')) or name == 'norm.weight':
                param.normal_(1.0, 0.2, generator=gen)
            else:
                param.normal_(0.0, 0.05, generator=gen)
        side = img_size // 16
        model.pos_embed.copy_(torch.from_numpy(
            mae_sincos_pos_embed(embed_dims, side, pos_ratio)).float()[None])
    assert not list(model.buffers())
    return model.eval()


def mae_decoder_keys(embed_dims: int, num_patches: int, dec: int = 32) -> dict:
    """Pre-training decoder of the MAE-family files (names as in the official code)."""
    g = torch.Generator().manual_seed(1)
    keys = {
        'decoder_embed.weight': (dec, embed_dims), 'decoder_embed.bias': (dec, ),
        'mask_token': (1, 1, dec), 'decoder_pos_embed': (1, num_patches + 1, dec),
        'decoder_norm.weight': (dec, ), 'decoder_norm.bias': (dec, ),
        'decoder_pred.weight': (16 * 16 * 3, dec), 'decoder_pred.bias': (16 * 16 * 3, ),
    }
    for i in range(2):
        for part, shape in (('norm1.weight', (dec, )), ('attn.qkv.weight', (3 * dec, dec)),
                            ('attn.proj.weight', (dec, dec)), ('mlp.fc1.weight', (4 * dec, dec)),
                            ('mlp.fc2.weight', (dec, 4 * dec)), ('norm2.bias', (dec, ))):
            keys[f'decoder_blocks.{i}.{part}'] = shape
    return {k: torch.randn(s, generator=g) for k, s in keys.items()}


def satmae_pp_upsampling_keys(in_chans: int = 3, proj_ratio: int = 4) -> dict:
    """SatMAE++'s upsampling modules (``proj_up_conv``, ``proj_up_norm``, ``up_block``)."""
    ms = in_chans * proj_ratio
    shapes = {
        'proj_up_conv.weight': (ms, in_chans, 1, 1), 'proj_up_conv.bias': (ms, ),
        'proj_up_norm.weight': (ms, ), 'proj_up_norm.bias': (ms, ),
        'up_block.up_conv.weight': (ms, ms, 4, 4), 'up_block.up_conv.bias': (ms, ),
        'up_block.up_norm.weight': (ms, ), 'up_block.up_norm.bias': (ms, ),
        'up_block.res_block.conv1.weight': (ms, ms, 3, 3), 'up_block.res_block.conv1.bias': (ms, ),
        'up_block.res_block.conv2.weight': (ms, ms, 3, 3), 'up_block.res_block.conv2.bias': (ms, ),
        'up_block.res_norm.weight': (ms, ), 'up_block.res_norm.bias': (ms, ),
        'up_block.proj_out.weight': (in_chans, ms, 3, 3), 'up_block.proj_out.bias': (in_chans, ),
    }
    return {k: torch.randn(s) for k, s in shapes.items()}


def scale_mae_decoder_keys(embed_dims: int, num_patches: int, dec: int = 32) -> dict:
    """Scale-MAE's decoder side: MAE decoder plus ``mask_token_decoder``, the FPN and
    the two FCN reconstruction heads (``independent_fcn_head``)."""
    keys = mae_decoder_keys(embed_dims, num_patches, dec)
    keys.pop('decoder_pred.weight')
    keys.pop('decoder_pred.bias')
    shapes = {
        'mask_token_decoder': (1, 1, dec),
        'fpn.fpn1.0.weight': (dec, dec, 2, 2), 'fpn.fpn1.0.bias': (dec, ),
        'fpn.fpn1.1.ln.weight': (dec, ), 'fpn.fpn1.1.ln.bias': (dec, ),
        'fpn.fpn1.3.weight': (dec, dec, 2, 2), 'fpn.fpn2.0.weight': (dec, dec, 2, 2),
    }
    for head in ('fcn_high', 'fcn_low'):
        shapes.update({
            f'{head}.proj.weight': (16, dec, 1, 1),
            f'{head}.conv_blocks.0.convs.1.weight': (8, 2, 3, 3),
            f'{head}.conv_blocks.0.residual.weight': (16, 16, 1, 1),
            f'{head}.pred.0.ln.weight': (16, ), f'{head}.pred.1.weight': (16, 8, 4, 4),
            f'{head}.pred.7.weight': (8, 3, 2, 2),
        })
    keys.update({k: torch.randn(s) for k, s in shapes.items()})
    return keys


def official_checkpoint(model_sd: dict) -> dict:
    """What the MAE-family training scripts save (``misc.save_model``)."""
    return {
        'model': model_sd,
        'optimizer': {'state': {}, 'param_groups': [{'lr': 1.5e-4, 'params': [0, 1]}]},
        'epoch': 799,
        'scaler': {'scale': 65536.0, 'growth_factor': 2.0},
        'args': argparse.Namespace(model='mae_vit_large_patch16', input_size=224,
                                   patch_size=16, mask_ratio=0.75, norm_pix_loss=True),
    }


def encoder_sd(reference: VisionTransformer, finetuned: bool = False) -> dict:
    """The encoder keys of an official file; fine-tuned files (global pooling) carry
    ``fc_norm`` instead of ``norm`` and a classification ``head``."""
    sd = dict(reference.state_dict())
    if finetuned:
        sd['fc_norm.weight'] = sd.pop('norm.weight')
        sd['fc_norm.bias'] = sd.pop('norm.bias')
        width = sd['cls_token'].shape[-1]
        sd['head.weight'] = torch.randn(1000, width)
        sd['head.bias'] = torch.randn(1000)
    return sd


def save(tmp_path, name: str, checkpoint: dict) -> str:
    path = str(tmp_path / name)
    torch.save(checkpoint, path)
    return path


def build_loaded(cls, path: str, **kwargs):
    model = cls(init_cfg=dict(type='Pretrained', checkpoint=path), **kwargs)
    model.init_weights()
    return model.eval()


def assert_close_levels(ours, theirs, atol=ATOL):
    assert len(ours) == len(theirs)
    worst = 0.0
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        worst = max(worst, (a - b).abs().max().item())
    assert worst <= atol, f'max abs difference {worst:.3g} > {atol}'
    return worst


# ------------------------------------------------------------------ SatMAE / SatMAE++
@pytest.mark.parametrize('cls', [SatMAE, SatMAEPlusPlus])
@pytest.mark.parametrize('finetuned', [False, True])
def test_satmae_official_layout_matches_timm(tmp_path, cls, finetuned):
    ref = timm_reference(**{'embed_dims': 64, 'depth': 4, 'num_heads': 4})
    sd = encoder_sd(ref, finetuned)
    if not finetuned:
        sd.update(mae_decoder_keys(64, 196))
        if cls is SatMAEPlusPlus:
            sd.update(satmae_pp_upsampling_keys())
    path = save(tmp_path, 'official.pth', official_checkpoint(sd))

    # zero missing keys: every model key comes from the file
    probe = cls(arch=TINY, img_size=224, out_indices=(0, 1, 2, 3))
    converted = probe.prepare_state_dict(load_checkpoint_file(path))
    assert check_state_dict(probe, converted, probe.allowed_missing_keys) == []
    assert set(converted) == set(probe.state_dict())

    model = build_loaded(cls, path, arch=TINY, img_size=224, out_indices=(0, 1, 2, 3))
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        ours = model(x)
        theirs = ref.forward_intermediates(x, indices=[0, 1, 2, 3], norm=False,
                                           intermediates_only=True)
        assert_close_levels(ours, theirs)
        # final_norm: the file's norm (or fc_norm of a fine-tuned file) on every level
        model.final_norm = True
        theirs_normed = ref.forward_intermediates(x, indices=[0, 1, 2, 3], norm=True,
                                                  intermediates_only=True)
        assert_close_levels(model(x), theirs_normed)
    assert torch.equal(model.vit.pos_embed, ref.pos_embed)


@pytest.mark.slow
def test_satmae_vit_large_equivalence(tmp_path):
    """The full ViT-L/16 of the fMoW-RGB release, at 224, blocks 5/11/17/23 (about
    30 s of CPU time: one ViT-L build, one load, two forwards)."""
    ref = timm_reference(embed_dims=1024, depth=24, num_heads=16)
    sd = encoder_sd(ref)
    sd.update(mae_decoder_keys(1024, 196, dec=512))
    path = save(tmp_path, 'fmow_pretrain.pth', official_checkpoint(sd))
    model = build_loaded(SatMAE, path, arch='l', img_size=224)
    assert model.out_indices == (5, 11, 17, 23)
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        ours = model(x)
        theirs = ref.forward_intermediates(x, indices=[5, 11, 17, 23], intermediates_only=True)
    worst = assert_close_levels(ours, theirs)
    print(f'ViT-L/16 SatMAE vs timm: max abs diff {worst:.3g}')


def direct_bicubic(pos_embed: torch.Tensor, new_side: int, antialias: bool) -> torch.Tensor:
    """MAE's ``interpolate_pos_embed`` written out: the class row kept, the square grid
    resampled with ``F.interpolate(mode='bicubic', align_corners=False)``."""
    side = int((pos_embed.shape[1] - 1)**0.5)
    grid = pos_embed[:, 1:].reshape(1, side, side, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(new_side, new_side), mode='bicubic', align_corners=False,
                         antialias=antialias)
    grid = grid.permute(0, 2, 3, 1).reshape(1, new_side * new_side, -1)
    return torch.cat([pos_embed[:, :1], grid], dim=1)


def finetuned_like_checkpoint(tmp_path, seed: int = 3) -> tuple:
    """A 224-px file whose ``pos_embed`` is no longer the fixed sin-cos (as after the
    official fine-tuning, where it is learnable): random rows and a non-zero class row,
    so that interpolation, antialiasing and replacement all show."""
    ref = timm_reference(**TINY)
    sd = encoder_sd(ref)
    gen = torch.Generator().manual_seed(seed)
    sd['pos_embed'] = torch.randn(1, 1 + 14 * 14, 64, generator=gen)
    return sd, save(tmp_path, 'official.pth', official_checkpoint(sd))


@pytest.mark.parametrize('cls', [SatMAE, SatMAEPlusPlus])
def test_satmae_pos_embed_official_sincos_at_another_grid(tmp_path, cls):
    """Default: as the official fine-tuning code, an embedding of another shape is
    replaced by the 2-D sin-cos of the model's grid (zero class row); one of the same
    shape is loaded as it is."""
    sd, path = finetuned_like_checkpoint(tmp_path)
    for size in (512, 128):  # a larger and a smaller grid than the file's 14×14
        side = size // 16
        model = build_loaded(cls, path, arch=TINY, img_size=size)
        expected = torch.from_numpy(mae_sincos_pos_embed(64, side)).float()[None]
        assert model.vit.pos_embed.shape == expected.shape
        assert (model.vit.pos_embed - expected).abs().max().item() < 1e-6
        # a model built without a checkpoint starts from the same embedding, also after
        # init_weights (which runs timm's random initialisation of the trunk)
        fresh = cls(arch=TINY, img_size=size)
        assert (fresh.vit.pos_embed - expected).abs().max().item() < 1e-6
        fresh.init_weights()
        assert (fresh.vit.pos_embed - expected).abs().max().item() < 1e-6
    same = build_loaded(cls, path, arch=TINY, img_size=224)
    assert torch.equal(same.vit.pos_embed, sd['pos_embed'])


@pytest.mark.parametrize('mode,antialias', [('bicubic', False), ('bicubic_antialias', True)])
def test_satmae_pos_embed_bicubic_modes_match_direct_interpolate(tmp_path, mode, antialias):
    sd, path = finetuned_like_checkpoint(tmp_path)
    for size in (512, 128):  # 14 → 32 and 14 → 8 tokens
        side = size // 16
        model = build_loaded(SatMAE, path, arch=TINY, img_size=size, pos_embed_resize=mode)
        expected = direct_bicubic(sd['pos_embed'], side, antialias)
        other = direct_bicubic(sd['pos_embed'], side, not antialias)
        assert (model.vit.pos_embed - expected).abs().max().item() < 1e-6
        assert torch.equal(model.vit.pos_embed[:, 0], sd['pos_embed'][:, 0])
        # the two variants really differ here, so the comparison above can tell them apart
        assert (expected - other).abs().max().item() > 0.05


@pytest.mark.parametrize('mode,antialias', [('sincos', False), ('bicubic', False),
                                            ('bicubic_antialias', True)])
def test_satmae_runtime_resampling_matches_direct_interpolate(tmp_path, mode, antialias):
    """Inputs of another size than ``img_size``: the stored embedding is resampled per
    forward; checked against timm's ViT given the directly interpolated embedding."""
    _, path = finetuned_like_checkpoint(tmp_path)
    model = build_loaded(SatMAE, path, arch=TINY, img_size=224, out_indices=(0, 1, 2, 3),
                         pos_embed_resize=mode)
    weights = model.vit.state_dict()
    for size in (512, 128):
        ref = timm_reference(**TINY, img_size=size)
        ref.load_state_dict(dict(
            weights, pos_embed=direct_bicubic(weights['pos_embed'], size // 16, antialias)))
        x = torch.randn(1, 3, size, size)
        with torch.no_grad():
            theirs = ref.forward_intermediates(x, indices=[0, 1, 2, 3], intermediates_only=True)
            assert_close_levels(model(x), theirs)
    if antialias:  # timm's own dynamic-size ViT resamples the same way
        timm_dynamic = VisionTransformer(
            img_size=224, patch_size=16, embed_dim=64, depth=4, num_heads=4, num_classes=0,
            global_pool='', norm_layer=partial(nn.LayerNorm, eps=1e-6),
            dynamic_img_size=True).eval()
        timm_dynamic.load_state_dict(weights)
        x = torch.randn(1, 3, 128, 128)
        with torch.no_grad():
            assert_close_levels(model(x), timm_dynamic.forward_intermediates(
                x, indices=[0, 1, 2, 3], intermediates_only=True))


def test_satmae_pos_embed_resize_option_checked():
    with pytest.raises(ValueError, match=r"pos_embed_resize must be one of \['sincos'"):
        SatMAE(arch=TINY, pos_embed_resize='bilinear')


def test_satmae_converter_drops_decoders_and_maps_fc_norm():
    sd = {'cls_token': torch.zeros(1, 1, 8), 'blocks.0.norm1.weight': torch.ones(8),
          'norm.weight': torch.ones(8), 'fc_norm.weight': torch.full((8, ), 2.0),
          'decoder_embed.weight': torch.zeros(4, 8), 'mask_token': torch.zeros(1, 1, 4),
          'head.weight': torch.zeros(10, 8), 'proj_up_conv.weight': torch.zeros(12, 3, 1, 1),
          'up_block.proj_out.bias': torch.zeros(3)}
    out = SatMAEPlusPlus.convert_official_state_dict(sd)
    assert set(out) == {'vit.cls_token', 'vit.blocks.0.norm1.weight', 'vit.norm.weight'}
    assert torch.equal(out['vit.norm.weight'], torch.ones(8))  # norm wins over fc_norm
    sd.pop('norm.weight')
    out = SatMAE.convert_official_state_dict(sd)
    assert torch.equal(out['vit.norm.weight'], torch.full((8, ), 2.0))
    # plain SatMAE keeps SatMAE++'s modules, so they surface as unexpected keys
    assert 'vit.proj_up_conv.weight' in out


def test_satmae_wrong_checkpoints_rejected(tmp_path):
    model = SatMAE(arch=TINY, img_size=224)
    wider = encoder_sd(timm_reference(embed_dims=96, depth=4, num_heads=4))
    with pytest.raises(ValueError, match='shape mismatch'):
        model.load_pretrained(save(tmp_path, 'wide.pth', official_checkpoint(wider)))
    deeper = encoder_sd(timm_reference(embed_dims=64, depth=6, num_heads=4))
    with pytest.raises(KeyError, match=r'unexpected keys.*vit\.blocks\.4'):
        model.load_pretrained(save(tmp_path, 'deep.pth', official_checkpoint(deeper)))
    shallower = encoder_sd(timm_reference(embed_dims=64, depth=2, num_heads=4))
    with pytest.raises(KeyError, match=r'missing keys.*vit\.blocks\.2'):
        model.load_pretrained(save(tmp_path, 'shallow.pth', official_checkpoint(shallower)))
    # a SatMAE++ pre-training file is not silently accepted by SatMAE
    pp = encoder_sd(timm_reference(**TINY))
    pp.update(satmae_pp_upsampling_keys())
    with pytest.raises(KeyError, match='proj_up_conv'):
        model.load_pretrained(save(tmp_path, 'pp.pth', official_checkpoint(pp)))
    # group-channel (multi-spectral) files have another patch embedding
    group = {'patch_embed.0.proj.weight': torch.zeros(64, 4, 8, 8),
             'channel_embed': torch.zeros(1, 3, 16), 'cls_token': torch.zeros(1, 1, 64)}
    with pytest.raises(ValueError, match='group-channel'):
        model.load_pretrained(save(tmp_path, 'group.pth', official_checkpoint(group)))


# --------------------------------------------------------------------------- Scale-MAE
def test_scale_mae_pos_embed_formula():
    for dim, side, ratio in ((64, 14, 1.0), (64, 50, 1.0), (1024, 14, 0.448), (128, 32, 2.5)):
        expected = torch.from_numpy(mae_sincos_pos_embed(dim, side, ratio)[1:]).float()
        ours = gsd_sincos_pos_embed(dim, (side, side), ratio)
        assert (ours - expected).abs().max().item() < 1e-5
    # non-square grids: rows and columns keep their own positions
    rect = gsd_sincos_pos_embed(64, (3, 5), (2.0, 0.5))
    full = torch.from_numpy(mae_sincos_pos_embed(64, 5, 1.0)[1:]).float().reshape(5, 5, 64)
    assert torch.allclose(rect.reshape(3, 5, 64)[2, 4, :32],
                          gsd_sincos_pos_embed(64, (1, 5), 0.5)[4, :32])
    assert torch.allclose(rect.reshape(3, 5, 64)[2, 0, 32:], full[4, 0, 32:], atol=1e-6)


def scale_mae_checkpoint(ref: VisionTransformer, finetuned: bool = False) -> dict:
    sd = encoder_sd(ref, finetuned)
    # the stored (unused) fixed embedding of the 224-px layout
    sd['pos_embed'] = torch.from_numpy(
        mae_sincos_pos_embed(sd['cls_token'].shape[-1], 14)).float()[None]
    if not finetuned:
        sd.update(scale_mae_decoder_keys(sd['cls_token'].shape[-1], 196))
    return official_checkpoint(sd)


@pytest.mark.parametrize('finetuned', [False, True])
def test_scale_mae_matches_timm_with_gsd_pos_embed(tmp_path, finetuned):
    ref224 = timm_reference(**TINY)
    path = save(tmp_path, 'scalemae.pth', scale_mae_checkpoint(ref224, finetuned))

    probe = ScaleMAE(arch=TINY, img_size=224)
    converted = probe.prepare_state_dict(load_checkpoint_file(path))
    assert check_state_dict(probe, converted, probe.allowed_missing_keys) == []
    assert set(converted) == set(probe.state_dict())
    assert probe.vit.pos_embed is None and 'vit.pos_embed' not in converted

    model = build_loaded(ScaleMAE, path, arch=TINY, img_size=224, out_indices=(0, 1, 2, 3),
                         final_norm=True)
    for size, ratio in ((224, 1.0), (224, 0.5), (320, 2.5)):
        model.input_res = ratio
        # the same blocks, with the test's own GSD embedding as a timm pos_embed
        ref = timm_reference(**TINY, img_size=size, pos_ratio=ratio)
        result = ref.load_state_dict(
            {k: v for k, v in ref224.state_dict().items() if k != 'pos_embed'}, strict=False)
        assert result.missing_keys == ['pos_embed'] and not result.unexpected_keys
        x = torch.randn(2, 3, size, size)
        with torch.no_grad():
            theirs = ref.forward_intermediates(x, indices=[0, 1, 2, 3], norm=True,
                                               intermediates_only=True)
            assert_close_levels(model(x), theirs)


def test_scale_mae_embedding_follows_gsd_ratio_and_input_size():
    model = ScaleMAE(arch=TINY, img_size=224, out_indices=(3, )).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        base = model(x)[0]
        model.input_res = 2.0
        doubled = model(x)[0]
    assert (base - doubled).abs().max().item() > 1e-3
    # --eval_gsd mode: r = input_res · 224 / side; at 448 px that is input_res / 2
    ref_mode = ScaleMAE(arch=TINY, img_size=224, input_res=1.0, gsd_reference_size=224,
                        out_indices=(3, )).eval()
    plain = ScaleMAE(arch=TINY, img_size=224, input_res=0.5, out_indices=(3, )).eval()
    plain.load_state_dict(ref_mode.state_dict())
    big = torch.randn(1, 3, 448, 448)
    with torch.no_grad():
        assert torch.allclose(ref_mode(big)[0], plain(big)[0], atol=1e-6)
    assert ref_mode.vit.patch_embed.gsd_ratio((448, 448)) == (0.5, 0.5)
    # other sizes recompute the embedding for their grid (no stored table)
    pe = ref_mode.vit.patch_embed
    for size in (512, 800):
        side = size // 16
        img = torch.randn(1, 3, size, size)
        with torch.no_grad():
            tokens = pe(img) - pe.proj(img).permute(0, 2, 3, 1)
        expected = mae_sincos_pos_embed(64, side, 224 / size)[1:]
        assert tokens.shape == (1, side, side, 64)
        assert torch.allclose(tokens.reshape(-1, 64), torch.from_numpy(expected).float(),
                              atol=1e-5)


def test_scale_mae_token_sequence_starts_with_the_class_token():
    """The sequence entering the first block is [class token, patch tokens + GSD
    embedding], computed here directly from the weights. timm before 1.0.26 dropped the
    class token of a ViT without ``pos_embed`` (ScaleMAE's trunk), which this catches."""
    torch.manual_seed(0)
    model = ScaleMAE(arch=TINY, img_size=224, input_res=0.5, out_indices=(0, )).eval()
    with torch.no_grad():
        model.vit.cls_token.normal_()
    seen = []
    hook = model.vit.blocks[0].register_forward_pre_hook(lambda _, args: seen.append(args[0]))
    x = torch.randn(2, 3, 96, 128)
    with torch.no_grad():
        model(x)
    hook.remove()
    proj = model.vit.patch_embed.proj
    with torch.no_grad():
        patches = F.conv2d(x, proj.weight, proj.bias, stride=16)  # B, C, 6, 8
    patches = patches.flatten(2).transpose(1, 2)
    pos = torch.from_numpy(mae_sincos_pos_embed(64, 8, 0.5)[1:]).float().reshape(8, 8, 64)
    pos = pos[:6].reshape(48, 64)  # rows 0..5 of the 6×8 grid
    expected = torch.cat([model.vit.cls_token.expand(2, -1, -1), patches + pos], dim=1)
    assert seen[0].shape == (2, 1 + 48, 64)
    assert torch.equal(seen[0][:, 0], model.vit.cls_token[:, 0].expand(2, -1))
    assert (seen[0] - expected).abs().max().item() < 1e-5


def test_scale_mae_refuses_a_timm_that_drops_the_class_token(monkeypatch):
    import reobench_mm.models.backbones.scale_mae as scale_mae
    assert scale_mae.MIN_TIMM_VERSION == '1.0.26'
    monkeypatch.setattr(scale_mae.timm, '__version__', '1.0.25')
    with pytest.raises(RuntimeError, match=r'timm >= 1\.0\.26 \(installed: 1\.0\.25\)'):
        ScaleMAE(arch=TINY)
    monkeypatch.setattr(scale_mae.timm, '__version__', '1.0.26')
    ScaleMAE(arch=TINY)


def test_scale_mae_wrong_checkpoint_and_options(tmp_path):
    model = ScaleMAE(arch=TINY, img_size=224)
    wide = scale_mae_checkpoint(timm_reference(embed_dims=96, depth=4, num_heads=4))
    with pytest.raises(ValueError, match='shape mismatch'):
        model.load_pretrained(save(tmp_path, 'wide.pth', wide))
    deep = scale_mae_checkpoint(timm_reference(embed_dims=64, depth=5, num_heads=4))
    with pytest.raises(KeyError, match='vit.blocks.4'):
        model.load_pretrained(save(tmp_path, 'deep.pth', deep))
    with pytest.raises(ValueError, match='input_res'):
        ScaleMAE(arch=TINY, input_res=0.0)
    with pytest.raises(ValueError, match='input_res'):
        model.input_res = -1.0
    with pytest.raises(ValueError, match='gsd_reference_size'):
        ScaleMAE(arch=TINY, gsd_reference_size=0)
    with pytest.raises(ValueError, match='divisible by 4'):
        ScaleMAE(arch=dict(embed_dims=30, depth=2, num_heads=2))


# ------------------------------------------------------------------------------ common
ALL = [SatMAE, SatMAEPlusPlus, ScaleMAE]


def test_presets_and_arch_errors():
    for cls in ALL:
        assert cls.arch_zoo['l'] == dict(patch_size=16, embed_dims=1024, depth=24,
                                         num_heads=16, mlp_ratio=4.0)
        assert cls.arch_zoo['b']['embed_dims'] == 768
        with pytest.raises(ValueError, match='valid presets'):
            cls(arch='xl')
        with pytest.raises(ValueError, match='missing'):
            cls(arch=dict(embed_dims=32, depth=2))
        with pytest.raises(ValueError, match='unknown'):
            cls(arch=dict(embed_dims=32, depth=2, num_heads=2, heads=3))
    model = SatMAE(arch=TINY, img_size=64)
    assert model.vit.blocks[0].attn.qkv.bias is not None
    assert model.vit.norm.eps == 1e-6 and model.vit.cls_token is not None
    assert model.patch_size == 16 and model.embed_dims == 64


@pytest.mark.parametrize('name', ['SatMAE', 'SatMAEPlusPlus', 'ScaleMAE'])
def test_registry_build_and_output_shapes(name):
    model = MODELS.build(dict(type=name, arch=dict(embed_dims=32, depth=4, num_heads=2),
                              img_size=64, out_indices=(0, 1, 2, 3))).eval()
    with torch.no_grad():
        for size in (512, 800):
            outs = model(torch.randn(1, 3, size, size))
            assert [tuple(o.shape) for o in outs] == [(1, 32, size // 16, size // 16)] * 4
            assert all(torch.isfinite(o).all() for o in outs)
        a, b = model(torch.ones(1, 3, 64, 64)), model(torch.ones(1, 3, 64, 64))
        assert all(torch.equal(p, q) for p, q in zip(a, b))


@pytest.mark.parametrize('cls', ALL)
def test_gradient_step(cls):
    torch.manual_seed(0)
    model = cls(arch=dict(embed_dims=32, depth=2, num_heads=2), img_size=64,
                out_indices=(0, 1), final_norm=True, drop_path_rate=0.1, with_cp=True)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 3, 64, 64)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    loss = sum(o.pow(2).mean() for o in model(x))
    loss.backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
    opt.step()
    changed = [k for k, v in model.named_parameters() if not torch.equal(v, before[k])]
    assert 'vit.blocks.0.attn.qkv.weight' in changed
    assert 'vit.patch_embed.proj.weight' in changed


@pytest.mark.parametrize('cls', ALL)
def test_frozen_stages(cls):
    model = cls(arch=dict(embed_dims=32, depth=4, num_heads=2), img_size=64,
                frozen_stages=2, drop_path_rate=0.1)
    model.train()
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert 'vit.cls_token' in frozen and 'vit.patch_embed.proj.weight' in frozen
    assert all(n in frozen for n, _ in model.vit.blocks[:2].named_parameters(prefix='vit.blocks'))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert {'vit.blocks.2.attn.qkv.weight', 'vit.blocks.3.mlp.fc2.bias',
            'vit.norm.weight'} <= trainable
    if cls is ScaleMAE:
        assert not any('pos_embed' in n for n, _ in model.named_parameters())
    else:
        assert 'vit.pos_embed' in frozen
    assert not model.vit.blocks[1].training and model.vit.blocks[2].training
    assert model.layer_id('vit.patch_embed.proj.weight') == 0
    assert model.layer_id('vit.blocks.3.attn.qkv.weight') == 4
    assert model.layer_id('vit.norm.weight') == model.num_layers - 1
