"""DOFA (Dynamic One-For-All, Xiong et al. 2024) as a dense backbone: a ViT whose patch
embedding is generated, for every input band, from the band's central wavelength.

The computation follows the official code (``zhu-xlab/DOFA``: ``models_dwv.py`` /
``dofa_v1.py`` with ``wave_dynamic_layer.py`` of the current weights; the same as
torchgeo's ``torchgeo/models/dofa.py``):

1. each band's wavelength λ (µm) becomes the 1-D sin-cos embedding of ``λ·1000`` (nm),
   128 channels ``[sin(p·ω), cos(p·ω)]``, ``ω_k = 10000^(-k/64)``, then a residual MLP
   ``e + relu(w2(relu(w1(e))))`` (``fclayer``);
2. a one-layer post-norm transformer (``nn.TransformerEncoderLayer``: 128 wide, 4 heads,
   feed-forward 2048, exact GELU, LayerNorm eps 1e-5) runs over 128 learned weight tokens,
   the ``C`` wavelength embeddings and one bias token, as one unbatched sequence;
3. ``fc_weight`` of (its output at the wavelength positions + those embeddings) gives
   each band a ``p·p·D`` vector, laid out ``(C, p, p, D)`` and permuted to the
   convolution weight ``(D, C, p, p)``; ``fc_bias`` of the bias-token output gives the
   ``D`` biases; both are scaled by 0.01;
4. the patch convolution has stride ``p`` and **padding 1** (as the official code: each
   patch window starts one pixel up and left of the patch, and the last pixel row and
   column of a ``p``-multiple input are not seen); then ``+ pos_embed``, the class token
   (``cls_token + pos_embed[0]``) and timm ``Block``\\ s (LayerNorm eps 1e-6, qkv bias).

The first public weights were used with a reshape ``(D, C, p, p)`` of the generated
vector; the repository and torchgeo replaced it by the ``(C, p, p, D)`` layout above
together with the weights now published, which this module implements.

Official checkpoint layout (a flat state dict, ``DOFA_ViT_base_e100.pth`` and
``DOFA_ViT_large_e100.pth``; torchgeo's ``dofa_{base,large}_patch16_224-*.pth`` name the
same keys): ``cls_token``, ``pos_embed`` ``(1, 1 + 14², D)``, ``patch_embed.fclayer.{w1,
w2}.*``, ``patch_embed.weight_generator.{weight_tokens, bias_token, fc_weight.*,
fc_bias.*, transformer_encoder.layers.0.*}``, ``blocks.{i}.*``; the pre-training files add
``norm.*``, ``mask_token`` and the distillation ``projector.*``; fine-tuned files
``fc_norm.*`` and ``head.*``. The model's keys are the official names.

Wavelengths come from the config (:func:`resolve_wavelengths`): a list in µm, or
``'from_band_names'`` with ``band_names`` looked up in :data:`DOFA_BAND_WAVELENGTHS` when
the model is built (the backbone's forward does not see the samples' metainfo).
"""
from __future__ import annotations

import math
from functools import partial
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from timm.models.vision_transformer import Block
from torch import nn

from ...registry import MODELS
from .base import DenseViTBackbone, resample_position_embedding, sincos_pos_embed_2d
from .satmae import resolve_vit_arch

__all__ = ['DOFA', 'DynamicPatchEmbed', 'WavelengthWeightGenerator', 'WavelengthResidualMLP',
           'DOFA_BAND_WAVELENGTHS', 'DOFA_RGB_WAVELENGTHS', 'resolve_wavelengths',
           'wavelength_sincos_embedding']

#: Width of the wavelength embedding and of the weight generator (fixed in the official
#: code), its attention heads, and the number of weight tokens.
HYPER_DIMS, HYPER_HEADS, WEIGHT_TOKENS = 128, 4, 128
#: The factor applied to the generated convolution weights and biases.
GENERATED_SCALE = 0.01

