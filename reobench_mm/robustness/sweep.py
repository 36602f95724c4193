"""Robustness sweep: one model, evaluated clean and under every corruption × severity.

:class:`RobustnessSweep` (and :func:`run_sweep`) builds the MMEngine ``Runner`` and the
model once, loads the checkpoint once (strictly: every key must fit), and then, for
each condition, switches the ``ApplyCorruption`` step of the test dataset's pipeline in
place and runs the test loop again.

What it evaluates (the selection, the conditions, their shards) is
:mod:`reobench_mm.robustness.plan`; the files it writes and checks are
:mod:`reobench_mm.robustness.store`. Files under the work dir:

- ``conditions/<tag>.json``: one per finished condition (the
  :class:`~reobench_mm.corruptions.condition.Condition`'s ``tag``, e.g. ``clean``,
  ``cloud_s3``; its ``key``, e.g. ``cloud@3``, inside), written atomically: the settings,
  the raw metrics, the condition result and a fingerprint of the inputs. A rerun skips
  the conditions that have a file (unless ``force``), so a killed run loses at most the
  condition in progress. Before reuse each record is checked: a record that is not an
  object, or whose settings, metrics, result or digest disagree, is evaluated again (with
  a warning giving the reason); one written for other inputs
  (:mod:`~reobench_mm.robustness.fingerprint`: the resolved config, the checkpoint, the
  test data, the code, the options) is an error naming the part that differs.
- ``results.json``, ``results.csv``, ``report.md`` and the plots
  (:func:`~reobench_mm.analysis.report.write_report`) at the end of a non-sharded run.
- ``shard_<i>-of-<n>.json``: the manifest of a sharded run (``shard=(i, n)``: the
  conditions ``i, i + n, i + 2n, ...`` of the full list; the clean condition is the
  first, so it belongs to shard 0). :func:`~reobench_mm.robustness.store.merge_sweeps`
  merges the shards' outputs and writes the report.
- ``.sweep.lock`` while a run is in progress
  (:class:`~reobench_mm.robustness.store.WorkDirLock`): a second sweep into the same work
  dir is refused at once.

A run that is refused (a bad or non-fitting checkpoint, a held lock, files of other
inputs) leaves the work dir as it found it; a file that cannot be written (a full disk,
lost permissions) is a :class:`SweepError` naming it, and the conditions finished before
it are kept for the rerun.
"""
from __future__ import annotations

import copy
import logging
import os.path as osp
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..analysis.report import Report, make_provenance, write_report
from ..analysis.results import ConditionResult
from ..corruptions import get_corruption
from ..corruptions.condition import Condition
from ..engine import checkpoint as _checkpoint
from ..evaluation.keys import (CALIBRATION_PREFIX, ROTATED_DETECTION, SCALED_CALIBRATION_PREFIX,
                               TEMPERATURE_METRICS, TEMPERATURE_PREFIX, get_task, metric_key)
from ..fileio import dump_json_atomic, file_sha256, json_round_trip
from ..transforms.placement import corruption_steps
from ..utils.config import prepare_test_config, use_plain_test_loop
from .fingerprint import (FINGERPRINT_PARTS, code_fingerprint, config_fingerprint,
                          dataset_fingerprint, differing_parts, result_options)
from .plan import (default_sweep_work_dir, parse_shard, select_corruptions, select_severities,
                   shard_conditions, sweep_conditions)
from .store import (CONDITION_FORMAT, CONDITIONS_DIR, SweepError, WorkDirLock,
                    WorkDirLockedError, WorkDirSnapshot, calibration_details, check_writable,
                    condition_record_problem, condition_result_dict, forget_runner_instances,
                    read_json, remove_empty_dirs, write_error, write_record,
                    write_shard_manifest)

__all__ = [
    'CheckpointMismatchError', 'FingerprintMismatchError', 'SweepOutcome', 'RobustnessSweep',
    'run_sweep', 'classwise_evaluator', 'calibration_metric_cfgs', 'TEMPERATURE_FILE'
]


class CheckpointMismatchError(SweepError, _checkpoint.CheckpointMismatchError):
    """The checkpoint does not fit the model of the config (a :class:`SweepError` and a
    :class:`reobench_mm.engine.checkpoint.CheckpointMismatchError`)."""


