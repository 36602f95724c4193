"""CLIP visual tower backbone (RemoteCLIP, GeoRSCLIP): equivalence with open_clip,
official checkpoint layouts, input sizes, training behaviour."""
import open_clip
import pytest
import torch
from open_clip.model import CLIP, CLIPTextCfg, CLIPVisionCfg

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.models.backbones.clip_vit import CLIPVisionTransformer
from reobench_mm.registry import MODELS

TINY = dict(embed_dims=32, depth=4, num_heads=2, patch_size=32)


def _perturb_(model: torch.nn.Module, seed: int, std: float = 0.02) -> None:
    """Add noise to the 1-D parameters (biases, norms, class embedding) so that the
    zero biases and unit norm weights of a fresh initialisation cannot hide a wrongly
    mapped tensor; the matrices are random already."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.ndim <= 1:
                param.add_(torch.randn(param.shape, generator=gen) * std)


def _tiny_open_clip(patch_size: int = 32, width: int = 32, layers: int = 4,
                    image_size: int = 64, quick_gelu: bool = True, seed: int = 0) -> CLIP:
    torch.manual_seed(seed)
    model = CLIP(embed_dim=16,
                 vision_cfg=CLIPVisionCfg(layers=layers, width=width, head_width=16,
                                          patch_size=patch_size, image_size=image_size),
                 text_cfg=CLIPTextCfg(context_length=8, vocab_size=64, width=32, heads=2,
                                      layers=2),
                 quick_gelu=quick_gelu)
    _perturb_(model, seed)
    return model.eval()


def _save(state_dict: dict, path) -> str:
    torch.save(dict(state_dict), str(path))
    return str(path)


def _build(path=None, **kwargs) -> CLIPVisionTransformer:
    if path is not None:
        kwargs['init_cfg'] = dict(type='Pretrained', checkpoint=str(path))
    model = MODELS.build(dict(type='CLIPVisionTransformer', **kwargs))
    model.init_weights()
    return model.eval()


# ------------------------------------------------------------------ open_clip equivalence
@pytest.fixture(scope='module')
def b32_official(tmp_path_factory):
    """A randomly initialised open_clip ViT-B-32 (its own config: exact GELU) and its
    flat state dict (text tower included) saved as an official file."""
    torch.manual_seed(0)
    reference = open_clip.create_model('ViT-B-32', pretrained=None).eval()
    _perturb_(reference, seed=1)
    path = _save(reference.state_dict(), tmp_path_factory.mktemp('b32') / 'clip_b32.pt')
    return reference, path


def _compare(model, reference, x, indices, final_norm=False):
    with torch.no_grad():
        ours = model(x)
        theirs = reference.visual.forward_intermediates(
            x, indices=indices, intermediates_only=True, output_fmt='NCHW',
            normalize_intermediates=final_norm)['image_intermediates']
    assert len(ours) == len(theirs) == len(indices)
    diffs = []
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        diffs.append((a - b).abs().max().item())
    print(f'max abs difference per level vs open_clip: {diffs}')
    assert max(diffs) < 1e-5, diffs
    return ours


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_equivalence_vit_b32_gelu_final_norm(b32_official):
    """ViT-B/32 with open_clip's GELU, ln_post applied to every level."""
    reference, path = b32_official
    model = _build(path, arch='ViT-B/32', act_layer='gelu', final_norm=True)
    assert model.out_indices == (3, 5, 7, 11)
    ours = _compare(model, reference, torch.randn(1, 3, 224, 224), [3, 5, 7, 11],
                    final_norm=True)
    assert all(o.shape == (1, 768, 7, 7) for o in ours)


@pytest.mark.slow  # 7 s or more: left out of make test-fast
def test_equivalence_vit_l14(tmp_path, b32_official):
    """Full-size ViT-L/14 (QuickGELU, the OpenAI/RemoteCLIP activation) at 224×224."""
    torch.manual_seed(0)
    reference = open_clip.create_model('ViT-L-14-quickgelu', pretrained=None).eval()
    _perturb_(reference, seed=2)
    path = _save(reference.state_dict(), tmp_path / 'clip_l14.pt')  # text tower included
    del reference.transformer, reference.token_embedding  # free the text tower
    model = _build(path, arch='ViT-L/14')  # preset default: QuickGELU
    assert model.act_layer == 'quick_gelu'
    assert model.out_indices == (5, 11, 17, 23)
    assert model.patch_size == 14 and model.embed_dims == 1024
    ours = _compare(model, reference, torch.randn(1, 3, 224, 224), [5, 11, 17, 23])
    assert all(o.shape == (1, 1024, 16, 16) for o in ours)
    # ViT-B/32 weights do not fit: the error names the missing blocks; nothing is loaded
    qkv = model.vit.blocks[0].attn.qkv.weight.detach().clone()
    with pytest.raises(KeyError, match=r'missing keys.*vit\.blocks\.12\.'):
        model.load_pretrained(b32_official[1])
    assert torch.equal(model.vit.blocks[0].attn.qkv.weight, qkv)


