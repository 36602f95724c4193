"""Scale-MAE (Reed et al. 2023, ViT-L/16 on fMoW-RGB) as a dense backbone on timm's ViT.

Scale-MAE has no stored position embedding to interpolate: every forward builds a 2-D
sin-cos embedding whose grid positions are scaled by a ground-sample-distance ratio
``r`` (facts from the public Scale-MAE repository, ``mae/util/pos_embed.py``,
``get_2d_sincos_pos_embed_with_resolution``, and ``mae/models_vit.py``):

- patch ``(i, j)`` (row ``i``, column ``j``) sits at ``(x, y) = (j·r, i·r)``;
- with ``D`` channels, ``ω_k = 10000^(-k/(D/4))`` for ``k = 0..D/4-1``, the embedding is
  ``[sin(x·ω), cos(x·ω), sin(y·ω), cos(y·ω)]`` (the first half encodes the column);
- the class token's row is zero; tokens are in row-major order.

The evaluation code (``mae/engine_finetune.py`` ``evaluate``, ``mae/eval/knn.py``)
sets ``r = eval_base_resolution`` (default 1.0) for every image, or with
``--eval_gsd`` ``r = eval_base_resolution × reference / eval_scale`` (reference
224 px, ``eval_scale`` the input side). ``input_res`` and ``gsd_reference_size``
below are those two settings. The encoder adds the embedding to the patch tokens
before the class token (whose embedding row is zero) is prepended, which is what
:class:`GSDSinCosPatchEmbed` does inside timm's ViT, so ``forward_intermediates``,
gradient checkpointing and frozen stages are timm's as for the other trunks. The
trunk's own ``pos_embed`` is then None, and timm prepends the class token in that case
only from version 1.0.26 on (:data:`MIN_TIMM_VERSION`; older timm drops it), which
:class:`ScaleMAE` checks when it is built.

Official checkpoint layout (``scalemae-vitlarge-800.pth``: ``{'model': state_dict,
'optimizer', 'epoch', 'scaler', 'args'}``): encoder keys as timm's ViT
(``cls_token``, ``pos_embed`` (an unused fixed 224-px sin-cos), ``patch_embed.proj``,
``blocks.{i}.*``, ``norm.*``) and the decoder side: ``decoder_embed``,
``mask_token``, ``mask_token_decoder``, ``decoder_pos_embed``, ``pos_emb_projection``,
``decoder_blocks``, ``decoder_norm``, the FPN ``fpn.*`` and the reconstruction heads
``fcn.*`` / ``fcn_high.*`` / ``fcn_low.*``. Fine-tuned files have ``fc_norm`` and
``head`` instead of ``norm``.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple, Union

import timm
import torch
from mmengine.utils import digit_version
from timm.layers import PatchEmbed

from ...registry import MODELS
from .base import sincos_pos_embed_2d
from .satmae import convert_mae_encoder_keys, resolve_vit_arch
from .timm_vit import TimmViTBackbone

__all__ = ['ScaleMAE', 'GSDSinCosPatchEmbed', 'gsd_sincos_pos_embed', 'MIN_TIMM_VERSION',
           'check_timm_keeps_class_token']

#: The first timm whose ``VisionTransformer._pos_embed`` prepends the class token when
#: ``pos_embed`` is None (``requirements/runtime.txt`` pins it).
MIN_TIMM_VERSION = '1.0.26'


def gsd_sincos_pos_embed(embed_dims: int, grid: Tuple[int, int],
                         ratio: Union[float, Tuple[float, float]],
                         device: Optional[torch.device] = None) -> torch.Tensor:
    """Scale-MAE's GSD-scaled 2-D sin-cos embedding of an ``h×w`` grid, ``(h·w, D)``
    in row-major order, without the (zero) class row.

    ``ratio`` multiplies the grid positions: one value, or ``(row, column)`` ratios.
    Computed in float32 like the reference implementation (the formula is
    :func:`~.base.sincos_pos_embed_2d`).
    """
    return sincos_pos_embed_2d(embed_dims, grid, ratio, dtype=torch.float32, device=device)


def check_timm_keeps_class_token() -> None:
    """Raise if the installed timm drops the class token of a ViT without ``pos_embed``.

    :class:`ScaleMAE` sets the trunk's ``pos_embed`` to None (its embedding is added in
    the patch embedding). timm before :data:`MIN_TIMM_VERSION` then returned the patch
    tokens alone from ``VisionTransformer._pos_embed``: the class token never entered
    the blocks, and ``forward_intermediates`` cut the first patch token off as if it
    were the class token.

    Raises:
        RuntimeError: timm is older than :data:`MIN_TIMM_VERSION`.
    """
    if digit_version(timm.__version__) < digit_version(MIN_TIMM_VERSION):
        raise RuntimeError(
            f'ScaleMAE needs timm >= {MIN_TIMM_VERSION} (installed: {timm.__version__}): '
            'older timm drops the class token of a ViT whose pos_embed is disabled. '
            f'Upgrade with: pip install "timm>={MIN_TIMM_VERSION}"')


class GSDSinCosPatchEmbed(PatchEmbed):
    """timm's patch embedding (NHWC output, any input size) followed by the addition of
    Scale-MAE's GSD-scaled sin-cos position embedding for the current grid.

    Args:
        input_res: the GSD ratio ``r`` of the grid positions.
        gsd_reference_size: if set, ``r = input_res × gsd_reference_size / side``,
            per axis, with ``side`` the input height (rows) or width (columns) in pixels.
        Others: as timm's ``PatchEmbed``.
    """

    def __init__(self, img_size: Union[int, Tuple[int, int]], patch_size: int,
                 in_chans: int, embed_dim: int, dynamic_img_pad: bool = False,
                 input_res: float = 1.0, gsd_reference_size: Optional[int] = None) -> None:
        super().__init__(img_size=img_size, patch_size=patch_size, in_chans=in_chans,
                         embed_dim=embed_dim, bias=True, output_fmt='NHWC',
                         strict_img_size=False, dynamic_img_pad=dynamic_img_pad)
        self.embed_dim = embed_dim
        self.input_res = input_res
        self.gsd_reference_size = gsd_reference_size

    def gsd_ratio(self, input_hw: Tuple[int, int]) -> Tuple[float, float]:
        """``(row, column)`` position ratios for an input of ``input_hw`` pixels."""
        if self.gsd_reference_size is None:
            return float(self.input_res), float(self.input_res)
        return tuple(float(self.input_res) * self.gsd_reference_size / s for s in input_hw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        input_hw = tuple(x.shape[-2:])
        tokens = super().forward(x)  # B×h×w×C
        rows, cols = tokens.shape[1:3]
        pos = gsd_sincos_pos_embed(self.embed_dim, (rows, cols), self.gsd_ratio(input_hw),
                                   device=tokens.device)
        return tokens + pos.view(rows, cols, -1).to(tokens.dtype)


def _check_gsd_options(input_res: float, gsd_reference_size: Optional[int]) -> None:
    if not isinstance(input_res, (int, float)) or not input_res > 0:
        raise ValueError(f'input_res (GSD ratio of the position embedding) must be a '
                         f'positive number, got {input_res!r}')
    if gsd_reference_size is not None and (not isinstance(gsd_reference_size, int)
                                           or gsd_reference_size <= 0):
        raise ValueError(f'gsd_reference_size must be None or a positive int (Scale-MAE '
                         f'uses 224 with --eval_gsd), got {gsd_reference_size!r}')


@MODELS.register_module()
class ScaleMAE(TimmViTBackbone):
    """Scale-MAE encoder returning the token maps of ``out_indices`` as ``B×C×h×w``;
    the position embedding is recomputed for every input grid from a GSD ratio.

    Args:
        arch: ``'l'`` (ViT-L/16, the released fMoW-RGB model) or ``'b'`` (ViT-B/16),
            or a dict with ``embed_dims`` (divisible by 4), ``depth``, ``num_heads``
            (optional ``patch_size``, ``mlp_ratio``).
        img_size: nominal input size (patch grid of the timm trunk; any input size
            works, the embedding is built per forward).
        in_channels: input channels.
        input_res: GSD ratio ``r`` scaling the grid positions (Scale-MAE's
            ``input_res``; its evaluation default is 1.0).
        gsd_reference_size: None (``r = input_res``) or the reference side in pixels
            of Scale-MAE's ``--eval_gsd`` mode, ``r = input_res × reference / side``
            (224 in its code).
        out_indices, final_norm, drop_path_rate, frozen_stages, with_cp, init_cfg,
            dynamic_img_pad, pyramid_source: see :class:`~.satmae.SatMAE`.
    """
    arch_zoo: Dict[str, dict] = {
        'b': dict(patch_size=16, embed_dims=768, depth=12, num_heads=12, mlp_ratio=4.0),
        'l': dict(patch_size=16, embed_dims=1024, depth=24, num_heads=16, mlp_ratio=4.0),
    }
    arch_family = 'scale_mae'
    #: every model key is in the official files (the trunk has no stored pos-embed).
    allowed_missing_keys: Tuple[str, ...] = ()
    #: official keys outside the encoder; ``pos_embed`` is Scale-MAE's unused fixed one.
    dropped_prefixes: Tuple[str, ...] = ('decoder', 'mask_token', 'pos_emb_projection',
                                         'fpn.', 'fcn.', 'fcn_high.', 'fcn_low.', 'head.',
                                         'pos_embed')

    def __init__(self, arch: Union[str, dict] = 'l', img_size: Union[int, Tuple[int, int]] = 512,
                 in_channels: int = 3, input_res: float = 1.0,
                 gsd_reference_size: Optional[int] = None,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, drop_path_rate: float = 0.0,
                 frozen_stages: int = -1, with_cp: bool = False,
                 dynamic_img_pad: bool = False, init_cfg: Optional[dict] = None,
                 pyramid_source: str = 'blocks') -> None:
        spec = resolve_vit_arch(arch, self.arch_zoo, type(self).__name__)
        if spec['embed_dims'] % 4:
            raise ValueError(f"ScaleMAE: embed_dims must be divisible by 4 for the 2-D "
                             f"sin-cos embedding, got {spec['embed_dims']}")
        _check_gsd_options(input_res, gsd_reference_size)
        check_timm_keeps_class_token()
        super().__init__(
            img_size=img_size, patch_size=spec['patch_size'], in_channels=in_channels,
            embed_dims=spec['embed_dims'], depth=spec['depth'], num_heads=spec['num_heads'],
            mlp_ratio=spec['mlp_ratio'], qkv_bias=True, class_token=True, pre_norm=False,
            norm_eps=1e-6, act_layer='gelu', dynamic_img_pad=dynamic_img_pad,
            drop_path_rate=drop_path_rate, out_indices=out_indices, final_norm=final_norm,
            frozen_stages=frozen_stages, with_cp=with_cp, init_cfg=init_cfg,
            pyramid_source=pyramid_source)
        # The trunk's stored embedding is replaced by the computed one.
        self.vit.pos_embed = None
        self.vit.patch_embed = GSDSinCosPatchEmbed(
            img_size=img_size, patch_size=spec['patch_size'], in_chans=in_channels,
            embed_dim=spec['embed_dims'], dynamic_img_pad=dynamic_img_pad,
            input_res=float(input_res), gsd_reference_size=gsd_reference_size)

    @property
    def input_res(self) -> float:
        """The GSD ratio of the position embedding (may be changed between forwards)."""
        return self.vit.patch_embed.input_res

    @input_res.setter
    def input_res(self, value: float) -> None:
        _check_gsd_options(value, self.gsd_reference_size)
        self.vit.patch_embed.input_res = float(value)

    @property
    def gsd_reference_size(self) -> Optional[int]:
        return self.vit.patch_embed.gsd_reference_size

    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """Official Scale-MAE keys → ``vit.*`` (decoder, FPN/FCN heads, classifier and
        the unused stored ``pos_embed`` dropped; ``fc_norm`` of fine-tuned files used as
        the final norm)."""
        return convert_mae_encoder_keys(state_dict, cls.dropped_prefixes, cls.__name__)