class FingerprintMismatchError(SweepError):
    """A finished condition (or shard) was written for other inputs; ``parts`` lists
    the parts of the fingerprint that differ (``config``, ``checkpoint``, ``data``,
    ``code``, ``options``)."""

    def __init__(self, message: str, parts: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.parts = list(parts)


# ----------------------------------------------------------------------------- evaluators

#: Toolbox metrics -> ours that return the same numbers plus the per-class values (and, for
#: DOTAMetric, without a process pool per evaluation).
_CLASSWISE_METRICS = {
    'IoUMetric': 'ClasswiseIoUMetric', 'mmseg.IoUMetric': 'ClasswiseIoUMetric',
    'DOTAMetric': 'InProcessDOTAMetric', 'mmrotate.DOTAMetric': 'InProcessDOTAMetric',
}


def _as_metric_list(evaluator: Any) -> List[Any]:
    """The metric configs of a test evaluator config (one metric, a list, or
    ``dict(metrics=...)``)."""
    if isinstance(evaluator, (list, tuple)):
        return list(evaluator)
    if isinstance(evaluator, dict) and 'metrics' in evaluator and 'type' not in evaluator:
        return _as_metric_list(evaluator['metrics'])
    return [evaluator]


def classwise_evaluator(evaluator: Any) -> List[Any]:
    """The metric configs of the test evaluator with MMSeg's ``IoUMetric`` and MMRotate's
    ``DOTAMetric`` replaced by :class:`ClasswiseIoUMetric` / :class:`InProcessDOTAMetric`
    (same arguments, same summary numbers, plus ``IoU.<class>`` / ``AP.<class>``); other
    metrics are kept as they are."""
    return [dict(metric, type=_CLASSWISE_METRICS[metric['type']])
            if isinstance(metric, dict) and metric.get('type') in _CLASSWISE_METRICS
            else metric for metric in _as_metric_list(evaluator)]


TEMPERATURE_FILE = 'temperature.json'


def calibration_metric_cfgs(task: str, temperature_scaling: bool = False) -> List[dict]:
    """The metric configs the sweep appends for calibration: ``SegCalibrationMetric``
    (segmentation; plus a second one with prefix ``calib_ts`` for temperature scaling,
    whose temperature is set after fitting) or ``RotatedDetectionCalibrationMetric``,
    with the prefixes of :mod:`reobench_mm.evaluation.keys`."""
    if task == ROTATED_DETECTION:
        if temperature_scaling:
            raise SweepError('temperature scaling is for segmentation (it rescales the '
                             'per-pixel class logits); detection scores have no such logits')
        return [dict(type='RotatedDetectionCalibrationMetric', prefix=CALIBRATION_PREFIX)]
    metrics = [dict(type='SegCalibrationMetric', prefix=CALIBRATION_PREFIX)]
    if temperature_scaling:
        metrics.append(dict(type='SegCalibrationMetric', prefix=SCALED_CALIBRATION_PREFIX))
    return metrics


# ----------------------------------------------------------------------------- the sweep

@dataclass
class SweepOutcome:
    """What :meth:`RobustnessSweep.run` did.

    Attributes:
        work_dir: the work dir.
        conditions: the conditions of this run (the shard's, or all).
        evaluated: those evaluated now; ``skipped``: those found finished.
        seconds: evaluation seconds per evaluated condition key.
        report_files: name -> path of the report files (empty for a shard).
        manifest: the shard manifest path (None without a shard).
        wall_seconds: wall time of :meth:`RobustnessSweep.run`.
        reevaluated: condition key -> why its file was not reused (a malformed or
            inconsistent record; those conditions are in ``evaluated``).
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


class RobustnessSweep:
    """Evaluate one checkpoint clean and under corruptions, building the model once.

    Args:
        config: config file of the model (segmentation or rotated detection).
        checkpoint: checkpoint file (loaded with strict key checking).
        corruptions: names and groups (default: every corruption of ``protocol``).
        severities: severities 1..5 (default: all).
        protocol, seed, border: corruption settings (see ``ApplyCorruption``).
        work_dir: default ``work_dirs/robustness/<config stem>``.
        cfg_options: config overrides (as ``--cfg-options``).
        launcher: ``'none'``, ``'pytorch'``, ``'slurm'`` or ``'mpi'`` (MMEngine's; the test
            data is split over processes by the config's sampler, as MMEngine does).
        force: evaluate again the conditions that have a file.
        shard: ``(i, n)`` or ``'i/n'``: only every n-th condition from i; writes a manifest
            instead of the report.
        plots: write the report's plots.
        decode_cache_bytes: decode each test image once for all conditions, keeping up
            to this many bytes of decoded samples in memory (filled before the first
            condition, so dataloader workers inherit it); 0 turns it off.
        calibration: also evaluate calibration in every condition (``calib/ECE``, ...:
            ``SegCalibrationMetric`` for segmentation, ``RotatedDetectionCalibrationMetric``
            for oriented detection); the report gains reliability diagrams and ECE
            against severity.
        temperature_scaling: (segmentation; implies ``calibration``) fit one temperature
            on the clean validation pixels (``TemperatureFitMetric``: NLL, L-BFGS on log T;
            the ``val_dataloader``, or the clean test set without one) and report every
            condition's calibration with it too (``calib_ts/...``), to show whether a
            calibration fitted on clean data survives the shift. The predictions, and so
            the task metric, do not change.

    All input errors (:class:`SweepError`, ``FileNotFoundError``) are raised by the
    constructor, before anything is written, except those about the checkpoint file
    (:class:`~reobench_mm.engine.checkpoint.CheckpointError`) and its fit
    (:class:`CheckpointMismatchError`), raised by :meth:`build`, and those about the
    work dir's state (:class:`WorkDirLockedError`, :class:`FingerprintMismatchError`),
    raised by :meth:`run`; a refused :meth:`run` removes what it created.

    The fingerprint (:mod:`~reobench_mm.robustness.fingerprint`) is :attr:`fingerprint`; its
    ``data`` part is added once the test dataset has been listed
    (:meth:`complete_fingerprint`).
    """

    def __init__(self, config: str, checkpoint: str, *,
                 corruptions: Optional[Sequence[str]] = None,
                 severities: Optional[Sequence[int]] = None, protocol: str = 'reobench',
                 seed: int = 0, border: str = 'reflect', work_dir: Optional[str] = None,
                 cfg_options: Optional[dict] = None, launcher: str = 'none',
                 force: bool = False, shard: Union[None, str, Sequence[int]] = None,
                 plots: bool = True, calibration: bool = False,
                 temperature_scaling: bool = False,
                 decode_cache_bytes: int = 2 * 1024**3) -> None:
        self.corruptions = select_corruptions(corruptions, protocol)
        self.severities = select_severities(severities)
        try:
            #: the clean condition with the sweep's seed, protocol and border
            self.clean_condition = Condition(seed=seed, protocol=protocol, border=border)
        except ValueError as error:
            raise SweepError(str(error)) from None
        if isinstance(decode_cache_bytes, bool) or not isinstance(decode_cache_bytes, int) \
                or decode_cache_bytes < 0:
            raise SweepError(f'decode_cache_bytes must be an integer >= 0 (0: off), got '
                             f'{decode_cache_bytes!r}')
        self.protocol, self.seed, self.border = protocol, seed, border
        self.shard = parse_shard(shard)
        self.all_conditions = sweep_conditions(self.corruptions, self.severities,
                                               self.clean_condition)
        self.conditions = shard_conditions(self.all_conditions, self.shard)
        if not osp.isfile(config):
            raise FileNotFoundError(f'config {config!r} does not exist')
        if not osp.isfile(checkpoint):
            raise FileNotFoundError(f'checkpoint {checkpoint!r} does not exist')
        self.config, self.checkpoint = config, checkpoint
        self.cfg_options = dict(cfg_options or {})
        self.launcher, self.force, self.plots = launcher, force, plots
        self.work_dir = work_dir or default_sweep_work_dir(config)

        # one ApplyCorruption step, clean between conditions, placed where every selected
        # corruption can run (after the annotation loading when one is geometric); the
        # sweep switches it itself, so the test loop is MMEngine's own
        setup = prepare_test_config(
            config, checkpoint, work_dir=self.work_dir, cfg_options=self.cfg_options,
            launcher=launcher, corruption=self.clean_condition,
            geometric=any(get_corruption(name, protocol).moves_labels
                          for name in self.corruptions))
        self.placements = setup.placements
        cfg = setup.cfg
        use_plain_test_loop(cfg)
        cfg.load_from = None  # loaded strictly by build()
        cfg.test_evaluator = classwise_evaluator(cfg.test_evaluator)
        # the sweep shows its own progress over conditions, not one bar per condition
        cfg.custom_hooks = [h for h in cfg.get('custom_hooks') or []
                            if h.get('type') not in ('ProgressBarHook',
                                                     'reobench_mm.ProgressBarHook')]
        self.temperature_scaling = bool(temperature_scaling)
        self.calibration = bool(calibration) or self.temperature_scaling
        if self.calibration:
            cfg.test_evaluator += calibration_metric_cfgs(setup.task, self.temperature_scaling)
        cfg.resume = False
        # workers must see the corruption switched in the main process: fresh workers
        # (forked from the current dataset) for every condition; without workers the
        # option must be off for torch anyway
        for name in ('test_dataloader', 'val_dataloader'):
            if cfg.get(name):
                cfg[name].persistent_workers = False
        if launcher == 'none' and cfg.get('experiment_name') is None:
            cfg.experiment_name = f'robustness_{uuid.uuid4().hex[:8]}'
        # a visualizer of its own: MMEngine keeps one instance per name in a process, so
        # under the toolboxes' shared name ('visualizer') a later Runner would write into
        # this run's log folder (removed when the run is refused)
        if isinstance(cfg.get('visualizer'), dict):
            cfg.visualizer.name = f'robustness_visualizer_{uuid.uuid4().hex[:8]}'
        self.cfg, self.task = cfg, setup.task
        #: the task as results.json writes it ('segmentation', 'detection')
        self.metric_task = get_task(setup.task).results_name
        self.conditions_dir = osp.join(self.work_dir, CONDITIONS_DIR)

        self.config_sha256 = file_sha256(config)
        self.checkpoint_sha256 = file_sha256(checkpoint)
        #: the fingerprint of the inputs; ``data`` is added by complete_fingerprint()
        self.fingerprint: Dict[str, Any] = json_round_trip(dict(
            resolved_config_sha256=config_fingerprint(cfg), task=self.task,
            checkpoint_sha256=self.checkpoint_sha256, **code_fingerprint(),
            cfg_options=result_options(self.cfg_options), seed=seed, protocol=protocol,
            border=border, calibration=self.calibration,
            temperature_scaling=self.temperature_scaling))
        self.decode_cache_bytes = decode_cache_bytes
        self.decode_caches: list = []
        self.temperature: Optional[float] = None
        self.last_calibration: Dict[str, dict] = {}
        self.runner = None
        self._steps: list = []
        self._created_dirs = check_writable(self.conditions_dir)

    # ------------------------------------------------------------------ files
    def condition(self, condition: Any) -> Condition:
        """``condition`` as a :class:`~reobench_mm.corruptions.condition.Condition` of
        this sweep: a pair (``('cloud', 3)``) or key (``'cloud@3'``) gets the sweep's seed,
        protocol and border; a condition is taken as it is."""
        return Condition.coerce(condition, self.protocol, self.seed, self.border)

    def tag(self, condition: Any) -> str:
        """The file-name tag of a condition (:meth:`condition` reads it)."""
        return self.condition(condition).tag

    def condition_file(self, condition: Any) -> str:
        return osp.join(self.conditions_dir, f'{self.tag(condition)}.json')

    # ------------------------------------------------------------------ fingerprint
    def _list_test_data(self, dataset=None) -> None:
        """Add the ``data`` part to :attr:`fingerprint`, from ``dataset`` (the test
        loop's) or from the test dataset built alone (its annotations are parsed, no
        image is read). With temperature scaling the validation data the temperature is
        fitted on are listed too (``data['val']``)."""
        if 'data' in self.fingerprint:
            return
        if dataset is None:
            dataset = self._build_dataset(self.cfg.test_dataloader.dataset)
        data = dataset_fingerprint(dataset)
        if self.temperature_scaling and self.cfg.get('val_dataloader'):
            data['val'] = dataset_fingerprint(
                self._build_dataset(self.cfg.val_dataloader.dataset))
        self.fingerprint['data'] = json_round_trip(data)

    def _build_dataset(self, dataset_cfg: dict):
        """A dataset of the config built alone, in the config's default scope."""
        from mmengine.registry import DATASETS, DefaultScope
        with DefaultScope.overwrite_default_scope(self.cfg.get('default_scope')):
            dataset = DATASETS.build(copy.deepcopy(dataset_cfg))
        if hasattr(dataset, 'full_init'):
            dataset.full_init()
        return dataset

    def complete_fingerprint(self) -> Dict[str, Any]:
        """:attr:`fingerprint` with its ``data`` part (listing the test data first if
        needed: the test dataset is built, nothing is evaluated)."""
        self._list_test_data()
        return self.fingerprint

    def _check_fingerprint(self, recorded: Any, path: str) -> None:
        """Raise :class:`FingerprintMismatchError` naming the parts of ``recorded`` that
        differ from this sweep's inputs (the data part is compared, and so the test data
        listed, only when everything else agrees)."""
        cheap = [p for p in FINGERPRINT_PARTS if p != 'data']
        differing = differing_parts(recorded, self.fingerprint, cheap)
        if not differing:
            differing = differing_parts(recorded, self.complete_fingerprint())
        if differing:
            names = [part for part, _ in differing]
            raise FingerprintMismatchError(
                f'{path} was written for other inputs: the {", ".join(names)} '
                f'differ{"s" if len(names) == 1 else ""} ('
                + '; '.join(f'{part}: {detail}' for part, detail in differing)
                + '); use --force to evaluate again, or another --work-dir', names)

    # ------------------------------------------------------------------ records
    def _expected_fields(self, condition: Condition) -> dict:
        return dict(tag=condition.tag, task=self.task, **condition.settings())

    def reuse_problem(self, condition: Any) -> Optional[str]:
        """Why the condition's file cannot be reused (None when it can): missing,
        unreadable, malformed or inconsistent.

        Raises:
            FingerprintMismatchError: a well-formed file written for other inputs.
        """
        condition = self.condition(condition)
        return condition_record_problem(
            self.condition_file(condition), condition.key,
            self._expected_fields(condition), self.metric_task, self.calibration,
            check_fingerprint=self._check_fingerprint)

    def finished(self, condition: Any) -> bool:
        """Whether the condition has a valid file of the same inputs (see
        :meth:`reuse_problem`; a malformed or inconsistent file is not finished).

        Raises:
            FingerprintMismatchError: the file was written for other inputs (config,
                checkpoint, data, code or options).
        """
        return self.reuse_problem(condition) is None

    def _write_condition(self, condition: Condition, metrics: dict, seconds: float) -> dict:
        record = dict(format=CONDITION_FORMAT, condition=condition.key,
                      tag=condition.tag, task=self.task, **condition.settings(),
                      metrics=metrics, result=condition_result_dict(metrics, self.metric_task),
                      seconds=round(seconds, 3), fingerprint=self.complete_fingerprint())
        if self.calibration:
            record['calibration'] = json_round_trip(self.last_calibration)
        return write_record(self.condition_file(condition), record)

    def load_records(self, conditions: Sequence[Any]) -> Dict[Condition, dict]:
        """``condition -> record`` of the condition files.

        Raises:
            SweepError: a file is missing, malformed or inconsistent (named, with why).
        """
        out = {}
        for condition in map(self.condition, conditions):
            problem = self.reuse_problem(condition)
            if problem is not None:
                raise SweepError(f'condition {condition.key}: {problem}; run the '
                                 'sweep again to evaluate it')
            out[condition] = read_json(self.condition_file(condition))[0]
        return out

    def load_results(self, conditions: Sequence[Any]) -> Dict[Condition, ConditionResult]:
        """``condition -> ConditionResult`` from the condition files."""
        return {condition: ConditionResult.from_dict(record['result'])
                for condition, record in self.load_records(conditions).items()}

    def provenance(self) -> dict:
        """The provenance block of the report and of a shard manifest."""
        return make_provenance(
            model=osp.splitext(osp.basename(self.config))[0], task=self.metric_task,
            config=self.config, checkpoint=self.checkpoint,
            checkpoint_sha256=self.checkpoint_sha256, seed=self.seed, protocol=self.protocol,
            extra=json_round_trip(dict(corruptions=self.corruptions,
                                       severities=self.severities, border=self.border,
                                       cfg_options=result_options(self.cfg_options),
                                       calibration=self.calibration,
                                       temperature=self.recorded_temperature(),
                                       fingerprint=self.complete_fingerprint())))

    def _temperature_record(self) -> Optional[dict]:
        """``temperature.json`` if it was fitted for this sweep's inputs, else None
        (also when it is unreadable or malformed: the temperature is fitted again)."""
        path = osp.join(self.work_dir, TEMPERATURE_FILE)
        if not self.temperature_scaling or not osp.isfile(path):
            return None
        record, _ = read_json(path)
        if not isinstance(record, dict) or \
                not isinstance(record.get('temperature'), (int, float)) or \
                record.get('fingerprint') != self.complete_fingerprint():
            return None
        return record

    def recorded_temperature(self) -> Optional[dict]:
        """The fitted temperature of this sweep (temperature, source, NLL before/after),
        or None without temperature scaling."""
        record = self._temperature_record()
        if record is not None:
            record.pop('fingerprint')
        return record

    # ------------------------------------------------------------------ model
    def _init_distributed(self) -> None:
        """Join the process group of a multi-process launch (before the condition files
        are checked, so that rank 0 decides what is left to do for every rank).

        MMEngine's ``pytorch`` launcher selects a CUDA device; on a machine without one
        the processes started by ``torchrun`` join a ``gloo`` group instead, and the
        model is wrapped without device ids, so a CPU-only machine runs multi-process
        sweeps too.
        """
        from mmengine.dist import init_dist, is_distributed
        if self.launcher == 'none' or is_distributed():
            return
        import torch
        if self.launcher == 'pytorch' and not torch.cuda.is_available():
            torch.distributed.init_process_group(backend='gloo')  # env:// (torchrun)
            if self.cfg.get('model_wrapper_cfg') is None:
                self.cfg.model_wrapper_cfg = dict(type='MMDistributedDataParallel',
                                                  device_ids=None)
        else:
            init_dist(self.launcher, **dict(self.cfg.get('env_cfg', {}).get('dist_cfg', {})))

    def build(self) -> None:
        """Build the runner, the model and the test loop once; load the checkpoint.

        The checkpoint file is read before the Runner is built
        (:func:`~reobench_mm.engine.checkpoint.read_checkpoint`), then the runner's
        ``after_load_checkpoint`` hooks see it and it is loaded strictly
        (:func:`~reobench_mm.engine.checkpoint.load_checkpoint_strict`). The test data is
        listed for the fingerprint from the test loop's dataset unless that was done
        before (a resumed run compares the finished conditions first).

        Raises:
            FileNotFoundError, CheckpointError: the checkpoint file cannot be used
                (empty, truncated, corrupt, not a checkpoint, disallowed objects).
            CheckpointMismatchError: missing, unexpected or mis-shaped keys.
        """
        if self.runner is not None:
            return
        checkpoint = _checkpoint.read_checkpoint(self.checkpoint, map_location='cpu')
        self._init_distributed()
        from mmengine.registry import RUNNERS
        from mmengine.runner import Runner
        cfg = self.cfg
        runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
        loop = runner.test_loop
        runner.call_hook('before_run')
        runner.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        try:
            _checkpoint.load_checkpoint_strict(runner.model, self.checkpoint,
                                               config=self.config, checkpoint=checkpoint)
        except _checkpoint.CheckpointMismatchError as error:
            raise CheckpointMismatchError(str(error), error.mismatch) from None
        runner.logger.info(f'Load checkpoint from {self.checkpoint}')
        self._list_test_data(loop.dataloader.dataset)
        steps = corruption_steps(loop.dataloader.dataset)
        if not steps:
            raise SweepError('no ApplyCorruption step in the built test dataset pipeline')
        self.runner, self._steps = runner, steps
        from mmengine.dist import is_main_process
        from mmengine.logging import print_log
        if is_main_process():
            for placement in self.placements:
                print_log(f'robustness sweep: {placement.describe()}', logger='current')
        if self.decode_cache_bytes > 0:
            from .decode_cache import cache_loading_steps
            self.decode_caches = cache_loading_steps(loop.dataloader.dataset, steps,
                                                     self.decode_cache_bytes)
        if self.temperature_scaling:
            self.temperature = self._temperature()
            for metric in self._calibration_metrics().values():
                if metric.prefix == SCALED_CALIBRATION_PREFIX:
                    metric.temperature = self.temperature

    def _calibration_metrics(self) -> Dict[str, Any]:
        """prefix -> the calibration metric instances of the built test evaluator."""
        if self.runner is None or not self.calibration:
            return {}
        prefixes = (CALIBRATION_PREFIX, SCALED_CALIBRATION_PREFIX)
        return {m.prefix: m for m in self.runner.test_loop.evaluator.metrics
                if getattr(m, 'prefix', None) in prefixes and hasattr(m, 'last_details')}

    def _temperature(self) -> float:
        """The temperature fitted on clean validation pixels (``temperature.json``, reused
        when it was fitted for the same inputs)."""
        import torch
        from mmengine.dist import is_main_process
        from mmengine.evaluator import Evaluator
        record = None if self.force else self._temperature_record()
        if record is not None:
            return float(record['temperature'])
        runner, cfg = self.runner, self.cfg
        if cfg.get('val_dataloader'):
            source = 'val_dataloader'
            loader = runner.build_dataloader(cfg.val_dataloader, seed=runner.seed)
        else:  # the corruption steps are clean between conditions
            source = 'test_dataloader (clean)'
            loader = runner.test_loop.dataloader
        evaluator = Evaluator([dict(type='TemperatureFitMetric', seed=self.seed)])
        evaluator.dataset_meta = getattr(loader.dataset, 'metainfo', None)
        model = runner.model
        model.eval()
        start = time.perf_counter()
        with torch.no_grad():
            for batch in loader:
                evaluator.process(model.test_step(batch), batch)
        metrics = evaluator.evaluate(len(loader.dataset))
        fit = {name: metrics[metric_key(TEMPERATURE_PREFIX, name)]
               for name in TEMPERATURE_METRICS}
        temperature = float(fit['temperature'])
        if is_main_process():
            from mmengine.logging import print_log
            print_log(f'temperature fitted on {source}: T = {temperature:.4f} (NLL '
                      f'{fit["nll_before"]:.4f} -> {fit["nll_after"]:.4f}, '
                      f'{int(fit["num_pixels"])} pixels, '
                      f'{time.perf_counter() - start:.1f} s)', logger='current')
            path = osp.join(self.work_dir, TEMPERATURE_FILE)
            try:
                dump_json_atomic(dict(
                    temperature=temperature, source=source,
                    nll_before=float(fit['nll_before']), nll_after=float(fit['nll_after']),
                    num_pixels=int(fit['num_pixels']),
                    fingerprint=self.complete_fingerprint()), path)
            except OSError as error:
                raise write_error(path, error) from None
        return temperature

    def evaluate(self, condition: Any) -> Tuple[Dict[str, float], float]:
        """Run the test loop under ``condition`` (:meth:`condition` reads it):
        ``(metrics, seconds)``."""
        self.build()
        condition = self.condition(condition)
        for step in self._steps:
            step.set_condition(condition)
        start = time.perf_counter()
        try:
            metrics = self.runner.test_loop.run()
        finally:
            for step in self._steps:
                step.set_condition(self.clean_condition)
        seconds = time.perf_counter() - start
        # reliability data etc. of the calibration metrics (the accumulators themselves
        # are not kept: the curves and bins are what the report needs)
        self.last_calibration = {
            prefix: {k: v for k, v in (metric.last_details or {}).items() if k != 'stats'}
            for prefix, metric in self._calibration_metrics().items()}
        return {str(k): float(v) for k, v in metrics.items()}, seconds

    # ------------------------------------------------------------------ run
    def _plan(self, lock: WorkDirLock) -> Tuple[List[Condition], Dict[str, str]]:
        """Rank 0 takes the work dir's lock and decides which conditions are left
        (``todo``, and ``condition key -> reason`` for files not reused); every rank
        gets the decision, or the error that refused the run."""
        from mmengine.dist import broadcast_object_list, get_world_size, is_main_process
        todo, reasons, error = None, {}, None
        if is_main_process():
            try:
                lock.acquire()
                todo = []
                for condition in self.conditions:
                    problem = None if self.force else self.reuse_problem(condition)
                    if self.force or problem is not None:
                        todo.append(condition)
                    if problem is not None and osp.isfile(self.condition_file(condition)):
                        reasons[condition.key] = problem
            except Exception as caught:  # told to the other ranks, raised below
                error = caught
        if get_world_size() > 1:
            box = [(todo, reasons, None if error is None else str(error))]
            broadcast_object_list(box)
            todo, reasons, message = box[0]
            if error is None and message is not None:
                raise SweepError(f'the main process refused the run: {message}')
        if error is not None:
            raise error
        return todo, reasons

    @contextmanager
    def _work_dir_guard(self, main: bool) -> Iterator['_RunState']:
        """Hold the work dir's lock (taken by :meth:`_plan` on rank 0) for a run, and put
        the work dir back as it was when the run fails before it evaluated anything: the
        files and folders that appeared are removed (the Runner's log folder, its dumped
        config, a temperature file; log files closed first), a dumped config that was
        overwritten is restored, and empty folders the sweep created are removed."""
        if not osp.isdir(self.conditions_dir):  # removed by an earlier refused run
            self._created_dirs = check_writable(self.conditions_dir)
        state = _RunState(WorkDirLock(self.work_dir))
        dumped = [osp.basename(self.cfg.filename)] if self.cfg.filename else []
        snapshot = WorkDirSnapshot(self.work_dir, keep=dumped) if main else None
        undo = False
        try:
            yield state
        except BaseException as error:
            undo = main and not state.evaluating and not isinstance(error, WorkDirLockedError)
            if undo:
                for name in snapshot.new_entries():
                    forget_runner_instances(osp.join(self.work_dir, name))
                snapshot.restore(spare=[osp.basename(state.lock.path)])
            raise
        finally:
            state.lock.release()
            if undo:
                remove_empty_dirs(self._created_dirs)

    def run(self, on_condition: Optional[Callable[[Condition, dict], None]] = None
            ) -> SweepOutcome:
        """Evaluate the conditions not yet finished, then write the report (or the shard
        manifest). ``on_condition(condition, record)`` is called after each condition
        file is written.

        A condition file that is malformed or inconsistent is evaluated again, with a
        warning giving the reason (``outcome.reevaluated``).

        Raises:
            WorkDirLockedError: another sweep is running in the work dir.
            FingerprintMismatchError: a finished condition was written for other inputs
                (the message names the parts that differ).
            CheckpointError, CheckpointMismatchError: see :meth:`build`.
            SweepError: a file cannot be written (named, with the reason); the conditions
                finished before it are kept.

        A run that fails before it evaluated anything leaves the work dir as it was.
        """
        from mmengine.dist import barrier, is_main_process

        start = time.perf_counter()
        outcome = SweepOutcome(self.work_dir, list(self.conditions))
        self._init_distributed()
        main = is_main_process()
        with self._work_dir_guard(main) as state:
            self._run_conditions(outcome, state, main, on_condition)
        barrier()
        outcome.wall_seconds = time.perf_counter() - start
        return outcome

    def _run_conditions(self, outcome: SweepOutcome, state: '_RunState', main: bool,
                        on_condition: Optional[Callable[[Condition, dict], None]]) -> None:
        """The body of :meth:`run`, inside the work dir's lock."""
        from mmengine.logging import print_log

        from ..engine.progress import Progress

        todo, outcome.reevaluated = self._plan(state.lock)
        outcome.skipped = [c for c in self.conditions if c not in todo]
        if main:
            for reason in outcome.reevaluated.values():
                print_log(f'{reason}; evaluating it again', logger='current',
                          level=logging.WARNING)
        if outcome.skipped and main:
            print(f'{len(outcome.skipped)} of {len(self.conditions)} conditions already '
                  f'finished in {self.conditions_dir}; skipped', flush=True)
        if todo:
            self.build()
            state.evaluating = True
            metric = get_task(self.task).metric_name
            bar = Progress(len(todo), desc='robustness', unit='condition') if main else None
            for number, condition in enumerate(todo, 1):
                metrics, seconds = self.evaluate(condition)
                outcome.seconds[condition.key] = seconds
                outcome.evaluated.append(condition)
                if main:
                    record = self._write_condition(condition, metrics, seconds)
                    bar.break_line()
                    print_log(f'robustness [{number}/{len(todo)}] {condition.tag}: '
                              f'{metric} {record["result"]["value"]:.2f} ({seconds:.1f} s)',
                              logger='current')
                    bar.update()
                    if on_condition is not None:
                        on_condition(condition, record)
            if main:
                bar.close()
            self.runner.call_hook('after_run')
        if main:
            if self.shard is None:
                report = self.write_report()
                outcome.report_files = dict(report.files)
            else:
                outcome.manifest = self.write_manifest()

    def write_report(self) -> Report:
        """Write ``results.json``, ``results.csv``, ``report.md`` and the plots from the
        condition files (:func:`~reobench_mm.analysis.report.write_report`).

        Raises:
            SweepError: a condition file is missing or malformed, or a report file cannot
                be written (named, with the reason).
        """
        records = self.load_records(self.all_conditions)
        try:
            return write_report(
                self.work_dir,
                {c: ConditionResult.from_dict(r['result']) for c, r in records.items()},
                protocol=self.protocol, task=self.metric_task,
                expected_severities=self.severities, provenance=self.provenance(),
                plots=self.plots, calibration_details=calibration_details(records))
        except OSError as error:
            raise write_error(error.filename or f'the report in {self.work_dir}',
                              error) from None

    def write_manifest(self) -> str:
        """Write the shard manifest ``shard_<i>-of-<n>.json``; returns its path."""
        return write_shard_manifest(
            self.work_dir, self.shard, task=self.metric_task, protocol=self.protocol,
            corruptions=self.corruptions, severities=self.severities,
            condition_files={c.key: osp.join(CONDITIONS_DIR, f'{c.tag}.json')
                             for c in self.conditions},
            num_conditions=len(self.all_conditions), fingerprint=self.complete_fingerprint(),
            provenance=self.provenance())


@dataclass
class _RunState:
    """The lock of a run, and whether it has started evaluating (after which a failure
    keeps what the run wrote)."""
    lock: WorkDirLock
    evaluating: bool = False


def run_sweep(config: str, checkpoint: str, *,
              on_condition: Optional[Callable[[Condition, dict], None]] = None,
              **kwargs) -> SweepOutcome:
    """``RobustnessSweep(config, checkpoint, **kwargs).run(on_condition)``."""
    return RobustnessSweep(config, checkpoint, **kwargs).run(on_condition)
