"""Other test sets as conditions: the real distribution shifts of a robustness run.

A *shift set* is a test dataset of another place, time, scale, sensor or source than the
run's own test set (the in-distribution, ID, set), declared in ``test_cfg``::

    test_cfg = dict(type='RobustnessTestLoop', shifts=dict(
        vaihingen=dict(shift_type='geographic', dataset=dict(type='ISPRSDataset', ...))))

Each entry is parsed once by :func:`parse_shifts` into a :class:`ShiftSet`: its name
(letters, digits, ``_`` and ``-``), its shift type (one of
:data:`~reobench_mm.datasets.shift_types.SHIFT_TYPES` or the user's own name), its dataset
config (without a ``pipeline`` it takes the test dataloader's pipeline) and, when asked
for, corruptions and severities to evaluate on top of it. A shift set gives one
:class:`ShiftCondition` per evaluation: the set as it is (key ``shift/<name>``, file tag
``shift-<name>``) and, for each corruption on top, ``shift/<name>/<corruption>@<k>``
(tag ``shift-<name>_<corruption>_s<k>``).

Nothing here builds a dataset or reads a file
(:mod:`~reobench_mm.robustness.shifted_data` does).
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Tuple

from reobench_corruptions.condition import Condition
from ...datasets.shift_types import SHIFT_TYPES
from ...errors import SweepError
from ...evaluation.keys import SHIFT_PREFIX
from ..plan import ConditionOnBase, corruptions_on_top

__all__ = ['ShiftSet', 'ShiftCondition', 'parse_shifts', 'shifts_to_dict', 'shift_conditions',
           'shift_row']

_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_-]*$')
_ENTRY_KEYS = ('shift_type', 'dataset', 'corruptions', 'severities')


@dataclass(frozen=True, eq=False)
class ShiftCondition(ConditionOnBase):
    """One evaluation on a shift set: the set under ``base`` (clean, or a corruption at a
    severity, with the run's seed, protocol and border): key ``'shift/<name>'``
    (``'shift/<name>/<corruption>@<k>'``), tag ``'shift-<name>'``
    (``shift-vaihingen_cloud_s3``); settings: the set's name and shift type, then the base
    condition's."""
    shift: str
    shift_type: str
    base: Condition
    prefix: ClassVar[str] = SHIFT_PREFIX

    @property
    def label(self) -> str:
        return self.shift

    def own_settings(self) -> Dict[str, Any]:
        return dict(shift=self.shift, shift_type=self.shift_type)


@dataclass(frozen=True)
class ShiftSet:
    """A test set of a real shift (see the module docstring).

    Attributes:
        name: the set's name (``vaihingen``).
        shift_type: ``geographic``, ``temporal``, ``scale``, ``sensor``, ``source`` or
            the user's own.
        dataset: its dataset config, as given.
        corruptions: corruptions evaluated on top of it (empty: none).
        severities: their severities.
    """
    name: str
    shift_type: str
    dataset: Dict[str, Any]
    corruptions: Tuple[str, ...] = ()
    severities: Tuple[int, ...] = ()

    def conditions(self, clean: Condition) -> List[ShiftCondition]:
        """The set as it is, then each corruption on top at each severity (with the seed,
        protocol and border of ``clean``)."""
        return [ShiftCondition(self.name, self.shift_type, clean)] + [
            ShiftCondition(self.name, self.shift_type, clean.with_corruption(c, s))
            for c in self.corruptions for s in self.severities]

    def to_dict(self) -> Dict[str, Any]:
        """The config entry it was parsed from (normalised)."""
        out: Dict[str, Any] = dict(shift_type=self.shift_type,
                                   dataset=copy.deepcopy(self.dataset))
        if self.corruptions:
            out.update(corruptions=list(self.corruptions), severities=list(self.severities))
        return out


def _parse_entry(name: Any, entry: Any, protocol: str) -> ShiftSet:
    where = f'shifts[{name!r}]'
    if not isinstance(name, str) or not _NAME.match(name):
        raise SweepError(f'{where}: a shift set name is letters, digits, "_" and "-", '
                         'starting with a letter or digit (it names files)')
    if not isinstance(entry, Mapping):
        raise SweepError(f'{where} must be a dict(shift_type=..., dataset=dict(...)), got '
                         f'{type(entry).__name__}')
    unknown = [k for k in entry if k not in _ENTRY_KEYS]
    if unknown:
        raise SweepError(f'{where}: unknown key(s) {unknown}; valid: {list(_ENTRY_KEYS)}')
    shift_type = entry.get('shift_type')
    if not isinstance(shift_type, str) or not _NAME.match(shift_type):
        raise SweepError(f'{where}: shift_type must be one of {list(SHIFT_TYPES)} or a name '
                         f'of your own (letters, digits, "_", "-"), got {shift_type!r}')
    dataset = entry.get('dataset')
    if not isinstance(dataset, Mapping) or 'type' not in dataset:
        raise SweepError(f'{where}: dataset must be a dataset config with a "type" (e.g. '
                         f"dict(type='ISPRSDataset', data_root=..., ...)), got {dataset!r}")
    corruptions, severities = corruptions_on_top(where, entry, protocol,
                                                 'to evaluate on top of the set')
    return ShiftSet(name, shift_type, copy.deepcopy(dict(dataset)), corruptions, severities)


def parse_shifts(value: Any, protocol: str = 'reobench') -> Tuple[ShiftSet, ...]:
    """The ``shifts`` option (``{name: dict(shift_type, dataset[, corruptions,
    severities])}``, or shift sets already parsed) as shift sets, in the order given.

    Raises:
        SweepError: not a mapping, a bad name, shift type or dataset config, an unknown
            key, or corruptions or severities that are not valid (the message says which
            entry and what is valid).
    """
    if value is None:
        return ()
    if isinstance(value, tuple) and all(isinstance(s, ShiftSet) for s in value):
        return value
    if not isinstance(value, Mapping):
        raise SweepError('shifts must be a dict: {name: dict(shift_type=..., '
                         f'dataset=dict(...))}}, got {type(value).__name__}')
    return tuple(_parse_entry(name, entry, protocol) for name, entry in value.items())


def shifts_to_dict(shifts: Tuple[ShiftSet, ...]) -> Optional[Dict[str, Any]]:
    """The config form of parsed shift sets (None for none)."""
    return {s.name: s.to_dict() for s in shifts} or None


def shift_conditions(shifts: Tuple[ShiftSet, ...], clean: Condition) -> List[ShiftCondition]:
    """Every shift condition of ``shifts``, set by set."""
    return [c for s in shifts for c in s.conditions(clean)]


def shift_row(condition: ShiftCondition, value: float, stats: Any,
              images: Optional[int], notes: Optional[List[str]] = None,
              compared: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The row of :func:`~reobench_mm.analysis.shift_table.shift_block` for a shift
    condition evaluated to ``value`` (its metric, 0-100) on ``images`` images, with its
    per-image statistics (or None), what its class map left unused or ignored, and the
    classes it can hold when they are not all (``{'names', 'indices'}``)."""
    row = dict(name=condition.shift, shift_type=condition.shift_type,
               condition=condition.base.key, key=condition.key, value=value, stats=stats,
               images=images)
    if notes:
        row['class_map_notes'] = list(notes)
    if compared:
        row['compared_classes'] = dict(compared)
    return row
