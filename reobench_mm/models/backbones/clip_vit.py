"""The CLIP visual tower (OpenAI / open_clip layout) as a dense backbone: the trunk of
RemoteCLIP and GeoRSCLIP.

The tower is a pre-norm ViT: a bias-free patch convolution, a class token, a learned
absolute position embedding, a LayerNorm before the blocks (``ln_pre``), LayerNorm
epsilon 1e-5 and a final LayerNorm (``ln_post``). The attention pooling / projection
to the joint embedding space (``visual.proj``) is not used for dense tasks.

Activation: towers initialised from OpenAI's CLIP weights (OpenAI CLIP, RemoteCLIP,
GeoRSCLIP ViT-B/32) were trained with QuickGELU (``x * sigmoid(1.702 x)``); open_clip's
own configs (``ViT-B-32``, ``ViT-H-14`` trained on LAION, from which GeoRSCLIP ViT-H/14
starts) use the exact GELU. Each preset therefore carries its own default. Which one a
given script ran depends on how it built the tower: open_clip up to 2.28 forced
QuickGELU for ``pretrained='openai'`` (a separate OpenAI loading path), open_clip 2.29
and later build the named config (GELU for ``ViT-B-32``, ``ViT-L-14``) and only warn
about the mismatch; a plain config name without a pretrained tag (RemoteCLIP's README,
REOBench's released segmentation backbone) gives GELU in every version.

Position embedding: resampled to other grids as open_clip's ``resize_pos_embed`` does
(bicubic, antialiased, ``align_corners=False``, class row apart).

Input sizes that are not a multiple of the patch size (512 or 800 pixels with patch
14) are floored by default, exactly like the original strided patch convolution: the
last ``H mod p`` rows and ``W mod p`` columns are not seen (8 px at 512, 2 px at 800).
``dynamic_img_pad=True`` zero-pads to the next multiple instead.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch

from ...registry import MODELS
from .timm_vit import TimmViTBackbone

__all__ = ['CLIPVisionTransformer']

#: ``visual.transformer.resblocks.{i}.<suffix>`` → ``vit.blocks.{i}.<suffix>``.
_BLOCK_RENAMES = {
    'ln_1.weight': 'norm1.weight',
    'ln_1.bias': 'norm1.bias',
    'attn.in_proj_weight': 'attn.qkv.weight',
    'attn.in_proj_bias': 'attn.qkv.bias',
    'attn.out_proj.weight': 'attn.proj.weight',
    'attn.out_proj.bias': 'attn.proj.bias',
    'ln_2.weight': 'norm2.weight',
    'ln_2.bias': 'norm2.bias',
    'mlp.c_fc.weight': 'mlp.fc1.weight',
    'mlp.c_fc.bias': 'mlp.fc1.bias',
    'mlp.c_proj.weight': 'mlp.fc2.weight',
    'mlp.c_proj.bias': 'mlp.fc2.bias',
}
#: Tower-level renames (after the ``visual.`` prefix).
_TOWER_RENAMES = {
    'conv1.weight': 'vit.patch_embed.proj.weight',
    'ln_pre.weight': 'vit.norm_pre.weight',
    'ln_pre.bias': 'vit.norm_pre.bias',
    'ln_post.weight': 'vit.norm.weight',
    'ln_post.bias': 'vit.norm.bias',
}
#: Tower keys that exist in the checkpoints but not in a dense backbone.
_TOWER_DROPPED = ('proj', )
_BLOCK_KEY = re.compile(r'transformer\.resblocks\.(\d+)\.(.+)')


@MODELS.register_module()
class CLIPVisionTransformer(TimmViTBackbone):
    """CLIP visual tower (RemoteCLIP, GeoRSCLIP) returning the token maps of
    ``out_indices`` as ``B×C×h×w``.

    Args:
        arch: a preset of :attr:`arch_zoo` (``'ViT-B/32'``, ``'ViT-L/14'``, ``'ViT-H/14'``;
            open_clip's spellings ``'ViT-B-32'`` etc. are accepted) or a dict with
            ``embed_dims``, ``depth``, ``num_heads`` and optionally ``patch_size``
            (default 16), ``mlp_ratio`` (default 4).
        img_size: the input size the position embedding is laid out for; official
            weights (224 px) are interpolated to it when loaded, other input sizes
            are resampled at every forward.
        in_channels: input channels.
        act_layer: ``'quick_gelu'`` or ``'gelu'``; None takes the preset's
            (QuickGELU for the OpenAI-initialised B/32 and L/14, GELU for the
            LAION-trained H/14, QuickGELU for dict archs).
        dynamic_img_pad: zero-pad inputs to a multiple of the patch size; the default
            (False) floors like CLIP's strided patch convolution.
        drop_path_rate: stochastic depth, increasing linearly over the blocks.
        out_indices: output blocks; None picks ``'vit12'`` (3, 5, 7, 11) for 12 blocks,
            ``'vit24'`` (5, 11, 17, 23) for 24 and ``'vit32'`` for 32.
        final_norm: apply ``ln_post`` to every output level (None: False, or True with
            ``pyramid_source='last_block'``).
        frozen_stages, with_cp, init_cfg, pyramid_source: see
            :class:`~reobench_mm.models.backbones.base.DenseViTBackbone`
            (``'last_block'``: the last block's map after ``ln_post`` for all 4 levels).
    """

    arch_zoo: Dict[str, dict] = {
        'ViT-B/32': dict(patch_size=32, embed_dims=768, depth=12, num_heads=12,
                         mlp_ratio=4.0, act_layer='quick_gelu'),
        'ViT-L/14': dict(patch_size=14, embed_dims=1024, depth=24, num_heads=16,
                         mlp_ratio=4.0, act_layer='quick_gelu'),
        'ViT-H/14': dict(patch_size=14, embed_dims=1280, depth=32, num_heads=16,
                         mlp_ratio=4.0, act_layer='gelu'),
    }
    arch_family = 'clip_vit'
    _arch_keys = ('embed_dims', 'depth', 'num_heads', 'patch_size', 'mlp_ratio', 'act_layer')

    def __init__(self, arch: Union[str, dict] = 'ViT-B/32',
                 img_size: Union[int, Tuple[int, int]] = 224, in_channels: int = 3,
                 act_layer: Optional[str] = None, dynamic_img_pad: bool = False,
                 drop_path_rate: float = 0.0,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, frozen_stages: int = -1,
                 with_cp: bool = False, init_cfg: Optional[dict] = None,
                 pyramid_source: str = 'blocks') -> None:
        settings = self.resolve_arch(arch)
        if act_layer is None:
            act_layer = settings.get('act_layer', 'quick_gelu')
        super().__init__(
            img_size=img_size, patch_size=settings.get('patch_size', 16),
            in_channels=in_channels, embed_dims=settings['embed_dims'],
            depth=settings['depth'], num_heads=settings['num_heads'],
            mlp_ratio=settings.get('mlp_ratio', 4.0), qkv_bias=True, class_token=True,
            pre_norm=True, norm_eps=1e-5, act_layer=act_layer,
            dynamic_img_pad=dynamic_img_pad, drop_path_rate=drop_path_rate,
            out_indices=out_indices, final_norm=final_norm, frozen_stages=frozen_stages,
            with_cp=with_cp, init_cfg=init_cfg, pyramid_source=pyramid_source)
        self.arch_settings = settings
        self.act_layer = act_layer
        self.dynamic_img_pad = dynamic_img_pad

    @classmethod
    def resolve_arch(cls, arch: Union[str, dict]) -> dict:
        """The settings of a preset name or a checked copy of an arch dict."""
        if isinstance(arch, str):
            name = arch if arch in cls.arch_zoo else re.sub(r'^(ViT-\w)-(\d+)$', r'\1/\2', arch)
            if name not in cls.arch_zoo:
                raise ValueError(f'unknown CLIP arch {arch!r}; valid presets: '
                                 f'{sorted(cls.arch_zoo)} or a dict with embed_dims, depth, '
                                 'num_heads (optional patch_size, mlp_ratio)')
            return dict(cls.arch_zoo[name])
        if not isinstance(arch, dict):
            raise ValueError(f'arch must be a preset name or a dict, got {type(arch).__name__}')
        missing = {'embed_dims', 'depth', 'num_heads'} - set(arch)
        unknown = set(arch) - set(cls._arch_keys)
        if missing or unknown:
            raise ValueError(f'arch dict needs embed_dims, depth, num_heads (optional '
                             f'patch_size, mlp_ratio, act_layer); missing {sorted(missing)}, '
                             f'unknown {sorted(unknown)}')
        return dict(arch)

    def forward_levels(self, x: torch.Tensor) -> List[torch.Tensor]:
        if not self.dynamic_img_pad:
            # floor to whole patches, as CLIP's strided patch convolution does
            p = self.patch_size
            h, w = x.shape[-2] // p * p, x.shape[-1] // p * p
            if (h, w) != tuple(x.shape[-2:]):
                if h == 0 or w == 0:
                    raise ValueError(f'input {tuple(x.shape[-2:])} is smaller than one '
                                     f'{p}×{p} patch')
                x = x[..., :h, :w]
        return super().forward_levels(x)

    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """open_clip / OpenAI / RemoteCLIP / GeoRSCLIP keys → this model's keys.

        Takes the flat state dict of the whole CLIP model: the visual tower under
        ``visual.`` (or ``image_backbone.``, GeoRSCLIP's name for it); everything else
        (text tower, ``logit_scale``) and ``visual.proj`` are dropped. Keys already in
        this model's layout (``vit.``) pass through. Unknown keys of the visual tower
        (attention pooling, timm-based towers, layer scale) are kept under their
        original names so that loading reports them as unexpected.
        """
        converted: Dict[str, torch.Tensor] = {}
        for key, value in state_dict.items():
            if key.startswith('vit.'):
                new_key = key
            elif key.startswith(('visual.', 'image_backbone.')):
                new_key = cls._convert_tower_key(key.split('.', 1)[1])
                if new_key is None:
                    continue
                if new_key == 'vit.cls_token':
                    value = value.reshape(1, 1, -1)
                elif new_key == 'vit.pos_embed' and value.ndim == 2:
                    value = value.unsqueeze(0)
            else:
                continue  # text tower, logit_scale, ...
            if new_key in converted:
                raise ValueError(f'checkpoint holds two tensors for {new_key!r} (both '
                                 "'visual.' and 'image_backbone.' keys?)")
            converted[new_key] = value
        if not converted:
            raise KeyError('no CLIP visual-tower keys (visual.*, image_backbone.*) in the '
                           f'checkpoint; first keys: {list(state_dict)[:8]}')
        return converted

    @staticmethod
    def _convert_tower_key(key: str) -> Optional[str]:
        """One key below ``visual.``: its new name, None to drop it, or the original
        ``visual.`` name when it is not part of this architecture."""
        if key in _TOWER_DROPPED:
            return None
        if key == 'class_embedding':
            return 'vit.cls_token'
        if key == 'positional_embedding':
            return 'vit.pos_embed'
        if key in _TOWER_RENAMES:
            return _TOWER_RENAMES[key]
        match = _BLOCK_KEY.fullmatch(key)
        if match and match.group(2) in _BLOCK_RENAMES:
            return f'vit.blocks.{match.group(1)}.{_BLOCK_RENAMES[match.group(2)]}'
        return 'visual.' + key
