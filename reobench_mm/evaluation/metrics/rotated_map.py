"""MMRotate's DOTA mAP without a process pool per evaluation.

MMRotate 1.x computes rotated-box mAP (``DOTAMetric`` → ``eval_rbbox_map``) with a fresh
``spawn`` pool of 4 processes on every evaluation. Each spawned process re-imports the
main script and torch: on a CPU this costs tens of seconds per evaluation, which
dominates small test sets and multiplies over the 61 evaluations of a robustness sweep.
:class:`InProcessDOTAMetric` is ``DOTAMetric`` computed in the calling process: it runs the
same per-image TP/FP function of MMRotate in the calling process (same numbers, tested);
``in_process=False`` keeps MMRotate's pool. Computed in process, the per-image flags
MMRotate's ``tpfp_default`` returns are kept as :attr:`InProcessDOTAMetric.last_image_stats`
(:class:`~reobench_mm.evaluation.functional.detection_ap.DetectionImageStats`), from which
AP and mAP of any set of images are recomputed.
"""
from __future__ import annotations

import itertools
import threading
from contextlib import contextmanager
from typing import Iterator, List, Optional, Sequence, Union

import numpy as np
from mmengine.evaluator import BaseMetric

from ...fileio import plain_float
from ...registry import METRICS
from ..functional.detection_ap import DetectionImageStats

__all__ = ['InProcessDOTAMetric', 'in_process_rbbox_map', 'float32_shortest']

_PATCH_LOCK = threading.RLock()


class _SerialPool:
    """The two methods of ``multiprocessing.Pool`` that ``eval_rbbox_map`` uses; with
    ``calls``, each ``starmap`` appends ``[(dets, num_gts, tp, fp) per image]`` to it
    (``eval_rbbox_map`` maps ``tpfp_default`` once per class, in class order)."""

    def __init__(self, calls: Optional[list] = None) -> None:
        self.calls = calls

    def starmap(self, func, iterable) -> list:
        arguments = list(iterable)
        results = list(itertools.starmap(func, arguments))
        if self.calls is not None:
            self.calls.append([(args[0], len(args[1]), *result[:2])
                               for args, result in zip(arguments, results)])
        return results

    def close(self) -> None:
        pass


class _SerialContext:
    """``get_context()``'s stand-in: each ``Pool`` (one per ``eval_rbbox_map`` call, i.e.
    per IoU threshold) records into a new list of ``pools`` when that is given."""

    def __init__(self, pools: Optional[list] = None) -> None:
        self.pools = pools

    def Pool(self, processes: Optional[int] = None) -> _SerialPool:  # noqa: N802
        if self.pools is None:
            return _SerialPool()
        self.pools.append([])
        return _SerialPool(self.pools[-1])


def float32_shortest(value):
    """mmrotate computes AP in float32 (its precision and recall arrays) and returns it in
    Python floats: a value that is exactly a float32 is returned as float32's shortest
    decimal (0.030303031, not 0.03030303120613098); the others (the mean over several IoU
    thresholds, computed in double precision; rounded values) are left as they are."""
    if isinstance(value, (float, np.floating)) and np.isfinite(value) \
            and float(np.float32(value)) == float(value):
        return plain_float(np.float32(value))
    return value


@contextmanager
def in_process_rbbox_map(pools: Optional[list] = None) -> Iterator[None]:
    """Within the block, MMRotate's ``eval_rbbox_map`` computes in this process; with
    ``pools`` (a list), each call appends the per-class, per-image TP/FP results of its
    ``tpfp_default`` to it (see :class:`_SerialPool`)."""
    from mmrotate.evaluation.functional import mean_ap
    context = _SerialContext(pools)
    with _PATCH_LOCK:
        original = mean_ap.get_context
        mean_ap.get_context = lambda method=None: context
        try:
            yield
        finally:
            mean_ap.get_context = original


@contextmanager
def _recording_eval_rbbox_map(calls: List[list]) -> Iterator[None]:
    """Within the block, ``DOTAMetric``'s calls of ``eval_rbbox_map`` append their
    per-class results (the list ``DOTAMetric`` discards) to ``calls``."""
    from mmrotate.evaluation.metrics import dota_metric
    with _PATCH_LOCK:
        original = dota_metric.eval_rbbox_map

        def recording(*args, **kwargs):
            mean_ap, per_class = original(*args, **kwargs)
            calls.append(per_class)
            return mean_ap, per_class

        dota_metric.eval_rbbox_map = recording
        try:
            yield
        finally:
            dota_metric.eval_rbbox_map = original


