"""Label rules: how a segmentation test set's labels are stored and which pixels are scored.

An ID number and an OOD number compare like for like only when both sides score the same
pixels. A test set states its rules in its dataset config's ``metainfo`` (MMEngine keeps
extra metainfo keys; the toolboxes' datasets accept it unchanged)::

    dataset=dict(type='ISPRSDataset', ..., metainfo=dict(label_rules=dict(
        boundaries='eroded', erosion_radius=3, ignore_index=255,
        reduce_zero_label=True, nodata=0)))

- ``boundaries``: ``'full'`` (every labelled pixel is scored) or ``'eroded'`` (a band
  along the class boundaries is stored as ignored, as in ISPRS's eroded references);
  ``erosion_radius`` (pixels) goes with ``'eroded'``.
- ``ignore_index``: the label the set's ignored pixels have once loaded; it must be the
  evaluator's.
- ``reduce_zero_label``: whether loading turns 0 into 255 and ``k`` into ``k - 1``; it
  must be what the set's pipeline (or dataset) does.
- ``nodata``: the stored label of pixels without data (None: none); it must end ignored
  (0 with ``reduce_zero_label``, else the ignore index).

A set's *scored* boundaries are its stored ones, or eroded by the radius of an
:class:`~reobench_mm.transforms.label_erosion.ErodeLabelBoundaries` step in its pipeline
(a set with full boundaries scored as an eroded one). :func:`check_label_rules` compares
the test set and a shift set: stored conventions (``reduce_zero_label``, ``nodata``) may
differ, scored boundaries may not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

from ..transforms.label_erosion import ErodeLabelBoundaries
from .wrapping import innermost_datasets

__all__ = ['BOUNDARIES', 'RULE_KEYS', 'LabelRules', 'declared_label_rules',
           'scored_boundaries', 'check_label_rules']

BOUNDARIES = ('full', 'eroded')
RULE_KEYS = ('boundaries', 'erosion_radius', 'ignore_index', 'reduce_zero_label', 'nodata')
_METAINFO_KEY = 'label_rules'


def _integer(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int)


@dataclass(frozen=True)
class LabelRules:
    """A set's declared label rules (see the module docstring)."""
    boundaries: str
    ignore_index: int
    reduce_zero_label: bool = False
    nodata: Optional[int] = None
    erosion_radius: Optional[int] = None

    @classmethod
    def from_config(cls, value: Any, where: str) -> 'LabelRules':
        """Parse ``metainfo['label_rules']`` of the set ``where`` names.

        Raises:
            ValueError: not a dict, an unknown or missing key, or a bad value (naming the
                set, the key and what is valid).
        """
        if not isinstance(value, Mapping):
            raise ValueError(f'{where}: label_rules must be a dict with the keys '
                             f'{list(RULE_KEYS)}, got {value!r}')
        unknown = [k for k in value if k not in RULE_KEYS]
        if unknown:
            raise ValueError(f'{where}: unknown label rule(s) {unknown}; valid: '
                             f'{list(RULE_KEYS)}')
        boundaries = value.get('boundaries')
        if boundaries not in BOUNDARIES:
            raise ValueError(f'{where}: label_rules.boundaries must be one of '
                             f'{list(BOUNDARIES)}, got {boundaries!r}')
        radius = value.get('erosion_radius')
        if boundaries == 'eroded' and not (_integer(radius) and radius > 0):
            raise ValueError(f'{where}: eroded boundaries need erosion_radius, a positive '
                             f'number of pixels (ISPRS: 3), got {radius!r}')
        if boundaries == 'full' and radius is not None:
            raise ValueError(f'{where}: erosion_radius goes with boundaries=\'eroded\', not '
                             'full boundaries')
        ignore_index = value.get('ignore_index')
        if not _integer(ignore_index) or not 0 <= ignore_index <= 65535:
            raise ValueError(f'{where}: label_rules.ignore_index must be the label of its '
                             f'ignored pixels (an integer in 0..65535), got {ignore_index!r}')
        reduce = value.get('reduce_zero_label', False)
        if not isinstance(reduce, bool):
            raise ValueError(f'{where}: label_rules.reduce_zero_label must be True or '
                             f'False, got {reduce!r}')
        nodata = value.get('nodata')
        if nodata is not None and not (_integer(nodata) and 0 <= nodata <= 65535):
            raise ValueError(f'{where}: label_rules.nodata must be None or a stored label '
                             f'(0..65535), got {nodata!r}')
        rules = cls(boundaries, ignore_index, reduce, nodata, radius)
        rules._check_consistent(where)
        return rules

    def _check_consistent(self, where: str) -> None:
        if self.reduce_zero_label and self.ignore_index != 255:
            raise ValueError(f'{where}: with reduce_zero_label the stored 0 is loaded as '
                             f'255, so its ignore_index is 255, not {self.ignore_index}')
        ignored = 0 if self.reduce_zero_label else self.ignore_index
        if self.nodata is not None and self.nodata != ignored:
            raise ValueError(f'{where}: its no-data label {self.nodata} is loaded as a class '
                             f'and would be scored (it must be {ignored}: '
                             + ('0 with reduce_zero_label)' if self.reduce_zero_label
                                else 'the ignore index)'))

    def describe(self, radius: Optional[int] = None) -> str:
        """``'full boundaries'`` or ``'boundaries eroded by 3 px'`` (``radius`` overrides
        the stored one: a set eroded by its pipeline)."""
        radius = radius or self.erosion_radius
        return 'full boundaries' if radius is None else f'boundaries eroded by {radius} px'


