"""tools/model_converters/convert_checkpoint.py: official file → MMEngine-ready backbone
checkpoint."""
import argparse

import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

import reobench_mm  # noqa: F401
from reobench_mm.models.backbones.convert import backbone_cfg_from_arch, convert_checkpoint
from reobench_mm.registry import MODELS

from helpers import tool_result

TINY = {'arch.embed_dims': 32, 'arch.depth': 4, 'arch.num_heads': 2, 'arch.patch_size': 16}


def _official_satmae_file(path):
    """A tiny SatMAE pretraining file as the MAE scripts save it."""
    torch.manual_seed(0)
    reference = VisionTransformer(img_size=64, patch_size=16, embed_dim=32, depth=4,
                                  num_heads=2, num_classes=0, global_pool='')
    model = dict(reference.state_dict(), mask_token=torch.zeros(1, 1, 16),
                 **{'decoder_embed.weight': torch.rand(16, 32),
                    'decoder_pos_embed': torch.rand(1, 17, 16)})
    torch.save(dict(model=model, epoch=3, args=argparse.Namespace(lr=1e-4)), path)


def _run(*args):
    return tool_result('model_converters/convert_checkpoint.py', args)


def test_converted_file_loads_like_the_official_one(tmp_path):
    src, dst = tmp_path / 'fmow_pretrain.pth', tmp_path / 'out' / 'satmae_tiny.pth'
    _official_satmae_file(src)
    options = ['--options'] + [f'{k}={v}' for k, v in TINY.items()]
    result = _run(src, dst, '--arch', 'SatMAE', '--img-size', 128, *options)
    assert result.returncode == 0, result.stderr
    saved = torch.load(dst, weights_only=True)
    assert saved['meta']['converted_by'] == 'reobench_mm.convert_checkpoint'
    assert len(saved['meta']['source_sha256']) == 64
    assert all(k.startswith('vit.') for k in saved['state_dict'])
    assert saved['state_dict']['vit.pos_embed'].shape == (1, 1 + 8 * 8, 32)

    cfg = backbone_cfg_from_arch('SatMAE', 128, TINY)
    image = torch.rand(1, 3, 128, 128)
    outputs = []
    for checkpoint in (src, dst):
        model = MODELS.build(dict(cfg, init_cfg=dict(type='Pretrained',
                                                     checkpoint=str(checkpoint))))
        model.init_weights()
        with torch.no_grad():
            outputs.append(model.eval()(image))
    assert all(torch.equal(a, b) for a, b in zip(*outputs))


def test_wrong_architecture_is_an_error_and_writes_nothing(tmp_path):
    src, dst = tmp_path / 'fmow_pretrain.pth', tmp_path / 'clip.pth'
    _official_satmae_file(src)
    with pytest.raises(KeyError, match='visual'):  # a ViT file is no CLIP tower
        convert_checkpoint(str(src), str(dst),
                           backbone_cfg_from_arch('CLIPVisionTransformer', 64, TINY))
    deeper = dict(TINY, **{'arch.depth': 6})
    with pytest.raises(KeyError, match=r'missing keys.*vit\.blocks\.4'):
        convert_checkpoint(str(src), str(dst), backbone_cfg_from_arch('SatMAE', 64, deeper))
    assert not dst.exists() and list(tmp_path.iterdir()) == [src]
    result = _run(src, dst, '--arch', 'NoSuchNet')
    assert result.returncode != 0 and 'valid' in result.stderr and 'RVSA' in result.stderr
    result = _run(src, dst, '--arch', 'SatMAE:xl')
    assert result.returncode != 0 and "unknown preset 'xl'" in result.stderr