@METRICS.register_module()
class InProcessDOTAMetric(BaseMetric):
    """MMRotate's ``DOTAMetric`` (same arguments, same numbers, prefix ``dota``) whose mAP
    is computed in this process instead of a fresh pool of 4 spawned processes.

    Wraps a ``DOTAMetric`` built on construction (so importing reobench_mm does not
    import MMRotate); ``in_process=False`` keeps MMRotate's pool. With ``classwise=True``
    (default) the metrics also hold ``'AP.<class>'``, the per-class AP that ``DOTAMetric``
    computes and only logs (averaged over ``iou_thrs`` like ``mAP``; not with
    ``scale_ranges``).
    """
    default_prefix: Optional[str] = 'dota'

    def __init__(self, iou_thrs: Union[float, List[float]] = 0.5,
                 scale_ranges: Optional[List[tuple]] = None,
                 metric: Union[str, List[str]] = 'mAP', predict_box_type: str = 'rbox',
                 format_only: bool = False, outfile_prefix: Optional[str] = None,
                 merge_patches: bool = False, iou_thr: float = 0.1,
                 eval_mode: str = '11points', in_process: bool = True,
                 classwise: bool = True, collect_device: str = 'cpu',
                 prefix: Optional[str] = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        if eval_mode not in ('11points', 'area'):
            raise ValueError(f"eval_mode must be '11points' or 'area', got {eval_mode!r}")
        from mmrotate.evaluation import DOTAMetric
        self.inner = DOTAMetric(iou_thrs=iou_thrs, scale_ranges=scale_ranges, metric=metric,
                                predict_box_type=predict_box_type, format_only=format_only,
                                outfile_prefix=outfile_prefix, merge_patches=merge_patches,
                                iou_thr=iou_thr, eval_mode=eval_mode,
                                collect_device=collect_device, prefix=prefix)
        self.in_process = in_process
        self.classwise = classwise
        #: ``(image ids, DetectionImageStats)`` of the last evaluation computed in process
        #: (None otherwise, or with ``scale_ranges``)
        self.last_image_stats = None

    @property
    def dataset_meta(self) -> Optional[dict]:
        return self._dataset_meta

    @dataset_meta.setter
    def dataset_meta(self, dataset_meta: dict) -> None:
        self._dataset_meta = dataset_meta
        self.inner.dataset_meta = dataset_meta

    def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
        self.inner.process(data_batch, data_samples)
        self.results.extend(self.inner.results)  # collected across ranks by BaseMetric
        self.inner.results.clear()

    def compute_metrics(self, results: list) -> dict:
        calls: List[list] = []
        pools: List[list] = []
        self.last_image_stats = None
        with _recording_eval_rbbox_map(calls):
            if self.in_process:
                with in_process_rbbox_map(pools):
                    metrics = self.inner.compute_metrics(results)
            else:
                metrics = self.inner.compute_metrics(results)
        if self.classwise and calls and self.inner.scale_ranges is None:
            metrics.update(self._per_class_ap(calls))
        if pools and self.inner.scale_ranges is None and \
                len(pools) == len(self.inner.iou_thrs):
            self.last_image_stats = (
                tuple(str(result[1]['img_id']) for result in results),
                DetectionImageStats.from_tpfp(
                    pools, self.inner.iou_thrs,
                    '11points' if self.inner.use_07_metric else 'area'))
        return {key: float32_shortest(value) for key, value in metrics.items()}

    def _per_class_ap(self, calls: List[list]) -> dict:
        """``'AP.<class>'``: the AP of each class averaged over the IoU thresholds like
        ``mAP`` (a fraction; NaN for a class without ground truth, which ``mAP`` skips)."""
        names = self.dataset_meta['classes']
        out = {}
        for index, name in enumerate(names):
            values = [per_class[index]['ap'] for per_class in calls]
            if any(per_class[index]['num_gts'] == 0 for per_class in calls):
                out[f'AP.{name}'] = float('nan')
            else:
                out[f'AP.{name}'] = float(np.mean(values))
        return out
