"""RVSA: a plain ViT-B whose window blocks use rotated varied-size window attention.

The backbone of "Advancing Plain Vision Transformer Toward Remote Sensing Foundation
Model" (ViT-B + RVSA, the published ``ViT_Win_RVSA_V3_WSZ7``), as REOBench uses it for
UperNet segmentation (Potsdam) and Oriented R-CNN detection (DIOR-R):

- patch embedding and a learned absolute position embedding ``(1, h·w, C)`` without a
  class token (no class row);
- every ``global_interval``-th block (``(i + 1) % 3 == 0``: 2, 5, 8, 11 for 12 blocks)
  attends globally, with decomposed relative position terms computed with the *scaled*
  query (see :class:`GlobalRelPosAttention`);
- the other blocks attend inside ``window_size × window_size`` windows whose key/value
  sampling grid is, per window and head, scaled by ``(1 + s)``, rotated by ``θ`` and
  shifted by an offset, all predicted from the window itself, and whose logits carry
  decomposed relative position terms (unscaled query) and a Swin-style relative
  position bias (see :class:`RotatedWindowAttention`).

Weights start from the MAE ViT-B pretraining checkpoint; its layout (timm keys) is the
layout of this module, so :meth:`RVSA.convert_official_state_dict` only drops what the
backbone does not have. The published fine-tuned RVSA checkpoints (MMSeg UperNet and
OBBDetection Oriented R-CNN, backbone keys under ``backbone.``) load strictly; their
built-in pyramid (``fpn1``/``fpn2``) maps onto ``SimpleFeaturePyramid`` with
:meth:`RVSA.convert_official_pyramid`.
"""
from __future__ import annotations

import fnmatch
import math
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from timm.layers import DropPath, Mlp, PatchEmbed, resample_abs_pos_embed, trunc_normal_
from timm.models.vision_transformer_sam import get_decomposed_rel_pos_bias
from torch import nn

from ...registry import MODELS
from .base import DenseViTBackbone, resample_position_embedding

__all__ = ['RVSA', 'RVSABlock', 'RotatedWindowAttention', 'GlobalRelPosAttention',
           'window_relative_position_index', 'make_qkv_projection', 'project_qkv',
           'SAMPLING_INITS', 'PYRAMID_SOURCES']

#: Initialisations of the window blocks' offset/scale/angle predictors (1×1 convs).
#: ``'torch_default'``: PyTorch's default ``Conv2d`` initialisation, what the published
#: RVSA code leaves them at (its zeroing method ``_reset_parameters`` is never called);
#: ``'zeros'``: weights and biases zero, so the transform starts as the identity.
SAMPLING_INITS = ('torch_default', 'zeros')

#: Where :class:`RVSA` takes its 4 pyramid levels from. ``'blocks'``: the blocks of
#: ``out_indices`` (the published segmentation backbone: 3, 5, 7, 11, no final norm);
#: ``'last_block'``: all 4 levels are the output of the last block after the final
#: LayerNorm (the published detection backbone, ViTDet style).
PYRAMID_SOURCES = ('blocks', 'last_block')


def _pair(value: Union[int, Sequence[int]]) -> Tuple[int, int]:
    if isinstance(value, int):
        return value, value
    value = tuple(int(v) for v in value)
    if len(value) != 2:
        raise ValueError(f'expected an int or a pair of ints, got {value}')
    return value


def _resize_rel_pos_table(table: torch.Tensor, length: int) -> torch.Tensor:
    """Linearly resample a ``(L, C)`` relative-position table to ``length`` rows (the
    interpolation timm's ``get_rel_pos`` applies at run time)."""
    if table.shape[0] == length:
        return table
    resized = F.interpolate(table.float().t()[None], size=length, mode='linear')
    return resized[0].t().to(table.dtype)


def make_qkv_projection(module: nn.Module, dim: int, bias: Union[bool, str]) -> None:
    """Give ``module`` a fused ``qkv`` linear layer of ``dim → 3·dim`` and, for
    ``bias='qv'``, the parameters ``q_bias`` and ``v_bias`` (zero-initialised); see
    :func:`project_qkv`."""
    if bias not in (True, False, 'qv'):
        raise ValueError(f"qkv_bias must be True, False or 'qv', got {bias!r}")
    module.qkv = nn.Linear(dim, dim * 3, bias=bias is True)
    if bias == 'qv':
        module.q_bias = nn.Parameter(torch.zeros(dim))
        module.v_bias = nn.Parameter(torch.zeros(dim))
    else:
        module.q_bias = module.v_bias = None


