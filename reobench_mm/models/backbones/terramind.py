"""TerraMind v1 (IBM, ESA Φ-lab, Jülich; Jakubik et al. 2025) as a dense backbone:
:class:`TerraMind`, its checkpoint converter, its band and normalisation tables.

TerraMind is an any-to-any encoder-decoder over raw and tokenised Earth-observation
modalities. Used as a feature extractor (TerraTorch's ``TerraMindViT``, the
``terramind_v1_*`` backbones of ``terratorch/models/backbones/terramind``) only its
encoder runs, on raw image modalities. Computation, step by step (``TerraMindViT.forward``
with ``ImageEncoderEmbedding`` and the ``Block`` of ``tm_utils.py``):

1. each modality ``(B, c, H, W)`` is cut into ``p×p`` patches, each flattened in
   ``(row in patch, column in patch, band)`` order (``einops`` pattern
   ``b d (nh ph) (nw pw) -> b (nh nw) (ph pw d)``) and projected by a bias-free linear
   layer (``encoder_embeddings.<modality>.proj``);
2. + the modality's fixed 2-D sin-cos position embedding (``pos_emb``, built for the
   ``img_size`` grid, resampled bicubically when the input has another size) + its learned
   modality embedding (``mod_emb``);
3. the modalities' tokens are concatenated and run through the blocks: pre-norm, bias-free
   LayerNorm (eps 1e-6), bias-free attention, bias-free SwiGLU MLP
   ``fc2(silu(fc1(x)) · fc3(x))`` with hidden width ``int(2·int(D·mlp_ratio)/3)``;
4. the final LayerNorm (``encoder_norm``) is applied to the last block's output only; every
   block's output is split by modality and averaged over the image modalities
   (``merge_method='mean'``, the default), giving ``(B, h·w, D)`` per block.

The official position table for a square ``S×S`` grid is built with ``meshgrid(..,
indexing='ij')`` over ``(w, h)``: for the patch in row ``r``, column ``c`` it is
``[sin(r·ω), cos(r·ω), sin(c·ω), cos(c·ω)]``, ``ω_k = 10000^(-k/(D/4))``: the first half
encodes the row (MAE's table, :func:`~.base.sincos_pos_embed_2d`, has the column first).

Official checkpoint (``TerraMind_v1_{tiny,small,base,large}.pt`` on the Hugging Face hub,
``ibm-esa-geospatial/TerraMind-1.0-*``): the state dict of the whole ``TerraMind``
encoder-decoder. Kept under their own names: ``encoder_embeddings.<key>.{proj.weight,
mod_emb}`` of the raw modalities the model builds (:data:`TERRAMIND_MODALITIES`),
``encoder.{i}.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2,mlp.fc3}.weight`` and
``encoder_norm.weight``. Dropped (:data:`DROPPED_OFFICIAL_KEYS`, named): the decoder
(``decoder.*``, ``decoder_embeddings.*``, ``decoder_proj_context.*``, ``decoder_norm.*``,
``mask_token``), tokenizers (``tokenizer.*``), the fixed ``pos_emb`` tables (recomputed)
and the all-zero bias buffers of the bias-free LayerNorms (checked to be zero); the
encoder embeddings of the other official modalities (:data:`OFFICIAL_MODALITY_KEYS`:
tokenised inputs, captions, coordinates, raw modalities not built). Any other key is
refused by name.
"""
from __future__ import annotations

import fnmatch
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from ...registry import MODELS
from .base import DenseViTBackbone, resample_position_embedding
from .satmae import resolve_vit_arch

__all__ = ['TerraMind', 'TERRAMIND_MODALITIES', 'TERRAMIND_BANDS', 'TERRAMIND_TO_SENTINEL2',
           'TERRAMIND_V1_MEAN', 'TERRAMIND_V1_STD', 'OFFICIAL_MODALITY_KEYS',
           'DROPPED_OFFICIAL_KEYS', 'terramind_band_indices', 'terramind_input_stats',
           'terramind_pos_embed']

#: The raw image modalities of TerraMind v1: the name used here → the official key.
TERRAMIND_MODALITIES: Dict[str, str] = {
    'S2L2A': 'untok_sen2l2a@224', 'S2L1C': 'untok_sen2l1c@224', 'RGB': 'untok_sen2rgb@224',
    'S1GRD': 'untok_sen1grd@224', 'S1RTC': 'untok_sen1rtc@224', 'DEM': 'untok_dem@224'}
