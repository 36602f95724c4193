"""``RobustnessValLoop``: a few conditions at each validation while fine-tuning.

Registered in ``LOOPS``; the toolboxes' own ``tools/train.py`` uses it from a config::

    val_cfg = dict(type='RobustnessValLoop', corruptions=['cloud', 'gaussian_noise', 'haze'],
                   severities=[3])

With ``attacks`` (as the test loop takes them) the worst of the battery per budget,
``adv/worst_eps<ε>/<metric>``, joins the metrics: a ``save_best`` key for adversarial
robustness.

How it switches conditions and what it returns is :mod:`reobench_mm.robustness.switching`.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Sequence, Union

from mmengine.logging import print_log
from mmengine.runner import ValLoop
from mmengine.runner.amp import autocast
from torch.utils.data import DataLoader

from ..analysis.results import aggregate, condition_result_from_metrics
from reobench_corruptions.condition import Condition
from ..engine.losses import update_losses
from ..evaluation.evaluator_cfg import label_ignore_index
from ..engine.workdir import quiet_log_write_errors
from ..evaluation.keys import get_task
from ..registry import LOOPS
from ..utils.config import check_no_corruption_cfg, infer_task
from .condition_evaluation import ConditionEvaluation, Evaluated
from .conditions.kinds import CONDITION_KINDS, blocks_of, check_task, kind_of, records_by_block
from .evaluators import classwise_evaluator
from .options import (VALIDATION_DEFAULTS, VALIDATION_OPTIONS, RobustnessOptions,
                      describe_options)
from .shifted_data import ConditionSources
from .switching import ConditionSwitch, find_steps, place_switch_step, robustness_metrics

__all__ = ['RobustnessValLoop']


@LOOPS.register_module()
class RobustnessValLoop(ValLoop):
    """``ValLoop`` evaluating clean plus a few corruptions at each validation.

    For fine-tuning: ``val_cfg = dict(type='RobustnessValLoop', corruptions=['cloud',
    'gaussian_noise', 'haze'], severities=[3])`` adds ``robust/avg``, ``robust/delta_tp``
    and the per-condition metrics (see :mod:`reobench_mm.robustness.switching`) to the
    validation metrics, next to the clean metrics under their own keys, so that
    ``CheckpointHook(save_best='robust/avg')``, ``LoggerHook`` and the visualizer backends
    (TensorBoard, W&B, ...) use them as any validation metric. The seconds each validation
    took are logged. Nothing is written to disk.

    Args:
        runner, dataloader, evaluator, fp16: as ``ValLoop``.
        **options: the options of :data:`~reobench_mm.robustness.options.VALIDATION_OPTIONS`,
            checked by :class:`~reobench_mm.robustness.options.RobustnessOptions` (listed
            below). With attacks or shift sets, MMSeg's ``IoUMetric`` and MMRotate's
            ``DOTAMetric`` in the evaluator config are evaluated by the package's per-class
            twins (the same numbers, plus the per-class values and the per-image
            statistics the worst of the battery and a mapped set's like-for-like numbers
            need).

    Raises:
        SweepError (a ``ValueError``): an unknown option or a bad value.

    Options:
{options}
    """

    def __init__(self, runner, dataloader: Union[DataLoader, Dict],
                 evaluator: Union[Any, Dict, List], fp16: bool = False,
                 **options: Any) -> None:
        check_no_corruption_cfg(runner.cfg)
        self.options = RobustnessOptions.create(options, allowed=VALIDATION_OPTIONS,
                                                defaults=VALIDATION_DEFAULTS,
                                                owner='RobustnessValLoop')
        quiet_log_write_errors(runner.logger)  # a full disk: one line, not tracebacks
        self.plan = self.options.plan
        cfg = runner.cfg
        self.task = get_task(infer_task(cfg))
        self.ignore_index = label_ignore_index(evaluator)
        check_task(self.options, self.task.name)
        # attacks (the worst of the battery) and sets of their own (a mapped set's
        # like-for-like ID side) need the per-image statistics of the per-class twins
        needs_stats = any((k.transforms_batches or k.own_data is not None)
                          and self.options.entries(k) for k in CONDITION_KINDS)
        if needs_stats and isinstance(evaluator, (dict, list, tuple)):
            evaluator = classwise_evaluator(evaluator)
        given = dataloader
        dataloader, self.placements = place_switch_step(
            dataloader, self.plan.clean, cfg.get('default_scope'), 'robustness validation',
            self.ignore_index)
        super().__init__(runner, dataloader, evaluator, fp16)
        test = find_steps(self.dataloader, type(self).__name__)
        #: switches the placed steps to each condition and prepares its batches
        self.switch = ConditionSwitch(test, self.plan.clean)
        sources = ConditionSources(test, self.options, given, None, runner,
                                   self.ignore_index, 'val_dataloader')
        #: runs a condition's iterations and evaluates it
        self.evaluation = ConditionEvaluation(runner, self.evaluator, self.switch, sources,
                                              self.task, self.ignore_index, self._forward,
                                              'val')
        self.decode_caches: list = []

    def run_iter(self, idx, data_batch: Sequence[dict]) -> None:
        """One batch under the active condition (:meth:`ConditionEvaluation.run_iter`:
        checked, attacked under an attack condition, outside the ``no_grad`` of the
        prediction: the attack's gradients are the input's only)."""
        self.evaluation.run_iter(idx, data_batch)

    def _forward(self, data_batch: Any) -> list:
        """``ValLoop``'s forward: the model's ``val_step`` (in ``fp16`` when asked); the
        validation losses it returns are kept."""
        with autocast(enabled=self.fp16):
            outputs = self.runner.model.val_step(data_batch)
        outputs, self.val_loss = update_losses(outputs, self.val_loss)
        return outputs

    def _record(self, condition: Any, done: Evaluated) -> Dict[str, Any]:
        """What a block's builder reads of a condition's record: its result, what its
        kind's batch transform recorded, and the data part of its fingerprint (a shift
        set's class-map notes and the classes it can hold, for the like-for-like
        numbers)."""
        record: Dict[str, Any] = dict(result=dict(value=condition_result_from_metrics(
            done.metrics, self.task.results_name).value),
            fingerprint=self.evaluation.sources.fingerprint({}, condition))
        if done.transformed is not None:
            record[kind_of(condition).record_field] = done.transformed
        return record

    def run(self) -> dict:
        """Validate under every condition; the metrics go to ``after_val_epoch``."""
        start = time.perf_counter()
        self.runner.call_hook('before_val')
        self.runner.call_hook('before_val_epoch')
        self.evaluation.sources.check(self.options.all_conditions)  # each set once
        if not self.decode_caches:
            self.decode_caches = self.switch.cache_decoding(self.options.decode_cache_bytes)
        self.val_loss.clear()
        evaluation = self.evaluation
        done = {c: evaluation.evaluate(c) for c in self.options.all_conditions}
        table, by_block = records_by_block(done)
        raw: Dict[Condition, Dict[str, float]] = {c: d.metrics for c, d in table.items()}
        summary = aggregate(raw, protocol=self.plan.protocol, task=self.task.results_name,
                            expected_severities=self.plan.severities)
        clean = done[self.plan.clean]
        summary.blocks.update(blocks_of(
            {name: {c: self._record(c, d) for c, d in block.items()}
             for name, block in by_block.items()}, self._record(self.plan.clean, clean),
            clean.image_stats,
            {c: d.image_stats for c, d in done.items()}, summary.metric,
            dict(resamples=0)))
        metrics = robustness_metrics(summary, raw[self.plan.clean])
        seconds = time.perf_counter() - start
        print_log(f'robustness validation: {len(done)} conditions in {seconds:.1f} s; '
                  f'{summary.metric} clean {summary.clean:.2f}, avg {summary.avg:.2f}, '
                  f'delta_tp {summary.delta_tp:.2f}', logger='current')
        self.runner.call_hook('after_val_epoch', metrics=metrics)
        self.runner.call_hook('after_val')
        return metrics


RobustnessValLoop.__doc__ = RobustnessValLoop.__doc__.replace(
    '{options}', describe_options(VALIDATION_OPTIONS, VALIDATION_DEFAULTS))
