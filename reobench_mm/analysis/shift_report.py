"""The files of the analysis of distribution shifts across models
(:mod:`~reobench_mm.analysis.shifts`): ``shift_analysis.json``, ``shift_analysis.csv``,
``shift_analysis.md`` and ``ood_vs_id.png``."""
from __future__ import annotations

import csv
import io
import json
import math
import os
import os.path as osp
from typing import Dict

from ..fileio import atomic_write_text
from .model_plots import plot_ood_vs_id
from .shifts import ShiftAnalysis
from .tables import fmt_number, markdown_table

__all__ = ['write_shift_analysis', 'shift_markdown']


def _csv_text(analysis: ShiftAnalysis) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    spaces = list(analysis.fits)
    writer.writerow(['model', 'group', 'dataset', 'shift_type', 'id', 'ood', 'loss',
                     'relative_loss'] + [f'effective_robustness_{s}{b}' for s in spaces
                                         for b in ('', '_low', '_high')])
    cell = (lambda v: '' if v is None or not math.isfinite(v) else repr(float(v)))  # noqa
    for i, p in enumerate(analysis.points):
        residuals = [analysis.residual(i, s) for s in spaces]
        writer.writerow([p.model, p.group or '', p.dataset, p.shift_type, cell(p.id_value),
                         cell(p.ood_value), cell(p.loss), cell(p.relative_loss)]
                        + [cell(r[b]) for r in residuals for b in ('value', 'low', 'high')])
    return buffer.getvalue()


def shift_markdown(analysis: ShiftAnalysis, metric: str) -> str:
    """``shift_analysis.md``: the points, the fits per shift type, the group means."""
    lines = ['# Robustness to distribution shifts', '',
             f'ID and OOD {metric} per model and dataset pair; loss = ID − OOD; relative '
             'loss = (ID − OOD) / ID; effective robustness (ER) = OOD − the OOD predicted by '
             'the line fitted over every point of the same shift type (models and dataset '
             'pairs pooled), in metric points, with its bootstrap interval over models.', '']
    rows = []
    for i, p in enumerate(analysis.points):
        linear, logit = analysis.residual(i, 'linear'), analysis.residual(i, 'logit')
        interval = '–' if linear['low'] is None else \
            f'[{fmt_number(linear["low"])}, {fmt_number(linear["high"])}]'
        rows.append([p.model, p.group or '–', p.dataset, p.shift_type, fmt_number(p.id_value),
                     fmt_number(p.ood_value), fmt_number(p.loss),
                     fmt_number(100 * p.relative_loss, 1), fmt_number(linear['value']),
                     interval, fmt_number(logit['value'])])
    lines += markdown_table(['Model', 'Group', 'Dataset', 'Shift', 'ID', 'OOD', 'Loss',
                             'Rel. loss (%)', 'ER (linear)', 'interval', 'ER (logit)'],
                            rows, align_left=4)
    lines += ['', '## Fits per shift type', '']
    rows = []
    for shift_type in analysis.shift_types:
        for space, by_type in analysis.fits.items():
            fit = by_type.get(shift_type)
            rows.append([shift_type, space] + (['–'] * 4 if fit is None else [
                fmt_number(fit.slope, 3), fmt_number(fit.intercept, 3),
                fmt_number(fit.r_squared, 3), str(len(fit.models))]))
    lines += markdown_table(['Shift', 'Space', 'a', 'b', 'R²', 'Points'], rows, align_left=2)
    lines += ['', '## Group means', '']
    rows = []
    for shift_type, block in analysis.groups.items():
        for group, values in block.items():
            rows.append([shift_type, group, str(values['points']), fmt_number(values['id']),
                         fmt_number(values['ood']), fmt_number(100 * values['relative_loss'], 1),
                         fmt_number(values['effective_robustness'])])
    lines += markdown_table(['Shift', 'Group', 'Points', 'ID', 'OOD', 'Rel. loss (%)',
                             'ER (linear)'], rows, align_left=2)
    if analysis.notes:
        lines += ['', '## Notes', ''] + [f'- {n}' for n in analysis.notes]
    return '\n'.join(lines) + '\n'


def write_shift_analysis(analysis: ShiftAnalysis, out_dir: str, metric: str = 'metric',
                         plots: bool = True) -> Dict[str, str]:
    """Write ``shift_analysis.json``, ``shift_analysis.csv``, ``shift_analysis.md`` and
    (with ``plots``) ``ood_vs_id.png`` into ``out_dir``; returns name -> path."""
    os.makedirs(out_dir, exist_ok=True)
    path = lambda name: osp.join(out_dir, name)  # noqa: E731
    files = {'shift_analysis.json': atomic_write_text(
        path('shift_analysis.json'), json.dumps(dict(analysis.to_dict(), metric=metric),
                                                indent=2, allow_nan=False,
                                                ensure_ascii=False) + '\n'),
        'shift_analysis.csv': atomic_write_text(path('shift_analysis.csv'),
                                                _csv_text(analysis)),
        'shift_analysis.md': atomic_write_text(path('shift_analysis.md'),
                                               shift_markdown(analysis, metric))}
    if plots:
        files['ood_vs_id.png'] = plot_ood_vs_id(analysis, path('ood_vs_id.png'), metric)
    return files
