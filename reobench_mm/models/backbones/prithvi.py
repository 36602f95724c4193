"""Prithvi-EO-2.0 (IBM, NASA and Jülich Supercomputing Centre; Szwarcman et al. 2024) as a
dense backbone: :class:`PrithviV2`, its checkpoint converter and its band table.

The encoder is the one of the official ``prithvi_mae.py`` (``PrithviViT``, shipped with the
checkpoints on the Hugging Face hub; TerraTorch's ``terratorch/models/backbones/
prithvi_mae.py`` re-implements it): a ViT whose patch embedding is a 3-D convolution over
``(time, height, width)`` with tubelet size 1, a class token, a fixed 3-D sin-cos position
embedding, timm ``Block`` s (qkv bias, GELU, LayerNorm eps 1e-6) and, in the ``-TL``
releases, a temporal (year, day of year) and a location (latitude, longitude) sin-cos
encoding, each times a learned scale, added to every patch token.

Computation, step by step (the official ``forward_features``):

1. ``x`` ``(B, C, T, H, W)`` → ``Conv3d(kernel = stride = (1, p, p))`` → tokens in
   ``(t, h, w)`` row-major order.
2. + the 3-D sin-cos embedding of that grid: for ``D`` channels, ``6D/16`` encode the
   column, ``6D/16`` the row, ``4D/16`` the frame, in that order, each
   ``[sin(pos·ω_k), cos(pos·ω_k)]`` with ``ω_k = 10000^(-k/(d/2))`` (``d`` the part's
   width). The official code computes the embedding of the input's own grid when it is not
   the stored one (TerraTorch instead resamples the stored one bicubically); here it is
   always the input grid's.
3. + ``scale_t · [sincos_{D/2}(year), sincos_{D/2}(day of year)]`` of each frame on the
   frame's tokens, + ``scale_l · [sincos_{D/2}(lat), sincos_{D/2}(lon)]`` on every token
   (``-TL`` only; computed in float32 as the official torch helper does).
4. The class token (its position row is zero) prepended; the blocks.

The official code adds an enabled encoding unconditionally, so it needs the coordinates;
TerraTorch skips an encoding whose coordinates are None. Pre-training dropped the metadata
at random by zeroing the encoding of a sample, so skipping it is the model's "no metadata"
input. This backbone takes the coordinates from its config (one fixed date per frame and
one location for every sample) and skips an encoding without them.

Official checkpoint (``Prithvi_EO_V2_300M.pt``, ``Prithvi_EO_V2_300M_TL.pt``,
``Prithvi_EO_V2_600M.pt``, ``Prithvi_EO_V2_600M_TL.pt``): the ``PrithviMAE`` state dict,
``encoder.*`` and ``decoder.*``. Encoder keys, kept without the ``encoder.`` prefix:
``cls_token``, ``patch_embed.proj.{weight,bias}`` (weight ``(D, 6, 1, p, p)``),
``blocks.{i}.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}.*``, ``norm.*`` and, in the
``-TL`` files, ``temporal_embed_enc.scale`` and ``location_embed_enc.scale``. Dropped
(:data:`DROPPED_OFFICIAL_KEYS`): ``encoder.pos_embed`` (the fixed sin-cos of the 4-frame
pre-training grid, recomputed for the model's grid) and the MAE decoder: its embedding,
``mask_token``, position embedding, blocks, norm, pixel predictor and its own temporal and
location scales. Any other key is refused by name.
"""
from __future__ import annotations

import fnmatch
from functools import partial
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from timm.models.vision_transformer import Block
from torch import nn

from ...registry import MODELS
from .base import DenseViTBackbone
from .satmae import resolve_vit_arch

__all__ = ['PrithviV2', 'PRITHVI_HLS_BANDS', 'HLS_TO_SENTINEL2', 'PRITHVI_SENTINEL2_BANDS',
           'PRITHVI_V2_MEAN', 'PRITHVI_V2_STD', 'DROPPED_OFFICIAL_KEYS', 'COORDS_ENCODINGS',
           'prithvi_band_indices', 'sincos_1d', 'sincos_pos_embed_3d']

