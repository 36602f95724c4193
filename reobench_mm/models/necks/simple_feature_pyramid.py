"""ViTDet-style simple feature pyramid: one single-stride ViT map per level, rescaled
to strides 4 / 8 / 16 / 32 (the RVSA / REOBench protocol)."""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from mmengine.logging import print_log
from mmengine.model import BaseModule
from timm.layers import LayerNorm2d
from torch import nn

from ...registry import MODELS

__all__ = ['SimpleFeaturePyramid', 'BilinearRescale', 'pyramid_scales']

TARGET_STRIDES = (4, 8, 16, 32)


def pyramid_scales(patch_size: int, strides: Sequence[int] = TARGET_STRIDES
                   ) -> Tuple[int, Tuple[float, ...]]:
    """``(working_stride, scale per level)`` for token maps of stride ``patch_size``.

    Powers of two work directly (patch 16: ×4, ×2, ×1, ×½; patch 32: ×8, ×4, ×2, ×1).
    Other patch sizes (14) cannot reach the target strides with factors of two: their
    maps are first resized to the stride-16 grid, then scaled like patch 16.
    """
    if patch_size < 1:
        raise ValueError(f'patch_size must be >= 1, got {patch_size}')
    working = patch_size if patch_size & (patch_size - 1) == 0 else 16
    return working, tuple(working / s for s in strides)


def _upsampler(channels: int, factor: int) -> nn.Module:
    steps = int(math.log2(factor))
    layers: List[nn.Module] = []
    for step in range(steps):
        layers.append(nn.ConvTranspose2d(channels, channels, kernel_size=2, stride=2))
        if step < steps - 1:  # ConvT → LN → GELU between transposed convolutions
            layers += [LayerNorm2d(channels), nn.GELU()]
    return nn.Sequential(*layers)


class BilinearRescale(nn.Module):
    """``F.interpolate(x, scale_factor=factor, mode='bilinear', align_corners=False)``
    (output side ``floor(factor · side)``); no parameters."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = float(factor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, scale_factor=self.factor, mode='bilinear', align_corners=False)

    def extra_repr(self) -> str:
        return f'factor={self.factor}'


@MODELS.register_module()
class SimpleFeaturePyramid(BaseModule):
    """Rescale the ``B×C×h×w`` maps of a plain ViT (one per level) to strides 4/8/16/32.

    Per level, with ``s = patch_size / stride``: ×4 is ConvTranspose 2×2 s2 → LayerNorm
    over channels → GELU → ConvTranspose 2×2 s2; ×2 one ConvTranspose; ×1 identity;
    ×½ MaxPool 2 (and ×8, ×¼ likewise for patch 32 / 8). Channels stay ``in_channels``
    (UperHead takes ``[C] * 4``; for Oriented R-CNN follow it with mmdet's ``FPN`` by
    giving ``neck`` as a list of both configs).

    Patch sizes that are not powers of two (14 for CLIP ViT-L/14): each map is resized
    bilinearly to the stride-16 grid, ``round(h · patch_size / 16)`` (512 px → 36 or 37
    tokens → 32; 800 px → 57 → 50), before the usual scales; outputs then have exactly
    the strides 4/8/16/32 of the padded input. This is explicit here rather than a
    silent approximation of the strides.

    Args:
        in_channels: channels of the backbone maps (its ``embed_dims``).
        patch_size: the backbone's patch size (stride of its maps).
        num_levels: number of input maps, one per output level (4).
        level0_rescale: None, or a factor by which level 0 is rescaled bilinearly after
            its upsampling (:class:`BilinearRescale`, appended to ``levels[0]``; no
            weights, so checkpoints are unchanged). REOBench's patch-14 CLIP detection
            backbone uses 3.5 / 4: stride-14 tokens ×4, then ×0.875, about stride 4
            (57 tokens → 228 → 199 at 800 px).
        init_cfg: MMEngine init config.
    """

    def __init__(self, in_channels: int, patch_size: int = 16, num_levels: int = 4,
                 level0_rescale: Optional[float] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        if num_levels != len(TARGET_STRIDES):
            raise ValueError(f'num_levels must be {len(TARGET_STRIDES)} (strides '
                             f'{TARGET_STRIDES}), got {num_levels}')
        if level0_rescale is not None and (isinstance(level0_rescale, bool)
                                           or not isinstance(level0_rescale, (int, float))
                                           or not level0_rescale > 0):
            raise ValueError(f'level0_rescale must be None or a positive number (e.g. 3.5 / 4 '
                             f'for stride-14 tokens), got {level0_rescale!r}')
        self.in_channels, self.patch_size = in_channels, patch_size
        self.working_stride, self.scales = pyramid_scales(patch_size)
        self.levels = nn.ModuleList()
        for scale in self.scales:
            if scale > 1:
                self.levels.append(_upsampler(in_channels, int(scale)))
            elif scale == 1:
                self.levels.append(nn.Identity())
            else:
                factor = int(round(1 / scale))
                self.levels.append(nn.MaxPool2d(kernel_size=factor, stride=factor))
        self.level0_rescale = level0_rescale
        if level0_rescale is not None:
            first = self.levels[0]
            layers = list(first) if isinstance(first, nn.Sequential) else [first]
            self.levels[0] = nn.Sequential(*layers, BilinearRescale(level0_rescale))
        self._resize_logged = False

    def _to_working_grid(self, x: torch.Tensor) -> torch.Tensor:
        if self.working_stride == self.patch_size:
            return x
        size = tuple(max(1, round(n * self.patch_size / self.working_stride))
                     for n in x.shape[-2:])
        if not self._resize_logged:
            print_log(f'SimpleFeaturePyramid: patch {self.patch_size} maps {tuple(x.shape[-2:])}'
                      f' resized to the stride-{self.working_stride} grid {size}',
                      logger='current')
            self._resize_logged = True
        return F.interpolate(x, size=size, mode='bilinear', align_corners=False)

    def forward(self, inputs: Sequence[torch.Tensor]) -> Tuple[torch.Tensor, ...]:
        if len(inputs) != len(self.levels):
            raise ValueError(f'SimpleFeaturePyramid expects {len(self.levels)} maps (one per '
                             f'level), got {len(inputs)}')
        return tuple(level(self._to_working_grid(x)) for level, x in zip(self.levels, inputs))
