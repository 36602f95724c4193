"""Layer-wise learning-rate decay for the package's ViT backbones.

MMSegmentation's ``LayerDecayOptimizerConstructor`` recognises layers by backbone class
names (BEiT, ConvNeXt, MAE); this one asks the backbone (``layer_id`` / ``num_layers``
of :class:`~reobench_mm.models.backbones.base.DenseViTBackbone`), so it works for every
backbone here, whatever the wrapper's attribute names.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import torch
from mmengine.logging import print_log
from mmengine.optim import DefaultOptimWrapperConstructor
from torch import nn

from ..registry import OPTIM_WRAPPER_CONSTRUCTORS

__all__ = ['ViTLayerDecayOptimWrapperConstructor', 'NO_DECAY_KEYWORDS', 'parameter_group_of']

#: Parameter-name keywords that never get weight decay (with 1-D parameters and biases).
NO_DECAY_KEYWORDS = ('pos_embed', 'cls_token', 'rel_pos', 'relative_position_bias_table',
                     'class_embedding', 'positional_embedding')


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class ViTLayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """Parameter groups with ``lr = base_lr · rate^(L − 1 − layer)``.

    Layers: position/patch embeddings (and class token) 0, block ``i`` ``i + 1``,
    everything else (final norm, neck, heads) ``L − 1`` with ``L`` the backbone's
    ``num_layers`` (depth + 2), so the heads keep the base lr. No weight decay on 1-D
    parameters, biases, position embeddings, class tokens and relative-position tables.

    ``paramwise_cfg``: ``layer_decay_rate`` (e.g. 0.9; required) and optionally
    ``num_layers`` (must equal the backbone's; given for readability of configs).
    """

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg: Optional[dict] = None) -> None:
        paramwise_cfg = dict(paramwise_cfg or {})
        unknown = set(paramwise_cfg) - {'layer_decay_rate', 'num_layers'}
        if unknown:
            raise ValueError(f'{type(self).__name__} paramwise_cfg takes layer_decay_rate and '
                             f'num_layers, got also {sorted(unknown)}')
        if 'layer_decay_rate' not in paramwise_cfg:
            raise ValueError('paramwise_cfg needs layer_decay_rate (e.g. 0.9)')
        rate = float(paramwise_cfg['layer_decay_rate'])
        if not 0 < rate <= 1:
            raise ValueError(f'layer_decay_rate must be in (0, 1], got {rate}')
        self.layer_decay_rate = rate
        self.expected_num_layers = paramwise_cfg.get('num_layers')
        super().__init__(optim_wrapper_cfg, paramwise_cfg=paramwise_cfg)

    def add_params(self, params: List[dict], module: nn.Module, prefix: str = '',
                   is_dcn_module=None) -> None:
        model = module.module if hasattr(module, 'module') else module  # DDP wrapper
        backbone = getattr(model, 'backbone', None)
        if backbone is None or not hasattr(backbone, 'layer_id'):
            raise TypeError(f'{type(self).__name__} needs model.backbone with layer_id() and '
                            f'num_layers (the package ViT backbones); got '
                            f'{type(backbone).__name__}')
        num_layers = backbone.num_layers
        if self.expected_num_layers is not None and self.expected_num_layers != num_layers:
            raise ValueError(f'paramwise_cfg num_layers={self.expected_num_layers} but the '
                             f'backbone has {num_layers} layer-decay groups (depth + 2)')
        no_decay_backbone = backbone.no_weight_decay_names()
        weight_decay = self.base_wd or 0.0
        groups: Dict[Tuple[int, bool], dict] = {}
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            if name.startswith('backbone.'):
                inner = name[len('backbone.'):]
                layer = backbone.layer_id(inner)
                decays = inner not in no_decay_backbone
            else:
                layer = num_layers - 1
                decays = True
            decays = decays and param.ndim > 1 and not name.endswith('.bias') \
                and not any(k in name for k in NO_DECAY_KEYWORDS)
            key = (layer, decays)
            if key not in groups:
                scale = self.layer_decay_rate**(num_layers - 1 - layer)
                groups[key] = dict(params=[], param_names=[], lr=self.base_lr * scale,
                                   lr_scale=scale, layer_id=layer,
                                   weight_decay=weight_decay if decays else 0.0)
            groups[key]['params'].append(param)
            groups[key]['param_names'].append(name)
        for key in sorted(groups):
            params.append(groups[key])
        print_log(f'layer-wise lr decay {self.layer_decay_rate} over {num_layers} groups: '
                  f'{len(groups)} parameter groups', logger='current')


def parameter_group_of(optimizer: torch.optim.Optimizer, name: str) -> dict:
    """The parameter group holding parameter ``name`` (for inspection and tests)."""
    for group in optimizer.param_groups:
        if name in group.get('param_names', ()):
            return group
    raise KeyError(f'no parameter group holds {name!r}')
