"""timm's hierarchical image encoders (ResNet, Swin, ConvNeXt, MobileNetV3, ...) as dense
backbones: :class:`TimmFeatureEncoder`, with the converter of timm's weight files beside
it.

timm is the definition of the architecture: the trunk is
``timm.create_model(model_name, features_only=True, out_indices=...)``, read at the four
feature levels whose reduction (stride) is 4, 8, 16 and 32, listed fine to coarse as
MMSegmentation's FPN takes them. Nothing of the architecture is written here.

Official checkpoint layout: timm's own state dict of the classifier model, the file the
model's ``pretrained_cfg`` names on the Hugging Face hub (``model.safetensors`` of
``timm/<name>.<tag>``), or the same dict saved with ``torch.save(timm.create_model(name,
pretrained=True).state_dict(), path)``. timm's feature extractors keep the classifier's
modules under slightly other names (``FeatureListNet`` flattens the top-level sequentials:
``stages.0.*`` becomes ``stages_0.*``) and leave out what follows the last level (the
classifier, ConvNeXt's head norm, Swin's final norm, MobileNetV3's ``conv_head``). The
converter reads both key sets from timm itself, building the classifier and the feature
extractor on the meta device, and maps the file onto the extractor: what only the
classifier has is dropped, every other key must be the extractor's
(:func:`~.base.check_state_dict`). With ``in_channels`` other than the file's, the first
convolution is adapted as timm adapts it when it loads weights for another ``in_chans``
(``timm.models.adapt_input_conv``: summed for 1 channel, else repeated and scaled by
3 / ``in_channels``).

Single-stride trunks (ViTs, whose timm feature levels are their blocks, all at the patch
size): given ``out_indices``, four blocks (e.g. ``(5, 11, 17, 23)`` of 24, the last of each
quarter, as the package's other ViT probes), the trunk is timm's ``FeatureGetterNet``
around the model (its keys ``model.*``; the blocks after the last hooked one and the final
norm pruned), which returns ``forward_intermediates(indices=out_indices,
output_fmt='NCHW', intermediates_only=True)``: the token maps of those blocks, prefix
tokens (class, registers) dropped, without the final norm, all four at stride = patch
size, as the FPN of the ViT probes takes them. This is how timm's DINOv3 ViTs (``Eva``
with RoPE and register tokens) are probed. Without ``out_indices`` a single-stride model
is refused: a plain timm ``VisionTransformer`` is :class:`~.imagenet_vit.ImageNetViT`'s.

Files in the architecture's original layout (not timm's, e.g. Meta's DINOv3 ``.pth``
files) are first converted by timm's own ``checkpoint_filter_fn`` of the architecture's
module, the function timm applies when it loads such a file, then mapped as above. timm's
DINOv3 ViTs exist with (``*_qkvb``) and without attention biases; the original files have
a query/key/value bias whose key third the official code masks to zero. timm's converter
drops the whole bias for a model without biases; such a file is refused here unless its
query and value biases are all zero.
"""
from __future__ import annotations

import contextlib
import io
import os.path as osp
import sys
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

import timm
import torch
from mmengine.logging import MMLogger
from mmengine.model import BaseModule
from torch import nn

from ...registry import MODELS
from .base import (check_state_dict, freeze_module, load_checkpoint_file,
                   load_init_checkpoint, resolve_out_indices, unwrap_state_dict)

__all__ = ['TimmFeatureEncoder', 'PYRAMID_STRIDES', 'read_timm_state_dict',
           'pyramid_feature_indices', 'block_feature_indices', 'timm_feature_key_map',
           'convert_original_layout']

#: the reductions of the four levels the encoder returns, fine to coarse
PYRAMID_STRIDES: Tuple[int, ...] = (4, 8, 16, 32)
#: timm.create_model arguments the encoder sets itself
_OWN_ARGUMENTS = ('pretrained', 'features_only', 'out_indices', 'in_chans', 'num_classes',
                  'pretrained_cfg', 'pretrained_cfg_overlay', 'checkpoint_path',
                  'feature_cls', 'feature_cfg')


