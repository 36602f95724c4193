"""Rotated-box AP and mAP of any weighted set of images, from per-image detection flags.

MMRotate's ``DOTAMetric`` computes, for each IoU threshold and class, each image's
true/false-positive flags of its scored detections (``tpfp_default``: VOC matching, a
detection matched to an ignored box is neither), then pools the detections of all images
by descending score and takes the AP of the precision/recall curve (MMDetection's
``average_precision``, ``'11points'`` or ``'area'``); mAP is the mean AP of the classes
with ground truth, averaged over the IoU thresholds. :class:`DetectionImageStats` keeps
those flags (as MMRotate computed them), the scores and the per-image ground-truth counts,
so the same numbers can be computed for any weighted set of images: an image of weight
``k`` counts ``k`` times in every cumulative true/false-positive count and ground-truth
total. With every weight 1 the computation is MMRotate's, in its dtypes and order (the
mAP equals ``DOTAMetric``'s, tested).

Why not call ``average_precision`` per resample: it is a Python loop per class and
resample over all the stacked detections; here the resamples of a class are rows of one
array (cumulative sums of the true positives' and false positives' weights, a running
maximum, a ``searchsorted`` per row), in blocks that stay in the processor's cache: more
than 10 times faster for 1,000 resamples (``benchmarks/bootstrap_intervals.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .image_stats import as_weights, smallest_uint

__all__ = ['TP', 'FP', 'IGNORED', 'EVAL_MODES', 'DetectionImageStats']

#: Detection states of :attr:`DetectionImageStats.state`.
FP, TP, IGNORED = 0, 1, 2
EVAL_MODES = ('11points', 'area')
_EPS = np.finfo(np.float32).eps
#: MMDetection's 11 recall thresholds, the same float64 values.
_RECALL_POINTS = np.arange(0, 1 + 1e-3, 0.1)
#: Resamples computed at once by :meth:`DetectionImageStats._class_ap`.
ROWS_PER_BLOCK = 64


@dataclass
class DetectionImageStats:
    """Per image and class the scored detections' flags and the ground-truth count.

    Attributes:
        num_gts: ``(N, C)`` regular (not ignored) ground-truth boxes per image and class.
        class_offsets: ``(C + 1,)``: the detections of class ``c`` are
            ``class_offsets[c]:class_offsets[c + 1]``, in image order and, within an
            image, in the order of the prediction (the order MMRotate stacks them).
        image: ``(D,)`` image index of each detection.
        score: ``(D,)`` float32 score.
        state: ``(T, D)`` per IoU threshold :data:`TP`, :data:`FP` or :data:`IGNORED`.
        iou_thrs: the ``T`` IoU thresholds.
        eval_mode: ``'11points'`` or ``'area'``.
    """
    num_gts: np.ndarray
    class_offsets: np.ndarray
    image: np.ndarray
    score: np.ndarray
    state: np.ndarray
    iou_thrs: Tuple[float, ...]
    eval_mode: str = '11points'
    kind = 'rotated_detection'

    def __post_init__(self) -> None:
        if self.eval_mode not in EVAL_MODES:
            raise ValueError(f'eval_mode must be one of {EVAL_MODES}, got {self.eval_mode!r}')
        self.iou_thrs = tuple(float(t) for t in np.atleast_1d(self.iou_thrs))
        self.num_gts = smallest_uint(np.asarray(self.num_gts, dtype=np.int64))
        self.class_offsets = np.asarray(self.class_offsets, dtype=np.int64)
        self.image = smallest_uint(np.asarray(self.image, dtype=np.int64))
        self.score = np.asarray(self.score, dtype=np.float32)
        self.state = np.asarray(self.state, dtype=np.uint8)
        n, c = self.num_gts.shape if self.num_gts.ndim == 2 else (None, None)
        d = len(self.score)
        problems = []
        if n is None:
            problems.append(f'num_gts has shape {self.num_gts.shape}, not (images, classes)')
        elif self.class_offsets.shape != (c + 1, ) or self.class_offsets[0] != 0 \
                or self.class_offsets[-1] != d or np.any(np.diff(self.class_offsets) < 0):
            problems.append('class_offsets must rise from 0 to the number of detections, '
                            'one more entry than classes')
        if self.image.shape != (d, ) or (d and n is not None and int(self.image.max()) >= n):
            problems.append('image must give each detection an image index')
        if self.state.shape != (len(self.iou_thrs), d) or \
                (self.state.size and int(self.state.max()) > IGNORED):
            problems.append(f'state must have shape ({len(self.iou_thrs)}, {d}) with values '
                            f'{FP} (false), {TP} (true), {IGNORED} (ignored)')
        if problems:
            raise ValueError('; '.join(problems))

    @classmethod
    def from_tpfp(cls, per_threshold: Sequence[Sequence[Sequence[tuple]]],
                  iou_thrs: Sequence[float], eval_mode: str = '11points'
                  ) -> 'DetectionImageStats':
        """From what MMRotate's ``eval_rbbox_map`` computed: ``per_threshold[t][c][i]`` is
        ``(dets, num_gts, tp, fp)`` of image ``i`` and class ``c`` at IoU threshold ``t``:
        the ``(m, 6)`` detections (box and score), the number of regular ground-truth
        boxes, and the ``(1, m)`` (or ``(m,)``) flags ``tpfp_default`` returned."""
        if not per_threshold:
            raise ValueError('no IoU threshold was evaluated')
        first = per_threshold[0]
        num_classes, num_images = len(first), len(first[0]) if first else 0
        num_gts = np.zeros((num_images, num_classes), dtype=np.int64)
        offsets, images, scores = [0], [], []
        states: List[List[np.ndarray]] = [[] for _ in per_threshold]
        for c in range(num_classes):
            for i, (dets, gts, _, _) in enumerate(first[c]):
                dets = np.asarray(dets)
                num_gts[i, c] = int(gts)
                images.append(np.full(len(dets), i, dtype=np.int64))
                scores.append(dets[:, -1].astype(np.float32) if len(dets)
                              else np.zeros(0, np.float32))
                for t, calls in enumerate(per_threshold):
                    other, _, tp, fp = calls[c][i]
                    if len(other) != len(dets) or int(calls[c][i][1]) != int(gts):
                        raise ValueError(f'IoU threshold {iou_thrs[t]} saw other detections '
                                         f'or ground truth than the first (class {c}, '
                                         f'image {i})')
                    tp = np.asarray(tp).reshape(-1)
                    fp = np.asarray(fp).reshape(-1)
                    if np.any((tp > 0) & (fp > 0)):
                        raise ValueError('a detection is both a true and a false positive')
                    states[t].append(np.where(tp > 0, TP, np.where(fp > 0, FP, IGNORED))
                                     .astype(np.uint8))
            offsets.append(offsets[-1] + sum(len(np.asarray(d)) for d, *_ in first[c]))
        cat = (lambda parts, dtype: np.concatenate(parts) if parts else np.zeros(0, dtype))
        state = np.stack([cat(s, np.uint8) for s in states]) if states else \
            np.zeros((0, 0), np.uint8)
        return cls(num_gts, np.asarray(offsets), cat(images, np.int64),
                   cat(scores, np.float32), state, tuple(iou_thrs), eval_mode)

    @property
    def num_images(self) -> int:
        return self.num_gts.shape[0]

    @property
    def num_classes(self) -> int:
        return self.num_gts.shape[1]

    # ------------------------------------------------------------------ AP
    def _class_ap(self, weights: np.ndarray, threshold: int, c: int, gts: np.ndarray
                  ) -> np.ndarray:
        """``(B,)`` float32 AP of class ``c`` at threshold ``threshold`` (``gts``: its
        ``(B,)`` weighted ground-truth counts).

        Only the true positives' points of the precision/recall curve are computed:
        recall rises only there, and the best precision at or after a true positive is
        reached at a true positive (a false positive lowers the precision of the last
        true positive before it), so the AP of both modes is MMRotate's; detections of
        an ignored box (neither true nor false) do not move the curve and are skipped.
        The resamples are computed in blocks of :data:`ROWS_PER_BLOCK` rows, whose
        arrays stay in the processor's cache.
        """
        start, stop = self.class_offsets[c], self.class_offsets[c + 1]
        ap = np.zeros(len(weights), dtype=np.float32)
        if stop == start:
            return ap
        block = slice(start, stop)
        order = np.argsort(-self.score[block])  # as MMRotate sorts the stacked detections
        state = self.state[threshold, block][order]
        images = self.image[block][order].astype(np.int64)
        true = state == TP
        if not true.any():
            return ap
        false = state == FP
        true_images, false_images = images[true], images[false]
        false_before = np.cumsum(false)[true]  # false positives before each true positive
        for first in range(0, len(weights), ROWS_PER_BLOCK):
            rows = slice(first, first + ROWS_PER_BLOCK)
            ap[rows] = self._block_ap(weights[rows], gts[rows], true_images, false_images,
                                      false_before)
        return ap

    def _block_ap(self, weights: np.ndarray, gts: np.ndarray, true_images: np.ndarray,
                  false_images: np.ndarray, false_before: np.ndarray) -> np.ndarray:
        """The AP of some resamples of one class (see :meth:`_class_ap`)."""
        rows = len(weights)
        # cumulative true-positive weight at each true positive
        tp = weights[:, true_images]
        np.cumsum(tp, axis=1, dtype=np.float32, out=tp)
        # cumulative false-positive weight before each true positive (a 0 column first)
        fp_cum = np.zeros((rows, len(false_images) + 1), dtype=np.float32)
        if len(false_images):
            np.cumsum(weights[:, false_images], axis=1, dtype=np.float32, out=fp_cum[:, 1:])
        precision = fp_cum[:, false_before]  # the false positives, then in place:
        precision += tp
        np.maximum(precision, np.float32(_EPS), out=precision)
        np.divide(tp, precision, out=precision)  # tp / max(tp + fp, eps)
        envelope = np.maximum.accumulate(precision[:, ::-1], axis=1)[:, ::-1]
        safe_gts = np.maximum(gts, _EPS)
        if self.eval_mode == 'area':
            recall = tp.astype(np.float64) / safe_gts[:, None]
            steps = np.diff(recall, axis=1, prepend=0.0)
            return (steps * envelope).sum(axis=1).astype(np.float32)
        # 11 points: the best precision at recall >= r is the envelope at the first true
        # positive whose recall reaches r; the counts are whole numbers, so that first
        # index is found on them (the smallest count m with m / G >= r, as MMRotate
        # compares recall = count / G with r in float64)
        need = np.ceil(_RECALL_POINTS[None, :] * gts[:, None])
        need = np.where((need - 1) / safe_gts[:, None] >= _RECALL_POINTS, need - 1, need)
        need = np.where(need / safe_gts[:, None] < _RECALL_POINTS, need + 1, need)
        need = need.astype(np.float32)
        length = tp.shape[1]
        first = np.stack([np.searchsorted(tp[b], need[b], side='left') for b in range(rows)])
        found = first < length
        best = np.take_along_axis(envelope, np.minimum(first, length - 1), axis=1)
        ap = np.zeros(rows, dtype=np.float32)
        for point in range(len(_RECALL_POINTS)):  # summed in MMDetection's order
            ap += np.where(found[:, point], best[:, point], np.float32(0))
        ap /= np.float32(11)
        return ap

    def class_ap(self, weights=None, threshold: int = 0) -> Tuple[np.ndarray, np.ndarray]:
        """``(B, C)`` float32 AP (fractions) at one IoU threshold and ``(B, C)`` weighted
        ground-truth counts (a class without ground truth has AP 0 and is left out of
        mAP)."""
        weights = self._weights(weights)
        all_gts = weights @ self.num_gts.astype(np.float64)
        weights = weights.astype(np.float32)
        aps = [self._class_ap(weights, threshold, c, all_gts[:, c])
               for c in range(self.num_classes)]
        return np.stack(aps, axis=1), all_gts

    def _weights(self, weights) -> np.ndarray:
        weights = as_weights(weights, self.num_images)
        if not np.array_equal(weights, np.round(weights)) or weights.min(initial=0) < 0:
            raise ValueError('detection AP weights must be whole numbers >= 0 (how often '
                             'each image is drawn)')
        return weights

    def mean_ap(self, weights=None, classes: Optional[Sequence[int]] = None) -> np.ndarray:
        """``(B,)`` mAP as ``DOTAMetric`` computes it (a fraction): per threshold the
        float32 mean AP of the classes with ground truth (0.0 when none has), then the
        mean over the thresholds; over ``classes`` only, given (the like-for-like number
        of a shift set that can hold only those)."""
        weights = self._weights(weights)
        per_threshold = []
        for t in range(len(self.iou_thrs)):
            aps, gts = self.class_ap(weights, t)
            if classes is not None:
                aps, gts = aps[:, list(classes)], gts[:, list(classes)]
            per_threshold.append([aps[b][gts[b] > 0].mean().item() if (gts[b] > 0).any()
                                  else 0.0 for b in range(len(weights))])
        values = np.asarray(per_threshold, dtype=np.float64)
        return np.array([sum(column) / len(column) for column in values.T.tolist()])

    def values(self, weights=None, classes: Optional[Sequence[int]] = None) -> np.ndarray:
        """``(B,)`` mAP in percent (over ``classes`` only, given)."""
        return self.mean_ap(weights, classes) * 100.0

    def detections_outside(self, classes: Sequence[int]) -> int:
        """How many detections are of classes not in ``classes`` (on a shift set that can
        hold only those: detections no object of the set can match)."""
        counts = np.diff(np.asarray(self.class_offsets))
        keep = set(int(c) for c in classes)
        return int(sum(n for c, n in enumerate(counts) if c not in keep))

    def recorded_value(self) -> float:
        """mAP of all images as ``DOTAMetric`` returns it (a fraction)."""
        return float(self.mean_ap()[0])

    def per_image_values(self, chunk: int = 256) -> np.ndarray:
        """``(N,)`` each image's own mAP in percent (classes with ground truth in it;
        NaN for an image without ground truth): the score of worst-case lists."""
        out = np.full(self.num_images, np.nan)
        for start in range(0, self.num_images, chunk):
            stop = min(start + chunk, self.num_images)
            weights = np.zeros((stop - start, self.num_images), dtype=np.float32)
            weights[np.arange(stop - start), np.arange(start, stop)] = 1
            out[start:stop] = self.values(weights)
        out[self.num_gts.astype(np.int64).sum(axis=1) == 0] = np.nan
        return out

    def concat(self, other: 'DetectionImageStats') -> 'DetectionImageStats':
        """These images followed by ``other``'s (same classes, IoU thresholds and AP
        convention): per class this set's detections, then ``other``'s."""
        if other.num_classes != self.num_classes or other.iou_thrs != self.iou_thrs \
                or other.eval_mode != self.eval_mode:
            raise ValueError('cannot join detection statistics of other classes, IoU '
                             'thresholds or AP convention')
        parts = []
        for c in range(self.num_classes):
            for stats, shift in ((self, 0), (other, self.num_images)):
                block = slice(stats.class_offsets[c], stats.class_offsets[c + 1])
                parts.append((stats.image[block].astype(np.int64) + shift,
                              stats.score[block], stats.state[:, block]))
        sizes = [np.diff(s.class_offsets) for s in (self, other)]
        offsets = np.concatenate([[0], np.cumsum(sizes[0] + sizes[1])])
        return DetectionImageStats(
            np.concatenate([self.num_gts.astype(np.int64), other.num_gts.astype(np.int64)]),
            offsets, np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts], 1),
            self.iou_thrs, self.eval_mode)

    @classmethod
    def from_choice(cls, stats: Sequence['DetectionImageStats'], choice: np.ndarray
                    ) -> 'DetectionImageStats':
        """Image ``i``'s detections and ground truth from ``stats[choice[i]]`` (statistics
        of the same images, classes, IoU thresholds and AP convention): the per-image
        worst of several conditions."""
        first = stats[0]
        if any(s.num_gts.shape != first.num_gts.shape or s.iou_thrs != first.iou_thrs
               or s.eval_mode != first.eval_mode for s in stats):
            raise ValueError('cannot choose images among detection statistics of other '
                             'images, classes, IoU thresholds or AP convention')
        choice = np.asarray(choice, dtype=np.int64)
        parts, sizes = [], []
        for c in range(first.num_classes):
            blocks = []
            for k, item in enumerate(stats):
                block = slice(item.class_offsets[c], item.class_offsets[c + 1])
                images = item.image[block].astype(np.int64)
                keep = choice[images] == k
                blocks.append((images[keep], item.score[block][keep],
                               item.state[:, block][:, keep]))
            images = np.concatenate([b[0] for b in blocks])
            order = np.argsort(images, kind='stable')  # image order, prediction order within
            parts.append((images[order], np.concatenate([b[1] for b in blocks])[order],
                          np.concatenate([b[2] for b in blocks], 1)[:, order]))
            sizes.append(len(images))
        num_gts = np.stack([stats[k].num_gts[i].astype(np.int64)
                            for i, k in enumerate(choice)]) if len(choice) else \
            first.num_gts.astype(np.int64)
        return cls(num_gts, np.concatenate([[0], np.cumsum(sizes)]),
                   np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                   np.concatenate([p[2] for p in parts], 1), first.iou_thrs, first.eval_mode)

    # ------------------------------------------------------------------ storage
    def to_arrays(self) -> Dict[str, np.ndarray]:
        return {'num_gts': self.num_gts, 'class_offsets': self.class_offsets,
                'image': self.image, 'score': self.score, 'state': self.state,
                'iou_thrs': np.asarray(self.iou_thrs, dtype=np.float64),
                'eval_mode': np.asarray(self.eval_mode)}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> 'DetectionImageStats':
        return cls(arrays['num_gts'], arrays['class_offsets'], arrays['image'],
                   arrays['score'], arrays['state'], tuple(arrays['iou_thrs'].tolist()),
                   str(arrays['eval_mode']))
