"""Calibration of oriented-box detectors: the detection expected calibration error.

A detector is calibrated when, among its detections of score ``s``, a fraction ``s`` are
true positives. :class:`RotatedDetectionCalibrationMetric` measures this with the
detection ECE (D-ECE) of Küppers et al., "Multivariate Confidence Calibration for Object
Detection" (CVPR-W 2020), over a histogram of detection scores:

    D-ECE = sum_b n_b / N * |precision_b - mean score_b|

where ``n_b`` detections fall in score bin ``b`` (``N`` in all) and ``precision_b`` is the
fraction of them that are true positives. The bins are those of the pixel ECE: ``B``
equal-width bins ``(0, 1/B], ..., ((B-1)/B, 1]``, a score of exactly 0 in the first
(:func:`score_bin_indices`). The maximum calibration error over the same bins,

    MCE = max over non-empty bins b of |precision_b - mean score_b|

(Naeini et al. 2015), is
:func:`~reobench_mm.evaluation.functional.calibration_bins.maximum_calibration_error` of
the same sums; both are also given per class (the classwise D-ECE and MCE of the
detections of one class; ``cwECE`` is the mean classwise D-ECE over the classes with
detections).

Detections and ground truth are read as MMRotate's ``DOTAMetric`` reads them, with the
same rotated IoU (``mmcv.ops.box_iou_rotated``). Per image and class, detections in
descending score order each take the unmatched ground-truth box of highest rotated IoU,
if that IoU is at least ``iou_thr`` (greedy matching; VOC's mAP code instead looks only at
the box of highest IoU and counts the detection false when that box is taken, so the two
can differ for crowded objects). A detection that matches no regular box but overlaps an
ignored (difficult) box by at least ``iou_thr`` is neither a true nor a false positive and
is left out, as in the DOTA/VOC protocol; every other detection is a false positive.

The metric streams: each process keeps one accumulator of per-class, per-bin counts,
score sums and true-positive sums (memory O(classes x bins), independent of the number
of images; :func:`new_accumulator`, :func:`add_accumulators`), and the accumulators of all
processes are summed. The last image of each process is kept apart until the dataset size
is known, so that the image MMEngine's sampler repeats to pad a multi-process run is left
out (:class:`~reobench_mm.evaluation.functional.streaming.RankSum`). The MMEngine metric is
:class:`~reobench_mm.evaluation.metrics.detection_calibration.RotatedDetectionCalibrationMetric`.
"""
from __future__ import annotations

import math
from typing import Any, Dict

import numpy as np
import torch

from .calibration_bins import bin_index

__all__ = ['TRUE_POSITIVE', 'FALSE_POSITIVE', 'EXCLUDED', 'as_numpy', 'as_rotated_boxes',
           'match_rotated_detections', 'score_bin_indices', 'detection_ece',
           'new_accumulator', 'add_accumulators']

TRUE_POSITIVE = 1
FALSE_POSITIVE = 0
EXCLUDED = -1


def as_numpy(value: Any, dtype: Any) -> np.ndarray:
    """A tensor, box object (``RotatedBoxes``) or array as a numpy array of ``dtype``."""
    if hasattr(value, 'tensor'):  # mmdet/mmrotate box structures
        value = value.tensor
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=dtype)


def as_rotated_boxes(value: Any, what: str) -> np.ndarray:
    """``value`` as an ``(N, 5)`` float32 array of rotated boxes (``what`` names it in
    the error)."""
    boxes = as_numpy(value, np.float32)
    if boxes.size == 0:
        return boxes.reshape(0, 5)
    if boxes.ndim != 2 or boxes.shape[1] != 5:
        raise ValueError(f'{what} must be rotated boxes of shape (N, 5) as (cx, cy, w, h, '
                         f'angle), got shape {boxes.shape}')
    return boxes


