"""Drift–confidence coupling inside the representation-drift tool (segmentation).

:func:`~reobench_mm.robustness.drift.representation_drift` compares a backbone's
features on clean and corrupted images; with a segmentor it also runs the whole model
(``model.predict``) on both batches and hands each image to a
:class:`DriftConfidenceRecorder`, which keeps per image

- ``drift``: ``d_i = ‖x_corr,i − x_clean,i‖₂``, the L2 distance between the image's
  corrupted and clean sample representations at the final compared layer (the last of
  the hooked layers): each representation is the mean of the layer's tokens over the
  image (:func:`~reobench_mm.robustness.drift.pool_tokens`, the ``'sample'``
  representation's rows), whichever representation the CKA uses;
- ``confidence``, ``accuracy`` (and ``clean_confidence``, ``clean_accuracy``): the
  mean max-softmax probability and the fraction of correct pixels of the corrupted
  (clean) prediction over the image's valid pixels on the final layer's token grid
  (:func:`token_grid_pixels`);
- ``num_pixels`` and ``num_confident_wrong``: its valid token-grid pixels, and how many
  of the corrupted prediction's are predicted with confidence above 0.9 and wrong.

The statistics (Spearman ρ of drift with confidence and with accuracy, the
overconfident-drift fraction) are those of
:mod:`reobench_mm.evaluation.functional.drift_confidence`. Detectors are not supported
(:func:`drift_confidence_support`).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..evaluation.functional.drift_confidence import (OVERCONFIDENCE_THRESHOLD,
                                                      drift_confidence_summary)

__all__ = ['DriftConfidenceRecorder', 'drift_confidence_support', 'token_grid_shape',
           'token_grid_pixels', 'segmentor_ignore_index', 'DRIFT_CONFIDENCE_DEFINITIONS']

#: What each drift–confidence number is (written into the result's settings).
DRIFT_CONFIDENCE_DEFINITIONS = dict(
    drift='per image, the L2 distance ‖x_corr − x_clean‖₂ between its corrupted and clean '
          'sample representations (the final compared layer\'s tokens mean-pooled over '
          'the image)',
    token_grid='the model\'s logits (model.predict, at the original image size) resized '
               'bilinearly (align_corners=False) and the labels by nearest neighbour '
               '(pixel centres) to the final layer\'s h×w token grid; softmax after '
               'resizing; pixels labelled ignore_index are left out',
    confidence='per image, the mean over its valid token-grid pixels of the max softmax '
               'probability of the corrupted prediction',
    accuracy='per image, the fraction of its valid token-grid pixels whose arg-max class '
             'is the label (corrupted prediction)',
    spearman='scipy.stats.spearmanr of drift with confidence / accuracy over the images '
             '(average ranks for ties; two-sided p-value); None with a note when a side '
             'is constant or there are fewer than 3 images',
    overconfident_drift_fraction='over all valid token-grid pixels of all images, the '
                                 'fraction that belong to an image with drift > the median '
                                 f'drift, have confidence > {OVERCONFIDENCE_THRESHOLD} and '
                                 'are wrong (corrupted prediction)',
)


def _final_decode_head(model: nn.Module) -> Optional[nn.Module]:
    """The head whose logits ``model.predict`` returns (the last of a cascade)."""
    head = getattr(model, 'decode_head', None)
    return head[-1] if isinstance(head, nn.ModuleList) else head


def segmentor_ignore_index(model: nn.Module) -> int:
    """The label of pixels left out: the final decode head's ``ignore_index``."""
    return int(_final_decode_head(model).ignore_index)


def drift_confidence_support(model: nn.Module) -> Optional[str]:
    """None when the drift–confidence coupling can be computed for ``model`` (an
    MMSegmentation segmentor with a softmax decode head), else the reason it cannot."""
    from mmseg.models.segmentors import BaseSegmentor
    if not isinstance(model, BaseSegmentor):
        return (f'the drift–confidence coupling is implemented for segmentors only; '
                f'{type(model).__name__} is not an MMSegmentation segmentor (for detectors '
                'a per-image confidence and accuracy are not defined here)')
    head = _final_decode_head(model)
    if head is None or getattr(head, 'out_channels', 2) < 2:
        return ('the drift–confidence coupling needs a decode head with softmax outputs '
                '(out_channels >= 2); this segmentor has '
                f'{"no decode head" if head is None else "a single-channel sigmoid head"}')
    return None


def token_grid_shape(output: Any, channels_last: bool, num_tokens: int,
                     input_hw: Sequence[int]) -> Tuple[int, int]:
    """``(h, w)`` of a hooked layer's token grid.

    A 4-D output is a map: ``B×C×h×w``, or ``B×h×w×C`` when ``channels_last`` (a ViT
    block returning channels-last maps). A ``B×N×C`` token sequence (``num_tokens``
    patch tokens after the prefix tokens) is laid out with the input's aspect ratio:
    ``h = round(sqrt(N·H/W))``, ``w = N / h``, which must be whole.

    Raises:
        ValueError: tokens that do not form a grid of the input's aspect ratio.
    """
    if isinstance(output, (tuple, list)):
        output = next((o for o in output if isinstance(o, torch.Tensor)), None)
    if isinstance(output, torch.Tensor) and output.ndim == 4:
        h, w = output.shape[1:3] if channels_last else output.shape[2:4]
        return int(h), int(w)
    height, width = (int(v) for v in input_hw)
    h = max(1, int(round(math.sqrt(num_tokens * height / width))))
    if num_tokens % h:
        raise ValueError(f'cannot lay {num_tokens} tokens out on a grid with the input\'s '
                         f'aspect ratio {height}×{width}; compare a layer with a spatial '
                         'output (layers=...) or switch the drift–confidence coupling off')
    return h, num_tokens // h


