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
import os.path as osp
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import torch
from mmengine.logging import print_log
from mmengine.runner import TestLoop
from mmengine.runner.amp import autocast
from mmengine.runner.loops import _update_losses
from torch.utils.data import DataLoader

from ..analysis.report import Report, make_provenance, write_report
from ..analysis.results import ConditionResult
from reobench_corruptions.condition import Condition
from ..engine import checkpoint as _checkpoint
from ..engine.corruption_loop import empty_dataset_error
from ..engine.hooks import CheckpointClassesHook
from ..engine.precision import forward_precision
from ..engine.workdir import WorkDirLock, write_error
from ..errors import SweepError
from ..evaluation.evaluator_cfg import label_ignore_index
from ..evaluation.keys import SCALED_CALIBRATION_PREFIX, Task, get_task
from ..fileio import file_sha256, json_round_trip
from ..registry import LOOPS
from ..utils.config import check_no_corruption_cfg, infer_task
from .attack_sets import attacks_to_dict, check_attack_task
from .condition_blocks import blocks_of
from .conditions import coerce_condition, records_by_block
from .device_corruption import DeviceCorruption
from .fan_out import FanOut
from .evaluators import calibration_metrics, condition_image_stats, robustness_evaluator
from .fingerprint import dataset_fingerprint, result_options, run_fingerprint
from .held_out import check_held_out, seen_in_training
from .options import RobustnessOptions
from .released_sets import FILES_SOURCE
from .shards import write_shard_manifest
from .shift_sets import shifts_to_dict
from .store import ConditionStore, calibration_details, condition_record_name
from .switching import ConditionSwitching, robustness_metrics
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
        reevaluated: condition key -> why its file was not reused (a malformed or
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


@LOOPS.register_module()
class RobustnessTestLoop(FanOut, ConditionSwitching, TestLoop):
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

    The checkpoint the runner loaded (``load_from``; ``tools/test.py CONFIG CHECKPOINT``)
    is checked to fit the model strictly (every key, every shape) unless
    ``strict_checkpoint=False``; a checkpoint that does not fit is an error, not a
    warning with numbers of a half-loaded model.

    Args:
        runner, dataloader, evaluator, fp16: as ``TestLoop``. MMSeg's ``IoUMetric`` and
            MMRotate's ``DOTAMetric`` are evaluated by ``ClasswiseIoUMetric`` /
            ``InProcessDOTAMetric`` (same numbers, plus per-class values).
        **options: the options of :class:`~reobench_mm.robustness.options.RobustnessOptions`
            (``corruptions``, ``severities``, ``protocol``, ``seed``, ``border``,
            ``corruption_seeds``, ``out_dir``, ``shard``, ``force``, ``calibration``,
            ``temperature_scaling``,
            ``temperature_split``, ``temperature_split_seed``, ``temperature_on_test``,
            ``plots``, ``decode_cache_bytes``, ``strict_checkpoint``,
            ``seen_corruptions``, ``held_out_only``, ``bootstrap``, ``interval_level``,
            ``bootstrap_seed``, ``shifts``: other test sets as conditions,
            ``corruption_files``: corrupted conditions read from files), checked there.

    Raises:
        SweepError (a ``ValueError``): an unknown option or a bad value (the message lists
            the valid ones), or, with ``held_out_only``, selected corruptions that were
            seen in training.
    """

    def __init__(self, runner, dataloader: Union[DataLoader, Dict],
                 evaluator: Union[Any, Dict, List], fp16: bool = False,
                 **options: Any) -> None:
        check_no_corruption_cfg(runner.cfg)
        self.options = options = RobustnessOptions.create(options)
        if fp16 and options.precision != 'fp32':
            raise SweepError(f"test_cfg.fp16=True and precision={options.precision!r}: give "
                             "one of them (precision='fp16' is what fp16=True asks for)")
        self.plan = options.plan
        cfg = runner.cfg
        #: corruptions of the protocol the model saw in training (report marks them)
        self.seen_in_training = seen_in_training(cfg, options.protocol,
                                                 options.seen_corruptions)
        check_held_out(options.corruptions, self.seen_in_training, options.held_out_only)
        self.task: Task = get_task(infer_task(cfg))
        check_attack_task(options.attacks, self.task.name)
        self.ignore_index = _ignore_index(evaluator)
        evaluator = robustness_evaluator(evaluator, self.task, options.calibration,
                                         options.temperature_scaling, self.ignore_index)
        self.temperature = TemperatureFit(options, runner, self.ignore_index) \
            if options.temperature_scaling else None
        given = dataloader
        dataloader, self.placements = self._place(dataloader, cfg.get('default_scope'),
                                                  'robustness test')
        if self.temperature is not None:
            dataloader = self.temperature.split(dataloader)
        self._dataloader_cfg = copy.deepcopy(dataloader) if isinstance(dataloader, dict) \
            else None
        try:
            super().__init__(runner, dataloader, evaluator, fp16)
        except ValueError as error:  # the split is built with the dataloader
            empty = empty_dataset_error(error, dataloader, type(self).__name__)
            if empty is not None:
                raise SweepError(str(empty)) from None
            if options.temperature_split is None or 'held-out split' not in str(error):
                raise
            raise SweepError(f'temperature_split={options.temperature_split}: {error}; hold '
                             'out fewer images') from None
        self._find_steps()
        if options.corruption_device == 'model':
            self.device_corruption = DeviceCorruption(self.steps, runner.model)
        # a checkpoint of other classes is refused when the runner (or a driver) loads it
        runner.register_hook(CheckpointClassesHook(
            lambda: getattr(self.dataloader.dataset, 'metainfo', None),
            lambda: self.checkpoint))
        if self.temperature is not None:
            self.temperature.check_images(self.dataloader.dataset)
        self._make_condition_data(options, given, self._dataloader_cfg, 'test_dataloader')
        self.work_dir = options.out_dir or runner.work_dir
        #: the condition records of ``out_dir``
        self.store = ConditionStore(self.work_dir, self._coerce, self.task,
                                    options.calibration, self.condition_fingerprint,
                                    source=self._source_of)
        self.decode_caches: list = []
        self.last_calibration: Dict[str, dict] = {}
        self.last_image_stats = None
        self.outcome: Optional[SweepOutcome] = None
        #: True once the first condition started (a failure after it keeps what was written)
        self.evaluating = False
        self._source: Dict[str, Any] = dict(config=getattr(cfg, 'filename', None),
                                            checkpoint=None, cfg_options={}, loaded=False)
        self._fingerprint: Optional[Dict[str, Any]] = None
        #: one run at a time per output folder
        self.lock = WorkDirLock(self.work_dir)

    # ------------------------------------------------------------------ inputs
    @property
    def conditions(self) -> List[Any]:
        """The conditions of this run (the shard's, or all; the shift sets' after the
        corruptions)."""
        return self.options.conditions

    @property
    def all_conditions(self) -> List[Any]:
        """Every condition of the run, all shards together."""
        return self.options.all_conditions

    def _coerce(self, value: Any) -> Any:
        """A condition of this run (:func:`~reobench_mm.robustness.conditions.
        coerce_condition`)."""
        return coerce_condition(self.plan, value)

    def set_source(self, *, config: Optional[str] = None, checkpoint: Optional[str] = None,
                   cfg_options: Optional[Mapping[str, Any]] = None,
                   checkpoint_loaded: bool = False,
                   lock: Optional[WorkDirLock] = None) -> None:
        """For drivers that build the Runner themselves (``tools/robustness_test.py``):
        the config file, the checkpoint, the command-line overrides (recorded in the
        report), whether the checkpoint was already loaded strictly, and the output
        folder's lock when the driver holds it already."""
        if lock is not None:
            self.lock = lock
        self._source.update(config=config or self._source['config'], checkpoint=checkpoint,
                            cfg_options=dict(cfg_options or {}),
                            loaded=bool(checkpoint_loaded))
        self._fingerprint = None

    @property
    def checkpoint(self) -> Optional[str]:
        return self._source['checkpoint'] or getattr(self.runner, '_load_from', None)

    def _check_checkpoint(self) -> None:
        """Check that the runner's checkpoint fits the model (loading it again strictly:
        the same weights) when nobody did."""
        if self._source['loaded'] or not self.options.strict_checkpoint \
                or self.checkpoint is None:
            return
        try:
            checkpoint = _checkpoint.load_checkpoint_strict(self.runner.model, self.checkpoint,
                                                            config=self._source['config'])
        except _checkpoint.CheckpointMismatchError as error:
            raise _checkpoint.CheckpointMismatchError(
                f'{error} (test_cfg.strict_checkpoint=False evaluates it anyway)',
                error.mismatch) from None
        _checkpoint.check_checkpoint_classes(checkpoint, self.dataloader.dataset.metainfo,
                                             self.checkpoint)
        self._source['loaded'] = True

    def _fingerprinted_config(self) -> dict:
        """The resolved config as it determines the numbers: the test dataloader as the
        loop built it, the loop's settings instead of its bookkeeping options, no
        checkpoint path (the checkpoint part covers it)."""
        data = copy.deepcopy(self.runner.cfg.to_dict())
        if self._dataloader_cfg is not None:
            data['test_dataloader'] = copy.deepcopy(self._dataloader_cfg)
        data['test_cfg'] = dict(type=type(self).__name__, fp16=self.fp16)
        for key in ('load_from', 'resume'):
            data.pop(key, None)
        return data

    @property
    def fingerprint(self) -> Dict[str, Any]:
        """What the numbers depend on (:mod:`~reobench_mm.robustness.fingerprint`); the
        ``data`` part lists the built test dataset (and, with temperature scaling, the
        data the temperature is fitted on)."""
        if self._fingerprint is None:
            checkpoint = self.checkpoint
            checkpoint_sha256 = file_sha256(checkpoint) if checkpoint and \
                osp.isfile(checkpoint) else checkpoint
            data = dataset_fingerprint(self.dataloader.dataset)
            if self.temperature is not None:
                fitted_on = self.temperature.fingerprint_data()
                if fitted_on is not None:
                    data['val'] = fitted_on
            self._fingerprint = run_fingerprint(
                self._fingerprinted_config(), task=self.task.name,
                checkpoint_sha256=checkpoint_sha256, cfg_options=self._source['cfg_options'],
                options=self.options.fingerprint_part(), data=data)
        return self._fingerprint

    def _source_of(self, condition: Any) -> Optional[str]:
        files = self.options.corruption_files
        return FILES_SOURCE if files is not None and files.reads(condition) else None

    def condition_fingerprint(self, condition: Any) -> Dict[str, Any]:
        """The fingerprint of one condition's record: :attr:`fingerprint`, and for a
        shift set's condition or a corruption read from files also that data and its
        dataset config."""
        return self._own_fingerprint(self.fingerprint, condition)

    # ------------------------------------------------------------------ records
    def condition_file(self, condition: Any) -> str:
        return self.store.condition_file(condition)

    def load_records(self, conditions: Sequence[Any]) -> Dict[Condition, dict]:
        """``condition -> record`` (see :meth:`ConditionStore.load`)."""
        return self.store.load(conditions)

    def recorded_temperature(self) -> Optional[dict]:
        """The fitted temperature (temperature, source, NLL before/after), or None."""
        if self.temperature is None:
            return None
        return self.temperature.recorded(self.work_dir, self.fingerprint)

    def provenance(self) -> dict:
        """The provenance block of the report and of a shard manifest."""
        config = self._source['config']
        options = self.options
        return make_provenance(
            model=osp.splitext(osp.basename(config))[0] if config
            else getattr(self.runner, 'experiment_name', None), task=self.task.results_name,
            config=config, checkpoint=self.checkpoint,
            checkpoint_sha256=self.fingerprint['checkpoint_sha256'], seed=options.seed,
            protocol=options.protocol,
            extra=json_round_trip(dict(corruptions=options.corruptions,
                                       severities=options.severities, border=options.border,
                                       cfg_options=result_options(self._source['cfg_options']),
                                       calibration=options.calibration,
                                       temperature=self.recorded_temperature(),
                                       seen_in_training=self.seen_in_training,
                                       intervals=options.interval_settings,
                                       evaluated_images=len(self.dataloader.dataset),
                                       shifts=shifts_to_dict(options.shifts),
                                       attacks=attacks_to_dict(options.attacks),
                                       precision=options.precision,
                                       corruption_device=options.corruption_device,
                                       corruption_files=None if options.corruption_files
                                       is None else options.corruption_files.to_dict(),
                                       read_from_files=[c.key for c in self.all_conditions
                                                        if self._source_of(c)],
                                       fingerprint=self.fingerprint)))

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, condition: Any) -> tuple:
        """Evaluate one condition (a pair, key or condition) outside :meth:`run`, nothing
        written: ``(metrics, seconds)``. The runner's test-epoch hooks run around it, as
        around a test run (``IterTimerHook`` and the logger need them)."""
        self.runner.call_hook('before_test_epoch')
        metrics, seconds = self._evaluate(condition)
        self.runner.call_hook('after_test_epoch', metrics=metrics)
        return metrics, seconds

    def _evaluate(self, condition: Any) -> tuple:
        """One condition within a run: ``(metrics, seconds)``, the calibration details
        kept for its record."""
        metrics, seconds = self._evaluate_any(self._coerce(condition))
        self._keep_details(self.evaluator)
        return metrics, seconds

    def _keep_details(self, evaluator: Any) -> None:
        """Keep what the record needs beside the metrics of the condition ``evaluator``
        just evaluated: the curves and bins of the calibration metrics, the per-image
        statistics."""
        self.last_calibration = {
            prefix: {k: v for k, v in (metric.last_details or {}).items() if k != 'stats'}
            for prefix, metric in calibration_metrics(evaluator).items()}
        self.last_image_stats = condition_image_stats(evaluator)

    def run_iter(self, idx, data_batch: Sequence[dict]) -> None:
        self._predict_batch(idx, self._prepared_batch(idx, data_batch))

    def _prepared_batch(self, idx: int, data_batch: Any) -> Any:
        """The batch as the model gets it under the current condition: checked, then
        corrupted on the device, then attacked (an attack on a corrupted image; its
        gradients in float32)."""
        self._check_batch(idx, data_batch)
        return self._attacked(self._device_corrupted(data_batch))

    @torch.no_grad()
    def _predict_batch(self, idx, data_batch: Sequence[dict]) -> None:
        """``TestLoop.run_iter``'s work (hooks, ``test_step``, the evaluator), with the
        forward in :attr:`options.precision` (MMEngine's own ``autocast`` context, which
        ``fp16`` drives, would switch an outer autocast off)."""
        self.runner.call_hook('before_test_iter', batch_idx=idx, data_batch=data_batch)
        outputs = self._forward(data_batch)
        self.evaluator.process(data_samples=outputs, data_batch=data_batch)
        self.runner.call_hook('after_test_iter', batch_idx=idx, data_batch=data_batch,
                              outputs=outputs)

    @torch.no_grad()
    def _forward(self, data_batch: Any) -> list:
        """The model's ``test_step`` on ``data_batch`` in the run's precision (the test
        losses it returns are kept)."""
        context = forward_precision(self.options.precision, self.runner.model) \
            if self.options.precision != 'fp32' else autocast(enabled=self.fp16)
        with context:
            outputs = self.runner.model.test_step(data_batch)
        outputs, self.test_loss = _update_losses(outputs, self.test_loss)
        return outputs

    def _prepare(self) -> None:
        """Before the first condition: decode the samples once, fit the temperature."""
        self.evaluating = True
        if not self.decode_caches:
            self.decode_caches = self._cache_decoding(self.options.decode_cache_bytes)
        if self.temperature is not None and self.temperature.temperature is None:
            value = self.temperature.fit(self.dataloader, self.work_dir, self.fingerprint,
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

        from ..engine.progress import Progress
        start = time.perf_counter()
        main = is_main_process()
        self._check_checkpoint()
        outcome = SweepOutcome(self.work_dir, list(self.conditions))
        self.outcome = outcome
        lock = self.lock
        try:
            todo, outcome.reevaluated = self.store.todo(self.conditions, lock,
                                                        self.options.force)
            outcome.skipped = [c for c in self.conditions if c not in todo]
            if main:
                self._log_start(outcome)
            self.runner.call_hook('before_test')
            self.runner.call_hook('before_test_epoch')
            if todo:
                self._prepare()
                bar = Progress(len(todo), desc='robustness', unit='condition') if main \
                    else None
                for number, (condition, metrics, seconds) in enumerate(
                        self._evaluations(todo), 1):
                    outcome.seconds[condition.tag] = seconds
                    outcome.evaluated.append(condition)
                    if main:
                        record = self.store.write(condition, metrics, seconds,
                                                  self.last_calibration,
                                                  self.last_image_stats,
                                                  attack=self.last_attack)
                        bar.break_line()
                        print_log(f'robustness [{number}/{len(todo)}] {condition.tag}: '
                                  f'{self.task.metric_name} '
                                  f'{record["result"]["value"]:.2f} ({seconds:.1f} s)',
                                  logger='current')
                        bar.update()
                        if on_condition is not None:
                            on_condition(condition, record)
                if main:
                    bar.close()
            results: Dict[str, float] = {}
            if main:
                results = self._finish(outcome)
            if get_world_size() > 1:
                box = [results]
                broadcast_object_list(box)
                results = box[0]
        finally:
            lock.release()
        outcome.metrics = results
        self.runner.call_hook('after_test_epoch', metrics=results)
        self.runner.call_hook('after_test')
        outcome.wall_seconds = time.perf_counter() - start
        return results

    def _log_start(self, outcome: SweepOutcome) -> None:
        for placement in self.placements:
            print_log(f'robustness test: {placement.describe()}', logger='current')
        for reason in outcome.reevaluated.values():
            print_log(f'{reason}; evaluating it again', logger='current',
                      level=logging.WARNING)
        if outcome.skipped:
            print_log(f'{len(outcome.skipped)} of {len(self.conditions)} conditions '
                      f'already finished in {self.store.conditions_dir}; skipped',
                      logger='current')

    def _finish(self, outcome: SweepOutcome) -> Dict[str, float]:
        """Write the report (or the manifest); the run's metrics (empty for a shard)."""
        if self.plan.shard is None:
            records = self.load_records(self.all_conditions)
            report = self.write_report(records)
            outcome.report_files = dict(report.files)
            return robustness_metrics(report.summary, records[self.plan.clean]['metrics'])
        outcome.manifest = self.write_manifest()
        return {}

    def write_report(self, records: Optional[Dict[Condition, dict]] = None) -> Report:
        """Write ``results.json``, ``results.csv``, ``report.md`` and the plots from the
        condition files.

        Raises:
            SweepError: a condition file is missing or malformed, or a report file cannot
                be written (named, with the reason).
        """
        if records is None:
            records = self.load_records(self.all_conditions)
        plan = self.plan
        records, by_block = records_by_block(records)
        first = {c: r for c, r in records.items() if not plan.is_extra_seed(c)}
        further = {c: r for c, r in records.items() if plan.is_extra_seed(c)}
        try:
            return write_report(
                self.work_dir,
                {c: ConditionResult.from_dict(r['result']) for c, r in first.items()},
                protocol=plan.protocol, task=self.task.results_name,
                expected_severities=plan.severities, provenance=self.provenance(),
                plots=self.options.plots, calibration_details=calibration_details(first),
                seen_in_training=self.seen_in_training,
                image_stats=self.store.image_stats(first),
                intervals=self.options.interval_settings,
                image_files=self.store.image_files(first),
                worst_case_panels=self._worst_case_panels,
                seed_results={c: ConditionResult.from_dict(r['result'])
                              for c, r in further.items()},
                corruption_seed=plan.seed, seed_image_stats=self.store.image_stats(further),
                seed_image_files=self.store.image_files(further),
                blocks=self._blocks(first[plan.clean], by_block))
        except OSError as error:
            raise write_error(error.filename or f'the report in {self.work_dir}',
                              error) from None

    def _blocks(self, clean: dict, by_block: Dict[str, Dict[Any, dict]]) -> Dict[str, dict]:
        """The result blocks of the shift sets' and attacks' records
        (:func:`~reobench_mm.robustness.condition_blocks.blocks_of`)."""
        stats = self.store.image_stats(
            {self.plan.clean: clean, **{c: r for b in by_block.values() for c, r in b.items()}})
        return blocks_of(by_block, clean, stats[self.plan.clean], stats,
                         self.task.metric_name, self.options.interval_settings)

    def _worst_case_panels(self, cases: dict) -> list:
        """Thumbnails of the worst cases: the model run again on each under its
        condition (:mod:`~reobench_mm.robustness.worst_case_images`)."""
        from .worst_case_images import worst_case_panels, worst_case_picks
        try:
            return worst_case_panels(worst_case_picks(cases), self.dataloader.dataset,
                                     self.runner.model,
                                     lambda c: self._switch(c, in_pipeline=True),
                                     self.plan.condition,
                                     self.task.results_name)
        except Exception as error:  # a picture is not worth the report: say so, go on
            print_log(f'no thumbnails of the worst cases ({type(error).__name__}: {error})',
                      logger='current', level=logging.WARNING)
            return []
        finally:
            self._switch(self.plan.clean)

    def write_manifest(self) -> str:
        """Write the shard manifest ``shard_<i>-of-<n>.json``; returns its path."""
        plan = self.plan
        return write_shard_manifest(
            self.work_dir, plan.shard, task=self.task.results_name, protocol=plan.protocol,
            corruptions=plan.corruptions, severities=plan.severities,
            condition_files={c.key: condition_record_name(c) for c in self.conditions
                             if not plan.is_extra_seed(c)},
            seed_condition_files={c.tag: condition_record_name(c) for c in self.conditions
                                  if plan.is_extra_seed(c)},
            num_conditions=len(self.all_conditions), fingerprint=self.fingerprint,
            provenance=self.provenance())
