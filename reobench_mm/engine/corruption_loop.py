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
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
from mmengine.logging import print_log
from mmengine.runner import TestLoop
from torch.utils.data import DataLoader

from reobench_corruptions.condition import CLEAN, Condition
from ..datasets.class_mapped import check_class_map_ignore
from ..datasets.empty_sets import empty_set_reason, is_empty_set_error
from ..evaluation.evaluator_cfg import label_ignore_index
from ..fileio import plain_float
from ..registry import LOOPS
from .hooks import CheckpointClassesHook
from .loop_options import other_option_error
from .workdir import quiet_log_write_errors
from ..transforms.placement import (Placement, check_condition_pair, condition_of,
                                    corruption_steps, label_pipelines, place_condition)

__all__ = ['CorruptionTestLoop', 'check_batch_condition', 'check_not_empty',
           'empty_dataset_error']


@LOOPS.register_module()
class CorruptionTestLoop(TestLoop):
    """``TestLoop`` evaluating under one corruption condition (the single-condition loop;
    clean plus many conditions in one run is :class:`~reobench_mm.robustness.test_loop.
    RobustnessTestLoop`).

    With a condition, the test pipeline's ``ApplyCorruption`` step gets it (its other
    options, e.g. ``max_value`` or ``ignore_index``, are kept); a pipeline without one
    gets one where it belongs, and a misplaced one is moved there (logged). Without one
    (``corruption=None``, the default) the pipeline runs as it is written: clean, or
    the condition of its own ``ApplyCorruption`` step. The condition is logged with the
    metrics; :attr:`condition` is the loop's own (None without one) and :attr:`applied`
    what the pipeline applies (both :class:`~reobench_corruptions.condition.Condition`),
    and every evaluated sample is checked to carry it in its metainfo.

    Args:
        runner, dataloader, evaluator, fp16: as ``TestLoop``.
        corruption (str, optional): a corruption name, or ``'clean'``.
        severity (int, optional): 1..5 with a corruption (0 only with ``'clean'``).
        seed (int, optional): seed of the corruption's random draws (default 0).
        protocol (str, optional): ``'reobench'`` (default) or ``'geofm_calibration'``.
        border (str, optional): ``'reflect'`` (default) or ``'constant'`` (rotate,
            translate).

    The ``ApplyCorruption`` step pads moved label maps (``rotate``, ``scale``,
    ``translate``) with the label the evaluator's segmentation metrics ignore (their
    ``ignore_index``); a written step that pads with another label is refused.

    Raises:
        ValueError: a corruption without a severity (or the reverse), settings without a
            corruption, a condition that differs from the one an ``ApplyCorruption`` step
            of the pipeline names, a config that sets ``corruption_cfg``, a written step
            whose ``ignore_index`` is not the evaluator's, an option of another loop.
    """

    def __init__(self, runner, dataloader: Union[DataLoader, Dict], evaluator: Union[Any,
                 Dict, List], fp16: bool = False, corruption: Optional[str] = None,
                 severity: Optional[int] = None, seed: Optional[int] = None,
                 protocol: Optional[str] = None, border: Optional[str] = None,
                 **other: Any) -> None:
        if other:  # refused with what to do, not a bare TypeError
            raise other_option_error(other)
        cfg = getattr(runner, 'cfg', None) or {}
        quiet_log_write_errors(runner.logger)  # a full disk: one line, not tracebacks
        if cfg.get('corruption_cfg') is not None:
            raise ValueError(
                'this config sets corruption_cfg, which nothing reads: set the condition as '
                "test_cfg=dict(type='CorruptionTestLoop', corruption=..., severity=...) "
                '(or --cfg-options test_cfg.corruption=NAME test_cfg.severity=K) and remove '
                'corruption_cfg')
        check_condition_pair(corruption, severity, 'test_cfg')
        options = dict(seed=seed, protocol=protocol, border=border)
        if corruption is None:
            given = [f'test_cfg.{k}' for k, v in options.items() if v is not None]
            if given:
                raise ValueError(f'{", ".join(given)} given without test_cfg.corruption')
            self.condition: Optional[Condition] = None
        else:
            self.condition = Condition.of(corruption, severity, **options)
        scope = cfg.get('default_scope')
        #: the label the evaluator's segmentation metrics ignore: moved label maps are
        #: padded with it (None for detection)
        self.ignore_index = label_ignore_index(evaluator)
        placements = None
        if isinstance(dataloader, dict) and isinstance(dataloader.get('dataset'), dict):
            dataloader = copy.deepcopy(dataloader)  # place the step in the config, then build
            placements = self._place(dataloader, scope)
        try:
            super().__init__(runner, dataloader, evaluator, fp16)
        except ValueError as error:
            clear = empty_dataset_error(error, dataloader, 'CorruptionTestLoop')
            if clear is None:
                raise
            raise clear from None
        check_class_map_ignore(self.dataloader.dataset, self.ignore_index, 'the test set')
        if placements is None:  # built by the caller
            placements = self._place(self.dataloader, scope)
        self.placements: List[Placement] = placements
        check_not_empty(self.dataloader.dataset, 'CorruptionTestLoop')
        self.applied: Condition = condition_of(corruption_steps(self.dataloader.dataset))
        # a checkpoint of other classes is refused when the runner loads it
        runner.register_hook(CheckpointClassesHook(
            lambda: getattr(self.dataloader.dataset, 'metainfo', None),
            lambda: getattr(runner, '_load_from', None)))
        if self.condition is not None and self.applied != (
                CLEAN if self.condition.is_clean else self.condition):
            raise RuntimeError(f'the built test pipeline applies {self.applied.settings()}, '
                               f'not the loop\'s condition {self.condition.settings()}')

    def _place(self, dataloader: Any, scope: Optional[str]) -> List[Placement]:
        """The condition into the pipelines; without one, a clean step where there is
        none, so that every sample says what it was evaluated under."""
        if self.condition is None:
            return label_pipelines(dataloader, scope, ignore_index=self.ignore_index)
        return place_condition(dataloader, self.condition, scope, override=False,
                               ignore_index=self.ignore_index)

    @property
    def condition_text(self) -> str:
        """``'gaussian_noise severity 5 (seed 0, protocol reobench, border reflect)'`` or
        ``'clean'``: what the pipeline applies."""
        applied = self.applied
        if applied.is_clean:
            return applied.key
        return (f'{applied.corruption} severity {applied.severity} (seed {applied.seed}, '
                f'protocol {applied.protocol}, border {applied.border})')

    def run(self) -> dict:
        for placement in self.placements:
            print_log(f'test condition: {self.condition_text}; {placement.describe()}',
                      logger='current')
        if not self.placements:
            print_log(f'test condition: {self.condition_text} (no test pipeline with an '
                      'image-loading step was found)', logger='current')
        # float32 metrics as their shortest decimal, as every entry point writes them
        metrics = {key: plain_float(value) if isinstance(value, (float, np.floating)) else value
                   for key, value in super().run().items()}
        print_log(f'metrics under {self.condition_text}: ' + ', '.join(
            f'{key}: {value:.4f}' if isinstance(value, float) else f'{key}: {value}'
            for key, value in metrics.items()), logger='current')
        return metrics

    def run_iter(self, idx, data_batch: Sequence[dict]) -> None:
        """Check that the batch was made under the loop's condition (dataloader workers
        that started before the condition was set would not be), then evaluate it."""
        check_batch_condition(data_batch, self.applied, idx)
        super().run_iter(idx, data_batch)


