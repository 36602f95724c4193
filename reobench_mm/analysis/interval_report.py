"""The report's section on the uncertainty of its numbers (the bootstrap intervals of
:mod:`~reobench_mm.analysis.intervals`)."""
from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence

from .results import RobustnessSummary
from .tables import MISSING, fmt_number, markdown_table

__all__ = ['interval_lines']


def _bounds(interval: Optional[Sequence[float]], digits: int = 2, scale: float = 1.0) -> str:
    if not interval:
        return MISSING
    return f'[{fmt_number(scale * interval[0], digits)}, {fmt_number(scale * interval[1], digits)}]'


def interval_lines(summary: RobustnessSummary) -> List[str]:
    """The report's section on the uncertainty of its numbers: the bootstrap intervals
    of Clean, each corruption's mean, Avg, ΔTP, mPC, rPC and the calibration means, or
    why there are none."""
    intervals = summary.intervals
    if intervals is None:
        return []
    if not intervals.get('available'):
        return ['## Uncertainty', '', f'No intervals: {intervals.get("reason")}.', '']
    level = f'{100 * intervals["level"]:g} %'
    lines = [f'## Uncertainty ({level} intervals)', '',
             f'Percentile bootstrap over the {intervals["images"]} test images '
             f'({intervals["resamples"]} resamples, seed {intervals["seed"]}); every '
             'condition is recomputed on the same resamples, so the intervals of '
             'differences (Drop, ΔTP) respect the pairing. They show how much each number '
             'depends on which test images were drawn; ' + _seeds_text(intervals), '']
    rows = [['Clean', fmt_number(summary.clean), _bounds(intervals['clean'])]]
    for name in summary.corruptions:
        block = intervals['per_corruption'][name]
        rows.append([f'{name} (mean)', fmt_number(summary.per_corruption[name]),
                     _bounds(block['mean'])])
    rows += [['Avg', fmt_number(summary.avg), _bounds(intervals['avg'])],
             ['ΔTP', fmt_number(summary.delta_tp), _bounds(intervals['delta_tp'])],
             ['mPC', fmt_number(summary.mpc), _bounds(intervals['mpc'])],
             ['rPC (%)', fmt_number(100 * summary.rpc), _bounds(intervals['rpc'], scale=100)]]
    lines += markdown_table(['Number', summary.metric, level], rows, align_left=1)
    lines += ['']
    severities = list(summary.severities)
    rows = [[name] + [_bounds(intervals['per_corruption'][name]['severities'].get(str(s)))
                      for s in severities] for name in summary.corruptions]
    lines += [f'Per severity ({level} intervals of {summary.metric}):', '']
    lines += markdown_table(['Corruption'] + [str(s) for s in severities], rows,
                            align_left=1)
    lines += ['']
    extra = intervals.get('extra') or {}
    if extra:
        rows = [[f'`{key}`', _bounds(block['clean'], 4), _bounds(block['avg'], 4),
                 _bounds(block['avg_minus_clean'], 4)] for key, block in extra.items()]
        lines += [f'Calibration ({level} intervals):', '']
        lines += markdown_table(['Metric', 'Clean', 'Avg', 'Avg − Clean'], rows)
        lines += ['']
    return lines


def _seeds_text(intervals: Mapping[str, Any]) -> str:
    """Which intervals include the corruptions' own randomness."""
    seeds = intervals.get('corruption_seeds')
    if not seeds:
        return "they do not include the corruptions' own randomness (one corruption seed)."
    listed = ', '.join(map(str, seeds['seeds']))
    return (f'each resample also draws the corruption seeds ({listed}) '
            'of the random corruptions with replacement, so the intervals of their cells '
            f'and means ({", ".join(seeds["corruptions"])}) and of every number that '
            'averages them (Avg, ΔTP, mPC, rPC, their categories, the calibration means) '
            "include the corruptions' own randomness too; those of Clean and of the other "
            'corruptions (one draw each) do not.')
