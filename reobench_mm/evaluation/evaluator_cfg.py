"""What a test evaluator (config or built) says about the labels it scores.

A geometric corruption moves the label maps with the image and writes a label where a
moved map has no source content; that label must be the one the segmentation metrics
ignore, or the padding is scored as a class. :func:`label_ignore_index` reads it from the
evaluator — ``IoUMetric`` (and the package's ``ClasswiseIoUMetric``,
``SegCalibrationMetric``, ``TemperatureFitMetric``) ignore ``ignore_index`` (default 255)
— so that the corruption step, the calibration metrics and the temperature fit use it too.
"""
from __future__ import annotations

from typing import Any, List, Optional

__all__ = ['as_metric_list', 'metric_type', 'label_ignore_index', 'LABEL_METRICS',
           'DEFAULT_IGNORE_INDEX']

#: Segmentation metrics that leave out the pixels labelled ``ignore_index``.
LABEL_METRICS = ('IoUMetric', 'ClasswiseIoUMetric', 'CityscapesMetric',
                 'SegCalibrationMetric', 'TemperatureFitMetric')
#: Their default ``ignore_index`` (MMSegmentation's).
DEFAULT_IGNORE_INDEX = 255


def as_metric_list(evaluator: Any) -> List[Any]:
    """The metric configs (or built metrics) of a test evaluator: one metric, a list,
    ``dict(metrics=...)`` or a built ``Evaluator``."""
    if isinstance(evaluator, (list, tuple)):
        return list(evaluator)
    if isinstance(evaluator, dict):
        if 'metrics' in evaluator and 'type' not in evaluator:
            return as_metric_list(evaluator['metrics'])
        return [evaluator]
    if hasattr(evaluator, 'metrics') and not hasattr(evaluator, 'process'):
        return list(evaluator.metrics)  # a built Evaluator
    return [evaluator]


def metric_type(metric: Any) -> str:
    """The class name of a metric config (scope prefix dropped) or built metric."""
    if isinstance(metric, dict):
        kind = metric.get('type', '')
        kind = kind if isinstance(kind, str) else getattr(kind, '__name__', '')
        return kind.rsplit('.', 1)[-1]
    return type(metric).__name__


def label_ignore_index(evaluator: Any) -> Optional[int]:
    """The label the evaluator's segmentation metrics ignore (None when it has none).

    Raises:
        ValueError: two of its metrics ignore different labels.
    """
    found = {}
    for metric in as_metric_list(evaluator):
        name = metric_type(metric)
        if isinstance(metric, dict):
            if name not in LABEL_METRICS:
                continue
            value = metric.get('ignore_index', DEFAULT_IGNORE_INDEX)
        elif name in LABEL_METRICS or hasattr(metric, 'ignore_index'):
            value = getattr(metric, 'ignore_index', DEFAULT_IGNORE_INDEX)
        else:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f'{name}: ignore_index must be an integer, got {value!r}')
        found.setdefault(int(value), []).append(name)
    if len(found) > 1:
        detail = '; '.join(f'{", ".join(names)}: {value}' for value, names in found.items())
        raise ValueError(f'the test evaluator ignores different labels ({detail}): give '
                         'every segmentation metric the same ignore_index')
    return next(iter(found), None)
