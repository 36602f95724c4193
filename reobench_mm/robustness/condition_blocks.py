"""The result blocks of a run from its condition records: what the report holds of the
conditions that are not corruptions of the test set (the shift sets', the attacks'),
built the same way by the test loop (:meth:`RobustnessTestLoop.write_report`) and by the
merge of shards (:func:`~reobench_mm.robustness.shards.merge_sweeps`).

One builder per result block of :data:`~reobench_mm.analysis.result_blocks.RESULT_BLOCKS`
(:data:`BLOCK_BUILDERS`); :func:`blocks_of` builds every block the records have.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional

from ..analysis.attack_table import attack_block
from ..analysis.shift_table import shift_block
from .attack_sets import attack_row
from .shift_sets import shift_row

__all__ = ['BLOCK_BUILDERS', 'blocks_of']

Records = Mapping[Any, Mapping[str, Any]]


def _shifts(clean: Mapping[str, Any], clean_stats: Any, records: Records,
            stats: Mapping[Any, Any], metric: str, intervals: Mapping[str, Any]) -> dict:
    rows = [shift_row(c, r['result']['value'], stats.get(c),
                      None if stats.get(c) is None else stats[c].num_images)
            for c, r in records.items()]
    return shift_block(rows, id_value=clean['result']['value'], metric=metric,
                       id_stats=clean_stats, **intervals)


def _attacks(clean: Mapping[str, Any], clean_stats: Any, records: Records,
             stats: Mapping[Any, Any], metric: str, intervals: Mapping[str, Any]) -> dict:
    rows = [attack_row(c, r['result']['value'], stats.get(c), r.get('attack_run'))
            for c, r in records.items()]
    return attack_block(rows, clean_value=clean['result']['value'], metric=metric,
                        clean_stats=clean_stats, **intervals)


#: result block name -> ``(clean record, clean statistics, the block's records,
#: statistics by condition, metric name, interval settings) -> block``
BLOCK_BUILDERS: Dict[str, Callable[..., dict]] = {'shifts': _shifts, 'attacks': _attacks}


def blocks_of(by_block: Mapping[str, Records], clean: Mapping[str, Any], clean_stats: Any,
              stats: Mapping[Any, Any], metric: str, intervals: Mapping[str, Any]
              ) -> Dict[str, Optional[dict]]:
    """Every result block the records have (``by_block``: block name -> its conditions'
    records, as :func:`~reobench_mm.robustness.conditions.records_by_block` splits them),
    from the clean condition's record and per-image statistics, the statistics of the
    block's conditions (None where a record has none: no intervals), the task metric's
    display name and the run's interval settings (``resamples``, ``level``, ``seed``:
    :attr:`~reobench_mm.robustness.options.RobustnessOptions.interval_settings`)."""
    return {name: BLOCK_BUILDERS[name](clean, clean_stats, records, stats, metric, intervals)
            for name, records in by_block.items() if records}