# ------------------------------------------------------------------ checkpoint layouts
def _expected_tensors(official: dict) -> dict:
    """Model key → official tensor, written out by hand for the tiny 4-block tower."""
    expected = {
        'vit.cls_token': official['visual.class_embedding'].reshape(1, 1, -1),
        'vit.pos_embed': official['visual.positional_embedding'][None],
        'vit.patch_embed.proj.weight': official['visual.conv1.weight'],
        'vit.norm_pre.weight': official['visual.ln_pre.weight'],
        'vit.norm_pre.bias': official['visual.ln_pre.bias'],
        'vit.norm.weight': official['visual.ln_post.weight'],
        'vit.norm.bias': official['visual.ln_post.bias'],
    }
    pairs = [('ln_1', 'norm1'), ('attn.out_proj', 'attn.proj'), ('ln_2', 'norm2'),
             ('mlp.c_fc', 'mlp.fc1'), ('mlp.c_proj', 'mlp.fc2')]
    for i in range(4):
        src, dst = f'visual.transformer.resblocks.{i}.', f'vit.blocks.{i}.'
        expected[dst + 'attn.qkv.weight'] = official[src + 'attn.in_proj_weight']
        expected[dst + 'attn.qkv.bias'] = official[src + 'attn.in_proj_bias']
        for old, new in pairs:
            for kind in ('weight', 'bias'):
                expected[f'{dst}{new}.{kind}'] = official[f'{src}{old}.{kind}']
    return expected


@pytest.mark.parametrize('layout', ['openai', 'georsclip', 'wrapped', 'fp16'])
def test_official_layouts_load_completely(tmp_path, layout):
    official = _tiny_open_clip().state_dict()
    if layout == 'georsclip':  # GeoRSCLIP names the visual tower image_backbone
        saved = {('image_backbone.' + k[len('visual.'):] if k.startswith('visual.') else k): v
                 for k, v in official.items()}
        assert not any(k.startswith('visual.') for k in saved)
    elif layout == 'wrapped':  # open_clip training checkpoint: DDP prefix + state_dict
        saved = {'epoch': 3, 'state_dict': {'module.' + k: v for k, v in official.items()}}
    elif layout == 'fp16':  # OpenAI-released weights are half precision
        official = {k: v.half() for k, v in official.items()}
        saved = dict(official)
    else:
        saved = dict(official)
    path = tmp_path / f'{layout}.pt'
    torch.save(saved, str(path))
    model = _build(None, arch=TINY, img_size=64)
    assert model.load_pretrained(str(path)) == []  # no missing key at all
    expected = _expected_tensors(official)
    state = model.state_dict()
    assert set(state) == set(expected)
    for key, value in expected.items():
        assert torch.equal(state[key], value.float()), key


def test_converter_drops_text_tower_and_projection():
    official = _tiny_open_clip().state_dict()
    converted = CLIPVisionTransformer.convert_official_state_dict(official)
    assert all(k.startswith('vit.') for k in converted)
    assert 'text_projection' in official and 'visual.proj' in official
    assert len(converted) == len(_expected_tensors(official))


@pytest.mark.parametrize('extra', ['visual.attn_pool.query',
                                   'visual.transformer.resblocks.0.ls_1.gamma',
                                   'image_backbone.trunk.head.weight'])
def test_unknown_visual_keys_are_reported(tmp_path, extra):
    official = dict(_tiny_open_clip().state_dict())
    official[extra] = torch.zeros(32)
    path = _save(official, tmp_path / 'extra.pt')
    model = _build(None, arch=TINY, img_size=64)
    expected_name = 'visual.' + extra.split('.', 1)[1]
    with pytest.raises(KeyError, match='1 unexpected keys.*' + expected_name.replace('.', r'\.')):
        model.load_pretrained(path)


def test_wrong_width_names_shapes(tmp_path):
    path = _save(_tiny_open_clip(width=32).state_dict(), tmp_path / 'w32.pt')
    model = _build(None, arch=dict(TINY, embed_dims=64, num_heads=4), img_size=64)
    with pytest.raises(ValueError, match=r'shape mismatches.*checkpoint \(1, 1, 32\) vs '
                                         r'model \(1, 1, 64\)'):
        model.load_pretrained(path)


