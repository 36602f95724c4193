"""``ClassMappedDataset``: a test set of another label set, seen in the model's classes.

A wrapper in the manner of MMEngine's (``ClassBalancedDataset``, ``RepeatDataset``)::

    test_dataloader = dict(dataset=dict(
        type='reobench_mm.ClassMappedDataset',
        classes=('small-vehicle', 'large-vehicle', 'plane', ...),   # the model's
        mapping={'vehicle': 'small-vehicle', 'airplane': 'plane', 'windmill': None, ...},
        dataset=dict(type='DIORRDataset', ...)))                    # the test set

It builds the inner dataset, checks the map from the inner dataset's classes (its
``metainfo['classes']``) onto ``classes``
(:class:`~reobench_mm.structures.class_map.ClassMap`: every class mapped or ignored, no
disagreeing or unknown names), inserts
:class:`~reobench_mm.transforms.class_map.MapClasses` after the inner pipeline's
annotation-loading step, and presents the target classes as its ``metainfo``, so the
evaluator (``IoUMetric``, ``DOTAMetric``) counts the model's classes.
"""
from __future__ import annotations

import copy
import logging
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
from mmengine.dataset import BaseDataset
from mmengine.logging import print_log

from ..registry import DATASETS
from ..transforms.class_map import MapClasses
from ..structures.class_map import ClassMap, MappingLike
from .wrapping import build_inner_dataset, wrapped_datasets

__all__ = ['ClassMappedDataset', 'class_map_ignore_indices', 'check_class_map_ignore',
           'CLASS_MAPPED_TYPE']

#: The registered name of the wrapper (a config's ``type``, with or without a scope).
CLASS_MAPPED_TYPE = 'ClassMappedDataset'


def _annotation_step(transforms: List[Any]) -> int:
    """The index of the last annotation-loading step of a pipeline."""
    found = [i for i, t in enumerate(transforms) if 'LoadAnnotations' in type(t).__name__]
    if not found:
        names = [type(t).__name__ for t in transforms]
        raise ValueError(f'the pipeline of the mapped dataset has no LoadAnnotations step '
                         f'({names}): there are no labels to map')
    return found[-1]


def _target_palette(class_map: ClassMap, palette: Optional[Sequence[Any]],
                    source_palette: Optional[Sequence[Any]]) -> List[List[int]]:
    """The given palette, else per target class the colour of the first source class
    mapped onto it (or a fixed colour of its index)."""
    targets = class_map.target_classes
    if palette is not None:
        if len(palette) != len(targets):
            raise ValueError(f'palette has {len(palette)} colours for {len(targets)} classes')
        return [list(map(int, c)) for c in palette]
    out = []
    for index in range(len(targets)):
        sources = [i for i, t in enumerate(class_map.targets) if t == index]
        if sources and source_palette is not None and len(source_palette) > sources[0]:
            out.append(list(map(int, source_palette[sources[0]])))
        else:
            out.append(np.random.default_rng(index).integers(0, 256, 3).tolist())
    return out


