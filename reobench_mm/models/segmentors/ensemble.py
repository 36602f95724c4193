"""Deep ensembles of semantic segmentors: :class:`SegmentationEnsemble`.

A deep ensemble (Lakshminarayanan, Pritzel and Blundell, NeurIPS 2017) evaluates ``k``
independently trained models as one model whose predictive distribution is the mean of
the members' distributions. Per pixel ``x`` and class ``c``::

    p(c | x) = 1/k · Σ_m softmax(z_m(x))_c

where ``z_m`` are the logits that member ``m``, run alone as an MMSegmentation segmentor,
puts in its ``SegDataSample.seg_logits`` (padding removed, flipped back, resized to the
original image with the member's own ``align_corners``: mmseg's ``postprocess_result``).
The ensemble's ``seg_logits`` are ``log p`` (so ``softmax(seg_logits) = p`` and every
metric that reads ``seg_logits``, the calibration metrics and the temperature fit
included, works on the ensemble unchanged) and ``pred_sem_seg`` is ``argmax_c p``.

Members with one output channel (mmseg's binary heads, ``out_channels=1``) put the
sigmoid probability itself in ``seg_logits``; the ensemble then averages those
probabilities and thresholds the mean with the members' (equal) ``threshold``, as a single
binary segmentor does.

Checkpoints: the ensemble's weights are the members' under ``members.<i>.`` (a
:class:`torch.nn.ModuleList`), so one combined checkpoint
(``tools/model_converters/make_ensemble.py``, :func:`ensemble_checkpoint`) loads with the
package's strict loader like any other model.

Detectors cannot be members: a detector outputs a different set of boxes per model, each
with its own per-proposal score, with no pixel-wise (or box-wise) correspondence between
members, so averaging softmax probabilities is not defined for them.
"""
from __future__ import annotations

import copy
import inspect
import math
from collections import OrderedDict
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from mmengine.structures import PixelData
from mmseg.models.segmentors import BaseSegmentor
from torch import Tensor, nn

from ...registry import MODELS

__all__ = [
    'ENSEMBLE_TYPE', 'MEMBERS_PREFIX', 'SegmentationEnsemble', 'ensemble_model_cfg',
    'ensemble_state_dict', 'ensemble_checkpoint'
]

#: The registered type name of the ensemble model.
ENSEMBLE_TYPE = 'SegmentationEnsemble'
#: Member ``i``'s weights are stored under ``f'{MEMBERS_PREFIX}.{i}.'``.
MEMBERS_PREFIX = 'members'

_DETECTION_REFUSED = (
    'averaging softmax probabilities is defined for per-pixel class distributions, not for '
    "detectors: each detector outputs its own set of boxes with per-proposal scores, and "
    "the boxes of two detectors do not correspond, so there is nothing to average (an "
    'ensemble of detectors needs box fusion, which this package does not provide). '
    'Evaluate each detector on its own')


def _to_plain(value: Any, keep_tuples: bool = True) -> Any:
    """A copy of ``value`` with every mapping (``ConfigDict``) a dict; tuples become lists
    unless ``keep_tuples`` (for comparing configs written either way)."""
    if isinstance(value, Mapping):
        return {key: _to_plain(item, keep_tuples) for key, item in value.items()}
    if isinstance(value, tuple) and keep_tuples:
        return tuple(_to_plain(item, keep_tuples) for item in value)
    if isinstance(value, (list, tuple)):
        return [_to_plain(item, keep_tuples) for item in value]
    return copy.deepcopy(value)


def _type_name(cfg: Mapping) -> str:
    kind = cfg.get('type')
    return kind.__name__ if inspect.isclass(kind) else str(kind)


def _detector_classes() -> Tuple[type, ...]:
    """The detectors' base classes (mmdet's ``BaseDetector``, which MMRotate's detectors
    subclass too), when MMDetection is installed."""
    try:
        from mmdet.models.detectors import BaseDetector
    except ImportError:  # pragma: no cover - MMDetection is a dependency of the package
        return ()
    return (BaseDetector, )


