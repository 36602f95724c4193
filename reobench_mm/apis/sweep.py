"""Robustness sweep: one model, evaluated clean and under every corruption × severity.

:class:`RobustnessSweep` (and :func:`run_sweep`) builds the MMEngine ``Runner`` and the
model once, loads the checkpoint once (strictly: every key must fit), and then, for
each condition, switches the ``ApplyCorruption`` step of the test dataset's pipeline in
place and runs the test loop again.

Files under the work dir:

- ``conditions/<tag>.json``: one per finished condition (``tag`` as
  :func:`corruption_tag`, e.g. ``clean``, ``cloud_s3``), written atomically: the
  settings, the raw metrics, the condition result and a fingerprint of the inputs.
  A rerun skips the conditions that have a file (unless ``force``), so a killed run
  loses at most the condition in progress.
- ``results.json``, ``results.csv``, ``report.md`` and the plots
  (:func:`~reobench_mm.evaluation.write_report`) at the end of a non-sharded run.
- ``shard_<i>-of-<n>.json``: the manifest of a sharded run (``shard=(i, n)``: the
  conditions ``i, i + n, i + 2n, ...`` of the full list; the clean condition is the
  first, so it belongs to shard 0). :func:`merge_sweeps` merges the shards' outputs
  and writes the report.
"""
from __future__ import annotations

import json
import os
import os.path as osp
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from glob import glob
from typing import (Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from ..corruptions import GROUPS, PROTOCOLS, list_corruptions
from ..corruptions import resolve_corruptions as _resolve_names
from ..corruptions.base import check_severity
from ..corruptions.geometric import BORDER_MODES
from ..fileio import file_sha256
from .config_utils import (ROTATED_DETECTION, corruption_tag, dump_json_atomic,
                           prepare_test_config)

__all__ = [
    'SweepError', 'CheckpointMismatchError', 'Condition', 'SweepOutcome', 'RobustnessSweep',
    'run_sweep', 'merge_sweeps', 'parse_shard', 'sweep_conditions', 'shard_conditions',
    'select_corruptions', 'select_severities', 'default_sweep_work_dir', 'set_corruption',
    'classwise_evaluator'
]

Condition = Tuple[str, int]
CLEAN_CONDITION: Condition = ('clean', 0)
CONDITION_FORMAT = 'reobench_mm.sweep_condition/1'
SHARD_FORMAT = 'reobench_mm.sweep_shard/1'
CONDITIONS_DIR = 'conditions'


class SweepError(ValueError):
    """A bad input of a sweep (names, selection, shard, work dir, stale files)."""


class CheckpointMismatchError(SweepError):
    """The checkpoint does not fit the model of the config."""


# ----------------------------------------------------------------------------- selection

def select_corruptions(names: Optional[Sequence[str]], protocol: str = 'reobench') -> List[str]:
    """Corruption names and groups (``all``, ``environmental``, ``sensor``, ``geometric``,
    ``appearance``) expanded, in the order given; ``None`` is every corruption of the
    protocol.

    Raises:
        SweepError: unknown protocol or name (the message lists the valid ones), or an
            empty selection.
    """
    if protocol not in PROTOCOLS:
        raise SweepError(f'unknown protocol {protocol!r}; valid: {list(PROTOCOLS)}')
    if names is None:
        names = ['all']
    if isinstance(names, str):
        names = [names]
    names = list(names)
    valid = list_corruptions(protocol)
    unknown = [n for n in names if n not in valid and n not in GROUPS]
    if unknown:
        raise SweepError(f'unknown corruption name(s) {unknown} for protocol {protocol!r}; '
                         f'valid: {valid}; groups: {list(GROUPS)}')
    selected = _resolve_names(names, protocol) if names else []
    if not selected:
        raise SweepError('empty selection: no corruption to evaluate (give names or groups, '
                         f'e.g. {valid[:2]} or "all")')
    return selected


def select_severities(severities: Optional[Sequence[int]]) -> List[int]:
    """Severities 1..5, sorted and without duplicates (``None``: all five)."""
    if severities is None:
        return [1, 2, 3, 4, 5]
    out = []
    for severity in severities:
        try:
            severity = check_severity(severity, allow_zero=False)
        except ValueError as error:
            raise SweepError(f'{error}; the clean condition always runs') from None
        if severity not in out:
            out.append(severity)
    if not out:
        raise SweepError('empty selection: no severity to evaluate (give some of 1..5)')
    return sorted(out)


def sweep_conditions(corruptions: Sequence[str], severities: Sequence[int]) -> List[Condition]:
    """The full condition list: clean first, then corruption by corruption, severity by
    severity."""
    return [CLEAN_CONDITION] + [(c, s) for c in corruptions for s in severities]


def parse_shard(shard: Union[None, str, Sequence[int]]) -> Optional[Tuple[int, int]]:
    """``'i/n'`` (or ``(i, n)``) -> ``(i, n)`` with ``0 <= i < n``; None stays None."""
    if shard is None:
        return None
    if isinstance(shard, str):
        index, sep, count = shard.partition('/')
        if not sep or not index.strip().isdigit() or not count.strip().isdigit():
            raise SweepError(f"a shard is 'i/n' (e.g. '0/4'), got {shard!r}")
        shard = (int(index), int(count))
    index, count = shard
    if count < 1 or not 0 <= index < count:
        raise SweepError(f'shard {index}/{count}: need n >= 1 and 0 <= i < n')
    return int(index), int(count)


def shard_conditions(conditions: Sequence[Condition],
                     shard: Optional[Tuple[int, int]]) -> List[Condition]:
    """Every n-th condition starting at i (all of them without a shard)."""
    if shard is None:
        return list(conditions)
    index, count = shard
    return list(conditions)[index::count]


def default_sweep_work_dir(config: str) -> str:
    """``work_dirs/robustness/<config file stem>``."""
    return osp.join('work_dirs', 'robustness', osp.splitext(osp.basename(config))[0])


def condition_key(condition: Condition) -> str:
    name, severity = condition
    return 'clean' if name == 'clean' else f'{name}@{severity}'


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str, sort_keys=True))