_SENTINEL2_NM = {
    'B01': 443, 'B02': 490, 'B03': 560, 'B04': 665, 'B05': 705, 'B06': 740, 'B07': 783,
    'B08': 842, 'B8A': 865, 'B09': 945, 'B10': 1375, 'B11': 1610, 'B12': 2190,
}
#: Central wavelength (µm) by band name, matched without regard to case and surrounding
#: spaces. Sentinel-2 MSI: the central wavelengths of ESA's Sentinel-2 User Handbook (the
#: values DOFA's own examples use). Colour names (``R``/``RED``, ``G``/``GREEN``,
#: ``B``/``BLUE``, ``NIR``): the matching Sentinel-2 band's (B04, B03, B02, B08), as DOFA's
#: RGB example does. Sentinel-1 polarisations: 5.405, DOFA's value for C-band SAR (the
#: centre frequency in GHz, taken as the model's wavelength input).
DOFA_BAND_WAVELENGTHS: Dict[str, float] = {
    **{name: nm / 1000.0 for name, nm in _SENTINEL2_NM.items()},
    'R': 0.665, 'RED': 0.665, 'G': 0.56, 'GREEN': 0.56, 'B': 0.49, 'BLUE': 0.49,
    'NIR': 0.842, 'VV': 5.405, 'VH': 5.405, 'HH': 5.405, 'HV': 5.405,
}
#: Red, green, blue: the wavelengths of DOFA's RGB example, the default.
DOFA_RGB_WAVELENGTHS: Tuple[float, ...] = (0.665, 0.56, 0.49)

_DOFA_ZOO: Dict[str, dict] = {
    'b': dict(patch_size=16, embed_dims=768, depth=12, num_heads=12, mlp_ratio=4.0),
    'l': dict(patch_size=16, embed_dims=1024, depth=24, num_heads=16, mlp_ratio=4.0),
}


def resolve_wavelengths(wavelengths: Union[None, str, Sequence[float]],
                        band_names: Optional[Sequence[str]] = None) -> Tuple[float, ...]:
    """The central wavelength (µm) of every input band.

    Args:
        wavelengths: None (:data:`DOFA_RGB_WAVELENGTHS`), a list of positive numbers in
            µm (one per band, in input order), or ``'from_band_names'``.
        band_names: with ``'from_band_names'``, the input bands' names in input order
            (e.g. those given to ``LoadMultiBandImageFromFile``), looked up in
            :data:`DOFA_BAND_WAVELENGTHS`; must be None otherwise.

    Raises:
        ValueError: an unknown band name (the message lists the known ones), a missing or
            superfluous ``band_names``, or a wavelength that is not a positive number.
    """
    if isinstance(wavelengths, str):
        if wavelengths != 'from_band_names':
            raise ValueError(f"wavelengths must be a list in µm, None or 'from_band_names', "
                             f'got {wavelengths!r}')
        if isinstance(band_names, str) or not band_names:
            raise ValueError("wavelengths='from_band_names' needs band_names: the input "
                             f'bands\' names in input order, got {band_names!r}')
        unknown = [n for n in band_names
                   if not isinstance(n, str) or n.strip().upper() not in DOFA_BAND_WAVELENGTHS]
        if unknown:
            raise ValueError(f'no DOFA wavelength for band names {unknown}; known: '
                             f'{sorted(DOFA_BAND_WAVELENGTHS)} (or give wavelengths=[...] '
                             'in µm)')
        return tuple(DOFA_BAND_WAVELENGTHS[n.strip().upper()] for n in band_names)
    if band_names is not None:
        raise ValueError("band_names is used only with wavelengths='from_band_names'; "
                         f'got band_names={band_names!r} with wavelengths={wavelengths!r}')
    if wavelengths is None:
        return DOFA_RGB_WAVELENGTHS
    if not isinstance(wavelengths, (list, tuple)) or not wavelengths or not all(
            isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w)
            and w > 0 for w in wavelengths):
        raise ValueError('wavelengths must be a non-empty list of central wavelengths in µm '
                         f"(positive numbers), None or 'from_band_names'; got {wavelengths!r}")
    return tuple(float(w) for w in wavelengths)


def wavelength_sincos_embedding(wavelengths_um: torch.Tensor, dims: int) -> torch.Tensor:
    """``(C, dims)``: ``[sin(p·ω), cos(p·ω)]`` of ``p = λ·1000`` (nm), ``ω_k =
    10000^(-k/(dims/2))``, computed in float32 as the official code does."""
    half = dims // 2
    omega = torch.arange(half, dtype=torch.float32, device=wavelengths_um.device) / half
    omega = 1.0 / 10000**omega
    angles = (wavelengths_um.float() * 1000).reshape(-1, 1) * omega[None]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


