"""``RobustnessTestLoop``: clean plus every selected condition in one test run.

Registered in ``LOOPS``; with ``custom_imports=dict(imports=['reobench_mm'])`` every entry
point that builds ``test_cfg`` uses it: this package's ``tools/test.py`` and
``tools/robustness_test.py``, the toolboxes' own ``tools/test.py``,
``Runner.from_cfg(cfg).test()`` in a notebook::

    test_cfg = dict(type='RobustnessTestLoop', corruptions='all', severities=[1, 2, 3, 4, 5])

Its options are :class:`~reobench_mm.robustness.options.RobustnessOptions`; how it
switches conditions and what it returns is :mod:`reobench_mm.robustness.switching`.
The single-condition loop of the toolboxes' ``tools/test.py --cfg-options
test_cfg.corruption=...`` is :class:`~reobench_mm.engine.CorruptionTestLoop`.
"""
from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from mmengine.logging import print_log
from mmengine.runner import TestLoop
from mmengine.runner.amp import autocast
from torch.utils.data import DataLoader

from reobench_corruptions.condition import Condition
from ..engine.corruption_loop import empty_dataset_error
from ..engine.hooks import CheckpointClassesHook
from ..engine.losses import update_losses
from ..engine.precision import check_precision, forward_precision
from ..engine.workdir import WorkDirLock, quiet_log_write_errors
from ..errors import SweepError
from ..evaluation.evaluator_cfg import label_ignore_index
from ..evaluation.keys import SCALED_CALIBRATION_PREFIX, Task, get_task
from ..registry import LOOPS
from ..utils.config import check_no_corruption_cfg, infer_task
from .condition_evaluation import ConditionEvaluation
from .conditions.kinds import check_task, coerce_condition
from .device_corruption import DeviceCorruption
from .evaluators import calibration_metrics, robustness_evaluator
from .held_out import check_held_out, seen_in_training
from .options import RobustnessOptions, describe_options
from .run_identity import RunIdentity
from .run_outputs import RunOutputs
from .shifted_data import ConditionSources
from .store import ConditionStore
from .switching import ConditionSwitch, find_steps, place_switch_step, robustness_metrics
from .temperature import TemperatureFit

__all__ = ['RobustnessTestLoop', 'SweepOutcome']


@dataclass
class SweepOutcome:
    """What a :class:`RobustnessTestLoop` run did.

    Attributes:
        work_dir: the output folder.
        conditions: the conditions of this run (the shard's, or all).
        evaluated: those evaluated now; ``skipped``: those found finished.
        seconds: evaluation seconds per evaluated condition tag (``cloud_s3``; a further
            corruption seed's ``cloud_s3_seed1``).
        report_files: name -> path of the report files (empty for a shard).
        manifest: the shard manifest path (None without a shard).
        wall_seconds: wall time of the run.
        reevaluated: condition key (a further corruption seed's with its seed:
            ``'cloud@3/seed1'``) -> why its file was not reused (a malformed or
            inconsistent record; those conditions are in ``evaluated``).
        metrics: what the loop returned.
    """
    work_dir: str
    conditions: List[Condition]
    evaluated: List[Condition] = field(default_factory=list)
    skipped: List[Condition] = field(default_factory=list)
    seconds: Dict[str, float] = field(default_factory=dict)
    report_files: Dict[str, str] = field(default_factory=dict)
    manifest: Optional[str] = None
    wall_seconds: float = 0.0
    reevaluated: Dict[str, str] = field(default_factory=dict)
    metrics: Dict[str, float] = field(default_factory=dict)


def _ignore_index(evaluator: Any) -> Optional[int]:
    try:
        return label_ignore_index(evaluator)
    except ValueError as error:
        raise SweepError(str(error)) from None


def _data_error(error: ValueError, dataloader: Any, options: RobustnessOptions
                ) -> Exception:
    """``TestLoop.__init__``'s error about the data, said in the loop's words: an empty
    test set, or a held-out split for the temperature that leaves no test images."""
    empty = empty_dataset_error(error, dataloader, 'RobustnessTestLoop')
    if empty is not None:
        return SweepError(str(empty))
    if options.temperature_split is None or 'held-out split' not in str(error):
        return error
    return SweepError(f'temperature_split={options.temperature_split}: {error}; hold out '
                      'fewer images')