def _check_member_cfgs(members: Any) -> List[Mapping]:
    """The member configs, refusing anything but a sequence of ``k >= 2`` model configs."""
    if isinstance(members, (str, Mapping)) or not isinstance(members, Sequence):
        raise TypeError(f'{ENSEMBLE_TYPE}: members must be a list of k >= 2 segmentor configs '
                        f'(dicts with a "type"), got {type(members).__name__}')
    if len(members) < 2:
        raise ValueError(f'{ENSEMBLE_TYPE} needs k >= 2 members, got {len(members)}: an '
                         'ensemble of one model is that model; evaluate its own config')
    for index, member in enumerate(members):
        if not isinstance(member, Mapping) or 'type' not in member:
            raise TypeError(f'{ENSEMBLE_TYPE}: member {index} must be a segmentor config '
                            f'(a dict with a "type", e.g. type="EncoderDecoder"), got '
                            f'{member!r:.200}')
    return list(members)


def _shared_preprocessor(members: Sequence[Mapping],
                         data_preprocessor: Optional[Mapping]) -> Optional[Mapping]:
    """The one data preprocessor config of the ensemble: equal for every member (and
    equal to ``data_preprocessor`` when both give one)."""
    own = [_to_plain(member.get('data_preprocessor'), keep_tuples=False) for member in members]
    for index, cfg in enumerate(own[1:], start=1):
        if cfg != own[0]:
            raise ValueError(
                f'{ENSEMBLE_TYPE}: the members must share one data preprocessor (one input '
                f'batch feeds them all), but member 0 has data_preprocessor={own[0]} and '
                f'member {index} has data_preprocessor={cfg}. Give them the same '
                'normalisation, padding and colour order')
    if data_preprocessor is None:
        return members[0].get('data_preprocessor')
    given = _to_plain(data_preprocessor, keep_tuples=False)
    if own[0] is not None and given != own[0]:
        raise ValueError(
            f'{ENSEMBLE_TYPE}: data_preprocessor={given} differs from the members\' '
            f'data_preprocessor={own[0]}; leave it out (the members\' is used) or make them '
            'equal')
    return data_preprocessor


def _refuse_detector_cfgs(members: Sequence[Mapping]) -> None:
    """Refuse members whose registered type is a detector, before building anything."""
    detectors = _detector_classes()
    for index, member in enumerate(members):
        kind = member['type']
        cls = kind if inspect.isclass(kind) else MODELS.get(kind) if isinstance(kind, str) \
            else None
        if inspect.isclass(cls) and detectors and issubclass(cls, detectors):
            raise ValueError(f'{ENSEMBLE_TYPE}: member {index} is the detector '
                             f'{_type_name(member)}; {_DETECTION_REFUSED}')


