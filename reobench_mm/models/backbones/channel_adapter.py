"""A learnable 1×1 convolution that maps the bands of the data to the input channels a
backbone was built for: :class:`ChannelAdapter`.

EarthShift (Doerksen & Kerner 2026) fine-tunes RGB-pretrained encoders on data with
other band counts (e.g. 13 Sentinel-2 bands) by putting a 1×1 convolution without bias
in front of the encoder (``channel_adapter`` in the official code's ``utils.py``), and
nothing when the band count already is the encoder's. :class:`ChannelAdapter` is that
convolution wrapped around any backbone config, so a task config keeps its backbone and
gains the adapter::

    backbone=dict(type='ChannelAdapter', in_channels=13,
                  backbone=dict(type='ImageNetViT', arch='b', ...))

The convolution keeps PyTorch's default initialisation; the wrapped backbone initialises
itself (its ``init_cfg``, e.g. a pretrained checkpoint, works as without the adapter). In
the official code's frozen ('head') mode every parameter outside the decoder is frozen,
the adapter included, which then stays at its random initialisation: ``frozen=True``.
The backbone's outputs are returned unchanged, so necks and heads see what they would see
without the adapter.
"""
from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence, Union

import torch
from mmengine.model import BaseModule
from torch import nn

from ...registry import MODELS
from .base import freeze_module

__all__ = ['ChannelAdapter']


def _check_channels(name: str, value: Any) -> int:
    """``value`` as a positive channel count, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f'ChannelAdapter: {name} must be a positive number of channels '
                         f'(an int >= 1), got {value!r}')
    return value


@MODELS.register_module()
class ChannelAdapter(BaseModule):
    """A 1×1 convolution ``in_channels`` → ``out_channels`` (no bias) before a backbone.

    Args:
        in_channels: bands of the input images (e.g. 13 for Sentinel-2 L1C).
        backbone: config of the wrapped backbone (built from the registry of the current
            default scope, as the model's own backbone would be); it must take
            ``out_channels`` input channels.
        out_channels: input channels of the wrapped backbone (3 for RGB backbones). When
            equal to ``in_channels`` the adapter is the identity, with no parameters.
        frozen: freeze the convolution (no gradients, also after ``train()``), as the
            official frozen-encoder mode does.
        init_cfg: MMEngine init config of the adapter as a whole (default None: the
            convolution keeps PyTorch's default initialisation and the wrapped backbone
            runs its own ``init_weights``).

    Attributes:
        adapter (nn.Module): the ``nn.Conv2d(in_channels, out_channels, 1, bias=False)``,
            or ``nn.Identity()`` when the channel counts agree.
        backbone (nn.Module): the wrapped backbone.

    Raises:
        ValueError: a channel count that is not a positive int, a backbone that is not a
            config dict with a ``type``, a backbone config whose own ``in_channels``
            differs from ``out_channels``, or a ``frozen`` that is not a bool.
    """

    def __init__(self, in_channels: int, backbone: Mapping[str, Any], out_channels: int = 3,
                 frozen: bool = False,
                 init_cfg: Union[None, dict, Sequence[dict]] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self.in_channels = _check_channels('in_channels', in_channels)
        self.out_channels = _check_channels('out_channels', out_channels)
        if not isinstance(backbone, Mapping) or 'type' not in backbone:
            raise ValueError('ChannelAdapter: backbone must be a config dict with a type, '
                             f"e.g. dict(type='ImageNetViT', arch='b'); got {backbone!r}")
        wrapped_channels = backbone.get('in_channels', self.out_channels)
        if wrapped_channels != self.out_channels:
            raise ValueError(f'ChannelAdapter: the wrapped backbone takes in_channels='
                             f'{wrapped_channels!r} but the adapter gives out_channels='
                             f'{self.out_channels}; make them equal')
        if not isinstance(frozen, bool):
            raise ValueError(f'ChannelAdapter: frozen must be True or False, got {frozen!r}')
        self.frozen = frozen
        if self.in_channels == self.out_channels:
            self.adapter: nn.Module = nn.Identity()
        else:
            self.adapter = nn.Conv2d(self.in_channels, self.out_channels, kernel_size=1,
                                     bias=False)
        self.backbone = MODELS.build(copy.deepcopy(dict(backbone)))
        self._freeze()

    def _freeze(self) -> None:
        if self.frozen:
            freeze_module(self.adapter)

    def train(self, mode: bool = True) -> 'ChannelAdapter':
        """Set the training mode; a frozen adapter stays frozen."""
        super().train(mode)
        self._freeze()
        return self

    def forward(self, x: torch.Tensor) -> Any:
        """The wrapped backbone's outputs for the adapted ``B×in_channels×H×W`` input.

        Raises:
            ValueError: the input does not have ``in_channels`` channels.
        """
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f'ChannelAdapter expects B×{self.in_channels}×H×W inputs, got '
                             f'shape {tuple(x.shape)}')
        return self.backbone(self.adapter(x))
