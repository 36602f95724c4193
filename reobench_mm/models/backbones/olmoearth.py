"""OlmoEarth (Allen Institute for AI, 2025) as a dense backbone: :class:`OlmoEarth`, its
checkpoint converter and its Sentinel-2 band groups.

The encoder is the ``Encoder`` of the official ``olmoearth_pretrain/nn/flexi_vit.py``
(github.com/allenai/olmoearth_pretrain) restricted to one modality, Sentinel-2 L2A
(``sentinel2_l2a``), and one time step. Its computation, step by step:

1. The 12 L2A bands are split into the three band sets of the official
   ``Modality.SENTINEL2_L2A`` (:data:`OLMOEARTH_S2_BAND_SETS`: the 10 m, 20 m and 60 m
   bands). Each set has its own patch embedding, a ``Conv2d`` with kernel = stride = the
   trunk's patch size (8, the official ``max_patch_size``; the v1 checkpoints keep the
   convolution, ``use_linear_patch_embed=False``).
2. Flexible patch size (``FlexiPatchEmbed``): a requested patch size ``p`` other than the
   kernel ``k`` resizes the *image* (bicubic, antialiased) to ``H/p·k × W/p·k`` and
   embeds that with the kernel, so the token grid is ``H/p × W/p``.
3. Every token (row ``i``, column ``j``, band set ``s``) gets an additive encoding made of
   four quarters of the width ``D``, each ``n = D/4`` wide (``CompositeEncodings``):
   ``[channel | time | month | space]``:
   - channel: the learned row ``s`` of the modality's channel embedding;
   - time: the 1-D sin-cos of the time-step index (0 for one image);
   - month: row ``month - 1`` of the fixed month table
     ``[sin(2π·m/12)]·n/2 ++ [cos(2π·m/12)]·n/2``, ``m = 0..11``;
   - space: ``[sincos_{n/2}(j·r) ++ sincos_{n/2}(i·r)]`` (column first), with
     ``r = input_res · p / 10`` (the official ``calculate_gsd_ratio``).
   The 1-D sin-cos of the official ``get_1d_sincos_pos_encoding`` is
   ``[sin(x·ω_k), cos(x·ω_k)]`` with ``ω_k = 10000^(-k/(2d))``, ``k < d/2`` for width
   ``d`` (the code divides by ``2d`` where MAE's divides by ``d/2``; this follows the code).
4. The tokens are flattened in ``(row, column, band set)`` order and pass the transformer
   blocks (pre-norm, separate q/k/v projections with bias, GELU MLP, LayerNorm eps 1e-5;
   here timm's ``Block`` with the three projections fused into ``qkv`` by the converter),
   then the final LayerNorm.
5. Dense features: the official segmentation evaluation averages a location's band-set
   tokens (``pool_spatially``, mean over time and band sets); this backbone does the
   same for each hooked block, giving ``B×D×H/p×W/p``.

Missing bands: a band set none of whose bands the input has is left out of the sequence
(the official encoder removes tokens marked missing before attention); a band missing
from a set that has some of its bands is zero after normalisation (as the official
evaluation re-zeroes padded bands). A location's map is the mean over the sets present.

Official checkpoint (``weights.pth`` of ``allenai/OlmoEarth-v1-{Nano,Tiny,Base,Large}`` on
the Hugging Face hub; ``torch.save(model.state_dict())`` of the ``LatentMIM`` model):
``encoder.*``, ``decoder.*``, ``target_encoder.*``. Encoder keys used:
``encoder.patch_embeddings.per_modality_embeddings.sentinel2_l2a.sentinel2_l2a__{s}.proj.
{weight,bias}`` → ``patch_embed.{s}.*``;
``encoder.composite_encodings.per_modality_channel_embeddings.sentinel2_l2a`` →
``channel_embed``; ``encoder.blocks.{i}.attn.{q,k,v}.*`` → ``blocks.{i}.attn.qkv.*``
(concatenated); ``encoder.blocks.{i}.{norm1,attn.proj,norm2,mlp.fc1,mlp.fc2}.*`` and
``encoder.norm.*`` kept. Dropped (:data:`DROPPED_OFFICIAL_KEYS`, and every other modality's
patch and channel embeddings): the decoder, the target encoder, an optional
reconstructor, the contrastive ``project_and_aggregate`` head, the legacy fixed time table
``pos_embed`` and the fixed ``month_embed`` table (recomputed; the converter checks the
file's equals it). Any other key is refused by name.
"""
from __future__ import annotations

