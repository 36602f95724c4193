"""Representation drift: how far a backbone's internal features move under a corruption.

:func:`representation_drift` runs a trained segmentor or detector on the clean and on a
corrupted copy of its test set, side by side, captures the outputs of a few backbone
layers with forward hooks and feeds the clean/corrupted features into the accumulators
of :mod:`reobench_mm.evaluation.functional.representation`. Two representations
(:data:`REPRESENTATIONS`):

- ``'sample'`` (default, the calibration study's definition): each image's tokens are
  mean-pooled into one vector, the ``N`` test images give ``X, Y ∈ R^{N×D}``; linear CKA
  over the images, per-image cosine, a split-half noise floor, participation ratios;
- ``'token'``: spatial tokens paired by position, minibatch linear CKA over the tokens
  of a few images, per-token cosine averaged per image.

The hooked layers and their tokens are :mod:`~reobench_mm.robustness.drift_layers`; the
plot is :func:`~reobench_mm.analysis.plotting.plot_representation_drift`. With a
segmentor the model's predictions are kept too, for the drift–confidence coupling of
:mod:`~reobench_mm.robustness.drift_confidence`.
"""
from __future__ import annotations

import copy
import json
import os
import os.path as osp
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import nn

from ..analysis.drift_plots import plot_drift_confidence
from ..analysis.plotting import plot_representation_drift
from ..analysis.report import make_provenance
from reobench_corruptions.condition import Condition
from ..evaluation.functional.drift_accumulators import (DriftAccumulator,
                                                       SampleDriftAccumulator)
from ..evaluation.functional.representation import MIN_SPLIT_HALF_SAMPLES, PR_CONVENTIONS
from ..fileio import dump_json_atomic, file_sha256
from .drift_confidence import (DRIFT_CONFIDENCE_DEFINITIONS, DriftConfidenceRecorder,
                               drift_confidence_support, segmentor_ignore_index,
                               token_grid_shape)
from .drift_layers import (LAYER_KINDS, DriftLayer, layer_tokens, pool_tokens,
                           sample_token_positions, select_drift_layers)
from ..utils.config import insert_corruption, read_config

__all__ = ['representation_drift', 'default_drift_work_dir', 'select_drift_layers',
           'DriftLayer', 'layer_tokens', 'pool_tokens', 'sample_token_positions',
           'RESULT_FORMAT', 'RESULT_FILE', 'PLOT_FILE', 'COUPLING_PLOT_FILE', 'REPRESENTATIONS',
           'LAYER_KINDS']

#: /3 added ``drift_confidence`` (per condition and in the settings) to /2.
RESULT_FORMAT = 'reobench_mm.representation_drift/3'
RESULT_FILE = 'representation_drift.json'
PLOT_FILE = 'representation_drift.png'
COUPLING_PLOT_FILE = 'drift_confidence.png'
#: What a row of the compared representation is: one image (its tokens mean-pooled; the
#: default) or one spatial token.
REPRESENTATIONS = ('sample', 'token')
#: Token-level defaults (``tokens_per_image``, ``images_per_minibatch``).
TOKEN_DEFAULTS = dict(tokens_per_image=256, images_per_minibatch=8)


# ----------------------------------------------------------------------------- running
class _Capture:
    """Forward hooks that keep the latest output of each layer."""

    def __init__(self, layers: Sequence[DriftLayer]) -> None:
        self.layers = list(layers)
        self.outputs: Dict[str, Any] = {}
        self.handles = []

    def __enter__(self) -> '_Capture':
        for layer in self.layers:
            self.handles.append(layer.module.register_forward_hook(self._hook(layer.name)))
        return self

    def _hook(self, name: str):
        def hook(module, inputs, output):
            self.outputs[name] = output
        return hook

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


def _check_positive(name: str, value: Any, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f'{name} must be a positive integer{" or None" if allow_none else ""}, '
                         f'got {value!r}')


