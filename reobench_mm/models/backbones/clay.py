"""Clay v1.5 (Clay Foundation; ViT-L/8 MAE encoder with a wavelength-conditioned dynamic
patch embedding) as a dense backbone.

The encoder, as the official ``claymodel`` code computes it (``Encoder`` of ``model.py``
with ``mask_ratio=0`` and ``shuffle=False``, as its embedder and segmentation encoder run
it):

1. every band's wavelength ``λ`` (µm) → a 1-D sin-cos code of 128 values
   (``[sin(λ·ω), cos(λ·ω)]``, ``ω_k = 10000^(-k/63)``), then a residual two-layer GELU
   block (``fclayer``);
2. the weight generator: 128 learned weight tokens, the band codes and one bias token go
   through one post-norm ``nn.TransformerEncoderLayer`` (4 heads, GELU, feed-forward
   2048); each band's output plus its input gives that band's ``P·P·D`` patch weights
   (``fc_weight``), the bias token's output the ``D`` biases (``fc_bias``);
3. a convolution of stride ``P`` with those weights times 0.02 (layout ``(band, (D, P,
   P))``) turns the image into ``D``-wide tokens;
4. added to the tokens: a 2-D sin-cos position code of ``D - 8`` channels whose
   frequencies are ``10000^(-2k / ((D'/4 - 1)·D'))·gsd`` (``D' = D - 8``, ``k = 0..D'/4-1``;
   ``[sin(col·ω), cos(col·ω), sin(row·ω), cos(row·ω)]``), followed by 8 metadata values:
   ``[sin, cos]`` of the week and of the hour, then of the latitude and of the longitude;
5. a class token (without any code) in front, then pre-norm blocks without biases in the
   attention (``to_qkv``, ``to_out``) and with biases in the MLP, LayerNorm eps 1e-5, and
   a final LayerNorm (``transformer.norm``).

Official checkpoint (``clay-v1.5.ckpt``, a Lightning checkpoint ``{'state_dict': …}`` of
``ClayMAEModule``), keys under ``model.``:

- ``encoder.cls_token``; ``encoder.patch_embedding.fclayer.{l1,l2}.*``;
  ``encoder.patch_embedding.weight_generator.{weight_tokens, bias_token, fc_weight.*,
  fc_bias.*, encoder.layers.0.*}`` (kept under the same names here);
- ``encoder.transformer.layers.{i}.0.{norm, to_qkv, to_out}.*`` and
  ``encoder.transformer.layers.{i}.1.net.{0,1,3}.*`` → ``blocks.{i}.{norm1, attn.qkv,
  attn.proj, norm2, mlp.fc1, mlp.fc2}.*``; ``encoder.transformer.norm.*`` → ``norm.*``;
- dropped: ``decoder.*`` (MAE decoder and its pixel embedding), ``teacher.*`` (the frozen
  teacher), ``proj.*`` (the projection onto the teacher's features) and ``mrl.*`` (the
  Matryoshka head of earlier training code).
"""
from __future__ import annotations

import math
import re
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from timm.layers import Mlp
from timm.models.vision_transformer import Attention
from torch import nn
from torch.utils.checkpoint import checkpoint

from ...registry import MODELS
from .base import DenseViTBackbone

__all__ = ['ClayV15', 'CLAY_BAND_WAVELENGTHS', 'CLAY_ESA_ONLY_BANDS', 'clay_wavelengths',
           'clay_time_code', 'clay_location_code', 'clay_position_code',
           'clay_wavelength_code', 'convert_clay_state_dict', 'CLAY_DROPPED_PREFIXES']