#: The six bands of the pre-training data (NASA's HLS V2 at 30 m), in the input order.
PRITHVI_HLS_BANDS = ('BLUE', 'GREEN', 'RED', 'NIR_NARROW', 'SWIR_1', 'SWIR_2')
#: The Sentinel-2 band of each HLS band (HLS S30 takes them from these MSI bands).
HLS_TO_SENTINEL2 = {'BLUE': 'B02', 'GREEN': 'B03', 'RED': 'B04', 'NIR_NARROW': 'B8A',
                    'SWIR_1': 'B11', 'SWIR_2': 'B12'}
#: The Sentinel-2 names of :data:`PRITHVI_HLS_BANDS`, in the input order.
PRITHVI_SENTINEL2_BANDS = tuple(HLS_TO_SENTINEL2[band] for band in PRITHVI_HLS_BANDS)
#: Per-band mean and standard deviation of the pre-training data (reflectance × 10000),
#: as the checkpoints' ``config.json`` and TerraTorch give them.
PRITHVI_V2_MEAN = (1087.0, 1342.0, 1433.0, 2734.0, 1958.0, 1363.0)
PRITHVI_V2_STD = (2248.0, 2179.0, 2178.0, 1850.0, 1242.0, 1049.0)
#: The metadata encodings of the ``-TL`` releases.
COORDS_ENCODINGS = ('time', 'location')
#: Official keys the encoder does not use (``fnmatch`` patterns), dropped on conversion.
DROPPED_OFFICIAL_KEYS = (
    'encoder.pos_embed', 'decoder.decoder_embed.*', 'decoder.mask_token',
    'decoder.decoder_pos_embed', 'decoder.decoder_blocks.*', 'decoder.decoder_norm.*',
    'decoder.decoder_pred.*', 'decoder.temporal_embed_dec.scale',
    'decoder.location_embed_dec.scale')

_SHAPES: Dict[str, dict] = {
    '300m': dict(patch_size=16, embed_dims=1024, depth=24, num_heads=16, mlp_ratio=4.0),
    '600m': dict(patch_size=14, embed_dims=1280, depth=32, num_heads=16, mlp_ratio=4.0),
}
_ZOO: Dict[str, dict] = dict(_SHAPES, **{f'{k}_tl': v for k, v in _SHAPES.items()})


def prithvi_band_indices(band_names: Sequence[Optional[str]]) -> Tuple[int, ...]:
    """The 0-based positions in ``band_names`` of the six Prithvi bands, in the model's
    input order; a band is found by its HLS name (:data:`PRITHVI_HLS_BANDS`) or its
    Sentinel-2 name (:data:`HLS_TO_SENTINEL2`, e.g. ``'B8A'`` for ``'NIR_NARROW'``).

    Raises:
        ValueError: a band missing or named twice; the message lists what was given.
    """
    names = list(band_names)
    indices = []
    for band in PRITHVI_HLS_BANDS:
        accepted = (band, HLS_TO_SENTINEL2[band])
        found = [i for i, name in enumerate(names) if name in accepted]
        if len(found) != 1:
            what = 'is missing' if not found else f'is named {len(found)} times'
            raise ValueError(f'Prithvi band {band} (Sentinel-2 {accepted[1]}) {what} in '
                             f'band_names {names}; name it once, as {accepted[0]!r} or '
                             f'{accepted[1]!r}')
        indices.append(found[0])
    return tuple(indices)


def sincos_1d(dims: int, positions: torch.Tensor) -> torch.Tensor:
    """``(M, dims)``: ``[sin(p·ω_k), cos(p·ω_k)]`` for the ``M`` positions ``p``, with
    ``ω_k = 10000^(-k/(dims/2))``, ``k < dims/2``, in the dtype of ``positions``."""
    if dims % 2:
        raise ValueError(f'a 1-D sin-cos encoding needs an even width, got {dims}')
    half = dims // 2
    omega = torch.arange(half, dtype=positions.dtype, device=positions.device) / half
    omega = 1.0 / 10000**omega
    angles = positions.reshape(-1, 1) * omega
    return torch.cat([angles.sin(), angles.cos()], dim=1)