def _build_loader(cfg, condition: Condition):
    from mmengine.runner import Runner
    cfg = copy.deepcopy(cfg)
    insert_corruption(cfg, condition)
    loader_cfg = copy.deepcopy(cfg.test_dataloader)
    loader_cfg.num_workers = 0
    loader_cfg.persistent_workers = False
    loader_cfg.sampler = dict(type='DefaultSampler', shuffle=False)
    return Runner.build_dataloader(loader_cfg, seed=condition.seed)


def _sample_paths(batch: dict) -> List[Optional[str]]:
    samples = batch.get('data_samples') or []
    return [getattr(s, 'metainfo', {}).get('img_path') for s in samples]


def _forward_tokens(model: nn.Module, data: dict, capture: _Capture,
                    layers: Sequence[DriftLayer]) -> Dict[str, torch.Tensor]:
    capture.outputs.clear()
    if hasattr(model, 'extract_feat'):
        model.extract_feat(data['inputs'])
    else:
        model.backbone(data['inputs'])
    missing = [layer.name for layer in layers if layer.name not in capture.outputs]
    if missing:
        raise ValueError(f'layers {missing} did not run in the forward pass (e.g. ViT '
                         'blocks after the last of `out_indices`); choose others with `layers`')
    return {layer.name: layer_tokens(capture.outputs[layer.name], layer) for layer in layers}


def _run_condition(model: nn.Module, cfg, layers: Sequence[DriftLayer], condition: Condition,
                   representation: str, pr_convention: str, max_images: Optional[int],
                   tokens_per_image: Optional[int],
                   images_per_minibatch: Optional[int],
                   recorder: Optional[DriftConfidenceRecorder] = None) -> Dict[str, Any]:
    """Stream one condition: clean and corrupted loaders in lockstep, clean recomputed;
    ``recorder`` also gets the predictions and the final layer's pooled features."""
    clean_loader = _build_loader(cfg, condition.clean())
    corrupted_loader = _build_loader(cfg, condition)
    if representation == 'sample':
        accumulators = {layer.name: SampleDriftAccumulator(pr_convention, condition.seed)
                        for layer in layers}
    else:
        accumulators = {layer.name: DriftAccumulator(images_per_minibatch, pr_convention,
                                                     condition.seed) for layer in layers}
    token_counts: Dict[str, int] = {}
    image_index = 0
    with _Capture(layers) as capture:
        for clean_batch, corrupted_batch in zip(clean_loader, corrupted_loader):
            clean_paths, corrupted_paths = _sample_paths(clean_batch), _sample_paths(
                corrupted_batch)
            if clean_paths != corrupted_paths:
                raise RuntimeError(f'clean and corrupted loaders are out of step: '
                                   f'{clean_paths} vs {corrupted_paths}')
            clean_data = model.data_preprocessor(clean_batch, False)
            corrupted_data = model.data_preprocessor(corrupted_batch, False)
            clean = _forward_tokens(model, clean_data, capture, layers)
            corrupted = _forward_tokens(model, corrupted_data, capture, layers)
            batch_size = next(iter(clean.values())).shape[0]
            keep = (batch_size if max_images is None
                    else min(batch_size, max_images - image_index))
            if recorder is not None:  # the final layer's grid, then predict
                last = layers[-1]
                grid = token_grid_shape(capture.outputs[last.name], last.kind == 'vit_block',
                                        corrupted[last.name].shape[1],
                                        corrupted_data['inputs'].shape[-2:])
                recorder.update(model, clean_data, corrupted_data,
                                pool_tokens(clean[last.name][:keep]),
                                pool_tokens(corrupted[last.name][:keep]), grid, keep)
            for layer in layers:
                a, b = clean[layer.name], corrupted[layer.name]
                if a.shape != b.shape:
                    raise RuntimeError(f'layer {layer.name!r}: clean features {tuple(a.shape)} '
                                       f'and corrupted features {tuple(b.shape)} differ in '
                                       'shape (the corruption changed the image size?)')
                token_counts[layer.name] = a.shape[1]
                if representation == 'sample':
                    accumulators[layer.name].update(pool_tokens(a[:keep]), pool_tokens(b[:keep]))
                    continue
                for i in range(keep):
                    positions = sample_token_positions(a.shape[1], tokens_per_image,
                                                       condition.seed, image_index + i)
                    sample_a, sample_b = a[i], b[i]
                    if positions is not None:
                        index = torch.from_numpy(positions)
                        sample_a, sample_b = sample_a[index], sample_b[index]
                    accumulators[layer.name].update(sample_a[None], sample_b[None])
            image_index += keep
            if max_images is not None and image_index >= max_images:
                break
    if image_index == 0:
        raise ValueError('the test dataloader yielded no images')
    if representation == 'sample' and image_index < MIN_SPLIT_HALF_SAMPLES:
        raise ValueError(f"representation='sample' compares images: it needs at least "
                         f'{MIN_SPLIT_HALF_SAMPLES} test images (4 for the unbiased HSIC, two '
                         f'halves of 4 for the split-half floor), got {image_index}; use a '
                         "larger test set or representation='token'")
    blocks = {}
    for layer in layers:
        result = accumulators[layer.name].result()
        if representation == 'token':
            result['tokens_per_image'] = min(tokens_per_image, token_counts[layer.name])
        result['tokens_available'] = token_counts[layer.name]
        blocks[layer.name] = result
    outcome = dict(num_images=image_index, blocks=blocks)
    if recorder is not None:
        outcome['drift_confidence'] = recorder.result()
    return outcome


