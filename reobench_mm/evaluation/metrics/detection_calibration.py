"""The calibration metric of an oriented-box detector:
:class:`RotatedDetectionCalibrationMetric` (the detection ECE of
:mod:`reobench_mm.evaluation.functional.detection_calibration`)."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np
from mmengine.evaluator import BaseMetric
from mmengine.logging import MMLogger

from ...fileio import finite_or_none
from ...registry import METRICS
from ..functional.calibration_bins import maximum_calibration_error
from ..functional.detection_calibration import (EXCLUDED, TRUE_POSITIVE, add_accumulators,
                                                as_numpy, as_rotated_boxes, detection_ece,
                                                match_rotated_detections, new_accumulator,
                                                score_bin_indices)
from ..functional.image_stats import CalibrationImageStats
from ..functional.streaming import RankSum, sum_rank_totals
from ..keys import CALIBRATION_PREFIX
from .base import DatasetSizeMixin, kept_image_terms

__all__ = ['RotatedDetectionCalibrationMetric']


@METRICS.register_module()
class RotatedDetectionCalibrationMetric(DatasetSizeMixin, BaseMetric):
    """Detection expected calibration error (D-ECE) of an oriented-box detector.

    Reads the data samples as MMRotate's ``DOTAMetric`` does: ``pred_instances``
    (``bboxes`` (N, 5) le90 ``cx, cy, w, h, a``, ``scores``, ``labels``), ``gt_instances``
    and ``ignored_instances`` (difficult objects). See
    :mod:`reobench_mm.evaluation.functional.detection_calibration` for the matching and the
    error.

    Args:
        iou_thr: rotated IoU a detection needs to match a ground-truth box, in (0, 1].
        score_thr: detections scoring below it are left out. The default 0.0 keeps every
            detection the model outputs (after its own ``test_cfg`` score threshold and
            NMS), i.e. the detections the mAP is computed on.
        num_bins: number of equal-width score bins in [0, 1].
        collect_device: ``'cpu'`` or ``'gpu'``, for collecting results across processes.
        prefix: metric name prefix; default ``'calib'``.

    Returns (``compute_metrics``): ``ECE`` (D-ECE, a fraction in [0, 1]), ``MCE`` (the
    largest |precision - mean score| over the non-empty score bins), ``gap`` (mean
    score minus precision, signed), ``cwECE`` (mean D-ECE over the classes with
    detections) and ``num_detections``; ECE, MCE, gap and cwECE are NaN without
    detections.
    ``self.last_details`` then holds a JSON-able dict: the settings, the reliability data
    in the layout of
    :class:`~reobench_mm.evaluation.metrics.seg_calibration.SegCalibrationMetric`'s
    (``bin_edges``; per bin ``count``, ``mean_confidence`` = mean score and ``accuracy`` =
    precision, None for an empty bin; ``ECE``, ``MCE``, ``gap``) and per class (by name:
    ``ECE``, ``MCE``, ``gap``, ``num_detections``; None without detections).
    """
    default_prefix: Optional[str] = CALIBRATION_PREFIX

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
        #: :class:`CalibrationImageStats` of the last evaluation (per image: score-bin
        #: counts, score sums and true positives over all classes; dataset order)
        self.last_image_stats: Optional[CalibrationImageStats] = None

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
            stats = new_accumulator(num_classes, self.num_bins)
            pred = sample['pred_instances']
            det_bboxes = as_rotated_boxes(pred['bboxes'], 'pred_instances.bboxes')
            det_scores = as_numpy(pred['scores'], np.float64).reshape(-1)
            det_labels = as_numpy(pred['labels'], np.int64).reshape(-1)
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
            bins = np.stack([stats['counts'].sum(0), stats['score_sums'].sum(0),
                             stats['tp_sums'].sum(0)], axis=-1).astype(np.float64)
            self.results[0].add(stats, add_accumulators, keep=bins)

    @staticmethod
    def _instances(instances: Optional[Mapping], what: str):
        if not instances or 'bboxes' not in instances:  # no objects: {} after to_dict
            return np.zeros((0, 5), dtype=np.float32), np.zeros(0, dtype=np.int64)
        bboxes = as_rotated_boxes(instances['bboxes'], f'{what}.bboxes')
        labels = as_numpy(instances['labels'], np.int64).reshape(-1)
        if len(bboxes) != len(labels):
            raise ValueError(f'{what} has {len(bboxes)} boxes but {len(labels)} labels')
        return bboxes, labels

    def compute_metrics(self, results: list) -> Dict[str, float]:
        """Sum the accumulators of all processes and compute the calibration errors."""
        names = self._class_names()
        total = new_accumulator(len(names), self.num_bins)
        gathered = sum_rank_totals(results, self._dataset_size, add_accumulators)
        kept = kept_image_terms(results, self._dataset_size, type(self).__name__)
        self.last_image_stats = CalibrationImageStats(
            np.stack(kept), np.zeros((len(kept), 0))) if kept else None
        if gathered is not None:
            add_accumulators(total, gathered)
        counts, score_sums, tp_sums = total['counts'], total['score_sums'], total['tp_sums']
        num_detections = int(counts.sum())
        if num_detections == 0:
            MMLogger.get_current_instance().warning(
                'RotatedDetectionCalibrationMetric: no detections were counted; the '
                'calibration errors are NaN')
        ece = detection_ece(counts.sum(0), score_sums.sum(0), tp_sums.sum(0))
        mce = maximum_calibration_error(counts.sum(0), score_sums.sum(0), tp_sums.sum(0))
        class_mces = maximum_calibration_error(counts, score_sums, tp_sums)
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
            per_class[name] = dict(ECE=finite_or_none(class_ece),
                                   MCE=finite_or_none(float(class_mces[index])),
                                   gap=finite_or_none(float(class_gap)),
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
            ECE=finite_or_none(ece), MCE=finite_or_none(mce), gap=finite_or_none(float(gap)),
            num_detections=num_detections)
        self.last_details = dict(iou_thr=self.iou_thr, score_thr=self.score_thr,
                                 num_bins=self.num_bins, num_detections=num_detections,
                                 reliability=reliability, per_class=per_class)
        return dict(ECE=ece, MCE=mce, gap=float(gap), cwECE=cw_ece,
                    num_detections=num_detections)
