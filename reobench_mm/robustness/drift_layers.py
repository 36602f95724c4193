"""The layers the representation-drift tool hooks, and how their outputs become tokens.

:func:`select_drift_layers` picks evenly spaced backbone blocks (ViT block lists, or
ResNet stages) or named modules; :func:`layer_tokens` turns a hooked output into
``B×N×C`` image tokens, :func:`pool_tokens` into one vector per image (the ``'sample'``
representation), and :func:`sample_token_positions` chooses the tokens the ``'token'``
representation keeps. Used by :mod:`reobench_mm.robustness.drift` (which re-exports
these names).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

__all__ = ['DriftLayer', 'LAYER_KINDS', 'select_drift_layers', 'layer_tokens', 'pool_tokens',
           'sample_token_positions']


#: Kinds of hooked layer (see :class:`DriftLayer`).
LAYER_KINDS = ('vit_block', 'module')


class DriftLayer:
    """One hooked layer.

    Args:
        name: module path in the model (``'backbone.layer3'``, ``'backbone.vit.blocks.11'``).
        module: the module.
        kind: ``'vit_block'`` (a member of a ViT backbone's block list: ``B×N×C`` tokens
            with ``num_prefix_tokens`` leading non-patch tokens, or channels-last
            ``B×h×w×C`` maps as RVSA's blocks return) or ``'module'`` (anything else:
            ``B×N×C`` tokens without prefix, or ``B×C×H×W`` maps as CNN stages return).
        num_prefix_tokens: leading class/register tokens of a ``'vit_block'``'s
            ``B×N×C`` output; they are dropped.
    """

    def __init__(self, name: str, module: nn.Module, kind: str,
                 num_prefix_tokens: int = 0) -> None:
        if kind not in LAYER_KINDS:
            raise ValueError(f'kind must be one of {LAYER_KINDS}, got {kind!r}')
        self.name = name
        self.module = module
        self.kind = kind
        self.num_prefix_tokens = int(num_prefix_tokens) if kind == 'vit_block' else 0

    def describe(self) -> Dict[str, Any]:
        return dict(name=self.name, type=type(self.module).__name__, kind=self.kind,
                    num_prefix_tokens=self.num_prefix_tokens)


# ----------------------------------------------------------------------------- layers
def _vit_block_list(backbone: nn.Module) -> Optional[Tuple[str, nn.Module, int]]:
    """``(path, block list, prefix tokens)`` of a ViT backbone, or None: where its
    ``block_prefix`` says (the package's backbones, e.g. TerraMind's ``encoder``), else
    ``blocks`` or ``vit.blocks``."""
    declared = getattr(type(backbone), 'block_prefix', None)
    paths = (backbone.block_prefix.rstrip('.'), ) if isinstance(declared, property) else ()
    for path in dict.fromkeys(paths + ('blocks', 'vit.blocks')):
        owner, blocks = backbone, backbone
        for part in path.split('.'):
            owner = blocks
            blocks = getattr(blocks, part, None)
        if isinstance(blocks, (nn.ModuleList, nn.Sequential)) and len(blocks):
            prefix = getattr(owner, 'num_prefix_tokens', None)
            if prefix is None:
                prefix = int(getattr(owner, 'cls_token', None) is not None)
            return path, blocks, int(prefix)
    return None


def _evenly_spaced(count: int, num_blocks: int) -> List[int]:
    """``num_blocks`` indices out of ``count``, evenly spaced, ending at the last (the
    backbones' default ``out_indices`` rule: 2, 5, 8, 11 of 12)."""
    return [count * (k + 1) // num_blocks - 1 for k in range(num_blocks)]


def select_drift_layers(model: nn.Module, num_blocks: int = 4,
                        layers: Optional[Sequence[str]] = None) -> List[DriftLayer]:
    """The layers whose outputs are compared.

    Without ``layers``: ``num_blocks`` evenly spaced blocks of the backbone (the last one
    included: blocks 2, 5, 8, 11 of 12), from

    - a ViT backbone's block list (``backbone.blocks`` or ``backbone.vit.blocks``): a
      ``B×N×C`` output drops the trunk's ``num_prefix_tokens`` (class/register tokens;
      the class token when the trunk only has ``cls_token``), a 4-D output is
      channels-last ``B×h×w×C`` (RVSA);
    - a CNN backbone's stages (MMSeg/MMDet ``ResNet``: ``res_layers``,
      ``layer1``..``layer4``): ``B×C×H×W`` maps.

    ``layers`` names modules explicitly (``['backbone.layer3', 'neck.fpn_convs.0']``);
    members of the backbone's ViT block list keep the rules above, other modules are
    ``B×N×C`` (no prefix tokens) when their output is 3-D and ``B×C×H×W`` when 4-D.

    Raises:
        ValueError: a bad ``num_blocks``, an unknown layer name, or a backbone with
            neither a block list nor ``res_layers`` (pass ``layers`` then).
    """
    if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 1:
        raise ValueError(f'num_blocks must be a positive integer, got {num_blocks!r}')
    backbone = getattr(model, 'backbone', None)
    vit = _vit_block_list(backbone) if backbone is not None else None
    # id of each ViT block -> prefix tokens of the trunk
    vit_members = {} if vit is None else {id(block): vit[2] for block in vit[1]}

    def vit_layer(name: str, block: nn.Module) -> DriftLayer:
        return DriftLayer(name, block, 'vit_block', vit_members[id(block)])

    if layers is not None:
        if isinstance(layers, str) or not len(layers):
            raise ValueError(f'layers must be a non-empty list of module names, got {layers!r}')
        modules = dict(model.named_modules())
        selected = []
        for name in layers:
            if name not in modules:
                close = [n for n in modules if n.startswith(str(name).rsplit('.', 1)[0])][:10]
                raise ValueError(f'no module named {name!r} in the model; modules under the '
                                 f'same parent: {close}')
            module = modules[name]
            selected.append(vit_layer(name, module) if id(module) in vit_members
                            else DriftLayer(name, module, 'module'))
        return selected
    if backbone is None:
        raise ValueError('the model has no `backbone`; pass `layers` explicitly')
    if vit is not None:
        path, blocks, _ = vit
        if num_blocks > len(blocks):
            raise ValueError(f'num_blocks={num_blocks} but the backbone has {len(blocks)} blocks')
        return [vit_layer(f'backbone.{path}.{i}', blocks[i])
                for i in _evenly_spaced(len(blocks), num_blocks)]
    stage_names = getattr(backbone, 'res_layers', None)
    if stage_names:
        if num_blocks > len(stage_names):
            raise ValueError(f'num_blocks={num_blocks} but the backbone has '
                             f'{len(stage_names)} stages ({list(stage_names)})')
        return [DriftLayer(f'backbone.{stage_names[i]}', getattr(backbone, stage_names[i]),
                           'module') for i in _evenly_spaced(len(stage_names), num_blocks)]
    raise ValueError(f'cannot find blocks in {type(backbone).__name__}: it has neither '
                     '`blocks`/`vit.blocks` nor `res_layers`; pass `layers` explicitly')


def layer_tokens(output: Any, layer: DriftLayer) -> torch.Tensor:
    """A hooked output as ``B×N×C`` image tokens (float32, detached).

    ``B×N×C`` → prefix tokens dropped; 4-D maps: ``B×h×w×C`` (ViT block) or ``B×C×H×W``
    (other modules) → ``B×HW×C``, row-major positions. A tuple/list output uses its
    first tensor.
    """
    if isinstance(output, (tuple, list)):
        output = next((o for o in output if isinstance(o, torch.Tensor)), None)
    if not isinstance(output, torch.Tensor):
        raise ValueError(f'layer {layer.name!r} returned {type(output).__name__}, '
                         'expected a tensor')
    x = output.detach().float()
    if x.ndim == 3:
        return x[:, layer.num_prefix_tokens:]
    if x.ndim == 4:
        if layer.kind == 'vit_block':
            return x.flatten(1, 2)  # channels-last B×h×w×C
        return x.flatten(2).transpose(1, 2)  # B×C×H×W
    raise ValueError(f'layer {layer.name!r} returned a {x.ndim}-D tensor of shape '
                     f'{tuple(x.shape)}; expected B×N×C or a 4-D map')


def pool_tokens(tokens: torch.Tensor) -> torch.Tensor:
    """Per-image representations: the mean of each image's ``N`` tokens, ``B×N×C`` →
    ``B×C`` (global average pooling of a CNN map, mean of a ViT's patch tokens with the
    prefix tokens already dropped by :func:`layer_tokens`)."""
    if tokens.ndim != 3 or tokens.shape[1] == 0:
        raise ValueError(f'expected B×N×C tokens with N >= 1, got shape {tuple(tokens.shape)}')
    return tokens.mean(1)


def sample_token_positions(num_tokens: int, tokens_per_image: int, seed: int,
                           image_index: int) -> Optional[np.ndarray]:
    """Token positions kept for one image: all (None) when ``num_tokens <=
    tokens_per_image``, else ``tokens_per_image`` sorted distinct positions drawn by a
    generator seeded with ``(seed, image_index, num_tokens)``, so clean and corrupted
    features of an image use the same positions whatever the batch size."""
    if num_tokens <= tokens_per_image:
        return None
    rng = np.random.default_rng([int(seed), int(image_index), int(num_tokens)])
    return np.sort(rng.choice(num_tokens, size=tokens_per_image, replace=False))
