"""RVSA backbone: window and global attention against direct per-window computations of
the published formulas (non-zero relative-position tables, bias tables and offsets),
MAE and published fine-tuned checkpoint layouts, the detection pyramid source, output
shapes of the full ViT-B, gradients."""
import argparse
import math

import pytest
import torch
import torch.nn.functional as F

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.models.backbones.convert import convert_checkpoint
from reobench_mm.models.backbones.rvsa import RVSA, RotatedWindowAttention
from reobench_mm.models.necks import SimpleFeaturePyramid
from reobench_mm.registry import MODELS

TINY = dict(embed_dims=32, depth=4, num_heads=2)


def tiny_rvsa(**kwargs) -> RVSA:
    kwargs.setdefault('img_size', 64)
    if kwargs.get('pyramid_source') != 'last_block':
        kwargs.setdefault('out_indices', (0, 1, 2, 3))
    return RVSA(arch=dict(TINY), **kwargs)


# ----------------------------------------------------------------- reference attention
def split_qkv(attn, x):
    """q, k, v as ``B×H×W×heads×hd`` from the module's qkv weights."""
    B, H, W, C = x.shape
    if getattr(attn, 'q_bias', None) is not None:  # separate q/v biases, no key bias
        bias = torch.cat([attn.q_bias, torch.zeros(C), attn.v_bias])
    else:
        bias = attn.qkv.bias
    qkv = x @ attn.qkv.weight.t() + bias
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


def bilinear(fmap, py, px):
    """``fmap`` (Hp×Wp×hd) read at token coordinates ``py``, ``px`` (ws×ws), bilinearly,
    zeros outside the map."""
    Hp, Wp = fmap.shape[:2]
    out = torch.zeros(py.shape + (fmap.shape[-1],), dtype=fmap.dtype)
    y0, x0 = torch.floor(py), torch.floor(px)
    for dy in (0, 1):
        for dx in (0, 1):
            yy, xx = y0 + dy, x0 + dx
            wgt = (1 - (py - yy).abs()) * (1 - (px - xx).abs())
            inside = (yy >= 0) & (yy <= Hp - 1) & (xx >= 0) & (xx <= Wp - 1)
            out += (wgt * inside)[..., None] * fmap[yy.clamp(0, Hp - 1).long(),
                                                    xx.clamp(0, Wp - 1).long()]
    return out


def direct_window_logits(attn, qw, kw, head):
    """Logits of one window and head, pair by pair from the published formula:
    ``(q·k)·d^-1/2 + q·rel_pos_h[Δr + ws − 1] + q·rel_pos_w[Δc + ws − 1] +
    table[(Δr + ws − 1)·(2ws − 1) + Δc + ws − 1, head]`` with the unscaled ``q``."""
    ws = attn.window_size
    hd = qw.shape[-1]
    rj, cj = torch.arange(ws * ws) // ws, torch.arange(ws * ws) % ws  # every key j
    logits = torch.empty(ws * ws, ws * ws)
    for i in range(ws * ws):
        ri, ci = divmod(i, ws)
        logits[i] = (kw @ qw[i]) * hd**-0.5 \
            + attn.rel_pos_h[ri - rj + ws - 1] @ qw[i] \
            + attn.rel_pos_w[ci - cj + ws - 1] @ qw[i] \
            + attn.relative_position_bias_table[(ri - rj + ws - 1) * (2 * ws - 1)
                                                + ci - cj + ws - 1, head]
    return logits


