"""The random corruptions evaluated with several corruption seeds, folded into one
result per condition.

A sweep with ``corruption_seeds=S`` evaluates every random corruption (noise, stripes,
clouds, translations) at the seeds ``seed .. seed + S - 1``. The summary's cell of such a
condition is the *mean over its seeds* of each metric (the task metric, every per-class
value, every extra metric): the estimate of the model's score under the corruption
rather than under one draw of it. :func:`fold_seeds` computes those means and the
``corruption_seeds`` block of ``results.json``: the seeds, the corruptions evaluated with
several, and per condition each seed's value, the standard deviation over the seeds
(``ddof=1``) and their range.

The intervals of such a sweep resample the seeds as well as the images
(:mod:`~reobench_mm.evaluation.functional.seed_average`); the paired comparison of two
models averages both over the same seeds, whose draws are identical for both.
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from reobench_corruptions.condition import Condition
from .results import (ConditionResult, RobustnessSummary, as_condition_result,
                      check_condition, mean)
from .tables import MISSING, fmt_number, markdown_table

__all__ = ['SEEDS_STATISTIC', 'group_by_seed', 'mean_result', 'fold_seeds',
           'seed_condition_label', 'seed_lines']

SEEDS_STATISTIC = 'mean over the corruption seeds'


def seed_condition_label(condition: Condition) -> str:
    """``'cloud@3 (seed 1)'``: a condition of a seed after the first, for messages."""
    return f'{condition.key} (seed {condition.seed})'


def group_by_seed(seed_items: Mapping[Condition, Any], protocol: str = 'reobench'
                  ) -> Dict[Condition, Dict[int, Any]]:
    """``condition (as the analysis keys it) -> seed -> item`` of items keyed by their
    seeded conditions.

    Raises:
        TypeError: a key that is not a :class:`Condition` (its seed is needed).
        ValueError: a clean condition (it has one draw), or a condition and seed given
            twice.
    """
    out: Dict[Condition, Dict[int, Any]] = {}
    for condition, item in seed_items.items():
        if not isinstance(condition, Condition):
            raise TypeError(f'the results of further corruption seeds are keyed by their '
                            f'Condition (with its seed), got {condition!r}')
        if condition.is_clean:
            raise ValueError('the clean condition has no corruption draws to repeat with '
                             'other seeds')
        key = check_condition(condition, protocol)
        seeds = out.setdefault(key, {})
        if condition.seed in seeds:
            raise ValueError(f'{seed_condition_label(condition)} is given twice')
        seeds[condition.seed] = item
    return out


def mean_result(results: Sequence[ConditionResult]) -> ConditionResult:
    """The mean of each metric of ``results`` (the task metric, the per-class values
    of the classes all have, the extra metrics all have)."""
    results = list(results)
    if len(results) == 1:
        return results[0]
    per_class = None
    if all(r.per_class is not None for r in results):
        classes = [k for k in results[0].per_class
                   if all(k in r.per_class for r in results)]
        per_class = {k: mean(r.per_class[k] for r in results) for k in classes}
    keys = [k for k in results[0].extra if all(k in r.extra for r in results)]
    return ConditionResult(mean(r.value for r in results), per_class,
                           {k: mean(r.extra[k] for r in results) for k in keys})


def _spread(values: List[float]) -> Tuple[float, float]:
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) != len(values):
        return math.nan, math.nan
    return statistics.stdev(values), max(values) - min(values)


def fold_seeds(results: Mapping[Condition, Any], seed_results: Mapping[Condition, Any],
               seed: int, protocol: str = 'reobench', task: Optional[str] = None
               ) -> Tuple[Dict[Condition, Any], Optional[Dict[str, Any]]]:
    """``results`` (the first seed's, keyed as :func:`~reobench_mm.analysis.results.aggregate`
    takes them) with every condition of ``seed_results`` (further seeds' results, keyed
    by their seeded :class:`Condition`) replaced by its mean over the seeds, and the
    ``corruption_seeds`` block (None without further seeds).

    Args:
        seed: the corruption seed of ``results``.

    Raises:
        ValueError: a further seed of a condition ``results`` lacks, or equal to
            ``seed``; seeds of one corruption whose severities have other seed sets.
    """
    groups = group_by_seed(seed_results, protocol)
    if not groups:
        return dict(results), None
    first = {check_condition(c, protocol): (c, r) for c, r in results.items()}
    folded: Dict[Condition, Any] = {original: result for original, result in first.values()}
    block: Dict[str, Any] = {}
    seeds_of: Dict[str, Tuple[int, ...]] = {}
    for condition in sorted(groups):
        if condition not in first:
            raise ValueError(f'results of further corruption seeds of {condition.key} but '
                             'none of its first seed')
        extra = groups[condition]
        if seed in extra:
            raise ValueError(f'{condition.key}: the further corruption seeds repeat the '
                             f'first seed {seed}')
        seeds = (seed, ) + tuple(sorted(extra))
        if seeds_of.setdefault(condition.corruption, seeds) != seeds:
            raise ValueError(f'{condition.corruption}: its severities were evaluated with '
                             f'other corruption seeds ({list(seeds_of[condition.corruption])} '
                             f'and {list(seeds)})')
        original, result = first[condition]
        per_seed = [as_condition_result(result, task)] + \
            [as_condition_result(extra[s], task) for s in seeds[1:]]
        folded[original] = mean_result(per_seed)
        values = [r.value for r in per_seed]
        sd, spread = _spread(values)
        block[condition.key] = {'seeds': {str(s): v for s, v in zip(seeds, values)},
                                'mean': folded[original].value, 'sd': sd, 'range': spread}
    all_seeds = sorted({s for seeds in seeds_of.values() for s in seeds})
    return folded, {'statistic': SEEDS_STATISTIC, 'seeds': all_seeds,
                    'corruptions': list(seeds_of), 'conditions': block}


def seed_lines(summary: RobustnessSummary) -> List[str]:
    """The report's section on the corruption seeds: which corruptions were evaluated
    with which seeds, and per severity the standard deviation of the metric over the
    seeds (empty with one seed)."""
    block = summary.corruption_seeds
    if not block:
        return []
    seeds = ', '.join(map(str, block['seeds']))
    lines = ['## Corruption seeds', '',
             f'The random corruptions ({", ".join(block["corruptions"])}) were evaluated '
             f'with the corruption seeds {seeds}: their cells, means and every number '
             f'that averages them are the {SEEDS_STATISTIC}. Standard deviation of '
             f'{summary.metric} over the seeds (each seed evaluated on all images), and its '
             'largest range:', '']
    severities = list(summary.severities)
    rows = []
    for name in block['corruptions']:
        entries = [block['conditions'].get(f'{name}@{s}') for s in severities]
        ranges = [e['range'] for e in entries if e is not None]
        rows.append([name] + [MISSING if e is None else fmt_number(e['sd']) for e in entries]
                    + [fmt_number(max(ranges)) if ranges else MISSING])
    lines += markdown_table(['Corruption'] + [f'sd {s}' for s in severities]
                            + ['largest range'], rows, align_left=1)
    return lines + ['']
