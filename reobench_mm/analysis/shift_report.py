"""The files of the analysis of distribution shifts across models
(:mod:`~reobench_mm.analysis.shifts`): ``shift_analysis.json``, ``shift_analysis.csv``,
``shift_analysis.md``, ``shift_ranking.csv`` (the models ranked across shift types,
:mod:`~reobench_mm.analysis.shift_ranking`) and ``ood_vs_id.png`` (one per protocol,
``ood_vs_id_<protocol>.png``, when the points name protocols)."""
from __future__ import annotations

import csv
import io
import json
import math
import os
import os.path as osp
import re
from typing import Any, Dict, List, Optional, Sequence

from ..fileio import atomic_write_text
from .model_plots import plot_ood_vs_id
from .shift_ranking import TYPE_KEYS, ShiftRanking
from .shifts import POOLED, ShiftAnalysis
from .tables import MISSING, fmt_number, markdown_table

__all__ = ['write_shift_analysis', 'shift_markdown', 'ranking_markdown', 'ranking_csv']


def _cell(value: Optional[float]) -> str:
    """A CSV cell: empty for None and non-finite values, else the float's repr."""
    return '' if value is None or not math.isfinite(value) else repr(float(value))


def _csv_text(analysis: ShiftAnalysis) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    spaces = list(analysis.protocol_fits[analysis.protocols[0]])
    named = analysis.named_protocols
    writer.writerow(['protocol'] * named + [
        'model', 'group', 'dataset', 'shift_type', 'metric', 'id', 'ood', 'loss',
        'relative_loss'] + [f'effective_robustness_{s}{b}' for s in spaces
                            for b in ('', '_low', '_high')])
    for i, p in enumerate(analysis.points):
        residuals = [analysis.residual(i, s) for s in spaces]
        writer.writerow([p.protocol] * named + [
            p.model, p.group or '', p.dataset, p.shift_type, p.metric or '', _cell(p.id_value),
            _cell(p.ood_value), _cell(p.loss), _cell(p.relative_loss)]
            + [_cell(r[b]) for r in residuals for b in ('value', 'low', 'high')])
    return buffer.getvalue()


def _rankings(analysis: ShiftAnalysis) -> List[ShiftRanking]:
    return [r for protocol in analysis.protocols
            for r in analysis.rankings.get(protocol, {}).values()]


def ranking_csv(analysis: ShiftAnalysis) -> str:
    """``shift_ranking.csv``: one row per protocol (a column only when the points name
    protocols), space and model, ranked; per shift type ``er_<type>``, ``rank_<type>``
    with their ``_low``/``_high`` bounds and ``points_<type>`` (empty where the model
    lacks the type), then ``mean_er`` and ``mean_rank`` with their bounds."""
    rankings = _rankings(analysis)
    types = list(dict.fromkeys(t for r in rankings for t in r.shift_types))
    named = analysis.named_protocols
    # 'er_low' of type t -> 'er_<t>_low'
    per_type = [f'{base}_{t}' + (f'_{bound}' if bound else '') for t in types
                for base, _, bound in (key.partition('_') for key in TYPE_KEYS)]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    writer.writerow(['protocol'] * named + ['space', 'model', 'group', 'shift_types',
                                            'missing'] + per_type +
                    [f'mean_{k}{b}' for k in ('er', 'rank') for b in ('', '_low', '_high')])
    for ranking in rankings:
        for row in ranking.models:
            cells = []
            for shift_type in types:
                values = row.shift_types.get(shift_type, {})
                cells += [str(values['points']) if values else ''] + [
                    _cell(values.get(k)) for k in TYPE_KEYS[1:]]
            writer.writerow([ranking.protocol] * named + [
                ranking.space, row.model, row.group or '', str(len(row.shift_types)),
                ';'.join(row.missing)] + cells + [
                _cell(block[b]) for block in (row.mean_er, row.mean_rank)
                for b in ('value', 'low', 'high')])
    return buffer.getvalue()


def _interval(block: Dict[str, Any], digits: int = 2) -> str:
    if block['low'] is None:
        return MISSING
    return f'[{fmt_number(block["low"], digits)}, {fmt_number(block["high"], digits)}]'