@LOOPS.register_module()
class RobustnessTestLoop(TestLoop):
    """``TestLoop`` evaluating clean plus every selected corruption × severity in one run.

    Each finished condition is written to ``<out_dir>/conditions/<tag>.json`` (sealed,
    with a fingerprint of the inputs: the resolved config, the checkpoint, the test data,
    the code, the options); a rerun reuses the finished ones, so a killed run resumes
    where it stopped, and refuses files written for other inputs (naming the part that
    differs). At the end ``results.json``, ``results.csv``, ``report.md`` and the plots
    are written to ``out_dir`` (with ``shard``, a shard manifest instead), and the metrics
    of :func:`~reobench_mm.robustness.switching.robustness_metrics` are returned
    (``after_test_epoch`` hooks get them: ``LoggerHook`` logs them, the visualizer
    backends store them).

    The loop is composed of a :class:`~reobench_mm.robustness.switching.ConditionSwitch`
    (:attr:`switch`), a :class:`~reobench_mm.robustness.condition_evaluation.
    ConditionEvaluation` (:attr:`evaluation`), a :class:`~reobench_mm.robustness.
    run_identity.RunIdentity` (:attr:`identity`), a :class:`~reobench_mm.robustness.store.
    ConditionStore` (:attr:`store`) and :class:`~reobench_mm.robustness.run_outputs.
    RunOutputs` (:attr:`outputs`).

    The checkpoint the runner loaded (``load_from``; ``tools/test.py CONFIG CHECKPOINT``)
    is checked to fit the model strictly (every key, every shape) unless
    ``strict_checkpoint=False``; a checkpoint that does not fit is an error, not a
    warning with numbers of a half-loaded model.

    Args:
        runner, dataloader, evaluator, fp16: as ``TestLoop``. MMSeg's ``IoUMetric`` and
            MMRotate's ``DOTAMetric`` are evaluated by ``ClasswiseIoUMetric`` /
            ``InProcessDOTAMetric`` (same numbers, plus per-class values).
        **options: the options of :class:`~reobench_mm.robustness.options.RobustnessOptions`,
            checked there (listed below).

    Raises:
        SweepError (a ``ValueError``): an unknown option or a bad value (the message lists
            the valid ones), or, with ``held_out_only``, selected corruptions that were
            seen in training.

    Options:
{options}
    """

    def __init__(self, runner, dataloader: Union[DataLoader, Dict],
                 evaluator: Union[Any, Dict, List], fp16: bool = False,
                 **options: Any) -> None:
        check_no_corruption_cfg(runner.cfg)
        quiet_log_write_errors(runner.logger)  # a full disk: one line, not tracebacks
        self.options = options = RobustnessOptions.create(options)
        self.plan = options.plan
        cfg = runner.cfg
        #: corruptions of the protocol the model saw in training (report marks them)
        self.seen_in_training = seen_in_training(cfg, options.protocol,
                                                 options.seen_corruptions)
        check_held_out(options.corruptions, self.seen_in_training, options.held_out_only)
        self.task: Task = get_task(infer_task(cfg))
        check_precision(options.precision, fp16, self.task.name)
        check_task(options, self.task.name)
        ignore_index = _ignore_index(evaluator)
        evaluator = robustness_evaluator(evaluator, self.task, options.calibration,
                                         options.temperature_scaling, ignore_index)
        self.temperature = TemperatureFit(options, runner, ignore_index) \
            if options.temperature_scaling else None
        given = dataloader
        dataloader, self.placements = place_switch_step(
            dataloader, self.plan.clean, cfg.get('default_scope'), 'robustness test',
            ignore_index)
        if self.temperature is not None:
            dataloader = self.temperature.split(dataloader)
        placed = copy.deepcopy(dataloader) if isinstance(dataloader, dict) else None
        try:
            super().__init__(runner, dataloader, evaluator, fp16)
        except ValueError as error:  # the split is built with the dataloader
            raise _data_error(error, dataloader, options) from None
        test = find_steps(self.dataloader, type(self).__name__)
        device = DeviceCorruption(test.steps, runner.model) \
            if options.corruption_device == 'model' else None
        #: switches the placed steps to each condition and prepares its batches
        self.switch = ConditionSwitch(test, self.plan.clean, device)
        # a checkpoint of other classes is refused when the runner (or a driver) loads it
        runner.register_hook(CheckpointClassesHook(
            lambda: getattr(self.dataloader.dataset, 'metainfo', None),
            lambda: self.identity.checkpoint))
        if self.temperature is not None:
            self.temperature.check_images(self.dataloader.dataset)
        sources = ConditionSources(test, options, given, placed, runner, ignore_index,
                                   'test_dataloader')
        #: runs a condition's iterations and evaluates it
        self.evaluation = ConditionEvaluation(
            runner, self.evaluator, self.switch, sources, self.task, ignore_index,
            self._forward, 'test', options.fan_out, options.fan_out_batch)
        #: the run's source, checkpoint check, fingerprint and provenance
        self.identity = RunIdentity(runner, options, self.task,
                                    dict(type=type(self).__name__, fp16=self.fp16), placed,
                                    self.dataloader.dataset, sources, self.temperature,
                                    self.seen_in_training)
        self.work_dir = options.out_dir or runner.work_dir
        #: the condition records of ``out_dir``
        self.store = ConditionStore(self.work_dir, lambda c: coerce_condition(self.plan, c),
                                    self.task, options.calibration,
                                    self.identity.condition_fingerprint,
                                    source=self.identity.source_of, key=self.plan.key)
        #: the report or shard manifest at the end
        self.outputs = RunOutputs(self.work_dir, self.store, self.identity, options,
                                  self.task, self.switch, runner.model)
        self.decode_caches: list = []
        self.outcome: Optional[SweepOutcome] = None
        #: True once the first condition started (a failure after it keeps what was written)
        self.evaluating = False
        #: one run at a time per output folder
        self.lock = WorkDirLock(self.work_dir)

    def set_source(self, *, config: Optional[str] = None, checkpoint: Optional[str] = None,
                   cfg_options: Optional[Mapping[str, Any]] = None,
                   checkpoint_loaded: bool = False,
                   lock: Optional[WorkDirLock] = None) -> None:
        """For drivers that build the Runner themselves (``tools/robustness_test.py``):
        the source of :attr:`identity` (:meth:`RunIdentity.set_source`) and the output
        folder's lock when the driver holds it already."""
        if lock is not None:
            self.lock = lock
        self.identity.set_source(config=config, checkpoint=checkpoint,
                                 cfg_options=cfg_options, checkpoint_loaded=checkpoint_loaded)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, condition: Any) -> tuple:
        """Evaluate one condition (a pair, key or condition) outside :meth:`run`, nothing
        written: ``(metrics, seconds)``. The runner's test-epoch hooks run around it, as
        around a test run (``IterTimerHook`` and the logger need them)."""
        self.runner.call_hook('before_test_epoch')
        evaluated = self.evaluation.evaluate(coerce_condition(self.plan, condition))
        self.runner.call_hook('after_test_epoch', metrics=evaluated.metrics)
        return evaluated.metrics, evaluated.seconds

    def run_iter(self, idx, data_batch: Sequence[dict]) -> None:
        """One batch under the active condition (:meth:`ConditionEvaluation.run_iter`)."""
        self.evaluation.run_iter(idx, data_batch)

    def _forward(self, data_batch: Any) -> list:
        """The model's ``test_step`` on ``data_batch`` in the run's precision (MMEngine's
        own ``autocast`` context, which ``fp16`` drives, would switch an outer autocast
        off); the test losses it returns are kept."""
        context = forward_precision(self.options.precision, self.runner.model) \
            if self.options.precision != 'fp32' else autocast(enabled=self.fp16)
        with context:
            outputs = self.runner.model.test_step(data_batch)
        outputs, self.test_loss = update_losses(outputs, self.test_loss)
        return outputs

    def _prepare(self, todo: Sequence[Condition]) -> None:
        """Before the first condition of ``todo``: check its data (every set built, its
        files decodable), decode the samples once, fit the temperature."""
        self.evaluation.sources.check(todo)
        self.evaluating = True
        if not self.decode_caches:
            self.decode_caches = self.switch.cache_decoding(self.options.decode_cache_bytes)
        if self.temperature is not None and self.temperature.temperature is None:
            value = self.temperature.fit(self.dataloader, self.work_dir,
                                         self.identity.fingerprint,
                                         self.options.force)
            scaled = calibration_metrics(self.evaluator).get(SCALED_CALIBRATION_PREFIX)
            if scaled is not None:
                scaled.temperature = value

    def run(self, on_condition: Optional[Callable[[Condition, dict], None]] = None
            ) -> Dict[str, float]:
        """Evaluate the conditions not yet finished, write the report (or the shard
        manifest) and return the robustness metrics. ``on_condition(condition, record)``
        is called after each condition file is written. :attr:`outcome` says what was
        done.

        Raises:
            WorkDirLockedError: another run holds the output folder.
            FingerprintMismatchError: a finished condition was written for other inputs.
            CheckpointMismatchError: the runner's checkpoint does not fit the model.
            SweepError: a file cannot be written (the conditions finished before are kept).
        """
        from mmengine.dist import broadcast_object_list, get_world_size, is_main_process
        start = time.perf_counter()
        main = is_main_process()
        self.identity.check_checkpoint()
        conditions = self.options.conditions
        self.outcome = outcome = SweepOutcome(self.work_dir, list(conditions))
        try:
            todo, outcome.reevaluated = self.store.todo(conditions, self.lock,
                                                        self.options.force)
            outcome.skipped = [c for c in conditions if c not in todo]
            if main:
                self._log_start(outcome)
            self.runner.call_hook('before_test')
            self.runner.call_hook('before_test_epoch')
            if todo:
                self._prepare(todo)
                self._evaluate_all(todo, outcome, main, on_condition)
            results: Dict[str, float] = self._finish(outcome) if main else {}
            if get_world_size() > 1:
                box = [results]
                broadcast_object_list(box)
                results = box[0]
        finally:
            self.lock.release()
        outcome.metrics = results
        self.runner.call_hook('after_test_epoch', metrics=results)
        self.runner.call_hook('after_test')
        outcome.wall_seconds = time.perf_counter() - start
        return results

    def _evaluate_all(self, todo: List[Condition], outcome: SweepOutcome, main: bool,
                      on_condition: Optional[Callable[[Condition, dict], None]]) -> None:
        """Evaluate ``todo``, writing each condition's record (on the main process) as
        soon as it is evaluated."""
        from ..engine.progress import Progress
        bar = Progress(len(todo), desc='robustness', unit='condition') if main else None
        for number, (condition, done) in enumerate(self.evaluation.evaluations(todo), 1):
            outcome.seconds[condition.tag] = done.seconds
            outcome.evaluated.append(condition)
            if not main:
                continue
            record = self.store.write(condition, done.metrics, done.seconds,
                                      done.calibration, done.image_stats, done.transformed)
            bar.break_line()
            print_log(f'robustness [{number}/{len(todo)}] {condition.tag}: '
                      f'{self.task.metric_name} {record["result"]["value"]:.2f} '
                      f'({done.seconds:.1f} s)', logger='current')
            bar.update()
            if on_condition is not None:
                on_condition(condition, record)
        if main:
            bar.close()

    def _log_start(self, outcome: SweepOutcome) -> None:
        for placement in self.placements:
            print_log(f'robustness test: {placement.describe()}', logger='current')
        for reason in outcome.reevaluated.values():
            print_log(f'{reason}; evaluating it again', logger='current',
                      level=logging.WARNING)
        if outcome.skipped:
            print_log(f'{len(outcome.skipped)} of {len(outcome.conditions)} conditions '
                      f'already finished in {self.store.conditions_dir}; skipped',
                      logger='current')

    def _finish(self, outcome: SweepOutcome) -> Dict[str, float]:
        """Write the report (or the manifest); the run's metrics (empty for a shard)."""
        if self.plan.shard is None:
            records = self.store.load(self.options.all_conditions)
            report = self.outputs.write_report(records)
            outcome.report_files = dict(report.files)
            return robustness_metrics(report.summary, records[self.plan.clean]['metrics'])
        outcome.manifest = self.outputs.write_manifest(self.options.conditions)
        return {}


RobustnessTestLoop.__doc__ = RobustnessTestLoop.__doc__.replace('{options}',
                                                                describe_options())
