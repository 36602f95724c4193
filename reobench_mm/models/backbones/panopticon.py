"""Panopticon (Waldmann et al., 2025, any-sensor foundation model) as a dense backbone.

Panopticon is a DINOv2 ViT-B/14 whose patch embedding takes any set of bands: every band
is patch-embedded alone by one shared ``1×p×p`` convolution (1 → ``attn_dim`` = 2304
channels), the band's spectral embedding is added to its tokens, and the tokens of the
bands of one patch are fused into one by cross-attention with a single learned query
(16 heads, no query or output projection, key and value projections without bias),
then projected to the trunk width (768). The trunk is DINOv2's: class token, learned
position embedding for a 37×37 grid (518 px; the model was trained at 224 px and the
official code resamples the embedding at every forward), 12 pre-norm blocks with
LayerScale (``ls1``/``ls2``) and LayerNorm eps 1e-6, no register tokens. The blocks are
timm's ``Block`` with the settings of timm's ``vit_base_patch14_dinov2``, whose keys are
those of the official checkpoint; the patch embedding is written here (timm has none).

Spectral embedding (the official ``ChnEmb``): an optical band is given its centre
wavelength μ in nanometres, floored to a whole nanometre; its embedding is the 1-D
sin-cos code ``[sin(μ·ω_k), cos(μ·ω_k)]``, ``ω_k = 10000^(-k/(A/2))``, ``k < A/2``. A SAR
band is given one of 12 negative ids (``-1..-4``: VV, VH, HH, HV over both orbits;
``-5..-8`` the same ascending, ``-9..-12`` descending); its embedding concatenates three
learned parts: the transmit polarisation (V for VV/VH, H for HH/HV; ``A//3`` wide), the
receive polarisation (``A//3``) and the orbit (the mean of the ascending and descending
vectors for both orbits; ``A - 2·(A//3)``).

Position embedding: the checkpoint's 37×37 grid is resampled to the grid of
``img_size`` at load as the official forward resamples it (DINOv2's
``interpolate_pos_encoding``: bicubic, no antialias, scale factor ``(n + 0.1)/37``), so
at ``img_size`` the model equals the official one; other input grids are resampled from
the stored grid the same way at every forward.

Official checkpoint layout (``panopticon_vitb14_teacher.pth`` of the Hugging Face
repository ``lewaldm/panopticon``, the torch-hub model's state dict):
``cls_token``, ``pos_embed`` (1, 1 + 37², 768), ``mask_token`` (1, 768; iBOT's masked
token, pre-training only: dropped), ``patch_embed.conv3d.conv3d.{weight (2304, 1, 1, 14,
14), bias}``, ``patch_embed.chnfus.chnemb.embed_{transmit,receive,orbit}`` (2, 768 each),
``patch_embed.chnfus.query`` (1, 1, 2304), ``patch_embed.chnfus.xattn.inproj_{k,v}.weight``
(2304, 2304), ``patch_embed.proj.*`` (768, 2304), ``blocks.{i}.*`` and ``norm.*``. The
training code's teacher files ``{'teacher': {'backbone.*', 'dino_head.*', 'ibot_head.*'}}``
and full checkpoints ``{'model': {'student.*', 'teacher.backbone.*',
'teacher.dino_head.*', 'teacher.ibot_head.*'}}`` load too: the teacher's backbone is kept,
the student and the DINO/iBOT heads are dropped.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from timm.models.vision_transformer import Block
from torch import nn
from torch.utils.checkpoint import checkpoint as activation_checkpoint

from ...registry import MODELS
from .base import DenseViTBackbone

__all__ = ['Panopticon', 'SpectralPatchEmbed', 'PANOPTICON_BAND_WAVELENGTHS',
           'PANOPTICON_DEFAULT_BANDS', 'wavelengths_from_band_names',
           'check_channel_ids', 'dinov2_interpolate_pos_embed']

#: Band name → the channel id the spectral embedding takes: the centre wavelength in nm
#: of an optical band, or a negative SAR category. Sentinel-2 (L1C, the names of
#: ``SENTINEL2_BANDS``): the Gaussian centres of the official sensor table
#: (``dinov2/configs/data/satellites/sentinel2.yaml``). ``red``/``green``/``blue``: the
#: official RGB convention (its RGB evaluation sets take Sentinel-2 B04/B03/B02);
#: ``nir``: Sentinel-2 B08 (the package's choice for NIR of aerial imagery). ``VV``,
#: ``VH``, ``HH``, ``HV``: the SAR categories over both orbits (-1..-4).
PANOPTICON_BAND_WAVELENGTHS: Dict[str, float] = {
    'B01': 442.9226, 'B02': 492.9971, 'B03': 559.5988, 'B04': 664.6300, 'B05': 704.0059,
    'B06': 740.5521, 'B07': 782.4191, 'B08': 827.5394, 'B8A': 864.7801, 'B09': 945.0295,
    'B10': 1373.3637, 'B11': 1613.8624, 'B12': 2203.6182,
    'red': 664.6300, 'green': 559.5988, 'blue': 492.9971, 'nir': 827.5394,
    'VV': -1.0, 'VH': -2.0, 'HH': -3.0, 'HV': -4.0,
}
#: The bands assumed when the config names none: an RGB image in red, green, blue order.
PANOPTICON_DEFAULT_BANDS: Tuple[str, ...] = ('red', 'green', 'blue')
_SAR_CATEGORIES = 12
#: receive polarisation (0: V, 1: H) of the SAR categories VV, VH, HH, HV
_SAR_RECEIVE = (0, 1, 1, 0)


def wavelengths_from_band_names(band_names: Sequence[str]) -> Tuple[float, ...]:
    """The channel ids of :data:`PANOPTICON_BAND_WAVELENGTHS` for ``band_names``.

    Raises:
        ValueError: an empty list or a name not in the table (the message lists them).
    """
    if isinstance(band_names, str) or not len(band_names):
        raise ValueError(f'band_names must be a non-empty list of band names, got '
                         f'{band_names!r}')
    unknown = [n for n in band_names if n not in PANOPTICON_BAND_WAVELENGTHS]
    if unknown:
        raise ValueError(f'Panopticon: no wavelength for the band names {unknown}; valid: '
                         f'{list(PANOPTICON_BAND_WAVELENGTHS)} (or give wavelengths= in nm)')
    return tuple(PANOPTICON_BAND_WAVELENGTHS[n] for n in band_names)


def check_channel_ids(values: Sequence[float]) -> Tuple[float, ...]:
    """``values`` as channel ids: positive centre wavelengths in nm, or whole SAR
    categories ``-1..-12``.

    Raises:
        ValueError: an empty list, or a value that is neither.
    """
    values = tuple(float(v) for v in values)
    bad = [v for v in values if not (v > 0 or (v == int(v) and -_SAR_CATEGORIES <= v <= -1))]
    if not values or bad:
        raise ValueError(f'Panopticon wavelengths must be centre wavelengths in nm (> 0) or '
                         f'SAR categories -1..-{_SAR_CATEGORIES} (-1..-4: VV, VH, HH, HV); '
                         f'got {list(values)}')
    return values


def dinov2_interpolate_pos_embed(pos_embed: torch.Tensor, grid: Tuple[int, int],
                                 offset: float = 0.1) -> torch.Tensor:
    """DINOv2's resampling of a ``(1, 1 + M², D)`` position embedding (class row first)
    to a ``rows×columns`` grid: bicubic, no antialias, in float32, with the scale factors
    ``((rows + offset)/M, (columns + offset)/M)`` of its historical offset (which also set
    where the samples are taken). Returns the input when the grid is ``M×M``."""
    tokens = pos_embed.shape[1] - 1
    side = int(round(math.sqrt(tokens)))
    if side * side != tokens:
        raise ValueError(f'position embedding with {tokens} grid rows is not a square grid '
                         f'(shape {tuple(pos_embed.shape)})')
    rows, cols = int(grid[0]), int(grid[1])
    if (rows, cols) == (side, side):
        return pos_embed
    dims = pos_embed.shape[-1]
    patch = pos_embed[:, 1:].float().reshape(1, side, side, dims).permute(0, 3, 1, 2)
    patch = F.interpolate(patch, scale_factor=((rows + offset) / side, (cols + offset) / side),
                          mode='bicubic', antialias=False)
    if tuple(patch.shape[-2:]) != (rows, cols):
        raise ValueError(f'resampling a {side}x{side} position embedding gave '
                         f'{tuple(patch.shape[-2:])}, not {(rows, cols)}')
    patch = patch.permute(0, 2, 3, 1).reshape(1, rows * cols, dims)
    return torch.cat([pos_embed[:, :1].float(), patch], dim=1).to(pos_embed.dtype)


class SpectralPatchEmbed(nn.Module):
    """Panopticon's patch embedding: per-band patches, spectral embedding, cross-attention
    over the bands of each patch, projection to the trunk width.

    Args:
        patch_size: ``p`` (the convolution's kernel and stride).
        attn_dim: ``A``, the width of the per-band tokens and of the fusion.
        embed_dims: the trunk width the fused tokens are projected to.
        num_heads: heads of the cross-attention (``A`` divisible by it).
    """

    def __init__(self, patch_size: int, attn_dim: int, embed_dims: int, num_heads: int) -> None:
        super().__init__()
        if attn_dim % num_heads or attn_dim % 2:
            raise ValueError(f'attn_dim must be even and divisible by the fusion heads, got '
                             f'attn_dim={attn_dim}, fusion_heads={num_heads}')
        self.patch_size, self.attn_dim, self.num_heads = patch_size, attn_dim, num_heads
        self.band_conv = nn.Conv2d(1, attn_dim, kernel_size=patch_size, stride=patch_size)
        third = attn_dim // 3
        self.sar_transmit = nn.Parameter(torch.zeros(2, third))  # 0: V, 1: H
        self.sar_receive = nn.Parameter(torch.zeros(2, third))  # 0: V, 1: H
        self.sar_orbit = nn.Parameter(torch.zeros(2, attn_dim - 2 * third))  # asc., desc.
        self.query = nn.Parameter(torch.randn(1, 1, attn_dim))
        self.key_proj = nn.Linear(attn_dim, attn_dim, bias=False)
        self.value_proj = nn.Linear(attn_dim, attn_dim, bias=False)
        self.proj = nn.Linear(attn_dim, embed_dims)

    def spectral_embedding(self, channel_ids: torch.Tensor) -> torch.Tensor:
        """``(B, C, A)`` embeddings of ``(B, C)`` channel ids (see the module docstring)."""
        optical = channel_ids >= 0
        half = self.attn_dim // 2
        omega = torch.arange(half, dtype=torch.float32, device=channel_ids.device) / half
        omega = 1.0 / 10000**omega
        angles = torch.floor(channel_ids.float().clamp(min=0))[..., None] * omega
        sincos = torch.cat([angles.sin(), angles.cos()], dim=-1)
        category = (-channel_ids - 1).clamp(0, _SAR_CATEGORIES - 1).long()
        polarisation, orbit = category % 4, category // 4
        receive_index = torch.tensor(_SAR_RECEIVE, device=channel_ids.device)[polarisation]
        orbits = torch.stack([self.sar_orbit.mean(dim=0), self.sar_orbit[0], self.sar_orbit[1]])
        sar = torch.cat([self.sar_transmit[polarisation // 2], self.sar_receive[receive_index],
                         orbits[orbit]], dim=-1)
        return torch.where(optical[..., None], sincos.to(sar.dtype), sar)

    def forward(self, x: torch.Tensor, channel_ids: torch.Tensor
                ) -> Tuple[torch.Tensor, Tuple[int, int]]:
        """``(B, h·w, embed_dims)`` tokens of a ``(B, C, H, W)`` image whose bands have the
        ``(B, C)`` ``channel_ids``, and the grid ``(h, w)`` (the remainder of ``H``, ``W``
        beyond a multiple of ``p`` is dropped, as by the official convolution)."""
        batch, bands = x.shape[:2]
        tokens = self.band_conv(x.reshape(batch * bands, 1, *x.shape[2:]))
        grid = tuple(tokens.shape[-2:])
        length = grid[0] * grid[1]
        tokens = tokens.reshape(batch, bands, self.attn_dim, length).permute(0, 3, 1, 2)
        tokens = tokens + self.spectral_embedding(channel_ids)[:, None]  # B, L, C, A
        tokens = tokens.reshape(batch * length, bands, self.attn_dim)
        head_dims = self.attn_dim // self.num_heads

        def split_heads(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(t.shape[0], -1, self.num_heads, head_dims).transpose(1, 2)

        query = split_heads(self.query).expand(batch * length, -1, -1, -1)
        fused = F.scaled_dot_product_attention(query, split_heads(self.key_proj(tokens)),
                                               split_heads(self.value_proj(tokens)))
        fused = fused.reshape(batch, length, self.attn_dim)  # one query: heads side by side
        return self.proj(fused), grid


_PANOPTICON_ZOO: Dict[str, dict] = {
    'b': dict(patch_size=14, embed_dims=768, depth=12, num_heads=12, mlp_ratio=4.0,
              attn_dim=2304, fusion_heads=16),
}
_ARCH_REQUIRED = ('embed_dims', 'depth', 'num_heads')
_ARCH_OPTIONAL = ('patch_size', 'mlp_ratio', 'attn_dim', 'fusion_heads')

#: official key → this model's key (besides ``cls_token``, ``pos_embed``, ``blocks.*``,
#: ``norm.*``, which keep their names)
_OFFICIAL_RENAMES: Dict[str, str] = {
    'patch_embed.conv3d.conv3d.weight': 'patch_embed.band_conv.weight',
    'patch_embed.conv3d.conv3d.bias': 'patch_embed.band_conv.bias',
    'patch_embed.chnfus.chnemb.embed_transmit': 'patch_embed.sar_transmit',
    'patch_embed.chnfus.chnemb.embed_receive': 'patch_embed.sar_receive',
    'patch_embed.chnfus.chnemb.embed_orbit': 'patch_embed.sar_orbit',
    'patch_embed.chnfus.query': 'patch_embed.query',
    'patch_embed.chnfus.xattn.inproj_k.weight': 'patch_embed.key_proj.weight',
    'patch_embed.chnfus.xattn.inproj_v.weight': 'patch_embed.value_proj.weight',
}


def _resolve_arch(arch: Union[str, dict]) -> dict:
    if isinstance(arch, str):
        if arch not in _PANOPTICON_ZOO:
            raise ValueError(f'Panopticon: unknown arch {arch!r}; valid presets: '
                             f'{sorted(_PANOPTICON_ZOO)}, or a dict with keys '
                             f'{list(_ARCH_REQUIRED)} (optional {list(_ARCH_OPTIONAL)})')
        return dict(_PANOPTICON_ZOO[arch])
    if not isinstance(arch, dict):
        raise ValueError(f'Panopticon: arch must be a preset name {sorted(_PANOPTICON_ZOO)} '
                         f'or a dict, got {type(arch).__name__}')
    missing = [k for k in _ARCH_REQUIRED if k not in arch]
    unknown = sorted(set(arch) - set(_ARCH_REQUIRED) - set(_ARCH_OPTIONAL))
    if missing or unknown:
        raise ValueError(f'Panopticon: arch dict needs keys {list(_ARCH_REQUIRED)} (optional '
                         f'{list(_ARCH_OPTIONAL)}); missing {missing}, unknown {unknown}')
    spec = dict(patch_size=14, mlp_ratio=4.0, attn_dim=3 * arch['embed_dims'],
                fusion_heads=16)
    spec.update(arch)
    return spec


@MODELS.register_module()
class Panopticon(DenseViTBackbone):
    """Panopticon encoder returning the token maps of ``out_indices`` as
    ``B×C×H/p×W/p`` (``p`` = 14: a 224 px input gives 16×16 maps, stride 14).

    The bands' channel ids come from ``wavelengths`` (centre wavelengths in nm, or SAR
    categories ``-1..-12``), else from ``band_names`` through
    :data:`PANOPTICON_BAND_WAVELENGTHS`, else :data:`PANOPTICON_DEFAULT_BANDS` (RGB);
    a call may pass its own (per sample) to :meth:`forward`.

    Args:
        arch: ``'b'`` (ViT-B/14, fusion width 2304 with 16 heads: the released model) or
            a dict with ``embed_dims``, ``depth``, ``num_heads`` (optional ``patch_size``
            14, ``mlp_ratio`` 4, ``attn_dim`` 3·embed_dims, ``fusion_heads`` 16).
        img_size: the input size whose grid the position embedding is stored for.
        wavelengths: one channel id per input band.
        band_names: names of the input bands (used when ``wavelengths`` is None).
        out_indices: blocks to output (None: 3/5/7/11 for 12 blocks).
        final_norm: apply the final LayerNorm to every output (None: False, or True with
            ``pyramid_source='last_block'``).
        drop_path_rate: stochastic depth, increasing linearly over the blocks.
        frozen_stages, with_cp, init_cfg, pyramid_source: see
            :class:`~.base.DenseViTBackbone`.
    """
    arch_zoo: Dict[str, dict] = _PANOPTICON_ZOO
    arch_family = 'panopticon'
    allowed_missing_keys: Tuple[str, ...] = ()
    #: official top-level keys outside the encoder: iBOT's mask token.
    dropped_keys: Tuple[str, ...] = ('mask_token', )
    #: official prefixes outside the teacher's backbone (training checkpoints).
    dropped_prefixes: Tuple[str, ...] = ('student.', 'teacher.dino_head.', 'teacher.ibot_head.',
                                         'dino_head.', 'ibot_head.')

    def __init__(self, arch: Union[str, dict] = 'b', img_size: Union[int, Tuple[int, int]] = 224,
                 wavelengths: Optional[Sequence[float]] = None,
                 band_names: Optional[Sequence[str]] = None,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, drop_path_rate: float = 0.0,
                 frozen_stages: int = -1, with_cp: bool = False,
                 init_cfg: Optional[dict] = None, pyramid_source: str = 'blocks') -> None:
        spec = _resolve_arch(arch)
        super().__init__(spec['depth'], out_indices, final_norm, frozen_stages, with_cp,
                         init_cfg, pyramid_source=pyramid_source)
        if wavelengths is None:
            wavelengths = wavelengths_from_band_names(band_names or PANOPTICON_DEFAULT_BANDS)
        # whole nanometres (the embedding floors them), kept as integers under .half()
        self.register_buffer('channel_ids', torch.tensor(
            [math.floor(v) for v in check_channel_ids(wavelengths)]), persistent=False)
        size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        if len(size) != 2 or size[0] != size[1]:
            raise ValueError(f'Panopticon: img_size must be one size or a square (rows, '
                             f'columns), as the position embedding grid is; got {img_size!r}')
        self.patch_size, self.embed_dims = spec['patch_size'], spec['embed_dims']
        self.grid_size = (size[0] // self.patch_size, size[1] // self.patch_size)
        self.patch_embed = SpectralPatchEmbed(spec['patch_size'], spec['attn_dim'],
                                              spec['embed_dims'], spec['fusion_heads'])
        self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims))
        self.pos_embed = nn.Parameter(
            torch.zeros(1, 1 + self.grid_size[0] * self.grid_size[1], self.embed_dims))
        depth = spec['depth']
        rates = [drop_path_rate * i / max(depth - 1, 1) for i in range(depth)]  # linspace
        self.blocks = nn.ModuleList(
            Block(self.embed_dims, spec['num_heads'], mlp_ratio=spec['mlp_ratio'],
                  qkv_bias=True, init_values=1e-5, drop_path=rate,
                  norm_layer=partial(nn.LayerNorm, eps=1e-6)) for rate in rates)
        self.norm = nn.LayerNorm(self.embed_dims, eps=1e-6)
        self._init_parameters()

    def _init_parameters(self) -> None:
        """The official initialisation (``DinoVisionTransformer.init_weights``): truncated
        normal (std 0.02) position embedding and linear weights, zero linear biases, class
        token N(0, 1e-6²); the fusion query stays N(0, 1), the SAR vectors zero."""
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    @property
    def embedding_module_names(self) -> Tuple[str, ...]:
        return ('patch_embed', 'cls_token', 'pos_embed')

    def resolve_channel_ids(self, x: torch.Tensor,
                            wavelengths: Union[None, torch.Tensor, Sequence[float]] = None
                            ) -> torch.Tensor:
        """``(B, C)`` channel ids for the image ``x``: ``wavelengths`` (``(C,)`` or
        ``(B, C)``) or the configured ones.

        Raises:
            ValueError: the number of ids is not the image's band count, or an id is
                invalid (see :func:`check_channel_ids`).
        """
        if wavelengths is None:
            ids = self.channel_ids
        elif isinstance(wavelengths, torch.Tensor):
            ids = wavelengths.to(x.device)
            if ids.device.type != 'meta':
                check_channel_ids(ids.reshape(-1).tolist())
        else:
            ids = torch.tensor(check_channel_ids(wavelengths), device=x.device)
        if ids.ndim not in (1, 2) or ids.shape[-1] != x.shape[1] \
                or (ids.ndim == 2 and ids.shape[0] != x.shape[0]):
            raise ValueError(f'Panopticon: the image has {x.shape[1]} bands (shape '
                             f'{tuple(x.shape)}) but the channel ids have shape '
                             f'{tuple(ids.shape)}; give one wavelength per band, (C,) or per '
                             'sample (B, C) (wavelengths=, or band_names= from the names of '
                             'PANOPTICON_BAND_WAVELENGTHS)')
        if ids.ndim == 1:
            ids = ids[None].expand(x.shape[0], -1)
        return ids

    def tokens(self, x: torch.Tensor, channel_ids: torch.Tensor
               ) -> Tuple[torch.Tensor, Tuple[int, int]]:
        """The trunk's input: class token and patch tokens plus the position embedding
        (resampled to the input grid when it differs from the stored one)."""
        patches, grid = self.patch_embed(x, channel_ids)
        tokens = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), patches], dim=1)
        pos_embed = self.pos_embed
        if grid != self.grid_size:
            pos_embed = dinov2_interpolate_pos_embed(pos_embed, grid)
        return tokens + pos_embed, grid

    def forward_levels(self, x: torch.Tensor,
                       wavelengths: Union[None, torch.Tensor, Sequence[float]] = None
                       ) -> List[torch.Tensor]:
        tokens, grid = self.tokens(x, self.resolve_channel_ids(x, wavelengths))
        levels = []
        for index, block in enumerate(self.blocks[:self.out_indices[-1] + 1]):
            if self.with_cp and self.training and tokens.requires_grad:
                tokens = activation_checkpoint(block, tokens, use_reentrant=False)
            else:
                tokens = block(tokens)
            if index in self.out_indices:
                out = self.norm(tokens) if self.final_norm else tokens
                levels.append(out[:, 1:].reshape(x.shape[0], grid[0], grid[1], -1)
                              .permute(0, 3, 1, 2).contiguous())
        return levels

    def forward(self, x: torch.Tensor,
                wavelengths: Union[None, torch.Tensor, Sequence[float]] = None
                ) -> Tuple[torch.Tensor, ...]:
        """The 4 pyramid inputs of a ``(B, C, H, W)`` image; ``wavelengths`` (``(C,)`` or
        per sample ``(B, C)``) replaces the configured channel ids for this call."""
        levels = tuple(self.forward_levels(x, wavelengths))
        return levels * 4 if self.pyramid_source == 'last_block' else levels

    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """Official keys → this model's: the teacher's backbone of training checkpoints
        (``teacher.backbone.*`` / ``backbone.*``) is taken, :attr:`dropped_prefixes` (the
        student, the DINO and iBOT heads) and :attr:`dropped_keys` (the mask token) are
        dropped, the patch embedding renamed and its ``1×p×p`` 3-D convolution kernel
        becomes the 2-D ``p×p`` one. Other keys pass unchanged (and are checked)."""
        for prefix in ('teacher.backbone.', 'backbone.'):
            if any(k.startswith(prefix) for k in state_dict):
                state_dict = {k[len(prefix):] if k.startswith(prefix) else k: v
                              for k, v in state_dict.items()}
                break
        converted = {}
        for key, value in state_dict.items():
            if key in cls.dropped_keys or key.startswith(cls.dropped_prefixes):
                continue
            key = _OFFICIAL_RENAMES.get(key, key)
            if key == 'patch_embed.band_conv.weight' and value.ndim == 5:
                value = value.squeeze(2)
            converted[key] = value
        return converted

    def prepare_state_dict(self, checkpoint: dict) -> Dict[str, torch.Tensor]:
        """As :meth:`~.base.DenseViTBackbone.prepare_state_dict`, also unwrapping the
        training code's teacher files ``{'teacher': state_dict}``."""
        if isinstance(checkpoint.get('teacher'), dict) and not any(
                isinstance(checkpoint.get(k), dict) for k in ('state_dict', 'model')):
            checkpoint = checkpoint['teacher']
        return super().prepare_state_dict(checkpoint)

    def adapt_state_dict(self, state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Resample ``pos_embed`` to this model's grid as the official forward does
        (:func:`dinov2_interpolate_pos_embed`)."""
        pos = state_dict.get('pos_embed')
        if pos is not None and pos.shape[-1] == self.embed_dims \
                and pos.shape != self.pos_embed.shape:
            state_dict = dict(state_dict)
            state_dict['pos_embed'] = dinov2_interpolate_pos_embed(pos, self.grid_size)
        return state_dict