class WavelengthResidualMLP(nn.Module):
    """``x + relu(w2(relu(w1(x))))`` on the wavelength embeddings (official ``fclayer``)."""

    def __init__(self, dims: int = HYPER_DIMS) -> None:
        super().__init__()
        self.w1 = nn.Linear(dims, dims)
        self.w2 = nn.Linear(dims, dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.relu(self.w2(F.relu(self.w1(x))))


class WavelengthWeightGenerator(nn.Module):
    """The hypernetwork: a one-layer post-norm transformer over ``[weight tokens;
    wavelength embeddings; bias token]``, then ``fc_weight`` per band and ``fc_bias`` of
    the bias token (official ``TransformerWeightGenerator``).

    Args:
        dims: width of the wavelength embeddings (128).
        weight_dims: ``p·p·D``, one band's share of the convolution weight.
        embed_dims: ``D``, the number of biases.
    """

    def __init__(self, dims: int, weight_dims: int, embed_dims: int) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=dims, nhead=HYPER_HEADS, activation='gelu',
                                           norm_first=False, batch_first=False, dropout=0.0)
        self.transformer_encoder = nn.TransformerEncoder(layer, num_layers=1,
                                                         enable_nested_tensor=False)
        self.fc_weight = nn.Linear(dims, weight_dims)
        self.fc_bias = nn.Linear(dims, embed_dims)
        self.weight_tokens = nn.Parameter(torch.empty(WEIGHT_TOKENS, dims))
        self.bias_token = nn.Parameter(torch.empty(1, dims))

    def forward(self, waves: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(C, dims)`` embeddings → ``(C, weight_dims)`` weights, ``(embed_dims,)`` bias
        (both unscaled)."""
        tokens = torch.cat([self.weight_tokens, waves, self.bias_token], dim=0)
        out = self.transformer_encoder(tokens)
        weights = self.fc_weight(out[WEIGHT_TOKENS:-1] + waves)
        return weights, self.fc_bias(out[-1])


class DynamicPatchEmbed(nn.Module):
    """Wavelength-conditioned patch embedding (official ``Dynamic_MLP_OFA``).

    Args:
        patch_size: ``p``: kernel and stride of the patch convolution (padding 1).
        embed_dims: ``D``.
    """

    def __init__(self, patch_size: int, embed_dims: int) -> None:
        super().__init__()
        self.patch_size, self.embed_dims = patch_size, embed_dims
        self.weight_generator = WavelengthWeightGenerator(
            HYPER_DIMS, patch_size * patch_size * embed_dims, embed_dims)
        self.fclayer = WavelengthResidualMLP(HYPER_DIMS)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The official initialisation: every ``nn.Linear`` (the transformer's included)
        xavier-uniform with biases 0.01, the weight and bias tokens normal with std 0.02."""
        for module in (self.weight_generator, self.fclayer):
            for sub in module.modules():
                if isinstance(sub, nn.Linear):
                    nn.init.xavier_uniform_(sub.weight)
                    nn.init.constant_(sub.bias, 0.01)
        nn.init.normal_(self.weight_generator.weight_tokens, std=0.02)
        nn.init.normal_(self.weight_generator.bias_token, std=0.02)

    def generate(self, wavelengths_um: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The convolution weight ``(D, C, p, p)`` and bias ``(D,)`` for bands of these
        wavelengths (µm)."""
        waves = self.fclayer(wavelength_sincos_embedding(wavelengths_um, HYPER_DIMS))
        weights, bias = self.weight_generator(waves)
        p = self.patch_size
        weight = weights.reshape(-1, p, p, self.embed_dims).permute(3, 0, 1, 2)
        return weight * GENERATED_SCALE, bias * GENERATED_SCALE

    def forward(self, x: torch.Tensor, wavelengths_um: torch.Tensor) -> torch.Tensor:
        """``B×C×H×W`` → the ``B×D×h×w`` patch map (``h = ⌊(H + 2 - p)/p⌋ + 1``)."""
        if x.shape[1] != wavelengths_um.numel():
            raise ValueError(f'DOFA was given {wavelengths_um.numel()} wavelengths but the '
                             f'input has {x.shape[1]} bands; set wavelengths (or band_names) '
                             'to one entry per input band')
        weight, bias = self.generate(wavelengths_um)
        return F.conv2d(x, weight.to(x.dtype), bias.to(x.dtype), stride=self.patch_size,
                        padding=1)


def _conv_grid(size: Union[int, Tuple[int, int]], patch_size: int) -> Tuple[int, int]:
    rows, cols = (size, size) if isinstance(size, int) else size
    return ((int(rows) + 2 - patch_size) // patch_size + 1,
            (int(cols) + 2 - patch_size) // patch_size + 1)


@MODELS.register_module()
class DOFA(DenseViTBackbone):
    """DOFA encoder returning the token maps of ``out_indices`` as ``B×D×h×w``.

    Args:
        arch: ``'b'`` (ViT-B/16, ``DOFA_ViT_base_e100.pth``) or ``'l'`` (ViT-L/16,
            ``DOFA_ViT_large_e100.pth``), or a dict with ``embed_dims``, ``depth``,
            ``num_heads`` (optional ``patch_size``, ``mlp_ratio``).
        img_size: the input size the position embedding is laid out for (a checkpoint's
            14×14 grid is resampled to it at load; other input grids per forward).
        wavelengths: the input bands' central wavelengths in µm, in input order; None:
            red, green, blue (:data:`DOFA_RGB_WAVELENGTHS`); ``'from_band_names'``: looked
            up from ``band_names`` (:func:`resolve_wavelengths`).
        band_names: the input bands' names, with ``wavelengths='from_band_names'``.
        out_indices, final_norm, frozen_stages, with_cp, init_cfg, pyramid_source: see
            :class:`~.base.DenseViTBackbone` (``final_norm`` None: False, or True with
            ``pyramid_source='last_block'``).
        drop_path_rate: stochastic depth, linearly increasing over the blocks.

    Position embedding: the checkpoint's (a fixed 2-D sin-cos of the 14×14 grid in the
    official files) is resampled bicubically without antialias, class row apart, when
    the grid differs; without a checkpoint it is that sin-cos of the model's grid with a
    zero class row. Files without ``norm.*`` (torchgeo's, fine-tuned ones without
    ``fc_norm``) load unless ``final_norm`` needs it.
    """
    arch_zoo: Dict[str, dict] = _DOFA_ZOO
    arch_family = 'dofa'
    #: official keys outside the encoder: MAE mask token, distillation projector, head.
    dropped_prefixes: Tuple[str, ...] = ('mask_token', 'projector.', 'head.')

    def __init__(self, arch: Union[str, dict] = 'b', img_size: Union[int, Tuple[int, int]] = 224,
                 wavelengths: Union[None, str, Sequence[float]] = None,
                 band_names: Optional[Sequence[str]] = None,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = None, drop_path_rate: float = 0.0,
                 frozen_stages: int = -1, with_cp: bool = False,
                 init_cfg: Optional[dict] = None, pyramid_source: str = 'blocks') -> None:
        spec = resolve_vit_arch(arch, self.arch_zoo, type(self).__name__)
        super().__init__(spec['depth'], out_indices, final_norm, frozen_stages, with_cp,
                         init_cfg, pyramid_source=pyramid_source)
        if spec['embed_dims'] % 4:
            raise ValueError(f"DOFA: embed_dims must be divisible by 4 (2-D sin-cos position "
                             f"embedding), got {spec['embed_dims']}")
        self.wavelengths = resolve_wavelengths(wavelengths, band_names)
        self.in_channels = len(self.wavelengths)
        self.patch_size, self.embed_dims = int(spec['patch_size']), int(spec['embed_dims'])
        self.grid_size = _conv_grid(img_size, self.patch_size)
        self.allowed_missing_keys = () if self.final_norm else ('norm.weight', 'norm.bias')
        dims = self.embed_dims
        self.patch_embed = DynamicPatchEmbed(self.patch_size, dims)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dims))
        self.pos_embed = nn.Parameter(
            torch.zeros(1, 1 + self.grid_size[0] * self.grid_size[1], dims),
            requires_grad=False)  # fixed, as in the official model
        rates = torch.linspace(0, drop_path_rate, self.depth, device='cpu').tolist()
        self.blocks = nn.ModuleList([
            Block(dims, spec['num_heads'], spec['mlp_ratio'], qkv_bias=True,
                  drop_path=rate, norm_layer=partial(nn.LayerNorm, eps=1e-6))
            for rate in rates])
        self.norm = nn.LayerNorm(dims, eps=1e-6)
        self._init_trunk()

    def _init_trunk(self) -> None:
        """MAE's initialisation of the trunk: sin-cos position embedding with a zero class
        row, class token normal (std 0.02), linear layers xavier-uniform with zero bias."""
        with torch.no_grad():
            grid = sincos_pos_embed_2d(self.embed_dims, self.grid_size, dtype=torch.float64,
                                       device=self.pos_embed.device)
            self.pos_embed.copy_(torch.cat([grid.new_zeros(1, self.embed_dims), grid])[None])
        nn.init.normal_(self.cls_token, std=0.02)
        for module in self.blocks.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    @property
    def embedding_module_names(self) -> Tuple[str, ...]:
        return ('patch_embed', 'cls_token', 'pos_embed')

    def _position_embedding(self, grid: Tuple[int, int]) -> torch.Tensor:
        if grid == self.grid_size:
            return self.pos_embed
        return resample_position_embedding(self.pos_embed, grid, 1, antialias=False,
                                           old_grid=self.grid_size)

    def forward_levels(self, x: torch.Tensor) -> List[torch.Tensor]:
        # a tensor per forward, as the official code makes it (no buffer that a model
        # built on the meta device would leave uninitialised)
        wavelengths = torch.tensor(self.wavelengths, dtype=torch.float32, device=x.device)
        patches = self.patch_embed(x, wavelengths)
        batch, dims, rows, cols = patches.shape
        pos = self._position_embedding((rows, cols))
        tokens = patches.flatten(2).transpose(1, 2) + pos[:, 1:]
        cls = (self.cls_token + pos[:, :1]).expand(batch, -1, -1)
        tokens = torch.cat([cls, tokens], dim=1)

        def to_map(index: int, out: torch.Tensor) -> torch.Tensor:
            out = self.norm(out) if self.final_norm else out
            return out[:, 1:].transpose(1, 2).reshape(batch, dims, rows, cols)

        return self.run_blocks(tokens, to_map)
        return levels

    def adapt_state_dict(self, state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Resample ``pos_embed`` to this model's grid (bicubic, no antialias, class row
        apart) when its grid differs."""
        pos = state_dict.get('pos_embed')
        if pos is not None and pos.shape[-1] == self.embed_dims \
                and pos.shape[-2] != self.pos_embed.shape[-2]:
            state_dict = dict(state_dict)
            state_dict['pos_embed'] = resample_position_embedding(pos, self.grid_size, 1,
                                                                  antialias=False)
        return state_dict

    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """Official DOFA keys → this model's (the same names): ``mask_token``,
        ``projector.*`` and ``head.*`` dropped; ``fc_norm.*`` of fine-tuned files becomes
        ``norm.*`` when the file has no ``norm.*``.

        Raises:
            ValueError: a DOFA v2 file (its trunk under ``model.*``, patch 14).
        """
        if any(k.startswith('model.blocks.') for k in state_dict):
            raise ValueError('DOFA: this is a DOFA v2 checkpoint (trunk under model.*, '
                             'patch size 14, layer scale); only the DOFA v1 ViT-B/16 and '
                             'ViT-L/16 layout (DOFA_ViT_{base,large}_e100.pth) is supported')
        has_norm = any(k.startswith('norm.') for k in state_dict)
        converted = {}
        for key, value in state_dict.items():
            if key.startswith(cls.dropped_prefixes):
                continue
            if key.startswith('fc_norm.'):
                if has_norm:
                    continue
                key = 'norm.' + key[len('fc_norm.'):]
            converted[key] = value
        return converted
