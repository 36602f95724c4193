"""Per-image sufficient statistics of a condition, and its metrics on any weighted set of
its images.

A metric of a whole test set is a function of sums over images. Keeping each image's
terms of those sums lets the metric be recomputed for any subset or bootstrap resample
(a row of per-image counts, :func:`~reobench_mm.evaluation.functional.bootstrap.resample_counts`)
without running the model again:

- :class:`SegmentationImageStats`: per image and class the intersection, prediction and
  label pixel counts of MMSeg's ``IoUMetric`` (the union is prediction + label -
  intersection): every IoU-based number;
- :class:`CalibrationImageStats`: per image the confidence-bin counts, confidence sums and
  correct counts, and the NLL and Brier sums (pixels; for detections the score bins,
  score sums and true-positive counts): ECE, the signed gap, NLL and Brier;
- :class:`~reobench_mm.evaluation.functional.detection_ap.DetectionImageStats`: per image
  and class the scored detections' true/false-positive flags and the ground-truth count,
  for rotated-box AP / mAP.

:class:`~reobench_mm.evaluation.functional.condition_stats.ImageStats` holds one
condition's statistics and reads and writes them as one ``.npz`` file. ``weights`` arguments are ``(B, N)`` arrays (B resamples of the N
images; None: every image once) and the values come back with shape ``(B,)``.
"""
from __future__ import annotations

import math
import os.path as osp
import warnings
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...fileio import plain_float

__all__ = ['SegmentationImageStats', 'CalibrationImageStats', 'image_ids_from_paths',
           'as_weights', 'smallest_uint']


def smallest_uint(values: np.ndarray) -> np.ndarray:
    """Non-negative integers in the smallest unsigned dtype that holds them."""
    values = np.asarray(values)
    top = int(values.max()) if values.size else 0
    if values.size and int(values.min()) < 0:
        raise ValueError('counts must be >= 0')
    for dtype in (np.uint8, np.uint16, np.uint32, np.uint64):
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype)
    raise ValueError(f'count {top} does not fit 64 bits')


def image_ids_from_paths(paths: Sequence[str]) -> Tuple[str, ...]:
    """The id of each image: its file name, or, where two images share a file name, its
    path relative to the images' common folder (ids are compared across runs and
    machines, so absolute locations are left out)."""
    paths = [str(p) for p in paths]
    names = [osp.basename(p) for p in paths]
    if len(set(names)) == len(names):
        return tuple(names)
    root = osp.commonpath([osp.abspath(p) for p in paths]) if paths else ''
    return tuple(osp.relpath(osp.abspath(p), root) for p in paths)