@MODELS.register_module()
class SegmentationEnsemble(BaseSegmentor):
    """``k`` semantic segmentors evaluated as one deep ensemble (mean of their softmax
    probabilities).

    ``test_step``/``predict`` return ``SegDataSample`` s exactly as an mmseg segmentor does:
    every member runs its own ``predict`` (its ``inference``, whole or sliding-window as
    its ``test_cfg`` says, and mmseg's ``postprocess_result``), then per pixel

    - ``seg_logits`` = ``log(1/k Σ_m softmax(seg_logits_m))`` (float32, computed as a
      log-sum-exp of log-softmaxes, so it stays finite), ``softmax(seg_logits)`` being the
      mean probability;
    - ``pred_sem_seg`` = its arg-max over the classes;

    for binary members (one output channel) ``seg_logits`` is the mean of the members'
    sigmoid probabilities and ``pred_sem_seg`` that mean above the members' threshold.

    The members are complete segmentors (``model.members[i]`` can be evaluated alone) and
    must agree on ``num_classes``, ``out_channels`` (and ``threshold`` for binary heads)
    and on the data preprocessor, which the ensemble uses for the shared input batch.

    The ensemble does not train (``loss`` raises: train each member with its own config)
    and has no single feature map (``extract_feat`` raises: analyse ``members[i]``).

    Args:
        members: ``k >= 2`` segmentor configs (e.g. the ``model`` of each member's config;
            differently initialised or trained models of one architecture, or different
            architectures with the same classes).
        data_preprocessor: the shared data preprocessor; default: the members' (which
            must be equal). Given, it must equal the members'.
        init_cfg: MMEngine init config of the ensemble (the members keep their own).

    Attributes:
        members (nn.ModuleList): the member segmentors; their weights are the ensemble's
            ``members.<i>.<key>``.
        num_classes (int): the members' number of classes.
        out_channels (int): the members' output channels (``num_classes``, or 1 for a
            binary sigmoid head).
        threshold (float or None): the binary members' threshold (None otherwise).

    Raises:
        TypeError: ``members`` is not a list of model configs.
        ValueError: fewer than 2 members; a member is a detector (see the module's
            docstring) or not a semantic segmentor; members disagree on the classes, the
            binary threshold or the data preprocessor.
    """

    def __init__(self, members: Sequence[Mapping], data_preprocessor: Optional[Mapping] = None,
                 init_cfg: Optional[Mapping] = None) -> None:
        member_cfgs = _check_member_cfgs(members)
        preprocessor = _shared_preprocessor(member_cfgs, data_preprocessor)
        _refuse_detector_cfgs(member_cfgs)
        super().__init__(data_preprocessor=preprocessor, init_cfg=init_cfg)
        self.members = nn.ModuleList(
            [MODELS.build(copy.deepcopy(cfg)) for cfg in member_cfgs])
        self.num_classes, self.out_channels, self.threshold = self._check_members()

    def _check_members(self) -> Tuple[int, int, Optional[float]]:
        """``(num_classes, out_channels, threshold)`` shared by every built member."""
        detectors = _detector_classes()
        heads = []
        for index, member in enumerate(self.members):
            name = type(member).__name__
            if detectors and isinstance(member, detectors):
                raise ValueError(f'{ENSEMBLE_TYPE}: member {index} is the detector {name}; '
                                 f'{_DETECTION_REFUSED}')
            if not isinstance(member, BaseSegmentor):
                raise ValueError(f'{ENSEMBLE_TYPE}: member {index} ({name}) is not a semantic '
                                 'segmentor (an mmseg BaseSegmentor such as EncoderDecoder)')
            num_classes = getattr(member, 'num_classes', None)
            out_channels = getattr(member, 'out_channels', None)
            if num_classes is None or out_channels is None:
                raise ValueError(f'{ENSEMBLE_TYPE}: member {index} ({name}) has no '
                                 'num_classes/out_channels; expected a segmentor with a decode '
                                 'head (EncoderDecoder, CascadeEncoderDecoder)')
            threshold = None
            if out_channels == 1:
                threshold = getattr(getattr(member, 'decode_head', None), 'threshold', None)
            heads.append((int(num_classes), int(out_channels), threshold))
        for index, head in enumerate(heads[1:], start=1):
            if head[:2] != heads[0][:2]:
                raise ValueError(
                    f'{ENSEMBLE_TYPE}: the members must predict the same classes, but member '
                    f'0 has num_classes={heads[0][0]}, out_channels={heads[0][1]} and member '
                    f'{index} has num_classes={head[0]}, out_channels={head[1]}')
            if head[2] != heads[0][2]:
                raise ValueError(
                    f'{ENSEMBLE_TYPE}: binary members must share one threshold, but member 0 '
                    f'has threshold={heads[0][2]} and member {index} has threshold={head[2]}')
        return heads[0]

    @property
    def binary(self) -> bool:
        """Whether the members have one (sigmoid) output channel."""
        return self.out_channels == 1

    # ------------------------------------------------------------------ prediction
    def predict(self, inputs: Tensor, data_samples: Optional[List[Any]] = None) -> List[Any]:
        """Predict with every member (its own ``predict``) and average their probabilities.

        Args:
            inputs: the preprocessed batch ``(N, C, H, W)``.
            data_samples: the batch's ``SegDataSample`` s (their metainfo: ``ori_shape``,
                ``padding_size``, ``flip``, ...); None as for mmseg's segmentors.

        Returns:
            The ``SegDataSample`` s with ``seg_logits`` (``C x H x W`` at the original
            size, float32; see the class docstring) and ``pred_sem_seg`` (``1 x H x W``).
        """
        outputs: Optional[List[Any]] = None
        totals: List[Optional[Tensor]] = []
        for member in self.members:
            samples = member.predict(inputs, data_samples)
            if outputs is None:
                outputs, totals = samples, [None] * len(samples)
            for index, sample in enumerate(samples):
                totals[index] = self._accumulate(totals[index], sample.seg_logits.data)
        for sample, total in zip(outputs, totals):
            seg_logits, prediction = self._combine(total)
            sample.set_data({'seg_logits': PixelData(data=seg_logits),
                             'pred_sem_seg': PixelData(data=prediction)})
        return outputs

    def _accumulate(self, total: Optional[Tensor], member_output: Tensor) -> Tensor:
        """Add one member's ``C x H x W`` output: log-softmax terms combined by
        ``logaddexp`` (multi-class), or summed sigmoid probabilities (binary)."""
        value = member_output.float()
        if self.binary:  # mmseg's postprocess_result stores the sigmoid probability
            return value if total is None else total + value
        term = torch.log_softmax(value, dim=0)
        return term if total is None else torch.logaddexp(total, term)

    def _combine(self, total: Tensor) -> Tuple[Tensor, Tensor]:
        """``(seg_logits, pred_sem_seg)`` of one sample from :meth:`_accumulate`'s total."""
        k = len(self.members)
        if self.binary:
            mean = total / k
            return mean, (mean > self.threshold).to(mean)
        log_mean = total - math.log(k)
        return log_mean, log_mean.argmax(dim=0, keepdim=True)

    def encode_decode(self, inputs: Tensor, batch_img_metas: List[dict]) -> Tensor:
        """The ensemble's logits at the input resolution, ``N x C x H x W``, from the
        members' ``encode_decode``: ``log`` of the mean softmax probability; for binary
        members the logit of the mean sigmoid probability (``sigmoid`` of it is that
        mean). Computed in log space (finite for finite member logits)."""
        values = torch.stack([member.encode_decode(inputs, batch_img_metas).float()
                              for member in self.members])
        log_k = math.log(len(self.members))
        if self.binary:
            log_p = torch.logsumexp(nn.functional.logsigmoid(values), dim=0) - log_k
            log_q = torch.logsumexp(nn.functional.logsigmoid(-values), dim=0) - log_k
            return log_p - log_q
        return torch.logsumexp(torch.log_softmax(values, dim=2), dim=0) - log_k

    def _forward(self, inputs: Tensor, data_samples: Optional[List[Any]] = None
                 ) -> Tuple[Any, ...]:
        """``mode='tensor'``: the members' raw network outputs, one per member (their
        decode heads' outputs need not share a resolution, so they are not averaged)."""
        return tuple(member._forward(inputs, data_samples) for member in self.members)

    # ------------------------------------------------------------------ what it does not do
    def loss(self, inputs: Tensor, data_samples: List[Any]) -> Dict[str, Tensor]:
        """Not supported: a deep ensemble's members are trained independently."""
        raise NotImplementedError(
            f'{ENSEMBLE_TYPE} is for evaluation only: train each member with its own config '
            '(e.g. different seeds), then combine the checkpoints with '
            'tools/model_converters/make_ensemble.py')

    def extract_feat(self, inputs: Tensor) -> List[Tensor]:
        """Not supported: every member has its own features."""
        raise NotImplementedError(
            f'{ENSEMBLE_TYPE} has no single feature map (each of its {len(self.members)} '
            'members has its own); analyse one member, model.members[i], built from '
            'members[i] of the config')