def project_qkv(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``x @ qkv.weightᵀ`` plus the bias of :func:`make_qkv_projection`'s mode
    (``[q_bias, 0, v_bias]`` for ``'qv'``)."""
    if module.q_bias is None:
        return module.qkv(x)
    bias = torch.cat((module.q_bias, torch.zeros_like(module.v_bias), module.v_bias))
    return F.linear(x, module.qkv.weight, bias)


def window_relative_position_index(window_size: int) -> torch.Tensor:
    """Swin-style index ``(ws², ws²)`` into a ``(2·ws − 1)²``-row bias table.

    Entry ``[i, j]`` for query position ``i = (r_i, c_i)`` and key position
    ``j = (r_j, c_j)`` of a window (row-major) is ``(r_i − r_j + ws − 1)·(2·ws − 1) +
    (c_i − c_j + ws − 1)``.
    """
    if window_size < 1:
        raise ValueError(f'window_size must be >= 1, got {window_size}')
    rows, cols = torch.meshgrid(torch.arange(window_size), torch.arange(window_size),
                                indexing='ij')
    rows, cols = rows.reshape(-1), cols.reshape(-1)
    d_row = rows[:, None] - rows[None, :] + window_size - 1
    d_col = cols[:, None] - cols[None, :] + window_size - 1
    return d_row * (2 * window_size - 1) + d_col


class RotatedWindowAttention(nn.Module):
    """Multi-head window attention with rotated, scaled and shifted key/value windows.

    Input and output are token maps ``B×H×W×C``. The map is zero-padded to a multiple
    of ``window_size`` (the padding split evenly between the two sides, the extra token
    at the bottom/right) and cropped back after the attention; ``q``, ``k``, ``v`` are
    zero on the padding and outside the map.

    **Sampling.** Per window and head, three 1×1 convolutions on
    ``LeakyReLU(AvgPool_ws(x))`` (``x`` the padded input map) predict an offset
    ``(t_x, t_y)``, a scale ``(s_x, s_y)`` and an angle ``θ``. Everything is in
    ``grid_sample``'s normalised coordinates (``align_corners=True``: token ``i`` of an
    axis of padded length ``L`` is at ``2·i/(L − 1) − 1``). With ``u = 2·(a − (ws−1)/2) /
    (Wp − 1)`` and ``v = 2·(b − (ws−1)/2) / (Hp − 1)`` the regular window grid about the
    window centre ``(c_x, c_y)`` (``a`` the column, ``b`` the row), the key/value
    sampling point is::

        u' = (1 + s_x)·u,  v' = (1 + s_y)·v                    (scale)
        p_x = c_x + u'·cos θ − v'·sin θ + t_x / ⌊H / ws⌋        (rotate, shift)
        p_y = c_y + u'·sin θ + v'·cos θ + t_y / ⌊W / ws⌋

    where ``H × W`` is the *unpadded* token grid: the x offset is divided by the number
    of whole windows along the height and the y offset by that along the width (the
    axes cross, as in the published code). Where the published code divides by zero
    (a side shorter than ``window_size``), the divisor is 1. Keys and values are read at
    ``p`` with ``grid_sample(mode='bilinear', padding_mode='zeros')``; queries stay on
    the regular window. Coordinates are computed in float32 whatever the autocast dtype.

    **Logits.** For query ``i`` and sampled key ``j`` of a window, at window-grid
    positions ``(r_i, c_i)`` and ``(r_j, c_j)``, with ``q`` *unscaled*::

        logit[i, j] = (q_i·k_j)·d^-1/2 + q_i·rel_pos_h[r_i − r_j + ws − 1]
                      + q_i·rel_pos_w[c_i − c_j + ws − 1]
                      + relative_position_bias_table[relative_position_index[i, j], head]

    (``rel_pos_h/w``: ``(2·ws − 1) × head_dim``, zero-initialised; the bias table:
    ``(2·ws − 1)² × heads``, truncated-normal std 0.02; the index: see
    :func:`window_relative_position_index`, a non-persistent buffer).

    Args:
        dim: channels.
        num_heads: attention heads.
        window_size: window side (7 in RVSA).
        qkv_bias: bias of the qkv projection: ``True`` (one fused bias), ``'qv'``
            (separate ``q_bias``/``v_bias``, no key bias) or ``False``.
        sampling_init: initialisation of the predictors, one of :data:`SAMPLING_INITS`.
    """

    def __init__(self, dim: int, num_heads: int, window_size: int = 7,
                 qkv_bias: Union[bool, str] = True,
                 sampling_init: str = 'torch_default') -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f'embed_dims {dim} is not divisible by num_heads {num_heads}')
        if window_size < 1:
            raise ValueError(f'window_size must be >= 1, got {window_size}')
        if sampling_init not in SAMPLING_INITS:
            raise ValueError(f'sampling_init must be one of {SAMPLING_INITS}, '
                             f'got {sampling_init!r}')
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.window_size = window_size
        self.scale = self.head_dim**-0.5
        make_qkv_projection(self, dim, qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.sampling_offsets = self._predictor(dim, num_heads * 2)
        self.sampling_scales = self._predictor(dim, num_heads * 2)
        self.sampling_angles = self._predictor(dim, num_heads)
        if sampling_init == 'zeros':
            self.reset_sampling()
        span = 2 * window_size - 1
        self.rel_pos_h = nn.Parameter(torch.zeros(span, self.head_dim))
        self.rel_pos_w = nn.Parameter(torch.zeros(span, self.head_dim))
        self.relative_position_bias_table = nn.Parameter(torch.zeros(span * span, num_heads))
        trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.register_buffer('relative_position_index',
                             window_relative_position_index(window_size), persistent=False)

    def _predictor(self, dim: int, out_channels: int) -> nn.Sequential:
        return nn.Sequential(
            nn.AvgPool2d(kernel_size=self.window_size, stride=self.window_size),
            nn.LeakyReLU(), nn.Conv2d(dim, out_channels, kernel_size=1))

    def reset_sampling(self) -> None:
        """Zero the offset/scale/angle predictors (identity transform)."""
        for predictor in (self.sampling_offsets, self.sampling_scales,
                          self.sampling_angles):
            nn.init.zeros_(predictor[-1].weight)
            nn.init.zeros_(predictor[-1].bias)

    def sampling_grid(self, x_padded: torch.Tensor, grid: Tuple[int, int]) -> torch.Tensor:
        """Normalised ``grid_sample`` coordinates ``(B·heads, Hp, Wp, 2)`` of the keys and
        values, laid out window by window like the padded map ``x_padded``
        (``B×C×Hp×Wp``); ``grid`` is the unpadded token grid ``(H, W)``."""
        B, _, Hp, Wp = x_padded.shape
        H, W = grid
        ws, heads = self.window_size, self.num_heads
        nh, nw = Hp // ws, Wp // ws
        offsets = self.sampling_offsets(x_padded).float().reshape(B, heads, 2, nh, nw)
        scales = self.sampling_scales(x_padded).float().reshape(B, heads, 2, nh, nw)
        angles = self.sampling_angles(x_padded).float().reshape(B, heads, nh, nw)
        dev = x_padded.device
        step_x, step_y = 2.0 / max(Wp - 1, 1), 2.0 / max(Hp - 1, 1)
        rel = torch.arange(ws, device=dev, dtype=torch.float32) - (ws - 1) / 2
        # shapes below: (B, heads, nh, ws_row, nw, ws_col)
        u = (rel * step_x).view(1, 1, 1, 1, 1, ws) * (1 + scales[:, :, 0, :, None, :, None])
        v = (rel * step_y).view(1, 1, 1, ws, 1, 1) * (1 + scales[:, :, 1, :, None, :, None])
        cos = torch.cos(angles)[:, :, :, None, :, None]
        sin = torch.sin(angles)[:, :, :, None, :, None]
        centres = torch.arange(max(nh, nw), device=dev, dtype=torch.float32) * ws + (ws - 1) / 2
        centre_x = (centres[:nw] * step_x - 1).view(1, 1, 1, 1, nw, 1)
        centre_y = (centres[:nh] * step_y - 1).view(1, 1, nh, 1, 1, 1)
        # the published convention: x offset over the windows along H, y along W
        shift_x = offsets[:, :, 0, :, None, :, None] / max(H // ws, 1)
        shift_y = offsets[:, :, 1, :, None, :, None] / max(W // ws, 1)
        px = centre_x + u * cos - v * sin + shift_x
        py = centre_y + u * sin + v * cos + shift_y
        return torch.stack([px, py], -1).reshape(B * heads, Hp, Wp, 2)

    def _windows(self, t: torch.Tensor, B: int, nh: int, nw: int) -> torch.Tensor:
        """``(B·heads, hd, Hp, Wp)`` → ``(B·nh·nw, heads, ws², hd)``."""
        ws = self.window_size
        t = t.reshape(B, self.num_heads, self.head_dim, nh, ws, nw, ws)
        return t.permute(0, 3, 5, 1, 4, 6, 2).reshape(B * nh * nw, self.num_heads, ws * ws,
                                                      self.head_dim)

    def window_bias(self, q: torch.Tensor) -> torch.Tensor:
        """Additive logit terms ``(n, heads, ws², ws²)`` of the windows ``q`` (``n×heads×
        ws²×hd``, unscaled): decomposed relative positions plus the bias table."""
        n, ws = q.shape[0], self.window_size
        rel = get_decomposed_rel_pos_bias(q.reshape(n * self.num_heads, ws * ws, self.head_dim),
                                          self.rel_pos_h, self.rel_pos_w, (ws, ws), (ws, ws))
        table = self.relative_position_bias_table[self.relative_position_index.reshape(-1)]
        table = table.reshape(ws * ws, ws * ws, self.num_heads).permute(2, 0, 1)
        return rel.reshape(n, self.num_heads, ws * ws, ws * ws) + table[None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, H, W, C = x.shape
        ws, heads, hd = self.window_size, self.num_heads, self.head_dim
        pad_h, pad_w = (-H) % ws, (-W) % ws
        top, left = pad_h // 2, pad_w // 2
        padding = (left, pad_w - left, top, pad_h - top)
        Hp, Wp = H + pad_h, W + pad_w
        nh, nw = Hp // ws, Wp // ws

        grid = self.sampling_grid(F.pad(x.permute(0, 3, 1, 2), padding), (H, W))
        qkv = F.pad(project_qkv(self, x).permute(0, 3, 1, 2), padding)  # B, 3C, Hp, Wp
        q, k, v = qkv.reshape(B, 3, heads * hd, Hp, Wp).unbind(1)
        k, v = (F.grid_sample(t.reshape(B * heads, hd, Hp, Wp).float(), grid,
                              mode='bilinear', padding_mode='zeros',
                              align_corners=True).to(q.dtype) for t in (k, v))
        q = self._windows(q.reshape(B * heads, hd, Hp, Wp), B, nh, nw)
        bias = self.window_bias(q).to(q.dtype)
        out = F.scaled_dot_product_attention(q, self._windows(k, B, nh, nw),
                                             self._windows(v, B, nh, nw), attn_mask=bias,
                                             scale=self.scale)
        out = out.reshape(B, nh, nw, heads, ws, ws, hd).permute(0, 1, 4, 2, 5, 3, 6)
        out = out.reshape(B, Hp, Wp, C)[:, top:top + H, left:left + W]
        return self.proj(out)


class GlobalRelPosAttention(nn.Module):
    """Global multi-head attention with decomposed relative position terms.

    ``q ← q·d^-1/2`` first, then ``attn = softmax(q·kᵀ + q·R_h + q·R_w)`` with the
    *scaled* ``q``, where ``R_h[i, j] = rel_pos_h[r_i − r_j + G_h − 1]`` for query row
    ``r_i`` and key row ``r_j`` (same along the width). The tables have ``2·G − 1`` rows
    for the grid ``G`` of ``img_size`` (zero-initialised); another grid resamples them
    linearly at run time (timm's ``get_rel_pos``; the published code supports only the
    grid of ``img_size``). Input and output are token maps ``B×H×W×C``.
    """

    def __init__(self, dim: int, num_heads: int, grid_size: Tuple[int, int],
                 qkv_bias: Union[bool, str] = True) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f'embed_dims {dim} is not divisible by num_heads {num_heads}')
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        make_qkv_projection(self, dim, qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.rel_pos_h = nn.Parameter(torch.zeros(2 * grid_size[0] - 1, self.head_dim))
        self.rel_pos_w = nn.Parameter(torch.zeros(2 * grid_size[1] - 1, self.head_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, H, W, C = x.shape
        N, heads, hd = H * W, self.num_heads, self.head_dim
        qkv = project_qkv(self, x).reshape(B, N, 3, heads, hd)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        q = q * self.scale
        bias = get_decomposed_rel_pos_bias(q.reshape(B * heads, N, hd), self.rel_pos_h,
                                           self.rel_pos_w, (H, W), (H, W))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.reshape(
            B, heads, N, N).to(q.dtype), scale=1.0)
        return self.proj(out.transpose(1, 2).reshape(B, H, W, C))


class RVSABlock(nn.Module):
    """Pre-norm transformer block on ``B×H×W×C`` maps with global or rotated window
    attention (timm's ``Mlp`` and ``DropPath``)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, qkv_bias: Union[bool, str],
                 norm_eps: float, drop_path: float, window: bool, window_size: int,
                 grid_size: Tuple[int, int], sampling_init: str = 'torch_default') -> None:
        super().__init__()
        self.window = window
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        if window:
            self.attn = RotatedWindowAttention(dim, num_heads, window_size, qkv_bias,
                                               sampling_init)
        else:
            self.attn = GlobalRelPosAttention(dim, num_heads, grid_size, qkv_bias)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), act_layer=nn.GELU)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.mlp(self.norm2(x)))


