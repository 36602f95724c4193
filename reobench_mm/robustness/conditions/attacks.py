"""Attacks as conditions: the worst-case robustness of a run.

Declared in ``test_cfg`` (or the sweep's config) as ``attacks``, one entry per attack::

    test_cfg = dict(type='RobustnessTestLoop', attacks=dict(
        pgd=dict(eps=[2, 4, 8], steps=20),
        segpgd=dict(eps=[8]),
        pgd_on_cloud=dict(type='pgd', eps=[8], corruptions=['cloud'], severities=[3])))

Each entry's settings are :func:`~reobench_mm.attacks.spec.parse_attack`'s (``type``,
``eps``, ``steps``, ``alpha``, ``random_start``, ``losses``, ``max_value``); with
``corruptions`` (and ``severities``) the attack is also run on the corrupted images
(corruption, severity, then attack). Every budget of every entry is one
:class:`AttackCondition`: key ``adv/<name>_eps<ε>`` (``adv/pgd_eps8``; on a corrupted
image ``adv/pgd_eps8/cloud@3``), file tag ``adv-<name>_eps<ε>`` (``adv-pgd_eps8_cloud_s3``).

Nothing here runs a model (:mod:`~reobench_mm.robustness.attack_run` does).
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Tuple

from reobench_corruptions.condition import Condition
from ...attacks.spec import ATTACK_KINDS, AttackSpec, eps_label, parse_attack
from ...errors import SweepError
from ...evaluation.keys import ATTACK_PREFIX
from ..plan import ConditionOnBase, corruptions_on_top

__all__ = ['AttackCondition', 'AttackEntry', 'parse_attacks',
           'attacks_to_dict', 'attack_conditions', 'check_attack_task', 'attack_row']

_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_]*$')
_PLACEMENT_KEYS = ('corruptions', 'severities')


@dataclass(frozen=True, eq=False)
class AttackCondition(ConditionOnBase):
    """One attack at one budget, on the clean or a corrupted image (``base``): key
    ``'adv/<name>_eps<ε>'`` (``'adv/<name>_eps<ε>/<corruption>@<k>'`` on a corrupted
    image), tag ``'adv-<name>_eps<ε>'`` (``_<condition tag>`` appended); settings: the
    attack's, then the base condition's."""
    spec: AttackSpec
    base: Condition
    prefix: ClassVar[str] = ATTACK_PREFIX

    @property
    def label(self) -> str:
        return self.spec.label

    def own_settings(self) -> Dict[str, Any]:
        return self.spec.settings()


@dataclass(frozen=True)
class AttackEntry:
    """One entry of the ``attacks`` option: its specs (one per ε) and the corruptions it
    is also run on."""
    name: str
    specs: Tuple[AttackSpec, ...]
    settings: Dict[str, Any]
    corruptions: Tuple[str, ...] = ()
    severities: Tuple[int, ...] = ()

    def conditions(self, clean: Condition) -> List[AttackCondition]:
        """Each budget on the clean images, then on each corruption at each severity."""
        bases = [clean] + [clean.with_corruption(c, s) for c in self.corruptions
                           for s in self.severities]
        return [AttackCondition(spec, base) for base in bases for spec in self.specs]

    def to_dict(self) -> Dict[str, Any]:
        out = copy.deepcopy(self.settings)
        if self.corruptions:
            out.update(corruptions=list(self.corruptions), severities=list(self.severities))
        return out


def _parse_entry(name: Any, entry: Any, protocol: str) -> AttackEntry:
    where = f'attacks[{name!r}]'
    if not isinstance(name, str) or not _NAME.match(name):
        raise SweepError(f'{where}: an attack name is letters, digits and "_", starting with '
                         'a letter or digit (it names files)')
    if not isinstance(entry, Mapping):
        raise SweepError(f'{where} must be a dict(eps=[...], ...), got '
                         f'{type(entry).__name__}')
    settings = {k: v for k, v in entry.items() if k not in _PLACEMENT_KEYS}
    try:
        specs = parse_attack(name, settings)
    except SweepError as error:
        if 'unknown key' in str(error):
            raise SweepError(f'{error} (and {list(_PLACEMENT_KEYS)})') from None
        raise
    corruptions, severities = corruptions_on_top(where, entry, protocol, 'to attack on top of')
    return AttackEntry(name, specs, copy.deepcopy(dict(settings)), corruptions, severities)


def parse_attacks(value: Any, protocol: str = 'reobench') -> Tuple[AttackEntry, ...]:
    """The ``attacks`` option (``{name: dict(eps=..., ...)}``, or entries already parsed)
    as :class:`AttackEntry` objects, in the order given.

    Raises:
        SweepError: not a mapping, or a bad entry (named, with what is valid).
    """
    if value is None:
        return ()
    if isinstance(value, tuple) and all(isinstance(e, AttackEntry) for e in value):
        return value
    if not isinstance(value, Mapping):
        raise SweepError('attacks must be a dict: {name: dict(eps=[...], ...)} with names '
                         f'of {list(ATTACK_KINDS)} (or type=...), got {type(value).__name__}')
    return tuple(_parse_entry(name, entry, protocol) for name, entry in value.items())


def attacks_to_dict(entries: Tuple[AttackEntry, ...]) -> Optional[Dict[str, Any]]:
    """The config form of parsed entries (None for none)."""
    return {e.name: e.to_dict() for e in entries} or None


def attack_conditions(entries: Tuple[AttackEntry, ...], clean: Condition
                      ) -> List[AttackCondition]:
    """Every attack condition of ``entries``, entry by entry."""
    return [c for e in entries for c in e.conditions(clean)]


def check_attack_task(entries: Tuple[AttackEntry, ...], task: str) -> None:
    """Refuse attacks the task has no objective for, and ``losses`` outside detection.

    Raises:
        SweepError: naming the entry and what the task takes.
    """
    for entry in entries:
        parse_attack(entry.name, entry.settings, task)


def attack_row(condition: AttackCondition, value: float, stats: Any,
               record: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The row of :func:`~reobench_mm.analysis.attack_table.attack_block` for an attack
    condition evaluated to ``value`` (its metric, 0-100), with its per-image statistics
    (or None) and what its run recorded (cost, curve; or None)."""
    spec = condition.spec
    return dict(attack=spec.name, type=spec.kind, eps=eps_label(spec.eps), norm=spec.norm,
                base=condition.base_key, key=condition.key, value=value, stats=stats,
                record=record)