_S2_COMMON = ('COASTAL_AEROSOL', 'BLUE', 'GREEN', 'RED', 'RED_EDGE_1', 'RED_EDGE_2',
              'RED_EDGE_3', 'NIR_BROAD', 'NIR_NARROW', 'WATER_VAPOR')
#: Each modality's bands in the order of its patch embedding (the official
#: ``PRETRAINED_BANDS``).
TERRAMIND_BANDS: Dict[str, Tuple[str, ...]] = {
    'S2L2A': _S2_COMMON + ('SWIR_1', 'SWIR_2'),
    'S2L1C': _S2_COMMON + ('CIRRUS', 'SWIR_1', 'SWIR_2'),
    'RGB': ('RED', 'GREEN', 'BLUE'), 'S1GRD': ('VV', 'VH'), 'S1RTC': ('VV', 'VH'),
    'DEM': ('DEM', )}
#: The Sentinel-2 band (``SENTINEL2_BANDS`` naming) of each official optical band name.
TERRAMIND_TO_SENTINEL2: Dict[str, str] = {
    'COASTAL_AEROSOL': 'B01', 'BLUE': 'B02', 'GREEN': 'B03', 'RED': 'B04',
    'RED_EDGE_1': 'B05', 'RED_EDGE_2': 'B06', 'RED_EDGE_3': 'B07', 'NIR_BROAD': 'B08',
    'NIR_NARROW': 'B8A', 'WATER_VAPOR': 'B09', 'CIRRUS': 'B10', 'SWIR_1': 'B11',
    'SWIR_2': 'B12'}
#: Per-band mean and standard deviation of the v1 pre-training data (the official
#: ``v1_pretraining_mean`` / ``v1_pretraining_std``), in :data:`TERRAMIND_BANDS` order:
#: Sentinel-2 digital numbers (reflectance × 10000), RGB in 0-255, SAR in dB, DEM in m.
TERRAMIND_V1_MEAN: Dict[str, Tuple[float, ...]] = {
    'S2L2A': (1390.458, 1503.317, 1718.197, 1853.91, 2199.1, 2779.975, 2987.011, 3083.234,
              3132.22, 3162.988, 2424.884, 1857.648),
    'S2L1C': (2357.089, 2137.385, 2018.788, 2082.986, 2295.651, 2854.537, 3122.849, 3040.56,
              3306.481, 1473.847, 506.07, 2472.825, 1838.929),
    'RGB': (87.271, 80.931, 66.667), 'S1GRD': (-12.599, -20.293), 'S1RTC': (-10.93, -17.329),
    'DEM': (670.665, )}
TERRAMIND_V1_STD: Dict[str, Tuple[float, ...]] = {
    'S2L2A': (2106.761, 2141.107, 2038.973, 2134.138, 2085.321, 1889.926, 1820.257,
              1871.918, 1753.829, 1797.379, 1434.261, 1334.311),
    'S2L1C': (1624.683, 1675.806, 1557.708, 1833.702, 1823.738, 1733.977, 1732.131,
              1679.732, 1727.26, 1024.687, 442.165, 1331.411, 1160.419),
    'RGB': (58.767, 47.663, 42.631), 'S1GRD': (5.195, 5.890), 'S1RTC': (4.391, 4.459),
    'DEM': (951.272, )}
#: Every encoder-embedding key of the official ``MODALITY_INFO`` (``modality_info.py``);
#: those the model does not build are dropped on loading.
OFFICIAL_MODALITY_KEYS: Tuple[str, ...] = (
    'sen1grd@264', 'sen1rtc@264', 'sen2l2a@264', 'sen2l1c@264', 'sen2rgb@264', 'lulc@264',
    'dem@264', 'ndvi@264', 'untok_sen2l2a@224', 'untok_sen2l1c@224', 'untok_sen2rgb@224',
    'untok_sen1grd@224', 'untok_sen1rtc@224', 'tok_sen1grd@224', 'tok_sen1rtc@224',
    'tok_sen2l2a@224', 'tok_lulc@224', 'untok_dem@224', 'tok_dem@224', 'tok_ndvi@224',
    'rgb@224', 'caption', 'coords', 'det', 'tok_rgb@224', 'tok_depth@224', 'tok_normal@224',
    'tok_semseg@224', 'tok_clip@224', 'rgb@448', 'tok_rgb@448', 'tok_depth@448',
    'tok_normal@448', 'tok_semseg@448', 'tok_clip@448')