#: ``--cfg-options`` keys that do not change the numbers (left out of the fingerprint
#: that a resumed run compares).
COSMETIC_OPTIONS = ('log_level', 'log_processor*', 'default_hooks*', 'custom_hooks*',
                    'visualizer*', 'env_cfg*', 'work_dir', 'experiment_name',
                    '*num_workers', '*persistent_workers', '*pin_memory')


def _result_options(options: dict) -> dict:
    from fnmatch import fnmatch
    return {k: v for k, v in options.items()
            if not any(fnmatch(k, pattern) for pattern in COSMETIC_OPTIONS)}


def _robustness_task(task: str) -> str:
    """The task name of :mod:`reobench_mm.evaluation` (``'detection'`` for rotated boxes)."""
    return 'detection' if task == ROTATED_DETECTION else task


def _check_writable(folder: str) -> None:
    """Create ``folder`` and write (then remove) a probe file in it."""
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix='.write_probe.', dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as error:
        raise SweepError(f'the work dir {osp.dirname(folder)!r} is not writable: '
                         f'{error}') from None


# ----------------------------------------------------------------------------- pipelines

def set_corruption(step, corruption: str, severity: int, seed: int, protocol: str,
                   border: str) -> None:
    """Switch an ``ApplyCorruption`` instance to other settings (in place)."""
    step.set_condition(corruption, severity, seed, protocol, border)


def _corruption_steps(dataset) -> list:
    """Every ``ApplyCorruption`` instance in the pipelines of ``dataset`` and of the
    datasets it wraps."""
    from ..transforms.corruption import ApplyCorruption
    found, seen = [], set()

    def walk_transforms(transforms):
        for transform in transforms or []:
            if isinstance(transform, ApplyCorruption):
                if id(transform) not in seen:
                    seen.add(id(transform))
                    found.append(transform)
            inner = getattr(transform, 'transforms', None)
            if isinstance(inner, (list, tuple)):
                walk_transforms(inner)
            elif inner is not None and hasattr(inner, 'transforms'):
                walk_transforms(inner.transforms)

    def walk(ds):
        pipeline = getattr(ds, 'pipeline', None)
        if pipeline is not None:
            walk_transforms(getattr(pipeline, 'transforms', None))
        if getattr(ds, 'dataset', None) is not None:
            walk(ds.dataset)
        for inner in getattr(ds, 'datasets', None) or []:
            walk(inner)

    walk(dataset)
    return found


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