def empty_dataset_error(error: Exception, dataloader: Any, loop: str) -> Optional[ValueError]:
    """The clear error for MMEngine's failure to build a dataset without samples (its
    ``_serialize_data`` concatenates nothing): where it looked and what is there
    (:func:`~reobench_mm.datasets.empty_sets.empty_set_reason`); None for any other
    error."""
    if not is_empty_set_error(error):
        return None
    dataset = dataloader.get('dataset') if isinstance(dataloader, dict) else None
    return ValueError(f'{loop}: the test dataset has no samples: '
                      f'{empty_set_reason(dataset)}')


def check_not_empty(dataset: Any, loop: str) -> None:
    """Refuse a test set without samples (nothing to evaluate; MMEngine's metrics would fail
    later with a message that does not say why)."""
    if len(dataset) == 0:
        raise ValueError(f'{loop}: the test dataset has no samples: '
                         f'{empty_set_reason(dataset)}')


def check_batch_condition(data_batch: Any, condition: Condition, idx: int = 0) -> None:
    """Raise a ``RuntimeError`` when a sample of ``data_batch`` says in its metainfo that it
    was made under another condition than ``condition`` (what the loop evaluates): its
    dataloader workers started before the condition was set."""
    expected = (CLEAN if condition.is_clean else condition).pair
    for sample in _flat(data_batch.get('data_samples') if isinstance(data_batch, dict)
                        else None):
        meta = getattr(sample, 'metainfo', {})
        if 'corruption' in meta and (meta['corruption'], meta.get('severity')) != expected:
            raise RuntimeError(
                f'sample {meta.get("img_path", idx)} was made under {meta["corruption"]} '
                f'severity {meta.get("severity")}, but the loop evaluates '
                f'{condition.corruption} severity {condition.severity}: its dataloader '
                'workers started before the condition was set; rebuild the dataloader')


def _flat(samples: Any) -> list:
    """Data samples of a batch; those of test-time augmentation come as nested lists."""
    if samples is None:
        return []
    if isinstance(samples, (list, tuple)):
        return [s for item in samples for s in _flat(item)]
    return [samples]
