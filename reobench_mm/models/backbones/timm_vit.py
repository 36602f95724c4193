"""A dense backbone around timm's ``VisionTransformer``: the trunk of SatMAE, SatMAE++,
Scale-MAE and the CLIP visual towers.

timm does the transformer (blocks, drop path, gradient checkpointing,
``forward_intermediates``); this class adds the dense-task behaviour of
:class:`~.base.DenseViTBackbone` and resamples the position embedding itself when the
input grid differs from the stored one (bicubic, antialiased or not: see
:func:`~.base.resample_position_embedding`), where timm's ``VisionTransformer`` always
antialiases.
"""
from __future__ import annotations

from functools import partial
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from .base import DenseViTBackbone, resample_position_embedding

__all__ = ['TimmViTBackbone', 'DenseVisionTransformer']


class DenseVisionTransformer(VisionTransformer):
    """timm's ``VisionTransformer`` whose position embedding is resampled to another
    input grid with a chosen bicubic variant.

    Everything else is timm's; when the grid is the stored one, or the model has no
    ``pos_embed``, timm's own ``_pos_embed`` runs unchanged.

    Attributes:
        pos_embed_antialias: antialiased bicubic resampling (True, timm's and open_clip's
            default) or plain bicubic (False, MAE's ``interpolate_pos_embed``).
    """

    pos_embed_antialias: bool = True

    def _pos_embed(self, x: torch.Tensor) -> torch.Tensor:
        grid = tuple(x.shape[1:3]) if x.ndim == 4 else None
        if self.pos_embed is None or not self.dynamic_img_size \
                or grid == tuple(self.patch_embed.grid_size):
            return super()._pos_embed(x)
        prefix_rows = 0 if self.no_embed_class else self.num_prefix_tokens
        pos_embed = resample_position_embedding(
            self.pos_embed, grid, prefix_rows, antialias=self.pos_embed_antialias,
            old_grid=tuple(self.patch_embed.grid_size))
        x = x.reshape(x.shape[0], -1, x.shape[-1])
        prefix = [token.expand(x.shape[0], -1, -1) for token in (self.cls_token, self.reg_token)
                  if token is not None]
        if self.no_embed_class:
            x = torch.cat(prefix + [x + pos_embed], dim=1)
        else:
            x = torch.cat(prefix + [x], dim=1) + pos_embed
        return self.pos_drop(x)


class TimmViTBackbone(DenseViTBackbone):
    """ViT trunk (timm) returning the token maps of ``out_indices``.

    Args:
        img_size: the input size the position embedding is laid out for (weights are
            interpolated to it at load time; other sizes are resampled per forward).
        patch_size, in_channels, embed_dims, depth, num_heads, mlp_ratio, qkv_bias:
            the ViT's shape.
        class_token: whether the trunk has a class token (dropped from the outputs).
        pre_norm: a LayerNorm before the blocks (CLIP's ``ln_pre``).
        norm_eps: LayerNorm epsilon (1e-6 for MAE-family weights, 1e-5 for CLIP).
        act_layer: MLP activation: ``'gelu'`` or ``'quick_gelu'``.
        pos_embed_antialias: resample the position embedding with antialiased bicubic
            interpolation (timm's and open_clip's default) or plain bicubic (MAE's
            ``interpolate_pos_embed``), at load time and for other input grids.
        dynamic_img_pad: pad inputs to a multiple of the patch size (else the patch
            convolution drops the remainder).
        drop_path_rate: stochastic depth, linearly increasing over the blocks.
        out_indices, final_norm, frozen_stages, with_cp, init_cfg, pyramid_source: see
            :class:`~.base.DenseViTBackbone`.
    """
    block_prefix = 'vit.blocks.'

    def __init__(self, *, img_size: Union[int, Tuple[int, int]] = 224, patch_size: int = 16,
                 in_channels: int = 3, embed_dims: int = 768, depth: int = 12,
                 num_heads: int = 12, mlp_ratio: float = 4.0, qkv_bias: bool = True,
                 class_token: bool = True, pre_norm: bool = False, norm_eps: float = 1e-6,
                 act_layer: str = 'gelu', pos_embed_antialias: bool = True,
                 dynamic_img_pad: bool = False, drop_path_rate: float = 0.0,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, frozen_stages: int = -1,
                 with_cp: bool = False, init_cfg: Optional[dict] = None,
                 pyramid_source: str = 'blocks') -> None:
        super().__init__(depth, out_indices, final_norm, frozen_stages, with_cp, init_cfg,
                         pyramid_source=pyramid_source)
        if act_layer not in ('gelu', 'quick_gelu'):
            raise ValueError(f"act_layer must be 'gelu' or 'quick_gelu', got {act_layer!r}")
        self.patch_size, self.embed_dims = patch_size, embed_dims
        self.pos_embed_antialias = bool(pos_embed_antialias)
        self.vit = DenseVisionTransformer(
            img_size=img_size, patch_size=patch_size, in_chans=in_channels, num_classes=0,
            global_pool='', embed_dim=embed_dims, depth=depth, num_heads=num_heads,
            mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, class_token=class_token,
            pre_norm=pre_norm, fc_norm=False, dynamic_img_size=True,
            dynamic_img_pad=dynamic_img_pad, drop_path_rate=drop_path_rate,
            norm_layer=partial(nn.LayerNorm, eps=norm_eps), act_layer=act_layer)
        self.vit.pos_embed_antialias = self.pos_embed_antialias
        self.vit.set_grad_checkpointing(with_cp)

    @property
    def embedding_module_names(self) -> Tuple[str, ...]:
        return ('vit.patch_embed', 'vit.cls_token', 'vit.pos_embed', 'vit.norm_pre')

    @property
    def grid_size(self) -> Tuple[int, int]:
        """The token grid the stored position embedding is laid out for."""
        return tuple(self.vit.patch_embed.grid_size)

    def forward_levels(self, x: torch.Tensor) -> List[torch.Tensor]:
        return self.vit.forward_intermediates(x, indices=list(self.out_indices),
                                              norm=self.final_norm, output_fmt='NCHW',
                                              intermediates_only=True)

    def adapt_state_dict(self, state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Interpolate ``vit.pos_embed`` to this model's grid (bicubic, class row kept
        apart, antialiased as ``pos_embed_antialias`` says)."""
        if 'vit.pos_embed' in state_dict and self.vit.pos_embed is not None:
            state_dict = dict(state_dict)
            state_dict['vit.pos_embed'] = resample_position_embedding(
                state_dict['vit.pos_embed'], self.grid_size, self.vit.num_prefix_tokens,
                antialias=self.pos_embed_antialias)
        return state_dict
