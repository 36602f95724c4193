"""RVSA: a plain ViT-B whose window blocks use rotated varied-size window attention.

The backbone of "Advancing Plain Vision Transformer Toward Remote Sensing Foundation
Model" (ViT-B + RVSA, the published ``ViT_Win_RVSA_V3_WSZ7``), as REOBench uses it for
UperNet segmentation (Potsdam) and Oriented R-CNN detection (DIOR-R):

- patch embedding and a learned absolute position embedding ``(1, h·w, C)`` without a
  class token (no class row);
- every ``global_interval``-th block (``(i + 1) % 3 == 0``: 2, 5, 8, 11 for 12 blocks)
  attends globally, with decomposed relative position terms computed with the *scaled*
  query (see :class:`GlobalRelPosAttention`);
- the other blocks attend inside ``window_size × window_size`` windows whose key/value
  sampling grid is, per window and head, scaled by ``(1 + s)``, rotated by ``θ`` and
  shifted by an offset, all predicted from the window itself, and whose logits carry
  decomposed relative position terms (unscaled query) and a Swin-style relative
  position bias (see :class:`RotatedWindowAttention`).

Every qkv projection carries one fused bias (query, key and value), in the window and
the global blocks, in the published segmentation and detection backbones alike.
The attention modules are in :mod:`.rvsa_attention` (imported here too).

Weights start from the MAE ViT-B pretraining checkpoint; its layout (timm keys) is the
layout of this module, so :meth:`RVSA.convert_official_state_dict` only drops what the
backbone does not have. The published fine-tuned RVSA checkpoints (MMSeg UperNet and
OBBDetection Oriented R-CNN, backbone keys under ``backbone.``) load strictly; their
built-in pyramid (``fpn1``/``fpn2``) maps onto ``SimpleFeaturePyramid`` with
:meth:`RVSA.convert_official_pyramid`.
"""
from __future__ import annotations

import fnmatch
import math
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from timm.layers import DropPath, Mlp, PatchEmbed, resample_abs_pos_embed, trunc_normal_
from torch import nn

from ...registry import MODELS
from .base import PYRAMID_SOURCES, DenseViTBackbone, resample_position_embedding
from .rvsa_attention import (QKV_BIAS_MODES, SAMPLING_INITS, GlobalRelPosAttention,
                             RotatedWindowAttention, make_qkv_projection, project_qkv,
                             window_relative_position_index)

__all__ = ['RVSA', 'RVSABlock', 'RotatedWindowAttention', 'GlobalRelPosAttention',
           'window_relative_position_index', 'make_qkv_projection', 'project_qkv',
           'SAMPLING_INITS', 'PYRAMID_SOURCES', 'QKV_BIAS_MODES']


def _pair(value: Union[int, Sequence[int]]) -> Tuple[int, int]:
    if isinstance(value, int):
        return value, value
    value = tuple(int(v) for v in value)
    if len(value) != 2:
        raise ValueError(f'expected an int or a pair of ints, got {value}')
    return value


def _resize_rel_pos_table(table: torch.Tensor, length: int) -> torch.Tensor:
    """Linearly resample a ``(L, C)`` relative-position table to ``length`` rows (the
    interpolation timm's ``get_rel_pos`` applies at run time)."""
    if table.shape[0] == length:
        return table
    resized = F.interpolate(table.float().t()[None], size=length, mode='linear')
    return resized[0].t().to(table.dtype)


