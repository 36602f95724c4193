"""What an attack is: its kind (:data:`ATTACK_KINDS`) and its settings (:class:`AttackSpec`).

An attack maximises a loss of the model over perturbations of the input's pixels inside
an ε-ball (L∞ or L2) around the clean image, in the input's own pixel units (see
``docs/adversarial.md``). The kinds:

========== ====== =========================================================================
kind       norm   what it does
========== ====== =========================================================================
fgsm       L∞     one step of ε·sign(∇), no random start (Goodfellow et al., 2015)
pgd        L∞     random start, ``steps`` steps of α·sign(∇), projection (Madry et al.)
pgd_l2     L2     random start in the L2 ball, steps of α·∇/‖∇‖₂, projection
segpgd     L∞     PGD on SegPGD's objective (Gu et al., ECCV 2022; segmentation)
cospgd     L∞     PGD on CosPGD's objective (Agnihotri et al., ICML 2024; segmentation)
apgd       L∞     APGD-CE: step size 2ε halved at checkpoints, momentum 0.75 (Croce and
                  Hein, ICML 2020; segmentation)
========== ====== =========================================================================

Rotated detection takes ``fgsm``, ``pgd`` and ``pgd_l2`` on the detector's training losses
(``losses``: ``cls``, ``bbox``, ``rpn`` or ``all``).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from ..errors import SweepError

__all__ = ['AttackKind', 'ATTACK_KINDS', 'AttackSpec', 'DETECTION_LOSSES', 'eps_label',
           'DEFAULT_STEPS', 'DEFAULT_ALPHA_FRACTION']


@dataclass(frozen=True)
class AttackKind:
    """One kind of attack.

    Attributes:
        name: its name in configs (``'pgd'``).
        norm: ``'linf'`` or ``'l2'``.
        iterative: False for FGSM (one step, no random start).
        objective: ``'ce'``, ``'segpgd'``, ``'cospgd'`` (segmentation) — detection
            always attacks its training losses.
        schedule: ``'pgd'`` (fixed step α) or ``'apgd'`` (APGD's adaptive step).
        tasks: the task names it applies to.
        curve: whether its per-step metric curve is recorded (the fixed-step PGD family).
    """
    name: str
    norm: str
    iterative: bool
    objective: str
    schedule: str
    tasks: Tuple[str, ...]
    curve: bool


_BOTH = ('segmentation', 'rotated_detection')
_SEG = ('segmentation', )
#: Kind name -> :class:`AttackKind`.
ATTACK_KINDS: Dict[str, AttackKind] = {k.name: k for k in (
    AttackKind('fgsm', 'linf', False, 'ce', 'pgd', _BOTH, False),
    AttackKind('pgd', 'linf', True, 'ce', 'pgd', _BOTH, True),
    AttackKind('pgd_l2', 'l2', True, 'ce', 'pgd', _BOTH, True),
    AttackKind('segpgd', 'linf', True, 'segpgd', 'pgd', _SEG, True),
    AttackKind('cospgd', 'linf', True, 'cospgd', 'pgd', _SEG, True),
    AttackKind('apgd', 'linf', True, 'ce', 'apgd', _SEG, False),
)}

#: The loss groups a detection attack maximises: the classification and box-regression
#: losses of the RoI head, the RPN's losses, or every loss.
DETECTION_LOSSES = ('cls', 'bbox', 'rpn', 'all')
#: Iterations of the iterative attacks unless given (SemSegBench's PGD setting).
DEFAULT_STEPS = 20
#: The step α unless given, as a fraction of the full scale: 0.01 (2.55 grey levels of
#: uint8 data, SemSegBench's α at ε = 8/255).
DEFAULT_ALPHA_FRACTION = 0.01

Eps = Union[float, Tuple[float, ...]]


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and \
        math.isfinite(float(value))


def eps_label(eps: Eps) -> str:
    """How ε is written in condition keys and file names: ``8``, ``2.5``, per band
    ``8-8-8-300``."""
    def one(value: float) -> str:
        return f'{float(value):g}'
    if isinstance(eps, tuple):
        return '-'.join(one(v) for v in eps)
    return one(eps)


@dataclass(frozen=True)
class AttackSpec:
    """One attack at one budget: everything that determines its perturbations.

    Attributes:
        name: the attack's name in the run (the config key: ``pgd``, or a name of the
            user's own with ``type``).
        kind: the kind's name (:data:`ATTACK_KINDS`).
        eps: the budget in pixel units: a number, or one number per band (L∞ only).
        steps: iterations (1 for FGSM).
        alpha: the step size in pixel units (None: :data:`DEFAULT_ALPHA_FRACTION` of the
            full scale; APGD ignores it, its first step is 2ε); a number or one per band.
        random_start: start from a uniform point of the ε-ball (FGSM: never).
        losses: detection: the loss groups maximised (:data:`DETECTION_LOSSES`).
        max_value: the full scale of uint16 and float inputs (None: 65535 for uint16,
            1.0 for float; uint8 is always 255), as for the corruptions.
    """
    name: str
    kind: str
    eps: Eps
    steps: int = DEFAULT_STEPS
    alpha: Optional[Eps] = None
    random_start: bool = True
    losses: Tuple[str, ...] = ('all', )
    max_value: Optional[float] = None

    @property
    def attack_kind(self) -> AttackKind:
        return ATTACK_KINDS[self.kind]

    @property
    def norm(self) -> str:
        return self.attack_kind.norm

    @property
    def label(self) -> str:
        """``<name>_eps<ε>`` (``pgd_eps8``): the attack's part of condition keys."""
        return f'{self.name}_eps{eps_label(self.eps)}'

    @property
    def is_null(self) -> bool:
        """ε = 0: the perturbation is zero, the clean image is evaluated."""
        values = self.eps if isinstance(self.eps, tuple) else (self.eps, )
        return all(float(v) == 0.0 for v in values)

    def settings(self) -> Dict[str, Any]:
        """The settings written into a condition record (and checked when it is
        reused)."""
        return dict(attack=self.name, attack_type=self.kind,
                    eps=list(self.eps) if isinstance(self.eps, tuple) else self.eps,
                    steps=self.steps,
                    alpha=list(self.alpha) if isinstance(self.alpha, tuple) else self.alpha,
                    random_start=self.random_start, losses=list(self.losses),
                    max_value=self.max_value)


def _budget(value: Any, what: str, norm: str, allow_zero: bool) -> Eps:
    if isinstance(value, (list, tuple)):
        if norm != 'linf':
            raise SweepError(f'{what}: one number per band is for L∞ attacks; an L2 budget '
                             f'bounds the whole image, give one number, got {list(value)}')
        if not value or not all(_number(v) and float(v) >= 0 for v in value):
            raise SweepError(f'{what}: one number >= 0 per band, got {list(value)}')
        return tuple(float(v) for v in value)
    if not _number(value) or float(value) < 0 or (not allow_zero and float(value) == 0):
        low = '>= 0' if allow_zero else '> 0'
        raise SweepError(f'{what} must be a number {low} in pixel units (0-255 for uint8 '
                         f'data), or one per band, got {value!r}')
    return float(value)


_SETTING_KEYS = ('type', 'eps', 'steps', 'alpha', 'random_start', 'losses', 'max_value')


def parse_attack(name: str, entry: Mapping[str, Any], task: Optional[str] = None
                 ) -> Tuple[AttackSpec, ...]:
    """The specs of one entry of the ``attacks`` option (``name: dict(eps=[...], ...)``),
    one per ε, in the order given.

    Raises:
        SweepError: an unknown kind or key, a bad value, or a kind the task has no loss
            for (each message names the entry and what is valid).
    """
    where = f'attacks[{name!r}]'
    if not isinstance(entry, Mapping):
        raise SweepError(f'{where} must be a dict(eps=[...], ...), got '
                         f'{type(entry).__name__}')
    unknown = [k for k in entry if k not in _SETTING_KEYS]
    if unknown:
        raise SweepError(f'{where}: unknown key(s) {unknown}; valid: {list(_SETTING_KEYS)}')
    kind = entry.get('type', name)
    if kind not in ATTACK_KINDS:
        raise SweepError(f'{where}: unknown attack {kind!r}; valid: {list(ATTACK_KINDS)} '
                         "(a name of your own needs type='<one of them>')")
    spec = ATTACK_KINDS[kind]
    if task is not None and task not in spec.tasks:
        raise SweepError(f'{where}: {kind} is defined for {" and ".join(spec.tasks)}, not '
                         f'for {task}; valid for {task}: '
                         f'{[k for k, v in ATTACK_KINDS.items() if task in v.tasks]}')
    levels = entry.get('eps')
    if levels is None:
        raise SweepError(f'{where}: eps is required: the budgets in pixel units, e.g. '
                         'eps=[2, 4, 8] for uint8 data')
    if not isinstance(levels, (list, tuple)):
        levels = [levels]
    eps = [_budget(v, f'{where} eps', spec.norm, True) for v in levels]
    if not eps:
        raise SweepError(f'{where}: eps lists no budget')
    labels = [eps_label(e) for e in eps]
    if len(set(labels)) != len(labels):
        raise SweepError(f'{where}: a budget is given twice in eps={list(levels)}')
    steps = entry.get('steps', 1 if not spec.iterative else DEFAULT_STEPS)
    if not spec.iterative:
        if steps != 1:
            raise SweepError(f'{where}: fgsm takes one step; leave steps out, got {steps!r}')
    elif not isinstance(steps, numbers.Integral) or isinstance(steps, bool) or steps < 1:
        raise SweepError(f'{where}: steps must be an integer >= 1, got {steps!r}')
    alpha = entry.get('alpha')
    if alpha is not None:
        if not spec.iterative or spec.schedule == 'apgd':
            raise SweepError(f'{where}: {kind} sets its own step size; leave alpha out')
        alpha = _budget(alpha, f'{where} alpha', spec.norm, False)
    random_start = entry.get('random_start', spec.iterative)
    if not isinstance(random_start, bool):
        raise SweepError(f'{where}: random_start must be True or False, got '
                         f'{random_start!r}')
    if random_start and not spec.iterative:
        raise SweepError(f'{where}: fgsm has no random start')
    losses = entry.get('losses', ('all', ))
    if isinstance(losses, str):
        losses = (losses, )
    if 'losses' in entry and task is not None and task != 'rotated_detection':
        raise SweepError(f'{where}: losses are for detection attacks; segmentation attacks '
                         "maximise their kind's pixel objective")
    if not isinstance(losses, (list, tuple)) or not losses or \
            any(item not in DETECTION_LOSSES for item in losses):
        raise SweepError(f'{where}: losses must be names of {list(DETECTION_LOSSES)}, got '
                         f'{losses!r}')
    max_value = entry.get('max_value')
    if max_value is not None and (not _number(max_value) or float(max_value) <= 0):
        raise SweepError(f'{where}: max_value must be the full scale of the data (> 0), '
                         f'got {max_value!r}')
    return tuple(AttackSpec(name, kind, e, int(steps), alpha, random_start,
                            tuple(losses), None if max_value is None else float(max_value))
                 for e in eps)
