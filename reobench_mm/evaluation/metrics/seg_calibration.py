"""The calibration metric of a semantic segmentor: :class:`SegCalibrationMetric`.

An MMEngine metric (prefix ``calib``) that softmaxes mmseg's ``seg_logits`` (optionally
with a temperature) and returns ``ECE``, ``aECE``, ``MCE``, ``gap``, ``NLL``, ``Brier``,
``cwECE``, ``AURC``, ``eAURC`` and ``acc@90cov``
(:data:`~reobench_mm.evaluation.keys.CALIBRATION_METRICS`),
computed by :class:`~reobench_mm.evaluation.functional.calibration.PixelCalibrationStats`.

Distributed evaluation: MMEngine's ``DefaultSampler`` pads the last round with repeated
images when the dataset size is not a multiple of the number of processes. Each process
keeps its last sample apart (:class:`~reobench_mm.evaluation.functional.streaming.RankSum`),
and the repeats are left out once the dataset size is known, as ``IoUMetric`` drops them.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log

from ...fileio import finite_or_none
from ...registry import METRICS
from ..functional.calibration import PixelCalibrationStats
from ..functional.image_stats import CalibrationImageStats
from ..functional.streaming import RankSum, sum_rank_totals
from ..keys import CALIBRATION_METRICS, CALIBRATION_PREFIX
from .base import DatasetSizeMixin, kept_image_terms

__all__ = ['SegCalibrationMetric']


def _sample_field(data_sample: Any, key: str) -> torch.Tensor:
    """``data_sample[key]['data']`` for the dicts MMEngine passes (or a SegDataSample)."""
    if isinstance(data_sample, Mapping):
        if key not in data_sample:
            raise KeyError(f'data sample has no {key!r} (keys: {sorted(data_sample)})')
        field = data_sample[key]
        return field['data'] if isinstance(field, Mapping) else field.data
    if not hasattr(data_sample, key):
        raise KeyError(f'data sample has no {key!r}')
    return getattr(data_sample, key).data


def image_terms(stats: PixelCalibrationStats):
    """One image's terms of the ECE, gap, NLL and Brier sums: ``(bins (K, 3): count,
    confidence sum, correct count; sums (2,): NLL sum, Brier sum)``."""
    bins = np.stack([stats.top_count, stats.top_confidence_sum, stats.top_correct],
                    axis=-1).astype(np.float64)
    return bins, np.array([stats.nll_sum, stats.brier_sum], dtype=np.float64)


@METRICS.register_module()
class SegCalibrationMetric(DatasetSizeMixin, BaseMetric):
    """Calibration and selective prediction of a semantic segmentor (prefix ``calib``).

    Probabilities are ``softmax(seg_logits / temperature)`` over the classes, computed in
    float64 in chunks of pixels; the prediction is their arg-max (mmseg's
    ``pred_sem_seg``). Each process keeps ONE running sum of per-sample
    :class:`PixelCalibrationStats` (a :class:`~reobench_mm.evaluation.functional.streaming.RankSum`,
    its last sample apart) as ``self.results == [rank_sum]``; MMEngine gathers one per
    process and :meth:`compute_metrics` sums them, leaving out the samples MMEngine's
    sampler repeated to pad the last round, so several processes give the numbers of
    one. Returns ``ECE``, ``aECE``, ``MCE``, ``gap``, ``NLL``, ``Brier``,
    ``cwECE``, ``AURC``, ``eAURC`` and ``acc@90cov`` (fractions, defined in
    :mod:`reobench_mm.evaluation.functional.calibration`)
    and keeps JSON-able details on :attr:`last_details` (reliability data, classwise ECE
    and MCE per class, the equal-mass bins of aECE with its error bound
    (``adaptive``), the risk-coverage curve with at most 201 points and the accumulator).

    Args:
        num_bins (int): Bins of ECE / aECE / MCE / classwise ECE / reliability diagram.
            Defaults to 15.
        selective_bins (int): Bins of the fine confidence histogram of the selective
            metrics and of aECE's equal-mass bins. Defaults to 10000.
        ignore_index (int): Label of ignored pixels. Defaults to 255.
        temperature (float): Logits are divided by it before the softmax (> 0).
            Defaults to 1.0.
        collect_device (str): ``'cpu'`` or ``'gpu'``. Defaults to ``'cpu'``.
        prefix (str, optional): Prefix of the metric names. Defaults to ``'calib'``.
        collect_dir (str, optional): Shared folder of the CPU collection across
            processes (MMEngine's default makes one under ``.dist_test``).
        chunk_pixels (int): Pixels softmaxed at once. Defaults to 262144.
    """
    default_prefix: Optional[str] = CALIBRATION_PREFIX
    #: Largest number of points of the saved risk-coverage curve.
    CURVE_POINTS = 201

    def __init__(self, num_bins: int = 15, selective_bins: int = 10000,
                 ignore_index: int = 255, temperature: float = 1.0,
                 collect_device: str = 'cpu', prefix: Optional[str] = None,
                 collect_dir: Optional[str] = None, chunk_pixels: int = 1 << 18) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix,
                         collect_dir=collect_dir)
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
                or not math.isfinite(temperature) or temperature <= 0:
            raise ValueError(f'temperature must be a finite number > 0, got {temperature!r}')
        if not isinstance(chunk_pixels, int) or chunk_pixels < 1:
            raise ValueError(f'chunk_pixels must be an integer >= 1, got {chunk_pixels!r}')
        PixelCalibrationStats(2, num_bins, selective_bins)  # validates the bin counts
        self.num_bins = num_bins
        self.selective_bins = selective_bins
        self.ignore_index = ignore_index
        self.temperature = float(temperature)
        self.chunk_pixels = chunk_pixels
        self.last_details: Optional[Dict[str, Any]] = None
        #: :class:`CalibrationImageStats` of the last evaluation (per image, dataset order)
        self.last_image_stats: Optional[CalibrationImageStats] = None

    def _class_names(self) -> Optional[Sequence[str]]:
        meta = self.dataset_meta or {}
        classes = meta.get('classes')
        return list(classes) if classes is not None else None

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        """Add the valid pixels of every data sample to this process's accumulator."""
        for data_sample in data_samples:
            logits = _sample_field(data_sample, 'seg_logits')
            labels = _sample_field(data_sample, 'gt_sem_seg')
            if logits.ndim != 3:
                raise ValueError(f'seg_logits must have shape (C, H, W), got {tuple(logits.shape)}')
            num_classes = logits.shape[0]
            if num_classes < 2:
                raise ValueError('seg_logits has one channel (a binary sigmoid head); '
                                 'SegCalibrationMetric needs one logit per class (C >= 2)')
            names = self._class_names()
            if names is not None and len(names) != num_classes:
                raise ValueError(f'seg_logits has {num_classes} classes but dataset_meta '
                                 f"lists {len(names)} classes")
            if labels.ndim == 3 and labels.shape[0] == 1:
                labels = labels[0]
            if tuple(labels.shape) != tuple(logits.shape[1:]):
                raise ValueError(f'gt_sem_seg shape {tuple(labels.shape)} does not match the '
                                 f'seg_logits pixels {tuple(logits.shape[1:])}')
            if not self.results:
                self.results.append(RankSum())
            previous = self.results[0].last
            if previous is not None and previous.num_classes != num_classes:
                raise ValueError(f'seg_logits has {num_classes} classes but earlier samples '
                                 f'had {previous.num_classes}')
            stats = PixelCalibrationStats(num_classes, self.num_bins, self.selective_bins)
            labels = labels.detach().reshape(-1).cpu().to(torch.int64)
            flat_logits = logits.detach().reshape(num_classes, -1).cpu()
            valid = labels != self.ignore_index
            if not bool(valid.all()):
                labels, flat_logits = labels[valid], flat_logits[:, valid]
            if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
                bad = labels[(labels < 0) | (labels >= num_classes)][0]
                raise ValueError(f'gt_sem_seg label {int(bad)} is outside [0, {num_classes}) '
                                 f'and is not ignore_index={self.ignore_index}')
            for start in range(0, labels.numel(), self.chunk_pixels):
                stop = start + self.chunk_pixels
                chunk = flat_logits[:, start:stop].to(torch.float64)
                if not math.isfinite(float(chunk.sum())):
                    raise ValueError('seg_logits contains NaN or infinite values')
                probs = torch.softmax(chunk / self.temperature, dim=0)
                stats._accumulate(probs.numpy(), labels[start:stop].numpy())
            self.results[0].add(stats, PixelCalibrationStats.merge, keep=image_terms(stats))

    def compute_metrics(self, results: list) -> Dict[str, float]:
        """Sum the accumulators of all processes and compute the metrics."""
        total = sum_rank_totals(results, self._dataset_size, PixelCalibrationStats.merge)
        kept = kept_image_terms(results, self._dataset_size, type(self).__name__)
        self.last_image_stats = CalibrationImageStats(
            np.stack([bins for bins, _ in kept]), np.stack([sums for _, sums in kept])) \
            if kept else None
        if total is None:
            print_log('SegCalibrationMetric received no pixels; the metrics are NaN',
                      logger='current', level=logging.WARNING)
            self.last_details = None
            return {key: math.nan for key in CALIBRATION_METRICS}
        metrics = total.summary()
        errors = total.classwise_calibration_errors()
        class_mces = total.classwise_maximum_calibration_errors()
        names = self._class_names() or [str(k) for k in range(total.num_classes)]
        self.last_details = {
            'metrics': {key: finite_or_none(value) for key, value in metrics.items()},
            'num_pixels': total.num_pixels,
            'temperature': self.temperature,
            'accuracy': finite_or_none(total.accuracy()),
            'reliability': total.reliability_diagram(),
            'classwise_ece': {str(name): finite_or_none(value)
                              for name, value in zip(names, errors)},
            'classwise_mce': {str(name): finite_or_none(value)
                              for name, value in zip(names, class_mces)},
            'adaptive': total.adaptive_calibration().to_dict(),
            'risk_coverage': total.risk_coverage_curve(max_points=self.CURVE_POINTS),
            'aurc_quantisation_bound': finite_or_none(total.aurc_quantisation_bound()),
            'stats': total.to_dict(),
        }
        return metrics