class RVSABlock(nn.Module):
    """Pre-norm transformer block on ``B×H×W×C`` maps with global or rotated window
    attention (timm's ``Mlp`` and ``DropPath``)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, qkv_bias: Union[bool, str],
                 norm_eps: float, drop_path: float, window: bool, window_size: int,
                 grid_size: Tuple[int, int], sampling_init: str = 'torch_default') -> None:
        super().__init__()
        self.window = window
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        if window:
            self.attn = RotatedWindowAttention(dim, num_heads, window_size, qkv_bias,
                                               sampling_init)
        else:
            self.attn = GlobalRelPosAttention(dim, num_heads, grid_size, qkv_bias)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), act_layer=nn.GELU)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.mlp(self.norm2(x)))


@MODELS.register_module()
class RVSA(DenseViTBackbone):
    """ViT with rotated varied-size window attention (RVSA), for dense tasks.

    Args:
        arch: ``'b'`` (patch 16, 768 dims, 12 blocks, 12 heads, MLP ratio 4) or a dict
            with ``embed_dims``, ``depth``, ``num_heads`` and optionally ``patch_size``,
            ``mlp_ratio``.
        img_size: input size the position embedding and the global blocks' relative
            position tables are laid out for (512 for Potsdam, 800 for DIOR-R); other
            sizes divisible by the patch size work (both are resampled per forward).
        in_channels: input channels.
        qkv_bias: bias of the qkv projections (one fused bias per block here; see
            :meth:`block_qkv_bias`).
        norm_eps: LayerNorm epsilon.
        window_size: window side of the rotated window blocks.
        global_interval: block ``i`` attends globally when ``(i + 1) % global_interval
            == 0``; ignored when ``global_indices`` is given.
        global_indices: explicit indices of the global-attention blocks.
        drop_path_rate: stochastic depth, linearly increasing over the blocks.
        out_indices: blocks whose token maps are returned with ``pyramid_source='blocks'``
            (default: the ``'vit12'`` preset (3, 5, 7, 11) for 12 blocks); must be left
            unset with ``'last_block'``.
        final_norm: apply the final LayerNorm ``norm`` to every returned map (the module
            exists only then). Default: False with ``pyramid_source='blocks'``, True
            (and required) with ``'last_block'``.
        pyramid_source: one of :data:`~.base.PYRAMID_SOURCES`: ``'blocks'`` (the
            published segmentation backbone) or ``'last_block'`` (the published
            detection backbone: 4 copies of the last block's normalised map, which the
            ``SimpleFeaturePyramid`` neck then rescales ×4, ×2, ×1, ×½).
        sampling_init: initialisation of the window predictors, one of
            :data:`SAMPLING_INITS` (default ``'torch_default'``, as the published code).
        frozen_stages, with_cp, init_cfg: see :class:`~.base.DenseViTBackbone`.

    Checkpoints: the MAE ViT-B pretraining file (``{'model': …}``, timm keys, a fixed
    sin-cos ``pos_embed`` of 1 + 14×14 rows) loads with its class token, class row,
    mask token and decoder dropped and the 14×14 grid interpolated bicubically to the
    model's grid; the RVSA parameters (window predictors, relative position tables,
    bias tables) are then left at their initialisation. The published RVSA fine-tuning
    code instead skipped the pretrained ``pos_embed`` when its size differed from the
    model's and trained it from random values; this loader interpolates it. The
    published fine-tuned files load strictly: every backbone key is mapped, except the
    built-in pyramid ``fpn1.*``–``fpn4.*`` (dropped here, see
    :meth:`convert_official_pyramid`), an unused final ``norm.*`` (dropped when
    ``final_norm`` is off) and ``relative_position_index`` (checked against the
    computed index, then dropped).
    """

    arch_zoo: Dict[str, dict] = {
        'b': dict(patch_size=16, embed_dims=768, depth=12, num_heads=12, mlp_ratio=4.0),
        'base': dict(patch_size=16, embed_dims=768, depth=12, num_heads=12, mlp_ratio=4.0),
    }
    #: model keys an MAE pretraining file does not have (left at their initialisation)
    allowed_missing_keys = ('blocks.*.attn.sampling_offsets.*',
                            'blocks.*.attn.sampling_scales.*',
                            'blocks.*.attn.sampling_angles.*', 'blocks.*.attn.rel_pos_h',
                            'blocks.*.attn.rel_pos_w',
                            'blocks.*.attn.relative_position_bias_table')
    #: keys of the published fine-tuned backbones that belong to the neck here (their
    #: built-in simple feature pyramid); :meth:`convert_official_pyramid` maps them.
    official_pyramid_keys = ('fpn1.*', 'fpn2.*', 'fpn3.*', 'fpn4.*')
    arch_family = 'rvsa'
    #: the block class (a subclass swaps in its own, e.g. the ViTAE normal cell)
    block_type = RVSABlock
    no_weight_decay_keywords = ('pos_embed', 'rel_pos_h', 'rel_pos_w')

    def __init__(self, arch: Union[str, dict] = 'b', img_size: Union[int, Tuple[int, int]] = 512,
                 in_channels: int = 3, qkv_bias: bool = True, norm_eps: float = 1e-6,
                 window_size: int = 7, global_interval: int = 3,
                 global_indices: Optional[Sequence[int]] = None, drop_path_rate: float = 0.0,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, pyramid_source: str = 'blocks',
                 sampling_init: str = 'torch_default', frozen_stages: int = -1,
                 with_cp: bool = False, init_cfg: Optional[dict] = None) -> None:
        cfg = self._resolve_arch(arch)
        depth = cfg['depth']
        if sampling_init not in SAMPLING_INITS:
            raise ValueError(f'sampling_init must be one of {SAMPLING_INITS}, '
                             f'got {sampling_init!r}')
        super().__init__(depth, out_indices, final_norm, frozen_stages, with_cp, init_cfg,
                         pyramid_source=pyramid_source)
        final_norm = self.final_norm
        self.sampling_init = sampling_init
        self.arch_settings = cfg
        self.patch_size = cfg['patch_size']
        self.embed_dims = cfg['embed_dims']
        self.num_heads = cfg['num_heads']
        self.window_size = int(window_size)
        if self.window_size < 1:
            raise ValueError(f'window_size must be a positive int, got {window_size}')
        if self.embed_dims % self.num_heads:
            raise ValueError(f"arch embed_dims {self.embed_dims} is not divisible by "
                             f"num_heads {self.num_heads}")
        if not 0.0 <= drop_path_rate < 1.0:
            raise ValueError(f'drop_path_rate must be in [0, 1), got {drop_path_rate}')
        if global_indices is None:
            if global_interval < 1:
                raise ValueError(f'global_interval must be >= 1, got {global_interval}')
            global_indices = [i for i in range(depth) if (i + 1) % global_interval == 0]
        global_indices = tuple(sorted(set(int(i) for i in global_indices)))
        if any(not 0 <= i < depth for i in global_indices):
            raise ValueError(f'global_indices must be block indices in 0..{depth - 1}, '
                             f'got {global_indices}')
        self.global_indices = global_indices

        img_size = _pair(img_size)
        if img_size[0] % self.patch_size or img_size[1] % self.patch_size:
            raise ValueError(f'img_size {img_size} is not divisible by the patch size '
                             f'{self.patch_size}')
        self.img_size = img_size
        self.patch_embed = PatchEmbed(img_size=img_size, patch_size=self.patch_size,
                                      in_chans=in_channels, embed_dim=self.embed_dims,
                                      flatten=False, output_fmt='NHWC', strict_img_size=False)
        self.grid_size: Tuple[int, int] = tuple(self.patch_embed.grid_size)
        self.pos_embed = nn.Parameter(
            torch.zeros(1, self.grid_size[0] * self.grid_size[1], self.embed_dims))
        rates = torch.linspace(0, drop_path_rate, depth).tolist()
        self.blocks = nn.ModuleList([
            self.make_block(i not in global_indices, rates[i], bool(qkv_bias),
                            cfg['mlp_ratio'], norm_eps)
            for i in range(depth)
        ])
        self.norm = nn.LayerNorm(self.embed_dims, eps=norm_eps) if final_norm else None
        self._init_parameters()

    def make_block(self, window: bool, drop_path: float, qkv_bias: bool, mlp_ratio: float,
                   norm_eps: float) -> nn.Module:
        """One block of :attr:`block_type` (a window block if ``window``, else a global
        one), its attention's bias mode from :meth:`block_qkv_bias`."""
        return self.block_type(self.embed_dims, self.num_heads, mlp_ratio,
                               self.block_qkv_bias(qkv_bias, window), norm_eps, drop_path,
                               window=window, window_size=self.window_size,
                               grid_size=self.grid_size, sampling_init=self.sampling_init)

    def block_qkv_bias(self, qkv_bias: bool, window: bool) -> Union[bool, str]:
        """The bias mode (one of :data:`~.rvsa_attention.QKV_BIAS_MODES`) of a window
        (``window=True``) or global block's qkv projection for the backbone's
        ``qkv_bias`` flag: one fused bias in every block here, as in the published plain
        ViT-B RVSA files; a subclass may choose per block type."""
        return bool(qkv_bias)

    @classmethod
    def _resolve_arch(cls, arch: Union[str, dict]) -> dict:
        if isinstance(arch, str):
            if arch.lower() not in cls.arch_zoo:
                raise ValueError(f'unknown RVSA arch {arch!r}; valid: {sorted(cls.arch_zoo)} '
                                 'or a dict with embed_dims, depth, num_heads')
            return dict(cls.arch_zoo[arch.lower()])
        if not isinstance(arch, dict):
            raise ValueError(f'arch must be a preset name or a dict, got {type(arch).__name__}')
        required = {'embed_dims', 'depth', 'num_heads'}
        optional = {'patch_size': 16, 'mlp_ratio': 4.0}
        if not required <= set(arch) or set(arch) - required - set(optional):
            raise ValueError(f'arch dict needs {sorted(required)} and may have '
                             f'{sorted(optional)}; got {sorted(arch)}')
        cfg = {**optional, **arch}
        for key in ('embed_dims', 'depth', 'num_heads', 'patch_size'):
            cfg[key] = int(cfg[key])
            if cfg[key] < 1:
                raise ValueError(f'arch {key} must be positive, got {cfg[key]}')
        cfg['mlp_ratio'] = float(cfg['mlp_ratio'])
        return cfg

    def _init_parameters(self) -> None:
        trunc_normal_(self.pos_embed, std=0.02)
        for module in self.blocks.modules():
            if isinstance(module, nn.Linear):
                trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        # the sampling predictors (1×1 convolutions) keep their ``sampling_init``, the
        # relative-position tables zero, the window bias tables truncated normal 0.02

    # ------------------------------------------------------------------ interface
    @property
    def embedding_module_names(self) -> Tuple[str, ...]:
        return ('patch_embed', 'pos_embed')

    def position_embedding(self, grid: Tuple[int, int]) -> torch.Tensor:
        """The position embedding as a ``1×h×w×C`` map, bicubically resampled when
        ``grid`` differs from the model's grid."""
        pos = self.pos_embed
        if tuple(grid) != self.grid_size:
            pos = resample_abs_pos_embed(pos, new_size=list(grid), old_size=list(self.grid_size),
                                         num_prefix_tokens=0)
        return pos.reshape(1, grid[0], grid[1], self.embed_dims)

    def forward_levels(self, x: torch.Tensor) -> List[torch.Tensor]:
        if x.shape[-2] % self.patch_size or x.shape[-1] % self.patch_size:
            raise ValueError(f'input size {tuple(x.shape[-2:])} is not divisible by the '
                             f'patch size {self.patch_size}')
        x = self.patch_embed(x)  # B, h, w, C
        x = x + self.position_embedding(tuple(x.shape[1:3]))
        outs = []
        for i, block in enumerate(self.blocks):
            if self.with_cp and self.training and torch.is_grad_enabled():
                x = cp.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
            if i in self.out_indices:
                out = self.norm(x) if self.norm is not None else x
                outs.append(out.permute(0, 3, 1, 2).contiguous())
        return outs

    # ---------------------------------------------------------------- checkpoints
    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """MAE pretraining keys (or a fine-tuned checkpoint) → this model's keys.

        - An MMSeg/MMDet model ``state_dict``: keep the ``backbone.`` keys (prefix
          stripped), drop the rest (``decode_head.*``, ``neck.*``, ...).
        - Drop ``cls_token``, ``mask_token``, ``decoder_*``, classification ``head.*``
          and ``fc_norm.*``, and the published fine-tuned backbones' built-in pyramid
          (:attr:`official_pyramid_keys`, the neck's weights here).
        - ``pos_embed`` with a class row (``1 + s²`` rows, or any when ``cls_token`` was
          present): drop the row. Its grid is interpolated in :meth:`adapt_state_dict`.
        """
        if any(k.startswith('backbone.') for k in state_dict):
            state_dict = {k[len('backbone.'):]: v for k, v in state_dict.items()
                          if k.startswith('backbone.')}
        had_cls = 'cls_token' in state_dict
        out = {}
        for key, value in state_dict.items():
            if key in ('cls_token', 'mask_token') or key.startswith(
                    ('decoder_', 'decoder.', 'head.', 'fc_norm.')):
                continue
            if any(fnmatch.fnmatchcase(key, p) for p in cls.official_pyramid_keys):
                continue
            out[key] = value
        pos = out.get('pos_embed')
        if pos is not None:
            if pos.ndim == 2:
                pos = pos[None]
            rows = pos.shape[1]
            if had_cls or (not math.isqrt(rows)**2 == rows
                           and math.isqrt(rows - 1)**2 == rows - 1):
                pos = pos[:, 1:]
            out['pos_embed'] = pos
        return out

    def adapt_state_dict(self, state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Fit converted weights to this instance: interpolate ``pos_embed`` (bicubic) to
        the model's grid and the global blocks' ``rel_pos_h/w`` (linear) to ``2·grid - 1``
        rows; check each window block's ``relative_position_index`` against the one the
        model computes and drop it (a derived constant, not a weight); drop ``norm.*``
        when the model has no final norm (``final_norm=False``).

        Raises:
            ValueError: a ``relative_position_index`` differs from the model's (another
                window size or index convention).
        """
        state_dict = dict(state_dict)
        if 'pos_embed' in state_dict:
            pos = state_dict['pos_embed']
            if pos.ndim == 3 and pos.shape[1] != self.pos_embed.shape[1]:
                state_dict['pos_embed'] = resample_position_embedding(
                    pos, self.grid_size, num_prefix_tokens=0)
        lengths = (2 * self.grid_size[0] - 1, 2 * self.grid_size[1] - 1)
        for i in self.global_indices:
            for axis, length in zip('hw', lengths):
                key = f'blocks.{i}.attn.rel_pos_{axis}'
                if key in state_dict and state_dict[key].ndim == 2:
                    state_dict[key] = _resize_rel_pos_table(state_dict[key], length)
        buffers = dict(self.named_buffers())
        for key in [k for k in state_dict if k.endswith('.relative_position_index')]:
            if key not in buffers:
                continue  # reported as unexpected by the key check
            given, expected = state_dict[key], buffers[key]
            if given.shape != expected.shape or not torch.equal(given.cpu().long(),
                                                                expected.cpu().long()):
                raise ValueError(f'{key} in the checkpoint ({tuple(given.shape)}) is not the '
                                 f'index of a {self.window_size}×{self.window_size} window '
                                 f'({tuple(expected.shape)}); is the window size right?')
            del state_dict[key]
        if self.norm is None:
            state_dict = {k: v for k, v in state_dict.items() if not k.startswith('norm.')}
        return state_dict

    @classmethod
    def convert_official_pyramid(cls, state_dict: Dict[str, torch.Tensor]
                                 ) -> Dict[str, torch.Tensor]:
        """The built-in pyramid of a published fine-tuned RVSA backbone (patch 16) →
        ``SimpleFeaturePyramid`` keys (``levels.*``), to load into that neck strictly.

        ``fpn1`` (ConvTranspose → LayerNorm over channels → GELU → ConvTranspose) is
        level 0, ``fpn2`` (ConvTranspose) level 1; ``fpn3`` (identity) and ``fpn4``
        (max-pool) have no weights. Accepts a whole model ``state_dict`` (the
        ``backbone.`` keys are used) or backbone keys.

        Raises:
            KeyError: no ``fpn*`` keys, or one this mapping does not know.
        """
        if any(k.startswith('backbone.') for k in state_dict):
            state_dict = {k[len('backbone.'):]: v for k, v in state_dict.items()
                          if k.startswith('backbone.')}
        renames = {'fpn1.0.': 'levels.0.0.', 'fpn1.1.ln.': 'levels.0.1.',
                   'fpn1.3.': 'levels.0.3.', 'fpn2.0.': 'levels.1.0.'}
        out = {}
        for key, value in state_dict.items():
            if not key.startswith('fpn'):
                continue
            prefix = next((p for p in renames if key.startswith(p)), None)
            if prefix is None:
                raise KeyError(f'unknown key {key!r} of the published RVSA pyramid; known '
                               f'prefixes: {sorted(renames)}')
            out[renames[prefix] + key[len(prefix):]] = value
        if not out:
            raise KeyError('no fpn1.*/fpn2.* keys: not a fine-tuned RVSA checkpoint with the '
                           'built-in pyramid')
        return out
