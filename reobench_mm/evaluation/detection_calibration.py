"""Calibration of oriented-box detectors: the detection expected calibration error.

A detector is calibrated when, among its detections of score ``s``, a fraction ``s`` are
true positives. :class:`RotatedDetectionCalibrationMetric` measures this with the
detection ECE (D-ECE) of Küppers et al., "Multivariate Confidence Calibration for Object
Detection" (CVPR-W 2020), over a histogram of detection scores:

    D-ECE = sum_b n_b / N * |precision_b - mean score_b|

where ``n_b`` detections fall in score bin ``b`` (``N`` in all) and ``precision_b`` is the
fraction of them that are true positives.

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
of images), and the accumulators of all processes are summed. The last image of each
process is kept apart until the dataset size is known, so that the image MMEngine's
sampler repeats to pad a multi-process run is left out
(:class:`~reobench_mm.evaluation.streaming.RankSum`).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmengine.logging import MMLogger

from ..fileio import finite_or_none
from ..registry import METRICS
from .streaming import DatasetSizeMixin, RankSum, sum_rank_totals

__all__ = ['RotatedDetectionCalibrationMetric', 'match_rotated_detections',
           'score_bin_indices', 'detection_ece']

TRUE_POSITIVE = 1
FALSE_POSITIVE = 0
EXCLUDED = -1


def _as_numpy(value: Any, dtype: Any) -> np.ndarray:
    """A tensor, box object (``RotatedBoxes``) or array as a numpy array of ``dtype``."""
    if hasattr(value, 'tensor'):  # mmdet/mmrotate box structures
        value = value.tensor
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=dtype)


def _as_rboxes(value: Any, what: str) -> np.ndarray:
    boxes = _as_numpy(value, np.float32)
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
    det_bboxes = _as_rboxes(det_bboxes, 'det_bboxes')
    gt_bboxes = _as_rboxes(gt_bboxes, 'gt_bboxes')
    ignored_bboxes = _as_rboxes(ignored_bboxes, 'ignored_bboxes')
    det_scores = _as_numpy(det_scores, np.float64).reshape(-1)
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
    """Bin of each score among ``num_bins`` equal-width bins of [0, 1]; the last bin is
    closed, so a score of exactly 1.0 falls in it."""
    scores = np.asarray(scores, dtype=np.float64)
    return np.minimum(np.floor(scores * num_bins).astype(np.int64), num_bins - 1)


def detection_ece(counts: np.ndarray, score_sums: np.ndarray,
                  tp_sums: np.ndarray) -> float:
    """``sum_b n_b/N |precision_b - mean score_b|`` from per-bin counts, score sums and
    true-positive sums (over the last axis); NaN without detections."""
    total = float(np.sum(counts))
    if total == 0:
        return math.nan
    return float(np.sum(np.abs(np.asarray(tp_sums, np.float64) - score_sums)) / total)


def _new_accumulator(num_classes: int, num_bins: int) -> Dict[str, np.ndarray]:
    return dict(counts=np.zeros((num_classes, num_bins), dtype=np.int64),
                score_sums=np.zeros((num_classes, num_bins), dtype=np.float64),
                tp_sums=np.zeros((num_classes, num_bins), dtype=np.int64))


def _add_accumulators(total: Dict[str, np.ndarray],
                      other: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Add ``other``'s arrays into ``total`` (in place) and return it."""
    for key, value in total.items():
        if other[key].shape != value.shape:
            raise ValueError(f'accumulator {key!r} has shape {other[key].shape}, '
                             f'expected {value.shape}')
        value += other[key]
    return total


