"""What a robustness run is, for its records and its report: where it comes from (the
config file, the checkpoint, the command-line overrides), whether its checkpoint fits the
model, the fingerprint of its inputs and the provenance block of its report.

One :class:`RunIdentity` per :class:`~reobench_mm.robustness.test_loop.RobustnessTestLoop`;
a driver that builds the runner itself (:class:`~reobench_mm.robustness.sweep.
RobustnessSweep`, ``tools/robustness_test.py``) tells it the source with
:meth:`RunIdentity.set_source` and reads the fingerprint from it.
"""
from __future__ import annotations

import copy
import os.path as osp
from typing import Any, Dict, Mapping, Optional, Sequence

from reobench_corruptions.condition import Condition
from ..analysis.report import make_provenance
from ..engine import checkpoint as _checkpoint
from ..evaluation.keys import Task
from ..fileio import file_sha256, json_round_trip
from .conditions.kinds import CONDITION_KINDS
from .fingerprint import dataset_fingerprint, result_options, run_fingerprint
from .conditions.released import FILES_SOURCE
from .shifted_data import ConditionSources

__all__ = ['RunIdentity']


class RunIdentity:
    """The source, checkpoint check, fingerprint and provenance of one robustness run.

    Args:
        runner: the runner (its config, its model, the checkpoint it loads).
        options: the run's :class:`~reobench_mm.robustness.options.RobustnessOptions`.
        task: the task.
        loop: the loop's type name and ``fp16`` (they stand for the loop's settings in the
            fingerprinted config).
        dataloader_cfg: the test dataloader config as the loop placed it (None for a built
            dataloader).
        dataset: the test dataset (its samples, its classes).
        sources: where the conditions' images come from (a shift set's data and a
            files' set join their records' fingerprints).
        temperature: the run's temperature fit, or None.
        seen_in_training: the corruptions of the protocol the model saw in training.
    """

    def __init__(self, runner: Any, options: Any, task: Task, loop: Mapping[str, Any],
                 dataloader_cfg: Optional[dict], dataset: Any, sources: ConditionSources,
                 temperature: Any, seen_in_training: Sequence[str]) -> None:
        self.runner, self.options, self.task = runner, options, task
        self.loop = dict(loop)
        self.dataloader_cfg, self.dataset = dataloader_cfg, dataset
        self.sources, self.temperature = sources, temperature
        self.seen_in_training = seen_in_training
        self.config: Optional[str] = getattr(runner.cfg, 'filename', None)
        self._checkpoint: Optional[str] = None
        self.cfg_options: Dict[str, Any] = {}
        #: whether the checkpoint was loaded strictly already (by a driver, or here)
        self.loaded = False
        self._fingerprint: Optional[Dict[str, Any]] = None

    def set_source(self, *, config: Optional[str] = None, checkpoint: Optional[str] = None,
                   cfg_options: Optional[Mapping[str, Any]] = None,
                   checkpoint_loaded: bool = False) -> None:
        """The config file, the checkpoint, the command-line overrides (recorded in the
        report) and whether the checkpoint was already loaded strictly, for drivers that
        build the Runner themselves."""
        self.config = config or self.config
        self._checkpoint = checkpoint
        self.cfg_options = dict(cfg_options or {})
        self.loaded = bool(checkpoint_loaded)
        self._fingerprint = None

    @property
    def checkpoint(self) -> Optional[str]:
        """The checkpoint of the run: the driver's, or the one the runner loads."""
        return self._checkpoint or getattr(self.runner, '_load_from', None)

    def check_checkpoint(self) -> None:
        """Check that the runner's checkpoint fits the model (loading it again strictly:
        the same weights) when nobody did.

        Raises:
            CheckpointMismatchError: missing, unexpected or mis-shaped keys, or other
                classes than the test set's.
        """
        if self.loaded or not self.options.strict_checkpoint or self.checkpoint is None:
            return
        try:
            checkpoint = _checkpoint.load_checkpoint_strict(self.runner.model, self.checkpoint,
                                                            config=self.config)
        except _checkpoint.CheckpointMismatchError as error:
            raise _checkpoint.CheckpointMismatchError(
                f'{error} (test_cfg.strict_checkpoint=False evaluates it anyway)',
                error.mismatch) from None
        _checkpoint.check_checkpoint_classes(checkpoint, self.dataset.metainfo,
                                             self.checkpoint)
        self.loaded = True

    def _fingerprinted_config(self) -> dict:
        """The resolved config as it determines the numbers: the test dataloader as the
        loop built it, the loop's settings instead of its bookkeeping options, no
        checkpoint path (the checkpoint part covers it)."""
        data = copy.deepcopy(self.runner.cfg.to_dict())
        if self.dataloader_cfg is not None:
            data['test_dataloader'] = copy.deepcopy(self.dataloader_cfg)
        data['test_cfg'] = dict(self.loop)
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
            data = dataset_fingerprint(self.dataset)
            if self.temperature is not None:
                fitted_on = self.temperature.fingerprint_data()
                if fitted_on is not None:
                    data['val'] = fitted_on
            self._fingerprint = run_fingerprint(
                self._fingerprinted_config(), task=self.task.name,
                checkpoint_sha256=checkpoint_sha256, cfg_options=self.cfg_options,
                options=self.options.fingerprint_part(), data=data)
        return self._fingerprint

    def condition_fingerprint(self, condition: Condition) -> Dict[str, Any]:
        """The fingerprint of one condition's record: :attr:`fingerprint`, and for a
        shift set's condition or a corruption read from files also that data and its
        dataset config."""
        return self.sources.fingerprint(self.fingerprint, condition)

    def source_of(self, condition: Condition) -> Optional[str]:
        """Where a condition's images are read from, when not corrupted on the fly."""
        files = self.options.corruption_files
        return FILES_SOURCE if files is not None and files.reads(condition) else None

    def recorded_temperature(self, work_dir: str) -> Optional[dict]:
        """The fitted temperature (temperature, source, NLL before/after), or None."""
        if self.temperature is None:
            return None
        return self.temperature.recorded(work_dir, self.fingerprint)

    def provenance(self, work_dir: str) -> dict:
        """The provenance block of the report and of a shard manifest."""
        options, config = self.options, self.config
        return make_provenance(
            model=osp.splitext(osp.basename(config))[0] if config
            else getattr(self.runner, 'experiment_name', None), task=self.task.results_name,
            config=config, checkpoint=self.checkpoint,
            checkpoint_sha256=self.fingerprint['checkpoint_sha256'], seed=options.seed,
            protocol=options.protocol,
            extra=json_round_trip(dict(corruptions=options.corruptions,
                                       severities=options.severities, border=options.border,
                                       cfg_options=result_options(self.cfg_options),
                                       calibration=options.calibration,
                                       temperature=self.recorded_temperature(work_dir),
                                       seen_in_training=self.seen_in_training,
                                       intervals=options.interval_settings,
                                       evaluated_images=len(self.dataset),
                                       **{k.option: k.to_dict(options.entries(k))
                                          for k in CONDITION_KINDS if k.to_dict},
                                       precision=options.precision,
                                       corruption_device=options.corruption_device,
                                       corruption_files=None if options.corruption_files
                                       is None else options.corruption_files.to_dict(),
                                       read_from_files=[c.key for c in options.all_conditions
                                                        if self.source_of(c)],
                                       fingerprint=self.fingerprint)))
