"""The attacks of one run: the ``attacks`` block of ``results.json``, its report section,
its logger keys and the per-step curves' plot.

Each attack condition is compared with the clean condition of the same test images: the
drop ``clean − attacked`` and the relative drop ``(clean − attacked) / clean``. The
*worst of the battery* at a budget ε (Halmosi et al., ECCV 2024: a single attack
overestimates robustness) takes, per image, the attack whose result on that image is
worst (the lowest per-image metric: for segmentation the image's own mIoU from its
intersection/prediction/label areas, for rotated detection the image's own mAP over the
classes it has boxes of; ties go to the attack listed first) and computes the metric from
those images' statistics, as the evaluator pools them. The metrics are pooled over the
set (mIoU from the summed areas, mAP from every image's boxes), so the per-image choice
need not give the lowest pooled number: one attack alone can be lower (its images'
areas weigh differently). The worst of the battery is therefore the lower of the
per-image choice and the lowest single attack — never above any attack of the battery —
and the block says which it is (``source``: ``'per image'`` or the attack) and keeps the
per-image choice's number (``per_image_value``). It is given for every budget at which at
least two attacks ran on the same base condition (clean, or one corruption at one
severity).

Intervals: the attack conditions are evaluated on the clean condition's images, so each
is resampled with the summary's own clean resamples (the same per-image counts:
:func:`~reobench_mm.evaluation.functional.bootstrap.resample_counts` with the run's
bootstrap seed), and the drop's interval is that of the paired differences.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..evaluation.functional.bootstrap import resample_counts
from ..evaluation.keys import ATTACK_PREFIX, get_task
from .intervals import interval_of
from .tables import fmt_estimate

__all__ = ['attack_block', 'attack_lines', 'attack_metric_keys', 'worst_of_battery',
           'plot_attack_curves', 'ATTACK_CURVES_PLOT', 'attack_console_lines']

#: The plot of the per-step curves.
ATTACK_CURVES_PLOT = 'attack_curves.png'


def _relative(drop: float, clean: float) -> float:
    return drop / clean if clean else math.nan


def worst_of_battery(stats: Sequence[Any]) -> tuple:
    """Per image the worst of several conditions' per-image task statistics of the same
    images: ``(statistics of the chosen images, index of the chosen condition per
    image)``. The worst is the lowest per-image metric (``per_image_values``: an image's
    own mIoU, or its own mAP over the classes it has boxes of); an image without a value
    (nothing to score) takes the first condition, as do ties.

    Raises:
        ValueError: statistics of other kinds, images or classes.
    """
    if not stats or len({type(s) for s in stats}) != 1:
        raise ValueError('the worst of the battery needs statistics of one kind')
    values = np.stack([s.per_image_values() for s in stats])  # (A, N)
    values = np.where(np.isnan(values), np.inf, values)
    choice = np.argmin(values, axis=0)  # the first of tied attacks
    return type(stats[0]).from_choice(stats, choice), choice


def attack_block(rows: Sequence[Mapping[str, Any]], *, clean_value: float, metric: str,
                 clean_stats: Any = None, resamples: int = 0, level: float = 0.95,
                 seed: int = 0) -> Dict[str, Any]:
    """The ``attacks`` block of ``results.json``.

    Args:
        rows: one per attack condition, in run order: ``attack`` (its name), ``type``,
            ``eps`` (the budget as written in keys), ``norm``, ``base`` (``'clean'`` or
            ``'cloud@3'``), ``key``, ``value`` (its metric, 0-100), ``stats`` (per-image
            statistics or None) and ``record`` (what the condition recorded: cost, curve).
        clean_value: the clean metric; ``clean_stats``: its per-image statistics.
        metric: the metric's display name.
        resamples, level, seed: the bootstrap settings (0 resamples: no intervals).
    """
    intervals = bool(resamples) and clean_stats is not None and \
        all(r.get('stats') is not None for r in rows)
    counts = clean_reps = None
    if intervals:
        counts = resample_counts(clean_stats.num_images, resamples, seed)
        clean_reps = np.asarray(clean_stats.task.values(counts), dtype=np.float64)

    def entry(value: float, stats: Any) -> Dict[str, Any]:
        drop = clean_value - value
        out = dict(value=value, drop=drop, relative_drop=_relative(drop, clean_value))
        if intervals and stats is not None:
            reps = np.asarray(stats.values(counts), dtype=np.float64)
            drops = clean_reps - reps
            with np.errstate(divide='ignore', invalid='ignore'):
                relative = np.where(clean_reps != 0, drops / clean_reps, math.nan)
            out.update(value_ci=interval_of(reps, level), drop_ci=interval_of(drops, level),
                       relative_drop_ci=interval_of(relative, level))
        return out

    table = []
    for row in rows:
        record = dict(row.get('record') or {})
        item = dict(attack=row['attack'], type=row['type'], eps=row['eps'], norm=row['norm'],
                    base=row['base'], key=row['key'],
                    **entry(row['value'], None if row.get('stats') is None
                            else row['stats'].task))
        for name in ('seconds', 'seconds_per_image', 'peak_memory_bytes', 'peak_memory',
                     'largest_budget_ratio', 'curve'):
            if name in record:
                item[name] = record[name]
        table.append(item)
    worst = []
    groups: Dict[tuple, List[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault((row['eps'], row['norm'], row['base']), []).append(i)
    for (eps, norm, base), members in groups.items():
        if len(members) < 2:
            continue
        stats = [rows[i].get('stats') for i in members]
        attacks = [rows[i]['attack'] for i in members]
        item = dict(eps=eps, norm=norm, base=base, attacks=attacks,
                    key=f'{ATTACK_PREFIX}/worst_eps{eps}'
                    + ('' if norm == 'linf' else f'_{norm}')
                    + ('' if base == 'clean' else f'/{base}'))
        if any(s is None for s in stats):
            item.update(value=None, note='no per-image statistics')
        else:
            try:
                chosen, choice = worst_of_battery([s.task for s in stats])
            except ValueError as error:
                item.update(value=None, note=str(error))
            else:
                composite = get_task(chosen.kind).scale * chosen.recorded_value()
                lowest = min(members, key=lambda i: rows[i]['value'])
                item['images_per_attack'] = {a: int(np.sum(choice == k))
                                             for k, a in enumerate(attacks)}
                item['per_image_value'] = composite
                if rows[lowest]['value'] < composite:  # a pooled metric: see the docstring
                    item.update(entry(rows[lowest]['value'], rows[lowest]['stats'].task))
                    item['source'] = rows[lowest]['attack']
                else:
                    item.update(entry(composite, chosen))
                    item['source'] = 'per image'
        worst.append(item)
    return dict(metric=metric, clean=clean_value, attacks=table, worst=worst,
                intervals=dict(resamples=resamples, level=level, seed=seed)
                if intervals else None)


def _memory(row: Mapping[str, Any]) -> str:
    peak = row.get('peak_memory_bytes')
    if peak is None:
        return 'n/a'
    mark = '' if row.get('peak_memory') == 'device' else ' (RSS)'
    return f'{peak / 2**20:.0f} MiB{mark}'


def attack_lines(block: Mapping[str, Any], plot: Optional[str] = None) -> List[str]:
    """The report's section on the attacks (markdown lines)."""
    metric = block['metric']
    level = (block.get('intervals') or {}).get('level')
    lines = ['## Adversarial robustness', '',
             f'Each attack perturbs every test image within the budget ε (in the input\'s '
             f'pixel units; L∞ unless marked L2) to lower the model\'s {metric}; drop = '
             f'clean − attacked. The worst of the battery takes, per image, the attack with '
             f'the lowest per-image {metric} at that budget, or the lowest single attack '
             f'where that is lower ({metric} is pooled over the images, so the per-image '
             'choice need not minimise it): never above any attack of the battery.']
    if level is not None:
        lines[-1] += (f' Brackets: {level:.0%} bootstrap intervals over the test images '
                      '(the same resamples as the clean interval; drops paired).')
    lines += ['', f'Clean {metric}: {fmt_estimate(block["clean"])}', '',
              f'| Attack | Type | ε | On | {metric} | Drop | Relative drop (%) | Seconds '
              '| s / image | Peak memory |', '|---|---|---:|---|---:|---:|---:|---:|---:|---:|']
    for r in block['attacks']:
        eps = r['eps'] + (' (L2)' if r['norm'] == 'l2' else '')
        lines.append(f'| {r["attack"]} | {r["type"]} | {eps} | {r["base"]} | '
                     f'{fmt_estimate(r["value"], r.get("value_ci"))} | '
                     f'{fmt_estimate(r["drop"], r.get("drop_ci"))} | '
                     f'{fmt_estimate(r["relative_drop"], r.get("relative_drop_ci"), 100.0, 1)} | '
                     f'{fmt_estimate(r.get("seconds"), digits=1)} | '
                     f'{fmt_estimate(r.get("seconds_per_image"), digits=3)} | {_memory(r)} |')
    if block['worst']:
        lines += ['', '### Worst of the battery', '',
                  f'| ε | On | Attacks | {metric} | Drop | Relative drop (%) | Images per '
                  'attack |', '|---:|---|---|---:|---:|---:|---|']
        for w in block['worst']:
            eps = w['eps'] + (' (L2)' if w['norm'] == 'l2' else '')
            per = ', '.join(f'{a}: {n}' for a, n in (w.get('images_per_attack') or {}).items())
            if w.get('source') not in (None, 'per image'):
                per = (f'{w["source"]} alone (the per-image choice, {per}, gives '
                       f'{fmt_estimate(w.get("per_image_value"))})')
            lines.append(f'| {eps} | {w["base"]} | {", ".join(w["attacks"])} | '
                         f'{fmt_estimate(w.get("value"), w.get("value_ci"))} | '
                         f'{fmt_estimate(w.get("drop"), w.get("drop_ci"))} | '
                         f'{fmt_estimate(w.get("relative_drop"), w.get("relative_drop_ci"), 100.0, 1)}'
                         f' | {per or w.get("note", "")} |')
    if plot:
        lines += ['', f'![{metric} against the attack step]({plot})']
    return lines + ['']


