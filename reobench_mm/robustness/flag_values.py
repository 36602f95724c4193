"""The command-line forms of the robustness options whose config form is a mapping:
``--attacks NAME=EPS[,EPS...]`` and ``--shifts NAME=CONFIG_FILE[:VARIABLE]``, parsed
(argparse ``type``) and gathered into the mapping the config gives
(:mod:`~reobench_mm.robustness.options` declares both flags)."""
from __future__ import annotations

import argparse
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..attacks.spec import ATTACK_KINDS
from ..errors import SweepError

__all__ = ['attack_argument', 'attacks_from_flag', 'shift_argument', 'shifts_from_flag']


def attack_argument(text: str) -> Tuple[str, List[float]]:
    """``'pgd=4,8'`` -> ``('pgd', [4, 8])`` (the flag's form of an attack)."""
    name, sep, budgets = text.partition('=')
    try:
        eps = [float(v) for v in budgets.split(',') if v.strip()] if sep else []
    except ValueError:
        eps = []
    if not name.strip() or not eps:
        raise argparse.ArgumentTypeError(
            f'{text!r}: an attack is NAME=EPS[,EPS...] in pixel units (e.g. pgd=4,8); names '
            f'{", ".join(ATTACK_KINDS)}')
    return name.strip(), [int(e) if e.is_integer() else e for e in eps]


def attacks_from_flag(pairs: Sequence[Tuple[str, List[float]]]) -> Dict[str, Any]:
    """``--attacks``' pairs as the config gives attacks: ``{name: dict(eps=[...])}``."""
    given = [n for n, _ in pairs]
    twice = sorted({n for n in given if given.count(n) > 1})
    if twice:
        raise SweepError(f'--attacks names {twice[0]!r} twice: give its budgets once, '
                         f'comma-separated ({twice[0]}=2,4)')
    return {n: dict(eps=list(eps)) for n, eps in pairs}


def shift_argument(text: str) -> Tuple[str, str, Optional[str]]:
    """``'vaihingen=configs/_base_/shifts/vaihingen.py:vaihingen_shift'`` ->
    ``('vaihingen', 'configs/_base_/shifts/vaihingen.py', 'vaihingen_shift')`` (the
    variable may be left out when the file defines one shift set)."""
    name, sep, where = text.partition('=')
    path, colon, variable = where.rpartition(':')
    if not colon or not path.endswith('.py'):
        path, variable = where, ''
    if not sep or not name.strip() or not path.strip():
        raise argparse.ArgumentTypeError(
            f'{text!r}: a shift set is NAME=CONFIG_FILE[:VARIABLE], the file a config of '
            'shift sets (e.g. vaihingen=configs/_base_/shifts/vaihingen.py:vaihingen_shift)')
    return name.strip(), path.strip(), variable.strip() or None


def _shift_sets_in(path: str) -> Dict[str, Any]:
    """The top-level variables of a config file that are shift sets (a dict with a
    ``dataset``)."""
    from mmengine.config import Config
    if not path.endswith('.py'):
        raise SweepError(f'--shifts: {path!r} is not a Python config file (a file of shift '
                         'sets such as configs/_base_/shifts/vaihingen.py)')
    try:
        cfg = Config.fromfile(path)
    except FileNotFoundError:
        raise SweepError(f'--shifts: no config file {path!r}') from None
    return {k: v.to_dict() for k, v in cfg.items()
            if hasattr(v, 'to_dict') and 'dataset' in v}


def shifts_from_flag(triples: Sequence[Tuple[str, str, Optional[str]]]) -> Dict[str, Any]:
    """``--shifts``' sets as the config gives them: ``{name: dict(shift_type=...,
    dataset=...)}``, each read from the variable of its file."""
    given = [n for n, _, _ in triples]
    twice = sorted({n for n in given if given.count(n) > 1})
    if twice:
        raise SweepError(f'--shifts names {twice[0]!r} twice: give each set one name')
    shifts = {}
    for name, path, variable in triples:
        sets = _shift_sets_in(path)
        if variable is None:
            if len(sets) != 1:
                raise SweepError(
                    f'--shifts {name}={path}: the file defines {len(sets)} shift sets '
                    f'({", ".join(sorted(sets)) or "none"}); name one as '
                    f'{name}={path}:VARIABLE')
            variable = next(iter(sets))
        if variable not in sets:
            raise SweepError(
                f'--shifts {name}={path}:{variable}: the file has no shift set '
                f'{variable!r} (its shift sets: {", ".join(sorted(sets)) or "none"})')
        shifts[name] = sets[variable]
    return shifts