def _erosion_steps(dataset: Any) -> List[ErodeLabelBoundaries]:
    transforms = getattr(getattr(dataset, 'pipeline', None), 'transforms', None) or []
    return [t for t in transforms if isinstance(t, ErodeLabelBoundaries)]


def _loads_with_reduce(dataset: Any) -> Optional[bool]:
    """What the set's loading does with label 0: its annotation step's
    ``reduce_zero_label`` when set, else the dataset's (None: no segmentation loading)."""
    transforms = getattr(getattr(dataset, 'pipeline', None), 'transforms', None) or []
    for step in transforms:
        if type(step).__name__ == 'LoadAnnotations' and hasattr(step, 'reduce_zero_label'):
            if step.reduce_zero_label is not None:
                return bool(step.reduce_zero_label)
            return bool(getattr(dataset, 'reduce_zero_label', False))
    return None


def declared_label_rules(dataset: Any, where: str) -> Optional[LabelRules]:
    """The label rules a built dataset (or the datasets it wraps) declares, checked
    against what its pipeline does; None when it declares none.

    Raises:
        ValueError: bad rules, wrapped datasets with different rules, rules that say
            otherwise than the pipeline (``reduce_zero_label``), or an erosion step whose
            ignored label is not the set's.
    """
    found = []
    for leaf in innermost_datasets(dataset):
        value = (getattr(leaf, 'metainfo', None) or {}).get(_METAINFO_KEY)
        if value is None:
            continue
        rules = LabelRules.from_config(value, where)
        loads = _loads_with_reduce(leaf)
        if loads is not None and loads != rules.reduce_zero_label:
            raise ValueError(f'{where}: its label rules say reduce_zero_label='
                             f'{rules.reduce_zero_label}, its pipeline loads labels with '
                             f'reduce_zero_label={loads}')
        for step in _erosion_steps(leaf):
            if step.ignore_index != rules.ignore_index:
                raise ValueError(f'{where}: its ErodeLabelBoundaries writes label '
                                 f'{step.ignore_index}, its ignored label is '
                                 f'{rules.ignore_index}: give the step ignore_index='
                                 f'{rules.ignore_index}')
        found.append(rules)
    if not found:
        return None
    if any(r != found[0] for r in found):
        raise ValueError(f'{where}: the datasets it wraps declare different label rules '
                         f'({sorted(set(map(repr, found)))})')
    return found[0]


def scored_boundaries(dataset: Any, rules: LabelRules, where: str) -> Optional[int]:
    """The erosion radius the set is scored with (None: full boundaries): the stored one,
    or the radius of the erosion step in its pipeline.

    Raises:
        ValueError: a set stored eroded and eroded again, or several erosion steps.
    """
    steps = [s for leaf in innermost_datasets(dataset) for s in _erosion_steps(leaf)]
    if len(steps) > 1:
        raise ValueError(f'{where}: {len(steps)} ErodeLabelBoundaries steps; one erodes')
    if steps and rules.boundaries == 'eroded':
        raise ValueError(f'{where}: its labels are stored with eroded boundaries and its '
                         "pipeline (its own, or the test set's it takes) erodes them again "
                         '(ErodeLabelBoundaries): give it a pipeline without that step')
    return steps[0].radius if steps else rules.erosion_radius


def _fix(test_radius: Optional[int], shift_radius: Optional[int], ignore: int) -> str:
    if test_radius is None:
        return (f"score the test set alike: add dict(type='ErodeLabelBoundaries', "
                f'radius={shift_radius}, ignore_index={ignore}) to its pipeline after '
                'LoadAnnotations, or give the shift set full-boundary labels')
    if shift_radius is None:
        return (f"add dict(type='ErodeLabelBoundaries', radius={test_radius}, "
                f'ignore_index={ignore}) to the shift set\'s pipeline after LoadAnnotations')
    return 'erode both by the same radius'


def check_label_rules(test_set: Any, shift_set: Any, ignore_index: Optional[int],
                      what: str) -> Tuple[Optional[str], Optional[int]]:
    """Check that a shift set (``what`` names it) is scored by the test set's rules.

    Returns:
        ``(note, radius)``: a note when only one of the two declares rules (nothing can
        be checked; else None), and the erosion radius both are scored with (None: full
        boundaries, or no rules).

    Raises:
        ValueError: one line naming the difference and how to bring both sides to the
            same rules: scored boundaries that differ, an ignored label that is not the
            evaluator's (``ignore_index``), or the errors of :func:`declared_label_rules`.
    """
    test = declared_label_rules(test_set, 'the test set')
    shift = declared_label_rules(shift_set, what)
    if test is None and shift is None:
        return None, None
    if test is None or shift is None:
        stating, silent = ('the test set', what) if shift is None else (what, 'the test set')
        return (f'{stating} states label rules (metainfo label_rules), {silent} none: '
                'whether both score the same pixels is not checked'), None
    for rules, name in ((test, 'the test set'), (shift, what)):
        if ignore_index is not None and rules.ignore_index != ignore_index:
            raise ValueError(f'{name}: its ignored pixels have label {rules.ignore_index}, '
                             f'the evaluator ignores {ignore_index}: they would be scored')
    test_radius = scored_boundaries(test_set, test, 'the test set')
    shift_radius = scored_boundaries(shift_set, shift, what)
    if test_radius != shift_radius:
        raise ValueError(f'{what}: it is scored with {shift.describe(shift_radius)}, the '
                         f'test set with {test.describe(test_radius)}; '
                         + _fix(test_radius, shift_radius, test.ignore_index))
    return None, test_radius
