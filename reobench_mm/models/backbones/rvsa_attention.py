"""The attention of RVSA's blocks: rotated varied-size window attention and global
attention with decomposed relative positions, with their shared qkv projection.

:class:`RotatedWindowAttention` is the window block's attention (keys and values read on
a per-window scaled, rotated and shifted grid), :class:`GlobalRelPosAttention` the global
block's; both take and return ``B×H×W×C`` token maps. The backbones built from them are
in :mod:`.rvsa` (plain ViT-B) and :mod:`.vitae_rvsa` (ViTAE normal cells).
"""
from __future__ import annotations

from typing import Tuple, Union

import torch
import torch.nn.functional as F
from timm.layers import trunc_normal_
from timm.models.vision_transformer_sam import get_decomposed_rel_pos_bias
from torch import nn

__all__ = ['RotatedWindowAttention', 'GlobalRelPosAttention', 'window_relative_position_index',
           'make_qkv_projection', 'project_qkv', 'SAMPLING_INITS', 'QKV_BIAS_MODES']

#: Initialisations of the window blocks' offset/scale/angle predictors (1×1 convs).
#: ``'torch_default'``: PyTorch's default ``Conv2d`` initialisation, what the published
#: RVSA code leaves them at (its zeroing method ``_reset_parameters`` is never called);
#: ``'zeros'``: weights and biases zero, so the transform starts as the identity.
SAMPLING_INITS = ('torch_default', 'zeros')


#: Bias modes of a qkv projection (:func:`make_qkv_projection`): ``True`` one fused
#: ``qkv.bias`` of ``3·dim`` (query, key and value biases), ``'qv'`` separate ``q_bias``
#: and ``v_bias`` with no key bias (BEiT style), ``False`` none.
QKV_BIAS_MODES = (True, False, 'qv')


def make_qkv_projection(module: nn.Module, dim: int, bias: Union[bool, str]) -> None:
    """Give ``module`` a fused ``qkv`` linear layer of ``dim → 3·dim`` with the bias of
    one of :data:`QKV_BIAS_MODES`: for ``True`` the layer's own ``qkv.bias``, for
    ``'qv'`` the parameters ``q_bias`` and ``v_bias`` (zero-initialised); see
    :func:`project_qkv`."""
    if not (isinstance(bias, bool) or bias == 'qv'):
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
        qkv_bias: bias of the qkv projection: ``True`` (one fused bias, with a key
            bias), ``'qv'`` (separate ``q_bias``/``v_bias``, no key bias) or ``False``.
            The key bias does not cancel in the softmax here: the projection runs on
            the unpadded map, so padded tokens have zero keys, and keys are read
            bilinearly with zeros outside the map, so a key's bias is scaled by the
            weight of its in-map samples.
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