def ranking_markdown(analysis: ShiftAnalysis) -> List[str]:
    """The section of ``shift_analysis.md`` ranking the models across shift types: one
    table per protocol and space."""
    rankings = _rankings(analysis)
    if not rankings:
        return []
    first = rankings[0]
    lines = ['## Ranking across shift types', '',
             'Per model and shift type: its mean effective robustness (ER, metric points) '
             'over its points of that type and, in parentheses, its rank among the models '
             'of that type (1 = most robust; ties share the average rank). Mean ER and mean '
             'rank: over the shift types the model has, with their percentile intervals '
             f'({100 * first.confidence:g} %) over the bootstrap resamples of the lines '
             '(the models resampled, each with all its points; resample b of every shift '
             'type paired; their number after each title). Types: the shift types the '
             'model has; * marks a model lacking one (its means are over the types it has). '
             'The intervals per shift type are in shift_ranking.csv.']
    for ranking in rankings:
        title = ranking.space if ranking.protocol is None else \
            f'{ranking.protocol}, {ranking.space}'
        lines += ['', f'### {title} ({ranking.n_resamples} resamples)', '']
        rows = []
        for row in ranking.models:
            cells = []
            for shift_type in ranking.shift_types:
                values = row.shift_types.get(shift_type)
                cells.append(MISSING if values is None else
                             f'{fmt_number(values["er"], 2, signed=True)} '
                             f'({values["rank"]:g})')
            rows.append([row.model, row.group or MISSING,
                         f'{len(row.shift_types)}/{len(ranking.shift_types)}' +
                         (' *' if row.missing else '')] + cells + [
                fmt_number(row.mean_er['value'], 2, signed=True), _interval(row.mean_er),
                fmt_number(row.mean_rank['value']), _interval(row.mean_rank)])
        lines += markdown_table(['Model', 'Group', 'Types'] + ranking.shift_types +
                                ['Mean ER', 'interval', 'Mean rank', 'interval'], rows,
                                align_left=2)
    return lines


def _metric_text(analysis: ShiftAnalysis, metric: str) -> str:
    if metric != POOLED and len(analysis.metrics) <= 1:
        return metric
    return (f'values (metrics pooled within each shift type: '
            f'{", ".join(analysis.metrics) or "unnamed"}; the Metric column names each '
            'point\'s)')


