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

Plain ViTs have a single stride; they are :class:`~.imagenet_vit.ImageNetViT`'s, which
reads timm's ``VisionTransformer`` files and hooks four evenly spaced blocks.
"""
from __future__ import annotations

import os.path as osp
from typing import Any, Dict, List, Optional, Set, Tuple

import timm
import torch
from mmengine.logging import MMLogger
from mmengine.model import BaseModule
from torch import nn

from ...registry import MODELS
from .base import check_state_dict, load_checkpoint_file, unwrap_state_dict

__all__ = ['TimmFeatureEncoder', 'PYRAMID_STRIDES', 'read_timm_state_dict',
           'pyramid_feature_indices', 'timm_feature_key_map']

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
    extractor = _create(model_name, in_channels, dict(model_args or {}), features_only=True,
                        meta=True)
    # every level timm describes (feature_info.reduction() lists only the selected ones)
    reductions = [level['reduction'] for level in extractor.feature_info.info]
    found = {stride: max((i for i, r in enumerate(reductions) if r == stride), default=None)
             for stride in PYRAMID_STRIDES}
    absent = [stride for stride, index in found.items() if index is None]
    if absent:
        raise ValueError(
            f'timm model {model_name!r} has no feature level at stride(s) {absent} (its '
            f'levels are at strides {reductions}); TimmFeatureEncoder needs levels at '
            f'{list(PYRAMID_STRIDES)}. A plain ViT (one stride) is ImageNetViT\'s, which '
            'reads timm\'s VisionTransformer files and hooks four evenly spaced blocks')
    return tuple(found[stride] for stride in PYRAMID_STRIDES)


def timm_feature_key_map(model_name: str, extractor_keys: Set[str], in_channels: int = 3,
                         model_args: Optional[Dict[str, Any]] = None
                         ) -> Tuple[Dict[str, str], Set[str], Optional[str]]:
    """How timm's classifier state dict maps onto its feature extractor.

    Builds the classifier on the meta device and matches each of its keys to a key of
    ``extractor_keys``: the same name, or the name with its first ``.`` as ``_`` (the
    flattened sequentials of timm's ``FeatureListNet``).

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
        for candidate in (key, key.replace('.', '_', 1)):
            if candidate in extractor_keys:
                mapping[key] = candidate
                break
    unused = set(classifier.state_dict()) - set(mapping)
    first_conv = getattr(classifier, 'pretrained_cfg', {}).get('first_conv')
    first_conv_key = f'{first_conv}.weight' if isinstance(first_conv, str) else None
    return mapping, unused, first_conv_key


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
    """A timm image encoder returning its feature maps at strides 4, 8, 16 and 32.

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
        init_cfg: ``dict(type='Pretrained', checkpoint=PATH)`` loads timm's weight file
            for ``model_name`` through :meth:`load_pretrained` (converted and checked);
            without it the encoder keeps timm's random initialisation.

    Attributes:
        trunk (nn.Module): timm's feature extractor.
        out_indices (tuple): the indices of timm's feature levels that are returned.
        channels (tuple): the channels of the four levels, fine to coarse.
        strides (tuple): :data:`PYRAMID_STRIDES`.

    Raises:
        ValueError: an unknown model or tag, a bad ``in_channels`` or ``frozen``, a
            ``model_args`` that is not a dict or sets the encoder's own arguments, or a
            model without levels at strides 4 to 32.
    """

    #: fnmatch patterns of model keys a weight file may lack (batch norm counters, which
    #: torch's own loading fills in too)
    allowed_missing_keys: Tuple[str, ...] = ('*.num_batches_tracked', )

    def __init__(self, model_name: str, in_channels: int = 3, frozen: bool = False,
                 model_args: Optional[Dict[str, Any]] = None,
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
        self.out_indices = pyramid_feature_indices(model_name, in_channels, model_args)
        self.trunk = _create(model_name, in_channels, model_args, features_only=True,
                             out_indices=self.out_indices)
        self.channels = tuple(self.trunk.feature_info.channels())
        self.strides = tuple(self.trunk.feature_info.reduction())
        fmt = getattr(self.trunk, 'output_fmt', 'NCHW')
        self._channels_last = getattr(fmt, 'value', fmt) == 'NHWC'  # Swin's stages
        self._freeze()

    # ---- forward and freezing
    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        """The four ``B×C×H/s×W/s`` maps, ``s`` = 4, 8, 16, 32.

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
            self.trunk.eval()
            for param in self.trunk.parameters():
                param.requires_grad_(False)

    def train(self, mode: bool = True) -> 'TimmFeatureEncoder':
        """Set the training mode; a frozen encoder stays in evaluation mode."""
        super().train(mode)
        self._freeze()
        return self

    # ---- weights
    def init_weights(self) -> None:
        """Load ``init_cfg``'s checkpoint through :meth:`load_pretrained`; otherwise
        MMEngine's initialisation (timm's own, from construction, is kept)."""
        if isinstance(self.init_cfg, dict) and self.init_cfg.get('type') == 'Pretrained':
            unknown = set(self.init_cfg) - {'type', 'checkpoint'}
            if unknown:
                raise ValueError(f'init_cfg Pretrained takes only checkpoint=PATH here, '
                                 f'got also {sorted(unknown)}')
            self.load_pretrained(self.init_cfg['checkpoint'])
            self._is_init = True
            return
        super().init_weights()

    def convert_official_state_dict(self, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """timm's classifier keys → this encoder's (``trunk.`` + the extractor's name);
        the classifier's keys after the last level dropped; any other key kept as it
        is (so that the check names it); the first convolution adapted to
        ``in_channels`` when the file has 3 bands."""
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