@DATASETS.register_module()
class ClassMappedDataset:
    """The inner dataset with its labels mapped onto ``classes`` (see the module
    docstring).

    Args:
        dataset: the test set, or its config.
        classes: the model's classes (the dataset's ``metainfo['classes']``); a shift
            set's wrapper without them takes the test set's.
        mapping: ``{inner class: class of classes or None}`` (or pairs); every inner
            class must appear.
        palette: colours of ``classes`` (default: those of the first inner class mapped
            onto each).
        ignore_index: the label maps' ignore value.
        map_classes: the classes the map's targets are names of, when the map was
            written for more classes than the model has (a map for all of DIOR-R's
            classes, a model of four of them): a target among them that the model lacks
            ignores its inner classes (default: ``classes``, every target must be one).
        unused_entries: leave the map's entries for classes the inner set lacks unused
            (default), or refuse them (``False``). What was left unused or ignored is
            logged and listed in ``metainfo['class_map_notes']``.

    Raises:
        ValueError: a bad map (each refusal names the class), or a pipeline without an
            annotation-loading step.
    """

    def __init__(self, dataset: Union[BaseDataset, dict],
                 classes: Optional[Sequence[str]] = None,
                 mapping: Optional[MappingLike] = None,
                 palette: Optional[Sequence[Any]] = None, ignore_index: int = 255,
                 map_classes: Optional[Sequence[str]] = None,
                 unused_entries: bool = True) -> None:
        if classes is None:
            raise ValueError("ClassMappedDataset needs classes= (the model's classes); only "
                             "a shift set's wrapper takes the test set's when it names none")
        if mapping is None:
            raise ValueError('ClassMappedDataset needs mapping= ({its class: a class of '
                             'classes, or None to ignore it})')
        self.dataset = build_inner_dataset(dataset)
        inner = self.dataset.metainfo
        if 'classes' not in inner:
            raise ValueError(f'{type(self.dataset).__name__} has no classes in its metainfo '
                             'to map from')
        # the model's classes as given: one string is refused, not read letter by letter
        self.class_map = ClassMap.create(tuple(inner['classes']), classes, mapping,
                                         unused_sources=unused_entries,
                                         target_vocabulary=map_classes)
        transforms = getattr(getattr(self.dataset, 'pipeline', None), 'transforms', None)
        if not isinstance(transforms, list):
            raise ValueError(f'{type(self.dataset).__name__} has no pipeline to map the '
                             'labels in')
        self.step = MapClasses.from_map(self.class_map, ignore_index)
        transforms.insert(_annotation_step(transforms) + 1, self.step)
        metainfo: Dict[str, Any] = copy.deepcopy(dict(inner))
        metainfo['classes'] = self.class_map.target_classes
        metainfo['palette'] = _target_palette(self.class_map, palette, inner.get('palette'))
        metainfo['class_map'] = self.class_map.as_dict()
        notes = self.class_map.notes()
        metainfo['class_map_notes'] = notes
        for note in notes:
            print_log(f'ClassMappedDataset of {type(self.dataset).__name__}: {note}',
                      logger='current', level=logging.WARNING)
        self._metainfo = metainfo

    @property
    def metainfo(self) -> dict:
        """The inner dataset's meta information with the target classes and palette
        (a copy), and the map (``class_map``)."""
        return copy.deepcopy(self._metainfo)

    def full_init(self) -> None:
        self.dataset.full_init()

    def get_data_info(self, idx: int) -> dict:
        return self.dataset.get_data_info(idx)

    def __getitem__(self, idx: int) -> Any:
        return self.dataset[idx]

    def __len__(self) -> int:
        return len(self.dataset)

    def __repr__(self) -> str:
        return (f'{type(self).__name__}({"; ".join(self.class_map.describe())}, '
                f'dataset={type(self.dataset).__name__})')


def class_map_ignore_indices(dataset: Any) -> Dict[int, str]:
    """``{ignore_index: wrapper}`` of every ``ClassMappedDataset`` in ``dataset`` (itself,
    or one it wraps through ``dataset``/``datasets``, as MMEngine's wrappers do): the
    labels its ignored classes are written as."""
    found: Dict[int, str] = {}
    for item in wrapped_datasets(dataset):
        if isinstance(item, ClassMappedDataset):
            found.setdefault(int(item.step.ignore_index), repr(item))
    return found


def check_class_map_ignore(dataset: Any, ignore_index: Optional[int], what: str) -> None:
    """Refuse a built ``dataset`` (``what`` names it) whose class map writes its ignored
    classes as another label than the evaluator ignores (``ignore_index``; None: the
    evaluator reads no label maps): those pixels would be scored as a class.

    Raises:
        ValueError: the two labels named, and the option to set.
    """
    if ignore_index is None:
        return
    for value, wrapper in class_map_ignore_indices(dataset).items():
        if value != ignore_index:
            raise ValueError(
                f'{what}: its class map writes ignored classes as label {value} '
                f'({wrapper}), but the test evaluator ignores label {ignore_index}: those '
                f'pixels would be scored as a class. Give the ClassMappedDataset '
                f'ignore_index={ignore_index} (a shift set\'s map that names none takes '
                "the evaluator's)")