import fnmatch
import math
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from timm.models.vision_transformer import Block
from torch import nn

from ...registry import MODELS
from ...transforms.raster_loading import SENTINEL2_BANDS
from .base import DenseViTBackbone
from .satmae import resolve_vit_arch

__all__ = ['OlmoEarth', 'OLMOEARTH_S2_BAND_SETS', 'OLMOEARTH_S2_MEAN', 'OLMOEARTH_S2_STD',
           'DROPPED_OFFICIAL_KEYS', 'olmoearth_sincos_1d', 'olmoearth_month_table',
           'olmoearth_spatial_encoding', 'olmoearth_band_index']

#: The band sets of the official ``Modality.SENTINEL2_L2A``, in token order.
OLMOEARTH_S2_BAND_SETS: Tuple[Tuple[str, ...], ...] = (
    ('B02', 'B03', 'B04', 'B08'),  # 10 m
    ('B05', 'B06', 'B07', 'B8A', 'B11', 'B12'),  # 20 m
    ('B01', 'B09'),  # 60 m
)
#: Per-band mean and standard deviation of the pre-training L2A data (reflectance ×
#: 10000; the official ``norm_configs/computed.json``). The official normalisation maps
#: ``mean ± 2·std`` to ``[0, 1]``: ``(x - (mean - 2·std)) / (4·std)``.
OLMOEARTH_S2_MEAN: Dict[str, float] = {
    'B01': 1115.8494, 'B02': 1188.9413, 'B03': 1407.7739, 'B04': 1513.0574,
    'B05': 1890.9893, 'B06': 2483.7812, 'B07': 2722.7282, 'B08': 2755.4813,
    'B8A': 2885.5703, 'B09': 3269.8126, 'B11': 2562.8526, 'B12': 1914.1383}
OLMOEARTH_S2_STD: Dict[str, float] = {
    'B01': 1955.6992, 'B02': 1859.1924, 'B03': 1727.7387, 'B04': 1740.7757,
    'B05': 1754.7320, 'B06': 1622.1173, 'B07': 1621.8226, 'B08': 1612.2566,
    'B8A': 1611.3588, 'B09': 2651.0884, 'B11': 1441.5472, 'B12': 1328.8914}
_MODALITY = 'sentinel2_l2a'
_PATCH_PREFIX = 'encoder.patch_embeddings.per_modality_embeddings.'
_CHANNEL_PREFIX = 'encoder.composite_encodings.per_modality_channel_embeddings.'
_MONTH_KEY = 'encoder.composite_encodings.month_embed.weight'
#: Official keys the encoder does not use (``fnmatch`` patterns), dropped on conversion;
#: the patch and channel embeddings of modalities other than ``sentinel2_l2a`` are
#: dropped too.
DROPPED_OFFICIAL_KEYS = ('decoder.*', 'target_encoder.*', 'reconstructor.*',
                         'encoder.project_and_aggregate.*',
                         'encoder.composite_encodings.pos_embed', _MONTH_KEY)

_ZOO: Dict[str, dict] = {  # the official MODEL_SIZE_ARGS; patch_size = max_patch_size
    'nano': dict(embed_dims=128, depth=4, num_heads=8, patch_size=8, mlp_ratio=4.0),
    'tiny': dict(embed_dims=192, depth=12, num_heads=3, patch_size=8, mlp_ratio=4.0),
    'base': dict(embed_dims=768, depth=12, num_heads=12, patch_size=8, mlp_ratio=4.0),
    'large': dict(embed_dims=1024, depth=24, num_heads=16, patch_size=8, mlp_ratio=4.0),
}


