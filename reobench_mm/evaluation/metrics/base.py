"""What the package's MMEngine metrics share.

:class:`DatasetSizeMixin` gives a metric the dataset size MMEngine passes to
``evaluate``, which :func:`~reobench_mm.evaluation.functional.streaming.sum_rank_totals`
needs to leave out the samples the sampler repeated.
"""
from __future__ import annotations

from typing import Optional

__all__ = ['DatasetSizeMixin']


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