def _check_model_name(model_name: Any) -> str:
    """``model_name`` if timm knows its architecture (a ``.tag`` must be one of its
    pretrained tags), else a ValueError naming close names."""
    if not isinstance(model_name, str) or not model_name:
        raise ValueError(f'model_name must be a timm model name such as "resnet50" or '
                         f'"convnext_large.dinov3_lvd1689m", got {model_name!r}')
    architecture, _, tag = model_name.partition('.')
    if not timm.is_model(architecture):
        close = timm.list_models(f'*{architecture.split("_")[0]}*')[:12]
        raise ValueError(f'timm {timm.__version__} has no model {architecture!r}; '
                         f'similar names: {close}')
    if tag:
        tags = [name.partition('.')[2] for name in timm.list_pretrained(f'{architecture}.*')]
        if tag not in tags:
            raise ValueError(f'timm {timm.__version__} has no pretrained tag {tag!r} for '
                             f'{architecture}; its tags: {tags}')
    return model_name


def _create(model_name: str, in_channels: int, model_args: Dict[str, Any],
            features_only: bool, out_indices: Optional[Tuple[int, ...]] = None,
            meta: bool = False) -> nn.Module:
    """``timm.create_model`` without pretrained weights (on the meta device: the layout
    only, nothing allocated)."""
    options: Dict[str, Any] = dict(model_args, pretrained=False, in_chans=in_channels)
    if features_only:
        options['features_only'] = True
        if out_indices is not None:
            options['out_indices'] = out_indices
    if meta:
        with torch.device('meta'):
            return timm.create_model(model_name, **options)
    return timm.create_model(model_name, **options)


def pyramid_feature_indices(model_name: str, in_channels: int = 3,
                            model_args: Optional[Dict[str, Any]] = None) -> Tuple[int, ...]:
    """The indices of timm's feature levels (``feature_info``) at the reductions
    :data:`PYRAMID_STRIDES`, fine to coarse (the last level of each reduction).

    Raises:
        ValueError: the model has no level at one of these reductions (a plain ViT, or a
            dilated trunk), naming the reductions it has.
    """
    reductions = _level_reductions(model_name, in_channels, model_args)
    found = {stride: max((i for i, r in enumerate(reductions) if r == stride), default=None)
             for stride in PYRAMID_STRIDES}
    absent = [stride for stride, index in found.items() if index is None]
    if absent:
        raise ValueError(
            f'timm model {model_name!r} has no feature level at stride(s) {absent} (its '
            f'levels are at strides {reductions}); TimmFeatureEncoder needs levels at '
            f'{list(PYRAMID_STRIDES)}, or, for a single-stride trunk, out_indices: four '
            'block indices, e.g. (5, 11, 17, 23) of 24. A plain timm VisionTransformer is '
            'ImageNetViT\'s, which reads its files and hooks four evenly spaced blocks')
    return tuple(found[stride] for stride in PYRAMID_STRIDES)


def _level_reductions(model_name: str, in_channels: int = 3,
                      model_args: Optional[Dict[str, Any]] = None) -> List[int]:
    """The reduction of every feature level timm describes for the model, in order
    (``feature_info.reduction()`` lists only the selected ones)."""
    extractor = _create(model_name, in_channels, dict(model_args or {}), features_only=True,
                        meta=True)
    return [level['reduction'] for level in extractor.feature_info.info]


def block_feature_indices(model_name: str, out_indices: Union[str, Sequence[int]],
                          in_channels: int = 3, model_args: Optional[Dict[str, Any]] = None
                          ) -> Tuple[int, ...]:
    """The four hooked blocks of a single-stride trunk (a ViT: timm's feature levels are
    its blocks): ``out_indices`` checked against the number of blocks, a preset name of
    :data:`~.base.OUT_INDEX_PRESETS` resolved (``'vit24'``: ``(5, 11, 17, 23)``).

    Raises:
        ValueError: the model has levels at several strides (a hierarchical trunk, which
            takes its levels at :data:`PYRAMID_STRIDES` itself), or ``out_indices`` is not
            four increasing block indices.
    """
    reductions = _level_reductions(model_name, in_channels, model_args)
    if len(set(reductions)) != 1:
        raise ValueError(
            f'out_indices is for single-stride trunks (ViTs); timm model {model_name!r} has '
            f'levels at strides {sorted(set(reductions))} and TimmFeatureEncoder takes its '
            f'levels at strides {list(PYRAMID_STRIDES)} itself: leave out_indices unset')
    if isinstance(out_indices, (bool, int, float)) or out_indices is None:
        raise ValueError(f'out_indices must be four block indices or a preset name, got '
                         f'{out_indices!r}')
    try:
        indices = resolve_out_indices(out_indices, len(reductions))
    except TypeError as error:
        raise ValueError(f'out_indices must be four block indices or a preset name, got '
                         f'{out_indices!r}') from error
    if len(indices) != 4:
        raise ValueError(f'out_indices must name four blocks (the FPN\'s four levels), got '
                         f'{indices}')
    return indices


