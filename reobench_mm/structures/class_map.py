"""A map from one label set onto another: the classes of a test set of another place,
sensor or source onto the classes a model predicts.

A :class:`ClassMap` sends every *source* class (the test set's, in label-value order) to a
*target* class (the model's) or ignores it. It is complete and unambiguous by
construction (:meth:`ClassMap.create`):

- every source class is mapped or explicitly ignored (``None``): a source class left
  out is an error naming it, so no label is silently dropped;
- a source class given twice with different targets (two maps that disagree) is an
  error naming it and both targets;
- a name that is not a source class, or a target the model does not have, is an error
  naming it (with the closest valid name for a typo) — unless the map was written for
  more classes than the set or the model has (a map shipped for all of DIOR-R's 20
  classes, used on a set or a model with a subset of them): with ``unused_sources=True``
  the entries of source classes the set lacks are left unused, and with
  ``target_vocabulary`` (the classes the map's targets are names of) a target of the
  vocabulary that the model lacks ignores its source classes, as the model's own test
  set leaves out the objects of classes it does not have. Both are listed
  (:attr:`ClassMap.unused`, :attr:`ClassMap.absent_targets`, :meth:`ClassMap.describe`).

Several source classes may share a target (DOTA's small and large vehicles are DIOR-R's
vehicle). Target classes no source maps to are allowed (:attr:`ClassMap.unmapped_targets`):
the test set then has no object of them, and the metrics treat them as absent classes.

Applying it: :meth:`ClassMap.map_seg` sends a label map's values through a look-up table
(ignored classes and the ignore index become the ignore index; a value that is no source
class is an error naming it); :meth:`ClassMap.map_labels` gives the new label of every
instance and which instances to keep (an ignored class's objects are dropped: the model
has no class for them, so they are not in the target test set). The pipeline step is
:class:`~reobench_mm.transforms.class_map.MapClasses`; the dataset wrapper that also gives
the evaluator the target classes is :class:`ClassMappedDataset`.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ['ClassMap', 'IGNORE']

#: The target of an ignored source class.
IGNORE = None

MappingLike = Union[Mapping[str, Optional[str]], Sequence[Tuple[str, Optional[str]]]]


def _closest(name: str, valid: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1)
    return f' (did you mean {close[0]!r}?)' if close else ''


def _names(classes: Any, what: str) -> Tuple[str, ...]:
    if isinstance(classes, str) or not isinstance(classes, (list, tuple)) or not classes:
        raise ValueError(f'{what} must be a non-empty list of class names, got {classes!r}')
    names = tuple(str(c) for c in classes)
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f'{what} name {duplicated[0]!r} twice')
    return names


@dataclass(frozen=True)
class ClassMap:
    """Source class -> target class (or None: ignored); see the module docstring.

    Attributes:
        source_classes: the test set's classes, label value ``i`` is ``source_classes[i]``.
        target_classes: the model's classes.
        targets: for each source class (in order), the index of its target class, or -1
            when it is ignored.
    """
    source_classes: Tuple[str, ...]
    target_classes: Tuple[str, ...]
    targets: Tuple[int, ...]
    #: the map's entries for classes the test set does not have (left unused)
    unused: Tuple[str, ...] = ()
    #: ``(source, target)`` pairs ignored because the model lacks the target
    absent_targets: Tuple[Tuple[str, str], ...] = ()

    @classmethod
    def create(cls, source_classes: Sequence[str], target_classes: Sequence[str],
               mapping: MappingLike, *, unused_sources: bool = False,
               target_vocabulary: Optional[Sequence[str]] = None) -> 'ClassMap':
        """Check and build a map.

        Args:
            source_classes: the test set's classes, in label-value order.
            target_classes: the model's classes.
            mapping: ``{source: target or None}``, or ``[(source, target or None), ...]``
                (a source may repeat only with the same target).
            unused_sources: leave the entries of classes the test set lacks unused (listed
                in :attr:`unused`) instead of refusing them.
            target_vocabulary: the classes the map's targets are names of (default: the
                model's): a target of the vocabulary the model lacks ignores its sources
                (listed in :attr:`absent_targets`); a target outside it is refused.

        Raises:
            ValueError: a source class without a mapping, two maps that disagree, a name
                that is not a source class, a target the model does not have (each named).
        """
        source = _names(source_classes, 'the source classes')
        target = _names(target_classes, 'the target classes')
        vocabulary = target if target_vocabulary is None else \
            _names(target_vocabulary, 'the target vocabulary')
        unused: List[str] = []
        absent: List[Tuple[str, str]] = []
        if isinstance(mapping, Mapping):
            pairs = list(mapping.items())
        elif isinstance(mapping, (list, tuple)) and all(
                isinstance(p, (list, tuple)) and len(p) == 2 for p in mapping):
            pairs = [tuple(p) for p in mapping]
        else:
            raise ValueError('a class mapping is {source class: target class or None} or a '
                             f'list of (source, target) pairs, got {mapping!r}')
        chosen: Dict[str, Optional[str]] = {}
        for name, to in pairs:
            name = str(name)
            if name not in source:
                if unused_sources:
                    unused.append(name)
                    continue
                raise ValueError(f'the class mapping names {name!r}, which is not a class of '
                                 f'the test set{_closest(name, source)}; its classes: '
                                 f'{list(source)}')
            if to is not None:
                to = str(to)
                if to not in target and to in vocabulary:
                    absent.append((name, to))
                    to = None
                elif to not in target:
                    raise ValueError(f'the class mapping sends {name!r} to {to!r}, a class '
                                     f'the model does not have{_closest(to, vocabulary)}; '
                                     f'its classes: {list(target)} (None ignores {name!r})')
            if name in chosen and chosen[name] != to:
                raise ValueError(f'two maps of {name!r} disagree: {chosen[name]!r} and '
                                 f'{to!r}')
            chosen[name] = to
        missing = [n for n in source if n not in chosen]
        if missing:
            raise ValueError(f'the class mapping has no entry for {missing[0]!r}'
                             + (f' (nor for {missing[1:]})' if len(missing) > 1 else '')
                             + f': map every class of the test set to one of {list(target)} '
                             'or to None to ignore it')
        return cls(source, target, tuple(-1 if chosen[n] is None else target.index(chosen[n])
                                          for n in source),
                   tuple(dict.fromkeys(unused)), tuple(dict.fromkeys(absent)))

    # ------------------------------------------------------------------ describing
    @property
    def ignored(self) -> Tuple[str, ...]:
        """The source classes that are ignored."""
        return tuple(n for n, t in zip(self.source_classes, self.targets) if t < 0)

    @property
    def unmapped_targets(self) -> Tuple[str, ...]:
        """The target classes no source class maps to (absent from the mapped set)."""
        used = set(self.targets)
        return tuple(n for i, n in enumerate(self.target_classes) if i not in used)

    def as_dict(self) -> Dict[str, Optional[str]]:
        """``{source: target or None}``."""
        return {n: None if t < 0 else self.target_classes[t]
                for n, t in zip(self.source_classes, self.targets)}

    def describe(self) -> List[str]:
        """One line per target class: the source classes mapped onto it; then the
        ignored ones."""
        lines = []
        for index, name in enumerate(self.target_classes):
            sources = [s for s, t in zip(self.source_classes, self.targets) if t == index]
            lines.append(f'{name} <- {", ".join(sources) if sources else "(none)"}')
        if self.ignored:
            lines.append(f'ignored: {", ".join(self.ignored)}')
        return lines + self.notes()

    def notes(self) -> List[str]:
        """What a map written for more classes than the set or the model has left out:
        the sources ignored because the model lacks their target, the unused entries."""
        lines = []
        if self.absent_targets:
            lines.append('ignored as the model lacks their class: ' + ', '.join(
                f'{s} (-> {t})' for s, t in self.absent_targets))
        if self.unused:
            lines.append(f'map entries the set has no class for: {", ".join(self.unused)}')
        return lines

    # ------------------------------------------------------------------ applying
    def lookup_table(self, ignore_index: int = 255) -> np.ndarray:
        """``(max(num_source, ignore_index + 1),)`` int64: the target of each label value
        (``ignore_index`` for ignored classes and for ``ignore_index`` itself), -2 for a
        value that is no source class."""
        size = max(len(self.source_classes), int(ignore_index) + 1)
        table = np.full(size, -2, dtype=np.int64)
        table[:len(self.targets)] = [ignore_index if t < 0 else t for t in self.targets]
        table[ignore_index] = ignore_index
        return table

    def map_seg(self, seg_map: np.ndarray, ignore_index: int = 255,
                where: str = 'the label map') -> np.ndarray:
        """A label map in target classes (same shape and dtype).

        Raises:
            ValueError: a value that is neither a source class nor ``ignore_index``
                (named, with ``where``).
        """
        values = np.asarray(seg_map)
        if np.issubdtype(values.dtype, np.integer) and \
                ignore_index > np.iinfo(values.dtype).max:
            top = np.iinfo(values.dtype).max
            raise ValueError(f'{where} is {values.dtype} (values 0..{top}): ignore_index '
                             f'{ignore_index} does not fit in it and would wrap; give an '
                             f'ignore_index of at most {top} (the evaluator\'s), or load the '
                             'labels as a wider type')
        if values.size and (values.min() < 0 or values.max() >= max(
                len(self.source_classes), ignore_index + 1)):
            bad = int(values.min() if values.min() < 0 else values.max())
            raise ValueError(self._unknown_value(bad, ignore_index, where))
        table = self.lookup_table(ignore_index)
        mapped = table[values.astype(np.int64)]
        if (mapped == -2).any():
            bad = int(values[mapped == -2].flat[0])
            raise ValueError(self._unknown_value(bad, ignore_index, where))
        return mapped.astype(values.dtype)

    def _unknown_value(self, value: int, ignore_index: int, where: str) -> str:
        return (f'{where} holds the label value {value}, which is no class of the test set '
                f'(values 0..{len(self.source_classes) - 1}: {list(self.source_classes)}; '
                f'{ignore_index}: ignored): the class mapping cannot map it')

    def map_labels(self, labels: np.ndarray, where: str = 'the annotations'
                   ) -> Tuple[np.ndarray, np.ndarray]:
        """``(target labels of the kept instances, keep mask)`` for instance labels in
        source classes (an ignored class's instances are not kept).

        Raises:
            ValueError: a label that is no source class (named, with ``where``).
        """
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        bad = labels[(labels < 0) | (labels >= len(self.source_classes))]
        if bad.size:
            raise ValueError(f'{where} hold the instance label {int(bad[0])}, which is no '
                             f'class of the test set ({len(self.source_classes)} classes: '
                             f'{list(self.source_classes)})')
        mapped = np.asarray(self.targets, dtype=np.int64)[labels]
        keep = mapped >= 0
        return mapped[keep], keep