#: Centre wavelengths (µm) by band name. ``red``, ``green``, ``blue``, ``nir``: the
#: official metadata's NAIP (aerial RGB-NIR) values; ``B02``…``B12``: its Sentinel-2 L2A
#: values (``blue`` … ``swir22``); ``B01``, ``B09``, ``B10`` (not in Clay's metadata, Clay
#: never saw them): Sentinel-2A's centre wavelengths from ESA's handbook, rounded to nm.
CLAY_BAND_WAVELENGTHS: Dict[str, float] = {
    'red': 0.65, 'green': 0.56, 'blue': 0.48, 'nir': 0.842,
    'B01': 0.443, 'B02': 0.493, 'B03': 0.56, 'B04': 0.665, 'B05': 0.704, 'B06': 0.74,
    'B07': 0.783, 'B08': 0.842, 'B8A': 0.865, 'B09': 0.945, 'B10': 1.375, 'B11': 1.61,
    'B12': 2.19,
}
#: The names of :data:`CLAY_BAND_WAVELENGTHS` whose values are ESA's, not Clay's.
CLAY_ESA_ONLY_BANDS = ('B01', 'B09', 'B10')
#: Official checkpoint prefixes (after ``model.``) outside the encoder, dropped on load.
CLAY_DROPPED_PREFIXES = ('decoder.', 'teacher.', 'proj.', 'mrl.')

_WAVE_DIM = 128  # width of the wavelength codes and of the weight generator
_LATENT_TOKENS = 128  # learned weight tokens of the weight generator
_METADATA_CHANNELS = 8  # week, hour, latitude, longitude: sin and cos each

_CLAY_ZOO: Dict[str, dict] = {
    'l': dict(embed_dims=1024, depth=24, num_heads=16, head_dims=64, mlp_ratio=4.0,
              patch_size=8),
}
_ARCH_REQUIRED = ('embed_dims', 'depth', 'num_heads')
_ARCH_OPTIONAL = ('head_dims', 'mlp_ratio', 'patch_size')


def clay_wavelengths(band_names: Sequence[str]) -> Tuple[float, ...]:
    """Wavelengths (µm) of ``band_names`` from :data:`CLAY_BAND_WAVELENGTHS`.

    Raises:
        ValueError: an empty list or a name not in the table (the valid names listed).
    """
    names = list(band_names)
    unknown = [n for n in names if n not in CLAY_BAND_WAVELENGTHS]
    if not names or unknown:
        raise ValueError(f'ClayV15: band_names must name bands of the wavelength table '
                         f'{sorted(CLAY_BAND_WAVELENGTHS)}; unknown: {unknown or "(none given)"}'
                         '. Give wavelengths=(µm, ...) for other sensors')
    return tuple(CLAY_BAND_WAVELENGTHS[n] for n in names)


def _pair(value: Optional[Sequence[float]], name: str, ranges: Tuple[Tuple[float, float],
                                                                    ...]) -> Optional[tuple]:
    if value is None:
        return None
    values = tuple(float(v) for v in value)
    if len(values) != 2 or any(not lo <= v <= hi for v, (lo, hi) in zip(values, ranges)):
        raise ValueError(f'ClayV15: {name} must be None or 2 numbers in {list(ranges)}, '
                         f'got {value!r}')
    return values


def clay_time_code(time: Optional[Sequence[float]]) -> torch.Tensor:
    """``[sin, cos]`` of ``week·2π/52`` and of ``hour·2π/24`` for ``time = (ISO week,
    hour)`` (Clay's data preparation); zeros when ``time`` is None (what the official
    fine-tuning code feeds when the time is unknown)."""
    pair = _pair(time, 'time (ISO week, hour)', ((1, 53), (0, 24)))
    if pair is None:
        return torch.zeros(4)
    week, hour = pair[0] * 2 * math.pi / 52, pair[1] * 2 * math.pi / 24
    return torch.tensor([math.sin(week), math.cos(week), math.sin(hour), math.cos(hour)])


def clay_location_code(latlon: Optional[Sequence[float]]) -> torch.Tensor:
    """``[sin, cos]`` of the latitude and of the longitude (degrees → radians) for
    ``latlon = (lat, lon)``; zeros when None (the official code's unknown location)."""
    pair = _pair(latlon, 'latlon (degrees)', ((-90, 90), (-180, 180)))
    if pair is None:
        return torch.zeros(4)
    lat, lon = (math.radians(v) for v in pair)
    return torch.tensor([math.sin(lat), math.cos(lat), math.sin(lon), math.cos(lon)])


