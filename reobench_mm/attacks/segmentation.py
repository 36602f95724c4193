"""Attacking an MMSegmentation segmentor: the pixels → logits path and the objectives.

The logits attacked are those the prediction is made from: the image goes through the
model's own data preprocessor (channel order, normalisation, padding: the gradient flows
back through it to the raw pixels) and the model's own ``predict`` (whole or sliding
inference, padding removed, resized to the label's size), and the objective reads the
``seg_logits`` it leaves on the sample. Any segmentor whose ``predict`` is differentiable
works (the package's backbones, mmseg's ``EncoderDecoder``); one whose logits do not
depend differentiably on the pixels is refused with the reason.

Labels: each sample's own ``gt_sem_seg`` (any batch size); pixels labelled with the
evaluator's ``ignore_index`` are left out of every objective (they neither add to the
loss nor are read).
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

import numpy as np
import torch
from torch import Tensor

from .functional import cospgd_loss, pixel_cross_entropy, segpgd_loss
from .iterative import Objective

__all__ = ['SegmentationTarget', 'image_areas']


def image_areas(pred: Tensor, labels: Tensor, valid: Tensor, num_classes: int) -> np.ndarray:
    """``IoUMetric``'s areas of one image: per class the intersection, prediction and
    label pixel counts over the valid pixels, ``(C, 3)`` int64."""
    pred, labels = pred[valid].long(), labels[valid].long()
    hit = pred[pred == labels]
    counts = [torch.bincount(v, minlength=num_classes)[:num_classes] for v in (hit, pred, labels)]
    return torch.stack(counts, dim=-1).cpu().numpy().astype(np.int64)


class SegmentationTarget:
    """One segmentor under attack.

    Args:
        model: the segmentor (an ``mmseg`` ``BaseSegmentor``: ``data_preprocessor`` and
            ``predict``), in eval mode.
        ignore_index: the label the evaluator ignores.
    """

    def __init__(self, model: Any, ignore_index: Optional[int]) -> None:
        for name in ('data_preprocessor', 'predict'):
            if not hasattr(model, name):
                raise TypeError(f'{type(model).__name__} has no {name}: attacks need an '
                                'MMSegmentation segmentor (a data preprocessor and predict)')
        self.model = model
        self.ignore_index = 255 if ignore_index is None else int(ignore_index)

    def logits(self, x: Tensor, sample: Any) -> Tensor:
        """``C×H×W`` logits of the pixels ``x`` (``C×H×W`` float, raw units) at the size
        of ``sample``'s label, as the model's prediction makes them."""
        data = self.model.data_preprocessor(dict(inputs=[x], data_samples=[sample]), False)
        (out, ) = self.model.predict(data['inputs'], data['data_samples'])
        logits = out.seg_logits.data
        if logits.shape[0] < 2:
            raise RuntimeError(f'{type(self.model).__name__} predicts {logits.shape[0]} '
                               'channel (a binary sigmoid head): the attack objectives are '
                               'per-pixel softmax cross-entropies over at least 2 classes')
        return logits

    def labels(self, sample: Any) -> tuple:
        """``(labels, valid)`` of ``sample``: its ``H×W`` label map and the mask of the
        pixels not ignored."""
        gt = getattr(sample, 'gt_sem_seg', None)
        if gt is None:
            raise RuntimeError('the sample has no gt_sem_seg: an attack needs the labels '
                               '(load the annotations in the test pipeline)')
        labels = gt.data[0].long()
        return labels, labels != self.ignore_index

    def objective(self, sample: Any, kind: str, device: Any,
                  on_logits: Optional[Callable[[Tensor], None]] = None) -> Objective:
        """The loss to maximise for ``sample`` (a copy is attacked: the sample keeps its
        fields): ``'ce'`` the mean cross-entropy over valid pixels, ``'segpgd'`` and
        ``'cospgd'`` their objectives. ``on_logits(logits)`` sees the logits of every
        evaluation (the per-step curves)."""
        work = sample.clone()
        labels, valid = self.labels(sample)
        labels, valid = labels.to(device), valid.to(device)
        count = valid.sum().clamp(min=1)

        def loss(x: Tensor, step: int, steps: int) -> Tensor:
            logits = self.logits(x, work)
            if logits.shape[-2:] != labels.shape:
                raise RuntimeError(f'the logits are {tuple(logits.shape[-2:])} but the label '
                                   f'map is {tuple(labels.shape)}: the prediction must be at '
                                   'the label size')
            if on_logits is not None:
                on_logits(logits.detach())
            if kind == 'segpgd':
                return segpgd_loss(logits, labels, valid, step, steps)
            if kind == 'cospgd':
                return cospgd_loss(logits, labels, valid)
            return pixel_cross_entropy(logits, labels, valid).sum() / count
        return loss

    def curve_areas(self, sample: Any, num_classes: int) -> tuple:
        """``(areas, on_logits)``: a list that collects the areas (:func:`image_areas`) of
        every evaluated iterate, and the callback filling it."""
        labels, valid = self.labels(sample)
        found: List[np.ndarray] = []

        def on_logits(logits: Tensor) -> None:
            found.append(image_areas(logits.argmax(dim=0).cpu(), labels.cpu(), valid.cpu(),
                                     num_classes))
        return found, on_logits