def test_wrong_depth_names_blocks(tmp_path):
    path = _save(_tiny_open_clip(layers=4).state_dict(), tmp_path / 'd4.pt')
    deeper = _build(None, arch=dict(TINY, depth=6), img_size=64)
    with pytest.raises(KeyError, match=r'missing keys.*vit\.blocks\.4\.'):
        deeper.load_pretrained(path)
    path = _save(_tiny_open_clip(layers=6).state_dict(), tmp_path / 'd6.pt')
    shallower = _build(None, arch=TINY, img_size=64)
    with pytest.raises(KeyError, match=r'unexpected keys.*vit\.blocks\.4\.'):
        shallower.load_pretrained(path)


def test_checkpoint_without_visual_tower(tmp_path):
    path = _save({'transformer.resblocks.0.ln_1.weight': torch.ones(4),
                  'logit_scale': torch.ones([])}, tmp_path / 'text_only.pt')
    model = _build(None, arch=TINY, img_size=64)
    with pytest.raises(KeyError, match='no CLIP visual-tower keys'):
        model.load_pretrained(path)


# ------------------------------------------------------------------ input sizes
@pytest.mark.parametrize('patch_size,train_size,new_size,grid',
                         [(32, 224, 512, 16), (14, 224, 448, 32), (32, 448, 224, 7)])
def test_position_embedding_interpolated_at_load(tmp_path, patch_size, train_size,
                                                 new_size, grid):
    reference = _tiny_open_clip(patch_size=patch_size, image_size=train_size)
    official = reference.state_dict()
    path = _save(official, tmp_path / 'ckpt.pt')
    model = _build(path, arch=dict(TINY, patch_size=patch_size), img_size=new_size)
    assert model.grid_size == (grid, grid)
    # open_clip's own loader resizes the same way (bicubic, antialiased, class row apart)
    resized = dict(official)
    open_clip.model.resize_pos_embed(
        resized, _tiny_open_clip(patch_size=patch_size, image_size=new_size))
    expected = resized['visual.positional_embedding'][None]
    assert model.vit.pos_embed.shape == (1, grid * grid + 1, 32)
    assert (model.vit.pos_embed - expected).abs().max().item() < 1e-6
    assert torch.equal(model.vit.pos_embed[0, 0], official['visual.positional_embedding'][0])
    with torch.no_grad():
        outs = model(torch.randn(1, 3, new_size, new_size))
    assert all(o.shape == (1, 32, grid, grid) for o in outs)
    assert all(torch.isfinite(o).all() for o in outs)


@pytest.mark.parametrize('patch_size,size,grid',
                         [(32, 512, 16), (32, 800, 25), (14, 512, 36), (14, 800, 57)])
def test_output_shapes_dense_sizes(patch_size, size, grid):
    torch.manual_seed(0)
    model = _build(None, arch=dict(TINY, patch_size=patch_size))  # pos-embed laid out for 224
    with torch.no_grad():
        outs = model(torch.randn(1, 3, size, size))
    assert len(outs) == 4
    assert all(o.shape == (1, 32, grid, grid) for o in outs)


def test_patch14_floors_like_the_strided_convolution():
    """512 px with patch 14: the last 8 rows/columns are ignored, as by CLIP's conv1."""
    torch.manual_seed(0)
    model = _build(None, arch=dict(TINY, patch_size=14))
    x = torch.randn(1, 3, 512, 512)
    with torch.no_grad():
        full = model(x)
        cropped = model(x[..., :504, :504].contiguous())
    for a, b in zip(full, cropped):
        assert a.shape == (1, 32, 36, 36)
        assert torch.equal(a, b)
    padded = _build(None, arch=dict(TINY, patch_size=14), dynamic_img_pad=True)
    with torch.no_grad():
        assert all(o.shape == (1, 32, 37, 37) for o in padded(x))


@pytest.mark.parametrize('quick_gelu', [True, False])
def test_tiny_equivalence_batch(tmp_path, quick_gelu):
    """Small towers of both activations, batch of 2, every block output."""
    reference = _tiny_open_clip(patch_size=32, image_size=224, quick_gelu=quick_gelu)
    path = _save(reference.state_dict(), tmp_path / 'ckpt.pt')
    model = _build(path, arch=dict(TINY, act_layer='quick_gelu' if quick_gelu else 'gelu'),
                   out_indices=(0, 1, 2, 3))
    ours = _compare(model, reference, torch.randn(2, 3, 224, 224), [0, 1, 2, 3])
    assert all(o.shape == (2, 32, 7, 7) for o in ours)