def clay_wavelength_code(wavelengths: torch.Tensor, dims: int = _WAVE_DIM) -> torch.Tensor:
    """``(C, dims)``: ``[sin(λ·ω), cos(λ·ω)]`` with ``ω_k = 10000^(-k/(dims/2 - 1))``."""
    half = dims // 2
    omega = 1.0 / torch.pow(10000.0, torch.arange(half, device=wavelengths.device) / (half - 1))
    angles = wavelengths.float()[:, None] * omega[None]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


def clay_position_code(rows: int, cols: int, dims: int, gsd: float,
                       device: Optional[torch.device] = None) -> torch.Tensor:
    """``(rows·cols, dims)`` row-major: Clay's GSD-scaled 2-D sin-cos code (the official
    ``posemb_sincos_2d_with_gsd``): ``ω_k = 10000^(-2k/((dims/4 - 1)·dims))·gsd`` and
    ``[sin(col·ω), cos(col·ω), sin(row·ω), cos(row·ω)]``, in float32."""
    quarter = dims // 4
    steps = torch.arange(quarter, device=device) / (quarter - 1)
    omega = 1.0 / torch.pow(10000.0, 2 * steps / dims) * float(gsd)
    row, col = torch.meshgrid(torch.arange(rows, device=device),
                              torch.arange(cols, device=device), indexing='ij')
    row = row.reshape(-1, 1) * omega[None]
    col = col.reshape(-1, 1) * omega[None]
    return torch.cat([col.sin(), col.cos(), row.sin(), row.cos()], dim=1)


