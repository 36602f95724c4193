"""RVSA: a plain ViT-B whose window blocks use rotated varied-size window attention.

The backbone of "Advancing Plain Vision Transformer Toward Remote Sensing Foundation
Model" (ViT-B + RVSA), as REOBench uses it for UperNet segmentation (Potsdam) and
Oriented R-CNN detection (DIOR-R):

- patch embedding and a learned absolute position embedding ``(1, h·w, C)`` without a
  class token (no class row);
- every ``global_interval``-th block (``(i + 1) % 3 == 0``: 2, 5, 8, 11 for 12 blocks)
  attends globally, with decomposed relative position terms (MViTv2 / ViTDet style,
  computed with timm's ``get_decomposed_rel_pos_bias``);
- the other blocks attend inside ``window_size × window_size`` windows whose key/value
  sampling grid is, per window and head, scaled by ``(1 + s)``, rotated by ``θ`` and
  shifted by an offset, all predicted from the window itself (see
  :class:`RotatedWindowAttention`).

Weights start from the MAE ViT-B pretraining checkpoint; its layout (timm keys) is the
layout of this module, so :meth:`RVSA.convert_official_state_dict` only drops what the
backbone does not have. Fine-tuned checkpoints written from this module (also inside an
MMSeg/MMDet ``state_dict`` under ``backbone.``) load as well.
"""
from __future__ import annotations

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

__all__ = ['RVSA', 'RVSABlock', 'RotatedWindowAttention', 'GlobalRelPosAttention']


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


