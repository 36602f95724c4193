"""Test loops that evaluate under a corruption.

``CorruptionTestLoop`` is MMEngine's ``TestLoop`` with a condition: set it as a
config's ``test_cfg`` and every test entry point — ``tools/test.py`` of this package,
the toolboxes' own ``tools/test.py``, ``Runner.from_cfg(cfg).test()`` in a notebook —
evaluates under that corruption, with the ``ApplyCorruption`` step placed correctly
in the test pipeline::

    custom_imports = dict(imports=['reobench_mm'], allow_failed_imports=False)
    test_cfg = dict(type='CorruptionTestLoop', corruption='gaussian_noise', severity=5)

and, from the command line of any tool that takes ``--cfg-options``::

    --cfg-options test_cfg.corruption=cloud test_cfg.severity=3
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Union

from mmengine.logging import print_log
from mmengine.runner import TestLoop
from torch.utils.data import DataLoader

from ..registry import LOOPS
from ..transforms.corruption import ApplyCorruption, corruption_steps
from ..transforms.placement import Placement, condition_of, place_condition

__all__ = ['CorruptionTestLoop']


@LOOPS.register_module()
class CorruptionTestLoop(TestLoop):
    """``TestLoop`` evaluating under one corruption condition.

    The test pipeline's ``ApplyCorruption`` step gets the condition (its other options,
    e.g. ``max_value`` or ``ignore_index``, are kept); a pipeline without one gets one
    where it belongs, and a misplaced one is moved there (logged). The condition is
    logged with the metrics and kept in :attr:`condition`.

    Args:
        runner, dataloader, evaluator, fp16: as ``TestLoop``.
        corruption (str): a corruption name, or ``'clean'``.
        severity (int): 0..5 (0 = clean).
        seed (int): seed of the corruption's random draws.
        protocol (str): ``'reobench'`` or ``'geofm_calibration'``.
        border (str): ``'reflect'`` or ``'constant'`` (rotate, translate).
    """

    def __init__(self, runner, dataloader: Union[DataLoader, Dict], evaluator: Union[Any,
                 Dict, List], fp16: bool = False, corruption: str = 'clean', severity: int = 0,
                 seed: int = 0, protocol: str = 'reobench', border: str = 'reflect') -> None:
        cfg = getattr(runner, 'cfg', None) or {}
        if cfg.get('corruption_cfg') is not None:
            raise ValueError(
                'this config sets corruption_cfg, which nothing reads: set the condition as '
                "test_cfg=dict(type='CorruptionTestLoop', corruption=..., severity=...) "
                '(or --cfg-options test_cfg.corruption=NAME test_cfg.severity=K) and remove '
                'corruption_cfg')
        self.condition = dict(corruption=corruption, severity=severity, seed=seed,
                              protocol=protocol, border=border)
        placements = None
        if isinstance(dataloader, dict):  # place the step in the config, then build
            dataloader = copy.deepcopy(dataloader)
            placements = place_condition(dataloader, self.condition, cfg.get('default_scope'))
        super().__init__(runner, dataloader, evaluator, fp16)
        if placements is None:  # a dataloader built by the caller: edit its pipeline
            placements = place_condition(self.dataloader, self.condition,
                                         cfg.get('default_scope'))
        self.placements: List[Placement] = placements
        applied = condition_of(corruption_steps(self.dataloader.dataset))
        if applied != condition_of([ApplyCorruption(**self.condition)]):
            raise RuntimeError(f'the built test pipeline applies {applied}, not the loop\'s '
                               f'condition {self.condition}')

    @property
    def condition_text(self) -> str:
        """``'gaussian_noise severity 5 (seed 0, protocol reobench)'`` or ``'clean'``."""
        name, severity = self.condition['corruption'], self.condition['severity']
        if name == 'clean' or severity == 0:
            return 'clean'
        return (f'{name} severity {severity} (seed {self.condition["seed"]}, protocol '
                f'{self.condition["protocol"]}, border {self.condition["border"]})')

    def run(self) -> dict:
        for placement in self.placements:
            print_log(f'test condition: {self.condition_text}; {placement.describe()}',
                      logger='current')
        metrics = super().run()
        print_log(f'metrics under {self.condition_text}: ' + ', '.join(
            f'{key}: {value:.4f}' if isinstance(value, float) else f'{key}: {value}'
            for key, value in metrics.items()), logger='current')
        return metrics