def olmoearth_sincos_1d(positions: torch.Tensor, dims: int) -> torch.Tensor:
    """``(M, dims)``: the official ``get_1d_sincos_pos_encoding`` of ``M`` positions,
    ``[sin(x·ω_k), cos(x·ω_k)]`` with ``ω_k = 10000^(-k/(2·dims))``, ``k < dims/2``."""
    if dims % 2:
        raise ValueError(f'a 1-D sin-cos encoding needs an even width, got {dims}')
    omega = torch.arange(dims // 2, dtype=torch.float32, device=positions.device)
    omega = 1.0 / 10000**(omega / dims / 2.0)
    angles = positions.reshape(-1, 1).float() * omega
    return torch.cat([angles.sin(), angles.cos()], dim=1)


def olmoearth_month_table(dims: int) -> torch.Tensor:
    """``(12, dims)``: the official fixed month table, row ``m`` (0 = January)
    ``[sin(2π·m/12)] * dims/2 ++ [cos(2π·m/12)] * dims/2``."""
    if dims % 2:
        raise ValueError(f'the month table needs an even width, got {dims}')
    angles = torch.arange(12, dtype=torch.float32) * (2 * math.pi / 12)
    half = dims // 2
    return torch.cat([angles.sin()[:, None].expand(12, half),
                      angles.cos()[:, None].expand(12, half)], dim=1)


def olmoearth_spatial_encoding(rows: int, cols: int, ratio: float, dims: int,
                               device: Optional[torch.device] = None) -> torch.Tensor:
    """``(rows, cols, dims)``: the official spatial quarter of token ``(i, j)``,
    ``[sincos_{dims/2}(j·ratio) ++ sincos_{dims/2}(i·ratio)]`` (column first)."""
    if dims % 4:
        raise ValueError(f'the spatial encoding needs a width divisible by 4, got {dims}')
    col = olmoearth_sincos_1d(torch.arange(cols, device=device) * ratio, dims // 2)
    row = olmoearth_sincos_1d(torch.arange(rows, device=device) * ratio, dims // 2)
    return torch.cat([col[None].expand(rows, cols, -1), row[:, None].expand(rows, cols, -1)],
                     dim=-1)


def olmoearth_band_index(band_names: Sequence[str]) -> List[List[int]]:
    """For each band set of :data:`OLMOEARTH_S2_BAND_SETS`, the position in
    ``band_names`` of each of its bands, -1 for a band the input lacks.

    Raises:
        ValueError: a name not in ``SENTINEL2_BANDS``, a name given twice, or none of the
            twelve L2A bands.
    """
    names = list(band_names)
    unknown = [n for n in names if n not in SENTINEL2_BANDS]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if unknown or doubled or isinstance(band_names, str):
        raise ValueError(f'OlmoEarth: band_names must name Sentinel-2 bands once each, from '
                         f'{list(SENTINEL2_BANDS)}; unknown {unknown}, repeated {doubled}')
    index = [[names.index(b) if b in names else -1 for b in group]
             for group in OLMOEARTH_S2_BAND_SETS]
    if all(i < 0 for group in index for i in group):
        raise ValueError(f'OlmoEarth: band_names {names} holds none of the L2A bands '
                         f'{[b for g in OLMOEARTH_S2_BAND_SETS for b in g]}')
    return index


@MODELS.register_module()
class OlmoEarth(DenseViTBackbone):
    """OlmoEarth encoder on one Sentinel-2 L2A image, returning the token maps of
    ``out_indices`` as ``B×D×H/p×W/p`` (each location's band-set tokens averaged).

    Inputs: ``B×C×H×W`` with the ``C`` bands named by ``band_names``, normalised as the
    pre-training data (:data:`OLMOEARTH_S2_MEAN`, :data:`OLMOEARTH_S2_STD`); ``H`` and
    ``W`` multiples of ``patch_size``.

    Args:
        arch: ``'nano'``, ``'tiny'``, ``'base'`` or ``'large'`` (the official sizes, patch
            kernel 8), or a dict with ``embed_dims`` (divisible by 16), ``depth``,
            ``num_heads`` and optional ``patch_size`` (the kernel; 16 unless given) and
            ``mlp_ratio`` (4).
        img_size: the input size (int or ``(h, w)``) whose fixed encodings (time, month,
            space) are computed once; other sizes get theirs computed per forward. None:
            always per forward.
        band_names: the input's bands in channel order, Sentinel-2 names
            (``SENTINEL2_BANDS``); the twelve L2A bands are picked by name, ``B10`` and
            absent bands as described in the module docstring. Default: red, green, blue
            (``B04, B03, B02``), an RGB image as the data preprocessor gives it.
        patch_size: the token size in input pixels (None: the kernel, 8); another value
            resizes the image as the official flexible patch embedding does.
        month: the calendar month (1-12) of the month encoding, the same for every
            sample. The official evaluation's default timestamp ``[1, 6, 2020]`` holds
            the 0-based month 6, i.e. July (7).
        input_res: metres per input pixel in the spatial encoding (10, the official
            ``BASE_GSD`` that its evaluation passes for every dataset).
        out_indices, pyramid_source, frozen_stages, with_cp, init_cfg: see
            :class:`~.base.DenseViTBackbone`; ``frozen_stages`` equal to the depth also
            freezes the final norm.
        final_norm: apply the final LayerNorm before the band-set mean (None: False, or
            True with ``pyramid_source='last_block'``); the official encoder output is
            the last block's, normalised.
        drop_path_rate: stochastic depth, the same in every block.

    Raises:
        ValueError: a bad arch, band list, patch size, month or resolution.
    """
    arch_zoo: Dict[str, dict] = _ZOO
    arch_family = 'olmoearth'
    allowed_missing_keys: Tuple[str, ...] = ()
    no_weight_decay_keywords: Tuple[str, ...] = ('channel_embed', )

    def __init__(self, arch: Union[str, dict] = 'base',
                 img_size: Union[None, int, Tuple[int, int]] = 224,
                 band_names: Sequence[str] = ('B04', 'B03', 'B02'),
                 patch_size: Optional[int] = None, month: int = 7, input_res: float = 10.0,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, drop_path_rate: float = 0.0,
                 frozen_stages: int = -1, with_cp: bool = False,
                 init_cfg: Optional[dict] = None, pyramid_source: str = 'blocks') -> None:
        spec = resolve_vit_arch(arch, self.arch_zoo, type(self).__name__)
        super().__init__(spec['depth'], out_indices, final_norm, frozen_stages, with_cp,
                         init_cfg, pyramid_source=pyramid_source)
        if spec['embed_dims'] % 16:
            raise ValueError(f"OlmoEarth: embed_dims must be divisible by 16 (four encoding "
                             f"quarters of sin-cos pairs), got {spec['embed_dims']}")
        self.embed_dims, self.kernel_size = spec['embed_dims'], spec['patch_size']
        patch_size = self.kernel_size if patch_size is None else patch_size
        if isinstance(patch_size, bool) or not isinstance(patch_size, int) or patch_size < 1:
            raise ValueError(f'OlmoEarth: patch_size must be a positive int, got {patch_size!r}')
        if isinstance(month, bool) or not isinstance(month, int) or not 1 <= month <= 12:
            raise ValueError(f'OlmoEarth: month must be an int 1-12 (calendar month), '
                             f'got {month!r}')
        if not (isinstance(input_res, (int, float)) and math.isfinite(input_res)
                and input_res > 0):
            raise ValueError(f'OlmoEarth: input_res must be a positive number of metres per '
                             f'pixel, got {input_res!r}')
        self.patch_size, self.month, self.input_res = patch_size, month, float(input_res)
        self.band_names = tuple(band_names)
        band_index = olmoearth_band_index(self.band_names)
        # band sets the input has (by index into OLMOEARTH_S2_BAND_SETS), and per used set
        # the input channel of each band (len(band_names) = the appended zero channel)
        self.used_sets = tuple(s for s, g in enumerate(band_index) if max(g) >= 0)
        gather = [i if i >= 0 else len(self.band_names)
                  for s in self.used_sets for i in band_index[s]]
        self.register_buffer('gather_index', torch.tensor(gather), persistent=False)
        self.patch_embed = nn.ModuleList(
            nn.Conv2d(len(g), self.embed_dims, self.kernel_size, stride=self.kernel_size)
            for g in OLMOEARTH_S2_BAND_SETS)
        self.channel_embed = nn.Parameter(
            torch.zeros(len(OLMOEARTH_S2_BAND_SETS), self.embed_dims // 4))
        self.blocks = nn.ModuleList(
            Block(self.embed_dims, spec['num_heads'], spec['mlp_ratio'], qkv_bias=True,
                  drop_path=drop_path_rate, norm_layer=nn.LayerNorm)
            for _ in range(self.depth))
        self.norm = nn.LayerNorm(self.embed_dims)
        self.img_size = self._check_img_size(img_size)
        fixed = None if self.img_size is None else self.fixed_encoding(
            self.img_size[0] // patch_size, self.img_size[1] // patch_size, None)
        self.register_buffer('fixed_cache', fixed, persistent=False)
        for module in self.blocks.modules():  # the official Xavier-uniform, zero bias
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    @property
    def embedding_module_names(self) -> Tuple[str, ...]:
        return ('patch_embed', 'channel_embed')

    @property
    def out_channels(self) -> int:
        """Channels of every returned map: the trunk width."""
        return self.embed_dims

    def _frozen_modules(self) -> List[Union[nn.Module, nn.Parameter]]:
        found = super()._frozen_modules()
        if self.frozen_stages >= self.depth:
            found.append(self.norm)
        return found

    def _check_img_size(self, img_size: Union[None, int, Tuple[int, int]]
                        ) -> Optional[Tuple[int, int]]:
        if img_size is None:
            return None
        size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        if len(size) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1
                                 or v % self.patch_size for v in size):
            raise ValueError(f'OlmoEarth: img_size must be None, or an int or (h, w) of '
                             f'positive multiples of patch_size {self.patch_size}, '
                             f'got {img_size!r}')
        return (int(size[0]), int(size[1]))

    # ------------------------------------------------------------------ forward
    def fixed_encoding(self, rows: int, cols: int,
                       device: Optional[torch.device]) -> torch.Tensor:
        """``(rows, cols, 3·D/4)``: the fixed quarters ``[time 0 | month | space]`` of a
        ``rows × cols`` token grid (module docstring)."""
        n = self.embed_dims // 4
        time = olmoearth_sincos_1d(torch.zeros(1, device=device), n)[0]
        month = olmoearth_month_table(n)[self.month - 1].to(device)
        ratio = self.input_res * self.patch_size / 10.0
        space = olmoearth_spatial_encoding(rows, cols, ratio, n, device)
        shape = (rows, cols, n)
        return torch.cat([time.expand(shape), month.expand(shape), space], dim=-1)

    def token_encoding(self, rows: int, cols: int, device: torch.device) -> torch.Tensor:
        """``(rows, cols, S, D)``: the additive encoding of every token of the used band
        sets: ``[channel | time 0 | month | space]`` (module docstring)."""
        cache = self.fixed_cache
        if cache is not None and tuple(cache.shape[:2]) == (rows, cols):
            fixed = cache.to(device)
        else:
            fixed = self.fixed_encoding(rows, cols, device)
        n, sets = self.embed_dims // 4, len(self.used_sets)
        channel = self.channel_embed[list(self.used_sets)]
        return torch.cat([channel.expand(rows, cols, sets, n),
                          fixed[:, :, None].expand(rows, cols, sets, 3 * n)], dim=-1)

    def embed(self, x: torch.Tensor) -> Tuple[torch.Tensor, Tuple[int, int]]:
        """``(B, h·w·S, D)`` encoded tokens in ``(row, column, band set)`` order, and
        ``(h, w)``."""
        if x.ndim != 4 or x.shape[1] != len(self.band_names):
            raise ValueError(f'OlmoEarth: input of shape {tuple(x.shape)}; expected '
                             f'B×{len(self.band_names)}×H×W (band_names {self.band_names})')
        height, width = x.shape[-2:]
        if height % self.patch_size or width % self.patch_size:
            raise ValueError(f'OlmoEarth: input size {height}x{width} is not a multiple of '
                             f'patch_size {self.patch_size}')
        x = torch.cat([x, x.new_zeros(x.shape[0], 1, height, width)], dim=1)
        x = x.index_select(1, self.gather_index)
        if self.patch_size != self.kernel_size:
            size = (height // self.patch_size * self.kernel_size,
                    width // self.patch_size * self.kernel_size)
            x = F.interpolate(x, size=size, mode='bicubic', antialias=True)
        tokens, start = [], 0
        for s in self.used_sets:
            count = len(OLMOEARTH_S2_BAND_SETS[s])
            tokens.append(self.patch_embed[s](x[:, start:start + count]))
            start += count
        tokens = torch.stack(tokens, dim=-1)  # B×D×h×w×S
        rows, cols = tokens.shape[2:4]
        tokens = tokens.permute(0, 2, 3, 4, 1)  # B×h×w×S×D
        tokens = tokens + self.token_encoding(rows, cols, tokens.device).to(tokens.dtype)
        return tokens.flatten(1, 3), (rows, cols)

    def forward_levels(self, x: torch.Tensor) -> List[torch.Tensor]:
        tokens, (rows, cols) = self.embed(x)
        batch, sets = tokens.shape[0], len(self.used_sets)

        def to_map(index: int, out: torch.Tensor) -> torch.Tensor:
            out = self.norm(out) if self.final_norm else out
            out = out.reshape(batch, rows, cols, sets, self.embed_dims).mean(dim=3)
            return out.permute(0, 3, 1, 2)

        return self.run_blocks(tokens, to_map)

    # ------------------------------------------------------------------ checkpoints
    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """Official ``LatentMIM`` keys → this model's (module docstring): the keys of
        :data:`DROPPED_OFFICIAL_KEYS` and the other modalities' embeddings dropped, q/k/v
        fused, ``encoder.`` stripped; anything else is kept as it is, for
        :func:`~.base.check_state_dict` to refuse by name.

        Raises:
            ValueError: no ``encoder.*`` key (not an OlmoEarth file), or a month table
                other than the official formula's.
        """
        if not any(key.startswith('encoder.') for key in state_dict):
            raise ValueError('OlmoEarth: not an OlmoEarth checkpoint (the LatentMIM layout '
                             "has 'encoder.*', 'decoder.*' and 'target_encoder.*' keys); got "
                             f'keys {sorted(state_dict)[:8]}')
        month = state_dict.get(_MONTH_KEY)
        if month is not None:
            expected = olmoearth_month_table(month.shape[-1])
            if month.shape != expected.shape or not torch.allclose(month.float(), expected,
                                                                   atol=1e-5):
                raise ValueError(f'OlmoEarth: the file\'s {_MONTH_KEY} differs from the '
                                 'official month table this backbone computes')
        converted: Dict[str, torch.Tensor] = {}
        qkv: Dict[str, Dict[str, torch.Tensor]] = {}
        for key, value in state_dict.items():
            if any(fnmatch.fnmatchcase(key, p) for p in DROPPED_OFFICIAL_KEYS):
                continue
            if key.startswith((_PATCH_PREFIX, _CHANNEL_PREFIX)):
                rest = key.split('.', 3)[3]
                if rest.split('.')[0] != _MODALITY:
                    continue  # another modality's embedding
                if key.startswith(_CHANNEL_PREFIX) and rest == _MODALITY:
                    converted['channel_embed'] = value
                    continue
                parts = rest.split('.')  # sentinel2_l2a, sentinel2_l2a__s, proj, weight
                if (len(parts) == 4 and parts[1].startswith(_MODALITY + '__')
                        and parts[2] == 'proj'):
                    converted[f"patch_embed.{parts[1].rsplit('__', 1)[1]}.{parts[3]}"] = value
                    continue
            name = key[len('encoder.'):] if key.startswith('encoder.') else key
            head, _, leaf = name.rpartition('.')
            if head.startswith('blocks.') and head.endswith(('.attn.q', '.attn.k', '.attn.v')):
                qkv.setdefault(f'{head[:-1]}qkv.{leaf}', {})[head[-1]] = value
                continue
            converted[name] = value
        for name, parts in qkv.items():
            if sorted(parts) != ['k', 'q', 'v']:
                raise ValueError(f'OlmoEarth: {name} needs the q, k and v projections; the '
                                 f'file has only {sorted(parts)}')
            converted[name] = torch.cat([parts['q'], parts['k'], parts['v']], dim=0)
        return converted