@METRICS.register_module()
class RotatedDetectionCalibrationMetric(DatasetSizeMixin, BaseMetric):
    """Detection expected calibration error (D-ECE) of an oriented-box detector.

    Reads the data samples as MMRotate's ``DOTAMetric`` does: ``pred_instances``
    (``bboxes`` (N, 5) le90 ``cx, cy, w, h, a``, ``scores``, ``labels``), ``gt_instances``
    and ``ignored_instances`` (difficult objects). See the module docstring for the
    matching and the error.

    Args:
        iou_thr: rotated IoU a detection needs to match a ground-truth box, in (0, 1].
        score_thr: detections scoring below it are left out. The default 0.0 keeps every
            detection the model outputs (after its own ``test_cfg`` score threshold and
            NMS), i.e. the detections the mAP is computed on.
        num_bins: number of equal-width score bins in [0, 1].
        collect_device: ``'cpu'`` or ``'gpu'``, for collecting results across processes.
        prefix: metric name prefix; default ``'calib'``.

    Returns (``compute_metrics``): ``ECE`` (D-ECE, a fraction in [0, 1]), ``gap`` (mean
    score minus precision, signed), ``cwECE`` (mean D-ECE over the classes with
    detections) and ``num_detections``; ECE, gap and cwECE are NaN without detections.
    ``self.last_details`` then holds a JSON-able dict: the settings, the reliability data
    in the layout of :class:`SegCalibrationMetric`'s (``bin_edges``; per bin ``count``,
    ``mean_confidence`` = mean score and ``accuracy`` = precision, None for an empty bin;
    ``ECE``, ``gap``) and per class (by name: ``ECE``, ``gap``, ``num_detections``).
    """
    default_prefix: Optional[str] = 'calib'

    def __init__(self, iou_thr: float = 0.5, score_thr: float = 0.0, num_bins: int = 15,
                 collect_device: str = 'cpu', prefix: Optional[str] = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        if isinstance(iou_thr, bool) or not isinstance(iou_thr, (int, float)) \
                or not 0.0 < iou_thr <= 1.0:
            raise ValueError(f'iou_thr must be a number in (0, 1], got {iou_thr!r}')
        if isinstance(score_thr, bool) or not isinstance(score_thr, (int, float)) \
                or not 0.0 <= score_thr <= 1.0:
            raise ValueError(f'score_thr must be a number in [0, 1], got {score_thr!r}')
        if isinstance(num_bins, bool) or not isinstance(num_bins, int) or num_bins < 1:
            raise ValueError(f'num_bins must be a positive integer, got {num_bins!r}')
        self.iou_thr = float(iou_thr)
        self.score_thr = float(score_thr)
        self.num_bins = num_bins
        self.last_details: Optional[Dict[str, Any]] = None

    def _class_names(self) -> List[str]:
        meta = self.dataset_meta
        if not meta or 'classes' not in meta:
            raise ValueError('RotatedDetectionCalibrationMetric needs dataset_meta with '
                             "'classes' (set by the Runner from the dataset, or assign "
                             'metric.dataset_meta = dict(classes=...))')
        return [str(name) for name in meta['classes']]

    def process(self, data_batch: Any, data_samples: Sequence[Mapping]) -> None:
        """Match the detections of each data sample and add them to the accumulator."""
        num_classes = len(self._class_names())
        if not self.results:
            self.results.append(RankSum())
        for sample in data_samples:
            stats = _new_accumulator(num_classes, self.num_bins)
            pred = sample['pred_instances']
            det_bboxes = _as_rboxes(pred['bboxes'], 'pred_instances.bboxes')
            det_scores = _as_numpy(pred['scores'], np.float64).reshape(-1)
            det_labels = _as_numpy(pred['labels'], np.int64).reshape(-1)
            if not len(det_bboxes) == len(det_scores) == len(det_labels):
                raise ValueError(f'pred_instances has {len(det_bboxes)} boxes, '
                                 f'{len(det_scores)} scores and {len(det_labels)} labels')
            if len(det_scores) and (not np.all(np.isfinite(det_scores))
                                    or det_scores.min() < 0 or det_scores.max() > 1):
                raise ValueError('detection scores must lie in [0, 1], got range '
                                 f'[{det_scores.min()}, {det_scores.max()}]')
            gt_bboxes, gt_labels = self._instances(sample.get('gt_instances'),
                                                   'gt_instances')
            ignored_bboxes, ignored_labels = self._instances(
                sample.get('ignored_instances'), 'ignored_instances')
            for labels in (det_labels, gt_labels, ignored_labels):
                if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
                    raise ValueError(f'labels must be in [0, {num_classes}) for the '
                                     f'{num_classes} classes, got {labels.min()}..'
                                     f'{labels.max()}')
            keep = det_scores >= self.score_thr
            for label in np.unique(det_labels[keep]):
                in_class = keep & (det_labels == label)
                scores = det_scores[in_class]
                flags = match_rotated_detections(
                    det_bboxes[in_class], scores, gt_bboxes[gt_labels == label],
                    ignored_bboxes[ignored_labels == label], self.iou_thr)
                counted = flags != EXCLUDED
                bins = score_bin_indices(scores[counted], self.num_bins)
                stats['counts'][label] += np.bincount(bins, minlength=self.num_bins)
                stats['score_sums'][label] += np.bincount(
                    bins, weights=scores[counted], minlength=self.num_bins)
                stats['tp_sums'][label] += np.bincount(
                    bins, weights=(flags[counted] == TRUE_POSITIVE).astype(np.float64),
                    minlength=self.num_bins).astype(np.int64)
            self.results[0].add(stats, _add_accumulators)

    @staticmethod
    def _instances(instances: Optional[Mapping], what: str):
        if not instances or 'bboxes' not in instances:  # no objects: {} after to_dict
            return np.zeros((0, 5), dtype=np.float32), np.zeros(0, dtype=np.int64)
        bboxes = _as_rboxes(instances['bboxes'], f'{what}.bboxes')
        labels = _as_numpy(instances['labels'], np.int64).reshape(-1)
        if len(bboxes) != len(labels):
            raise ValueError(f'{what} has {len(bboxes)} boxes but {len(labels)} labels')
        return bboxes, labels

    def compute_metrics(self, results: list) -> Dict[str, float]:
        """Sum the accumulators of all processes and compute the calibration errors."""
        names = self._class_names()
        total = _new_accumulator(len(names), self.num_bins)
        gathered = sum_rank_totals(results, self._dataset_size, _add_accumulators)
        if gathered is not None:
            _add_accumulators(total, gathered)
        counts, score_sums, tp_sums = total['counts'], total['score_sums'], total['tp_sums']
        num_detections = int(counts.sum())
        if num_detections == 0:
            MMLogger.get_current_instance().warning(
                'RotatedDetectionCalibrationMetric: no detections were counted; the '
                'calibration errors are NaN')
        ece = detection_ece(counts.sum(0), score_sums.sum(0), tp_sums.sum(0))
        gap = ((score_sums.sum() - tp_sums.sum()) / num_detections
               if num_detections else math.nan)
        per_class = {}
        class_eces = []
        for index, name in enumerate(names):
            class_count = int(counts[index].sum())
            class_ece = detection_ece(counts[index], score_sums[index], tp_sums[index])
            class_gap = ((score_sums[index].sum() - tp_sums[index].sum()) / class_count
                         if class_count else math.nan)
            if class_count:
                class_eces.append(class_ece)
            per_class[name] = dict(ECE=finite_or_none(class_ece), gap=finite_or_none(float(class_gap)),
                                   num_detections=class_count)
        cw_ece = float(np.mean(class_eces)) if class_eces else math.nan

        # same layout as the segmentation metric's reliability data (one plotting function
        # serves both): confidence = detection score, accuracy = precision of the bin
        edges = np.linspace(0.0, 1.0, self.num_bins + 1)
        bin_counts, bin_scores, bin_tps = counts.sum(0), score_sums.sum(0), tp_sums.sum(0)
        filled = bin_counts > 0
        safe = np.maximum(bin_counts, 1)
        reliability = dict(
            bin_edges=edges.tolist(), count=[int(n) for n in bin_counts],
            mean_confidence=[float(v) if f else None
                             for v, f in zip(bin_scores / safe, filled)],
            accuracy=[float(v) if f else None for v, f in zip(bin_tps / safe, filled)],
            ECE=finite_or_none(ece), gap=finite_or_none(float(gap)), num_detections=num_detections)
        self.last_details = dict(iou_thr=self.iou_thr, score_thr=self.score_thr,
                                 num_bins=self.num_bins, num_detections=num_detections,
                                 reliability=reliability, per_class=per_class)
        return dict(ECE=ece, gap=float(gap), cwECE=cw_ece, num_detections=num_detections)
