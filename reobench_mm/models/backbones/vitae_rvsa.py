"""ViTAE-NC RVSA: the RVSA backbone built from ViTAE normal cells.

The variant REOBench's authors ran for their RVSA rows (``ViTAE_NC_Win_RVSA_V3_WSZ7`` of
the RVSA repository, MillionAID MAE pretraining file
``vitae-b-checkpoint-1599-transform-no-average.pth``), for UperNet on Potsdam and Oriented
R-CNN on DIOR-R. It is :class:`~.rvsa.RVSA` (same patch embedding, absolute position
embedding, global blocks at ``(i + 1) % 3 == 0`` and rotated varied-size window blocks)
with two differences, both read from the official modules:

- **Normal cells.** Every block has a convolutional branch, the *parallel convolution
  module* ``PCM``, next to the attention: a 3×3 grouped convolution ``C → r·C``
  (``groups = C / 4``, ``r`` the MLP ratio), a batch norm (``BatchNorm2d`` in the
  segmentation backbones, ``SyncBatchNorm`` in the detection ones: ``pcm_norm``), SiLU
  and a 3×3 grouped convolution ``r·C → C``, all with biases, on the block's *input*
  token map. The block computes::

      c = DropPath(PCM(x))
      x = x + DropPath(Attention(LN₁(x))) + c
      x = x + DropPath(MLP(LN₂(x)))

- **Bias layout.** The global blocks' qkv projections have no fused bias but separate
  ``q_bias`` and ``v_bias`` (no key bias, BEiT style), in every official file. The window
  blocks have one of two layouts (``window_bias_layout``): ``'qv'``, the same separate
  biases (the segmentation backbone, and the published RVSA checkpoints, detection ones
  included), or ``'fused'``, one ``attn.qkv.bias`` with a key bias (the detection
  backbone file committed to the RVSA and REOBench repositories, which REOBench's
  detection runs used).

The official cell reshapes the tokens into a square ``√N × √N`` map for ``PCM`` and so
only runs on square inputs; here ``PCM`` runs on the real ``H × W`` token map, which is
the same for square inputs and also handles rectangular ones.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple, Union

import torch
from mmengine.logging import MMLogger
from torch import nn

from ...registry import MODELS
from .rvsa import RVSA, RVSABlock

__all__ = ['ViTAENCRVSA', 'ViTAENCBlock', 'ParallelConvModule', 'WINDOW_BIAS_LAYOUTS',
           'PCM_NORMS']

#: Bias layouts of the window blocks' qkv projections (``window_bias_layout``):
#: ``'qv'`` separate ``attn.q_bias``/``attn.v_bias`` (the published RVSA checkpoints),
#: ``'fused'`` one ``attn.qkv.bias`` (REOBench's detection backbone).
WINDOW_BIAS_LAYOUTS = ('qv', 'fused')
#: Norms of the convolution branch (``pcm_norm``), by their ``torch.nn`` names.
PCM_NORMS = {'BatchNorm2d': nn.BatchNorm2d, 'SyncBatchNorm': nn.SyncBatchNorm}
#: Parameters only a fine-tuned window block has (a pretraining file lacks them all).
_WINDOW_ONLY_KEYS = ('.attn.sampling_offsets.', '.attn.sampling_scales.',
                     '.attn.sampling_angles.', '.attn.relative_position_bias_table')


class ParallelConvModule(nn.Sequential):
    """The ViTAE normal cell's convolutional branch on ``B×C×H×W`` maps: grouped 3×3
    convolution to ``hidden`` channels, a batch norm (``norm``, one of
    :data:`PCM_NORMS`), SiLU, grouped 3×3 convolution back to ``dim``
    (``groups = dim // 4``; module indices 0, 1, 3 as in the official ``PCM``)."""

    def __init__(self, dim: int, hidden: int, kernel_size: int = 3,
                 norm: str = 'BatchNorm2d') -> None:
        if dim % 4:
            raise ValueError(f'the ViTAE convolution branch groups channels by 4; embed_dims '
                             f'{dim} is not divisible by 4')
        groups = dim // 4
        if hidden % groups:
            raise ValueError(f'hidden channels {hidden} are not divisible by the {groups} '
                             'groups of the ViTAE convolution branch')
        if norm not in PCM_NORMS:
            raise ValueError(f'pcm_norm must be one of {sorted(PCM_NORMS)}, got {norm!r}')
        pad = kernel_size // 2
        super().__init__(nn.Conv2d(dim, hidden, kernel_size, 1, pad, groups=groups),
                         PCM_NORMS[norm](hidden), nn.SiLU(inplace=True),
                         nn.Conv2d(hidden, dim, kernel_size, 1, pad, groups=groups))


class ViTAENCBlock(RVSABlock):
    """:class:`~.rvsa.RVSABlock` plus the normal cell's parallel convolution branch
    ``PCM`` (see the module docstring for the forward)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, qkv_bias: Union[bool, str],
                 norm_eps: float, drop_path: float, window: bool, window_size: int,
                 grid_size: Tuple[int, int], sampling_init: str = 'torch_default',
                 pcm_norm: str = 'BatchNorm2d') -> None:
        super().__init__(dim, num_heads, mlp_ratio, qkv_bias, norm_eps, drop_path, window,
                         window_size, grid_size, sampling_init)
        self.PCM = ParallelConvModule(dim, int(dim * mlp_ratio), norm=pcm_norm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv = self.PCM(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        x = x + self.drop_path(self.attn(self.norm1(x))) + self.drop_path(conv)
        return x + self.drop_path(self.mlp(self.norm2(x)))


@MODELS.register_module()
class ViTAENCRVSA(RVSA):
    """RVSA on ViTAE normal cells (the backbone of REOBench's RVSA rows).

    Arguments, outputs, presets (``arch='b'``), checkpoint handling and options are those
    of :class:`~.rvsa.RVSA`, plus:

    Args:
        qkv_bias: the q/v (and, with ``window_bias_layout='fused'``, the window blocks'
            fused) biases of the official ViTAE attention; False builds none.
        window_bias_layout: the window blocks' bias layout, one of
            :data:`WINDOW_BIAS_LAYOUTS`: ``'qv'`` (default; the published RVSA
            checkpoints and the MAE pretraining file) or ``'fused'`` (REOBench's
            detection backbone). The global blocks keep ``q_bias``/``v_bias`` in both.
        pcm_norm: the convolution branch's batch norm, one of :data:`PCM_NORMS`:
            ``'BatchNorm2d'`` (default; the official segmentation backbones) or
            ``'SyncBatchNorm'`` (the official detection backbones). Same parameters,
            buffers and evaluation; they differ only in distributed training, where
            ``SyncBatchNorm`` computes the batch statistics over all processes (MMEngine
            turns it back into a plain batch norm when training is not distributed).

    Each block has the extra ``PCM`` branch (:class:`ParallelConvModule`; its batch norm
    follows the usual train/eval modes and is frozen with its block by
    ``frozen_stages``).

    Checkpoints: the MillionAID MAE pretraining file of ViTAE-B
    (``vitae-b-checkpoint-1599-transform-no-average.pth``: ``{'model': …}`` with this
    module's key layout and q/v biases in every block, class token and a class row in
    ``pos_embed`` dropped on load, its grid interpolated) and the fine-tuned UperNet and
    Oriented R-CNN checkpoints (``backbone.*`` keys, built-in ``fpn1``/``fpn2`` pyramid
    for the neck via :meth:`~.rvsa.RVSA.convert_official_pyramid`). A fine-tuned file
    loads strictly into the ``window_bias_layout`` of its window blocks and is refused,
    with the option named, by the other. The pretraining file also loads into
    ``'fused'``: its window blocks' ``q_bias``/``v_bias`` are dropped and their fused
    bias starts at zero, which is what REOBench's detection code did with it (a
    non-strict load). Missing keys are allowed only for the RVSA-specific parameters a
    pretraining file lacks (window predictors, relative position and bias tables, as for
    :class:`~.rvsa.RVSA`) and the ``PCM`` batch norm's ``num_batches_tracked`` counter
    (absent from files written before PyTorch 0.4.1; unused, as the momentum is fixed).
    """

    block_type = ViTAENCBlock
    arch_family = 'vitae_nc_rvsa'
    allowed_missing_keys = RVSA.allowed_missing_keys + ('blocks.*.PCM.1.num_batches_tracked', )

    def __init__(self, arch: Union[str, dict] = 'b', img_size: Union[int, Tuple[int, int]] = 512,
                 in_channels: int = 3, qkv_bias: bool = True, norm_eps: float = 1e-6,
                 window_size: int = 7, global_interval: int = 3,
                 global_indices: Optional[Sequence[int]] = None, drop_path_rate: float = 0.0,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, pyramid_source: str = 'blocks',
                 sampling_init: str = 'torch_default', window_bias_layout: str = 'qv',
                 pcm_norm: str = 'BatchNorm2d', frozen_stages: int = -1,
                 with_cp: bool = False, init_cfg: Optional[dict] = None) -> None:
        if window_bias_layout not in WINDOW_BIAS_LAYOUTS:
            raise ValueError(f'window_bias_layout must be one of {WINDOW_BIAS_LAYOUTS}, '
                             f'got {window_bias_layout!r}')
        if pcm_norm not in PCM_NORMS:
            raise ValueError(f'pcm_norm must be one of {sorted(PCM_NORMS)}, got {pcm_norm!r}')
        # read by make_block / block_qkv_bias while RVSA.__init__ builds the blocks
        self.window_bias_layout = window_bias_layout
        self.pcm_norm = pcm_norm
        super().__init__(arch=arch, img_size=img_size, in_channels=in_channels,
                         qkv_bias=qkv_bias, norm_eps=norm_eps, window_size=window_size,
                         global_interval=global_interval, global_indices=global_indices,
                         drop_path_rate=drop_path_rate, out_indices=out_indices,
                         final_norm=final_norm, pyramid_source=pyramid_source,
                         sampling_init=sampling_init, frozen_stages=frozen_stages,
                         with_cp=with_cp, init_cfg=init_cfg)

    def block_qkv_bias(self, qkv_bias: bool, window: bool) -> Union[bool, str]:
        """``'qv'`` for the global blocks; for the window blocks ``'qv'`` or a fused bias
        (``True``) as ``window_bias_layout`` says; no bias without ``qkv_bias``."""
        if not qkv_bias:
            return False
        return True if window and self.window_bias_layout == 'fused' else 'qv'

    def make_block(self, window: bool, drop_path: float, qkv_bias: bool, mlp_ratio: float,
                   norm_eps: float) -> nn.Module:
        return self.block_type(self.embed_dims, self.num_heads, mlp_ratio,
                               self.block_qkv_bias(qkv_bias, window), norm_eps, drop_path,
                               window=window, window_size=self.window_size,
                               grid_size=self.grid_size, sampling_init=self.sampling_init,
                               pcm_norm=self.pcm_norm)

    # ---------------------------------------------------------------- checkpoints
    def adapt_state_dict(self, state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """:meth:`RVSA.adapt_state_dict`, then the window blocks' bias layout checked
        against ``window_bias_layout`` (a pretraining file's q/v biases are converted for
        ``'fused'``, see the class docstring).

        Raises:
            ValueError: a ViTAE-NC file whose window blocks have the other layout.
        """
        return self._fit_window_bias_layout(super().adapt_state_dict(state_dict))

    def _fit_window_bias_layout(self, state_dict: Dict[str, torch.Tensor]
                                ) -> Dict[str, torch.Tensor]:
        windows = [i for i in range(self.depth) if i not in self.global_indices]
        if not windows or not any('.PCM.' in k for k in state_dict):
            return state_dict  # not a ViTAE-NC file: the key check names what is wrong
        separate = [i for i in windows if f'blocks.{i}.attn.q_bias' in state_dict
                    or f'blocks.{i}.attn.v_bias' in state_dict]
        fused = [i for i in windows if f'blocks.{i}.attn.qkv.bias' in state_dict]
        valid = f'(valid values: {", ".join(map(repr, WINDOW_BIAS_LAYOUTS))})'
        if self.window_bias_layout == 'qv' and fused:
            raise ValueError(
                f'the checkpoint\'s window blocks have a fused qkv bias (blocks.{fused[0]}.'
                "attn.qkv.bias): the window_bias_layout='fused' of REOBench's detection "
                "backbone, but this ViTAENCRVSA has window_bias_layout='qv' (separate "
                "attn.q_bias/attn.v_bias); build it with window_bias_layout='fused' to load "
                f'this file {valid}')
        if self.window_bias_layout != 'fused' or not separate:
            return state_dict
        pretraining = not any(part in k for k in state_dict for part in _WINDOW_ONLY_KEYS)
        if fused or not pretraining:
            raise ValueError(
                f'the checkpoint\'s window blocks have separate q/v biases (blocks.'
                f"{separate[0]}.attn.q_bias): the window_bias_layout='qv' of the published "
                "RVSA checkpoints, but this ViTAENCRVSA has window_bias_layout='fused' (one "
                "attn.qkv.bias); build it with window_bias_layout='qv' to load this file "
                f'{valid}')
        # An MAE pretraining file: drop the window blocks' q/v biases and start their
        # fused bias at zero, as REOBench's detection code ends up loading it.
        state_dict = dict(state_dict)
        for i in separate:
            weight = state_dict.get(f'blocks.{i}.attn.qkv.weight')
            state_dict.pop(f'blocks.{i}.attn.q_bias', None)
            state_dict.pop(f'blocks.{i}.attn.v_bias', None)
            state_dict[f'blocks.{i}.attn.qkv.bias'] = torch.zeros(
                3 * self.embed_dims, dtype=weight.dtype if weight is not None else None)
        MMLogger.get_current_instance().info(
            f"{type(self).__name__}: window_bias_layout='fused' from a pretraining file with "
            f'q/v biases: the q_bias/v_bias of window blocks {separate} dropped, their '
            "qkv.bias starts at zero (as REOBench's detection code loads this file)")
        return state_dict