def as_weights(weights: Optional[np.ndarray], num_images: int) -> np.ndarray:
    """``(B, N)`` float64 weights; None gives one row of ones."""
    if weights is None:
        return np.ones((1, num_images), dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim == 1:
        weights = weights[None]
    if weights.ndim != 2 or weights.shape[1] != num_images:
        raise ValueError(f'weights must have shape (resamples, {num_images}), got '
                         f'{weights.shape}')
    return weights


def _nanmean_rows(values: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        return np.nanmean(values, axis=1)


@dataclass
class SegmentationImageStats:
    """Per image and class the intersection, prediction and label pixel counts of
    ``IoUMetric`` (pixels labelled ``ignore_index`` left out), shape ``(N, C, 3)``.

    Attributes:
        areas: ``(N, C, 3)`` non-negative integers: intersection, prediction, label.
        nan_to_num: ``IoUMetric``'s ``nan_to_num`` (the value of a class absent from both
            the labels and the predictions; None: NaN, left out of the mean).
    """
    areas: np.ndarray
    nan_to_num: Optional[float] = None
    kind = 'segmentation'

    def __post_init__(self) -> None:
        areas = np.asarray(self.areas)
        if areas.ndim != 3 or areas.shape[2] != 3:
            raise ValueError(f'areas must have shape (images, classes, 3), got {areas.shape}')
        if areas.size and (areas.min() < 0 or np.any(areas[..., 0] > areas[..., 1:].min(-1))):
            raise ValueError('areas must be counts with intersection <= prediction and '
                             '<= label')
        self.areas = smallest_uint(areas)

    @classmethod
    def from_iou_results(cls, results: Sequence[Sequence], nan_to_num: Optional[float] = None
                         ) -> 'SegmentationImageStats':
        """From ``IoUMetric``'s per-image results ``(intersect, union, pred, label)``."""
        rows = []
        for intersect, union, pred, label in results:
            row = [np.asarray(getattr(a, 'numpy', lambda: a)(), dtype=np.float64)
                   for a in (intersect, pred, label)]
            rows.append(np.stack(row, axis=-1))
        areas = np.stack(rows) if rows else np.zeros((0, 0, 3))
        if not np.array_equal(areas, np.round(areas)):
            raise ValueError('pixel counts must be whole numbers')
        return cls(areas.astype(np.int64), nan_to_num)

    @property
    def num_images(self) -> int:
        return self.areas.shape[0]

    @property
    def num_classes(self) -> int:
        return self.areas.shape[1]

    def totals(self, weights: Optional[np.ndarray] = None) -> np.ndarray:
        """``(B, C, 4)`` weighted sums: intersection, union, prediction, label."""
        weights = as_weights(weights, self.num_images)
        flat = self.areas.reshape(self.num_images, -1).astype(np.float64)
        sums = (weights @ flat).reshape(len(weights), self.num_classes, 3)
        union = sums[..., 1] + sums[..., 2] - sums[..., 0]
        return np.stack([sums[..., 0], union, sums[..., 1], sums[..., 2]], axis=-1)

    def class_iou(self, weights: Optional[np.ndarray] = None) -> np.ndarray:
        """``(B, C)`` IoU in percent (NaN, or ``nan_to_num``, where the union is 0)."""
        totals = self.totals(weights)
        with np.errstate(invalid='ignore', divide='ignore'):
            iou = totals[..., 0] / totals[..., 1] * 100.0
        if self.nan_to_num is not None:
            iou = np.where(np.isnan(iou), float(self.nan_to_num) * 100.0, iou)
        return iou

    def values(self, weights: Optional[np.ndarray] = None,
               classes: Optional[Sequence[int]] = None) -> np.ndarray:
        """``(B,)`` mIoU in percent (the mean over classes with a defined IoU; over
        ``classes`` only, given: the like-for-like number of a shift set that can hold
        only those)."""
        iou = self.class_iou(weights)
        return _nanmean_rows(iou if classes is None else iou[:, list(classes)])

    def recorded_value(self) -> float:
        """mIoU of all images as ``IoUMetric`` computes and rounds it: the per-image
        float32 areas summed one image after another in float32 (as its ``sum`` of the
        per-image tensors: totals above 2**24 pixels are rounded the same way), float32
        per-class IoU, their NaN-mean times 100, rounded to 2 decimals."""
        areas = self.areas.astype(np.float32)
        intersect = areas[..., 0]
        union = (self.areas[..., 1].astype(np.int64) + self.areas[..., 2]
                 - self.areas[..., 0]).astype(np.float32)
        if self.num_images:
            intersect = np.cumsum(intersect, axis=0, dtype=np.float32)[-1]
            union = np.cumsum(union, axis=0, dtype=np.float32)[-1]
        else:
            intersect = union = np.zeros(self.num_classes, np.float32)
        with np.errstate(invalid='ignore', divide='ignore'):
            iou = intersect / union
        if self.nan_to_num is not None:
            iou = np.nan_to_num(iou, nan=self.nan_to_num)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', RuntimeWarning)
            return plain_float(np.round(np.nanmean(iou) * 100, 2))

    def per_image_values(self) -> np.ndarray:
        """``(N,)`` each image's own mIoU (mean over the classes present in its label or
        prediction), percent: the score of worst-case lists."""
        totals = self.areas.astype(np.float64)
        union = totals[..., 1] + totals[..., 2] - totals[..., 0]
        with np.errstate(invalid='ignore', divide='ignore'):
            iou = totals[..., 0] / union * 100.0
        return _nanmean_rows(iou)

    @classmethod
    def from_choice(cls, stats: Sequence['SegmentationImageStats'], choice: np.ndarray
                    ) -> 'SegmentationImageStats':
        """Image ``i``'s areas from ``stats[choice[i]]`` (statistics of the same images
        and classes): the per-image worst of several conditions."""
        if len({s.areas.shape for s in stats}) != 1 or \
                len({s.nan_to_num for s in stats}) != 1:
            raise ValueError('cannot choose images among segmentation statistics of other '
                             'images or classes')
        areas = np.stack([stats[k].areas[i].astype(np.int64) for i, k in enumerate(choice)]) \
            if len(choice) else stats[0].areas.astype(np.int64)
        return cls(areas, stats[0].nan_to_num)

    def concat(self, other: 'SegmentationImageStats') -> 'SegmentationImageStats':
        """These images followed by ``other``'s (same classes and ``nan_to_num``)."""
        if other.num_classes != self.num_classes or other.nan_to_num != self.nan_to_num:
            raise ValueError(f'cannot join statistics of {self.num_classes} and '
                             f'{other.num_classes} classes (or other nan_to_num)')
        return SegmentationImageStats(
            np.concatenate([self.areas.astype(np.int64), other.areas.astype(np.int64)]),
            self.nan_to_num)

    def to_arrays(self) -> Dict[str, np.ndarray]:
        arrays = {'areas': self.areas}
        if self.nan_to_num is not None:
            arrays['nan_to_num'] = np.asarray(float(self.nan_to_num))
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> 'SegmentationImageStats':
        nan_to_num = float(arrays['nan_to_num']) if 'nan_to_num' in arrays else None
        return cls(np.asarray(arrays['areas']).astype(np.int64), nan_to_num)


@dataclass
class CalibrationImageStats:
    """Per image the terms of a calibration metric's sums.

    Attributes:
        bins: ``(N, K, 3)``: per confidence bin the count, the sum of confidences and the
            number correct (pixels: arg-max right; detections: true positives).
        sums: ``(N, 2)`` NLL and Brier sums (pixels), or ``(N, 0)`` (detections).
    """
    bins: np.ndarray
    sums: np.ndarray

    def __post_init__(self) -> None:
        self.bins = np.asarray(self.bins, dtype=np.float64)
        self.sums = np.asarray(self.sums, dtype=np.float64)
        if self.bins.ndim != 3 or self.bins.shape[2] != 3:
            raise ValueError(f'bins must have shape (images, bins, 3), got {self.bins.shape}')
        if self.sums.ndim != 2 or self.sums.shape[0] != self.bins.shape[0] \
                or self.sums.shape[1] not in (0, 2):
            raise ValueError(f'sums must have shape ({self.bins.shape[0]}, 2 or 0), got '
                             f'{self.sums.shape}')

    @property
    def num_images(self) -> int:
        return self.bins.shape[0]

    @property
    def names(self) -> Tuple[str, ...]:
        """The metrics :meth:`values` gives."""
        return ('ECE', 'gap', 'NLL', 'Brier') if self.sums.shape[1] else ('ECE', 'gap')

    def values(self, weights: Optional[np.ndarray] = None) -> Dict[str, np.ndarray]:
        """name -> ``(B,)``: ECE, gap (mean confidence - accuracy), and for pixels NLL and
        Brier (fractions, as the metrics report them; NaN without pixels)."""
        weights = as_weights(weights, self.num_images)
        num_bins = self.bins.shape[1]
        totals = (weights @ self.bins.reshape(self.num_images, -1)).reshape(
            len(weights), num_bins, 3)
        count = totals[..., 0].sum(1)
        with np.errstate(invalid='ignore', divide='ignore'):
            out = {'ECE': np.abs(totals[..., 1] - totals[..., 2]).sum(1) / count,
                   'gap': (totals[..., 1].sum(1) - totals[..., 2].sum(1)) / count}
            if self.sums.shape[1]:
                sums = weights @ self.sums
                out['NLL'] = sums[:, 0] / count
                out['Brier'] = sums[:, 1] / count
        return {k: np.where(count > 0, v, math.nan) for k, v in out.items()}

    def concat(self, other: 'CalibrationImageStats') -> 'CalibrationImageStats':
        """These images followed by ``other``'s (same bins and sums)."""
        if other.bins.shape[1:] != self.bins.shape[1:] or \
                other.sums.shape[1] != self.sums.shape[1]:
            raise ValueError('cannot join calibration statistics of other bins')
        return CalibrationImageStats(np.concatenate([self.bins, other.bins]),
                                     np.concatenate([self.sums, other.sums]))

    def to_arrays(self) -> Dict[str, np.ndarray]:
        return {'bins': self.bins, 'sums': self.sums}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> 'CalibrationImageStats':
        return cls(arrays['bins'], arrays['sums'])
