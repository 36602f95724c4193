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
from torch.utils.data import DataLoader

from ..analysis.attack_table import attack_block
from ..analysis.results import aggregate, condition_result_from_metrics
from ..analysis.shift_table import shift_block
from reobench_corruptions.condition import Condition
from ..evaluation.evaluator_cfg import label_ignore_index
from ..evaluation.keys import get_task
from ..registry import LOOPS
from ..utils.config import check_no_corruption_cfg, infer_task
from .attack_sets import attack_row, check_attack_task
from .evaluators import classwise_evaluator, condition_image_stats
from .options import VALIDATION_DEFAULTS, VALIDATION_OPTIONS, RobustnessOptions
from .shift_sets import shift_row
from .switching import ConditionSwitching, robustness_metrics

__all__ = ['RobustnessValLoop']


@LOOPS.register_module()
class RobustnessValLoop(ConditionSwitching, ValLoop):
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
        **options: the options of :data:`~reobench_mm.robustness.options.VALIDATION_OPTIONS`
            (``corruptions``, default ``['cloud', 'gaussian_noise', 'haze']``;
            ``severities``, default ``[3]``; ``protocol``, ``seed``, ``border``;
            ``decode_cache_bytes``, default 0: off; ``shifts``, other test sets whose
            keys ``shift/<name>/<metric>`` join the metrics; ``attacks``, attacks whose
            keys ``adv/<name>_eps<ε>/<metric>`` and, where two or more attacks share a
            budget, ``adv/worst_eps<ε>/<metric>`` join them), checked by
            :class:`~reobench_mm.robustness.options.RobustnessOptions`. With attacks,
            MMSeg's ``IoUMetric`` and MMRotate's ``DOTAMetric`` in the evaluator config are
            evaluated by the package's per-class twins (the same numbers, plus the
            per-class values and the per-image statistics the worst of the battery needs).

    Raises:
        SweepError (a ``ValueError``): an unknown option or a bad value.
    """

    def __init__(self, runner, dataloader: Union[DataLoader, Dict],
                 evaluator: Union[Any, Dict, List], fp16: bool = False,
                 **options: Any) -> None:
        check_no_corruption_cfg(runner.cfg)
        self.options = RobustnessOptions.create(options, allowed=VALIDATION_OPTIONS,
                                                defaults=VALIDATION_DEFAULTS,
                                                owner='RobustnessValLoop')
        self.plan = self.options.plan
        cfg = runner.cfg
        self.task = get_task(infer_task(cfg))
        self.ignore_index = label_ignore_index(evaluator)
        if self.options.attacks:
            check_attack_task(self.options.attacks, self.task.name)
            if isinstance(evaluator, (dict, list, tuple)):
                evaluator = classwise_evaluator(evaluator)
        given = dataloader
        dataloader, self.placements = self._place(dataloader, cfg.get('default_scope'),
                                                  'robustness validation')
        super().__init__(runner, dataloader, evaluator, fp16)
        self._find_steps()
        self._make_condition_data(self.options, given, None, 'val_dataloader')
        self.decode_caches: list = []

    def run_iter(self, idx, data_batch: Sequence[dict]):
        """``ValLoop.run_iter`` on the batch as the condition gives it (checked, and
        attacked under an attack condition: outside ``ValLoop.run_iter``'s ``no_grad``,
        the attack's gradients are the input's only)."""
        self._check_batch(idx, data_batch)
        super().run_iter(idx, self._attacked(data_batch))

    def run(self) -> dict:
        """Validate under every condition; the metrics go to ``after_val_epoch``."""
        start = time.perf_counter()
        self.runner.call_hook('before_val')
        self.runner.call_hook('before_val_epoch')
        if not self.decode_caches:
            self.decode_caches = self._cache_decoding(self.options.decode_cache_bytes)
        self.val_loss.clear()
        raw: Dict[Condition, Dict[str, float]] = {}
        for condition in self.plan.conditions:
            raw[condition], _ = self._evaluate_condition(condition)
        summary = aggregate(raw, protocol=self.plan.protocol, task=self.task.results_name,
                            expected_severities=self.plan.severities)
        rows = []
        for condition in self.options.shift_conditions:
            values, _ = self._evaluate_any(condition)
            result = condition_result_from_metrics(values, self.task.results_name)
            rows.append(shift_row(condition, result.value, None, len(
                self.condition_data.dataloader(*self._own_data(condition))[0].dataset)))
        if rows:
            summary.blocks['shifts'] = shift_block(rows, id_value=summary.clean,
                                                   metric=summary.metric)
        attacked = []
        for condition in self.options.attack_conditions:
            values, _ = self._evaluate_any(condition)
            result = condition_result_from_metrics(values, self.task.results_name)
            attacked.append(attack_row(condition, result.value,
                                       condition_image_stats(self.evaluator),
                                       self.last_attack))
        if attacked:
            summary.blocks['attacks'] = attack_block(attacked, clean_value=summary.clean,
                                                     metric=summary.metric)
        metrics = robustness_metrics(summary, raw[self.plan.clean])
        seconds = time.perf_counter() - start
        count = len(raw) + len(rows) + len(attacked)
        print_log(f'robustness validation: {count} conditions in {seconds:.1f} s; '
                  f'{summary.metric} clean {summary.clean:.2f}, avg {summary.avg:.2f}, '
                  f'delta_tp {summary.delta_tp:.2f}', logger='current')
        self.runner.call_hook('after_val_epoch', metrics=metrics)
        self.runner.call_hook('after_val')
        return metrics
