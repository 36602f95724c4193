"""Evaluating conditions: what both robustness loops hold to run the iterations of a
condition and evaluate it.

:class:`ConditionEvaluation` takes a condition of any kind and returns one
:class:`Evaluated` value: its metrics, its seconds, the calibration details and per-image
statistics its record keeps, and what its kind's batch transform recorded (an attack's
cost and curve). It switches the placed steps
(:class:`~reobench_mm.robustness.switching.ConditionSwitch`), reads the condition's images
where they come from (:class:`~reobench_mm.robustness.shifted_data.ConditionSources`),
prepares each batch (check, device corruption, the kind's transform), predicts it with the loop's
forward (its precision, its losses) between the loop's iteration hooks, and evaluates the
evaluator. With ``fan_out`` the test set's corruption conditions are evaluated in passes
(:mod:`~reobench_mm.robustness.fan_out`), the others one by one.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import cv2

import torch

from reobench_corruptions.condition import Condition
from ..analysis.results import condition_result_from_metrics
from ..errors import SweepError
from ..evaluation.keys import Task
from ..fileio import plain_float
from .conditions.kinds import BatchContext, kind_of
from .evaluators import calibration_metrics, condition_image_stats
from .fan_out import Item, fan_out_groups, join_batches, run_pass
from .shifted_data import ConditionSources
from .switching import ActiveCondition, ConditionSwitch, Feed, quiet_metric_tables

__all__ = ['ConditionEvaluation', 'Evaluated']


@dataclass(frozen=True)
class Evaluated:
    """What evaluating one condition gave.

    Attributes:
        metrics: the evaluator's metrics (plain floats).
        seconds: the evaluation's seconds (a fan-out pass's shared equally).
        calibration: calibration metric prefix -> its curves and bins.
        image_stats: the per-image statistics of the task metric (or None).
        transformed: what the batch transform of the condition's kind recorded beside the
            metrics (an attack's run; None for a kind without one).
    """
    metrics: Dict[str, float]
    seconds: float
    calibration: Dict[str, dict] = field(default_factory=dict)
    image_stats: Any = None
    transformed: Optional[Dict[str, Any]] = None


def _plain(metrics: Dict[str, Any]) -> Dict[str, float]:
    return {str(k): plain_float(v) for k, v in metrics.items()}


def _evaluated(metrics: Dict[str, float], seconds: float, evaluator: Any,
               transformed: Optional[Dict[str, Any]] = None) -> Evaluated:
    """``metrics`` and what the record keeps beside them, read from ``evaluator`` right
    after it evaluated: the calibration metrics' curves and bins, the per-image
    statistics."""
    calibration = {prefix: {k: v for k, v in (metric.last_details or {}).items()
                            if k != 'stats'}
                   for prefix, metric in calibration_metrics(evaluator).items()}
    return Evaluated(metrics, seconds, calibration, condition_image_stats(evaluator),
                     transformed)


#: What MMCV's image loading and OpenCV say of a file they cannot decode.
_DECODE_FAILURES = ('failed to load image', '!buf.empty()', 'imdecode')


@contextmanager
def naming_decode_errors(what: str) -> Iterator[None]:
    """A file the checks before the run passed but the loading step cannot decode (in a
    dataloader worker or here) ends the run with one line naming ``what`` (the
    conditions read) and the loader's message (MMCV names the file), not a traceback."""
    try:
        yield
    except (AssertionError, cv2.error, ValueError, RuntimeError) as error:
        text = str(error)
        if isinstance(error, SweepError) or not any(m in text for m in _DECODE_FAILURES):
            raise
        line = ' '.join(text.split())[-300:]
        raise SweepError(f'{what}: an image or label file cannot be decoded ({line}); '
                         'replace or remove it and run again (finished conditions are '
                         'kept)') from None


class ConditionEvaluation:
    """Runs a loop's iterations under a condition and evaluates it.

    Args:
        runner: the runner (the model, the hooks).
        evaluator: the loop's evaluator.
        switch: the run's condition switch.
        sources: where each condition's images come from.
        task: the task (an attack's objective, the metric of its record).
        ignore_index: the label the evaluator ignores (an attack's objective).
        forward: the loop's forward of one prepared batch (its precision; it keeps the
            losses the model returns).
        phase: ``'test'`` or ``'val'``: the iteration hooks called around each batch
            (``before_test_iter``, ...).
        fan_out, fan_out_batch: conditions per pass over the test set (0: no passes) and
            conditions per joined forward.
    """

    def __init__(self, runner: Any, evaluator: Any, switch: ConditionSwitch,
                 sources: ConditionSources, task: Task, ignore_index: Optional[int],
                 forward: Callable[[Any], list], phase: str = 'test', fan_out: int = 0,
                 fan_out_batch: int = 1) -> None:
        self.runner, self.evaluator = runner, evaluator
        self.switch, self.sources = switch, sources
        self.task, self.ignore_index = task, ignore_index
        self.forward, self.phase = forward, phase
        self.fan_out, self.fan_out_batch = fan_out, fan_out_batch

    # ------------------------------------------------------------------ one batch
    def predict(self, idx: int, data_batch: Any, evaluator: Any) -> None:
        """Predict a prepared batch and process it with ``evaluator``, the iteration
        hooks around it (as ``TestLoop.run_iter`` / ``ValLoop.run_iter`` do)."""
        call = self.runner.call_hook
        with torch.no_grad():
            call(f'before_{self.phase}_iter', batch_idx=idx, data_batch=data_batch)
            outputs = self.forward(data_batch)
            evaluator.process(data_samples=outputs, data_batch=data_batch)
            call(f'after_{self.phase}_iter', batch_idx=idx, data_batch=data_batch,
                 outputs=outputs)

    def run_iter(self, idx: int, data_batch: Any, active: Optional[ActiveCondition] = None,
                 evaluator: Any = None) -> None:
        """One batch under ``active`` (default: the switch's active condition), processed
        by ``evaluator`` (default: the loop's)."""
        active = active or self.switch.active
        self.predict(idx, self.switch.prepare(idx, data_batch, active),
                     evaluator if evaluator is not None else self.evaluator)

    # ------------------------------------------------------------------ one condition
    def evaluate(self, condition: Condition, quiet: Optional[bool] = None) -> Evaluated:
        """Evaluate ``condition`` on its images (the test set's, or its own data's); a kind
        with a batch transform (an attack) transforms every batch of its base condition.
        The metrics' own tables are logged for the clean condition of the test set only,
        or unless ``quiet``."""
        kind = kind_of(condition)
        transform = None
        if kind.transforms_batches:
            classes = (getattr(self.switch.test.dataloader.dataset, 'metainfo', None)
                       or {}).get('classes')
            transform = kind.batches(condition, BatchContext(
                self.runner.model, self.task, self.ignore_index, len(classes or ())))
        feed, applied = self.sources.feed(condition)
        if transform is not None or feed is not self.switch.test:
            quiet = True
        with naming_decode_errors(f'condition {condition.key}'):
            metrics, seconds = self._run(applied, feed, quiet, transform)
        recorded = None if transform is None else transform.record(
            condition_result_from_metrics(metrics, self.task.results_name).value)
        return _evaluated(metrics, seconds, self.evaluator, recorded)

    def _run(self, condition: Condition, feed: Feed, quiet: Optional[bool],
             transform: Any = None) -> Tuple[Dict[str, float], float]:
        """The iterations of ``feed`` under ``condition`` (each batch transformed by
        ``transform``), then the evaluator: ``(metrics, seconds)``; the feed switched back
        to clean after."""
        active = self.switch.activate(condition, feed, transform=transform)
        start = time.perf_counter()
        try:
            self.runner.model.eval()
            for idx, data_batch in enumerate(feed.dataloader):
                self.run_iter(idx, data_batch, active)
            with quiet_metric_tables(not condition.is_clean if quiet is None else quiet):
                metrics = self.evaluator.evaluate(len(feed.dataloader.dataset))
        finally:
            self.switch.reset(feed)
        return _plain(metrics), time.perf_counter() - start

    # ------------------------------------------------------------------ many conditions
    def evaluations(self, todo: Sequence[Condition]) -> Iterator[Tuple[Condition, Evaluated]]:
        """``(condition, evaluated)`` of every condition of ``todo``: with ``fan_out``, the
        test set's corruption conditions in passes of ``fan_out`` conditions, then the
        others one by one; else one by one, in order."""
        size = self.fan_out
        together = [c for c in todo if size and self.sources.fans_out(c)]
        if len(together) < 2:
            together = []
        test = self.switch.test
        for group in fan_out_groups(together, size or 1):
            self.switch.reset()
            self.runner.model.eval()
            actives = {c: self.switch.active_for(c) for c in group}
            with naming_decode_errors(f'conditions {", ".join(c.key for c in group)}'):
                done = run_pass(group, test.dataloader, test.steps, self.evaluator,
                                lambda idx, items: self._pass_items(idx, items, actives),
                                self._finish, [actives[c].pipeline for c in group],
                                self.fan_out_batch)
            for condition in group:
                metrics, evaluator, seconds = done.pop(condition)
                yield condition, _evaluated(metrics, seconds, evaluator)
        for condition in todo:
            if condition not in together:
                yield condition, self.evaluate(condition)

    def _pass_items(self, idx: int, items: List[Item],
                    actives: Dict[Condition, ActiveCondition]) -> None:
        """The batches of some conditions of a fan-out pass: each processed by its own
        evaluator, the iteration hooks around each; one condition's batch forwarded alone,
        several joined into one forward (``fan_out_batch``)."""
        if len(items) == 1:
            condition, batch, evaluator = items[0]
            self.run_iter(idx, batch, actives[condition], evaluator)
            return
        call = self.runner.call_hook
        prepared = []
        for condition, batch, evaluator in items:
            batch = self.switch.prepare(idx, batch, actives[condition])
            call(f'before_{self.phase}_iter', batch_idx=idx, data_batch=batch)
            prepared.append((batch, evaluator))
        with torch.no_grad():
            outputs = self.forward(join_batches([batch for batch, _ in prepared]))
        start = 0
        for batch, evaluator in prepared:
            part = outputs[start:start + len(batch['data_samples'])]
            start += len(part)
            evaluator.process(data_samples=part, data_batch=batch)
            call(f'after_{self.phase}_iter', batch_idx=idx, data_batch=batch, outputs=part)

    def _finish(self, condition: Condition, evaluator: Any) -> Dict[str, float]:
        """The metrics of a fan-out pass's condition (its evaluator evaluated)."""
        with quiet_metric_tables(not condition.is_clean):
            metrics = evaluator.evaluate(len(self.switch.test.dataloader.dataset))
        return _plain(metrics)
