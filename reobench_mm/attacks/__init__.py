"""Adversarial attacks on the input pixels (torch alone; the models enter through their
data preprocessor and their ``predict`` or ``loss``).

- :mod:`~reobench_mm.attacks.spec`: the kinds of attack and one attack's settings;
- :mod:`~reobench_mm.attacks.functional`: budgets, random starts, steps, projections and
  the per-pixel objectives (cross-entropy, SegPGD, CosPGD);
- :mod:`~reobench_mm.attacks.iterative`: running an attack on one image (FGSM, PGD, APGD);
- :mod:`~reobench_mm.attacks.segmentation`, :mod:`~reobench_mm.attacks.detection`: the
  model side of each task.

The robustness loops evaluate attacks as conditions
(:mod:`reobench_mm.robustness.conditions.attacks`).
"""
from .functional import NORMS
from .iterative import perturb
from .spec import ATTACK_KINDS, DETECTION_LOSSES, AttackKind, AttackSpec, parse_attack

__all__ = ['NORMS', 'perturb', 'ATTACK_KINDS', 'DETECTION_LOSSES', 'AttackKind',
           'AttackSpec', 'parse_attack']
