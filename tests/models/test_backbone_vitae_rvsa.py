"""ViTAE-NC RVSA against a direct computation of the official forward (normal cells with
the grouped-convolution branch, rotated window and global attention) in both window-block
bias layouts (separate q/v biases; one fused qkv bias with a key bias), its checkpoint
layouts (MAE pretraining, fine-tuned backbones of either bias layout), the convolution
branch's norm, full-size shapes and the frozen batch norm."""
import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.models.backbones.rvsa import RotatedWindowAttention, project_qkv
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
    ``out_indices`` as ``B×C×H×W`` maps (no final norm). The qkv bias of each attention
    is read as its module holds it: ``q_bias``/``v_bias`` with a zero key bias, or the
    fused ``qkv.bias`` (query, key and value thirds, projected before the padding)."""
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
        if blk.window:
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


@pytest.mark.parametrize('layout', ['qv', 'fused'])
@pytest.mark.parametrize('size', [(160, 160), (112, 160)])
def test_forward_matches_the_official_computation(size, layout):
    torch.manual_seed(0)
    model = tiny_vitae(img_size=size, window_bias_layout=layout).eval()
    randomise(model)
    assert [blk.window for blk in model.blocks] == [True, True, False]
    if layout == 'fused':  # the key third of the fused bias is random, not zero
        assert model.blocks[0].attn.qkv.bias[32:64].abs().min() > 0
    img = torch.randn(1, 3, *size)
    with torch.no_grad():
        got = model(img)
        expected = reference_forward(model, img)
    assert len(got) == 3
    for g, e in zip(got, expected):
        assert g.shape == e.shape == (1, 32, size[0] // 16, size[1] // 16)
        assert (g - e).abs().max() < 1e-5
    # every part of the cell shows: without the branch, the global q bias or the window
    # blocks' key bias the output moves (10×10 and 7×10 token maps are padded to 14×14:
    # padded keys are zero, so a key bias does not cancel in the softmax)
    with torch.no_grad():
        model.blocks[0].PCM[3].bias.add_(1.0)
        assert (model(img)[0] - got[0]).abs().max() > 1e-2
        model.blocks[0].PCM[3].bias.sub_(1.0)
        saved = model.blocks[2].attn.q_bias.clone()
        model.blocks[2].attn.q_bias.zero_()
        assert (model(img)[2] - got[2]).abs().max() > 1e-3
        model.blocks[2].attn.q_bias.copy_(saved)
        assert (model(img)[2] - got[2]).abs().max() < 1e-5  # restored
        if layout == 'fused':
            model.blocks[0].attn.qkv.bias[32:64] = 0
            assert (model(img)[0] - got[0]).abs().max() > 1e-3


@pytest.mark.parametrize('layout', ['qv', 'fused'])
def test_bias_parameters_of_each_layout(layout):
    """Global blocks: separate q/v biases and no key bias in both layouts; window
    blocks: the same (``'qv'``) or one fused bias whose key third is used (``'fused'``)."""
    model = tiny_vitae(window_bias_layout=layout)
    names = {n for n, _ in model.named_parameters()}
    assert {'blocks.2.attn.q_bias', 'blocks.2.attn.v_bias'} <= names
    assert 'blocks.2.attn.qkv.bias' not in names
    for i in (0, 1):
        assert ({f'blocks.{i}.attn.q_bias', f'blocks.{i}.attn.v_bias'} <= names) \
            is (layout == 'qv')
        assert (f'blocks.{i}.attn.qkv.bias' in names) is (layout == 'fused')
    attn = model.blocks[0].attn
    with torch.no_grad():
        if layout == 'qv':
            attn.q_bias.fill_(1.0)
            attn.v_bias.fill_(2.0)
        else:
            attn.qkv.bias.copy_(torch.repeat_interleave(torch.tensor([1.0, 3.0, 2.0]), 32))
        q, k, v = project_qkv(attn, torch.zeros(1, 2, 2, 32)).split(32, dim=-1)
    assert torch.all(q == 1) and torch.all(v == 2)
    assert torch.all(k == (0 if layout == 'qv' else 3))


def test_options_of_the_layout_and_the_branch_norm_are_validated():
    with pytest.raises(ValueError, match="window_bias_layout must be one of .'qv', 'fused'."):
        tiny_vitae(window_bias_layout='qkv')
    with pytest.raises(ValueError, match="pcm_norm must be one of .'BatchNorm2d', "
                                         "'SyncBatchNorm'."):
        tiny_vitae(pcm_norm='SyncBN')
    unbiased = tiny_vitae(qkv_bias=False, window_bias_layout='fused')
    assert not any(n.endswith(('.attn.q_bias', '.attn.v_bias', '.attn.qkv.bias'))
                   for n, _ in unbiased.named_parameters())


# ------------------------------------------------------------------------- checkpoints
def vitae_tensors(embed=32, depth=3, heads=2, grid=10, ws=7, seed=0, finetuned=False,
                  layout='qv'):
    """Backbone tensors in the official ViTAE-NC RVSA key layout, every tensor non-zero:
    the MAE pretraining file (class token, ``pos_embed`` with a class row, no RVSA
    parameters, ``mask_token`` and a decoder) or a fine-tuned backbone (RVSA
    parameters, built-in ``fpn1``/``fpn2`` pyramid, ``relative_position_index``).
    ``layout``: the window blocks' biases, separate ``attn.q_bias``/``attn.v_bias``
    (``'qv'``, the segmentation file and the published checkpoints) or one
    ``attn.qkv.bias`` of query, key and value biases (``'fused'``, REOBench's detection
    file); the global blocks have q/v biases in both."""
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
        if layout == 'fused' and (i + 1) % 3:  # a window block of the fused layout
            del t[p + 'attn.q_bias'], t[p + 'attn.v_bias']
            t[p + 'attn.qkv.bias'] = rnd(3 * embed)
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


def checkpoint_view(tensors, depth=3, heads=2, ws=7, out_indices=(0, 1, 2)):
    """The model of :func:`reference_forward`, read straight from a fine-tuned file's
    backbone tensors (no module of the package involved): which bias a block has is
    whatever the file holds (``attn.q_bias``/``attn.v_bias``, else ``attn.qkv.bias``)."""
    def layer(prefix, **extra):
        return SimpleNamespace(weight=tensors[prefix + 'weight'],
                               bias=tensors.get(prefix + 'bias'), **extra)

    blocks = []
    for i in range(depth):
        p = f'blocks.{i}.'
        window = (i + 1) % 3 != 0
        attn = SimpleNamespace(num_heads=heads, window_size=ws, qkv=layer(p + 'attn.qkv.'),
                               q_bias=tensors.get(p + 'attn.q_bias'),
                               v_bias=tensors.get(p + 'attn.v_bias'),
                               proj=layer(p + 'attn.proj.'),
                               rel_pos_h=tensors[p + 'attn.rel_pos_h'],
                               rel_pos_w=tensors[p + 'attn.rel_pos_w'])
        if window:
            attn.relative_position_bias_table = tensors[p + 'attn.relative_position_bias_table']
            for name in ('offsets', 'scales', 'angles'):
                setattr(attn, f'sampling_{name}', [None, None,
                                                   layer(p + f'attn.sampling_{name}.2.')])
        bn = layer(p + 'PCM.1.', running_mean=tensors[p + 'PCM.1.running_mean'],
                   running_var=tensors[p + 'PCM.1.running_var'], eps=1e-5)
        blocks.append(SimpleNamespace(
            window=window, attn=attn, norm1=layer(p + 'norm1.'), norm2=layer(p + 'norm2.'),
            PCM=[layer(p + 'PCM.0.'), bn, None, layer(p + 'PCM.3.')],
            mlp=SimpleNamespace(fc1=layer(p + 'mlp.fc1.'), fc2=layer(p + 'mlp.fc2.'))))
    return SimpleNamespace(patch_embed=SimpleNamespace(proj=layer('patch_embed.proj.')),
                           pos_embed=tensors['pos_embed'], patch_size=16, blocks=blocks,
                           out_indices=out_indices)


def finetuned_file(tmp_path, layout):
    """A fine-tuned Oriented R-CNN checkpoint of the given window-bias layout."""
    tensors = vitae_tensors(finetuned=True, layout=layout, seed=3)
    state = {'backbone.' + k: v for k, v in tensors.items()}
    state.update({'neck.lateral_convs.0.conv.weight': torch.zeros(256, 32, 1, 1),
                  'roi_head.bbox_head.fc_cls.weight': torch.zeros(21, 1024)})
    path = tmp_path / f'oriented_rcnn_vitae_{layout}.pth'
    torch.save({'state_dict': state, 'meta': {'epoch': 12}}, path)
    return tensors, str(path)


@pytest.mark.parametrize('layout', ['qv', 'fused'])
def test_each_official_layout_loads_strictly_and_matches_the_direct_computation(
        tmp_path, layout):
    """A random fine-tuned file of each layout: no missing or unexpected key under the
    matching ``window_bias_layout``, every tensor taken as it is, and the outputs equal
    the official forward computed from the file's tensors (a non-zero key bias in the
    fused layout)."""
    tensors, path = finetuned_file(tmp_path, layout)
    model = tiny_vitae(window_bias_layout=layout)
    assert model.load_pretrained(path) == []
    state = model.state_dict()
    dropped = {k for k in tensors if k.startswith(('fpn', 'norm.'))
               or k.endswith('relative_position_index')}
    assert set(state) == set(tensors) - dropped
    assert all(torch.equal(state[k], tensors[k]) for k in state)
    view = checkpoint_view(tensors)
    img = torch.randn(2, 3, 160, 160, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = model.eval()(img)
        expected = reference_forward(view, img)
    assert max((g - e).abs().max().item() for g, e in zip(got, expected)) <= 1e-5
    if layout == 'fused':
        key_bias = tensors['blocks.0.attn.qkv.bias'][32:64]
        assert key_bias.abs().min() > 0
        view.blocks[0].attn.qkv.bias = tensors['blocks.0.attn.qkv.bias'].clone()
        view.blocks[0].attn.qkv.bias[32:64] = 0  # what a q/v reading of the file gives
        with torch.no_grad():
            without_key_bias = reference_forward(view, img)
        assert (without_key_bias[0] - got[0]).abs().max() > 1e-3


@pytest.mark.parametrize('layout', ['qv', 'fused'])
def test_each_layout_is_refused_under_the_other_option(tmp_path, layout):
    other = 'fused' if layout == 'qv' else 'qv'
    _, path = finetuned_file(tmp_path, layout)
    model = tiny_vitae(window_bias_layout=other)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    message = (f"window_bias_layout='{layout}' of .*has window_bias_layout='{other}'.*"
               f"build it with window_bias_layout='{layout}'.*valid values: 'qv', 'fused'")
    with pytest.raises(ValueError, match=message):
        model.load_pretrained(path)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    with pytest.raises(ValueError, match=f"window_bias_layout='{layout}'"):
        MODELS.build(dict(type='ViTAENCRVSA', arch=dict(TINY), img_size=160,
                          out_indices=(0, 1, 2), window_bias_layout=other,
                          init_cfg=dict(type='Pretrained', checkpoint=path))).init_weights()


def test_pretraining_file_into_the_fused_layout(tmp_path):
    """The MAE file has q/v biases in every block: under ``'fused'`` the window blocks'
    ones are dropped and their fused bias starts at zero (REOBench's detection code loads
    the file non-strictly into that layout); the global block keeps its q/v biases."""
    tensors = vitae_tensors()
    path = tmp_path / 'vitae-b-checkpoint-1599-transform-no-average.pth'
    torch.save({'model': tensors}, path)
    model = tiny_vitae(window_bias_layout='fused')
    with torch.no_grad():
        for i in (0, 1):
            model.blocks[i].attn.qkv.bias.fill_(5.0)
    allowed = model.load_pretrained(str(path))
    assert allowed and not any('bias' in k and 'relative' not in k and 'sampling' not in k
                               for k in allowed)
    state = model.state_dict()
    for i in (0, 1):
        assert not state[f'blocks.{i}.attn.qkv.bias'].any()
        assert torch.equal(state[f'blocks.{i}.attn.qkv.weight'],
                           tensors[f'blocks.{i}.attn.qkv.weight'])
    assert torch.equal(state['blocks.2.attn.q_bias'], tensors['blocks.2.attn.q_bias'])
    assert torch.equal(state['blocks.2.attn.v_bias'], tensors['blocks.2.attn.v_bias'])
    # a fused pretraining file does not exist; one of the 'fused' layout is refused by 'qv'
    fused = vitae_tensors(layout='fused')
    torch.save({'model': fused}, path)
    with pytest.raises(ValueError, match="build it with window_bias_layout='fused'"):
        tiny_vitae().load_pretrained(str(path))


def test_sync_batch_norm_branch_same_layout_and_evaluation():
    """``pcm_norm='SyncBatchNorm'`` (the official detection cells): the same keys and the
    same outputs in evaluation; one training step runs on CPU in one process."""
    torch.manual_seed(0)
    plain = tiny_vitae().eval()
    randomise(plain)
    synced = tiny_vitae(pcm_norm='SyncBatchNorm')
    assert type(synced.blocks[0].PCM[1]) is torch.nn.SyncBatchNorm
    assert type(plain.blocks[0].PCM[1]) is torch.nn.BatchNorm2d
    synced.load_state_dict(plain.state_dict(), strict=True)
    img = torch.randn(2, 3, 160, 160)
    with torch.no_grad():
        assert all(torch.equal(a, b) for a, b in zip(plain(img), synced.eval()(img)))
    synced.train()
    sum(o.square().mean() for o in synced(img)).backward()
    assert synced.blocks[0].PCM[1].weight.grad.abs().sum() > 0
    assert not torch.equal(synced.blocks[0].PCM[1].running_mean,
                           plain.blocks[0].PCM[1].running_mean)


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
