"""What the package's MMEngine metrics share.

:class:`DatasetSizeMixin` gives a metric the dataset size MMEngine passes to
``evaluate``, which :func:`~reobench_mm.evaluation.functional.streaming.sum_rank_totals`
needs to leave out the samples the sampler repeated.
"""
from __future__ import annotations

import logging
from typing import Any, List, Optional, Sequence

from ..functional.streaming import gather_rank_samples

__all__ = ['DatasetSizeMixin', 'kept_image_terms']


class DatasetSizeMixin:
    """For an MMEngine ``BaseMetric`` subclass (listed before it): makes the dataset
    length given to ``evaluate(size)`` available to ``compute_metrics`` as
    ``self._dataset_size`` (None outside ``evaluate``), for
    :func:`~reobench_mm.evaluation.functional.streaming.sum_rank_totals`."""

    _dataset_size: Optional[int] = None

    def evaluate(self, size: int) -> dict:
        self._dataset_size = size
        try:
            return super().evaluate(size)
        finally:
            self._dataset_size = None


def kept_image_terms(parts: Sequence[Any], dataset_size: Optional[int], metric: str
                     ) -> List[Any]:
    """The per-image terms the processes kept, in dataset order
    (:func:`~reobench_mm.evaluation.functional.streaming.gather_rank_samples`), or none,
    with a warning naming ``metric``, when the parts do not come from one distributed
    evaluation (accumulators of separate runs summed by hand: their sum is still the
    metric, their images have no dataset order)."""
    try:
        return gather_rank_samples(parts, dataset_size)
    except ValueError as error:
        from mmengine.logging import print_log
        print_log(f'{metric}: no per-image statistics ({error})', logger='current',
                  level=logging.WARNING)
        return []
