"""SatMAE and SatMAE++ (fMoW-RGB, ViT-L/16) as dense backbones on timm's ViT.

Both encoders are plain ViTs (class token, qkv bias, LayerNorm eps 1e-6, fixed 2-D
sin-cos position embedding with a zero class row laid out for 224×224 inputs), so the
trunk is :class:`~.timm_vit.TimmViTBackbone`; this file adds the presets and the
converters of the official checkpoints.

Official checkpoint layout (``{'model': state_dict, 'optimizer', 'epoch', 'scaler',
'args': argparse.Namespace}`` as written by the MAE training scripts):

- encoder, timm key names: ``cls_token``, ``pos_embed`` (1, 1 + 14², C), fixed sin-cos),
  ``patch_embed.proj.{weight,bias}``, ``blocks.{i}.{norm1,attn.qkv,attn.proj,norm2,
  mlp.fc1,mlp.fc2}.*`` and ``norm.*``;
- MAE decoder of the pre-training files: ``decoder_embed.*``, ``mask_token``,
  ``decoder_pos_embed``, ``decoder_blocks.*``, ``decoder_norm.*``, ``decoder_pred.*``;
- SatMAE++ pre-training files add the multi-scale upsampling decoder:
  ``proj_up_conv.*``, ``proj_up_norm.*`` and ``up_block.*`` (``up_block1.*``,
  ``up_block2.*`` in its multi-spectral variant);
- fine-tuned classification files (global average pooling) have ``fc_norm.*`` in
  place of ``norm.*`` and a classifier ``head.*``.

Position embedding at another grid (``main_finetune.py`` of both official repositories,
and the SatMAE backbones of REOBench's segmentation code): the fine-tuning ViT is built
for its input size with the 2-D sin-cos embedding of that grid (zero class row); a
checkpoint ``pos_embed`` whose shape differs is deleted *before*
``interpolate_pos_embed`` runs, so that function (bicubic, ``align_corners=False``, no
antialias, class row kept) never changes anything and the model keeps its own sin-cos.
``pos_embed_resize='sincos'`` (the default) does the same; ``'bicubic'`` resamples the
checkpoint's embedding as ``interpolate_pos_embed`` is written; ``'bicubic_antialias'``
as timm does by default.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple, Union

import torch
from mmengine.logging import MMLogger

from ...registry import MODELS
from .base import sincos_pos_embed_2d
from .timm_vit import TimmViTBackbone

__all__ = ['SatMAE', 'SatMAEPlusPlus', 'resolve_vit_arch', 'convert_mae_encoder_keys',
           'POS_EMBED_RESIZE_MODES']

#: How :class:`SatMAE` fits a checkpoint's position embedding laid out for another grid.
POS_EMBED_RESIZE_MODES = ('sincos', 'bicubic', 'bicubic_antialias')

_ARCH_KEYS_REQUIRED = ('embed_dims', 'depth', 'num_heads')
_ARCH_KEYS_OPTIONAL = ('patch_size', 'mlp_ratio')


def resolve_vit_arch(arch: Union[str, dict], arch_zoo: Dict[str, dict],
                     owner: str) -> Dict[str, Union[int, float]]:
    """Shape of a ViT from a preset name of ``arch_zoo`` or a dict with ``embed_dims``,
    ``depth``, ``num_heads`` and optionally ``patch_size`` (16) and ``mlp_ratio`` (4)."""
    if isinstance(arch, str):
        if arch not in arch_zoo:
            raise ValueError(f'{owner}: unknown arch {arch!r}; valid presets: '
                             f'{sorted(arch_zoo)}, or a dict with keys '
                             f'{list(_ARCH_KEYS_REQUIRED)} (optional {list(_ARCH_KEYS_OPTIONAL)})')
        return dict(arch_zoo[arch])
    if not isinstance(arch, dict):
        raise ValueError(f'{owner}: arch must be a preset name {sorted(arch_zoo)} or a dict, '
                         f'got {type(arch).__name__}')
    missing = [k for k in _ARCH_KEYS_REQUIRED if k not in arch]
    unknown = sorted(set(arch) - set(_ARCH_KEYS_REQUIRED) - set(_ARCH_KEYS_OPTIONAL))
    if missing or unknown:
        raise ValueError(f'{owner}: arch dict needs keys {list(_ARCH_KEYS_REQUIRED)} '
                         f'(optional {list(_ARCH_KEYS_OPTIONAL)}); missing {missing}, '
                         f'unknown {unknown}')
    spec = dict(patch_size=16, mlp_ratio=4.0)
    spec.update(arch)
    return spec


def convert_mae_encoder_keys(state_dict: Dict[str, torch.Tensor],
                             dropped_prefixes: Sequence[str],
                             owner: str) -> Dict[str, torch.Tensor]:
    """Keep the ViT encoder of an MAE-style checkpoint under the ``vit.`` prefix.

    Keys starting with one of ``dropped_prefixes`` (decoders, heads) are dropped. The
    final LayerNorm: pre-training files have ``norm.*``; fine-tuned files with global
    pooling have only ``fc_norm.*``, the LayerNorm trained on the pooled last-block
    tokens, which then becomes the per-token final norm ``vit.norm.*`` (used by
    ``final_norm=True``); when both exist ``fc_norm.*`` is dropped.
    """
    if 'channel_embed' in state_dict or any(k.startswith('patch_embed.0.')
                                            for k in state_dict):
        raise ValueError(f'{owner}: this is a group-channel (multi-spectral) checkpoint '
                         '(keys channel_embed / patch_embed.<group>.*); only the RGB '
                         'single-patch-embedding layout is supported')
    has_norm = any(k.startswith('norm.') for k in state_dict)
    converted = {}
    for key, value in state_dict.items():
        if any(key.startswith(p) for p in dropped_prefixes):
            continue
        if key.startswith('fc_norm.'):
            if has_norm:
                continue
            key = 'norm.' + key[len('fc_norm.'):]
        converted['vit.' + key] = value
    return converted


_MAE_VIT_ZOO: Dict[str, dict] = {
    'b': dict(patch_size=16, embed_dims=768, depth=12, num_heads=12, mlp_ratio=4.0),
    'l': dict(patch_size=16, embed_dims=1024, depth=24, num_heads=16, mlp_ratio=4.0),
}


@MODELS.register_module()
class SatMAE(TimmViTBackbone):
    """SatMAE encoder (fMoW-RGB, Cong et al. 2022) returning the token maps of
    ``out_indices`` as ``B×C×H/p×W/p``.

    The position embedding ``vit.pos_embed`` is learnable (as in the official
    fine-tuning) and starts as the 2-D sin-cos of the ``img_size`` grid with a zero class
    row. A checkpoint's embedding for the same grid is loaded as it is; one for another
    grid (the 14×14 of the 224-px pre-training) is fitted as ``pos_embed_resize`` says.

    Args:
        arch: ``'l'`` (ViT-L/16: 1024 wide, 24 blocks, 16 heads; the fMoW-RGB release)
            or ``'b'`` (ViT-B/16), or a dict with ``embed_dims``, ``depth``,
            ``num_heads`` (optional ``patch_size``, ``mlp_ratio``).
        img_size: the input size the position embedding is resampled to at load.
        in_channels: input channels (3 for the RGB checkpoints).
        out_indices: blocks to output (None: 5/11/17/23 for 24 blocks; a preset name
            of ``OUT_INDEX_PRESETS`` such as ``'vit24_reobench_segmentation'``).
        final_norm: apply the final LayerNorm to every output (for fine-tuned files
            with global pooling this is their ``fc_norm``); None: False, or True with
            ``pyramid_source='last_block'``.
        pyramid_source: ``'blocks'`` (the maps of ``out_indices``) or ``'last_block'``
            (the last block's normalised map for all 4 levels); see
            :data:`~.base.PYRAMID_SOURCES`.
        drop_path_rate, frozen_stages, with_cp, init_cfg: see
            :class:`~.timm_vit.TimmViTBackbone`.
        dynamic_img_pad: pad inputs to a multiple of the patch size.
        pos_embed_resize: how a checkpoint's embedding for another grid is fitted:
            ``'sincos'`` (default) replaces it by the sin-cos of the model's grid, as the
            official fine-tuning code ends up doing; ``'bicubic'`` resamples it (bicubic,
            ``align_corners=False``, no antialias, class row kept: MAE's
            ``interpolate_pos_embed``); ``'bicubic_antialias'`` resamples it with
            antialiasing (timm's default, earlier versions of this package). Inputs whose
            grid differs from ``img_size``'s are resampled at every forward, without
            antialias unless ``'bicubic_antialias'``.
    """
    arch_zoo: Dict[str, dict] = _MAE_VIT_ZOO
    arch_family = 'satmae'
    #: every model key is in both the pre-training and the fine-tuned files.
    allowed_missing_keys: Tuple[str, ...] = ()
    #: official keys outside the encoder (MAE decoder, classifier).
    dropped_prefixes: Tuple[str, ...] = ('decoder', 'mask_token', 'head.')

    def __init__(self, arch: Union[str, dict] = 'l', img_size: Union[int, Tuple[int, int]] = 512,
                 in_channels: int = 3, out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, drop_path_rate: float = 0.0,
                 frozen_stages: int = -1, with_cp: bool = False,
                 dynamic_img_pad: bool = False, pos_embed_resize: str = 'sincos',
                 init_cfg: Optional[dict] = None, pyramid_source: str = 'blocks') -> None:
        spec = resolve_vit_arch(arch, self.arch_zoo, type(self).__name__)
        if pos_embed_resize not in POS_EMBED_RESIZE_MODES:
            raise ValueError(f'{type(self).__name__}: pos_embed_resize must be one of '
                             f'{list(POS_EMBED_RESIZE_MODES)}, got {pos_embed_resize!r}')
        if spec['embed_dims'] % 4:
            raise ValueError(f"{type(self).__name__}: embed_dims must be divisible by 4 for "
                             f"the 2-D sin-cos embedding, got {spec['embed_dims']}")
        self.pos_embed_resize = pos_embed_resize
        super().__init__(
            img_size=img_size, patch_size=spec['patch_size'], in_channels=in_channels,
            embed_dims=spec['embed_dims'], depth=spec['depth'], num_heads=spec['num_heads'],
            mlp_ratio=spec['mlp_ratio'], qkv_bias=True, class_token=True, pre_norm=False,
            norm_eps=1e-6, act_layer='gelu',
            pos_embed_antialias=pos_embed_resize == 'bicubic_antialias',
            dynamic_img_pad=dynamic_img_pad, drop_path_rate=drop_path_rate,
            out_indices=out_indices, final_norm=final_norm, frozen_stages=frozen_stages,
            with_cp=with_cp, init_cfg=init_cfg, pyramid_source=pyramid_source)
        self._reset_pos_embed()

    def _reset_pos_embed(self) -> None:
        with torch.no_grad():
            self.vit.pos_embed.copy_(self.sincos_pos_embed())

    def init_weights(self) -> None:
        """Load the ``Pretrained`` checkpoint of ``init_cfg``, or initialise as the
        official fine-tuning model does: timm's initialisation, then the sin-cos position
        embedding of the model's grid (timm's own ``init_weights`` draws it at random)."""
        super().init_weights()
        if not (isinstance(self.init_cfg, dict) and self.init_cfg.get('type') == 'Pretrained'):
            self._reset_pos_embed()

    def sincos_pos_embed(self) -> torch.Tensor:
        """``(1, 1 + h·w, C)``: SatMAE's fixed 2-D sin-cos embedding of the model's grid
        (computed in float64, stored in float32) with a zero class row."""
        grid = sincos_pos_embed_2d(self.embed_dims, self.grid_size, dtype=torch.float64)
        return torch.cat([grid.new_zeros(1, self.embed_dims), grid]).float()[None]

    def adapt_state_dict(self, state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Fit ``vit.pos_embed`` to this model's grid as ``pos_embed_resize`` says
        (``'sincos'``: an embedding of another shape is replaced by
        :meth:`sincos_pos_embed`; otherwise it is resampled bicubically)."""
        pos = state_dict.get('vit.pos_embed')
        if self.pos_embed_resize == 'sincos' and pos is not None \
                and pos.shape[-1] == self.embed_dims and pos.numel() != self.vit.pos_embed.numel():
            state_dict = dict(state_dict)
            state_dict['vit.pos_embed'] = self.sincos_pos_embed().to(pos.dtype)
            MMLogger.get_current_instance().info(
                f'{type(self).__name__}: the checkpoint position embedding '
                f'{tuple(pos.shape)} does not fit the {self.grid_size} grid; replaced by the '
                "grid's 2-D sin-cos (pos_embed_resize='sincos', as the official fine-tuning)")
            return state_dict
        return super().adapt_state_dict(state_dict)

    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """Official SatMAE keys → ``vit.*`` (decoder, mask token and head dropped;
        ``fc_norm`` of fine-tuned files used as the final norm)."""
        return convert_mae_encoder_keys(state_dict, cls.dropped_prefixes, cls.__name__)


@MODELS.register_module()
class SatMAEPlusPlus(SatMAE):
    """SatMAE++ encoder (fMoW-RGB, Noman et al. 2024): the same ViT trunk as
    :class:`SatMAE`; its pre-training checkpoints also hold the multi-scale upsampling
    decoder (``proj_up_conv``, ``proj_up_norm``, ``up_block*``), dropped on load.

    Args: see :class:`SatMAE`.
    """
    arch_family = 'satmae++'
    dropped_prefixes: Tuple[str, ...] = SatMAE.dropped_prefixes + ('proj_up_', 'up_block')