def attack_console_lines(block: Optional[Mapping[str, Any]]) -> List[str]:
    """One line per attack condition and per worst of the battery, for a terminal."""
    if not block:
        return []
    metric, out = block['metric'], []
    for r in list(block['attacks']) + list(block['worst']):
        if r.get('value') is None:
            continue
        name = r.get('attack') or f'worst of {", ".join(r["attacks"])}'
        norm = ' (L2)' if r['norm'] == 'l2' else ''
        on = '' if r['base'] == 'clean' else f' on {r["base"]}'
        out.append(f'attack {name} ε {r["eps"]}{norm}{on}: {metric} {r["value"]:.2f}, drop '
                   f'{r["drop"]:.2f} ({100 * r["relative_drop"]:.1f} %)')
    return out


def attack_metric_keys(block: Optional[Mapping[str, Any]]) -> Dict[str, float]:
    """The logger keys of the attacks: per attack condition ``adv/<attack>_eps<ε>/<metric>``
    and ``.../drop`` (on a corrupted image its condition is added:
    ``adv/pgd_eps8/cloud@3/mIoU``), and per budget the worst of the battery
    ``adv/worst_eps<ε>/<metric>``."""
    if not block:
        return {}
    metric, out = block['metric'], {}
    for r in block['attacks']:
        out[f'{r["key"]}/{metric}'] = float(r['value'])
        out[f'{r["key"]}/drop'] = float(r['drop'])
    for w in block['worst']:
        if w.get('value') is not None:
            out[f'{w["key"]}/{metric}'] = float(w['value'])
            out[f'{w["key"]}/drop'] = float(w['drop'])
    return out