# ----------------------------------------------------------------------------- checkpoints

def ensemble_model_cfg(member_model_cfgs: Sequence[Mapping],
                       data_preprocessor: Optional[Mapping] = None) -> Dict[str, Any]:
    """The model config of the ensemble of ``member_model_cfgs`` (each member config's
    ``model``), as plain dicts: ``dict(type='SegmentationEnsemble', members=[...])``.

    Raises:
        TypeError, ValueError: as :class:`SegmentationEnsemble` for the member list.
    """
    members = [_to_plain(cfg) for cfg in _check_member_cfgs(member_model_cfgs)]
    cfg: Dict[str, Any] = dict(type=ENSEMBLE_TYPE, members=members)
    if data_preprocessor is not None:
        cfg['data_preprocessor'] = _to_plain(data_preprocessor)
    return cfg


def ensemble_state_dict(member_state_dicts: Sequence[Mapping[str, Any]]
                        ) -> 'OrderedDict[str, Any]':
    """The ensemble's state dict: member ``i``'s key ``k`` becomes ``members.<i>.<k>``.

    Args:
        member_state_dicts: ``k >= 2`` state dicts, keyed as the member models name their
            weights (a ``DataParallel`` prefix ``module.`` already removed).

    Raises:
        TypeError: a state dict is not a mapping.
        ValueError: fewer than 2 state dicts, or one without a tensor.
    """
    if isinstance(member_state_dicts, Mapping) or len(member_state_dicts) < 2:
        count = 1 if isinstance(member_state_dicts, Mapping) else len(member_state_dicts)
        raise ValueError(f'an ensemble needs k >= 2 member state dicts, got {count}')
    combined: 'OrderedDict[str, Any]' = OrderedDict()
    for index, state_dict in enumerate(member_state_dicts):
        if not isinstance(state_dict, Mapping):
            raise TypeError(f'member {index}: a state dict must be a mapping of parameter '
                            f'names to tensors, got {type(state_dict).__name__}')
        if not any(isinstance(value, Tensor) for value in state_dict.values()):
            raise ValueError(f'member {index}: the state dict holds no tensor')
        for key, value in state_dict.items():
            combined[f'{MEMBERS_PREFIX}.{index}.{key}'] = value
    return combined