#: Official keys the encoder does not use (``fnmatch`` patterns), dropped on conversion.
DROPPED_OFFICIAL_KEYS: Tuple[str, ...] = (
    'decoder.*', 'decoder_embeddings.*', 'decoder_proj_context.*', 'decoder_norm.*',
    'mask_token', 'tokenizer.*', 'encoder_embeddings.*.pos_emb')
#: The bias buffers of the official bias-free LayerNorm (zeros; dropped once checked).
_ZERO_BIAS_KEYS = ('encoder.*.norm1.bias', 'encoder.*.norm2.bias', 'encoder_norm.bias')

_V1 = dict(patch_size=16, mlp_ratio=4.0)
_ZOO: Dict[str, dict] = {
    'tiny': dict(embed_dims=192, depth=12, num_heads=3, **_V1),
    'small': dict(embed_dims=384, depth=12, num_heads=6, **_V1),
    'base': dict(embed_dims=768, depth=12, num_heads=12, **_V1),
    'large': dict(embed_dims=1024, depth=24, num_heads=16, **_V1),
}


def _check_modality(modality: str) -> str:
    if modality not in TERRAMIND_MODALITIES:
        raise ValueError(f'TerraMind: unknown modality {modality!r}; valid: '
                         f'{list(TERRAMIND_MODALITIES)}')
    return modality


def terramind_band_indices(modality: str, band_names: Sequence[str]) -> Tuple[int, ...]:
    """The 0-based positions in ``band_names`` of ``modality``'s bands, in the order of its
    patch embedding (:data:`TERRAMIND_BANDS`). A band is found by its official name or,
    for the optical bands, its Sentinel-2 name (:data:`TERRAMIND_TO_SENTINEL2`, e.g.
    ``'B8A'`` for ``'NIR_NARROW'``), ignoring case; other bands of the input are skipped.

    Raises:
        ValueError: an unknown modality, or a band missing or named twice.
    """
    _check_modality(modality)
    names = [str(name).upper() for name in band_names]
    indices = []
    for band in TERRAMIND_BANDS[modality]:
        accepted = tuple(n for n in (band, TERRAMIND_TO_SENTINEL2.get(band)) if n)
        found = [i for i, name in enumerate(names) if name in accepted]
        if len(found) != 1:
            what = 'is missing' if not found else f'is named {len(found)} times'
            raise ValueError(f'TerraMind {modality} band {band} {what} in band_names '
                             f'{list(band_names)}; name it once, as one of {list(accepted)}')
        indices.append(found[0])
    return tuple(indices)


def _band_table(modalities: Sequence[str],
                band_names: Union[None, Sequence[str], Dict[str, Sequence[str]]]
                ) -> Dict[str, Optional[Tuple[str, ...]]]:
    """``band_names`` as ``{modality: names or None}`` for every modality."""
    if band_names is None:
        return {m: None for m in modalities}
    if not isinstance(band_names, dict):
        if isinstance(band_names, str) or len(modalities) != 1:
            raise ValueError('TerraMind: band_names must be a list of names (with one '
                             'modality) or a dict {modality: names}; got '
                             f'{band_names!r} for modalities {list(modalities)}')
        band_names = {modalities[0]: band_names}
    unknown = sorted(set(band_names) - set(modalities))
    if unknown:
        raise ValueError(f'TerraMind: band_names for {unknown}, not among the modalities '
                         f'{list(modalities)}')
    return {m: None if band_names.get(m) is None else tuple(band_names[m])
            for m in modalities}


def terramind_input_stats(modalities: Sequence[str],
                          band_names: Union[None, Sequence[str],
                                            Dict[str, Sequence[str]]] = None
                          ) -> Tuple[List[float], List[float]]:
    """``(mean, std)`` for a data preprocessor, one value per input channel of a
    :class:`TerraMind` with these ``modalities`` and ``band_names``: the v1 pre-training
    statistics of each band the encoder uses, ``0`` and ``1`` for input bands it skips."""
    table = _band_table([_check_modality(m) for m in modalities], band_names)
    mean: List[float] = []
    std: List[float] = []
    for modality, names in table.items():
        count = len(TERRAMIND_BANDS[modality]) if names is None else len(names)
        chan_mean, chan_std = [0.0] * count, [1.0] * count
        order = range(count) if names is None else terramind_band_indices(modality, names)
        for k, index in enumerate(order):
            chan_mean[index] = TERRAMIND_V1_MEAN[modality][k]
            chan_std[index] = TERRAMIND_V1_STD[modality][k]
        mean += chan_mean
        std += chan_std
    return mean, std