#: Prefixes of the calibration metrics the sweep adds: as evaluated, and (segmentation,
#: with temperature scaling) with the temperature fitted on clean validation pixels.
CALIBRATION_PREFIX = 'calib'
SCALED_CALIBRATION_PREFIX = 'calib_ts'
TEMPERATURE_FILE = 'temperature.json'


def calibration_metric_cfgs(task: str, temperature_scaling: bool = False) -> List[dict]:
    """The metric configs the sweep appends for calibration: ``SegCalibrationMetric``
    (segmentation; plus a second one with prefix ``calib_ts`` for temperature scaling,
    whose temperature is set after fitting) or ``RotatedDetectionCalibrationMetric``."""
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
    """
    work_dir: str
    conditions: List[Condition]
    evaluated: List[Condition] = field(default_factory=list)
    skipped: List[Condition] = field(default_factory=list)
    seconds: Dict[str, float] = field(default_factory=dict)
    report_files: Dict[str, str] = field(default_factory=dict)
    manifest: Optional[str] = None
    wall_seconds: float = 0.0


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
    constructor, before anything is written, except :class:`CheckpointMismatchError`,
    raised by :meth:`build` before any condition file is written.
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
        if border not in BORDER_MODES:
            raise SweepError(f'border must be one of {list(BORDER_MODES)}, got {border!r}')
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise SweepError(f'seed must be an integer, got {seed!r}')
        self.protocol, self.seed, self.border = protocol, seed, border
        self.shard = parse_shard(shard)
        self.all_conditions = sweep_conditions(self.corruptions, self.severities)
        self.conditions = shard_conditions(self.all_conditions, self.shard)
        if not osp.isfile(config):
            raise FileNotFoundError(f'config {config!r} does not exist')
        if not osp.isfile(checkpoint):
            raise FileNotFoundError(f'checkpoint {checkpoint!r} does not exist')
        self.config, self.checkpoint = config, checkpoint
        self.cfg_options = dict(cfg_options or {})
        self.launcher, self.force, self.plots = launcher, force, plots
        self.work_dir = work_dir or default_sweep_work_dir(config)

        setup = prepare_test_config(
            config, checkpoint, work_dir=self.work_dir, cfg_options=self.cfg_options,
            launcher=launcher,
            corruption=dict(corruption='clean', severity=0, seed=seed, protocol=protocol,
                            border=border))
        cfg = setup.cfg
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
        self.cfg, self.task = cfg, setup.task
        self.metric_task = _robustness_task(setup.task)
        self.conditions_dir = osp.join(self.work_dir, CONDITIONS_DIR)
        _check_writable(self.conditions_dir)

        self.config_sha256 = file_sha256(config)
        self.checkpoint_sha256 = file_sha256(checkpoint)
        self.fingerprint = _jsonable(dict(
            config_sha256=self.config_sha256, checkpoint_sha256=self.checkpoint_sha256,
            cfg_options=_result_options(self.cfg_options), seed=seed, protocol=protocol,
            border=border, task=self.task, calibration=self.calibration,
            temperature_scaling=self.temperature_scaling))
        if isinstance(decode_cache_bytes, bool) or not isinstance(decode_cache_bytes, int) \
                or decode_cache_bytes < 0:
            raise SweepError(f'decode_cache_bytes must be an integer >= 0 (0: off), got '
                             f'{decode_cache_bytes!r}')
        self.decode_cache_bytes = decode_cache_bytes
        self.decode_caches: list = []
        self.temperature: Optional[float] = None
        self.last_calibration: Dict[str, dict] = {}
        self.runner = None
        self._steps: list = []

    # ------------------------------------------------------------------ files
    def tag(self, condition: Condition) -> str:
        name, severity = condition
        return corruption_tag(name, severity, self.seed, self.protocol, self.border)

    def condition_file(self, condition: Condition) -> str:
        return osp.join(self.conditions_dir, f'{self.tag(condition)}.json')

    def _settings(self, condition: Condition) -> dict:
        name, severity = condition
        return dict(corruption=name, severity=severity, seed=self.seed,
                    protocol=self.protocol, border=self.border)

    def finished(self, condition: Condition) -> bool:
        """Whether the condition has a valid file of the same inputs.

        Raises:
            SweepError: the file was written for other inputs (config, checkpoint,
                options or seed).
        """
        path = self.condition_file(condition)
        if not osp.isfile(path):
            return False
        try:
            with open(path, encoding='utf-8') as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            return False  # unreadable: evaluate again
        if record.get('format') != CONDITION_FORMAT or \
                record.get('condition') != condition_key(condition):
            return False
        if record.get('fingerprint') != self.fingerprint:
            raise SweepError(
                f'{path} was written for other inputs (config, checkpoint, --cfg-options or '
                'seed differ); use --force to evaluate again, or another --work-dir')
        return True

    def _write_condition(self, condition: Condition, metrics: dict, seconds: float) -> dict:
        from ..evaluation import condition_result_from_metrics
        result = condition_result_from_metrics(metrics, self.metric_task)
        record = dict(format=CONDITION_FORMAT, condition=condition_key(condition),
                      tag=self.tag(condition), task=self.task, **self._settings(condition),
                      metrics=metrics, result=_jsonable_result(result),
                      seconds=round(seconds, 3), fingerprint=self.fingerprint)
        if self.calibration:
            record['calibration'] = _jsonable(self.last_calibration)
        dump_json_atomic(record, self.condition_file(condition))
        return record

    def load_records(self, conditions: Sequence[Condition]) -> Dict[Condition, dict]:
        """``condition -> record`` of the condition files."""
        out = {}
        for condition in conditions:
            with open(self.condition_file(condition), encoding='utf-8') as handle:
                out[condition] = json.load(handle)
        return out

    def load_results(self, conditions: Sequence[Condition]) -> dict:
        """``condition -> ConditionResult`` from the condition files."""
        from ..evaluation import ConditionResult
        return {condition: ConditionResult.from_dict(record['result'])
                for condition, record in self.load_records(conditions).items()}

    def provenance(self) -> dict:
        from ..evaluation import make_provenance
        return make_provenance(
            model=osp.splitext(osp.basename(self.config))[0], task=self.metric_task,
            config=self.config, checkpoint=self.checkpoint,
            checkpoint_sha256=self.checkpoint_sha256, seed=self.seed, protocol=self.protocol,
            extra=_jsonable(dict(corruptions=self.corruptions, severities=self.severities,
                                 border=self.border,
                                 cfg_options=_result_options(self.cfg_options),
                                 calibration=self.calibration,
                                 temperature=self.recorded_temperature())))

    def _temperature_record(self) -> Optional[dict]:
        """``temperature.json`` if it was fitted for this sweep's inputs, else None."""
        path = osp.join(self.work_dir, TEMPERATURE_FILE)
        if not self.temperature_scaling or not osp.isfile(path):
            return None
        with open(path, encoding='utf-8') as handle:
            record = json.load(handle)
        return record if record.get('fingerprint') == self.fingerprint else None

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

        Raises:
            CheckpointMismatchError: missing, unexpected or mis-shaped keys.
        """
        if self.runner is not None:
            return
        self._init_distributed()
        from mmengine.registry import RUNNERS
        from mmengine.runner import Runner
        cfg = self.cfg
        runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
        loop = runner.test_loop
        runner.call_hook('before_run')
        try:
            runner.load_checkpoint(self.checkpoint, map_location='cpu', strict=True)
        except RuntimeError as error:
            detail = ' '.join(str(error).split())
            if len(detail) > 800:
                detail = detail[:800] + ' ...'
            raise CheckpointMismatchError(
                f'the checkpoint {self.checkpoint!r} does not fit the model of '
                f'{self.config!r}: {detail}') from None
        steps = _corruption_steps(loop.dataloader.dataset)
        if not steps:
            raise SweepError('no ApplyCorruption step in the built test dataset pipeline')
        self.runner, self._steps = runner, steps
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
        temperature = float(metrics['tscale/temperature'])
        if is_main_process():
            from mmengine.logging import print_log
            print_log(f'temperature fitted on {source}: T = {temperature:.4f} (NLL '
                      f'{metrics["tscale/nll_before"]:.4f} -> {metrics["tscale/nll_after"]:.4f}, '
                      f'{int(metrics["tscale/num_pixels"])} pixels, '
                      f'{time.perf_counter() - start:.1f} s)', logger='current')
            dump_json_atomic(dict(
                temperature=temperature, source=source,
                nll_before=float(metrics['tscale/nll_before']),
                nll_after=float(metrics['tscale/nll_after']),
                num_pixels=int(metrics['tscale/num_pixels']), fingerprint=self.fingerprint),
                osp.join(self.work_dir, TEMPERATURE_FILE))
        return temperature

    def evaluate(self, condition: Condition) -> Tuple[Dict[str, float], float]:
        """Run the test loop under ``condition``: ``(metrics, seconds)``."""
        self.build()
        settings = self._settings(condition)
        for step in self._steps:
            set_corruption(step, **settings)
        start = time.perf_counter()
        try:
            metrics = self.runner.test_loop.run()
        finally:
            for step in self._steps:
                set_corruption(step, **self._settings(CLEAN_CONDITION))
        seconds = time.perf_counter() - start
        # reliability data etc. of the calibration metrics (the accumulators themselves
        # are not kept: the curves and bins are what the report needs)
        self.last_calibration = {
            prefix: {k: v for k, v in (metric.last_details or {}).items() if k != 'stats'}
            for prefix, metric in self._calibration_metrics().items()}
        return {str(k): float(v) for k, v in metrics.items()}, seconds

    # ------------------------------------------------------------------ run
    def _todo(self) -> List[Condition]:
        from mmengine.dist import broadcast_object_list, get_world_size, is_main_process
        todo = None
        if is_main_process():
            todo = [c for c in self.conditions if self.force or not self.finished(c)]
        if get_world_size() > 1:
            box = [todo]
            broadcast_object_list(box)
            todo = box[0]
        return todo

    def run(self, on_condition: Optional[Callable[[Condition, dict], None]] = None
            ) -> SweepOutcome:
        """Evaluate the conditions not yet finished, then write the report (or the shard
        manifest). ``on_condition(condition, record)`` is called after each condition
        file is written."""
        from mmengine.dist import barrier, is_main_process
        from mmengine.logging import print_log
        from mmengine.utils import ProgressBar

        start = time.perf_counter()
        outcome = SweepOutcome(self.work_dir, list(self.conditions))
        self._init_distributed()
        todo = self._todo()
        outcome.skipped = [c for c in self.conditions if c not in todo]
        main = is_main_process()
        if outcome.skipped and main:
            print(f'{len(outcome.skipped)} of {len(self.conditions)} conditions already '
                  f'finished in {self.conditions_dir}; skipped', flush=True)
        if todo:
            self.build()
            metric = {'segmentation': 'mIoU', 'detection': 'mAP'}[self.metric_task]
            bar = ProgressBar(len(todo)) if main else None
            for number, condition in enumerate(todo, 1):
                metrics, seconds = self.evaluate(condition)
                key = condition_key(condition)
                outcome.seconds[key] = seconds
                outcome.evaluated.append(condition)
                if main:
                    record = self._write_condition(condition, metrics, seconds)
                    print_log(f'robustness [{number}/{len(todo)}] {self.tag(condition)}: '
                              f'{metric} {record["result"]["value"]:.2f} ({seconds:.1f} s)',
                              logger='current')
                    bar.update()
                    if on_condition is not None:
                        on_condition(condition, record)
            if main:
                print(flush=True)
            self.runner.call_hook('after_run')
        if main:
            if self.shard is None:
                report = self.write_report()
                outcome.report_files = dict(report.files)
            else:
                outcome.manifest = self.write_manifest()
        barrier()
        outcome.wall_seconds = time.perf_counter() - start
        return outcome

    def write_report(self):
        from ..evaluation import ConditionResult, write_report
        records = self.load_records(self.all_conditions)
        return write_report(
            self.work_dir, {c: ConditionResult.from_dict(r['result']) for c, r in records.items()},
            protocol=self.protocol, task=self.metric_task, expected_severities=self.severities,
            provenance=self.provenance(), plots=self.plots,
            calibration_details=_calibration_details(records))

    def write_manifest(self) -> str:
        index, count = self.shard
        path = osp.join(self.work_dir, f'shard_{index}-of-{count}.json')
        dump_json_atomic(dict(
            format=SHARD_FORMAT, shard=[index, count], task=self.metric_task,
            protocol=self.protocol, corruptions=self.corruptions, severities=self.severities,
            conditions={condition_key(c): osp.join(CONDITIONS_DIR, f'{self.tag(c)}.json')
                        for c in self.conditions},
            num_conditions=len(self.all_conditions), fingerprint=self.fingerprint,
            provenance=self.provenance()), path)
        return path


def _calibration_details(records: Mapping[Condition, dict]) -> Optional[dict]:
    """``condition -> {prefix: details}`` when every record has calibration details."""
    details = {c: r.get('calibration') for c, r in records.items()}
    if not details or any(not d for d in details.values()):
        return None
    return details


def _jsonable_result(result) -> dict:
    from ..evaluation import results_to_jsonable
    return results_to_jsonable({CLEAN_CONDITION: result})['clean']


def run_sweep(config: str, checkpoint: str, *,
              on_condition: Optional[Callable[[Condition, dict], None]] = None,
              **kwargs) -> SweepOutcome:
    """``RobustnessSweep(config, checkpoint, **kwargs).run(on_condition)``."""
    return RobustnessSweep(config, checkpoint, **kwargs).run(on_condition)


# ----------------------------------------------------------------------------- merging

def merge_sweeps(work_dirs: Sequence[str], out_dir: str, plots: bool = True):
    """Merge the outputs of the shards of one sweep (``shard_<i>-of-<n>.json`` and their
    condition files, in one or several work dirs) and write the report into ``out_dir``.

    Raises:
        SweepError: no manifest, shards of different sweeps, missing shards or files.
    """
    from ..evaluation import ConditionResult, merge_results, write_report
    from ..evaluation.robustness import parse_condition_key
    manifests = []
    for work_dir in work_dirs:
        if not osp.isdir(work_dir):
            raise SweepError(f'work dir {work_dir!r} does not exist')
        for path in sorted(glob(osp.join(work_dir, 'shard_*-of-*.json'))):
            with open(path, encoding='utf-8') as handle:
                data = json.load(handle)
            if data.get('format') == SHARD_FORMAT:
                manifests.append((work_dir, path, data))
    if not manifests:
        raise SweepError(f'no shard manifest (shard_<i>-of-<n>.json) in {list(work_dirs)}')
    first = manifests[0][2]
    same = ('task', 'protocol', 'corruptions', 'severities', 'fingerprint', 'num_conditions')
    for _, path, data in manifests[1:]:
        differing = [k for k in same if data.get(k) != first.get(k)]
        if data['shard'][1] != first['shard'][1]:
            differing.append('shard count')
        if differing:
            raise SweepError(f'{path} belongs to another sweep than {manifests[0][1]} '
                             f'(differs in {differing})')
    count = first['shard'][1]
    present = {data['shard'][0] for _, _, data in manifests}
    missing = sorted(set(range(count)) - present)
    if missing:
        raise SweepError(f'shards {missing} of {count} have no manifest; run them first')
    partials, seen, records = [], set(), {}
    for work_dir, path, data in manifests:
        if data['shard'][0] in seen:
            continue  # the same shard in two work dirs: take the first
        seen.add(data['shard'][0])
        partial = {}
        for key, relative in data['conditions'].items():
            file = osp.join(work_dir, relative)
            if not osp.isfile(file):
                raise SweepError(f'{path} lists {file}, which does not exist')
            with open(file, encoding='utf-8') as handle:
                record = json.load(handle)
            partial[key] = ConditionResult.from_dict(record['result'])
            records[parse_condition_key(key, first['protocol'])] = record
        partials.append(partial)
    merged = merge_results(partials, protocol=first['protocol'], task=first['task'])
    if len(merged) != first['num_conditions']:
        raise SweepError(f'the shards hold {len(merged)} conditions, the sweep has '
                         f'{first["num_conditions"]}')
    return write_report(out_dir, merged, protocol=first['protocol'], task=first['task'],
                        expected_severities=first['severities'],
                        provenance=first['provenance'], plots=plots,
                        calibration_details=_calibration_details(records))