def reference_window_attention(attn, x, positions=None):
    """Window attention computed window by window and head by head.

    ``positions(b, head, wi, wj)`` returns ``(py, px)`` float ``ws×ws`` tensors: where the
    keys/values of that window are read on the padded map (token units), bilinearly
    with zeros outside. ``None`` is the regular window.
    """
    B, H, W, C = x.shape
    ws, heads = attn.window_size, attn.num_heads
    hd = C // heads
    q, k, v = split_qkv(attn, x)
    (q, top, left), (k, _, _), (v, _, _) = (centred_pad(t, ws) for t in (q, k, v))
    Hp, Wp = q.shape[1:3]
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
                    weights = torch.softmax(direct_window_logits(attn, qw, kw, h), dim=-1)
                    out[b, rows, cols, h] = (weights @ vw).reshape(ws, ws, hd)
    out = out[:, top:top + H, left:left + W].reshape(B, H, W, C)
    return out @ attn.proj.weight.t() + attn.proj.bias


def predicted_positions(attn, x):
    """Key/value positions (token units on the padded map) from the module's predictor
    weights, by the published convention: scale and rotation of the regular window in
    normalised [-1, 1] coordinates, then the offset over the number of whole windows of
    the unpadded map along the *other* axis (x over H // ws, y over W // ws)."""
    B, H, W, C = x.shape
    ws = attn.window_size
    xp, _, _ = centred_pad(x, ws)
    Hp, Wp = xp.shape[1:3]
    nh, nw = Hp // ws, Wp // ws
    pooled = F.leaky_relu(xp.reshape(B, nh, ws, nw, ws, C).mean(dim=(2, 4)))  # B,nh,nw,C

    def predict(conv):
        return pooled @ conv.weight[:, :, 0, 0].t() + conv.bias  # B,nh,nw,out

    offsets, scales = predict(attn.sampling_offsets[-1]), predict(attn.sampling_scales[-1])
    angles = predict(attn.sampling_angles[-1])
    rel = torch.arange(ws, dtype=torch.float32) - (ws - 1) / 2
    v0, u0 = torch.meshgrid(2 * rel / (Hp - 1), 2 * rel / (Wp - 1), indexing='ij')

    def positions(b, h, wi, wj):
        tx, ty = offsets[b, wi, wj, 2 * h:2 * h + 2]
        sx, sy = scales[b, wi, wj, 2 * h:2 * h + 2]
        theta = angles[b, wi, wj, h]
        u, v = u0 * (1 + sx), v0 * (1 + sy)
        cx = 2 * (wj * ws + (ws - 1) / 2) / (Wp - 1) - 1
        cy = 2 * (wi * ws + (ws - 1) / 2) / (Hp - 1) - 1
        px = cx + u * torch.cos(theta) - v * torch.sin(theta) + tx / max(H // ws, 1)
        py = cy + u * torch.sin(theta) + v * torch.cos(theta) + ty / max(W // ws, 1)
        return (py + 1) * (Hp - 1) / 2, (px + 1) * (Wp - 1) / 2
    return positions


def window_attention_modules(model):
    return [blk.attn for blk in model.blocks if isinstance(blk.attn, RotatedWindowAttention)]


def randomise_projections(attn, std=0.2):
    """Larger qkv/proj weights than the init, so that outputs are O(1) and the 1e-5
    tolerances are meaningful."""
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for linear in (attn.qkv, attn.proj):
            linear.weight.copy_(std * torch.randn(linear.weight.shape, generator=gen))
            if linear.bias is not None:
                linear.bias.copy_(std * torch.randn(linear.bias.shape, generator=gen))
        for bias in (getattr(attn, 'q_bias', None), getattr(attn, 'v_bias', None)):
            if bias is not None:
                bias.copy_(std * torch.randn(bias.shape, generator=gen))


def randomise_tables(attn, std=0.5, seed=3):
    """Non-zero relative-position tables (and bias table, for window blocks)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in ('rel_pos_h', 'rel_pos_w', 'relative_position_bias_table'):
            table = getattr(attn, name, None)
            if table is not None:
                table.copy_(std * torch.randn(table.shape, generator=gen))


def _set_transform(attn, offset=(0.0, 0.0), scale=(0.0, 0.0), angle=0.0, weights=0.0):
    """Constant predictions for every window (biases), plus optional random weights."""
    gen = torch.Generator().manual_seed(1)
    for conv, values in ((attn.sampling_offsets[-1], offset), (attn.sampling_scales[-1], scale),
                         (attn.sampling_angles[-1], (angle, ))):
        conv.bias.copy_(torch.tensor(values, dtype=torch.float32).repeat(attn.num_heads))
        conv.weight.copy_(weights * torch.randn(conv.weight.shape, generator=gen))


def test_window_bias_is_the_pairwise_formula():
    """The additive logit terms of a window, against the pair-by-pair formula."""
    torch.manual_seed(0)
    attn = window_attention_modules(tiny_rvsa())[0]
    randomise_tables(attn)
    q = torch.randn(3, 2, 49, 16)  # windows, heads, ws², hd
    with torch.no_grad():
        got = attn.window_bias(q)
        zero_k = torch.zeros(49, 16)
        expected = torch.stack([torch.stack([direct_window_logits(attn, q[n, h], zero_k, h)
                                             for h in range(2)]) for n in range(3)])
    assert got.shape == (3, 2, 49, 49)
    assert (got - expected).abs().max() < 1e-5
    assert expected.abs().max() > 1  # the tables matter


@pytest.mark.parametrize('hw', [(14, 14), (10, 12), (11, 16), (4, 4)])
def test_window_attention_matches_direct_computation(hw):
    """Predicted offsets, scales and angles (non-zero, per window and head) and non-zero
    tables: the module equals the direct per-window computation of the formulas."""
    torch.manual_seed(0)
    model = tiny_rvsa()
    assert [i for i, b in enumerate(model.blocks) if b.window] == [0, 1, 3]
    attn = window_attention_modules(model)[1]
    randomise_projections(attn)
    randomise_tables(attn)
    x = torch.randn(2, *hw, 32)
    with torch.no_grad():
        _set_transform(attn, offset=(0.3, -0.2), scale=(0.25, -0.1), angle=0.4, weights=0.5)
        got = attn(x)
        expected = reference_window_attention(attn, x, predicted_positions(attn, x))
        plain = reference_window_attention(attn, x)
    assert (got - expected).abs().max() < 2e-5
    assert (got - plain).abs().max() > 0.05  # the sampling moved


@pytest.mark.parametrize('case', ['shift_x', 'shift_y', 'scale_two', 'rotate_quarter'])
def test_exact_transforms_read_the_expected_tokens(case):
    """Transforms landing on token centres read exactly those tokens. On a 14×12 map
    (padded 14×14: ⌊H/7⌋ = 2, ⌊W/7⌋ = 1) a shift of one window along x needs
    t_x = 2 · (2·7/13) and along y t_y = 1 · (2·7/13): the offsets' axes cross."""
    torch.manual_seed(0)
    attn = window_attention_modules(tiny_rvsa())[0]
    randomise_projections(attn)
    randomise_tables(attn)
    x = torch.randn(1, 14, 12, 32)
    ws, one_window = attn.window_size, 2 * 7 / 13  # normalised length of 7 tokens
    rel = torch.arange(ws, dtype=torch.float32) - (ws - 1) / 2
    dy, dx = torch.meshgrid(rel, rel, indexing='ij')

    def regular(transform):
        def positions(b, h, wi, wj):
            ty, tx = transform(dy, dx)
            return wi * ws + (ws - 1) / 2 + ty, wj * ws + (ws - 1) / 2 + tx
        return positions

    with torch.no_grad():
        if case == 'shift_x':
            _set_transform(attn, offset=(2 * one_window, 0.0))
            positions = regular(lambda dy, dx: (dy, dx + ws))
        elif case == 'shift_y':
            _set_transform(attn, offset=(0.0, 1 * one_window))
            positions = regular(lambda dy, dx: (dy + ws, dx))
        elif case == 'scale_two':
            _set_transform(attn, scale=(1.0, 1.0))
            positions = regular(lambda dy, dx: (2 * dy, 2 * dx))
        else:  # x' = x cos - y sin, y' = x sin + y cos
            _set_transform(attn, angle=math.pi / 2)
            positions = regular(lambda dy, dx: (dx, -dy))
        got = attn(x)
        expected = reference_window_attention(attn, x, positions)
        plain = reference_window_attention(attn, x)
    assert (got - expected).abs().max() < 2e-5
    assert (got - plain).abs().max() > 0.05


def test_official_initialisation_and_zeros_option():
    torch.manual_seed(0)
    model = RVSA(arch=dict(TINY, embed_dims=64), img_size=64)
    attn = window_attention_modules(model)[0]
    table = attn.relative_position_bias_table
    assert table.shape == (169, 2) and attn.rel_pos_h.shape == (13, 32)
    assert 0.01 < table.std() < 0.03 and table.abs().max() <= 2.0  # trunc normal 0.02
    assert not attn.rel_pos_h.any() and not attn.rel_pos_w.any()
    assert not model.blocks[2].attn.rel_pos_h.any()
    # the published code never calls its zeroing method: PyTorch's default conv init
    weight = attn.sampling_offsets[-1].weight
    assert weight.any() and weight.abs().max() <= 1 / math.sqrt(64)
    assert 'blocks.0.attn.relative_position_index' not in model.state_dict()
    zeros = RVSA(arch=dict(TINY), img_size=64, sampling_init='zeros')
    for attn in window_attention_modules(zeros):
        for conv in (attn.sampling_offsets[-1], attn.sampling_scales[-1],
                     attn.sampling_angles[-1]):
            assert not conv.weight.any() and not conv.bias.any()
    # zero predictors: the regular window (plain window attention with the tables)
    attn = window_attention_modules(zeros)[0]
    randomise_projections(attn)
    randomise_tables(attn)
    x = torch.randn(2, 10, 12, 32)
    with torch.no_grad():
        assert (attn(x) - reference_window_attention(attn, x)).abs().max() < 2e-5


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
def test_global_attention_decomposed_rel_pos_with_scaled_query(hw):
    torch.manual_seed(0)
    model = tiny_rvsa(img_size=96)  # grid 6×6: tables of 11 rows
    attn = model.blocks[2].attn
    randomise_projections(attn)
    randomise_tables(attn)
    assert not model.blocks[2].window and attn.rel_pos_h.shape == (11, 16)
    with torch.no_grad():
        x = torch.randn(2, *hw, 32)
        got = attn(x)
        H, W = hw
        table_h = linear_resize(attn.rel_pos_h, 2 * H - 1)
        table_w = linear_resize(attn.rel_pos_w, 2 * W - 1)
        q, k, v = (t.reshape(2, H * W, 2, 16) for t in split_qkv(attn, x))
        q = q * 16**-0.5  # scaled first, then used for both terms
        coords = [(i, j) for i in range(H) for j in range(W)]
        out = torch.zeros(2, H * W, 2, 16)
        for b in range(2):
            for h in range(2):
                logits = q[b, :, h] @ k[b, :, h].t()
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
    torch.manual_seed(0)
    model = tiny_rvsa(img_size=512, final_norm=final_norm,
                      init_cfg=dict(type='Pretrained', checkpoint=path))
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    model.init_weights()
    allowed = model.load_pretrained(path)
    window, glob = (0, 1, 3), (2, )
    expected_missing = {f'blocks.{i}.attn.{n}.2.{p}' for i in window
                        for n in ('sampling_offsets', 'sampling_scales', 'sampling_angles')
                        for p in ('weight', 'bias')}
    expected_missing |= {f'blocks.{i}.attn.rel_pos_{a}' for i in window + glob for a in 'hw'}
    expected_missing |= {f'blocks.{i}.attn.relative_position_bias_table' for i in window}
    assert set(allowed) == expected_missing
    state = model.state_dict()
    for key in expected_missing:  # left at the published initialisation
        assert torch.equal(state[key], initial[key]), key
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
    # 8 window blocks: 6 predictor tensors, rel_pos_h/w, bias table; 4 global: rel_pos_h/w
    assert len(allowed) == 8 * (6 + 2 + 1) + 4 * 2
    assert all('sampling_' in k or 'rel_pos_' in k or 'relative_position_bias' in k
               for k in allowed)
    assert converted['pos_embed'].shape == (1, 1024, 768)
    assert vit_b.global_indices == (2, 5, 8, 11) and vit_b.out_indices == (3, 5, 7, 11)


def swin_index(ws):
    """The published ``relative_position_index``, entry by entry."""
    index = torch.empty(ws * ws, ws * ws, dtype=torch.long)
    for i in range(ws * ws):
        for j in range(ws * ws):
            (ri, ci), (rj, cj) = divmod(i, ws), divmod(j, ws)
            index[i, j] = (ri - rj + ws - 1) * (2 * ws - 1) + (ci - cj + ws - 1)
    return index


def official_finetuned_checkpoint(task, embed=32, depth=4, heads=2, img_size=64, ws=7,
                                  seed=0):
    """A published fine-tuned RVSA checkpoint, key by key: the MMSeg UperNet
    (``task='seg'``) or OBBDetection Oriented R-CNN (``'det'``) ``state_dict`` of
    ``ViT_Win_RVSA_V3_WSZ7`` (built-in ``fpn1``/``fpn2`` pyramid, final ``norm``,
    persistent ``relative_position_index``), every tensor non-zero."""
    gen = torch.Generator().manual_seed(seed)
    hd, grid = embed // heads, img_size // 16

    def rnd(*shape):
        return 0.1 * torch.randn(shape, generator=gen)

    bb = {'patch_embed.proj.weight': rnd(embed, 3, 16, 16), 'patch_embed.proj.bias': rnd(embed),
          'pos_embed': rnd(1, grid * grid, embed), 'norm.weight': 1 + rnd(embed),
          'norm.bias': rnd(embed), 'fpn1.0.weight': rnd(embed, embed, 2, 2),
          'fpn1.0.bias': rnd(embed), 'fpn1.1.ln.weight': 1 + rnd(embed),
          'fpn1.1.ln.bias': rnd(embed), 'fpn1.3.weight': rnd(embed, embed, 2, 2),
          'fpn1.3.bias': rnd(embed), 'fpn2.0.weight': rnd(embed, embed, 2, 2),
          'fpn2.0.bias': rnd(embed)}
    for i in range(depth):
        p = f'blocks.{i}.'
        bb.update({p + 'norm1.weight': 1 + rnd(embed), p + 'norm1.bias': rnd(embed),
                   p + 'attn.qkv.weight': rnd(3 * embed, embed),
                   p + 'attn.qkv.bias': rnd(3 * embed),
                   p + 'attn.proj.weight': rnd(embed, embed), p + 'attn.proj.bias': rnd(embed),
                   p + 'norm2.weight': 1 + rnd(embed), p + 'norm2.bias': rnd(embed),
                   p + 'mlp.fc1.weight': rnd(4 * embed, embed), p + 'mlp.fc1.bias': rnd(4 * embed),
                   p + 'mlp.fc2.weight': rnd(embed, 4 * embed), p + 'mlp.fc2.bias': rnd(embed)})
        if (i + 1) % 3 == 0:  # global block: tables of the img_size grid
            bb.update({p + 'attn.rel_pos_h': rnd(2 * grid - 1, hd),
                       p + 'attn.rel_pos_w': rnd(2 * grid - 1, hd)})
            continue
        bb.update({p + 'attn.rel_pos_h': rnd(2 * ws - 1, hd),
                   p + 'attn.rel_pos_w': rnd(2 * ws - 1, hd),
                   p + 'attn.relative_position_bias_table': rnd((2 * ws - 1)**2, heads),
                   p + 'attn.relative_position_index': swin_index(ws)})
        for name, out in (('offsets', 2 * heads), ('scales', 2 * heads), ('angles', heads)):
            bb.update({p + f'attn.sampling_{name}.2.weight': rnd(out, embed, 1, 1),
                       p + f'attn.sampling_{name}.2.bias': rnd(out)})
    state = {'backbone.' + k: v for k, v in bb.items()}
    if task == 'seg':
        state.update({'decode_head.conv_seg.weight': rnd(5, 512, 1, 1),
                      'auxiliary_head.conv_seg.weight': rnd(5, 256, 1, 1)})
    else:
        state.update({'neck.lateral_convs.0.conv.weight': rnd(256, embed, 1, 1),
                      'rpn_head.rpn_conv.weight': rnd(256, 256, 3, 3),
                      'roi_head.bbox_head.fc_cls.weight': rnd(21, 1024)})
    return {'meta': {'iter': 160000}, 'state_dict': state, 'optimizer': {}}, bb


@pytest.mark.parametrize('task', ['seg', 'det'])
def test_published_finetuned_layout_loads_strictly(tmp_path, task):
    checkpoint, bb = official_finetuned_checkpoint(task)
    path = tmp_path / f'rvsa_{task}.pth'
    torch.save(checkpoint, path)
    options = dict(out_indices=(3, )) if task == 'seg' else dict(pyramid_source='last_block')
    init_cfg = dict(type='Pretrained', checkpoint=str(path))
    model = RVSA(arch=dict(TINY), img_size=64, init_cfg=init_cfg, **options)
    assert model.load_pretrained(str(path)) == []  # nothing missing, nothing unexpected
    state = model.state_dict()
    dropped = {k for k in bb if k.startswith('fpn') or k.endswith('relative_position_index')}
    if task == 'seg':  # the published segmentation backbone creates but never uses `norm`
        dropped |= {'norm.weight', 'norm.bias'}
    assert set(state) == set(bb) - dropped
    assert all(torch.equal(state[k], bb[k]) for k in state)

    # the built-in pyramid goes to the neck
    neck = SimpleFeaturePyramid(in_channels=32, patch_size=16)
    neck.load_state_dict(RVSA.convert_official_pyramid(checkpoint['state_dict']), strict=True)
    m = torch.randn(1, 32, 4, 4)
    with torch.no_grad():
        got = neck([m] * 4)
        up = F.conv_transpose2d(m, bb['fpn1.0.weight'], bb['fpn1.0.bias'], stride=2)
        up = F.layer_norm(up.permute(0, 2, 3, 1), (32, ), bb['fpn1.1.ln.weight'],
                          bb['fpn1.1.ln.bias'], eps=1e-6).permute(0, 3, 1, 2)
        up = F.conv_transpose2d(F.gelu(up), bb['fpn1.3.weight'], bb['fpn1.3.bias'], stride=2)
        expected = [up, F.conv_transpose2d(m, bb['fpn2.0.weight'], bb['fpn2.0.bias'], stride=2),
                    m, F.max_pool2d(m, 2)]
    assert all((a - b).abs().max() < 1e-5 for a, b in zip(got, expected))


def test_published_layout_converts_once_and_rejects_a_wrong_index(tmp_path):
    checkpoint, _ = official_finetuned_checkpoint('det', img_size=128)
    src, dst = tmp_path / 'det.pth', tmp_path / 'converted.pth'
    torch.save(checkpoint, src)
    cfg = dict(type='RVSA', arch=dict(TINY), img_size=128, pyramid_source='last_block')
    meta = convert_checkpoint(str(src), str(dst), cfg)
    assert meta['missing_allowed'] == []
    image = torch.randn(1, 3, 128, 96)
    outputs = []
    for path in (src, dst):
        model = MODELS.build(dict(cfg, init_cfg=dict(type='Pretrained', checkpoint=str(path))))
        model.init_weights()
        with torch.no_grad():
            outputs.append(model.eval()(image))
    assert all(torch.equal(a, b) for a, b in zip(*outputs))

    state = checkpoint['state_dict']
    state['backbone.blocks.0.attn.relative_position_index'] = swin_index(7).t().contiguous()
    torch.save(checkpoint, src)
    with pytest.raises(ValueError, match='relative_position_index.*7×7 window'):
        MODELS.build(dict(cfg, init_cfg=dict(type='Pretrained', checkpoint=str(src)))
                     ).init_weights()
    with pytest.raises(ValueError, match='not the index of a 5×5 window'):
        RVSA(arch=dict(TINY), img_size=128, window_size=5,
             init_cfg=dict(type='Pretrained', checkpoint=str(src))).init_weights()


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
    with pytest.raises(KeyError, match='no fpn1'):
        RVSA.convert_official_pyramid(mae_state_dict())


def test_load_finetuned_mmseg_checkpoint(tmp_path):
    torch.manual_seed(0)
    source = tiny_rvsa(final_norm=True)
    with torch.no_grad():
        for p in source.parameters():
            p.add_(0.05 * torch.randn_like(p))  # non-zero predictors and rel-pos tables
    state = {'backbone.' + k: v for k, v in source.state_dict().items()}
    state.update({'decode_head.conv_seg.weight': torch.zeros(5, 16, 1, 1),
                  'auxiliary_head.conv_seg.bias': torch.zeros(5),
                  'neck.levels.0.0.weight': torch.zeros(32, 32, 2, 2)})
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
    assert larger.blocks[0].attn.rel_pos_h.shape == (13, 16)  # window tables: fixed size


# ------------------------------------------------------------- detection pyramid source
def test_last_block_pyramid_source():
    """The published detection backbone: every level is the last block's output after
    the final LayerNorm (computed here block by block)."""
    torch.manual_seed(0)
    model = tiny_rvsa(pyramid_source='last_block').eval()
    assert model.final_norm and model.norm is not None
    with torch.no_grad():
        model.norm.weight.normal_()
        model.norm.bias.normal_()
        image = torch.randn(2, 3, 64, 96)
        levels = model(image)
        x = model.patch_embed(image) + model.position_embedding((4, 6))
        for block in model.blocks:
            x = block(x)
        expected = F.layer_norm(x, (32, ), model.norm.weight, model.norm.bias, eps=1e-6)
        pyramid = SimpleFeaturePyramid(in_channels=32, patch_size=16)(levels)
    assert len(levels) == 4
    assert all(torch.equal(level, expected.permute(0, 3, 1, 2)) for level in levels)
    assert [tuple(p.shape[-2:]) for p in pyramid] == [(16, 24), (8, 12), (4, 6), (2, 3)]
    blocks = tiny_rvsa(out_indices=(3, ), final_norm=True)
    blocks.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert torch.equal(blocks.eval()(image)[0], levels[0])
    with pytest.raises(ValueError, match='leave out_indices unset'):
        RVSA(arch=dict(TINY), img_size=64, pyramid_source='last_block', out_indices='vit12')
    with pytest.raises(ValueError, match='final_norm must be True'):
        RVSA(arch=dict(TINY), img_size=64, pyramid_source='last_block', final_norm=False)
    with pytest.raises(ValueError, match="pyramid_source must be one of"):
        RVSA(arch=dict(TINY), img_size=64, pyramid_source='last')


# --------------------------------------------------------------- shapes and gradients
@pytest.mark.parametrize('size', [512, 800])
@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_full_vit_b_output_shapes(vit_b, size):
    assert (vit_b.patch_size, vit_b.embed_dims) == (16, 768)
    assert vit_b.pos_embed.shape == (1, 1024, 768)
    assert vit_b.blocks[2].attn.rel_pos_h.shape == (63, 64)
    assert vit_b.blocks[0].attn.rel_pos_h.shape == (13, 64)
    assert vit_b.blocks[0].attn.relative_position_bias_table.shape == (169, 12)
    with torch.inference_mode():
        outs = vit_b(torch.randn(1, 3, size, size))
    grid = size // 16
    assert len(outs) == 4
    assert all(o.shape == (1, 768, grid, grid) and torch.isfinite(o).all() for o in outs)


@pytest.mark.parametrize('sampling_init', ['torch_default', 'zeros'])
def test_gradients_frozen_stages_and_checkpointing(sampling_init):
    torch.manual_seed(0)
    plain = tiny_rvsa(img_size=64, frozen_stages=1, sampling_init=sampling_init)
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
    # the predictors and tables receive gradients, also from the identity start
    for name in ('sampling_offsets.2.weight', 'sampling_angles.2.weight', 'rel_pos_h',
                 'relative_position_bias_table'):
        assert grads[0][f'blocks.1.attn.{name}'].abs().sum() > 0, name
    before = plain.blocks[1].attn.sampling_offsets[-1].weight.clone()
    torch.optim.SGD([p for p in plain.parameters() if p.requires_grad], lr=0.1).step()
    assert not torch.equal(plain.blocks[1].attn.sampling_offsets[-1].weight, before)


def test_every_block_has_one_fused_qkv_bias():
    """The plain ViT-B RVSA gives every block, window and global, one fused qkv bias with
    a key bias, as both published backbones do (RVSA repository: Semantic
    Segmentation/mmseg/models/backbones/vit_win_rvsa_v3_wsz7.py and Object
    Detection/mmdet/models/backbones/vit_win_rvsa_wsz7.py build ``nn.Linear(dim, 3 * dim,
    bias=qkv_bias)`` in both attentions): it has no bias-layout option."""
    model = tiny_rvsa()
    names = {n for n, _ in model.named_parameters()}
    for i in range(4):
        assert f'blocks.{i}.attn.qkv.bias' in names
        assert f'blocks.{i}.attn.q_bias' not in names and f'blocks.{i}.attn.v_bias' not in names
    assert not any(n.endswith('attn.qkv.bias') for n, _ in tiny_rvsa(
        qkv_bias=False).named_parameters())
    # the key third of the fused bias reaches the keys, unpadded tokens only
    attn = window_attention_modules(model)[0]
    randomise_projections(attn)
    randomise_tables(attn)
    x = torch.randn(1, 10, 12, 32)
    with torch.no_grad():
        got = attn(x)
        expected = reference_window_attention(attn, x, predicted_positions(attn, x))
        assert (got - expected).abs().max() < 2e-5
        attn.qkv.bias[32:64] = 0
        assert (attn(x) - got).abs().max() > 1e-3


def test_options_are_validated():
    with pytest.raises(ValueError, match="valid: \\['b', 'base'\\]"):
        RVSA(arch='huge')
    with pytest.raises(ValueError, match='arch dict needs'):
        RVSA(arch=dict(embed_dims=32, depth=4))
    with pytest.raises(ValueError, match='global_indices'):
        tiny_rvsa(global_indices=[7])
    with pytest.raises(ValueError, match='not divisible by the patch size'):
        tiny_rvsa()(torch.randn(1, 3, 70, 64))
    with pytest.raises(ValueError, match="sampling_init must be one of"):
        tiny_rvsa(sampling_init='identity')
    model = tiny_rvsa(global_indices=[0, 3], window_size=4)
    assert [b.window for b in model.blocks] == [False, True, True, False]
    assert model.blocks[1].attn.relative_position_bias_table.shape == (49, 2)
    assert model.layer_id('blocks.1.attn.sampling_scales.2.weight') == 2
    assert model.layer_id('blocks.1.attn.relative_position_bias_table') == 2
    assert model.layer_id('pos_embed') == 0
    no_decay = model.no_weight_decay_names()
    assert 'blocks.0.attn.rel_pos_h' in no_decay and 'blocks.1.attn.rel_pos_w' in no_decay
    # as in the published optimiser settings, the bias table is decayed
    assert 'blocks.1.attn.relative_position_bias_table' not in no_decay
