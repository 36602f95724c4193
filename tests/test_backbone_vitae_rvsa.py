"""ViTAE-NC RVSA against a direct computation of the official forward (normal cells with
the grouped-convolution branch, q/v biases, rotated window and global attention), its
checkpoint layouts (MAE pretraining, published fine-tuned backbones), full-size shapes
and the frozen batch norm."""
import math

import pytest
import torch
import torch.nn.functional as F

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.models.backbones.rvsa import RotatedWindowAttention
from reobench_mm.models.backbones.vitae_rvsa import ViTAENCRVSA
from reobench_mm.registry import MODELS
from test_backbone_rvsa import (predicted_positions, randomise_projections,
                                randomise_tables, reference_window_attention, split_qkv,
                                swin_index)

TINY = dict(embed_dims=32, depth=3, num_heads=2)


def tiny_vitae(**kwargs) -> ViTAENCRVSA:
    kwargs.setdefault('img_size', 160)
    kwargs.setdefault('out_indices', (0, 1, 2))
    return ViTAENCRVSA(arch=dict(TINY), **kwargs)


def randomise(model, seed=0):
    """Every parameter and batch-norm statistic non-trivial, so that each term of the
    forward shows in the output."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for block in model.blocks:
            randomise_projections(block.attn)
            randomise_tables(block.attn)
            if isinstance(block.attn, RotatedWindowAttention):
                for predictor in (block.attn.sampling_offsets, block.attn.sampling_scales,
                                  block.attn.sampling_angles):
                    conv = predictor[-1]
                    conv.weight.copy_(0.05 * torch.randn(conv.weight.shape, generator=gen))
                    conv.bias.copy_(0.1 * torch.randn(conv.bias.shape, generator=gen))
            bn = block.PCM[1]
            bn.running_mean.copy_(0.1 * torch.randn(bn.running_mean.shape, generator=gen))
            bn.running_var.copy_(0.5 + torch.rand(bn.running_var.shape, generator=gen))
            bn.weight.copy_(1 + 0.2 * torch.randn(bn.weight.shape, generator=gen))
            bn.bias.copy_(0.2 * torch.randn(bn.bias.shape, generator=gen))
            for norm in (block.norm1, block.norm2):
                norm.weight.copy_(1 + 0.2 * torch.randn(norm.weight.shape, generator=gen))
                norm.bias.copy_(0.2 * torch.randn(norm.bias.shape, generator=gen))


# ------------------------------------------------------------- the official forward
def reference_global_attention(attn, x):
    """Global attention of the official ViTAE cell: q/v biases, ``q`` scaled first and
    used for both the logits and the decomposed relative-position terms (tables of the
    model's grid, indexed by query minus key row/column)."""
    B, H, W, C = x.shape
    heads, hd = attn.num_heads, C // attn.num_heads
    q, k, v = (t.reshape(B, H * W, heads, hd) for t in split_qkv(attn, x))
    q = q * hd**-0.5
    coords = [(i, j) for i in range(H) for j in range(W)]
    out = torch.zeros(B, H * W, heads, hd)
    for b in range(B):
        for h in range(heads):
            logits = q[b, :, h] @ k[b, :, h].t()
            for n, (i1, j1) in enumerate(coords):
                for m, (i2, j2) in enumerate(coords):
                    logits[n, m] += q[b, n, h] @ attn.rel_pos_h[i1 - i2 + H - 1]
                    logits[n, m] += q[b, n, h] @ attn.rel_pos_w[j1 - j2 + W - 1]
            out[b, :, h] = torch.softmax(logits, -1) @ v[b, :, h]
    return out.reshape(B, H, W, C) @ attn.proj.weight.t() + attn.proj.bias


def reference_pcm(pcm, x, square):
    """The normal cell's convolution branch on tokens ``x`` (``B×N×C``); ``square`` as
    the official cell: the tokens viewed as a ``√N × √N`` map."""
    B, N, C = x.shape
    H, W = square
    fmap = x.reshape(B, H, W, C).permute(0, 3, 1, 2)
    y = F.conv2d(fmap, pcm[0].weight, pcm[0].bias, padding=1, groups=C // 4)
    y = F.batch_norm(y, pcm[1].running_mean, pcm[1].running_var, pcm[1].weight, pcm[1].bias,
                     training=False, eps=pcm[1].eps)
    y = F.conv2d(y * torch.sigmoid(y), pcm[3].weight, pcm[3].bias, padding=1, groups=C // 4)
    return y.permute(0, 2, 3, 1).reshape(B, N, C)


def reference_forward(model, img):
    """The official ``ViTAE_NC_Win_RVSA_V3_WSZ7.forward_features`` without its pyramid:
    patch embedding, position embedding, normal cells, the block outputs of
    ``out_indices`` as ``B×C×H×W`` maps (no final norm)."""
    p = model.patch_embed.proj
    x = F.conv2d(img, p.weight, p.bias, stride=model.patch_size)
    B, C, H, W = x.shape
    x = x.flatten(2).transpose(1, 2) + model.pos_embed
    side = int(math.sqrt(H * W))
    square = (side, side) if side * side == H * W else (H, W)
    outs = []
    for i, blk in enumerate(model.blocks):
        conv = reference_pcm(blk.PCM, x, square)
        a = F.layer_norm(x, (C, ), blk.norm1.weight, blk.norm1.bias, 1e-6).reshape(B, H, W, C)
        if isinstance(blk.attn, RotatedWindowAttention):
            a = reference_window_attention(blk.attn, a, predicted_positions(blk.attn, a))
        else:
            a = reference_global_attention(blk.attn, a)
        x = x + a.reshape(B, H * W, C) + conv
        m = F.layer_norm(x, (C, ), blk.norm2.weight, blk.norm2.bias, 1e-6)
        m = F.linear(F.gelu(F.linear(m, blk.mlp.fc1.weight, blk.mlp.fc1.bias)),
                     blk.mlp.fc2.weight, blk.mlp.fc2.bias)
        x = x + m
        if i in model.out_indices:
            outs.append(x.transpose(1, 2).reshape(B, C, H, W))
    return outs


@pytest.mark.parametrize('size', [(160, 160), (112, 160)])
def test_forward_matches_the_official_computation(size):
    torch.manual_seed(0)
    model = tiny_vitae(img_size=size).eval()
    randomise(model)
    assert [blk.window for blk in model.blocks] == [True, True, False]
    img = torch.randn(1, 3, *size)
    with torch.no_grad():
        got = model(img)
        expected = reference_forward(model, img)
    assert len(got) == 3
    for g, e in zip(got, expected):
        assert g.shape == e.shape == (1, 32, size[0] // 16, size[1] // 16)
        assert (g - e).abs().max() < 1e-5
    # every part of the cell shows: without the branch or the q bias the output moves
    with torch.no_grad():
        model.blocks[0].PCM[3].bias.add_(1.0)
        assert (model(img)[0] - got[0]).abs().max() > 1e-2
        model.blocks[0].PCM[3].bias.sub_(1.0)
        model.blocks[2].attn.q_bias.zero_()
        assert (model(img)[2] - got[2]).abs().max() > 1e-3


def test_key_bias_is_zero_and_not_a_parameter():
    model = tiny_vitae()
    names = {n for n, _ in model.named_parameters()}
    for i in range(3):
        assert {f'blocks.{i}.attn.q_bias', f'blocks.{i}.attn.v_bias'} <= names
        assert f'blocks.{i}.attn.qkv.bias' not in names
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.q_bias.fill_(1.0)
        attn.v_bias.fill_(2.0)
        q, k, v = split_qkv(attn, torch.zeros(1, 2, 2, 32))
    assert torch.all(q == 1) and torch.all(k == 0) and torch.all(v == 2)


# ------------------------------------------------------------------------- checkpoints
def vitae_tensors(embed=32, depth=3, heads=2, grid=10, ws=7, seed=0, finetuned=False):
    """Backbone tensors in the official ViTAE-NC RVSA key layout, every tensor non-zero:
    the MAE pretraining file (class token, ``pos_embed`` with a class row, no RVSA
    parameters, ``mask_token`` and a decoder) or a fine-tuned backbone (RVSA
    parameters, built-in ``fpn1``/``fpn2`` pyramid, ``relative_position_index``)."""
    gen = torch.Generator().manual_seed(seed)
    hd, hidden, groups = embed // heads, 4 * embed, embed // 4

    def rnd(*shape):
        return 0.1 * torch.randn(shape, generator=gen)

    t = {'patch_embed.proj.weight': rnd(embed, 3, 16, 16), 'patch_embed.proj.bias': rnd(embed),
         'norm.weight': 1 + rnd(embed), 'norm.bias': rnd(embed)}
    if finetuned:
        t['pos_embed'] = rnd(1, grid * grid, embed)
        t.update({'fpn1.0.weight': rnd(embed, embed, 2, 2), 'fpn1.0.bias': rnd(embed),
                  'fpn1.1.ln.weight': 1 + rnd(embed), 'fpn1.1.ln.bias': rnd(embed),
                  'fpn1.3.weight': rnd(embed, embed, 2, 2), 'fpn1.3.bias': rnd(embed),
                  'fpn2.0.weight': rnd(embed, embed, 2, 2), 'fpn2.0.bias': rnd(embed)})
    else:
        t.update({'cls_token': rnd(1, 1, embed), 'mask_token': rnd(1, 1, embed),
                  'pos_embed': rnd(1, 1 + 14 * 14, embed),
                  'decoder_embed.weight': rnd(16, embed)})
    for i in range(depth):
        p = f'blocks.{i}.'
        t.update({p + 'norm1.weight': 1 + rnd(embed), p + 'norm1.bias': rnd(embed),
                  p + 'attn.qkv.weight': rnd(3 * embed, embed),
                  p + 'attn.q_bias': rnd(embed), p + 'attn.v_bias': rnd(embed),
                  p + 'attn.proj.weight': rnd(embed, embed), p + 'attn.proj.bias': rnd(embed),
                  p + 'norm2.weight': 1 + rnd(embed), p + 'norm2.bias': rnd(embed),
                  p + 'mlp.fc1.weight': rnd(hidden, embed), p + 'mlp.fc1.bias': rnd(hidden),
                  p + 'mlp.fc2.weight': rnd(embed, hidden), p + 'mlp.fc2.bias': rnd(embed),
                  p + 'PCM.0.weight': rnd(hidden, embed // groups, 3, 3),
                  p + 'PCM.0.bias': rnd(hidden), p + 'PCM.1.weight': 1 + rnd(hidden),
                  p + 'PCM.1.bias': rnd(hidden), p + 'PCM.1.running_mean': rnd(hidden),
                  p + 'PCM.1.running_var': 1 + rnd(hidden).abs(),
                  p + 'PCM.1.num_batches_tracked': torch.tensor(7),
                  p + 'PCM.3.weight': rnd(embed, hidden // groups, 3, 3),
                  p + 'PCM.3.bias': rnd(embed)})
        if not finetuned:
            continue
        if (i + 1) % 3 == 0:
            t.update({p + 'attn.rel_pos_h': rnd(2 * grid - 1, hd),
                      p + 'attn.rel_pos_w': rnd(2 * grid - 1, hd)})
            continue
        t.update({p + 'attn.rel_pos_h': rnd(2 * ws - 1, hd),
                  p + 'attn.rel_pos_w': rnd(2 * ws - 1, hd),
                  p + 'attn.relative_position_bias_table': rnd((2 * ws - 1)**2, heads),
                  p + 'attn.relative_position_index': swin_index(ws)})
        for name, out in (('offsets', 2 * heads), ('scales', 2 * heads), ('angles', heads)):
            t.update({p + f'attn.sampling_{name}.2.weight': rnd(out, embed, 1, 1),
                      p + f'attn.sampling_{name}.2.bias': rnd(out)})
    return t


def test_mae_pretraining_file_loads_with_only_the_rvsa_parameters_missing(tmp_path):
    tensors = vitae_tensors()
    path = tmp_path / 'vitae-b-checkpoint-1599-transform-no-average.pth'
    torch.save({'model': tensors, 'epoch': 1599}, path)
    model = tiny_vitae()
    allowed = model.load_pretrained(str(path))
    assert allowed and all(('sampling_' in k or 'rel_pos' in k
                            or 'relative_position_bias_table' in k) for k in allowed)
    state = model.state_dict()
    for key in [k for k in tensors if k.startswith('blocks.')]:
        assert torch.equal(state[key], tensors[key]), key
    assert state['blocks.1.PCM.1.num_batches_tracked'] == 7
    assert model.pos_embed.shape == (1, 100, 32)  # class row dropped, 14×14 → 10×10


def test_pretraining_file_without_batch_counter_and_wrong_file_rejected(tmp_path):
    tensors = {k: v for k, v in vitae_tensors().items() if 'num_batches_tracked' not in k}
    path = tmp_path / 'old.pth'
    torch.save({'model': tensors}, path)
    tiny_vitae().load_pretrained(str(path))  # allowed: an old file lacks the counter
    broken = {k: v for k, v in vitae_tensors().items() if 'PCM.3' not in k}
    torch.save({'model': broken}, path)
    with pytest.raises(KeyError, match='missing keys.*PCM.3'):
        tiny_vitae().load_pretrained(str(path))
    # a plain ViT RVSA file (fused qkv bias, no PCM) is refused, not half-loaded
    plain = {k: v for k, v in vitae_tensors().items() if 'PCM' not in k}
    plain['blocks.0.attn.qkv.bias'] = torch.zeros(96)
    torch.save({'model': plain}, path)
    with pytest.raises(KeyError, match='unexpected keys.*qkv.bias'):
        tiny_vitae().load_pretrained(str(path))


def test_published_finetuned_backbone_loads_strictly(tmp_path):
    tensors = vitae_tensors(finetuned=True)
    state = {'backbone.' + k: v for k, v in tensors.items()}
    state['decode_head.conv_seg.weight'] = torch.zeros(5, 512, 1, 1)
    path = tmp_path / 'upernet_vitae_nc_rvsa.pth'
    torch.save({'state_dict': state, 'meta': {}}, path)
    model = tiny_vitae()
    assert model.load_pretrained(str(path)) == []
    loaded = model.state_dict()
    dropped = {k for k in tensors if k.startswith(('fpn', 'norm.'))
               or k.endswith('relative_position_index')}
    assert set(loaded) == set(tensors) - dropped
    assert all(torch.equal(loaded[k], tensors[k]) for k in loaded)


# ------------------------------------------------------------------ full size, training
def test_full_vitae_b_layout():
    model = MODELS.build(dict(type='ViTAENCRVSA', arch='b', img_size=512))
    state = model.state_dict()
    assert state['blocks.0.PCM.0.weight'].shape == (3072, 4, 3, 3)  # groups 192
    assert state['blocks.0.PCM.3.weight'].shape == (768, 16, 3, 3)
    assert state['blocks.2.attn.rel_pos_h'].shape == (63, 64)  # global block, 32×32 grid
    assert state['blocks.0.attn.relative_position_bias_table'].shape == (169, 12)
    assert model.out_indices == (3, 5, 7, 11) and model.global_indices == (2, 5, 8, 11)
    with torch.no_grad():
        outs = model.eval()(torch.zeros(1, 3, 128, 128))
    assert [tuple(o.shape) for o in outs] == [(1, 768, 8, 8)] * 4


def test_frozen_stages_freeze_the_batch_norm_and_gradients_flow():
    model = tiny_vitae(frozen_stages=1, drop_path_rate=0.1)
    model.train()
    assert not model.blocks[0].PCM[1].training and model.blocks[1].PCM[1].training
    assert not any(p.requires_grad for p in model.blocks[0].parameters())
    before = model.blocks[0].PCM[1].running_mean.clone()
    sum(o.sum() for o in model(torch.randn(2, 3, 160, 160))).backward()
    assert torch.equal(model.blocks[0].PCM[1].running_mean, before)
    grads = [p.grad for n, p in model.named_parameters() if n.startswith('blocks.1.')]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert model.blocks[1].attn.q_bias.grad.abs().sum() > 0
