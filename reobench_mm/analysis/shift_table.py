"""The real distribution shifts of one run: the ``shifts`` block of ``results.json``, its
report section and its logger keys.

A run with shift sets (other test sets evaluated as conditions, see
``docs/distribution_shifts.md``) compares each with the run's own test set: ID is the
clean metric on the test set, OOD the metric on the shift set, the drop ``ID - OOD`` and
the relative drop ``(ID - OOD) / ID`` (a fraction; the report prints percent). Rows of a
corruption evaluated on top of a set are compared with the same ID value. The block also
gives, per shift type and over all sets (as they are, without corruptions on top), the
mean OOD metric, drop and relative drop.

Intervals: with per-image statistics for the clean test set and a shift set, the ID
value is resampled over the test images exactly as the summary's clean interval is (the
same counts), and the OOD value over the shift set's images, with a stream of its own per
set (``numpy.random.default_rng((seed, 2, crc32(name)))``: adding a set leaves the
others' intervals unchanged); the two image sets are independent, so each resample pairs
one ID and one OOD replicate, and the drop's interval is the percentile interval of their
differences. The rows of one set (as it is, and corruptions on top) share its resamples.
"""
from __future__ import annotations

import math
import zlib
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..evaluation.functional.bootstrap import resample_counts
from ..evaluation.keys import SHIFT_PREFIX
from .intervals import interval_of
from .tables import fmt_estimate

__all__ = ['ShiftRow', 'shift_block', 'shift_lines', 'shift_metric_keys', 'shift_console_lines']

ShiftRow = Dict[str, Any]


def _relative(drop: float, ident: float) -> float:
    return drop / ident if ident else math.nan


def _replicates(row: ShiftRow, counts: Dict[str, np.ndarray], resamples: int,
                seed: int) -> Optional[np.ndarray]:
    stats = row.get('stats')
    if stats is None:
        return None
    name = row['name']
    if name not in counts:
        stream = (int(seed), 2, zlib.crc32(name.encode('utf-8')))
        counts[name] = resample_counts(stats.num_images, resamples, stream)
    return np.asarray(stats.task.values(counts[name]), dtype=np.float64)


def _shared(row: ShiftRow, id_stats: Any, id_counts: Any, counts: Dict[str, np.ndarray],
            resamples: int, seed: int, level: float) -> Dict[str, Any]:
    """The like-for-like part of a row whose set can hold only some of the model's
    classes (``row['compared_classes']``): the ID and OOD metric over those classes from
    the per-image statistics, the drop and relative drop, with paired intervals when
    ``id_counts`` (the ID resamples) are given; for detection, the detections of the other
    classes on the set (no object of the set can match them: not scored, counted)."""
    compared = row['compared_classes']
    out: Dict[str, Any] = dict(compared_classes=list(compared['names']))
    stats = row.get('stats')
    if id_stats is None or stats is None:
        out['shared_note'] = ('no per-image statistics: the ID side over these classes '
                              'needs them')
        return out
    indices = list(compared['indices'])
    id_shared = float(id_stats.task.values(classes=indices)[0])
    ood_shared = float(stats.task.values(classes=indices)[0])
    drop = id_shared - ood_shared
    out.update(id_shared=id_shared, ood_shared=ood_shared, drop_shared=drop,
               relative_drop_shared=_relative(drop, id_shared))
    outside = getattr(stats.task, 'detections_outside', None)
    if outside is not None:
        out['detections_of_other_classes'] = outside(indices)
    if id_counts is not None:
        _replicates(row, counts, resamples, seed)  # the set's resamples, made once
        ident = np.asarray(id_stats.task.values(id_counts, classes=indices), np.float64)
        ood = np.asarray(stats.task.values(counts[row['name']], classes=indices), np.float64)
        drops = ident - ood
        with np.errstate(divide='ignore', invalid='ignore'):
            relative = np.where(ident != 0, drops / ident, math.nan)
        out.update(id_shared_ci=interval_of(ident, level),
                   drop_shared_ci=interval_of(drops, level),
                   relative_drop_shared_ci=interval_of(relative, level))
    return out