# ----------------------------------------------------------------------------- API
def default_drift_work_dir(config: str) -> str:
    """``work_dirs/representation_drift/<config file stem>``."""
    return osp.join('work_dirs', 'representation_drift', osp.splitext(osp.basename(config))[0])


def _token_option(name: str, value: Optional[int], representation: str) -> Optional[int]:
    """A token-level option: its default in ``'token'`` mode, refused in ``'sample'``."""
    if representation == 'sample':
        if value is not None:
            raise ValueError(f"{name} applies to representation='token' only (it chooses "
                             "tokens; representation='sample' pools every token of an "
                             f'image), got {name}={value!r}')
        return None
    if value is None:
        return TOKEN_DEFAULTS[name]
    _check_positive(name, value)
    return int(value)


def representation_drift(config: str, checkpoint: str, corruptions: Sequence[str],
                         severities: Sequence[int], seed: int = 0, num_blocks: int = 4,
                         tokens_per_image: Optional[int] = None,
                         max_images: Optional[int] = None,
                         cfg_options: Optional[dict] = None, work_dir: Optional[str] = None,
                         layers: Optional[Sequence[str]] = None,
                         images_per_minibatch: Optional[int] = None,
                         representation: str = 'sample', pr_convention: str = 'raw',
                         protocol: str = 'reobench',
                         drift_confidence: Optional[bool] = None) -> Dict[str, Any]:
    """Compare a backbone's features on clean and corrupted test images.

    For every ``corruption × severity`` of ``protocol`` the clean and the corrupted test
    dataloaders (same images, index order, ``num_workers=0``) are iterated in lockstep;
    each batch goes through ``model.data_preprocessor`` and ``model.extract_feat`` with
    forward hooks on the selected layers (:func:`select_drift_layers`). Each image's
    layer output becomes ``N`` image tokens (:func:`layer_tokens`; ViT prefix tokens
    dropped, CNN maps flattened).

    ``representation='sample'`` (default; the calibration study's definition): each
    image's tokens are mean-pooled (:func:`pool_tokens`) into one ``D``-vector, so the
    ``N`` test images give a clean ``X ∈ R^{N×D}`` and a corrupted ``Y ∈ R^{N×D}``
    (:class:`~reobench_mm.evaluation.functional.representation.SampleDriftAccumulator`).
    Per layer and condition:

    - ``cka``: linear CKA of ``X`` and ``Y`` with the unbiased HSIC, all ``N`` images in
      one batch;
    - ``cka_floor``: the split-half noise floor, linear CKA between two random halves of
      the clean ``X`` (``split_half_cka``, split seeded by ``seed``): the CKA of two sets
      of unrelated clean images, near 0 with the unbiased HSIC. It depends only on the
      clean images, so every condition reports the same value;
    - ``cosine``: per image, the cosine of its clean and corrupted vectors, averaged over
      images; ``cosine_floor``: its split-half floor, the mean cosine of the paired rows
      of the same two halves as ``cka_floor`` (``split_half_cosine``);
    - ``pr_clean``, ``pr_corrupted``: participation ratios of ``X`` and ``Y`` in
      ``pr_convention``.

    It needs at least 8 images and keeps ``2·N·D`` float64 numbers per layer.

    ``representation='token'``: spatial tokens are compared position by position, as a
    dense-prediction view of drift. ``tokens_per_image`` positions are kept
    (:func:`sample_token_positions`: seeded by ``(seed, image index, N)``, identical for
    the clean and the corrupted image, independent of the batch size); ``cka`` is
    minibatch linear CKA (unbiased HSIC) over the kept tokens of
    ``images_per_minibatch`` consecutive images; ``cka_floor`` the minibatch CKA of
    random halves of each minibatch's clean token rows; ``cosine`` the per-token cosine
    averaged over an image's kept tokens, then over images; the participation ratios
    are over the kept tokens. Memory does not grow with the dataset.

    Participation ratio conventions (``pr_convention``): ``'raw'`` (default; the
    eigenvalues of ``XᵀX``, i.e. the squared singular values of the activation matrix
    as the study describes it) or ``'centred'`` (the eigenvalues of the feature
    covariance). On non-negative (ReLU) features the shared mean direction dominates
    the raw matrix and ``'raw'`` is much lower than ``'centred'``.

    Clean features are recomputed for every condition rather than cached, which doubles
    the forward passes. Images of different sizes batched together are padded by the
    data preprocessor and the padding is part of the tokens; use
    ``test_dataloader.batch_size=1`` for such data.

    Geometric corruptions (rotate, scale, translate) move pixels. At the token level the
    rows are paired by position, so after a rotation the clean and corrupted rows
    describe different places and CKA falls towards 0 even for an equivariant model
    (the 10-iteration demo UperNet: token CKA ≈ 0.01 under ``rotate``). Pooling over
    the image removes most of that: the mean of a map is unchanged by moving its
    content, up to the borders, so per-sample CKA under geometric corruptions measures
    the change of content rather than of place.

    Drift–confidence coupling (segmentors; :mod:`~reobench_mm.robustness.drift_confidence`):
    each batch also goes through ``model.predict``, clean and corrupted; per image the L2
    drift of its pooled representation at the last compared layer, the mean max-softmax
    confidence and the accuracy over its valid pixels on that layer's token grid give,
    per condition, Spearman ρ of drift with confidence and with accuracy and the
    overconfident-drift fraction (``drift_confidence``). It costs one more forward pass
    of the clean and of the corrupted batch.

    Args:
        config: config file. checkpoint: trained weights (loaded strictly).
        corruptions: corruption names of ``protocol`` (``'clean'`` gives the
            clean-vs-clean reference: CKA 1, cosine 1).
        severities: severities 0..5. ``'clean'`` or severity 0 is one condition
            named ``'clean'`` (severity 0), evaluated once.
        seed: seed of the corruption draws, of the token positions and of the split-half
            floor's split.
        num_blocks: evenly spaced backbone blocks/stages to compare.
        tokens_per_image: (``'token'`` only; default 256) tokens kept per image and
            layer (all when fewer).
        max_images: compare only the first ``max_images`` test images (at least 8 with
            ``'sample'``).
        cfg_options: config overrides (``merge_from_dict``).
        work_dir: output folder for ``representation_drift.json``,
            ``representation_drift.png`` and ``drift_confidence.png`` (default
            ``work_dirs/representation_drift/<config stem>``).
        layers: explicit module names instead of the automatic choice.
        images_per_minibatch: (``'token'`` only; default 8) images whose tokens form one
            CKA minibatch.
        representation: ``'sample'`` or ``'token'`` (see :data:`REPRESENTATIONS`).
        pr_convention: ``'raw'`` or ``'centred'``.
        protocol: corruption protocol, ``'reobench'`` or ``'geofm_calibration'``.
        drift_confidence: compute the drift–confidence coupling (and write
            ``drift_confidence.png``): None (default) for segmentors and not for other
            models, True (refused for a model that is not a segmentor), or False.

    Returns:
        The document written to ``representation_drift.json``: ``format``, ``blocks``
        (name, type, kind, prefix tokens), ``settings`` (including ``representation``,
        ``pr_convention``, ``protocol`` and a description of each statistic),
        ``conditions`` (one per corruption × severity: ``condition``, ``corruption``,
        ``severity``, ``num_images``, ``blocks: {name: {cka, cka_floor, cosine, cosine_floor,
        pr_clean, pr_corrupted, num_samples, dim, tokens_available}}``, with
        ``num_tokens``, ``num_minibatches`` and ``tokens_per_image`` added at the token
        level, and ``drift_confidence`` (see
        :class:`~reobench_mm.robustness.drift_confidence.DriftConfidenceRecorder`) when
        computed), ``provenance`` and ``files``.

    Raises:
        ValueError: a bad option (an unknown representation, PR convention or protocol;
            a token-level option with ``'sample'``; fewer than 8 images with
            ``'sample'``), a bad severity or layer name.
        KeyError: a corruption name that ``protocol`` does not have.
        FileNotFoundError: a missing checkpoint.
    """
    from mmengine.logging import print_log
    from mmengine.registry import MODELS, init_default_scope
    from ..engine.checkpoint import load_checkpoint_strict

    if representation not in REPRESENTATIONS:
        raise ValueError(f'representation must be one of {list(REPRESENTATIONS)}, got '
                         f'{representation!r}')
    if pr_convention not in PR_CONVENTIONS:
        raise ValueError(f'pr_convention must be one of {list(PR_CONVENTIONS)}, got '
                         f'{pr_convention!r}')
    if not (drift_confidence is None or isinstance(drift_confidence, bool)):
        raise ValueError(f'drift_confidence must be None, True or False, got '
                         f'{drift_confidence!r}')
    if isinstance(corruptions, str) or not corruptions:
        raise ValueError(f'corruptions must be a non-empty list of names, got {corruptions!r}')
    if isinstance(severities, (str, int)) or not severities:
        raise ValueError(f'severities must be a non-empty list of integers 0..5, got '
                         f'{severities!r}')
    conditions: List[Condition] = []
    for corruption in corruptions:
        for severity in severities:
            condition = Condition(corruption, severity, seed, protocol)
            if condition not in conditions:
                conditions.append(condition)
    tokens_per_image = _token_option('tokens_per_image', tokens_per_image, representation)
    images_per_minibatch = _token_option('images_per_minibatch', images_per_minibatch,
                                         representation)
    _check_positive('max_images', max_images, allow_none=True)
    if representation == 'sample' and max_images is not None and \
            max_images < MIN_SPLIT_HALF_SAMPLES:
        raise ValueError(f"representation='sample' needs max_images >= "
                         f'{MIN_SPLIT_HALF_SAMPLES} (4 images for the unbiased HSIC, two halves '
                         f'of 4 for the split-half floor), got {max_images}')
    if not osp.isfile(checkpoint):
        raise FileNotFoundError(f'checkpoint {checkpoint!r} does not exist')
    if work_dir is None:
        work_dir = default_drift_work_dir(config)

    cfg = read_config(config)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    init_default_scope(cfg.get('default_scope'))
    model = MODELS.build(cfg.model)
    # read and loaded as every tool loads checkpoints: weights only, every key checked
    load_checkpoint_strict(model, checkpoint, config=config)
    model.eval()
    selected = select_drift_layers(model, num_blocks=num_blocks, layers=layers)
    unsupported = None if drift_confidence is False else drift_confidence_support(model)
    if drift_confidence and unsupported:
        raise ValueError(f'drift_confidence=True: {unsupported}')
    coupled = drift_confidence is not False and unsupported is None

    def rounded(value: Optional[float]) -> str:
        return 'n/a' if value is None else str(round(value, 4))

    results = []
    with torch.no_grad():
        for condition in conditions:
            recorder = (DriftConfidenceRecorder(selected[-1].name,
                                                segmentor_ignore_index(model))
                        if coupled else None)
            outcome = _run_condition(model, cfg, selected, condition, representation,
                                     pr_convention, max_images, tokens_per_image,
                                     images_per_minibatch, recorder)
            name = condition.key
            results.append(dict(condition=name, corruption=condition.corruption,
                                severity=condition.severity, **outcome))
            print_log(f'representation drift {name}: CKA (floor) ' + ', '.join(
                f'{k} {rounded(v["cka"])} ({rounded(v["cka_floor"])})'
                for k, v in outcome['blocks'].items()), logger='current')

    block_info = [layer.describe() for layer in selected]
    provenance = make_provenance(config=config, config_text=cfg.pretty_text,
                                 checkpoint=checkpoint,
                                 checkpoint_sha256=file_sha256(checkpoint), seed=int(seed))
    provenance['blocks'] = [layer.name for layer in selected]
    provenance['cfg_options'] = json.loads(json.dumps(dict(cfg_options or {}), default=repr))
    document = dict(
        format=RESULT_FORMAT,
        blocks=block_info,
        settings=dict(corruptions=list(dict.fromkeys(c.corruption for c in conditions)),
                      severities=[int(s) for s in severities], protocol=protocol,
                      num_blocks=num_blocks, layers=None if layers is None else list(layers),
                      representation=representation, pr_convention=pr_convention,
                      tokens_per_image=tokens_per_image,
                      max_images=None if max_images is None else int(max_images),
                      images_per_minibatch=images_per_minibatch,
                      **_STATISTICS[representation],
                      participation_ratio=_PR_DESCRIPTIONS[pr_convention],
                      drift_confidence=dict(enabled=coupled, layer=selected[-1].name,
                                            not_computed=unsupported,
                                            **DRIFT_CONFIDENCE_DEFINITIONS)),
        conditions=results,
        provenance=provenance,
        files=dict(results=RESULT_FILE, plot=PLOT_FILE,
                   drift_confidence_plot=COUPLING_PLOT_FILE if coupled else None))
    os.makedirs(work_dir, exist_ok=True)
    dump_json_atomic(document, osp.join(work_dir, RESULT_FILE))
    plot_representation_drift(document, osp.join(work_dir, PLOT_FILE))
    if coupled:
        plot_drift_confidence(document, osp.join(work_dir, COUPLING_PLOT_FILE))
    elif unsupported:
        print_log(f'drift–confidence coupling not computed: {unsupported}', logger='current')
    return document