class WaveFCBlock(nn.Module):
    """``x + gelu(l2(gelu(l1(x))))`` on the wavelength codes (official ``FCBlock``)."""

    def __init__(self, dims: int) -> None:
        super().__init__()
        self.l1 = nn.Linear(dims, dims)
        self.l2 = nn.Linear(dims, dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.gelu(self.l2(F.gelu(self.l1(x))))


class WaveWeightGenerator(nn.Module):
    """Patch weights and biases from the band codes (official ``WavesTransformer``)."""

    def __init__(self, out_weights: int, embed_dims: int) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=_WAVE_DIM, nhead=4, activation='gelu',
                                           dropout=0.0, norm_first=False, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.fc_weight = nn.Linear(_WAVE_DIM, out_weights)
        self.fc_bias = nn.Linear(_WAVE_DIM, embed_dims)
        self.weight_tokens = nn.Parameter(torch.randn(_LATENT_TOKENS, _WAVE_DIM) * 0.02)
        self.bias_token = nn.Parameter(torch.randn(1, _WAVE_DIM) * 0.02)

    def forward(self, codes: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``codes`` ``(C, 128)`` → weights ``(C, P·P·D)`` and bias ``(D, )``."""
        tokens = torch.cat([self.weight_tokens, codes, self.bias_token], dim=0)
        out = self.encoder(tokens)  # one unbatched sequence
        bands = slice(_LATENT_TOKENS, tokens.shape[0] - 1)
        return self.fc_weight(out[bands] + tokens[bands]), self.fc_bias(out[-1])


class DynamicPatchEmbedding(nn.Module):
    """Clay's wavelength-conditioned patch embedding (official ``DynamicEmbedding`` of the
    encoder): image ``(B, C, H, W)`` and wavelengths ``(C, )`` → ``(B, D, H/P, W/P)``."""

    def __init__(self, patch_size: int, embed_dims: int) -> None:
        super().__init__()
        self.patch_size, self.embed_dims = patch_size, embed_dims
        self.weight_generator = WaveWeightGenerator(patch_size**2 * embed_dims, embed_dims)
        self.fclayer = WaveFCBlock(_WAVE_DIM)
        for module in self.modules():  # the official initialisation
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor, wavelengths: torch.Tensor) -> torch.Tensor:
        codes = self.fclayer(clay_wavelength_code(wavelengths))
        weight, bias = self.weight_generator(codes)
        size = self.patch_size
        weight = weight.reshape(-1, self.embed_dims, size, size).transpose(0, 1)
        return F.conv2d(x, weight * 0.02, bias, stride=size)


class ClayBlock(nn.Module):
    """Pre-norm block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))`` (timm's
    attention without biases, timm's GELU MLP with biases; LayerNorm eps 1e-5)."""

    def __init__(self, dims: int, num_heads: int, head_dims: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dims)
        self.attn = Attention(dims, num_heads=num_heads, attn_head_dim=head_dims,
                              qkv_bias=False, proj_bias=False)
        self.norm2 = nn.LayerNorm(dims)
        self.mlp = Mlp(dims, int(dims * mlp_ratio), act_layer=nn.GELU, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


_BLOCK_KEY = re.compile(r'transformer\.layers\.(\d+)\.(.*)$')
_BLOCK_PARTS = {'0.norm.': 'norm1.', '0.to_qkv.': 'attn.qkv.', '0.to_out.': 'attn.proj.',
                '1.net.0.': 'norm2.', '1.net.1.': 'mlp.fc1.', '1.net.3.': 'mlp.fc2.'}


def convert_clay_state_dict(state_dict: Dict[str, torch.Tensor]
                            ) -> Dict[str, torch.Tensor]:
    """Official Clay keys (``model.encoder.*`` of the Lightning file, or ``encoder.*``, or
    the encoder's own keys) → :class:`ClayV15` keys; :data:`CLAY_DROPPED_PREFIXES`
    dropped. Keys it does not know keep their names, so that the key check names them."""
    converted = {}
    for key, value in state_dict.items():
        name = key[len('model.'):] if key.startswith('model.') else key
        if name.startswith(CLAY_DROPPED_PREFIXES):
            continue
        name = name[len('encoder.'):] if name.startswith('encoder.') else name
        match = _BLOCK_KEY.match(name)
        if match:
            index, rest = match.groups()
            for old, new in _BLOCK_PARTS.items():
                if rest.startswith(old):
                    name = f'blocks.{index}.{new}{rest[len(old):]}'
                    break
        elif name.startswith('transformer.norm.'):
            name = 'norm.' + name[len('transformer.norm.'):]
        converted[name] = value
    return converted


def _resolve_arch(arch: Union[str, dict]) -> dict:
    if isinstance(arch, str):
        if arch not in _CLAY_ZOO:
            raise ValueError(f'ClayV15: unknown arch {arch!r}; valid presets: '
                             f'{sorted(_CLAY_ZOO)} or a dict with keys {list(_ARCH_REQUIRED)} '
                             f'(optional {list(_ARCH_OPTIONAL)})')
        return dict(_CLAY_ZOO[arch])
    if not isinstance(arch, dict):
        raise ValueError(f'ClayV15: arch must be a preset name {sorted(_CLAY_ZOO)} or a dict, '
                         f'got {type(arch).__name__}')
    missing = [k for k in _ARCH_REQUIRED if k not in arch]
    unknown = sorted(set(arch) - set(_ARCH_REQUIRED) - set(_ARCH_OPTIONAL))
    if missing or unknown:
        raise ValueError(f'ClayV15: arch dict needs keys {list(_ARCH_REQUIRED)} (optional '
                         f'{list(_ARCH_OPTIONAL)}); missing {missing}, unknown {unknown}')
    spec = dict(patch_size=8, mlp_ratio=4.0, head_dims=arch['embed_dims'] // arch['num_heads'])
    spec.update(arch)
    if spec['embed_dims'] % 4 or spec['embed_dims'] < 16:
        raise ValueError('ClayV15: embed_dims must be a multiple of 4 and at least 16 (the '
                         f'position code takes embed_dims - 8), got {spec["embed_dims"]}')
    return spec


@MODELS.register_module()
class ClayV15(DenseViTBackbone):
    """Clay v1.5 encoder returning the token maps of ``out_indices`` as ``B×D×H/P×W/P``
    (patch size 8: every map at stride 8).

    The image's bands are described by their wavelengths, from ``wavelengths`` (µm) or
    from ``band_names`` through :data:`CLAY_BAND_WAVELENGTHS`; the ground sampling
    distance, acquisition time and location are fixed in the config and the same for
    every sample (the segmentor hands the backbone only the image).

    Args:
        arch: ``'l'`` (v1.5: 1024 wide, 24 blocks, 16 heads of 64, MLP ×4, patch 8) or a
            dict with ``embed_dims``, ``depth``, ``num_heads`` (optional ``head_dims``:
            ``embed_dims // num_heads``, ``mlp_ratio``: 4, ``patch_size``: 8).
        img_size: the input size (int or ``(h, w)``, multiples of the patch size) every
            input must have, as the official embedder fixes its grid; None accepts any
            size whose sides are multiples of the patch size.
        band_names: names of the input bands in :data:`CLAY_BAND_WAVELENGTHS`; None with
            ``wavelengths`` None: ``('red', 'green', 'blue')`` (aerial RGB, NAIP's values).
        wavelengths: the input bands' centre wavelengths in µm (instead of
            ``band_names``).
        gsd: ground sampling distance in metres (scales the position code's frequencies;
            the official metadata: NAIP 1.0, LINZ 0.5, Sentinel-2 10).
        time: ``(ISO week, hour)`` of the acquisition, or None: zeros (the official
            fine-tuning code's unknown time); see :func:`clay_time_code`.
        latlon: ``(latitude, longitude)`` in degrees, or None: zeros (unknown location);
            see :func:`clay_location_code`.
        out_indices, final_norm, frozen_stages, with_cp, init_cfg, pyramid_source: see
            :class:`~.base.DenseViTBackbone` (``final_norm`` applies the official final
            LayerNorm, ``transformer.norm``).
    """
    arch_zoo: Dict[str, dict] = _CLAY_ZOO
    arch_family = 'clay-v1.5'
    allowed_missing_keys: Tuple[str, ...] = ()
    no_weight_decay_keywords: Tuple[str, ...] = ('cls_token', 'weight_tokens', 'bias_token')

    def __init__(self, arch: Union[str, dict] = 'l',
                 img_size: Union[None, int, Tuple[int, int]] = 224,
                 band_names: Optional[Sequence[str]] = None,
                 wavelengths: Optional[Sequence[float]] = None, gsd: float = 1.0,
                 time: Optional[Sequence[float]] = None,
                 latlon: Optional[Sequence[float]] = None,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, frozen_stages: int = -1,
                 with_cp: bool = False, init_cfg: Optional[dict] = None,
                 pyramid_source: str = 'blocks') -> None:
        spec = _resolve_arch(arch)
        super().__init__(spec['depth'], out_indices, final_norm, frozen_stages, with_cp,
                         init_cfg, pyramid_source=pyramid_source)
        self.patch_size, self.embed_dims = int(spec['patch_size']), int(spec['embed_dims'])
        self.img_size = self._check_img_size(img_size)
        waves = self._resolve_wavelengths(band_names, wavelengths)
        if not (isinstance(gsd, (int, float)) and math.isfinite(gsd) and gsd > 0):
            raise ValueError(f'ClayV15: gsd must be a positive number of metres, got {gsd!r}')
        self.gsd = float(gsd)
        self.in_channels = len(waves)
        self.register_buffer('wavelengths', torch.tensor(waves, dtype=torch.float32),
                             persistent=False)
        self.register_buffer('metadata_code', torch.cat([clay_time_code(time),
                                                         clay_location_code(latlon)]).float(),
                             persistent=False)
        self.cls_token = nn.Parameter(torch.randn(1, 1, self.embed_dims) * 0.02)
        self.patch_embedding = DynamicPatchEmbedding(self.patch_size, self.embed_dims)
        self.blocks = nn.ModuleList(
            ClayBlock(self.embed_dims, spec['num_heads'], spec['head_dims'], spec['mlp_ratio'])
            for _ in range(self.depth))
        self.norm = nn.LayerNorm(self.embed_dims)

    def _check_img_size(self, img_size: Union[None, int, Tuple[int, int]]
                        ) -> Optional[Tuple[int, int]]:
        if img_size is None:
            return None
        size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        if len(size) != 2 or any(not isinstance(s, int) or s <= 0 or s % self.patch_size
                                 for s in size):
            raise ValueError(f'ClayV15: img_size must be None, or an int or (h, w) of '
                             f'positive multiples of the patch size {self.patch_size}, '
                             f'got {img_size!r}')
        return size

    @staticmethod
    def _resolve_wavelengths(band_names: Optional[Sequence[str]],
                             wavelengths: Optional[Sequence[float]]) -> Tuple[float, ...]:
        if band_names is not None and wavelengths is not None:
            raise ValueError('ClayV15: give band_names or wavelengths, not both')
        if wavelengths is None:
            return clay_wavelengths(('red', 'green', 'blue') if band_names is None
                                    else band_names)
        waves = tuple(float(w) for w in wavelengths)
        if not waves or any(not (math.isfinite(w) and 0 < w < 100) for w in waves):
            raise ValueError('ClayV15: wavelengths must be a non-empty list of centre '
                             f'wavelengths in µm (0 < λ < 100), got {wavelengths!r}')
        return waves

    @property
    def embedding_module_names(self) -> Tuple[str, ...]:
        return ('cls_token', 'patch_embedding')

    def encodings(self, rows: int, cols: int) -> torch.Tensor:
        """``(rows·cols, D)``: the GSD-scaled position code and the 8 metadata values."""
        position = clay_position_code(rows, cols, self.embed_dims - _METADATA_CHANNELS,
                                      self.gsd, device=self.metadata_code.device)
        metadata = self.metadata_code[None].expand(rows * cols, -1)
        return torch.cat([position, metadata], dim=1)

    def _check_input(self, x: torch.Tensor) -> None:
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f'ClayV15: expected a B×{self.in_channels}×H×W image (one '
                             f'channel per wavelength {self.wavelengths.tolist()}), got '
                             f'shape {tuple(x.shape)}')
        size = tuple(x.shape[-2:])
        if self.img_size is not None and size != self.img_size:
            raise ValueError(f'ClayV15: inputs must be {self.img_size} (img_size), got '
                             f'{size}; set img_size to the input size, or None for any')
        if size[0] % self.patch_size or size[1] % self.patch_size:
            raise ValueError(f'ClayV15: input sides must be multiples of the patch size '
                             f'{self.patch_size}, got {size}')

    def forward_levels(self, x: torch.Tensor) -> List[torch.Tensor]:
        self._check_input(x)
        tokens = self.patch_embedding(x, self.wavelengths)
        batch, dims, rows, cols = tokens.shape
        tokens = tokens.flatten(2).transpose(1, 2)
        tokens = tokens + self.encodings(rows, cols).to(tokens.dtype)[None]
        tokens = torch.cat([self.cls_token.expand(batch, -1, -1).to(tokens.dtype), tokens],
                           dim=1)
        levels = []
        for index, block in enumerate(self.blocks[:self.out_indices[-1] + 1]):
            if self.with_cp and self.training and torch.is_grad_enabled():
                tokens = checkpoint(block, tokens, use_reentrant=False)
            else:
                tokens = block(tokens)
            if index in self.out_indices:
                out = self.norm(tokens) if self.final_norm else tokens
                levels.append(out[:, 1:].transpose(1, 2).reshape(batch, dims, rows, cols))
        return levels

    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """Official keys → this model's (see :func:`convert_clay_state_dict`)."""
        return convert_clay_state_dict(state_dict)
