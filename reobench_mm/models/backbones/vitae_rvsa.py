"""ViTAE-NC RVSA: the RVSA backbone built from ViTAE normal cells.

The variant REOBench's authors ran for their RVSA rows (``ViTAE_NC_Win_RVSA_V3_WSZ7`` of
the RVSA repository, MillionAID MAE pretraining file
``vitae-b-checkpoint-1599-transform-no-average.pth``), for UperNet on Potsdam and Oriented
R-CNN on DIOR-R. It is :class:`~.rvsa.RVSA` (same patch embedding, absolute position
embedding, global blocks at ``(i + 1) % 3 == 0`` and rotated varied-size window blocks)
with two differences, both read from the official module:

- **Normal cells.** Every block has a convolutional branch, the *parallel convolution
  module* ``PCM``, next to the attention: a 3×3 grouped convolution ``C → r·C``
  (``groups = C / 4``, ``r`` the MLP ratio), ``BatchNorm2d``, SiLU and a 3×3 grouped
  convolution ``r·C → C``, all with biases, on the block's *input* token map. The block
  computes::

      c = DropPath(PCM(x))
      x = x + DropPath(Attention(LN₁(x))) + c
      x = x + DropPath(MLP(LN₂(x)))

- **q/v biases.** The qkv projections have no fused bias but separate ``q_bias`` and
  ``v_bias`` (the key bias is zero, BEiT style); their keys are ``attn.q_bias`` and
  ``attn.v_bias`` as in the official checkpoints.

The official cell reshapes the tokens into a square ``√N × √N`` map for ``PCM`` and so
only runs on square inputs; here ``PCM`` runs on the real ``H × W`` token map, which is
the same for square inputs and also handles rectangular ones.
"""
from __future__ import annotations

from typing import Tuple, Union

import torch
from torch import nn

from ...registry import MODELS
from .rvsa import RVSA, RVSABlock

__all__ = ['ViTAENCRVSA', 'ViTAENCBlock', 'ParallelConvModule']


class ParallelConvModule(nn.Sequential):
    """The ViTAE normal cell's convolutional branch on ``B×C×H×W`` maps: grouped 3×3
    convolution to ``hidden`` channels, ``BatchNorm2d``, SiLU, grouped 3×3 convolution
    back to ``dim`` (``groups = dim // 4``; module indices 0, 1, 3 as in the official
    ``PCM``)."""

    def __init__(self, dim: int, hidden: int, kernel_size: int = 3) -> None:
        if dim % 4:
            raise ValueError(f'the ViTAE convolution branch groups channels by 4; embed_dims '
                             f'{dim} is not divisible by 4')
        groups = dim // 4
        if hidden % groups:
            raise ValueError(f'hidden channels {hidden} are not divisible by the {groups} '
                             'groups of the ViTAE convolution branch')
        pad = kernel_size // 2
        super().__init__(nn.Conv2d(dim, hidden, kernel_size, 1, pad, groups=groups),
                         nn.BatchNorm2d(hidden), nn.SiLU(inplace=True),
                         nn.Conv2d(hidden, dim, kernel_size, 1, pad, groups=groups))


class ViTAENCBlock(RVSABlock):
    """:class:`~.rvsa.RVSABlock` plus the normal cell's parallel convolution branch
    ``PCM`` (see the module docstring for the forward)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, qkv_bias: Union[bool, str],
                 norm_eps: float, drop_path: float, window: bool, window_size: int,
                 grid_size: Tuple[int, int], sampling_init: str = 'torch_default') -> None:
        super().__init__(dim, num_heads, mlp_ratio, qkv_bias, norm_eps, drop_path, window,
                         window_size, grid_size, sampling_init)
        self.PCM = ParallelConvModule(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv = self.PCM(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        x = x + self.drop_path(self.attn(self.norm1(x))) + self.drop_path(conv)
        return x + self.drop_path(self.mlp(self.norm2(x)))


@MODELS.register_module()
class ViTAENCRVSA(RVSA):
    """RVSA on ViTAE normal cells (the backbone of REOBench's RVSA rows).

    Arguments, outputs, presets (``arch='b'``), checkpoint handling and options are those
    of :class:`~.rvsa.RVSA`; ``qkv_bias=True`` gives the separate ``q_bias``/``v_bias``
    of the official ViTAE attention. Each block has the extra ``PCM`` branch
    (:class:`ParallelConvModule`; its ``BatchNorm2d`` follows the usual train/eval
    modes and is frozen with its block by ``frozen_stages``).

    Checkpoints: the MillionAID MAE pretraining file of ViTAE-B
    (``vitae-b-checkpoint-1599-transform-no-average.pth``: ``{'model': …}`` with this
    module's key layout, class token and a class row in ``pos_embed`` dropped on load,
    its grid interpolated) and the published fine-tuned UperNet and Oriented R-CNN
    checkpoints (``backbone.*`` keys, built-in ``fpn1``/``fpn2`` pyramid for the neck via
    :meth:`~.rvsa.RVSA.convert_official_pyramid`). Missing keys are allowed only for
    the RVSA-specific parameters a pretraining file lacks (window predictors, relative
    position and bias tables, as for :class:`~.rvsa.RVSA`) and the ``PCM`` batch norm's
    ``num_batches_tracked`` counter (absent from files written before PyTorch 0.4.1;
    unused, as the momentum is fixed).
    """

    block_type = ViTAENCBlock
    arch_family = 'vitae_nc_rvsa'
    allowed_missing_keys = RVSA.allowed_missing_keys + ('blocks.*.PCM.1.num_batches_tracked', )

    @staticmethod
    def qkv_bias_mode(qkv_bias: bool) -> Union[bool, str]:
        return 'qv' if qkv_bias else False