def sincos_pos_embed_3d(embed_dims: int, grid: Sequence[int],
                        device: Optional[torch.device] = None) -> torch.Tensor:
    """``(t·h·w, D)``: Prithvi's fixed 3-D sin-cos embedding of a ``(t, h, w)`` token grid,
    rows in ``(t, h, w)`` row-major order, ``[column 6D/16 | row 6D/16 | frame 4D/16]``
    (module docstring); computed in float64, returned in float32.

    Raises:
        ValueError: ``embed_dims`` not divisible by 16.
    """
    if embed_dims % 16:
        raise ValueError(f'the 3-D sin-cos embedding needs embed_dims divisible by 16, '
                         f'got {embed_dims}')
    frames, rows, cols = (int(g) for g in grid)
    part = embed_dims // 16

    def axis(count: int, width: int) -> torch.Tensor:
        return sincos_1d(width, torch.arange(count, dtype=torch.float64, device=device))

    shape = (frames, rows, cols)
    by_col = axis(cols, 6 * part)[None, None].expand(*shape, -1)
    by_row = axis(rows, 6 * part)[None, :, None].expand(*shape, -1)
    by_frame = axis(frames, 4 * part)[:, None, None].expand(*shape, -1)
    table = torch.cat([by_col, by_row, by_frame], dim=-1)
    return table.reshape(frames * rows * cols, embed_dims).float()