# ------------------------------------------------------------------ options and training
def test_presets_and_options():
    assert CLIPVisionTransformer.resolve_arch('ViT-L-14') == \
        CLIPVisionTransformer.arch_zoo['ViT-L/14']
    for name, (patch, dims, depth, heads, act) in {
            'ViT-B/32': (32, 768, 12, 12, 'quick_gelu'),
            'ViT-L/14': (14, 1024, 24, 16, 'quick_gelu'),
            'ViT-H/14': (14, 1280, 32, 16, 'gelu')}.items():
        cfg = CLIPVisionTransformer.arch_zoo[name]
        assert (cfg['patch_size'], cfg['embed_dims'], cfg['depth'], cfg['num_heads'],
                cfg['act_layer']) == (patch, dims, depth, heads, act)
    with pytest.raises(ValueError, match='valid presets'):
        CLIPVisionTransformer(arch='ViT-B/16')
    with pytest.raises(ValueError, match='missing'):
        CLIPVisionTransformer(arch=dict(embed_dims=32, depth=2))
    with pytest.raises(ValueError, match="'gelu' or 'quick_gelu'"):
        CLIPVisionTransformer(arch=TINY, act_layer='relu')
    model = CLIPVisionTransformer(arch=TINY, img_size=64)
    assert model.vit.patch_embed.proj.bias is None  # conv1 has no bias
    assert model.vit.norm_pre.eps == 1e-5 and model.vit.norm.eps == 1e-5
    assert model.vit.blocks[0].attn.qkv.bias is not None
    assert model.out_indices == (0, 1, 2, 3)


def _quick_gelu(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


def _exact_gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.erf(x / 2.0**0.5))


@pytest.mark.parametrize('arch,act_layer,formula', [
    ('ViT-B/32', None, _quick_gelu),  # OpenAI-initialised (RemoteCLIP, GeoRSCLIP B/32)
    ('ViT-L/14', None, _quick_gelu),  # OpenAI-initialised (RemoteCLIP L/14)
    ('ViT-H/14', None, _exact_gelu),  # LAION-initialised (GeoRSCLIP H/14)
    ('ViT-B/32', 'gelu', _exact_gelu),  # open_clip's plain 'ViT-B-32' config
    ('ViT-H/14', 'quick_gelu', _quick_gelu),
    (TINY, None, _quick_gelu),  # dict archs default to QuickGELU
])
def test_each_preset_builds_its_activation(arch, act_layer, formula):
    """The MLP activation of every block, applied to a test vector, against the formula
    (the towers are built on the meta device: only the stateless activations run)."""
    with torch.device('meta'):
        model = CLIPVisionTransformer(arch=arch, act_layer=act_layer)
    x = torch.linspace(-6.0, 6.0, 241, dtype=torch.float64)
    assert (_quick_gelu(x) - _exact_gelu(x)).abs().max() > 1e-2  # the two are distinct
    expected = formula(x)
    for block in model.vit.blocks:
        assert (block.mlp.act(x) - expected).abs().max().item() < 1e-12
    assert model.act_layer == ('quick_gelu' if formula is _quick_gelu else 'gelu')


def test_gradient_step_cpu():
    torch.manual_seed(0)
    model = MODELS.build(dict(type='CLIPVisionTransformer', arch=TINY, img_size=64,
                              out_indices=(1, 3), drop_path_rate=0.1, with_cp=True))
    model.init_weights()
    model.train()
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 3, 64, 64)
    before = model.vit.blocks[0].mlp.fc1.weight.detach().clone()
    loss = sum(o.pow(2).mean() for o in model(x))
    loss.backward()
    for name, param in model.named_parameters():
        if name.startswith('vit.norm.'):  # ln_post is used only with final_norm=True
            assert param.grad is None
        else:
            assert param.grad is not None and torch.isfinite(param.grad).all(), name
    optim.step()
    assert not torch.equal(before, model.vit.blocks[0].mlp.fc1.weight)


def test_frozen_stages():
    model = CLIPVisionTransformer(arch=TINY, img_size=64, frozen_stages=2)
    model.train()
    frozen = ['vit.cls_token', 'vit.pos_embed', 'vit.patch_embed.proj.weight',
              'vit.norm_pre.weight', 'vit.norm_pre.bias']
    params = dict(model.named_parameters())
    for name in frozen:
        assert not params[name].requires_grad, name
    for name, param in params.items():
        block = name.split('.')[2] if name.startswith('vit.blocks.') else None
        if block in ('0', '1'):
            assert not param.requires_grad, name
        elif block is not None or name.startswith('vit.norm.'):
            assert param.requires_grad, name
    assert not model.vit.blocks[1].training and model.vit.blocks[2].training
    assert not model.vit.norm_pre.training
    loss = sum(o.sum() for o in model(torch.randn(1, 3, 64, 64)))
    loss.backward()
    assert model.vit.blocks[0].attn.qkv.weight.grad is None
    assert model.vit.blocks[2].attn.qkv.weight.grad is not None
    assert model.layer_id('vit.pos_embed') == 0
    assert model.layer_id('vit.blocks.3.mlp.fc1.weight') == 4
    assert model.layer_id('vit.norm.weight') == model.num_layers - 1