def terramind_pos_embed(embed_dims: int, side: int) -> torch.Tensor:
    """``(side², D)``: the official fixed position table of a square grid (module
    docstring: the row in the first half, the column in the second), float32.

    Raises:
        ValueError: ``embed_dims`` not divisible by 4.
    """
    if embed_dims % 4:
        raise ValueError(f'TerraMind: embed_dims must be divisible by 4 (2-D sin-cos '
                         f'position embedding), got {embed_dims}')
    quarter = embed_dims // 4
    omega = 1.0 / 10000.0**(torch.arange(quarter, dtype=torch.float32) / quarter)
    angles = torch.outer(torch.arange(side, dtype=torch.float32), omega)  # (side, D/4)
    code = torch.cat([angles.sin(), angles.cos()], dim=1)
    by_row = code[:, None].expand(side, side, -1)
    by_col = code[None].expand(side, side, -1)
    return torch.cat([by_row, by_col], dim=-1).reshape(side * side, embed_dims)


class _PatchEmbedding(nn.Module):
    """A modality's ``ImageEncoderEmbedding``: bias-free patch projection, learned
    modality embedding, fixed position table of the ``img_size`` grid."""

    def __init__(self, channels: int, embed_dims: int, patch_size: int, side: int) -> None:
        super().__init__()
        self.channels, self.patch_size, self.side = channels, patch_size, side
        self.proj = nn.Linear(channels * patch_size**2, embed_dims, bias=False)
        self.mod_emb = nn.Parameter(torch.zeros(1, 1, embed_dims))
        self.register_buffer('pos_emb', terramind_pos_embed(embed_dims, side)[None],
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, channels, height, width = x.shape
        p = self.patch_size
        rows, cols = height // p, width // p
        patches = x.reshape(batch, channels, rows, p, cols, p).permute(0, 2, 4, 3, 5, 1)
        tokens = self.proj(patches.reshape(batch, rows * cols, p * p * channels))
        pos = resample_position_embedding(self.pos_emb, (rows, cols), 0, antialias=False,
                                          old_grid=(self.side, self.side))
        return tokens + (pos + self.mod_emb).to(tokens.dtype)


class _Attention(nn.Module):
    """Bias-free multi-head self-attention (official ``Attention``)."""

    def __init__(self, dims: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dims, 3 * dims, bias=False)
        self.proj = nn.Linear(dims, dims, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dims = x.shape
        qkv = self.qkv(x).reshape(batch, tokens, 3, self.num_heads, dims // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(batch, tokens, dims))


class _SwiGLU(nn.Module):
    """The official ``GatedMlp`` with SiLU and no biases."""

    def __init__(self, dims: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dims, hidden, bias=False)
        self.fc2 = nn.Linear(hidden, dims, bias=False)
        self.fc3 = nn.Linear(dims, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.silu(self.fc1(x)) * self.fc3(x))


class _Block(nn.Module):
    """Pre-norm transformer block of the TerraMind v1 encoder."""

    def __init__(self, dims: int, num_heads: int, mlp_ratio: float, norm_eps: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dims, eps=norm_eps, bias=False)
        self.attn = _Attention(dims, num_heads)
        self.norm2 = nn.LayerNorm(dims, eps=norm_eps, bias=False)
        self.mlp = _SwiGLU(dims, int(2 * int(dims * mlp_ratio) / 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


@MODELS.register_module()
class TerraMind(DenseViTBackbone):
    """TerraMind v1 encoder on raw image modalities, returning the token maps of
    ``out_indices`` as ``B×D×H/p×W/p`` (averaged over the modalities, as the official
    ``merge_method='mean'``).

    Input: one ``B×C×H×W`` tensor, the modalities' channels one after the other in the
    order of ``modalities``; each modality's part has the bands of its ``band_names``
    (from which its own bands are selected by name) or, without them, its bands in the
    official order (:data:`TERRAMIND_BANDS`). Normalise before the backbone with
    :func:`terramind_input_stats` (the v1 pre-training statistics).

    Args:
        arch: ``'tiny'``, ``'small'``, ``'base'``, ``'large'`` (the v1 releases: widths 192,
            384, 768, 1024; 12, 12, 12, 24 blocks; 3, 6, 12, 16 heads; patch 16, MLP
            ratio 4) or a dict with ``embed_dims`` (divisible by 4), ``depth``,
            ``num_heads`` (optional ``patch_size`` 16, ``mlp_ratio`` 4).
        modalities: the raw modalities fed, names of :data:`TERRAMIND_MODALITIES`.
        band_names: the names of the input's bands: a list (one modality) or a dict
            ``{modality: names}``; a modality without names gets its bands in the
            official order. Sentinel-2 bands may be named as in ``SENTINEL2_BANDS``.
        img_size: side of the square input whose position table is stored (224, the
            pre-training size); other input sizes get the table resampled bicubically.
        final_norm: None: the official behaviour, the final LayerNorm on the last block's
            output only (a level when the last block is hooked); True: on every returned
            level; False: never.
        norm_eps: LayerNorm epsilon (1e-6 in the v1 models).
        out_indices, pyramid_source, frozen_stages, with_cp, init_cfg: see
            :class:`~.base.DenseViTBackbone`; ``frozen_stages`` equal to the depth also
            freezes the final norm.

    Raises:
        ValueError: a bad arch, modality, band list or image size.
    """
    arch_zoo: Dict[str, dict] = _ZOO
    arch_family = 'terramind-v1'
    allowed_missing_keys: Tuple[str, ...] = ()
    no_weight_decay_keywords: Tuple[str, ...] = ()

    def __init__(self, arch: Union[str, dict] = 'base', modalities: Sequence[str] = ('S2L2A', ),
                 band_names: Union[None, Sequence[str], Dict[str, Sequence[str]]] = None,
                 img_size: int = 224, out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, norm_eps: float = 1e-6,
                 frozen_stages: int = -1, with_cp: bool = False,
                 init_cfg: Optional[dict] = None, pyramid_source: str = 'blocks') -> None:
        spec = resolve_vit_arch(arch, self.arch_zoo, type(self).__name__)
        super().__init__(spec['depth'], out_indices, final_norm, frozen_stages, with_cp,
                         init_cfg, pyramid_source=pyramid_source)
        self.norm_last_only = final_norm is None and pyramid_source == 'blocks'
        if isinstance(modalities, str) or not modalities:
            raise ValueError(f'TerraMind: modalities must be a non-empty list drawn from '
                             f'{list(TERRAMIND_MODALITIES)}, got {modalities!r}')
        self.modalities = tuple(_check_modality(m) for m in modalities)
        if len(set(self.modalities)) != len(self.modalities):
            raise ValueError(f'TerraMind: a modality is named twice in {list(modalities)}')
        self.band_names = _band_table(self.modalities, band_names)
        self.band_indices = {m: None if names is None else terramind_band_indices(m, names)
                             for m, names in self.band_names.items()}
        self.embed_dims, self.patch_size = int(spec['embed_dims']), int(spec['patch_size'])
        if isinstance(img_size, bool) or not isinstance(img_size, int) \
                or img_size < self.patch_size or img_size % self.patch_size:
            raise ValueError(f'TerraMind: img_size must be an int multiple of the patch size '
                             f'{self.patch_size} (the stored grid is square), got {img_size!r}')
        self.img_size = img_size
        side = img_size // self.patch_size
        self.encoder_embeddings = nn.ModuleDict({
            TERRAMIND_MODALITIES[m]: _PatchEmbedding(len(TERRAMIND_BANDS[m]), self.embed_dims,
                                                     self.patch_size, side)
            for m in self.modalities})
        self.encoder = nn.ModuleList(
            _Block(self.embed_dims, int(spec['num_heads']), float(spec['mlp_ratio']), norm_eps)
            for _ in range(self.depth))
        self.encoder_norm = nn.LayerNorm(self.embed_dims, eps=norm_eps, bias=False)
        self._init_like_official()

    def _init_like_official(self) -> None:
        """The official initialisation: ``qkv`` uniform in ``±sqrt(6 / (D + D))`` (Xavier
        for each of Q, K, V), the other linear layers (the patch projections too)
        Xavier-uniform, modality embeddings N(0, 0.02), LayerNorm weights 1."""
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                if name.endswith('qkv'):
                    out_dims, in_dims = module.weight.shape
                    bound = (6.0 / (out_dims // 3 + in_dims))**0.5
                    nn.init.uniform_(module.weight, -bound, bound)
                else:
                    nn.init.xavier_uniform_(module.weight)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
            elif isinstance(module, _PatchEmbedding):
                nn.init.normal_(module.mod_emb, std=0.02)

    # ------------------------------------------------------------------ properties
    @property
    def embedding_module_names(self) -> Tuple[str, ...]:
        return ('encoder_embeddings', )

    @property
    def block_prefix(self) -> str:
        return 'encoder.'

    @property
    def out_channels(self) -> int:
        """Channels of every returned map."""
        return self.embed_dims

    @property
    def in_channels(self) -> int:
        """Channels of the input tensor: every modality's input bands."""
        return sum(len(TERRAMIND_BANDS[m]) if names is None else len(names)
                   for m, names in self.band_names.items())

    def _frozen_modules(self) -> List[Union[nn.Module, nn.Parameter]]:
        found = super()._frozen_modules()
        if self.frozen_stages >= self.depth:
            found.append(self.encoder_norm)
        return found

    # ------------------------------------------------------------------ forward
    def _split(self, x: torch.Tensor) -> List[torch.Tensor]:
        """The input's per-modality parts, each with its bands in the official order."""
        layout = ', '.join(f'{m}: {len(TERRAMIND_BANDS[m]) if n is None else len(n)}'
                           for m, n in self.band_names.items())
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f'TerraMind: input of shape {tuple(x.shape)}; expected '
                             f'B×{self.in_channels}×H×W (bands per modality, in order: '
                             f'{layout})')
        if x.shape[2] % self.patch_size or x.shape[3] % self.patch_size:
            raise ValueError(f'TerraMind: input size {tuple(x.shape[2:])} must be multiples '
                             f'of the patch size {self.patch_size}')
        parts, start = [], 0
        for modality, names in self.band_names.items():
            count = len(TERRAMIND_BANDS[modality]) if names is None else len(names)
            part = x[:, start:start + count]
            start += count
            indices = self.band_indices[modality]
            parts.append(part if indices is None else part[:, list(indices)])
        return parts

    def forward_levels(self, x: torch.Tensor) -> List[torch.Tensor]:
        batch, rows, cols = x.shape[0], x.shape[2] // self.patch_size, \
            x.shape[3] // self.patch_size
        parts = self._split(x)
        tokens = torch.cat([self.encoder_embeddings[TERRAMIND_MODALITIES[m]](part)
                            for m, part in zip(self.modalities, parts)], dim=1)
        count = len(self.modalities)

        def to_map(index: int, out: torch.Tensor) -> torch.Tensor:
            normed = self.final_norm or (self.norm_last_only and index == self.depth - 1)
            out = self.encoder_norm(out) if normed else out
            out = out.reshape(batch, count, rows * cols, self.embed_dims).mean(dim=1)
            return out.transpose(1, 2).reshape(batch, self.embed_dims, rows, cols)

        return self.run_blocks(tokens, to_map)

    # ------------------------------------------------------------------ checkpoints
    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """Official ``TerraMind`` keys → this model's: the keys of
        :data:`DROPPED_OFFICIAL_KEYS` and the LayerNorm bias buffers dropped, the rest kept
        under its name (the encoder embeddings of unbuilt modalities are dropped by
        :meth:`adapt_state_dict`; anything else is left for
        :func:`~.base.check_state_dict` to refuse by name).

        Raises:
            ValueError: no ``encoder.*`` block key (not a TerraMind file), or a LayerNorm
                bias that is not zero (another architecture).
        """
        if not any(key.startswith('encoder.') for key in state_dict):
            raise ValueError("TerraMind: not a TerraMind checkpoint (no 'encoder.<i>.*' "
                             f'block keys); got keys {sorted(state_dict)[:8]}')
        converted = {}
        for key, value in state_dict.items():
            if any(fnmatch.fnmatchcase(key, p) for p in DROPPED_OFFICIAL_KEYS):
                continue
            if any(fnmatch.fnmatchcase(key, p) for p in _ZERO_BIAS_KEYS):
                if torch.count_nonzero(value):
                    raise ValueError(f'TerraMind: {key} is not zero; the v1 encoder has '
                                     'bias-free LayerNorms, so this is another model')
                continue
            converted[key] = value
        return converted

    def adapt_state_dict(self, state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Drop the encoder embeddings of the official modalities this model does not
        build (:data:`OFFICIAL_MODALITY_KEYS`)."""
        built = set(self.encoder_embeddings.keys())
        unused = tuple(f'encoder_embeddings.{k}.' for k in OFFICIAL_MODALITY_KEYS
                       if k not in built)
        return {k: v for k, v in state_dict.items() if not k.startswith(unused)}
