"""What a robustness test run writes at its end: the report from the condition records
(``results.json``, ``results.csv``, ``report.md``, the plots), or, for a shard, the shard
manifest.

:class:`RunOutputs` reads the records from the run's
:class:`~reobench_mm.robustness.store.ConditionStore`, splits them by result block
(:func:`~reobench_mm.robustness.conditions.records_by_block`), builds the shift sets' and
attacks' blocks (:func:`~reobench_mm.robustness.conditions.blocks_of`) and writes
them with the provenance of the run's :class:`~reobench_mm.robustness.run_identity.
RunIdentity`.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional, Sequence

from mmengine.logging import print_log

from reobench_corruptions.condition import Condition
from ..analysis.report import Report, write_report
from ..analysis.results import ConditionResult
from ..engine.workdir import write_error
from ..evaluation.keys import Task
from .conditions.kinds import blocks_of, records_by_block
from .run_identity import RunIdentity
from .shards import write_shard_manifest
from .store import ConditionStore, calibration_details, condition_record_name
from .switching import ConditionSwitch

__all__ = ['RunOutputs']


class RunOutputs:
    """Writes the report or the shard manifest of a robustness test run.

    Args:
        work_dir: the output folder.
        store: the run's condition records.
        identity: the run's identity (the provenance, the fingerprint).
        options: the run's options (its plan, plots and interval settings).
        task: the task.
        switch: the run's condition switch (the thumbnails of the worst cases are
            predicted again under their conditions); ``model``: the model.
    """

    def __init__(self, work_dir: str, store: ConditionStore, identity: RunIdentity,
                 options: Any, task: Task, switch: ConditionSwitch, model: Any) -> None:
        self.work_dir, self.store, self.identity = work_dir, store, identity
        self.options, self.plan, self.task = options, options.plan, task
        self.switch, self.model = switch, model

    def write_report(self, records: Optional[Dict[Condition, dict]] = None) -> Report:
        """Write ``results.json``, ``results.csv``, ``report.md`` and the plots from the
        condition records (default: read from the store).

        Raises:
            SweepError: a condition file is missing or malformed, or a report file cannot
                be written (named, with the reason).
        """
        if records is None:
            records = self.store.load(self.options.all_conditions)
        plan, store = self.plan, self.store
        records, by_block = records_by_block(records)
        first = {c: r for c, r in records.items() if not plan.is_extra_seed(c)}
        further = {c: r for c, r in records.items() if plan.is_extra_seed(c)}
        try:
            return write_report(
                self.work_dir,
                {c: ConditionResult.from_dict(r['result']) for c, r in first.items()},
                protocol=plan.protocol, task=self.task.results_name,
                expected_severities=plan.severities,
                provenance=self.identity.provenance(self.work_dir),
                plots=self.options.plots, calibration_details=calibration_details(first),
                seen_in_training=self.identity.seen_in_training,
                image_stats=store.image_stats(first),
                intervals=self.options.interval_settings,
                image_files=store.image_files(first),
                worst_case_panels=self._worst_case_panels,
                seed_results={c: ConditionResult.from_dict(r['result'])
                              for c, r in further.items()},
                corruption_seed=plan.seed, seed_image_stats=store.image_stats(further),
                seed_image_files=store.image_files(further),
                blocks=self._blocks(first[plan.clean], by_block))
        except OSError as error:
            raise write_error(error.filename or f'the report in {self.work_dir}',
                              error) from None

    def _blocks(self, clean: dict, by_block: Dict[str, Dict[Any, dict]]) -> Dict[str, dict]:
        """The result blocks of the shift sets' and attacks' records
        (:func:`~reobench_mm.robustness.conditions.blocks_of`)."""
        clean_condition = self.plan.clean
        stats = self.store.image_stats(
            {clean_condition: clean,
             **{c: r for b in by_block.values() for c, r in b.items()}})
        return blocks_of(by_block, clean, stats[clean_condition], stats,
                         self.task.metric_name, self.options.interval_settings)

    def _worst_case_panels(self, cases: dict) -> list:
        """Thumbnails of the worst cases: the model run again on each under its
        condition (:mod:`~reobench_mm.robustness.worst_case_images`)."""
        from .worst_case_images import worst_case_panels, worst_case_picks
        switch = self.switch
        try:
            return worst_case_panels(worst_case_picks(cases), switch.test.dataloader.dataset,
                                     self.model,
                                     lambda c: switch.activate(c, in_pipeline=True),
                                     self.plan.condition, self.task.results_name)
        except Exception as error:  # a picture is not worth the report: say so, go on
            print_log(f'no thumbnails of the worst cases ({type(error).__name__}: {error})',
                      logger='current', level=logging.WARNING)
            return []
        finally:
            switch.reset()

    def write_manifest(self, conditions: Sequence[Condition]) -> str:
        """Write the shard manifest ``shard_<i>-of-<n>.json`` of the shard's
        ``conditions``; returns its path."""
        plan = self.plan
        return write_shard_manifest(
            self.work_dir, plan.shard, task=self.task.results_name, protocol=plan.protocol,
            corruptions=plan.corruptions, severities=plan.severities,
            condition_files={c.key: condition_record_name(c) for c in conditions
                             if not plan.is_extra_seed(c)},
            seed_condition_files={c.tag: condition_record_name(c) for c in conditions
                                  if plan.is_extra_seed(c)},
            num_conditions=len(self.options.all_conditions),
            fingerprint=self.identity.fingerprint,
            provenance=self.identity.provenance(self.work_dir))