def timm_feature_key_map(model_name: str, extractor_keys: Set[str], in_channels: int = 3,
                         model_args: Optional[Dict[str, Any]] = None
                         ) -> Tuple[Dict[str, str], Set[str], Optional[str]]:
    """How timm's classifier state dict maps onto its feature extractor.

    Builds the classifier on the meta device and matches each of its keys to a key of
    ``extractor_keys``: the same name, the name with its first ``.`` as ``_`` (the
    flattened sequentials of timm's ``FeatureListNet``), or the name under ``model.``
    (timm's ``FeatureGetterNet`` of a ViT, which holds the whole model).

    Returns:
        ``(mapping, unused, first_conv)``: classifier key → extractor key; the
        classifier's keys the extractor does not have (heads and norms after the last
        level); the classifier's key of the first convolution's weight (from its
        ``pretrained_cfg``), or None.
    """
    classifier = _create(model_name, in_channels, dict(model_args or {}),
                         features_only=False, meta=True)
    mapping: Dict[str, str] = {}
    for key in classifier.state_dict():
        for candidate in (key, key.replace('.', '_', 1), f'model.{key}'):
            if candidate in extractor_keys:
                mapping[key] = candidate
                break
    unused = set(classifier.state_dict()) - set(mapping)
    first_conv = getattr(classifier, 'pretrained_cfg', {}).get('first_conv')
    first_conv_key = f'{first_conv}.weight' if isinstance(first_conv, str) else None
    return mapping, unused, first_conv_key


def convert_original_layout(model_name: str, state_dict: Dict[str, torch.Tensor],
                            in_channels: int = 3,
                            model_args: Optional[Dict[str, Any]] = None
                            ) -> Dict[str, torch.Tensor]:
    """A weight file in the architecture's original layout → timm's classifier layout.

    The conversion is timm's own: the ``checkpoint_filter_fn`` of the module that defines
    the architecture, applied to the classifier built on the meta device (what timm runs
    when it loads such a file). A file already in timm's layout (every key one of the
    classifier's), and any file of an architecture without that function, is returned as
    it is, for :func:`~.base.check_state_dict` to judge.

    Raises:
        ValueError: timm's function cannot read the file; or it dropped non-zero
            query/value biases (``*.attn.qkv.bias``) because the model has no attention
            biases (a DINOv3 file for a ViT without ``_qkvb``).
    """
    classifier = _create(model_name, in_channels, dict(model_args or {}),
                         features_only=False, meta=True)
    if set(state_dict) <= set(classifier.state_dict()):
        return state_dict
    architecture = model_name.partition('.')[0]
    module = sys.modules.get(timm.models.model_entrypoint(architecture).__module__)
    filter_fn = getattr(module, 'checkpoint_filter_fn', None)
    if filter_fn is None:
        return state_dict
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # timm prints the biases it skips
            converted = filter_fn(dict(state_dict), classifier)
    except Exception as error:  # whatever timm's function meets in a foreign file
        raise ValueError(f'timm\'s converter of {module.__name__} cannot read this file for '
                         f'{model_name} ({type(error).__name__}: {error}); is it a file of '
                         'this architecture?') from error
    dropped = []
    for key, value in state_dict.items():
        if key.endswith('attn.qkv.bias') and key not in converted \
                and key.replace('qkv.bias', 'q_bias') not in converted:
            query, _, values = value.float().chunk(3)  # the key third is masked to zero
            if query.abs().max() > 0 or values.abs().max() > 0:
                dropped.append(key)
    if dropped:
        with_bias = f'{architecture}_qkvb'
        raise ValueError(
            f'{model_name} has no attention biases, but the file has non-zero query/value '
            f'biases ({len(dropped)} blocks, first: {dropped[:4]}) that timm would drop for '
            'it, changing its output; use the architecture with biases'
            + (f' ({with_bias})' if timm.is_model(with_bias) else ''))
    return converted


