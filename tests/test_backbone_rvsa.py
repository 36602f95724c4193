"""RVSA backbone: window and global attention against direct computations, MAE and
fine-tuned checkpoint loading, output shapes of the full ViT-B, gradients."""
import argparse
import math

import pytest
import torch
import torch.nn.functional as F

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.models.backbones.rvsa import RVSA, RotatedWindowAttention
from reobench_mm.registry import MODELS

TINY = dict(embed_dims=32, depth=4, num_heads=2)


def tiny_rvsa(**kwargs) -> RVSA:
    kwargs.setdefault('img_size', 64)
    kwargs.setdefault('out_indices', (0, 1, 2, 3))
    return RVSA(arch=dict(TINY), **kwargs)


# ----------------------------------------------------------------- reference attention
def split_qkv(attn, x):
    """q, k, v as ``B×H×W×heads×hd`` from the module's qkv weights."""
    B, H, W, C = x.shape
    qkv = x @ attn.qkv.weight.t() + attn.qkv.bias
    return [t.reshape(B, H, W, attn.num_heads, C // attn.num_heads)
            for t in qkv.split(C, dim=-1)]


def centred_pad(t, ws):
    """Zero-pad dims 1, 2 (H, W) of ``t`` to multiples of ``ws``, the extra split
    evenly (the convention documented in RotatedWindowAttention)."""
    H, W = t.shape[1:3]
    ph, pw = (-H) % ws, (-W) % ws
    out = t.new_zeros((t.shape[0], H + ph, W + pw) + tuple(t.shape[3:]))
    out[:, ph // 2:ph // 2 + H, pw // 2:pw // 2 + W] = t
    return out, ph // 2, pw // 2


def reference_window_attention(attn, x, positions=None):
    """Window attention computed window by window.

    ``positions(b, head, wi, wj)`` returns ``(py, px)`` float ``ws×ws`` tensors: where the
    keys/values of that window are read on the padded map (token units), bilinearly
    with zeros outside. ``None`` is the regular window (plain window attention).
    """
    B, H, W, C = x.shape
    ws, heads = attn.window_size, attn.num_heads
    hd = C // heads
    q, k, v = split_qkv(attn, x)
    (q, top, left), (k, _, _), (v, _, _) = (centred_pad(t, ws) for t in (q, k, v))
    Hp, Wp = q.shape[1:3]

    def bilinear(fmap, py, px):  # fmap Hp×Wp×hd; py, px ws×ws
        out = torch.zeros(py.shape + (fmap.shape[-1],), dtype=fmap.dtype)
        y0, x0 = torch.floor(py), torch.floor(px)
        for dy in (0, 1):
            for dx in (0, 1):
                yy, xx = y0 + dy, x0 + dx
                wgt = (1 - (py - yy).abs()) * (1 - (px - xx).abs())
                inside = (yy >= 0) & (yy <= Hp - 1) & (xx >= 0) & (xx <= Wp - 1)
                yi = yy.clamp(0, Hp - 1).long()
                xi = xx.clamp(0, Wp - 1).long()
                out += (wgt * inside)[..., None] * fmap[yi, xi]
        return out

    out = torch.zeros(B, Hp, Wp, heads, hd)
    for b in range(B):
        for wi in range(Hp // ws):
            for wj in range(Wp // ws):
                rows, cols = slice(wi * ws, (wi + 1) * ws), slice(wj * ws, (wj + 1) * ws)
                for h in range(heads):
                    qw = q[b, rows, cols, h].reshape(-1, hd)
                    if positions is None:
                        kw = k[b, rows, cols, h].reshape(-1, hd)
                        vw = v[b, rows, cols, h].reshape(-1, hd)
                    else:
                        py, px = positions(b, h, wi, wj)
                        kw = bilinear(k[b, :, :, h], py, px).reshape(-1, hd)
                        vw = bilinear(v[b, :, :, h], py, px).reshape(-1, hd)
                    weights = torch.softmax(qw @ kw.t() * hd**-0.5, dim=-1)
                    out[b, rows, cols, h] = (weights @ vw).reshape(ws, ws, hd)
    out = out[:, top:top + H, left:left + W].reshape(B, H, W, C)
    return out @ attn.proj.weight.t() + attn.proj.bias


def window_attention_modules(model):
    return [blk.attn for blk in model.blocks if isinstance(blk.attn, RotatedWindowAttention)]


def randomise_projections(attn, std=0.2):
    """Larger qkv/proj weights than the init, so that outputs are O(1) and the 1e-5
    tolerances are meaningful."""
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for linear in (attn.qkv, attn.proj):
            linear.weight.copy_(std * torch.randn(linear.weight.shape, generator=gen))
            linear.bias.copy_(std * torch.randn(linear.bias.shape, generator=gen))


@pytest.mark.parametrize('hw', [(14, 14), (10, 12), (4, 4)])
def test_identity_sampling_is_plain_window_attention(hw):
    torch.manual_seed(0)
    model = tiny_rvsa()
    attns = window_attention_modules(model)
    assert [i for i, b in enumerate(model.blocks) if b.window] == [0, 1, 3]
    x = torch.randn(2, *hw, 32)
    with torch.no_grad():
        for attn in attns:
            randomise_projections(attn)
            for conv in (attn.sampling_offsets[-1], attn.sampling_scales[-1],
                         attn.sampling_angles[-1]):
                assert not conv.weight.any() and not conv.bias.any()
            got, expected = attn(x), reference_window_attention(attn, x)
            assert (got - expected).abs().max() < 1e-5


def _set_transform(attn, offset=(0.0, 0.0), scale=(0.0, 0.0), angle=0.0, weights=0.0):
    """Constant predictions for every window (biases), plus optional random weights."""
    gen = torch.Generator().manual_seed(1)
    for conv, values in ((attn.sampling_offsets[-1], offset), (attn.sampling_scales[-1], scale),
                         (attn.sampling_angles[-1], (angle, ))):
        conv.bias.copy_(torch.tensor(values, dtype=torch.float32).repeat(attn.num_heads))
        conv.weight.copy_(weights * torch.randn(conv.weight.shape, generator=gen))


def regular_positions(attn, transform):
    """Positions of the keys per window after ``transform(dy, dx) -> (dy', dx')`` of the
    regular grid relative to the window centre (token units)."""
    ws = attn.window_size
    rel = torch.arange(ws, dtype=torch.float32) - (ws - 1) / 2
    dy, dx = torch.meshgrid(rel, rel, indexing='ij')

    def positions(b, h, wi, wj):
        ty, tx = transform(dy, dx)
        return wi * ws + (ws - 1) / 2 + ty, wj * ws + (ws - 1) / 2 + tx
    return positions


@pytest.mark.parametrize('case', ['shift_one_window', 'scale_two', 'rotate_quarter'])
def test_integer_transforms_read_the_expected_tokens(case):
    """Transforms landing on token centres: the module reads exactly those tokens."""
    torch.manual_seed(0)
    attn = window_attention_modules(tiny_rvsa())[0]
    randomise_projections(attn)
    x = torch.randn(1, 14, 12, 32)
    ws = attn.window_size
    with torch.no_grad():
        if case == 'shift_one_window':  # offset in window units, x along the width
            _set_transform(attn, offset=(1.0, 0.0))
            positions = regular_positions(attn, lambda dy, dx: (dy, dx + ws))
        elif case == 'scale_two':
            _set_transform(attn, scale=(1.0, 1.0))
            positions = regular_positions(attn, lambda dy, dx: (2 * dy, 2 * dx))
        else:  # x' = x cos - y sin, y' = x sin + y cos
            _set_transform(attn, angle=math.pi / 2)
            positions = regular_positions(attn, lambda dy, dx: (dx, -dy))
        got = attn(x)
        expected = reference_window_attention(attn, x, positions)
        plain = reference_window_attention(attn, x)
    assert (got - expected).abs().max() < 1e-5
    if case != 'rotate_quarter':  # a quarter turn permutes the keys of a window
        assert (got - plain).abs().max() > 0.05


def test_predicted_rotation_scale_offset_match_bilinear_reference():
    """Per-window predictions (non-zero weights): the sampling moves, and the module
    reads keys/values bilinearly at scale → rotate → shift of the regular grid."""
    torch.manual_seed(0)
    attn = window_attention_modules(tiny_rvsa())[1]
    randomise_projections(attn)
    ws, heads = attn.window_size, attn.num_heads
    x = torch.randn(2, 10, 12, 32)
    with torch.no_grad():
        _set_transform(attn, offset=(0.3, -0.2), scale=(0.25, -0.1), angle=0.4, weights=0.5)
        xp, _, _ = centred_pad(x, ws)
        pooled = F.leaky_relu(xp.reshape(2, 2, ws, 2, ws, 32).mean(dim=(2, 4)))  # B,nh,nw,C

        def predict(conv):
            return pooled @ conv.weight[:, :, 0, 0].t() + conv.bias  # B,nh,nw,out

        offsets, scales = predict(attn.sampling_offsets[-1]), predict(attn.sampling_scales[-1])
        angles = predict(attn.sampling_angles[-1])
        rel = torch.arange(ws, dtype=torch.float32) - (ws - 1) / 2
        dy, dx = torch.meshgrid(rel, rel, indexing='ij')

        def positions(b, h, wi, wj):
            tx, ty = offsets[b, wi, wj, 2 * h:2 * h + 2]
            sx, sy = scales[b, wi, wj, 2 * h:2 * h + 2]
            theta = angles[b, wi, wj, h]
            x1, y1 = dx * (1 + sx), dy * (1 + sy)
            xr = x1 * torch.cos(theta) - y1 * torch.sin(theta)
            yr = x1 * torch.sin(theta) + y1 * torch.cos(theta)
            return (wi * ws + (ws - 1) / 2 + yr + ws * ty,
                    wj * ws + (ws - 1) / 2 + xr + ws * tx)

        got = attn(x)
        expected = reference_window_attention(attn, x, positions)
        plain = reference_window_attention(attn, x)
    assert heads == 2 and len({float(a) for a in angles.flatten()}) > 1
    assert (got - expected).abs().max() < 1e-5
    assert (got - plain).abs().max() > 0.05


# ------------------------------------------------------------------- global attention
def linear_resize(table, length):
    """Linear interpolation of the rows (half-pixel centres, clamped at the ends)."""
    n = table.shape[0]
    out = torch.empty(length, table.shape[1])
    for i in range(length):
        src = min(max((i + 0.5) * n / length - 0.5, 0.0), n - 1)
        lo = int(math.floor(src))
        hi = min(lo + 1, n - 1)
        out[i] = table[lo] * (1 - (src - lo)) + table[hi] * (src - lo)
    return out


@pytest.mark.parametrize('hw', [(6, 6), (6, 4), (7, 9)])
def test_global_attention_decomposed_rel_pos(hw):
    torch.manual_seed(0)
    model = tiny_rvsa(img_size=96)  # grid 6×6: tables of 11 rows
    attn = model.blocks[2].attn
    randomise_projections(attn)
    assert not model.blocks[2].window and attn.rel_pos_h.shape == (11, 16)
    with torch.no_grad():
        attn.rel_pos_h.normal_(std=0.5)
        attn.rel_pos_w.normal_(std=0.5)
        x = torch.randn(2, *hw, 32)
        got = attn(x)
        H, W = hw
        table_h = linear_resize(attn.rel_pos_h, 2 * H - 1)
        table_w = linear_resize(attn.rel_pos_w, 2 * W - 1)
        q, k, v = (t.reshape(2, H * W, 2, 16) for t in split_qkv(attn, x))
        coords = [(i, j) for i in range(H) for j in range(W)]
        out = torch.zeros(2, H * W, 2, 16)
        for b in range(2):
            for h in range(2):
                logits = q[b, :, h] @ k[b, :, h].t() * 16**-0.5
                for n, (i1, j1) in enumerate(coords):
                    for m, (i2, j2) in enumerate(coords):
                        logits[n, m] += q[b, n, h] @ table_h[i1 - i2 + H - 1]
                        logits[n, m] += q[b, n, h] @ table_w[j1 - j2 + W - 1]
                out[b, :, h] = torch.softmax(logits, -1) @ v[b, :, h]
        expected = out.reshape(2, H, W, 32) @ attn.proj.weight.t() + attn.proj.bias
    assert (got - expected).abs().max() < 1e-5


# ------------------------------------------------------------------------- checkpoints
@pytest.fixture(scope='module')
def vit_b():
    return MODELS.build(dict(type='RVSA', arch='b', img_size=512)).eval()


def mae_state_dict(embed=32, depth=4, decoder_dim=16, seed=0):
    """Encoder + decoder keys of an MAE pretraining checkpoint (timm layout, sin-cos
    position embedding of 1 + 14×14 rows with a class row)."""
    gen = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(shape, generator=gen) * 0.02

    grid = torch.arange(14, dtype=torch.float32)
    omega = 1.0 / 10000**(torch.arange(embed // 4, dtype=torch.float32) / (embed / 4))
    yy, xx = torch.meshgrid(grid, grid, indexing='ij')
    parts = [f(c.reshape(-1, 1) * omega) for c in (xx, yy) for f in (torch.sin, torch.cos)]
    pos = torch.cat([torch.zeros(1, embed), torch.cat(parts, 1)])[None]
    sd = {'cls_token': rnd(1, 1, embed), 'pos_embed': pos,
          'patch_embed.proj.weight': rnd(embed, 3, 16, 16), 'patch_embed.proj.bias': rnd(embed),
          'norm.weight': 1 + rnd(embed), 'norm.bias': rnd(embed),
          'mask_token': rnd(1, 1, decoder_dim),
          'decoder_embed.weight': rnd(decoder_dim, embed), 'decoder_embed.bias': rnd(decoder_dim),
          'decoder_pos_embed': rnd(1, 197, decoder_dim),
          'decoder_blocks.0.norm1.weight': rnd(decoder_dim),
          'decoder_blocks.0.attn.qkv.weight': rnd(3 * decoder_dim, decoder_dim),
          'decoder_norm.weight': rnd(decoder_dim), 'decoder_pred.weight': rnd(768, decoder_dim),
          'decoder_pred.bias': rnd(768)}
    for i in range(depth):
        p = f'blocks.{i}.'
        sd.update({p + 'norm1.weight': 1 + rnd(embed), p + 'norm1.bias': rnd(embed),
                   p + 'attn.qkv.weight': rnd(3 * embed, embed),
                   p + 'attn.qkv.bias': rnd(3 * embed),
                   p + 'attn.proj.weight': rnd(embed, embed), p + 'attn.proj.bias': rnd(embed),
                   p + 'norm2.weight': 1 + rnd(embed), p + 'norm2.bias': rnd(embed),
                   p + 'mlp.fc1.weight': rnd(4 * embed, embed), p + 'mlp.fc1.bias': rnd(4 * embed),
                   p + 'mlp.fc2.weight': rnd(embed, 4 * embed), p + 'mlp.fc2.bias': rnd(embed)})
    return sd


def save_mae(path, sd):
    torch.save({'model': sd, 'optimizer': {}, 'epoch': 1599,
                'args': argparse.Namespace(model='mae_vit_base_patch16', mask_ratio=0.75)}, path)
    return str(path)


@pytest.mark.parametrize('final_norm', [True, False])
def test_load_mae_checkpoint(tmp_path, final_norm):
    sd = mae_state_dict()
    path = save_mae(tmp_path / 'mae.pth', sd)
    model = tiny_rvsa(img_size=512, final_norm=final_norm,
                      init_cfg=dict(type='Pretrained', checkpoint=path))
    model.init_weights()
    allowed = model.load_pretrained(path)
    window, glob = (0, 1, 3), (2, )
    expected_missing = {f'blocks.{i}.attn.{n}.2.{p}' for i in window
                        for n in ('sampling_offsets', 'sampling_scales', 'sampling_angles')
                        for p in ('weight', 'bias')}
    expected_missing |= {f'blocks.{i}.attn.rel_pos_{a}' for i in glob for a in 'hw'}
    assert set(allowed) == expected_missing
    state = model.state_dict()
    for key, value in sd.items():
        if key.startswith(('blocks.', 'patch_embed.')) or (key.startswith('norm.') and final_norm):
            assert torch.equal(state[key], value), key
    assert ('norm.weight' in state) == final_norm
    grid = sd['pos_embed'][0, 1:].reshape(1, 14, 14, 32).permute(0, 3, 1, 2)
    # timm's resample_abs_pos_embed: bicubic with antialias (its default, also when upsampling)
    interpolated = F.interpolate(grid, size=(32, 32), mode='bicubic', align_corners=False,
                                 antialias=True)
    assert model.pos_embed.shape == (1, 1024, 32)
    assert torch.allclose(model.pos_embed, interpolated.permute(0, 2, 3, 1).reshape(1, 1024, 32),
                          atol=1e-6)
    assert not any(conv.weight.any() for attn in window_attention_modules(model)
                   for conv in (attn.sampling_offsets[-1], attn.sampling_angles[-1]))


def test_full_vit_b_mae_layout_has_no_other_missing_keys(vit_b):
    """All keys of a timm/MAE ViT-B/16 encoder (with class token) fit the 'b' preset."""
    from timm.models.vision_transformer import VisionTransformer
    from reobench_mm.models.backbones.base import check_state_dict
    with torch.device('meta'):  # key names and shapes only
        mae = VisionTransformer(img_size=224, patch_size=16, embed_dim=768, depth=12,
                                num_heads=12, qkv_bias=True, num_classes=0)
    sd = {k: torch.zeros(v.shape) for k, v in mae.state_dict().items()}
    sd.update({k: v for k, v in mae_state_dict(embed=768, depth=0).items()
               if k.startswith(('decoder', 'mask_token'))})
    assert sd['pos_embed'].shape == (1, 197, 768) and 'cls_token' in sd
    converted = vit_b.prepare_state_dict({'model': sd})
    allowed = check_state_dict(vit_b, converted, vit_b.allowed_missing_keys)
    assert len(allowed) == 8 * 6 + 4 * 2  # predictors of 8 window blocks, 4 rel-pos pairs
    assert all('sampling_' in k or 'rel_pos_' in k for k in allowed)
    assert converted['pos_embed'].shape == (1, 1024, 768)
    assert vit_b.global_indices == (2, 5, 8, 11) and vit_b.out_indices == (3, 5, 7, 11)


def test_wrong_architecture_checkpoint_is_rejected(tmp_path):
    deeper = save_mae(tmp_path / 'deep.pth', mae_state_dict(depth=6))
    with pytest.raises(KeyError, match=r'unexpected keys.*blocks\.4'):
        tiny_rvsa(init_cfg=dict(type='Pretrained', checkpoint=deeper)).init_weights()
    wider = save_mae(tmp_path / 'wide.pth', mae_state_dict(embed=48))
    with pytest.raises(ValueError, match='shape mismatch'):
        tiny_rvsa(init_cfg=dict(type='Pretrained', checkpoint=wider)).init_weights()
    clip = tmp_path / 'clip.pth'
    torch.save({'visual.conv1.weight': torch.zeros(32, 3, 16, 16)}, clip)
    with pytest.raises(KeyError, match='missing keys'):
        tiny_rvsa(init_cfg=dict(type='Pretrained', checkpoint=str(clip))).init_weights()


def test_load_finetuned_mmseg_checkpoint(tmp_path):
    torch.manual_seed(0)
    source = tiny_rvsa(final_norm=True)
    with torch.no_grad():
        for p in source.parameters():
            p.add_(0.05 * torch.randn_like(p))  # non-zero predictors and rel-pos tables
    state = {'backbone.' + k: v for k, v in source.state_dict().items()}
    state.update({'decode_head.conv_seg.weight': torch.zeros(5, 16, 1, 1),
                  'auxiliary_head.conv_seg.bias': torch.zeros(5),
                  'neck.fpn1.0.weight': torch.zeros(32, 32, 2, 2)})
    path = tmp_path / 'iter_80000.pth'
    torch.save({'meta': {'mmseg_version': '1.2.2'}, 'state_dict': state}, path)

    model = tiny_rvsa(final_norm=True, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    model.init_weights()
    assert all(torch.equal(v, source.state_dict()[k]) for k, v in model.state_dict().items())
    x = torch.randn(1, 3, 80, 64)
    with torch.no_grad():
        assert all(torch.equal(a, b) for a, b in zip(model.eval()(x), source.eval()(x)))

    larger = tiny_rvsa(img_size=128, final_norm=True)  # grid 8: interpolated tables
    assert larger.load_pretrained(str(path)) == []
    assert larger.pos_embed.shape == (1, 64, 32)
    assert larger.blocks[2].attn.rel_pos_h.shape == (15, 16)


# --------------------------------------------------------------- shapes and gradients
@pytest.mark.parametrize('size', [512, 800])
def test_full_vit_b_output_shapes(vit_b, size):
    assert (vit_b.patch_size, vit_b.embed_dims) == (16, 768)
    assert vit_b.pos_embed.shape == (1, 1024, 768)
    assert vit_b.blocks[2].attn.rel_pos_h.shape == (63, 64)
    with torch.inference_mode():
        outs = vit_b(torch.randn(1, 3, size, size))
    grid = size // 16
    assert len(outs) == 4
    assert all(o.shape == (1, 768, grid, grid) and torch.isfinite(o).all() for o in outs)


def test_gradients_frozen_stages_and_checkpointing():
    torch.manual_seed(0)
    plain = tiny_rvsa(img_size=64, frozen_stages=1)
    ckpt = tiny_rvsa(img_size=64, frozen_stages=1, with_cp=True)
    ckpt.load_state_dict(plain.state_dict())
    plain.train()
    ckpt.train()
    x = torch.randn(2, 3, 80, 112)
    grads = []
    for model in (plain, ckpt):
        model.zero_grad()
        loss = sum((o * o).mean() for o in model(x))
        loss.backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if p.requires_grad})
    frozen = [n for n, p in plain.named_parameters() if not p.requires_grad]
    assert frozen and all(n.startswith(('patch_embed.', 'pos_embed', 'blocks.0.'))
                          for n in frozen)
    assert not plain.blocks[0].training and plain.blocks[1].training
    assert grads[0].keys() == grads[1].keys()
    for name, grad in grads[0].items():
        assert grad is not None, name
        assert torch.allclose(grad, grads[1][name], atol=1e-6, rtol=1e-5), name
    # the identity-initialised predictors still receive gradients
    assert grads[0]['blocks.1.attn.sampling_offsets.2.weight'].abs().sum() > 0
    assert grads[0]['blocks.1.attn.sampling_angles.2.weight'].abs().sum() > 0

    torch.optim.SGD([p for p in plain.parameters() if p.requires_grad], lr=0.1).step()
    assert plain.blocks[1].attn.sampling_offsets[-1].weight.abs().sum() > 0


def test_options_are_validated():
    with pytest.raises(ValueError, match="valid: \\['b', 'base'\\]"):
        RVSA(arch='huge')
    with pytest.raises(ValueError, match='arch dict needs'):
        RVSA(arch=dict(embed_dims=32, depth=4))
    with pytest.raises(ValueError, match='global_indices'):
        tiny_rvsa(global_indices=[7])
    with pytest.raises(ValueError, match='not divisible by the patch size'):
        tiny_rvsa()(torch.randn(1, 3, 70, 64))
    model = tiny_rvsa(global_indices=[0, 3], window_size=4)
    assert [b.window for b in model.blocks] == [False, True, True, False]
    assert model.layer_id('blocks.1.attn.sampling_scales.2.weight') == 2
    assert model.layer_id('pos_embed') == 0
    assert 'blocks.0.attn.rel_pos_h' in model.no_weight_decay_names()
