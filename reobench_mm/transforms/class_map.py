"""``MapClasses``: the labels of a test set of another label set, in the model's classes.

Put it after the annotation-loading step of a test pipeline (mmseg's ``LoadAnnotations``,
mmdet's ``LoadAnnotations`` with boxes), before the packing step::

    dict(type='LoadAnnotations'),
    dict(type='reobench_mm.MapClasses',
         source_classes=('impervious_surface', 'building', ...),  # the test set's
         target_classes=('road', 'building', ...),                # the model's
         mapping={'impervious_surface': 'road', 'clutter': None, ...}),

It maps ``gt_seg_map`` through the map's look-up table and, for boxes, relabels
``gt_bboxes_labels`` and drops the instances of ignored classes (with their boxes and
ignore flags). The evaluator must count the target classes: the dataset wrapper
:class:`~reobench_mm.datasets.class_mapped.ClassMappedDataset` inserts this step and gives
the target classes as the dataset's ``metainfo``.
"""
from __future__ import annotations

from typing import Any, Dict, Sequence

from mmcv.transforms import BaseTransform

from ..structures.class_map import ClassMap, MappingLike
from ..registry import TRANSFORMS

__all__ = ['MapClasses']

#: The results keys the step maps.
_SEG, _LABELS = 'gt_seg_map', 'gt_bboxes_labels'
#: The instance keys dropped with an ignored instance.
_INSTANCE_KEYS = ('gt_bboxes', 'gt_bboxes_labels', 'gt_ignore_flags', 'gt_masks')


@TRANSFORMS.register_module()
class MapClasses(BaseTransform):
    """Map the labels of one label set onto another (see the module docstring and
    :class:`~reobench_mm.structures.class_map.ClassMap` for the rules and the errors).

    Args:
        source_classes: the test set's classes, in label-value order.
        target_classes: the model's classes.
        mapping: ``{source: target or None}`` or ``[(source, target or None), ...]``;
            every source class must appear (None: ignored).
        ignore_index: the label maps' ignore value (ignored classes become it).

    Raises:
        ValueError: a bad mapping (when built), or a label value that is no source class
            (when applied, naming the value and the image).
    """

    def __init__(self, source_classes: Sequence[str], target_classes: Sequence[str],
                 mapping: MappingLike, ignore_index: int = 255) -> None:
        self.class_map = ClassMap.create(source_classes, target_classes, mapping)
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, int) or \
                not 0 <= ignore_index <= 65535:
            raise ValueError(f'ignore_index must be an integer in 0..65535, got '
                             f'{ignore_index!r}')
        self.ignore_index = ignore_index

    @classmethod
    def from_map(cls, class_map: ClassMap, ignore_index: int = 255) -> 'MapClasses':
        """The step of a checked map."""
        return cls(class_map.source_classes, class_map.target_classes, class_map.as_dict(),
                   ignore_index)

    def transform(self, results: Dict[str, Any]) -> Dict[str, Any]:
        where = str(results.get('seg_map_path') or results.get('img_path') or 'a sample')
        found = False
        if results.get(_SEG) is not None:
            results[_SEG] = self.class_map.map_seg(results[_SEG], self.ignore_index,
                                                   f'the label map of {where}')
            found = True
        if results.get(_LABELS) is not None:
            labels, keep = self.class_map.map_labels(results[_LABELS],
                                                     f'the annotations of {where}')
            for key in _INSTANCE_KEYS:
                if results.get(key) is not None:
                    results[key] = results[key][keep] if key != _LABELS else labels
            found = True
        if not found:
            raise ValueError(f'MapClasses found no labels in {where} (no {_SEG!r} nor '
                             f'{_LABELS!r}): put it after the LoadAnnotations step')
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}({"; ".join(self.class_map.describe())}, '
                f'ignore_index={self.ignore_index})')