def plot_attack_curves(block: Mapping[str, Any], path: str) -> Optional[str]:
    """``attack_curves.png``: the metric against the attack step of every attack with a
    recorded curve (one panel per base condition), the clean value dashed. None when no
    attack recorded a curve."""
    from .plotting import FIGURE_LAYOUT, agg_pyplot, atomic_savefig
    curves = [r for r in block['attacks'] if r.get('curve')]
    if not curves:
        return None
    plt = agg_pyplot()
    from matplotlib.ticker import MaxNLocator
    bases = list(dict.fromkeys(r['base'] for r in curves))
    fig, axes = plt.subplots(1, len(bases), figsize=(5.2 * len(bases), 3.6), squeeze=False,
                             layout=FIGURE_LAYOUT)
    try:
        for ax, base in zip(axes[0], bases):
            for r in (r for r in curves if r['base'] == base):
                eps = r['eps'] + (' L2' if r['norm'] == 'l2' else '')
                ax.plot(r['curve']['steps'], r['curve']['values'], marker='.', markersize=3,
                        label=f'{r["attack"]} ε={eps}')
            ax.axhline(block['clean'], color='0.4', linestyle='--', linewidth=1,
                       label='clean')
            ax.set_xlabel('attack step (0: the start)')
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylabel(block['metric'])
            ax.set_title(f'{block["metric"]} against the attack step'
                         + ('' if base == 'clean' else f' (on {base})'), fontsize=10)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc='center left', bbox_to_anchor=(1.01, 0.5),
                      frameon=False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)
