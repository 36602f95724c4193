"""Robustness sweep: one model, evaluated clean and under every corruption × severity.

:class:`RobustnessSweep` (and :func:`run_sweep`, ``tools/robustness_test.py``) is a thin
driver over :class:`~reobench_mm.robustness.test_loop.RobustnessTestLoop`, the test loop that
does the evaluation in every entry point: it makes the config's ``test_cfg`` that loop,
builds the MMEngine ``Runner`` and the model once, loads the checkpoint strictly (every
key must fit) and runs the loop, which switches the ``ApplyCorruption`` step of the test
pipeline for each condition. What the driver adds: every input checked before anything is
written, the work dir's lock taken before the Runner is built, and a refused run leaving
the work dir as it found it.

What it evaluates (the selection, the conditions, their shards) is
:mod:`reobench_mm.robustness.plan`; the files it writes and checks are
:mod:`reobench_mm.robustness.store`. Files under the work dir:

- ``conditions/<tag>.json``: one per finished condition (the
  :class:`~reobench_corruptions.condition.Condition`'s ``tag``, e.g. ``clean``,
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
  first, so it belongs to shard 0). :func:`~reobench_mm.robustness.shards.merge_sweeps`
  merges the shards' outputs and writes the report.
- ``.sweep.lock`` while a run is in progress
  (:class:`~reobench_mm.engine.workdir.WorkDirLock`): a second sweep into the same work
  dir is refused at once.

A run that is refused (a bad or non-fitting checkpoint, a held lock, files of other
inputs) leaves the work dir as it found it; a file that cannot be written (a full disk,
lost permissions) is a :class:`SweepError` naming it, and the conditions finished before
it are kept for the rerun.
"""
from __future__ import annotations

import os.path as osp
import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

from mmengine.config import ConfigDict

from ..analysis.report import Report
from reobench_corruptions.condition import Condition
from ..engine import checkpoint as _checkpoint
from ..engine.dataloader_workers import release_dataloader_workers
from ..engine.workdir import (WorkDirLock, WorkDirSnapshot, check_writable,
                              forget_runner_instances, remove_empty_dirs,
                              wait_for_fresh_log_folder)
from ..errors import FingerprintMismatchError, SweepError, WorkDirLockedError
from ..evaluation.keys import get_task
from ..utils.config import prepare_test_config
from .evaluators import calibration_metric_cfgs
from .held_out import check_held_out, seen_in_training
from .options import SWEEP_OPTIONS, RobustnessOptions, with_config_options
from .conditions.kinds import coerce_condition
from .plan import default_sweep_work_dir
from .store import CONDITIONS_DIR, condition_record_name
from .test_loop import RobustnessTestLoop, SweepOutcome

__all__ = [
    'CheckpointMismatchError', 'FingerprintMismatchError', 'SweepOutcome', 'RobustnessSweep',
    'run_sweep'
]

_LOOP = 'RobustnessTestLoop'


class CheckpointMismatchError(SweepError, _checkpoint.CheckpointMismatchError):
    """The checkpoint does not fit the model of the config (a :class:`SweepError` and a
    :class:`reobench_mm.engine.checkpoint.CheckpointMismatchError`)."""