def shift_block(rows: Sequence[ShiftRow], *, id_value: float, metric: str,
                id_stats: Any = None, resamples: int = 0, level: float = 0.95,
                seed: int = 0) -> Dict[str, Any]:
    """The ``shifts`` block of ``results.json``.

    Args:
        rows: one per shift condition, in run order: ``name``, ``shift_type``,
            ``condition`` (``'clean'`` or the corruption on top, ``'cloud@3'``), ``key``
            (``'shift/<name>'``...), ``value`` (its metric, 0-100), ``images`` (its
            number of images), ``stats`` (its per-image statistics, or None) and, where
            its class map left classes unused or ignored, ``class_map_notes``.
        id_value: the clean metric of the test set; ``id_stats``: its per-image
            statistics (or None).
        metric: the metric's display name.
        resamples, level, seed: the bootstrap settings (0 resamples: no intervals).
    """
    intervals = bool(resamples) and id_stats is not None and \
        all(r.get('stats') is not None for r in rows)
    id_reps = id_counts = None
    if intervals:
        id_counts = resample_counts(id_stats.num_images, resamples, seed)
        id_reps = np.asarray(id_stats.task.values(id_counts), dtype=np.float64)
    counts: Dict[str, np.ndarray] = {}
    sets, reps = [], []
    for row in rows:
        drop = id_value - row['value']
        entry = dict(name=row['name'], shift_type=row['shift_type'],
                     condition=row['condition'], key=row['key'], images=row.get('images'),
                     id=id_value, ood=row['value'], drop=drop,
                     relative_drop=_relative(drop, id_value))
        if row.get('class_map_notes'):
            entry['class_map_notes'] = list(row['class_map_notes'])
        if intervals:
            ood = _replicates(row, counts, resamples, seed)
            drops = id_reps - ood
            with np.errstate(divide='ignore', invalid='ignore'):
                relative = np.where(id_reps != 0, drops / id_reps, math.nan)
            entry.update(ood_ci=interval_of(ood, level), drop_ci=interval_of(drops, level),
                         relative_drop_ci=interval_of(relative, level))
            reps.append((ood, drops, relative))
        if row.get('compared_classes'):
            entry.update(_shared(row, id_stats, id_counts, counts, resamples, seed, level))
        sets.append(entry)
    plain = [i for i, s in enumerate(sets) if s['condition'] == 'clean']
    groups = {'all': plain}
    for i in plain:
        groups.setdefault(sets[i]['shift_type'], []).append(i)
    means = {}
    for group, members in groups.items():
        if not members:
            continue
        mean = dict(sets=len(members),
                    ood=float(np.mean([sets[i]['ood'] for i in members])),
                    drop=float(np.mean([sets[i]['drop'] for i in members])),
                    relative_drop=float(np.mean([sets[i]['relative_drop']
                                                 for i in members])))
        if intervals:
            for k, name in enumerate(('ood', 'drop', 'relative_drop')):
                mean[f'{name}_ci'] = interval_of(
                    np.mean([reps[i][k] for i in members], axis=0), level)
        means[group] = mean
    return dict(metric=metric, id=id_value, sets=sets, means=means,
                intervals=dict(resamples=resamples, level=level, seed=seed)
                if intervals else None)


def _shared_lines(block: Mapping[str, Any]) -> List[str]:
    """The like-for-like table of the sets that can hold only some of the classes."""
    rows = [s for s in block['sets'] if s.get('compared_classes')]
    if not rows:
        return []
    metric = block['metric']
    lines = ['', f'Like for like: a set that can hold only some of the model\'s classes (a '
             f'mapped set) is compared on those, both sides ({metric} over the classes '
             f'listed, from the per-image statistics; the ID {metric} of all classes beside '
             'it). Detections of the other classes on such a set match no object; they are '
             'counted here and left out of its score.', '',
             f'| Shift set | Condition | Classes compared | ID {metric} (all) | ID {metric} '
             f'(compared) | OOD {metric} (compared) | Drop | Relative drop (%) | Detections '
             'of other classes |', '|---|---|---|---:|---:|---:|---:|---:|---:|']
    for s in rows:
        if s.get('id_shared') is None:
            lines.append(f'| {s["name"]} | {s["condition"]} | '
                         f'{", ".join(s["compared_classes"])} | {fmt_estimate(s["id"])} | '
                         f'{s.get("shared_note", "n/a")} | | | | |')
            continue
        other = s.get('detections_of_other_classes')
        lines.append(
            f'| {s["name"]} | {s["condition"]} | {", ".join(s["compared_classes"])} | '
            f'{fmt_estimate(s["id"])} | {fmt_estimate(s["id_shared"], s.get("id_shared_ci"))} | '
            f'{fmt_estimate(s["ood_shared"])} | '
            f'{fmt_estimate(s["drop_shared"], s.get("drop_shared_ci"))} | '
            f'{fmt_estimate(s["relative_drop_shared"], s.get("relative_drop_shared_ci"), 100.0, 1)}'
            f' | {"–" if other is None else other} |')
    return lines


