"""A plain ImageNet-pretrained ViT (timm's ``vit_base_patch16_224`` family) as a dense
backbone: the baseline the Earth-observation encoders are compared with.

The EarthShift study compares geospatial foundation models with ImageNet-pretrained and
randomly initialised encoders of the same shape; this class is the ViT side of that
comparison (the ResNet side is the toolboxes' own ``ResNetV1c`` / ``mmdet.ResNet``).
The trunk is :class:`~.timm_vit.TimmViTBackbone` (class token, qkv bias, LayerNorm eps
1e-6, a *learned* position embedding laid out for 224×224 inputs, resampled bicubically
with antialiasing to the model's grid at load, as timm does).

Official checkpoint layout (timm's ``VisionTransformer`` state dict, e.g.
``timm.create_model('vit_base_patch16_224.augreg2_in21k_ft_in1k', pretrained=True)
.state_dict()`` saved with ``torch.save``): ``cls_token``, ``pos_embed`` (1, 1 + 14², C),
``patch_embed.proj.*``, ``blocks.{i}.*``, ``norm.*`` and the classifier ``head.*``
(dropped on load); files that pool globally have ``fc_norm.*`` instead of ``norm.*``,
which then becomes the per-token final norm. Without ``init_cfg`` the encoder is timm's
random initialisation: the randomly initialised baseline.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple, Union

import torch

from ...registry import MODELS
from .satmae import convert_mae_encoder_keys, resolve_vit_arch
from .timm_vit import TimmViTBackbone

__all__ = ['ImageNetViT']

_IMAGENET_VIT_ZOO: Dict[str, dict] = {
    's': dict(patch_size=16, embed_dims=384, depth=12, num_heads=6, mlp_ratio=4.0),
    'b': dict(patch_size=16, embed_dims=768, depth=12, num_heads=12, mlp_ratio=4.0),
    'l': dict(patch_size=16, embed_dims=1024, depth=24, num_heads=16, mlp_ratio=4.0),
}


@MODELS.register_module()
class ImageNetViT(TimmViTBackbone):
    """ViT pretrained on ImageNet (timm weights) returning the token maps of
    ``out_indices`` as ``B×C×H/p×W/p``.

    Args:
        arch: ``'b'`` (ViT-B/16), ``'s'`` or ``'l'``, or a dict with ``embed_dims``,
            ``depth``, ``num_heads`` (optional ``patch_size``, ``mlp_ratio``).
        img_size: the input size the position embedding is resampled to at load.
        in_channels, out_indices, final_norm, drop_path_rate, frozen_stages, with_cp,
            dynamic_img_pad, init_cfg, pyramid_source: see
            :class:`~.timm_vit.TimmViTBackbone`.
    """
    arch_zoo: Dict[str, dict] = _IMAGENET_VIT_ZOO
    arch_family = 'imagenet-vit'
    allowed_missing_keys: Tuple[str, ...] = ()
    #: official keys outside the encoder (the classifier)
    dropped_prefixes: Tuple[str, ...] = ('head.', 'head_drop.')

    def __init__(self, arch: Union[str, dict] = 'b', img_size: Union[int, Tuple[int, int]] = 512,
                 in_channels: int = 3, out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, drop_path_rate: float = 0.0,
                 frozen_stages: int = -1, with_cp: bool = False,
                 dynamic_img_pad: bool = False, init_cfg: Optional[dict] = None,
                 pyramid_source: str = 'blocks') -> None:
        spec = resolve_vit_arch(arch, self.arch_zoo, type(self).__name__)
        super().__init__(
            img_size=img_size, patch_size=spec['patch_size'], in_channels=in_channels,
            embed_dims=spec['embed_dims'], depth=spec['depth'], num_heads=spec['num_heads'],
            mlp_ratio=spec['mlp_ratio'], qkv_bias=True, class_token=True, pre_norm=False,
            norm_eps=1e-6, act_layer='gelu', pos_embed_antialias=True,
            dynamic_img_pad=dynamic_img_pad, drop_path_rate=drop_path_rate,
            out_indices=out_indices, final_norm=final_norm, frozen_stages=frozen_stages,
            with_cp=with_cp, init_cfg=init_cfg, pyramid_source=pyramid_source)

    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """timm's keys → ``vit.*`` (the classifier dropped; ``fc_norm`` of globally pooled
        files used as the final norm)."""
        return convert_mae_encoder_keys(state_dict, cls.dropped_prefixes, cls.__name__)