class RobustnessSweep:
    """Evaluate one checkpoint clean and under corruptions, building the model once.

    Args:
        config: config file of the model (segmentation or rotated detection).
        checkpoint: checkpoint file (loaded with strict key checking unless
            ``strict_checkpoint=False``).
        work_dir: the output folder (the loop's ``out_dir``; default
            ``work_dirs/robustness/<config stem>``).
        cfg_options: config overrides (as ``--cfg-options``).
        launcher: ``'none'``, ``'pytorch'``, ``'slurm'`` or ``'mpi'`` (MMEngine's; the test
            data is split over processes by the config's sampler, as MMEngine does).
        options: a :class:`~reobench_mm.robustness.options.RobustnessOptions`, or
        **values: the options as keywords (``corruptions=[...]``, ``severities=[...]``,
            ...; every option but ``out_dir``), checked there.

    All input errors (:class:`SweepError`, ``FileNotFoundError``) are raised by the
    constructor, before anything is written, except those about the checkpoint file
    (:class:`~reobench_mm.engine.checkpoint.CheckpointError`) and its fit
    (:class:`CheckpointMismatchError`), raised by :meth:`build`, and those about the
    work dir's state (:class:`WorkDirLockedError`, :class:`FingerprintMismatchError`),
    raised by :meth:`run`; a refused :meth:`run` removes what it created.
    """

    def __init__(self, config: str, checkpoint: str, *, work_dir: Optional[str] = None,
                 cfg_options: Optional[dict] = None, launcher: str = 'none',
                 options: Optional[RobustnessOptions] = None, **values: Any) -> None:
        self.options = _sweep_options(options, values)
        self.plan = self.options.plan
        for what, path in (('config', config), ('checkpoint', checkpoint)):
            if osp.isdir(path):
                raise SweepError(f'{what} {path!r} is a folder, not a {what} file')
            if not osp.isfile(path):
                raise FileNotFoundError(f'{what} {path!r} does not exist')
        self.config, self.checkpoint = config, checkpoint
        self.cfg_options = dict(cfg_options or {})
        self.launcher = launcher
        self.work_dir = work_dir or default_sweep_work_dir(config)
        self.options = self.options.replace(out_dir=self.work_dir)

        setup = prepare_test_config(config, checkpoint, work_dir=self.work_dir,
                                    cfg_options=self.cfg_options, launcher=launcher,
                                    robustness=True)
        cfg = setup.cfg
        if self.options.calibration:  # refuses temperature scaling for detection
            calibration_metric_cfgs(get_task(setup.task), self.options.temperature_scaling)
        # refused here, before anything is built or written
        check_held_out(self.plan.corruptions,
                       seen_in_training(cfg, self.plan.protocol,
                                        self.options.seen_corruptions),
                       self.options.held_out_only)
        fp16 = (cfg.get('test_cfg') or {}).get('fp16', False)
        # options without a flag, from the config
        self.options = with_config_options(self.options, cfg.get('test_cfg') or {})
        cfg.test_cfg = ConfigDict(type=_LOOP, fp16=fp16, **self.options.to_dict())
        cfg.load_from = None  # loaded strictly by build()
        # the loop shows its own progress over conditions, not one bar per condition
        cfg.custom_hooks = [h for h in cfg.get('custom_hooks') or []
                            if h.get('type') not in ('ProgressBarHook',
                                                     'reobench_mm.ProgressBarHook')]
        cfg.resume = False
        if launcher == 'none' and cfg.get('experiment_name') is None:
            cfg.experiment_name = f'robustness_{uuid.uuid4().hex[:8]}'
        # a visualizer of its own: MMEngine keeps one instance per name in a process, so
        # under the toolboxes' shared name ('visualizer') a later Runner would write into
        # this run's log folder (removed when the run is refused)
        if isinstance(cfg.get('visualizer'), dict):
            cfg.visualizer.name = f'robustness_visualizer_{uuid.uuid4().hex[:8]}'
        self.cfg, self.task = cfg, setup.task
        self.conditions_dir = osp.join(self.work_dir, CONDITIONS_DIR)
        self.runner = None
        self.loop: Optional[RobustnessTestLoop] = None
        self._lock = WorkDirLock(self.work_dir)
        self._created_dirs = check_writable(self.conditions_dir)

    # ------------------------------------------------------------------ what it evaluates
    @property
    def conditions(self) -> List[Any]:
        """The conditions of this run (the shard's, or all; the shift sets' after the
        corruptions)."""
        return self.options.conditions

    @property
    def all_conditions(self) -> List[Any]:
        return self.options.all_conditions

    def condition_file(self, condition: Any) -> str:
        return osp.join(self.work_dir,
                        condition_record_name(coerce_condition(self.plan, condition)))

    @property
    def decode_caches(self) -> list:
        return [] if self.loop is None else self.loop.decode_caches

    @property
    def fingerprint(self) -> Dict[str, Any]:
        """The inputs' fingerprint (builds the runner)."""
        self.build()
        return self.loop.identity.fingerprint

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
        (:func:`~reobench_mm.engine.checkpoint.load_checkpoint_strict`).

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
        wait_for_fresh_log_folder(self.work_dir)
        runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
        loop = runner.test_loop
        runner.call_hook('before_run')
        runner.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        try:
            _checkpoint.load_checkpoint_strict(runner.model, self.checkpoint,
                                               config=self.config, checkpoint=checkpoint,
                                               strict=self.options.strict_checkpoint)
        except _checkpoint.CheckpointMismatchError as error:
            raise CheckpointMismatchError(str(error), error.mismatch) from None
        runner.logger.info(f'Load checkpoint from {self.checkpoint}')
        loop.set_source(config=self.config, checkpoint=self.checkpoint,
                        cfg_options=self.cfg_options, checkpoint_loaded=True,
                        lock=self._lock)
        self.runner, self.loop = runner, loop

    def evaluate(self, condition: Any):
        """Evaluate one condition (nothing written): ``(metrics, seconds)``."""
        self.build()
        return self.loop.evaluate(condition)

    # ------------------------------------------------------------------ run
    @contextmanager
    def _work_dir_guard(self, main: bool) -> Iterator[None]:
        """Hold the work dir's lock (rank 0, taken before the Runner is built) for a run,
        and put the work dir back as it was when the run fails before it evaluated
        anything: the files and folders that appeared are removed (the Runner's log
        folder, its dumped config, a temperature file; log files closed first), a dumped
        config that was overwritten is restored, and empty folders the sweep created are
        removed."""
        if not osp.isdir(self.conditions_dir):  # removed by an earlier refused run
            self._created_dirs = check_writable(self.conditions_dir)
        dumped = [osp.basename(self.cfg.filename)] if self.cfg.filename else []
        snapshot = WorkDirSnapshot(self.work_dir, keep=dumped) if main else None
        undo = False
        try:
            if main:
                self._lock.acquire()
            yield
        except BaseException as error:
            undo = main and not (self.loop is not None and self.loop.evaluating) and \
                not isinstance(error, WorkDirLockedError)
            if undo:
                for name in snapshot.new_entries():
                    forget_runner_instances(osp.join(self.work_dir, name))
                snapshot.restore(spare=[osp.basename(self._lock.path)])
            raise
        finally:
            self._lock.release()
            if undo:
                remove_empty_dirs(self._created_dirs)

    def run(self, on_condition: Optional[Callable[[Condition, dict], None]] = None
            ) -> SweepOutcome:
        """Run the robustness test loop: evaluate the conditions not yet finished, then
        write the report (or the shard manifest). ``on_condition(condition, record)`` is
        called after each condition file is written.

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
        self._init_distributed()
        main = is_main_process()
        with self._work_dir_guard(main):
            self.build()
            try:
                self.loop.run(on_condition)
                self.runner.call_hook('after_run')
            finally:  # not left to the garbage collector, which waits 5 s per worker
                release_dataloader_workers(self.runner)
        barrier()
        outcome = self.loop.outcome
        outcome.wall_seconds = time.perf_counter() - start
        return outcome

    def write_report(self) -> Report:
        """Write ``results.json``, ``results.csv``, ``report.md`` and the plots from the
        condition files (see ``RobustnessTestLoop.write_report``)."""
        self.build()
        return self.loop.outputs.write_report()


def _sweep_options(options: Optional[RobustnessOptions],
                   values: Mapping[str, Any]) -> RobustnessOptions:
    """The sweep's options: an options object or keyword values (not both); the output
    folder is the sweep's ``work_dir``, not an option."""
    if options is not None:
        if values:
            raise SweepError(f'give the options either as options=RobustnessOptions(...) or '
                             f'as keywords, not both (got options and {sorted(values)})')
        if not isinstance(options, RobustnessOptions):
            raise SweepError(f'options must be a RobustnessOptions, got {type(options)}')
        if options.out_dir is not None:
            raise SweepError('the sweep writes into its work_dir; give work_dir=..., not '
                             'options.out_dir')
        return options
    return RobustnessOptions.create(values, allowed=SWEEP_OPTIONS, owner='RobustnessSweep')


def run_sweep(config: str, checkpoint: str, *,
              on_condition: Optional[Callable[[Condition, dict], None]] = None,
              **arguments: Any) -> SweepOutcome:
    """``RobustnessSweep(config, checkpoint, **arguments).run(on_condition)``."""
    return RobustnessSweep(config, checkpoint, **arguments).run(on_condition)