#: What each statistic is, per representation (written into the result's settings).
_STATISTICS = {
    'sample': dict(
        cka='linear CKA (unbiased HSIC) of the N×D clean and corrupted per-image '
            'representations (tokens mean-pooled per image), all images in one batch',
        cka_floor='split-half noise floor: linear CKA between two random halves of the '
                  'clean per-image representations (split seeded by the seed)',
        cosine='per-image cosine of the pooled clean and corrupted vectors, mean over '
               'images',
        cosine_floor='split-half noise floor of the cosine: mean cosine of the paired rows '
                     'of the two halves of cka_floor'),
    'token': dict(
        cka='minibatch linear CKA (unbiased HSIC), mean HSICs over minibatches of '
            'images_per_minibatch images\' kept tokens',
        cka_floor='split-half noise floor: minibatch CKA between two random halves of '
                  'each minibatch\'s clean token rows (split seeded by the seed and the '
                  'minibatch index)',
        cosine='token-wise cosine, mean over an image\'s kept tokens, then over images',
        cosine_floor='split-half noise floor of the cosine: mean cosine over every paired '
                     'row of the halves of cka_floor, all minibatches pooled'),
}
_PR_DESCRIPTIONS = {
    'raw': '(sum λ)² / sum λ² of the eigenvalues of XᵀX (squared singular values of the '
           'raw activation matrix X)',
    'centred': '(sum λ)² / sum λ² of the eigenvalues of the feature covariance (X '
               'centred)',
}
