"""MMSegmentation's ``IoUMetric`` that also returns the per-class values it computes.

``IoUMetric`` computes IoU (and Acc, Dice, ...) for every class but only prints the
per-class table; a robustness report needs those numbers. :class:`ClasswiseIoUMetric`
returns them as ``'IoU.<class>'`` keys (percentages, like the printed table but not
rounded) beside the usual summary, from the same accumulated areas and the same
``IoUMetric.total_area_to_metrics``. It also keeps each image's areas and id as
:attr:`last_image_stats` (a pair ``(image ids,``
:class:`~reobench_mm.evaluation.functional.image_stats.SegmentationImageStats` ``)``), which
the robustness loops write beside each condition record.
"""
import functools
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from ...fileio import plain_float
from ...registry import METRICS
from ..functional.image_stats import SegmentationImageStats, image_ids_from_paths

__all__ = ['ClasswiseIoUMetric', 'classwise_iou_metric_class']

_CLASSWISE_NAMES = ('IoU', 'Acc', 'Dice', 'Fscore', 'Precision', 'Recall')


@functools.lru_cache(maxsize=None)
def classwise_iou_metric_class() -> type:
    """The ``ClasswiseIoUMetric`` class (defined on first use, so that importing
    reobench_mm does not import MMSegmentation)."""
    from mmseg.evaluation import IoUMetric

    class ClasswiseIoUMetric(IoUMetric):
        """``IoUMetric`` plus per-class values in the returned metrics.

        Args:
            classwise: which per-class values to return (any of ``'IoU'``, ``'Acc'``,
                ``'Dice'``, ``'Fscore'``, ``'Precision'``, ``'Recall'`` that the chosen
                ``iou_metrics`` compute); default ``('IoU',)``.
            Every other argument is ``IoUMetric``'s.

        Returns (``compute_metrics``): ``IoUMetric``'s summary (``aAcc``, ``mIoU``, ...)
        and ``'<name>.<class>'`` for each requested name, in percent; NaN for a class
        absent from both the labels and the predictions.
        """

        def __init__(self, ignore_index: int = 255,
                     iou_metrics: Union[str, List[str]] = 'mIoU',
                     nan_to_num: Optional[int] = None, beta: int = 1,
                     collect_device: str = 'cpu', output_dir: Optional[str] = None,
                     format_only: bool = False, prefix: Optional[str] = None,
                     classwise: Sequence[str] = ('IoU', )) -> None:
            super().__init__(ignore_index=ignore_index, iou_metrics=iou_metrics,
                             nan_to_num=nan_to_num, beta=beta,
                             collect_device=collect_device, output_dir=output_dir,
                             format_only=format_only, prefix=prefix)
            if isinstance(classwise, str):
                classwise = (classwise, )
            classwise = tuple(classwise)
            unknown = [n for n in classwise if n not in _CLASSWISE_NAMES]
            if unknown:
                raise ValueError(f'unknown classwise metric(s) {unknown}; valid: '
                                 f'{list(_CLASSWISE_NAMES)}')
            self.classwise = classwise
            #: ``(image ids, SegmentationImageStats)`` of the last evaluation
            self.last_image_stats = None

        def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
            """``IoUMetric.process``, each image's areas kept with its path (collected
            across processes with them, in dataset order)."""
            start = len(self.results)
            super().process(data_batch, data_samples)
            added = self.results[start:]
            if len(added) == len(data_samples):
                self.results[start:] = [tuple(areas) + (sample.get('img_path'), )
                                        for areas, sample in zip(added, data_samples)]

        def compute_metrics(self, results: list) -> Dict[str, float]:
            paths = [r[4] if len(r) == 5 else None for r in results]
            results = [tuple(r[:4]) for r in results]
            self.last_image_stats = None
            if results and all(p is not None for p in paths):
                self.last_image_stats = (image_ids_from_paths(paths),
                                         SegmentationImageStats.from_iou_results(
                                             results, self.nan_to_num))
            metrics = super().compute_metrics(results)
            if self.format_only or not self.classwise:
                return metrics
            areas = [sum(column) for column in zip(*results)]
            per_class = self.total_area_to_metrics(*areas, self.metrics, self.nan_to_num,
                                                   self.beta)
            names = self.dataset_meta['classes']
            missing = [n for n in self.classwise if n not in per_class]
            if missing:
                raise ValueError(f'classwise {missing} are not computed by iou_metrics='
                                 f'{self.metrics}; computed: '
                                 f'{sorted(k for k in per_class if k != "aAcc")}')
            for name in self.classwise:
                # in the metric's own precision, as IoUMetric's percentages
                values = np.asarray(per_class[name])
                values = values * values.dtype.type(100)
                for class_name, value in zip(names, values):
                    metrics[f'{name}.{class_name}'] = plain_float(value)
            return metrics

    return ClasswiseIoUMetric


@METRICS.register_module(name='ClasswiseIoUMetric')
def ClasswiseIoUMetric(ignore_index: int = 255,  # noqa: N802  (a class to its users)
                       iou_metrics: Union[str, List[str]] = 'mIoU',
                       nan_to_num: Optional[int] = None, beta: int = 1,
                       collect_device: str = 'cpu', output_dir: Optional[str] = None,
                       format_only: bool = False, prefix: Optional[str] = None,
                       classwise: Sequence[str] = ('IoU', )):
    """Build a ``ClasswiseIoUMetric`` (see :func:`classwise_iou_metric_class`):
    ``IoUMetric`` that also returns ``'IoU.<class>'`` (and optionally ``'Acc.<class>'``,
    ...) in percent."""
    return classwise_iou_metric_class()(
        ignore_index=ignore_index, iou_metrics=iou_metrics, nan_to_num=nan_to_num, beta=beta,
        collect_device=collect_device, output_dir=output_dir, format_only=format_only,
        prefix=prefix, classwise=classwise)