def read_timm_state_dict(path: str) -> Dict[str, torch.Tensor]:
    """The tensors of a timm weight file: the hub's ``.safetensors`` file (read with
    safetensors), or a torch file of a state dict (read weights-only; ``state_dict`` /
    ``model`` / ``module`` wrappers and ``module.`` prefixes removed).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a ``.safetensors`` file safetensors cannot read (truncated, or not
            safetensors).
    """
    path = osp.expanduser(path)
    if not path.endswith('.safetensors'):
        return unwrap_state_dict(load_checkpoint_file(path))[0]
    if not osp.isfile(path):
        raise FileNotFoundError(f'no checkpoint file {path}')
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    try:
        return load_file(path, device='cpu')
    except SafetensorError as error:
        raise ValueError(f'cannot read {path} as a safetensors file (truncated, or not '
                         f'safetensors?): {error}') from error


@MODELS.register_module()
class TimmFeatureEncoder(BaseModule):
    """A timm image encoder returning its feature maps at strides 4, 8, 16 and 32, or a
    single-stride one (a ViT) returning the token maps of four of its blocks.

    Args:
        model_name: timm's model name, optionally with its pretrained tag
            (``'resnet50'``, ``'convnext_large.dinov3_lvd1689m'``); the tag selects
            timm's configuration of those weights, never a download.
        in_channels: input bands (timm's ``in_chans``); a 3-band checkpoint's first
            convolution is adapted to it on load, as timm does.
        frozen: no gradients for any parameter and evaluation mode throughout (batch
            norm statistics fixed, no dropout or drop path), also after ``train()``.
        model_args: more keyword arguments of timm's model constructor, e.g.
            ``dict(img_size=512)`` for Swin (timm refuses names the architecture does
            not take); not the ones the encoder sets itself (``pretrained``,
            ``features_only``, ``out_indices``, ``in_chans``, ...).
        out_indices: single-stride trunks (ViTs) only, and required for them: the four
            blocks whose token maps are returned (timm's feature levels of a ViT are its
            blocks), increasing, e.g. ``(5, 11, 17, 23)`` of 24, or a preset name of
            :data:`~.base.OUT_INDEX_PRESETS`; hierarchical trunks pick their levels at
            strides 4 to 32 themselves and refuse it.
        init_cfg: ``dict(type='Pretrained', checkpoint=PATH)`` loads timm's weight file
            for ``model_name`` through :meth:`load_pretrained` (converted and checked);
            without it the encoder keeps timm's random initialisation.

    Attributes:
        trunk (nn.Module): timm's feature extractor.
        out_indices (tuple): the indices of timm's feature levels that are returned (a
            ViT's: block indices).
        channels (tuple): the channels of the four levels, fine to coarse.
        strides (tuple): :data:`PYRAMID_STRIDES`; a ViT's: its patch size four times.

    Raises:
        ValueError: an unknown model or tag, a bad ``in_channels`` or ``frozen``, a
            ``model_args`` that is not a dict or sets the encoder's own arguments, a
            model without levels at strides 4 to 32 and no ``out_indices``, or
            ``out_indices`` for a hierarchical trunk or not four blocks.
    """

    #: fnmatch patterns of model keys a weight file may lack (batch norm counters, which
    #: torch's own loading fills in too)
    allowed_missing_keys: Tuple[str, ...] = ('*.num_batches_tracked', )

    def __init__(self, model_name: str, in_channels: int = 3, frozen: bool = False,
                 model_args: Optional[Dict[str, Any]] = None,
                 out_indices: Union[None, str, Sequence[int]] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self.model_name = _check_model_name(model_name)
        if isinstance(in_channels, bool) or not isinstance(in_channels, int) \
                or in_channels < 1:
            raise ValueError(f'in_channels must be a positive int, got {in_channels!r}')
        if not isinstance(frozen, bool):
            raise ValueError(f'frozen must be True or False, got {frozen!r}')
        if model_args is not None and not isinstance(model_args, dict):
            raise ValueError(f'model_args must be a dict of timm model arguments, got '
                             f'{model_args!r}')
        model_args = dict(model_args or {})
        own = sorted(set(model_args) & set(_OWN_ARGUMENTS))
        if own:
            raise ValueError(f'model_args may not set {own}: TimmFeatureEncoder sets '
                             f'{list(_OWN_ARGUMENTS)} itself (in_chans: in_channels; '
                             "weights: init_cfg=dict(type='Pretrained', checkpoint=PATH))")
        self.in_channels, self.frozen, self.model_args = in_channels, frozen, model_args
        if out_indices is None:
            self.out_indices = pyramid_feature_indices(model_name, in_channels, model_args)
        else:
            self.out_indices = block_feature_indices(model_name, out_indices, in_channels,
                                                     model_args)
        self.trunk = _create(model_name, in_channels, model_args, features_only=True,
                             out_indices=self.out_indices)
        self.channels = tuple(self.trunk.feature_info.channels())
        self.strides = tuple(self.trunk.feature_info.reduction())
        fmt = getattr(self.trunk, 'output_fmt', 'NCHW')
        self._channels_last = getattr(fmt, 'value', fmt) == 'NHWC'  # Swin's stages
        self._freeze()

    # ---- forward and freezing
    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        """The four ``B×C×H/s×W/s`` maps, ``s`` = 4, 8, 16, 32 (a ViT's: ``s`` = its
        patch size for all four).

        Raises:
            ValueError: ``x`` is not ``B×in_channels×H×W``.
        """
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f'{type(self).__name__}({self.model_name}) expects '
                             f'B×{self.in_channels}×H×W inputs, got {tuple(x.shape)}')
        levels = self.trunk(x)
        if self._channels_last:
            levels = [level.permute(0, 3, 1, 2) for level in levels]
        return tuple(levels)

    def _freeze(self) -> None:
        if self.frozen:
            freeze_module(self.trunk)

    def train(self, mode: bool = True) -> 'TimmFeatureEncoder':
        """Set the training mode; a frozen encoder stays in evaluation mode."""
        super().train(mode)
        self._freeze()
        return self

    # ---- weights
    def init_weights(self) -> None:
        """Load ``init_cfg``'s checkpoint through :meth:`load_pretrained`; otherwise
        MMEngine's initialisation (timm's own, from construction, is kept)."""
        if not load_init_checkpoint(self):
            super().init_weights()

    def convert_official_state_dict(self, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """timm's classifier keys → this encoder's (``trunk.`` + the extractor's name);
        the classifier's keys after the last level dropped; any other key kept as it
        is (so that the check names it); the first convolution adapted to
        ``in_channels`` when the file has 3 bands. A file in the architecture's original
        layout is first brought to timm's by :func:`convert_original_layout`."""
        state_dict = convert_original_layout(self.model_name, state_dict, self.in_channels,
                                             self.model_args)
        extractor_keys = set(self.trunk.state_dict())
        mapping, unused, first_conv = timm_feature_key_map(
            self.model_name, extractor_keys, self.in_channels, self.model_args)
        converted: Dict[str, torch.Tensor] = {}
        for key, value in state_dict.items():
            if key in unused:
                continue
            if key == first_conv and value.ndim == 4 and value.shape[1] == 3 \
                    and self.in_channels != 3:
                value = timm.models.adapt_input_conv(self.in_channels, value)
            converted[f'trunk.{mapping[key]}' if key in mapping else key] = value
        return converted

    def load_pretrained(self, path: str) -> List[str]:
        """Load timm's weight file for ``model_name`` (see the module docstring):
        converted, checked against the encoder (every key present unless allowed,
        nothing unexpected, the same shapes), loaded. Returns the allowed missing keys.

        Raises:
            KeyError: missing or unexpected keys (another architecture's file).
            ValueError: shapes differ (another size of the architecture).
        """
        state_dict = self.convert_official_state_dict(read_timm_state_dict(path))
        allowed = check_state_dict(self, state_dict, self.allowed_missing_keys, source=path)
        self.load_state_dict(state_dict, strict=False)  # checked just above
        logger = MMLogger.get_current_instance()
        logger.info(f'{type(self).__name__}({self.model_name}): loaded {len(state_dict)} '
                    f'tensors from {path}'
                    + (f'; not in the file (allowed): {allowed}' if allowed else ''))
        return allowed