def token_grid_pixels(logits: torch.Tensor, labels: torch.Tensor, grid: Tuple[int, int],
                      ignore_index: int) -> Tuple[np.ndarray, np.ndarray]:
    """Confidence and correctness of one image's valid pixels on a token grid.

    The ``C×H×W`` logits are resized to ``grid`` bilinearly (``align_corners=False``,
    no antialiasing) and turned into probabilities with a softmax; the ``H×W`` labels
    are resized by nearest neighbour at the grid cells' centres (``nearest-exact``:
    cell ``(i, j)`` takes the label at ``(⌊(i+½)H/h⌋, ⌊(j+½)W/w⌋)``). A grid pixel
    whose label is ``ignore_index`` is left out.

    Returns:
        ``(confidence, correct)``: the max probability and whether the first arg-max is
        the label, for each valid grid pixel (float64 and bool, row-major).
    """
    if logits.ndim != 3 or labels.ndim != 2 or logits.shape[1:] != labels.shape:
        raise ValueError(f'expected C×H×W logits and H×W labels of the same size, got '
                         f'{tuple(logits.shape)} and {tuple(labels.shape)} (labels at a '
                         'size other than the prediction\'s?)')
    size = (int(grid[0]), int(grid[1]))
    resized = F.interpolate(logits[None].double(), size=size, mode='bilinear',
                            align_corners=False)[0]
    probs = resized.softmax(0)
    confidence, prediction = probs.max(0)
    grid_labels = F.interpolate(labels[None, None].double(), size=size,
                                mode='nearest-exact')[0, 0].long()
    valid = grid_labels != int(ignore_index)
    correct = prediction[valid] == grid_labels[valid]
    return confidence[valid].numpy(), correct.numpy()


class DriftConfidenceRecorder:
    """Per-image drift, confidence and accuracy of one condition (see the module
    docstring).

    Args:
        layer: name of the final compared layer (recorded).
        ignore_index: label of pixels left out (the decode head's ``ignore_index``).
    """

    def __init__(self, layer: str, ignore_index: int) -> None:
        self.layer = layer
        self.ignore_index = int(ignore_index)
        self.grids: List[Tuple[int, int]] = []
        self.rows: Dict[str, List[float]] = {key: [] for key in (
            'drift', 'confidence', 'accuracy', 'clean_confidence', 'clean_accuracy',
            'num_pixels', 'num_confident_wrong')}

    def update(self, model: nn.Module, clean_data: dict, corrupted_data: dict,
               clean_pooled: torch.Tensor, corrupted_pooled: torch.Tensor,
               grid: Tuple[int, int], keep: int) -> None:
        """Run ``model.predict`` on the preprocessed clean and corrupted batches and add
        their first ``keep`` images; ``clean_pooled``/``corrupted_pooled`` are those
        images' ``keep×D`` sample representations at the final layer."""
        drift = (corrupted_pooled.double() - clean_pooled.double()).norm(dim=1)
        clean_samples = model.predict(clean_data['inputs'], clean_data['data_samples'])
        corrupted_samples = model.predict(corrupted_data['inputs'],
                                          corrupted_data['data_samples'])
        grid = (int(grid[0]), int(grid[1]))
        if grid not in self.grids:
            self.grids.append(grid)
        for i in range(keep):
            clean_conf, clean_correct = self._pixels(clean_samples[i], grid)
            conf, correct = self._pixels(corrupted_samples[i], grid)
            self.rows['drift'].append(float(drift[i]))
            self.rows['num_pixels'].append(int(correct.size))
            self.rows['num_confident_wrong'].append(
                int(np.sum((conf > OVERCONFIDENCE_THRESHOLD) & ~correct)))
            for key, values in (('confidence', conf), ('accuracy', correct),
                                ('clean_confidence', clean_conf),
                                ('clean_accuracy', clean_correct)):
                self.rows[key].append(float(np.mean(values)) if values.size else math.nan)

    def _pixels(self, sample, grid: Tuple[int, int]) -> Tuple[np.ndarray, np.ndarray]:
        if 'gt_sem_seg' not in sample:
            raise ValueError('the test data samples have no gt_sem_seg: the drift–confidence '
                             'coupling needs the labels (LoadAnnotations in the test '
                             'pipeline)')
        labels = sample.gt_sem_seg.data
        return token_grid_pixels(sample.seg_logits.data.detach().cpu(),
                                 labels.reshape(labels.shape[-2:]).cpu(), grid,
                                 self.ignore_index)

    def result(self) -> Dict[str, Any]:
        """The summary (:func:`~reobench_mm.evaluation.functional.drift_confidence.
        drift_confidence_summary`) with ``layer``, ``token_grid`` (the distinct
        ``[h, w]`` grids seen) and ``per_image`` (the lists above; undefined values
        None)."""
        rows = self.rows
        summary = drift_confidence_summary(rows['drift'], rows['confidence'],
                                           rows['accuracy'], rows['num_pixels'],
                                           rows['num_confident_wrong'])
        per_image = {key: [None if isinstance(v, float) and math.isnan(v) else v
                           for v in values] for key, values in rows.items()}
        return dict(layer=self.layer, token_grid=[list(g) for g in self.grids], **summary,
                    per_image=per_image)