@MODELS.register_module()
class RVSA(DenseViTBackbone):
    """ViT with rotated varied-size window attention (RVSA), for dense tasks.

    Args:
        arch: ``'b'`` (patch 16, 768 dims, 12 blocks, 12 heads, MLP ratio 4) or a dict
            with ``embed_dims``, ``depth``, ``num_heads`` and optionally ``patch_size``,
            ``mlp_ratio``.
        img_size: input size the position embedding and the global blocks' relative
            position tables are laid out for (512 for Potsdam, 800 for DIOR-R); other
            sizes divisible by the patch size work (both are resampled per forward).
        in_channels: input channels.
        qkv_bias: bias of the qkv projections.
        norm_eps: LayerNorm epsilon.
        window_size: window side of the rotated window blocks.
        global_interval: block ``i`` attends globally when ``(i + 1) % global_interval
            == 0``; ignored when ``global_indices`` is given.
        global_indices: explicit indices of the global-attention blocks.
        drop_path_rate: stochastic depth, linearly increasing over the blocks.
        out_indices: blocks whose token maps are returned with ``pyramid_source='blocks'``
            (default: the ``'vit12'`` preset (3, 5, 7, 11) for 12 blocks); must be left
            unset with ``'last_block'``.
        final_norm: apply the final LayerNorm ``norm`` to every returned map (the module
            exists only then). Default: False with ``pyramid_source='blocks'``, True
            (and required) with ``'last_block'``.
        pyramid_source: one of :data:`PYRAMID_SOURCES`: ``'blocks'`` (the published
            segmentation backbone) or ``'last_block'`` (the published detection
            backbone: 4 copies of the last block's normalised map, which the
            ``SimpleFeaturePyramid`` neck then rescales ×4, ×2, ×1, ×½).
        sampling_init: initialisation of the window predictors, one of
            :data:`SAMPLING_INITS` (default ``'torch_default'``, as the published code).
        frozen_stages, with_cp, init_cfg: see :class:`~.base.DenseViTBackbone`.

    Checkpoints: the MAE ViT-B pretraining file (``{'model': …}``, timm keys, a fixed
    sin-cos ``pos_embed`` of 1 + 14×14 rows) loads with its class token, class row,
    mask token and decoder dropped and the 14×14 grid interpolated bicubically to the
    model's grid; the RVSA parameters (window predictors, relative position tables,
    bias tables) are then left at their initialisation. The published RVSA fine-tuning
    code instead skipped the pretrained ``pos_embed`` when its size differed from the
    model's and trained it from random values; this loader interpolates it. The
    published fine-tuned files load strictly: every backbone key is mapped, except the
    built-in pyramid ``fpn1.*``–``fpn4.*`` (dropped here, see
    :meth:`convert_official_pyramid`), an unused final ``norm.*`` (dropped when
    ``final_norm`` is off) and ``relative_position_index`` (checked against the
    computed index, then dropped).
    """

    arch_zoo: Dict[str, dict] = {
        'b': dict(patch_size=16, embed_dims=768, depth=12, num_heads=12, mlp_ratio=4.0),
        'base': dict(patch_size=16, embed_dims=768, depth=12, num_heads=12, mlp_ratio=4.0),
    }
    #: model keys an MAE pretraining file does not have (left at their initialisation)
    allowed_missing_keys = ('blocks.*.attn.sampling_offsets.*',
                            'blocks.*.attn.sampling_scales.*',
                            'blocks.*.attn.sampling_angles.*', 'blocks.*.attn.rel_pos_h',
                            'blocks.*.attn.rel_pos_w',
                            'blocks.*.attn.relative_position_bias_table')
    #: keys of the published fine-tuned backbones that belong to the neck here (their
    #: built-in simple feature pyramid); :meth:`convert_official_pyramid` maps them.
    official_pyramid_keys = ('fpn1.*', 'fpn2.*', 'fpn3.*', 'fpn4.*')
    arch_family = 'rvsa'
    #: the block class (a subclass swaps in its own, e.g. the ViTAE normal cell)
    block_type = RVSABlock
    no_weight_decay_keywords = ('pos_embed', 'rel_pos_h', 'rel_pos_w')

    def __init__(self, arch: Union[str, dict] = 'b', img_size: Union[int, Tuple[int, int]] = 512,
                 in_channels: int = 3, qkv_bias: bool = True, norm_eps: float = 1e-6,
                 window_size: int = 7, global_interval: int = 3,
                 global_indices: Optional[Sequence[int]] = None, drop_path_rate: float = 0.0,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, pyramid_source: str = 'blocks',
                 sampling_init: str = 'torch_default', frozen_stages: int = -1,
                 with_cp: bool = False, init_cfg: Optional[dict] = None) -> None:
        cfg = self._resolve_arch(arch)
        depth = cfg['depth']
        if pyramid_source not in PYRAMID_SOURCES:
            raise ValueError(f'pyramid_source must be one of {PYRAMID_SOURCES}, '
                             f'got {pyramid_source!r}')
        if sampling_init not in SAMPLING_INITS:
            raise ValueError(f'sampling_init must be one of {SAMPLING_INITS}, '
                             f'got {sampling_init!r}')
        if pyramid_source == 'last_block':
            if out_indices is not None:
                raise ValueError("pyramid_source='last_block' takes all 4 levels from the "
                                 f'last block; leave out_indices unset (got {out_indices!r}) '
                                 "or use pyramid_source='blocks'")
            if final_norm is False:
                raise ValueError("pyramid_source='last_block' takes the levels after the "
                                 'final LayerNorm; final_norm must be True or unset')
            final_norm, out_indices = True, (depth - 1, )
        final_norm = bool(final_norm)
        super().__init__(depth, out_indices, final_norm, frozen_stages, with_cp, init_cfg)
        self.pyramid_source = pyramid_source
        self.sampling_init = sampling_init
        self.arch_settings = cfg
        self.patch_size = cfg['patch_size']
        self.embed_dims = cfg['embed_dims']
        self.num_heads = cfg['num_heads']
        self.window_size = int(window_size)
        if self.window_size < 1:
            raise ValueError(f'window_size must be a positive int, got {window_size}')
        if self.embed_dims % self.num_heads:
            raise ValueError(f"arch embed_dims {self.embed_dims} is not divisible by "
                             f"num_heads {self.num_heads}")
        if not 0.0 <= drop_path_rate < 1.0:
            raise ValueError(f'drop_path_rate must be in [0, 1), got {drop_path_rate}')
        if global_indices is None:
            if global_interval < 1:
                raise ValueError(f'global_interval must be >= 1, got {global_interval}')
            global_indices = [i for i in range(depth) if (i + 1) % global_interval == 0]
        global_indices = tuple(sorted(set(int(i) for i in global_indices)))
        if any(not 0 <= i < depth for i in global_indices):
            raise ValueError(f'global_indices must be block indices in 0..{depth - 1}, '
                             f'got {global_indices}')
        self.global_indices = global_indices

        img_size = _pair(img_size)
        if img_size[0] % self.patch_size or img_size[1] % self.patch_size:
            raise ValueError(f'img_size {img_size} is not divisible by the patch size '
                             f'{self.patch_size}')
        self.img_size = img_size
        self.patch_embed = PatchEmbed(img_size=img_size, patch_size=self.patch_size,
                                      in_chans=in_channels, embed_dim=self.embed_dims,
                                      flatten=False, output_fmt='NHWC', strict_img_size=False)
        self.grid_size: Tuple[int, int] = tuple(self.patch_embed.grid_size)
        self.pos_embed = nn.Parameter(
            torch.zeros(1, self.grid_size[0] * self.grid_size[1], self.embed_dims))
        rates = torch.linspace(0, drop_path_rate, depth).tolist()
        self.blocks = nn.ModuleList([
            self.block_type(self.embed_dims, self.num_heads, cfg['mlp_ratio'],
                            self.qkv_bias_mode(qkv_bias), norm_eps, rates[i],
                            window=i not in global_indices, window_size=self.window_size,
                            grid_size=self.grid_size, sampling_init=sampling_init)
            for i in range(depth)
        ])
        self.norm = nn.LayerNorm(self.embed_dims, eps=norm_eps) if final_norm else None
        self._init_parameters()

    @staticmethod
    def qkv_bias_mode(qkv_bias: bool) -> Union[bool, str]:
        """The attention modules' ``qkv_bias`` for this backbone's ``qkv_bias`` flag (a
        fused bias here; a subclass may map it to separate q/v biases)."""
        return bool(qkv_bias)

    @classmethod
    def _resolve_arch(cls, arch: Union[str, dict]) -> dict:
        if isinstance(arch, str):
            if arch.lower() not in cls.arch_zoo:
                raise ValueError(f'unknown RVSA arch {arch!r}; valid: {sorted(cls.arch_zoo)} '
                                 'or a dict with embed_dims, depth, num_heads')
            return dict(cls.arch_zoo[arch.lower()])
        if not isinstance(arch, dict):
            raise ValueError(f'arch must be a preset name or a dict, got {type(arch).__name__}')
        required = {'embed_dims', 'depth', 'num_heads'}
        optional = {'patch_size': 16, 'mlp_ratio': 4.0}
        if not required <= set(arch) or set(arch) - required - set(optional):
            raise ValueError(f'arch dict needs {sorted(required)} and may have '
                             f'{sorted(optional)}; got {sorted(arch)}')
        cfg = {**optional, **arch}
        for key in ('embed_dims', 'depth', 'num_heads', 'patch_size'):
            cfg[key] = int(cfg[key])
            if cfg[key] < 1:
                raise ValueError(f'arch {key} must be positive, got {cfg[key]}')
        cfg['mlp_ratio'] = float(cfg['mlp_ratio'])
        return cfg

    def _init_parameters(self) -> None:
        trunc_normal_(self.pos_embed, std=0.02)
        for module in self.blocks.modules():
            if isinstance(module, nn.Linear):
                trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        # the sampling predictors (1×1 convolutions) keep their ``sampling_init``, the
        # relative-position tables zero, the window bias tables truncated normal 0.02

    # ------------------------------------------------------------------ interface
    @property
    def embedding_module_names(self) -> Tuple[str, ...]:
        return ('patch_embed', 'pos_embed')

    def position_embedding(self, grid: Tuple[int, int]) -> torch.Tensor:
        """The position embedding as a ``1×h×w×C`` map, bicubically resampled when
        ``grid`` differs from the model's grid."""
        pos = self.pos_embed
        if tuple(grid) != self.grid_size:
            pos = resample_abs_pos_embed(pos, new_size=list(grid), old_size=list(self.grid_size),
                                         num_prefix_tokens=0)
        return pos.reshape(1, grid[0], grid[1], self.embed_dims)

    def forward_levels(self, x: torch.Tensor) -> List[torch.Tensor]:
        if x.shape[-2] % self.patch_size or x.shape[-1] % self.patch_size:
            raise ValueError(f'input size {tuple(x.shape[-2:])} is not divisible by the '
                             f'patch size {self.patch_size}')
        x = self.patch_embed(x)  # B, h, w, C
        x = x + self.position_embedding(tuple(x.shape[1:3]))
        outs = []
        for i, block in enumerate(self.blocks):
            if self.with_cp and self.training and torch.is_grad_enabled():
                x = cp.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
            if i in self.out_indices:
                out = self.norm(x) if self.norm is not None else x
                outs.append(out.permute(0, 3, 1, 2).contiguous())
        if self.pyramid_source == 'last_block':
            return outs * 4  # the same normalised map feeds every pyramid level
        return outs

    # ---------------------------------------------------------------- checkpoints
    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """MAE pretraining keys (or a fine-tuned checkpoint) → this model's keys.

        - An MMSeg/MMDet model ``state_dict``: keep the ``backbone.`` keys (prefix
          stripped), drop the rest (``decode_head.*``, ``neck.*``, ...).
        - Drop ``cls_token``, ``mask_token``, ``decoder_*``, classification ``head.*``
          and ``fc_norm.*``, and the published fine-tuned backbones' built-in pyramid
          (:attr:`official_pyramid_keys`, the neck's weights here).
        - ``pos_embed`` with a class row (``1 + s²`` rows, or any when ``cls_token`` was
          present): drop the row. Its grid is interpolated in :meth:`adapt_state_dict`.
        """
        if any(k.startswith('backbone.') for k in state_dict):
            state_dict = {k[len('backbone.'):]: v for k, v in state_dict.items()
                          if k.startswith('backbone.')}
        had_cls = 'cls_token' in state_dict
        out = {}
        for key, value in state_dict.items():
            if key in ('cls_token', 'mask_token') or key.startswith(
                    ('decoder_', 'decoder.', 'head.', 'fc_norm.')):
                continue
            if any(fnmatch.fnmatchcase(key, p) for p in cls.official_pyramid_keys):
                continue
            out[key] = value
        pos = out.get('pos_embed')
        if pos is not None:
            if pos.ndim == 2:
                pos = pos[None]
            rows = pos.shape[1]
            if had_cls or (not math.isqrt(rows)**2 == rows
                           and math.isqrt(rows - 1)**2 == rows - 1):
                pos = pos[:, 1:]
            out['pos_embed'] = pos
        return out

    def adapt_state_dict(self, state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Fit converted weights to this instance: interpolate ``pos_embed`` (bicubic) to
        the model's grid and the global blocks' ``rel_pos_h/w`` (linear) to ``2·grid - 1``
        rows; check each window block's ``relative_position_index`` against the one the
        model computes and drop it (a derived constant, not a weight); drop ``norm.*``
        when the model has no final norm (``final_norm=False``).

        Raises:
            ValueError: a ``relative_position_index`` differs from the model's (another
                window size or index convention).
        """
        state_dict = dict(state_dict)
        if 'pos_embed' in state_dict:
            pos = state_dict['pos_embed']
            if pos.ndim == 3 and pos.shape[1] != self.pos_embed.shape[1]:
                state_dict['pos_embed'] = resample_position_embedding(
                    pos, self.grid_size, num_prefix_tokens=0)
        lengths = (2 * self.grid_size[0] - 1, 2 * self.grid_size[1] - 1)
        for i in self.global_indices:
            for axis, length in zip('hw', lengths):
                key = f'blocks.{i}.attn.rel_pos_{axis}'
                if key in state_dict and state_dict[key].ndim == 2:
                    state_dict[key] = _resize_rel_pos_table(state_dict[key], length)
        buffers = dict(self.named_buffers())
        for key in [k for k in state_dict if k.endswith('.relative_position_index')]:
            if key not in buffers:
                continue  # reported as unexpected by the key check
            given, expected = state_dict[key], buffers[key]
            if given.shape != expected.shape or not torch.equal(given.cpu().long(),
                                                                expected.cpu().long()):
                raise ValueError(f'{key} in the checkpoint ({tuple(given.shape)}) is not the '
                                 f'index of a {self.window_size}×{self.window_size} window '
                                 f'({tuple(expected.shape)}); is the window size right?')
            del state_dict[key]
        if self.norm is None:
            state_dict = {k: v for k, v in state_dict.items() if not k.startswith('norm.')}
        return state_dict

    @classmethod
    def convert_official_pyramid(cls, state_dict: Dict[str, torch.Tensor]
                                 ) -> Dict[str, torch.Tensor]:
        """The built-in pyramid of a published fine-tuned RVSA backbone (patch 16) →
        ``SimpleFeaturePyramid`` keys (``levels.*``), to load into that neck strictly.

        ``fpn1`` (ConvTranspose → LayerNorm over channels → GELU → ConvTranspose) is
        level 0, ``fpn2`` (ConvTranspose) level 1; ``fpn3`` (identity) and ``fpn4``
        (max-pool) have no weights. Accepts a whole model ``state_dict`` (the
        ``backbone.`` keys are used) or backbone keys.

        Raises:
            KeyError: no ``fpn*`` keys, or one this mapping does not know.
        """
        if any(k.startswith('backbone.') for k in state_dict):
            state_dict = {k[len('backbone.'):]: v for k, v in state_dict.items()
                          if k.startswith('backbone.')}
        renames = {'fpn1.0.': 'levels.0.0.', 'fpn1.1.ln.': 'levels.0.1.',
                   'fpn1.3.': 'levels.0.3.', 'fpn2.0.': 'levels.1.0.'}
        out = {}
        for key, value in state_dict.items():
            if not key.startswith('fpn'):
                continue
            prefix = next((p for p in renames if key.startswith(p)), None)
            if prefix is None:
                raise KeyError(f'unknown key {key!r} of the published RVSA pyramid; known '
                               f'prefixes: {sorted(renames)}')
            out[renames[prefix] + key[len(prefix):]] = value
        if not out:
            raise KeyError('no fpn1.*/fpn2.* keys: not a fine-tuned RVSA checkpoint with the '
                           'built-in pyramid')
        return out
