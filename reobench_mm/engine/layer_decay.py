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

__all__ = ['ViTLayerDecayOptimWrapperConstructor', 'NO_DECAY_KEYWORDS',
           'RECIPE_NO_DECAY_KEYWORDS', 'LAYER_ID_RULES', 'parameter_group_of']

#: Parameter-name keywords that never get weight decay (with 1-D parameters and biases).
NO_DECAY_KEYWORDS = ('pos_embed', 'cls_token', 'rel_pos', 'relative_position_bias_table',
                     'class_embedding', 'positional_embedding')
#: The keywords of the RVSA recipe's constructor (REOBench's segmentation configs):
#: the Swin-style bias tables and CLIP's position embedding do get weight decay there.
RECIPE_NO_DECAY_KEYWORDS = ('pos_embed', 'cls_token', 'rel_pos_')
#: ``paramwise_cfg.layer_ids``: how parameters get their layer.
#:
#: - ``'backbone'``: the backbone's own ``layer_id`` over ``depth + 2`` groups (embeddings
#:   0, block ``i`` ``i + 1``, the rest ``depth + 1``).
#: - ``'recipe_blocks'``: the RVSA recipe's ``LayerDecayOptimizerConstructor`` as
#:   REOBench's segmentation configs use it on a backbone whose blocks it recognises
#:   (named ``blocks.N`` in the authors' code): ``num_layers`` from the config (12 for
#:   every model there) gives ``num_layers + 2`` groups whatever the depth; embeddings 0,
#:   block ``i`` ``i + 1`` *unclipped*, so a 24-block model's blocks 13..23 get lr scales
#:   ``rate^-1 … rate^-11`` (above 1), as the recipe computes; the rest ``num_layers + 1``.
#: - ``'recipe_none'``: the same constructor on a backbone none of whose parameter names
#:   it recognises (the authors' CLIP wrapper): every parameter at the base lr.
#:
#: The two recipe rules also use the recipe's weight-decay exclusions
#: (:data:`RECIPE_NO_DECAY_KEYWORDS`, 1-D parameters, biases).
LAYER_ID_RULES = ('backbone', 'recipe_blocks', 'recipe_none')


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class ViTLayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """Parameter groups with ``lr = base_lr · rate^(L − 1 − layer)``.

    Layers: position/patch embeddings (and class token) 0, block ``i`` ``i + 1``,
    everything else (final norm, neck, heads) ``L − 1`` with ``L`` the backbone's
    ``num_layers`` (depth + 2), so the heads keep the base lr. No weight decay on 1-D
    parameters, biases, position embeddings, class tokens and relative-position tables.

    ``paramwise_cfg``: ``layer_decay_rate`` (e.g. 0.9; required), ``layer_ids`` (one of
    :data:`LAYER_ID_RULES`, default ``'backbone'``) and ``num_layers``: with
    ``'backbone'`` optional and then equal to the backbone's ``depth + 2`` (for
    readability of configs); with the recipe rules required, the recipe's block count
    (``num_layers + 2`` groups).
    """

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg: Optional[dict] = None) -> None:
        paramwise_cfg = dict(paramwise_cfg or {})
        unknown = set(paramwise_cfg) - {'layer_decay_rate', 'num_layers', 'layer_ids'}
        if unknown:
            raise ValueError(f'{type(self).__name__} paramwise_cfg takes layer_decay_rate, '
                             f'num_layers and layer_ids, got also {sorted(unknown)}')
        self.layer_ids = paramwise_cfg.pop('layer_ids', 'backbone')
        if self.layer_ids not in LAYER_ID_RULES:
            raise ValueError(f'paramwise_cfg layer_ids must be one of {LAYER_ID_RULES}, '
                             f'got {self.layer_ids!r}')
        recipe_layers = paramwise_cfg.get('num_layers')
        if self.layer_ids != 'backbone' and not isinstance(recipe_layers, int):
            raise ValueError(f"paramwise_cfg layer_ids={self.layer_ids!r} needs num_layers, "
                             "the recipe's block count (12 in REOBench's configs)")
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
        recipe = self.layer_ids != 'backbone'
        if recipe:
            num_layers = self.expected_num_layers + 2
        else:
            num_layers = backbone.num_layers
            if self.expected_num_layers is not None and self.expected_num_layers != num_layers:
                raise ValueError(f'paramwise_cfg num_layers={self.expected_num_layers} but the '
                                 f'backbone has {num_layers} layer-decay groups (depth + 2)')
        no_decay_backbone = () if recipe else backbone.no_weight_decay_names()
        keywords = RECIPE_NO_DECAY_KEYWORDS if recipe else NO_DECAY_KEYWORDS
        weight_decay = self.base_wd or 0.0
        groups: Dict[Tuple[int, bool], dict] = {}
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            layer, decays = num_layers - 1, True
            if name.startswith('backbone.') and self.layer_ids != 'recipe_none':
                inner = name[len('backbone.'):]
                layer = backbone.layer_id(inner)
                decays = inner not in no_decay_backbone
                if recipe and inner.startswith(backbone.block_prefix):
                    layer = int(inner[len(backbone.block_prefix):].split('.')[0]) + 1
                elif recipe and layer != 0:  # neither an embedding nor a block
                    layer = num_layers - 1
            decays = decays and param.ndim > 1 and not name.endswith('.bias') \
                and not any(k in name for k in keywords)
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
        print_log(f'layer-wise lr decay {self.layer_decay_rate} over {num_layers} groups '
                  f'({self.layer_ids} rule): {len(groups)} parameter groups', logger='current')


def parameter_group_of(optimizer: torch.optim.Optimizer, name: str) -> dict:
    """The parameter group holding parameter ``name`` (for inspection and tests)."""
    for group in optimizer.param_groups:
        if name in group.get('param_names', ()):
            return group
    raise KeyError(f'no parameter group holds {name!r}')
