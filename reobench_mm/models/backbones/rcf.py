"""Random convolutional features (RCF; MOSAIKS, Rolf et al. 2021) as a dense backbone:
:class:`RandomConvFeatures`, the calibration study's untrained baseline.

The features follow torchgeo's ``torchgeo.models.RCF`` in its ``'gaussian'`` mode (the
MOSAIKS featurisation): ``features / 2`` filters of size ``k×k`` over all input bands,
drawn once from a standard normal distribution (``torch.randn`` with a seeded CPU
generator, in torchgeo's shape and order), every filter with the same constant bias (-1
by default); the response ``z = conv(x, w) + b`` (stride 1, no padding) gives two
features per filter, ``relu(z)`` and ``relu(-z)`` (the second negates the bias too, as
torchgeo's code does), concatenated filters-first then the negated half. Nothing is
trained: filters and biases are buffers.

torchgeo (and MOSAIKS) then average each feature over the whole image, one vector per
image (:meth:`RandomConvFeatures.pooled`). For the FPN probe this backbone averages over
windows instead, at four scales: level ``l`` is the mean of the feature maps over
non-overlapping ``s×s`` windows, ``s`` = 4, 8, 16, 32 (``avg_pool2d`` with
``ceil_mode=True``: the last window of a row or column is the part inside the map, so a
``H×W`` input gives ``ceil((H-k+1)/s)`` cells, which is ``H/s`` when ``s`` divides ``H``
and ``k ≤ s``). Every level has ``features`` channels; the global mean is the limit of
the coarsest level. This multi-scale pooling is the package's choice; the empirical
mode (whitened patches sampled from a dataset) is not provided.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from mmengine.model import BaseModule

from ...registry import MODELS

__all__ = ['RandomConvFeatures']

#: the filters convolved in one pass (bounds the memory of the full-resolution maps)
_FILTERS_PER_PASS = 32


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f'RandomConvFeatures: {name} must be a positive int, got {value!r}')
    return value


@MODELS.register_module()
class RandomConvFeatures(BaseModule):
    """Fixed random convolutional features pooled at strides 4, 8, 16 and 32.

    Args:
        in_channels: input bands.
        features: channels of every level, even (half from ``relu(z)``, half from
            ``relu(-z)``).
        kernel_size: the filters' size ``k``.
        bias: the filters' common bias.
        seed: seed of the CPU generator the filters are drawn with (torchgeo's RCF with
            the same seed, unless 0, draws the same filters).
        strides: the pooling windows of the four levels, increasing.
        init_cfg: MMEngine's init config (nothing to initialise: the filters are drawn
            at construction and are buffers, saved with a trained model).

    Raises:
        ValueError: a non-positive size, an odd ``features``, or strides that are not
            four increasing positive ints.
    """

    weights: torch.Tensor
    biases: torch.Tensor

    def __init__(self, in_channels: int = 3, features: int = 512, kernel_size: int = 3,
                 bias: float = -1.0, seed: int = 0,
                 strides: Sequence[int] = (4, 8, 16, 32),
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self.in_channels = _positive_int('in_channels', in_channels)
        self.features = _positive_int('features', features)
        if features % 2:
            raise ValueError(f'RandomConvFeatures: features must be even (half relu(z), half '
                             f'relu(-z)), got {features}')
        self.kernel_size = _positive_int('kernel_size', kernel_size)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f'RandomConvFeatures: seed must be an int, got {seed!r}')
        strides = tuple(strides)
        if len(strides) != 4 or any(isinstance(s, bool) or not isinstance(s, int) or s < 1
                                    for s in strides) or list(strides) != sorted(set(strides)):
            raise ValueError(f'RandomConvFeatures: strides must be 4 increasing positive ints, '
                             f'got {strides!r}')
        self.strides = strides
        self.channels = (features, ) * 4
        generator = torch.Generator().manual_seed(seed)
        filters = features // 2
        self.register_buffer('weights', torch.randn(filters, in_channels, kernel_size,
                                                    kernel_size, generator=generator))
        self.register_buffer('biases', torch.full((filters, ), float(bias)))

    def _feature_chunks(self, x: torch.Tensor):
        """``(relu(z), relu(-z))`` for each group of :data:`_FILTERS_PER_PASS` filters."""
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f'RandomConvFeatures expects B×{self.in_channels}×H×W inputs, '
                             f'got {tuple(x.shape)}')
        if min(x.shape[-2:]) < self.kernel_size:
            raise ValueError(f'RandomConvFeatures: the input ({tuple(x.shape[-2:])}) is '
                             f'smaller than the kernel ({self.kernel_size})')
        for start in range(0, self.weights.shape[0], _FILTERS_PER_PASS):
            stop = start + _FILTERS_PER_PASS
            response = F.conv2d(x, self.weights[start:stop], self.biases[start:stop])
            yield F.relu(response), F.relu(-response)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        """The four levels: the features averaged over ``s×s`` windows, ``s`` in
        ``strides``; ``B×features×ceil((H-k+1)/s)×ceil((W-k+1)/s)`` each."""
        positive: List[List[torch.Tensor]] = [[] for _ in self.strides]
        negative: List[List[torch.Tensor]] = [[] for _ in self.strides]
        for relu_z, relu_minus_z in self._feature_chunks(x):
            for level, stride in enumerate(self.strides):
                positive[level].append(F.avg_pool2d(relu_z, stride, stride, ceil_mode=True))
                negative[level].append(F.avg_pool2d(relu_minus_z, stride, stride,
                                                    ceil_mode=True))
        return tuple(torch.cat(pos + neg, dim=1) for pos, neg in zip(positive, negative))

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        """torchgeo's / MOSAIKS' feature vector: every feature averaged over the whole
        image, ``B×features``."""
        positive, negative = [], []
        for relu_z, relu_minus_z in self._feature_chunks(x):
            positive.append(relu_z.mean(dim=(2, 3)))
            negative.append(relu_minus_z.mean(dim=(2, 3)))
        return torch.cat(positive + negative, dim=1)