def shift_lines(block: Mapping[str, Any]) -> List[str]:
    """The report's section on the shift sets (markdown lines)."""
    metric = block['metric']
    level = (block.get('intervals') or {}).get('level')
    lines = ['## Real distribution shifts', '',
             f'Each shift set is another test set, evaluated as a condition of this run; '
             f'ID is the clean {metric} on the test set, OOD the {metric} on the shift set, '
             'the drop ID - OOD and the relative drop (ID - OOD) / ID.']
    if level is not None:
        lines[-1] += (f' Brackets: {level:.0%} bootstrap intervals over the test images '
                      '(ID) and, independently, the shift set\'s images (OOD).')
    lines += ['', f'| Shift set | Shift type | Condition | Images | ID {metric} | '
              f'OOD {metric} | Drop | Relative drop (%) |', '|---|---|---|---:|---:|---:|'
              '---:|---:|']
    for s in block['sets']:
        lines.append(f'| {s["name"]} | {s["shift_type"]} | {s["condition"]} | '
                     f'{s.get("images") if s.get("images") is not None else "n/a"} | '
                     f'{fmt_estimate(s["id"])} | {fmt_estimate(s["ood"], s.get("ood_ci"))} | '
                     f'{fmt_estimate(s["drop"], s.get("drop_ci"))} | '
                     f'{fmt_estimate(s["relative_drop"], s.get("relative_drop_ci"), 100.0, 1)} |')
    lines += _shared_lines(block)
    notes = {s['name']: s['class_map_notes'] for s in block['sets']
             if s.get('class_map_notes')}
    if notes:
        lines += ['', 'Class maps (what each set\'s map left out of the comparison):', '']
        lines += [f'- {name}: {"; ".join(text)}' for name, text in notes.items()]
    if block['means']:
        lines += ['', 'Means over the sets as they are (no corruption on top):', '',
                  f'| Shift type | Sets | OOD {metric} | Drop | Relative drop (%) |',
                  '|---|---:|---:|---:|---:|']
        for group, mean in block['means'].items():
            lines.append(f'| {group} | {mean["sets"]} | {fmt_estimate(mean["ood"], mean.get("ood_ci"))}'
                         f' | {fmt_estimate(mean["drop"], mean.get("drop_ci"))} | '
                         f'{fmt_estimate(mean["relative_drop"], mean.get("relative_drop_ci"), 100.0, 1)}'
                         ' |')
    return lines + ['']


def shift_metric_keys(block: Optional[Mapping[str, Any]]) -> Dict[str, float]:
    """The logger keys of the shift sets: per set ``shift/<name>/<metric>``,
    ``shift/<name>/drop`` and ``shift/<name>/relative_drop`` (a corruption on top adds its
    condition: ``shift/<name>/cloud@3/<metric>``), and over all sets ``shift/avg``
    (mean OOD metric) and ``shift/avg_relative_drop``; for a set that can hold only some
    of the classes also ``.../id_shared``, ``.../<metric>_shared``, ``.../drop_shared``
    and ``.../relative_drop_shared`` (both sides over those classes)."""
    if not block:
        return {}
    metric, out = block['metric'], {}
    for s in block['sets']:
        base = f'{SHIFT_PREFIX}/{s["name"]}'
        if s['condition'] != 'clean':
            base = f'{base}/{s["condition"]}'
        out[f'{base}/{metric}'] = float(s['ood'])
        out[f'{base}/drop'] = float(s['drop'])
        out[f'{base}/relative_drop'] = float(s['relative_drop'])
        if s.get('id_shared') is not None:  # like for like: the classes the set can hold
            out[f'{base}/id_shared'] = float(s['id_shared'])
            out[f'{base}/{metric}_shared'] = float(s['ood_shared'])
            out[f'{base}/drop_shared'] = float(s['drop_shared'])
            out[f'{base}/relative_drop_shared'] = float(s['relative_drop_shared'])
    mean = block['means'].get('all')
    if mean:
        out[f'{SHIFT_PREFIX}/avg'] = float(mean['ood'])
        out[f'{SHIFT_PREFIX}/avg_relative_drop'] = float(mean['relative_drop'])
    return out


def shift_console_lines(block: Optional[Mapping[str, Any]]) -> List[str]:
    """One line per shift condition for a terminal: ``ID -> OOD <set> (<type>): <metric>
    <ID> -> <OOD>, drop <drop> [<interval>] (<relative> %)``."""
    if not block:
        return []
    metric, out = block['metric'], []
    for row in block['sets']:
        interval = row.get('drop_ci')
        bounds = f' [{interval[0]:.2f}, {interval[1]:.2f}]' if interval else ''
        on = '' if row.get('condition', 'clean') == 'clean' else f' + {row["condition"]}'
        line = (f'ID -> OOD {row["name"]}{on} ({row["shift_type"]}): {metric} '
                f'{row["id"]:.2f} -> {row["ood"]:.2f}, drop {row["drop"]:.2f}{bounds} '
                f'({100 * row["relative_drop"]:.1f} %)')
        if row.get('id_shared') is not None:
            line += (f'; on its {len(row["compared_classes"])} classes {row["id_shared"]:.2f} -> '
                     f'{row["ood_shared"]:.2f}, drop {row["drop_shared"]:.2f}')
        out.append(line)
    return out