def _classes(meta: Optional[Mapping]) -> Optional[List[str]]:
    dataset_meta = (meta or {}).get('dataset_meta') if isinstance(meta, Mapping) else None
    if not isinstance(dataset_meta, Mapping) or dataset_meta.get('classes') is None:
        return None
    return [str(name) for name in dataset_meta['classes']]


def ensemble_checkpoint(member_state_dicts: Sequence[Mapping[str, Any]],
                        member_metas: Optional[Sequence[Optional[Mapping]]] = None,
                        sources: Optional[Sequence[Mapping[str, Any]]] = None
                        ) -> Dict[str, Any]:
    """One checkpoint of the ensemble from its members' weights.

    Args:
        member_state_dicts: the members' state dicts (see :func:`ensemble_state_dict`).
        member_metas: the members' checkpoint ``meta`` dicts (or None each). Where they
            record the training data's classes (MMEngine's ``meta['dataset_meta']``), the
            class names and their order must be the same for every member.
        sources: what to record of each member (JSON-able dicts, e.g. config and
            checkpoint paths and the checkpoint's SHA-256).

    Returns:
        ``{'state_dict': ..., 'meta': {'ensemble': {...}, 'dataset_meta': ...}}`` (the
        ``dataset_meta`` of the first member that has one, when any has).

    Raises:
        ValueError: fewer than 2 members, lengths that disagree, or members trained on
            different classes (named).
    """
    state_dict = ensemble_state_dict(member_state_dicts)
    k = len(member_state_dicts)
    metas = list(member_metas) if member_metas is not None else [None] * k
    if len(metas) != k or (sources is not None and len(sources) != k):
        raise ValueError(f'{k} member state dicts but {len(metas)} metas and '
                         f'{None if sources is None else len(sources)} sources')
    recorded = [(index, _classes(meta)) for index, meta in enumerate(metas)]
    recorded = [(index, classes) for index, classes in recorded if classes is not None]
    for index, classes in recorded[1:]:
        if classes != recorded[0][1]:
            raise ValueError(f'the members were trained on different classes: member '
                             f'{recorded[0][0]} on {recorded[0][1]}, member {index} on '
                             f'{classes}; an ensemble averages probabilities of the same '
                             'classes in the same order')
    meta: Dict[str, Any] = {'ensemble': {
        'type': ENSEMBLE_TYPE, 'num_members': k,
        'members': [_to_plain(source) for source in sources] if sources is not None else []}}
    if recorded:
        meta['dataset_meta'] = _to_plain(metas[recorded[0][0]]['dataset_meta'])
    return {'state_dict': state_dict, 'meta': meta}