def shift_markdown(analysis: ShiftAnalysis, metric: str) -> str:
    """``shift_analysis.md``: the points, the fits per shift type, the group means, the
    ranking across shift types (a Protocol column where the points name protocols, a
    Metric column where they have several metrics)."""
    named = analysis.named_protocols
    several = len(analysis.metrics) > 1
    lines = ['# Robustness to distribution shifts', '',
             f'ID and OOD {_metric_text(analysis, metric)} per model and dataset pair; '
             'loss = ID − OOD; relative loss = (ID − OOD) / ID; effective robustness (ER) = '
             'OOD − the OOD predicted by the line fitted over every point of the same shift '
             'type (models and dataset pairs pooled' + (', per protocol' if named else '') +
             '), in metric points, with its bootstrap interval over models.', '']
    rows = []
    for i, p in enumerate(analysis.points):
        linear, logit = analysis.residual(i, 'linear'), analysis.residual(i, 'logit')
        interval = MISSING if linear['low'] is None else \
            f'[{fmt_number(linear["low"])}, {fmt_number(linear["high"])}]'
        rows.append([p.protocol or MISSING] * named + [
            p.model, p.group or MISSING, p.dataset, p.shift_type] +
            [p.metric or MISSING] * several + [
            fmt_number(p.id_value), fmt_number(p.ood_value), fmt_number(p.loss),
            fmt_number(100 * p.relative_loss, 1), fmt_number(linear['value']), interval,
            fmt_number(logit['value'])])
    lines += markdown_table(['Protocol'] * named + ['Model', 'Group', 'Dataset', 'Shift'] +
                            ['Metric'] * several + ['ID', 'OOD', 'Loss', 'Rel. loss (%)',
                                                    'ER (linear)', 'interval', 'ER (logit)'],
                            rows, align_left=4 + named + several)
    lines += ['', '## Fits per shift type', '']
    rows = []
    for protocol, fits in analysis.protocol_fits.items():
        for shift_type in dict.fromkeys(p.shift_type for p in analysis.points
                                        if p.protocol == protocol):
            for space, by_type in fits.items():
                fit = by_type.get(shift_type)
                rows.append([protocol or MISSING] * named + [shift_type, space] + (
                    [MISSING] * 4 if fit is None else [
                        fmt_number(fit.slope, 3), fmt_number(fit.intercept, 3),
                        fmt_number(fit.r_squared, 3), str(len(fit.models))]))
    lines += markdown_table(['Protocol'] * named + ['Shift', 'Space', 'a', 'b', 'R²',
                                                    'Points'], rows, align_left=2 + named)
    lines += ['', '## Group means', '']
    rows = []
    for protocol, groups in analysis.protocol_groups.items():
        for shift_type, block in groups.items():
            for group, values in block.items():
                rows.append([protocol or MISSING] * named + [
                    shift_type, group, str(values['points']), fmt_number(values['id']),
                    fmt_number(values['ood']), fmt_number(100 * values['relative_loss'], 1),
                    fmt_number(values['effective_robustness'])])
    lines += markdown_table(['Protocol'] * named + ['Shift', 'Group', 'Points', 'ID', 'OOD',
                                                    'Rel. loss (%)', 'ER (linear)'], rows,
                            align_left=2 + named)
    ranking = ranking_markdown(analysis)
    if ranking:
        lines += [''] + ranking
    if analysis.notes:
        lines += ['', '## Notes', ''] + [f'- {n}' for n in analysis.notes]
    return '\n'.join(lines) + '\n'


def _plot_names(protocols: Sequence[Optional[str]]) -> List[str]:
    """``ood_vs_id.png``, or ``ood_vs_id_<protocol>.png`` per protocol (characters other
    than letters, digits, ``.``, ``-`` and ``_`` replaced; a number added to a name taken)."""
    if list(protocols) == [None]:
        return ['ood_vs_id.png']
    names: List[str] = []
    for i, protocol in enumerate(protocols):
        name = 'ood_vs_id_' + re.sub(r'[^A-Za-z0-9._-]+', '_', str(protocol)) + '.png'
        names.append(name if name not in names else name[:-4] + f'_{i + 1}.png')
    return names


def write_shift_analysis(analysis: ShiftAnalysis, out_dir: str, metric: str = 'metric',
                         plots: bool = True) -> Dict[str, str]:
    """Write ``shift_analysis.json`` (with ``metric``: the metric's name or
    :data:`~reobench_mm.analysis.shifts.POOLED`), ``shift_analysis.csv``,
    ``shift_analysis.md``, ``shift_ranking.csv`` and (with ``plots``) ``ood_vs_id.png``
    (per protocol when the points name protocols) into ``out_dir``; returns name ->
    path."""
    os.makedirs(out_dir, exist_ok=True)
    path = lambda name: osp.join(out_dir, name)  # noqa: E731
    files = {'shift_analysis.json': atomic_write_text(
        path('shift_analysis.json'), json.dumps(dict(analysis.to_dict(), metric=metric),
                                                indent=2, allow_nan=False,
                                                ensure_ascii=False) + '\n'),
        'shift_analysis.csv': atomic_write_text(path('shift_analysis.csv'),
                                                _csv_text(analysis)),
        'shift_analysis.md': atomic_write_text(path('shift_analysis.md'),
                                               shift_markdown(analysis, metric)),
        'shift_ranking.csv': atomic_write_text(path('shift_ranking.csv'),
                                               ranking_csv(analysis))}
    if plots:
        label = 'value (pooled metrics)' if metric == POOLED or len(analysis.metrics) > 1 \
            else metric
        for protocol, name in zip(analysis.protocols, _plot_names(analysis.protocols)):
            files[name] = plot_ood_vs_id(analysis.for_protocol(protocol), path(name), label)
    return files