class RotatedWindowAttention(nn.Module):
    """Multi-head window attention with rotated, scaled and shifted key/value windows.

    Input and output are token maps ``B×H×W×C``. The map is zero-padded to a multiple
    of ``window_size`` (the padding split evenly between the two sides, as in the
    published RVSA code) and cropped back after the attention; ``q``, ``k``, ``v`` are
    zero on the padding and outside the map.

    Per window and head, three 1×1 convolutions on ``LeakyReLU(AvgPool_ws(x))`` (``x``
    the padded input map) predict an offset ``(t_x, t_y)``, a scale ``(s_x, s_y)`` and an
    angle ``θ``. The key/value sampling points of a window, in token units relative to
    its centre ``c`` and with ``r = (a - (ws-1)/2, b - (ws-1)/2)`` the regular grid, are::

        p = c + R(θ) · diag(1 + s_x, 1 + s_y) · r + ws · (t_x, t_y)

    (scale first, then rotate about the window centre, then shift; the offset is in
    units of the window size; ``x`` runs along the width). Keys and values are
    resampled at ``p`` with ``grid_sample(mode='bilinear', padding_mode='zeros',
    align_corners=True)``, token ``i`` of an axis of (padded) length ``L`` being at the
    normalised coordinate ``2·i/(L-1) - 1``: integer points hit token centres exactly.
    Queries stay on the regular window. The predictors start at zero, so the transform
    starts as the identity and the module as plain window attention. Coordinates are
    computed in float32 whatever the autocast dtype.

    Args:
        dim: channels; num_heads: heads; window_size: window side (7 in RVSA);
        qkv_bias: bias of the qkv projection.
    """

    def __init__(self, dim: int, num_heads: int, window_size: int = 7,
                 qkv_bias: bool = True) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f'embed_dims {dim} is not divisible by num_heads {num_heads}')
        if window_size < 1:
            raise ValueError(f'window_size must be >= 1, got {window_size}')
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.window_size = window_size
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.sampling_offsets = self._predictor(dim, num_heads * 2)
        self.sampling_scales = self._predictor(dim, num_heads * 2)
        self.sampling_angles = self._predictor(dim, num_heads)
        self.reset_sampling()

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

    def sampling_grid(self, x_padded: torch.Tensor) -> torch.Tensor:
        """Normalised ``grid_sample`` coordinates ``(B·heads, Hp, Wp, 2)`` of the keys and
        values, laid out window by window like the padded map ``x_padded`` (B×C×Hp×Wp)."""
        B, _, Hp, Wp = x_padded.shape
        ws, heads = self.window_size, self.num_heads
        nh, nw = Hp // ws, Wp // ws
        offsets = self.sampling_offsets(x_padded).float().reshape(B, heads, 2, nh, nw)
        scales = self.sampling_scales(x_padded).float().reshape(B, heads, 2, nh, nw)
        angles = self.sampling_angles(x_padded).float().reshape(B, heads, nh, nw)
        dev = x_padded.device
        rel = torch.arange(ws, device=dev, dtype=torch.float32) - (ws - 1) / 2
        # shapes below: (B, heads, nh, ws_row, nw, ws_col)
        dx = rel.view(1, 1, 1, 1, 1, ws) * (1 + scales[:, :, 0, :, None, :, None])
        dy = rel.view(1, 1, 1, ws, 1, 1) * (1 + scales[:, :, 1, :, None, :, None])
        cos = torch.cos(angles)[:, :, :, None, :, None]
        sin = torch.sin(angles)[:, :, :, None, :, None]
        centre_x = (torch.arange(nw, device=dev, dtype=torch.float32) * ws
                    + (ws - 1) / 2).view(1, 1, 1, 1, nw, 1)
        centre_y = (torch.arange(nh, device=dev, dtype=torch.float32) * ws
                    + (ws - 1) / 2).view(1, 1, nh, 1, 1, 1)
        px = centre_x + dx * cos - dy * sin + ws * offsets[:, :, 0, :, None, :, None]
        py = centre_y + dx * sin + dy * cos + ws * offsets[:, :, 1, :, None, :, None]
        grid = torch.stack([2 * px / max(Wp - 1, 1) - 1, 2 * py / max(Hp - 1, 1) - 1], -1)
        return grid.reshape(B * heads, Hp, Wp, 2)

    def _windows(self, t: torch.Tensor, B: int, nh: int, nw: int) -> torch.Tensor:
        """``(B·heads, hd, Hp, Wp)`` → ``(B·nh·nw, heads, ws², hd)``."""
        ws = self.window_size
        t = t.reshape(B, self.num_heads, self.head_dim, nh, ws, nw, ws)
        return t.permute(0, 3, 5, 1, 4, 6, 2).reshape(B * nh * nw, self.num_heads, ws * ws,
                                                      self.head_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, H, W, C = x.shape
        ws, heads, hd = self.window_size, self.num_heads, self.head_dim
        pad_h, pad_w = (-H) % ws, (-W) % ws
        top, left = pad_h // 2, pad_w // 2
        padding = (left, pad_w - left, top, pad_h - top)
        Hp, Wp = H + pad_h, W + pad_w
        nh, nw = Hp // ws, Wp // ws

        grid = self.sampling_grid(F.pad(x.permute(0, 3, 1, 2), padding))
        qkv = F.pad(self.qkv(x).permute(0, 3, 1, 2), padding)  # B, 3C, Hp, Wp
        q, k, v = qkv.reshape(B, 3, heads * hd, Hp, Wp).unbind(1)
        k, v = (F.grid_sample(t.reshape(B * heads, hd, Hp, Wp).float(), grid,
                              mode='bilinear', padding_mode='zeros',
                              align_corners=True).to(q.dtype) for t in (k, v))
        q = self._windows(q.reshape(B * heads, hd, Hp, Wp), B, nh, nw)
        out = F.scaled_dot_product_attention(q, self._windows(k, B, nh, nw),
                                             self._windows(v, B, nh, nw), scale=self.scale)
        out = out.reshape(B, nh, nw, heads, ws, ws, hd).permute(0, 1, 4, 2, 5, 3, 6)
        out = out.reshape(B, Hp, Wp, C)[:, top:top + H, left:left + W]
        return self.proj(out)


class GlobalRelPosAttention(nn.Module):
    """Global multi-head attention with decomposed relative position terms.

    ``attn = softmax(q·kᵀ·scale + q·R_h + q·R_w)`` where ``R_h[i, j] = rel_pos_h[i - j +
    G_h - 1]`` (``q`` unscaled; same along the width). The tables have ``2·G - 1`` rows
    for the grid ``G`` of ``img_size``; another grid resamples them linearly (timm's
    ``get_rel_pos``). Input and output are token maps ``B×H×W×C``.
    """

    def __init__(self, dim: int, num_heads: int, grid_size: Tuple[int, int],
                 qkv_bias: bool = True) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f'embed_dims {dim} is not divisible by num_heads {num_heads}')
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.rel_pos_h = nn.Parameter(torch.zeros(2 * grid_size[0] - 1, self.head_dim))
        self.rel_pos_w = nn.Parameter(torch.zeros(2 * grid_size[1] - 1, self.head_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, H, W, C = x.shape
        N, heads, hd = H * W, self.num_heads, self.head_dim
        q, k, v = self.qkv(x).reshape(B, N, 3, heads, hd).permute(2, 0, 3, 1, 4).unbind(0)
        bias = get_decomposed_rel_pos_bias(q.reshape(B * heads, N, hd), self.rel_pos_h,
                                           self.rel_pos_w, (H, W), (H, W))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.reshape(
            B, heads, N, N).to(q.dtype), scale=self.scale)
        return self.proj(out.transpose(1, 2).reshape(B, H, W, C))


class RVSABlock(nn.Module):
    """Pre-norm transformer block on ``B×H×W×C`` maps with global or rotated window
    attention (timm's ``Mlp`` and ``DropPath``)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, qkv_bias: bool,
                 norm_eps: float, drop_path: float, window: bool, window_size: int,
                 grid_size: Tuple[int, int]) -> None:
        super().__init__()
        self.window = window
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        if window:
            self.attn = RotatedWindowAttention(dim, num_heads, window_size, qkv_bias)
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
        out_indices: blocks whose token maps are returned (default: the ``'vit12'``
            preset (3, 5, 7, 11) for 12 blocks).
        final_norm: apply the final LayerNorm ``norm`` to every returned map (the
            module exists only then).
        frozen_stages, with_cp, init_cfg: see :class:`~.base.DenseViTBackbone`.

    Checkpoints: the MAE ViT-B pretraining file (``{'model': …}``, timm keys, a fixed
    sin-cos ``pos_embed`` of 1 + 14×14 rows) loads with its class token, class row,
    mask token and decoder dropped and the 14×14 grid interpolated bicubically to the
    model's grid; the RVSA parameters (window predictors, relative position tables) are
    then left at their initialisation. The published RVSA fine-tuning code instead
    skipped the pretrained ``pos_embed`` when its size differed from the model's and
    trained it from random values; this loader interpolates it.
    """

    arch_zoo: Dict[str, dict] = {
        'b': dict(patch_size=16, embed_dims=768, depth=12, num_heads=12, mlp_ratio=4.0),
        'base': dict(patch_size=16, embed_dims=768, depth=12, num_heads=12, mlp_ratio=4.0),
    }
    allowed_missing_keys = ('blocks.*.attn.sampling_offsets.*',
                            'blocks.*.attn.sampling_scales.*',
                            'blocks.*.attn.sampling_angles.*', 'blocks.*.attn.rel_pos_h',
                            'blocks.*.attn.rel_pos_w')
    arch_family = 'rvsa'
    no_weight_decay_keywords = ('pos_embed', 'rel_pos_h', 'rel_pos_w')

    def __init__(self, arch: Union[str, dict] = 'b', img_size: Union[int, Tuple[int, int]] = 512,
                 in_channels: int = 3, qkv_bias: bool = True, norm_eps: float = 1e-6,
                 window_size: int = 7, global_interval: int = 3,
                 global_indices: Optional[Sequence[int]] = None, drop_path_rate: float = 0.0,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: bool = False, frozen_stages: int = -1, with_cp: bool = False,
                 init_cfg: Optional[dict] = None) -> None:
        cfg = self._resolve_arch(arch)
        depth = cfg['depth']
        super().__init__(depth, out_indices, final_norm, frozen_stages, with_cp, init_cfg)
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
            RVSABlock(self.embed_dims, self.num_heads, cfg['mlp_ratio'], qkv_bias, norm_eps,
                      rates[i], window=i not in global_indices, window_size=self.window_size,
                      grid_size=self.grid_size) for i in range(depth)
        ])
        self.norm = nn.LayerNorm(self.embed_dims, eps=norm_eps) if final_norm else None
        self._init_parameters()

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
        # the sampling predictors (1×1 convolutions) stay at zero: identity transform

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
        return outs

    # ---------------------------------------------------------------- checkpoints
    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """MAE pretraining keys (or a fine-tuned checkpoint) → this model's keys.

        - An MMSeg/MMDet model ``state_dict``: keep the ``backbone.`` keys (prefix
          stripped), drop the rest (``decode_head.*``, ``neck.*``, ...).
        - Drop ``cls_token``, ``mask_token``, ``decoder_*``, classification ``head.*``
          and ``fc_norm.*``.
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
        rows; drop ``norm.*`` when the model has no final norm (``final_norm=False``)."""
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
        if self.norm is None:
            state_dict = {k: v for k, v in state_dict.items() if not k.startswith('norm.')}
        return state_dict