def match_rotated_detections(det_bboxes: np.ndarray, det_scores: np.ndarray,
                             gt_bboxes: np.ndarray, ignored_bboxes: np.ndarray,
                             iou_thr: float = 0.5) -> np.ndarray:
    """Match the detections of one class in one image to its ground truth.

    In descending score order (ties in input order), each detection takes the unmatched
    ground-truth box of highest rotated IoU (``mmcv.ops.box_iou_rotated``) when that IoU
    is at least ``iou_thr``. A detection that takes none but overlaps an ignored box by
    at least ``iou_thr`` is excluded; every other detection is a false positive.

    Args:
        det_bboxes: (N, 5) detections (cx, cy, w, h, angle in radians).
        det_scores: (N,) detection scores.
        gt_bboxes: (M, 5) ground-truth boxes of the same class.
        ignored_bboxes: (K, 5) ignored (difficult) boxes of the same class.
        iou_thr: the rotated IoU a match needs.

    Returns:
        np.ndarray: (N,) int8 flags, 1 for a true positive, 0 for a false positive and
        -1 for an excluded detection.
    """
    det_bboxes = as_rotated_boxes(det_bboxes, 'det_bboxes')
    gt_bboxes = as_rotated_boxes(gt_bboxes, 'gt_bboxes')
    ignored_bboxes = as_rotated_boxes(ignored_bboxes, 'ignored_bboxes')
    det_scores = as_numpy(det_scores, np.float64).reshape(-1)
    if len(det_scores) != len(det_bboxes):
        raise ValueError(f'{len(det_bboxes)} detections but {len(det_scores)} scores')
    flags = np.full(len(det_bboxes), FALSE_POSITIVE, dtype=np.int8)
    num_gts = len(gt_bboxes)
    if len(det_bboxes) == 0 or num_gts + len(ignored_bboxes) == 0:
        return flags
    from mmcv.ops import box_iou_rotated
    all_gts = np.concatenate([gt_bboxes, ignored_bboxes])
    ious = box_iou_rotated(torch.from_numpy(det_bboxes),
                           torch.from_numpy(all_gts)).numpy().astype(np.float64)
    regular_ious, ignored_ious = ious[:, :num_gts], ious[:, num_gts:]
    best_ignored = (ignored_ious.max(axis=1) if ignored_ious.shape[1]
                    else np.zeros(len(det_bboxes)))
    matched = np.zeros(num_gts, dtype=bool)
    for index in np.argsort(-det_scores, kind='stable'):
        if num_gts:
            candidates = np.where(matched, -np.inf, regular_ious[index])
            best = int(np.argmax(candidates))
            if candidates[best] >= iou_thr:
                matched[best] = True
                flags[index] = TRUE_POSITIVE
                continue
        if best_ignored[index] >= iou_thr:
            flags[index] = EXCLUDED
    return flags


def score_bin_indices(scores: np.ndarray, num_bins: int) -> np.ndarray:
    """Bin of each score among ``num_bins`` equal-width bins of [0, 1], with the pixel
    ECE's convention (:mod:`~reobench_mm.evaluation.functional.calibration`): bins
    ``(0, 1/B], (1/B, 2/B], ..., ((B-1)/B, 1]`` with edges ``linspace(0, 1, B + 1)``, so
    a score on an inner edge goes to the bin below it, and a score of exactly 0 to the
    first bin."""
    scores = np.asarray(scores, dtype=np.float64)
    return bin_index(scores, np.linspace(0.0, 1.0, num_bins + 1))


def detection_ece(counts: np.ndarray, score_sums: np.ndarray,
                  tp_sums: np.ndarray) -> float:
    """``sum_b n_b/N |precision_b - mean score_b|`` from per-bin counts, score sums and
    true-positive sums (over the last axis); NaN without detections."""
    total = float(np.sum(counts))
    if total == 0:
        return math.nan
    return float(np.sum(np.abs(np.asarray(tp_sums, np.float64) - score_sums)) / total)


def new_accumulator(num_classes: int, num_bins: int) -> Dict[str, np.ndarray]:
    """Zero per-class, per-bin ``counts``, ``score_sums`` and ``tp_sums``."""
    return dict(counts=np.zeros((num_classes, num_bins), dtype=np.int64),
                score_sums=np.zeros((num_classes, num_bins), dtype=np.float64),
                tp_sums=np.zeros((num_classes, num_bins), dtype=np.int64))


def add_accumulators(total: Dict[str, np.ndarray],
                     other: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Add ``other``'s arrays into ``total`` (in place) and return it."""
    for key, value in total.items():
        if other[key].shape != value.shape:
            raise ValueError(f'accumulator {key!r} has shape {other[key].shape}, '
                             f'expected {value.shape}')
        value += other[key]
    return total
