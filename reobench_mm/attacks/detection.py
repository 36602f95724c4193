"""Attacking an MMDetection / MMRotate detector (Oriented R-CNN) through its training
losses.

The image goes through the model's own data preprocessor (the gradient flows back
through the normalisation to the raw pixels) and the detector's ``loss`` with the
sample's own ground truth (``gt_instances``: the test pipeline must load the
annotations, as the validation pipelines of the toolboxes do). The model stays in eval
mode (batch norm with its running statistics, no dropout); the proposal and RoI
samplers draw from the global torch generator, which is seeded per image and step, so
that the same seed gives the same perturbation.

The losses maximised are chosen by group (:data:`~reobench_mm.attacks.spec.
DETECTION_LOSSES`): ``cls`` (the RoI head's classification loss), ``bbox`` (its box
regression), ``rpn`` (the RPN's losses) or ``all`` (every loss of the model).
"""
from __future__ import annotations

import zlib
from typing import Any, Dict, Sequence

import torch
from torch import Tensor

from .iterative import Objective

__all__ = ['DetectionTarget', 'select_losses']


def _group(key: str) -> str:
    if 'rpn' in key:
        return 'rpn'
    if 'cls' in key:
        return 'cls'
    if 'bbox' in key or 'box' in key:
        return 'bbox'
    return 'other'


def select_losses(losses: Dict[str, Any], groups: Sequence[str]) -> Tensor:
    """The sum of the loss terms of ``losses`` (the detector's loss dict: tensors or lists
    of tensors; keys without ``loss`` such as ``acc`` are not losses) in ``groups``.

    Raises:
        RuntimeError: no loss of the model is in the groups (the keys found are named).
    """
    keys = [k for k in losses if 'loss' in k]
    chosen = [k for k in keys if 'all' in groups or _group(k) in groups]
    if not chosen:
        raise RuntimeError(f'the detector has no loss in the groups {list(groups)}; its '
                           f'losses: {keys}')
    total = 0
    for key in chosen:
        value = losses[key]
        for term in (value if isinstance(value, (list, tuple)) else [value]):
            total = total + term.sum()
    return total


class DetectionTarget:
    """One detector under attack.

    Args:
        model: the detector (``data_preprocessor`` and ``loss``), in eval mode.
        losses: the loss groups to maximise.
        seed: the run's seed (with the image's key and the step it seeds the samplers).
    """

    def __init__(self, model: Any, losses: Sequence[str], seed: int = 0) -> None:
        for name in ('data_preprocessor', 'loss'):
            if not hasattr(model, name):
                raise TypeError(f'{type(model).__name__} has no {name}: detection attacks '
                                'need an MMDetection detector (a data preprocessor and loss)')
        self.model, self.losses, self.seed = model, tuple(losses), int(seed)

    def objective(self, sample: Any, key: str, device: Any) -> Objective:
        """The loss to maximise for ``sample`` (a copy is attacked), its samplers seeded by
        ``(seed, key, step)``."""
        work = sample.clone()
        instances = getattr(sample, 'gt_instances', None)
        if instances is None or 'bboxes' not in instances:
            raise RuntimeError('the sample has no gt_instances: a detection attack needs '
                               'the boxes (load the annotations in the test pipeline, as '
                               'the validation pipelines do)')
        base = zlib.crc32(f'{self.seed}|{key}'.encode('utf-8'))

        def loss(x: Tensor, step: int, steps: int) -> Tensor:
            with torch.random.fork_rng(devices=[] if x.device.type == 'cpu' else [x.device]):
                torch.manual_seed((base + 1_000_003 * step) % (2**63))
                data = self.model.data_preprocessor(dict(inputs=[x], data_samples=[work]),
                                                    False)
                losses = self.model.loss(data['inputs'], data['data_samples'])
            return select_losses(losses, self.losses)
        return loss