class _PatchEmbed3D(nn.Module):
    """The official ``PatchEmbed``: a ``Conv3d`` with kernel = stride = ``(1, p, p)``."""

    def __init__(self, in_channels: int, embed_dims: int, patch_size: int) -> None:
        super().__init__()
        kernel = (1, patch_size, patch_size)
        self.proj = nn.Conv3d(in_channels, embed_dims, kernel_size=kernel, stride=kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class _CoordScale(nn.Module):
    """The learned weight of a metadata encoding (official ``TemporalEncoder`` /
    ``LocationEncoder`` with ``trainable_scale=True``: one scalar, 0.1 at first)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.full((1, ), 0.1))


def _check_coords(name: str, value: Sequence, count: int) -> torch.Tensor:
    rows = torch.as_tensor(value, dtype=torch.float32, device='cpu')
    if rows.ndim == 1 and count == 1:
        rows = rows[None]
    if rows.ndim != 2 or rows.shape != (count, 2) or not torch.isfinite(rows).all():
        raise ValueError(f'PrithviV2: {name} must be {count} finite pair(s) (one per frame '
                         f'for temporal_coords: [year, day of year]; [latitude, longitude] '
                         f'for location_coords), got {value!r}')
    return rows


@MODELS.register_module()
class PrithviV2(DenseViTBackbone):
    """Prithvi-EO-2.0 encoder returning the token maps of ``out_indices`` as
    ``B×(T·C)×H/p×W/p`` (the frames' maps stacked frame by frame along the channels, as
    the official ``prepare_features_for_image_model`` does; ``C×H/p×W/p`` for one frame).

    Inputs: ``B×(T·N)×H×W`` (the frames one after the other, each with the ``N`` bands of
    ``band_names``, or the six Prithvi bands in order when ``band_names`` is None), or the
    official layout ``B×N×T×H×W``. Normalise with :data:`PRITHVI_V2_MEAN` /
    :data:`PRITHVI_V2_STD` (reflectance × 10000) before the backbone.

    Args:
        arch: ``'300m'`` (ViT-L: 1024 wide, 24 blocks, 16 heads, patch 16), ``'600m'``
            (ViT-H: 1280 wide, 32 blocks, 16 heads, patch 14), ``'300m_tl'`` or
            ``'600m_tl'`` (the same with the temporal and location encodings), or a dict
            with ``embed_dims`` (divisible by 16), ``depth``, ``num_heads`` (optional
            ``patch_size`` 16, ``mlp_ratio`` 4).
        img_size: the input size whose position embedding is stored (224, the
            pre-training size); other sizes get their own grid's embedding.
        num_frames: time steps ``T`` per sample (1: a single image).
        in_channels: bands of the patch embedding (6 for the checkpoints).
        band_names: the names of the input's bands (per frame), e.g. ``SENTINEL2_BANDS``;
            the six Prithvi bands are selected from them by name
            (:func:`prithvi_band_indices`). None: the input is the six bands in order.
        coords_encoding: the metadata encodings the trunk has, a subset of
            :data:`COORDS_ENCODINGS`; None: both for the ``_tl`` presets, none otherwise.
        temporal_coords: one ``[year, day of year]`` per frame (a single pair for one
            frame), the same for every sample; None: the temporal encoding is skipped.
        location_coords: ``[latitude, longitude]`` in degrees, the same for every sample;
            None: the location encoding is skipped.
        out_indices, pyramid_source, frozen_stages, with_cp, init_cfg: see
            :class:`~.base.DenseViTBackbone`; ``frozen_stages`` equal to the depth also
            freezes the final norm.
        final_norm: apply the final LayerNorm to every returned map (None: False, or True
            with ``pyramid_source='last_block'``). The official ``forward_features``
            normalises the last block's output only.
        norm_eps: LayerNorm epsilon (1e-6 in the official ``prithvi_mae.py``; TerraTorch's
            re-implementation uses PyTorch's 1e-5).
        drop_path_rate: stochastic depth, the same in every block (as TerraTorch).

    Raises:
        ValueError: a bad arch, band list, encoding name or coordinates, or coordinates
            for an encoding the trunk does not have.
    """
    arch_zoo: Dict[str, dict] = _ZOO
    arch_family = 'prithvi-eo-2.0'
    allowed_missing_keys: Tuple[str, ...] = ()
    no_weight_decay_keywords: Tuple[str, ...] = ('cls_token', 'embed_enc.scale')

    def __init__(self, arch: Union[str, dict] = '300m', img_size: Union[int, Sequence[int]] = 224,
                 num_frames: int = 1, in_channels: int = 6,
                 band_names: Optional[Sequence[str]] = None,
                 coords_encoding: Optional[Sequence[str]] = None,
                 temporal_coords: Optional[Sequence] = None,
                 location_coords: Optional[Sequence[float]] = None,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, norm_eps: float = 1e-6,
                 drop_path_rate: float = 0.0, frozen_stages: int = -1, with_cp: bool = False,
                 init_cfg: Optional[dict] = None, pyramid_source: str = 'blocks') -> None:
        spec = resolve_vit_arch(arch, self.arch_zoo, type(self).__name__)
        super().__init__(spec['depth'], out_indices, final_norm, frozen_stages, with_cp,
                         init_cfg, pyramid_source=pyramid_source)
        if spec['embed_dims'] % 16:
            raise ValueError(f"PrithviV2: embed_dims must be divisible by 16 (3-D sin-cos "
                             f"embedding), got {spec['embed_dims']}")
        if isinstance(num_frames, bool) or not isinstance(num_frames, int) or num_frames < 1:
            raise ValueError(f'PrithviV2: num_frames must be an int >= 1, got {num_frames!r}')
        if coords_encoding is None:
            coords_encoding = COORDS_ENCODINGS if str(arch).endswith('_tl') else ()
        unknown = sorted(set(coords_encoding) - set(COORDS_ENCODINGS))
        if unknown or isinstance(coords_encoding, str):
            raise ValueError(f'PrithviV2: coords_encoding must be a list drawn from '
                             f'{list(COORDS_ENCODINGS)}, got {coords_encoding!r}')
        self.embed_dims, self.patch_size = spec['embed_dims'], spec['patch_size']
        self.num_frames, self.in_channels = num_frames, in_channels
        self.coords_encoding = tuple(e for e in COORDS_ENCODINGS if e in coords_encoding)
        self.band_names = None if band_names is None else tuple(band_names)
        self.band_indices = None if band_names is None else prithvi_band_indices(band_names)
        if self.band_indices is not None and in_channels != len(PRITHVI_HLS_BANDS):
            raise ValueError(f'PrithviV2: band_names selects the {len(PRITHVI_HLS_BANDS)} '
                             f'Prithvi bands; in_channels must then be 6, got {in_channels}')
        size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        self.img_size = (int(size[0]), int(size[1]))
        self.patch_embed = _PatchEmbed3D(in_channels, self.embed_dims, self.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims))
        if 'time' in self.coords_encoding:
            self.temporal_embed_enc = _CoordScale()
        if 'location' in self.coords_encoding:
            self.location_embed_enc = _CoordScale()
        self._set_coords('temporal_coords', 'time', temporal_coords, num_frames)
        self._set_coords('location_coords', 'location', location_coords, 1)
        self.register_buffer('pos_embed', sincos_pos_embed_3d(self.embed_dims, self.grid_size),
                             persistent=False)
        norm_layer = partial(nn.LayerNorm, eps=norm_eps)
        self.blocks = nn.ModuleList(
            Block(self.embed_dims, spec['num_heads'], spec['mlp_ratio'], qkv_bias=True,
                  drop_path=drop_path_rate, norm_layer=norm_layer)
            for _ in range(self.depth))
        self.norm = norm_layer(self.embed_dims)
        self._init_like_official()

    def _set_coords(self, name: str, encoding: str, value: Optional[Sequence],
                    count: int) -> None:
        if value is not None and encoding not in self.coords_encoding:
            raise ValueError(f'PrithviV2: {name} given but the trunk has no {encoding!r} '
                             f'encoding (coords_encoding={list(self.coords_encoding)}); use '
                             "a '_tl' arch (the -TL checkpoints) or leave it out")
        rows = None if value is None else _check_coords(name, value, count)
        self.register_buffer(name, rows, persistent=False)

    def _init_like_official(self) -> None:
        """The official initialisation: patch embedding Xavier-uniform on its flattened
        kernel, class token N(0, 0.02), linear layers Xavier-uniform with zero bias,
        LayerNorms 1 and 0 (the metadata scales start at 0.1)."""
        weight = self.patch_embed.proj.weight
        with torch.no_grad():
            nn.init.xavier_uniform_(weight.view(weight.shape[0], -1))
            nn.init.normal_(self.cls_token, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    # ------------------------------------------------------------------ properties
    @property
    def embedding_module_names(self) -> Tuple[str, ...]:
        return ('patch_embed', 'cls_token', 'temporal_embed_enc', 'location_embed_enc')

    @property
    def grid_size(self) -> Tuple[int, int, int]:
        """``(frames, rows, columns)`` of the token grid of an ``img_size`` input."""
        return (self.num_frames, self.img_size[0] // self.patch_size,
                self.img_size[1] // self.patch_size)

    @property
    def out_channels(self) -> int:
        """Channels of every returned map: ``embed_dims · num_frames``."""
        return self.embed_dims * self.num_frames

    def _frozen_modules(self) -> List[Union[nn.Module, nn.Parameter]]:
        found = super()._frozen_modules()
        if self.frozen_stages >= self.depth:
            found.append(self.norm)
        return found

    # ------------------------------------------------------------------ forward
    def _frames(self, x: torch.Tensor) -> torch.Tensor:
        """The input as ``(B, 6, T, H, W)``: frames split, Prithvi bands selected."""
        bands = self.in_channels if self.band_names is None else len(self.band_names)
        expected = (f'B×{self.num_frames * bands}×H×W ({self.num_frames} frame(s) of '
                    f'{bands} bands) or B×{bands}×{self.num_frames}×H×W')
        if x.ndim == 4 and x.shape[1] == self.num_frames * bands:
            x = x.reshape(x.shape[0], self.num_frames, bands, *x.shape[2:]).transpose(1, 2)
        elif not (x.ndim == 5 and tuple(x.shape[1:3]) == (bands, self.num_frames)):
            raise ValueError(f'PrithviV2: input of shape {tuple(x.shape)}; expected {expected}')
        if self.band_indices is not None:
            x = x[:, list(self.band_indices)]
        return x

    def patch_pos_embed(self, grid: Tuple[int, int, int]) -> torch.Tensor:
        """``(t·h·w, D)``: the stored embedding for the ``img_size`` grid, else the
        sin-cos of ``grid`` (as the official code does)."""
        if tuple(grid) == self.grid_size:
            return self.pos_embed
        return sincos_pos_embed_3d(self.embed_dims, grid, device=self.pos_embed.device)

    def temporal_encoding(self) -> Optional[torch.Tensor]:
        """``(T, D)``: ``scale · [sincos(year), sincos(day of year)]`` of each frame, or
        None without the encoding or the coordinates."""
        if 'time' not in self.coords_encoding or self.temporal_coords is None:
            return None
        half = self.embed_dims // 2
        coords = self.temporal_coords
        code = torch.cat([sincos_1d(half, coords[:, 0]),
                          sincos_1d(self.embed_dims - half, coords[:, 1])], dim=1)
        return self.temporal_embed_enc.scale * code

    def location_encoding(self) -> Optional[torch.Tensor]:
        """``(1, D)``: ``scale · [sincos(latitude), sincos(longitude)]``, or None without
        the encoding or the coordinates."""
        if 'location' not in self.coords_encoding or self.location_coords is None:
            return None
        half = self.embed_dims // 2
        coords = self.location_coords
        code = torch.cat([sincos_1d(half, coords[:, 0]),
                          sincos_1d(self.embed_dims - half, coords[:, 1])], dim=1)
        return self.location_embed_enc.scale * code

    def forward_levels(self, x: torch.Tensor) -> List[torch.Tensor]:
        tokens = self.patch_embed(self._frames(x))  # B×D×t×h×w
        batch, _, frames, rows, cols = tokens.shape
        tokens = tokens.flatten(2).transpose(1, 2)
        tokens = tokens + self.patch_pos_embed((frames, rows, cols)).to(tokens.dtype)
        temporal = self.temporal_encoding()
        if temporal is not None:  # each frame's code on that frame's tokens
            tokens = tokens + temporal.repeat_interleave(rows * cols, dim=0).to(tokens.dtype)
        location = self.location_encoding()
        if location is not None:
            tokens = tokens + location.to(tokens.dtype)
        x = torch.cat([self.cls_token.expand(batch, -1, -1).to(tokens.dtype), tokens], dim=1)

        def to_map(index: int, out: torch.Tensor) -> torch.Tensor:
            out = self.norm(out) if self.final_norm else out
            out = out[:, 1:].reshape(batch, frames, rows, cols, self.embed_dims)
            return out.permute(0, 1, 4, 2, 3).reshape(batch, -1, rows, cols)

        return self.run_blocks(x, to_map)

    # ------------------------------------------------------------------ checkpoints
    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """Official ``PrithviMAE`` keys → this model's: ``encoder.`` stripped, the keys of
        :data:`DROPPED_OFFICIAL_KEYS` dropped; anything else is kept as it is, for
        :func:`~.base.check_state_dict` to refuse by name.

        Raises:
            ValueError: no ``encoder.*`` key (not a Prithvi-EO-2.0 pre-training file).
        """
        if not any(key.startswith('encoder.') for key in state_dict):
            raise ValueError('PrithviV2: not a Prithvi-EO-2.0 checkpoint (the PrithviMAE '
                             "layout has 'encoder.*' and 'decoder.*' keys); got keys "
                             f'{sorted(state_dict)[:8]}')
        converted = {}
        for key, value in state_dict.items():
            if any(fnmatch.fnmatchcase(key, pattern) for pattern in DROPPED_OFFICIAL_KEYS):
                continue
            converted[key[len('encoder.'):] if key.startswith('encoder.') else key] = value
        return converted

    def adapt_state_dict(self, state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Refuse a ``-TL`` file for a trunk without the metadata encodings and the other
        way round, naming the arch to use."""
        for encoding, key in (('time', 'temporal_embed_enc.scale'),
                              ('location', 'location_embed_enc.scale')):
            has_key, has_encoding = key in state_dict, encoding in self.coords_encoding
            if has_key != has_encoding:
                kind = 'a -TL' if has_key else 'a plain (not -TL)'
                hint = "a '_tl' arch (e.g. '300m_tl')" if has_key else \
                    "an arch without '_tl' (e.g. '300m')"
                raise ValueError(f'PrithviV2: {kind} checkpoint ({key} '
                                 f'{"present" if has_key else "absent"}) for a trunk with '
                                 f'coords_encoding={list(self.coords_encoding)}; use {hint}')
        return state_dict
