"""The figures of the group and synthetic-vs-real analyses of a cross-model comparison:
the relative drop per corruption by group (REOBench Fig. 4), the ECE ratio of the
strongest severity (mean over the corruptions) to clean by group (after the calibration
study's Fig. 5, which gives the ratio per corruption), CKA against this package's ECE
inflation (after the study's Fig. 16), the heatmap of Spearman ρ of corruption drops
against real shift drops, and each real shift's drop against ΔTP with its least-squares
line. They use the helpers of :mod:`~reobench_mm.analysis.plotting`.
"""
from __future__ import annotations

import math
import os.path as osp
from typing import TYPE_CHECKING, Dict, Optional

import numpy as np

from ..evaluation.keys import ECE_KEY
from .model_plots import model_styles
from .plotting import FIGURE_LAYOUT, agg_pyplot, atomic_savefig, wrap_to_width
from .results import AVG
from .tables import column_title

if TYPE_CHECKING:  # annotations only
    from .groups import CkaEceCorrelation, GroupAnalysis
    from .synthetic_real import SyntheticVsReal

__all__ = ['GROUP_PLOTS', 'plot_group_relative_drop', 'plot_group_ece_ratio',
           'plot_group_ece_ratio_by_corruption', 'plot_cka_vs_ece_inflation',
           'plot_synthetic_vs_real',
           'plot_shift_drop_vs_delta_tp', 'write_group_plots']

#: The files :func:`write_group_plots` may write.
GROUP_PLOTS = ('group_relative_drop.png', 'group_ece_ratio.png',
               'group_ece_ratio_by_corruption.png', 'cka_vs_ece_inflation.png',
               'synthetic_vs_real.png', 'shift_drop_vs_delta_tp.png')


def _grid(count: int, max_columns: int):
    columns = min(max_columns, count)
    return columns, int(math.ceil(count / columns))


def plot_group_relative_drop(analysis: 'GroupAnalysis', corruptions, path: str) -> str:
    """``group_relative_drop.png``: one panel per grouping, per corruption (and Avg:
    ΔTP / Clean) one bar per group, the group mean of the relative drop in percent."""
    plt = agg_pyplot()
    keys = [f'{c}@relative_drop' for c in corruptions] + ['relative_drop']
    names = [column_title(c) for c in corruptions] + ['Avg']
    groupings = list(analysis.groupings.values())
    width = max(6.0, 0.28 * len(keys) * max(len(g.labels) for g in groupings) + 2.5)
    fig, axes = plt.subplots(len(groupings), 1, figsize=(width, 3.3 * len(groupings)),
                             squeeze=False, layout=FIGURE_LAYOUT)
    try:
        for ax, g in zip(axes[:, 0], groupings):
            styles = model_styles(len(g.labels))
            step = 0.8 / len(g.labels)
            for k, label in enumerate(g.labels):
                values = [100 * g.means[key][label] for key in keys]
                ax.bar(np.arange(len(keys)) - 0.4 + step * (k + 0.5), values, step * 0.95,
                       color=styles[k][0],
                       label=wrap_to_width(f'{label} (n={len(g.members[label])})', 2.0, 8))
            ax.axhline(0, color='black', linewidth=0.6)
            ax.axvline(len(keys) - 1.5, color='grey', linestyle=':', linewidth=0.8)
            ax.set_xticks(np.arange(len(keys)))
            ax.set_xticklabels(names, rotation=45, ha='right', fontsize=8)
            ax.set_ylabel('relative drop (% of clean)', fontsize=9)
            ax.set_title(wrap_to_width(f'Relative drop by group: {g.name}', width - 2, 10),
                         fontsize=10)
            ax.tick_params(axis='y', labelsize=8)
            ax.grid(True, axis='y', alpha=0.3)
            ax.legend(loc='center left', bbox_to_anchor=(1.01, 0.5), fontsize=8,
                      frameon=False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def plot_group_ece_ratio(analysis: 'GroupAnalysis', path: str) -> str:
    """``group_ece_ratio.png``: one panel per grouping: per group a bar of the mean ECE
    ratio (strongest severity / clean) and each model's ratio as a point; 1 dotted."""
    plt = agg_pyplot()
    key = f'{ECE_KEY}@{analysis.ratio_severity}/clean'
    values = analysis.values[key]
    groupings = list(analysis.groupings.values())
    columns, rows = _grid(len(groupings), 3)
    fig, axes = plt.subplots(rows, columns, figsize=(3.6 * columns, 3.4 * rows),
                             squeeze=False, layout=FIGURE_LAYOUT)
    try:
        for ax, g in zip(axes.flat, groupings):
            styles = model_styles(len(g.labels))
            for k, label in enumerate(g.labels):
                ax.bar([k], [g.means[key][label]], 0.6, color=styles[k][0], alpha=0.7)
                members = [analysis.models.index(m) for m in g.members[label]]
                offsets = np.linspace(-0.15, 0.15, len(members)) if len(members) > 1 else [0]
                ax.scatter(k + np.asarray(offsets), values[members], color='black', s=12,
                           zorder=3)
            ax.axhline(1.0, color='grey', linestyle=':', linewidth=0.8)
            ax.set_xticks(range(len(g.labels)))
            ax.set_xticklabels([wrap_to_width(f'{label}\n(n={len(g.members[label])})',
                                              3.0 / max(1, len(g.labels)), 8)
                                for label in g.labels], fontsize=8)
            ax.set_ylabel(f'ECE severity {analysis.ratio_severity} / clean ECE', fontsize=9)
            ax.set_title(wrap_to_width(g.name, 3.2, 10), fontsize=10)
            ax.tick_params(axis='y', labelsize=8)
            ax.grid(True, axis='y', alpha=0.3)
        for ax in list(axes.flat)[len(groupings):]:
            ax.set_visible(False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def plot_group_ece_ratio_by_corruption(analysis: 'GroupAnalysis', path: str,
                                       max_columns: int = 4) -> str:
    """``group_ece_ratio_by_corruption.png``: per grouping a block of panels, one per
    corruption: ECE(corruption at severity) / ECE(clean) against severity, the group
    mean as a line per group and each model's ratio as a point; 1 dotted."""
    from .group_cells import ECE_RATIO_KEY
    plt = agg_pyplot()
    from matplotlib.lines import Line2D
    cells = analysis.cells
    ratio = cells.values[ECE_RATIO_KEY]
    keys = [c.key for c in cells.conditions]
    columns, rows = _grid(len(cells.corruptions), max_columns)
    groupings = list(cells.members.items())
    fig = plt.figure(figsize=(3.0 * columns + 2.2, (2.9 * rows + 0.5) * len(groupings)),
                     layout=FIGURE_LAYOUT)
    try:
        subfigures = np.atleast_1d(fig.subfigures(len(groupings), 1))
        for subfigure, (name, by_label) in zip(subfigures, groupings):
            axes = subfigure.subplots(rows, columns, squeeze=False)
            styles = model_styles(len(by_label))
            for panel, (ax, corruption) in enumerate(zip(axes.flat, cells.corruptions)):
                severities = [s for s in cells.severities if f'{corruption}@{s}' in keys]
                for k, (label, members) in enumerate(by_label.items()):
                    colour = styles[k][0]
                    means = [cells.mean(name, label, ECE_RATIO_KEY, f'{corruption}@{s}')
                             for s in severities]
                    ax.plot(severities, means, color=colour, marker=styles[k][1],
                            linewidth=1.6, zorder=3)
                    rows_ = [cells.models.index(m) for m in members]
                    for s in severities:
                        shift = 0.12 * (k - (len(by_label) - 1) / 2)
                        ax.scatter(np.full(len(rows_), s + shift),
                                   ratio[rows_, keys.index(f'{corruption}@{s}')],
                                   color=colour, s=10, alpha=0.45, linewidths=0, zorder=2)
                ax.axhline(1.0, color='grey', linestyle=':', linewidth=0.8)
                ax.set_xticks(severities)
                ax.set_title(wrap_to_width(column_title(corruption), 2.8, 9), fontsize=9)
                ax.set_xlabel('severity', fontsize=8)
                if panel % columns == 0:
                    ax.set_ylabel('ECE / clean ECE', fontsize=8)
                ax.tick_params(labelsize=7)
                ax.grid(True, alpha=0.3)
            for ax in list(axes.flat)[len(cells.corruptions):]:
                ax.set_visible(False)
            handles = [Line2D([], [], color=styles[k][0], marker=styles[k][1],
                              label=wrap_to_width(f'{label} (n={len(members)}): group mean',
                                                  1.9, 7))
                       for k, (label, members) in enumerate(by_label.items())]
            handles.append(Line2D([], [], color='grey', marker='o', linestyle='', alpha=0.45,
                                  label='one model'))
            subfigure.legend(handles=handles, loc='outside right upper', fontsize=7,
                             frameon=False)
            subfigure.suptitle(wrap_to_width(f'ECE ratio per corruption by group: {name}',
                                             3.0 * columns, 10), fontsize=10)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def plot_cka_vs_ece_inflation(correlation: 'CkaEceCorrelation', path: str,
                              max_columns: int = 4) -> str:
    """``cka_vs_ece_inflation.png``: one panel per condition, a point per model (CKA of
    its final hooked block against ECE(condition) − ECE(clean)), ρ, its permutation p
    and its analytic p in the title."""
    plt = agg_pyplot()
    from matplotlib.lines import Line2D
    rows_ = correlation.rows
    styles = model_styles(len(correlation.models))
    columns, rows = _grid(len(rows_), max_columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns + 2.2, 3.0 * rows),
                             squeeze=False, layout=FIGURE_LAYOUT)
    try:
        for ax, row in zip(axes.flat, rows_):
            for i, (colour, marker) in enumerate(styles):
                ax.scatter([row.cka[i]], [row.inflation[i]], color=colour, marker=marker,
                           s=24, edgecolors='black', linewidths=0.3, zorder=3)
            p, p_t = ('–' if not math.isfinite(v) else f'{v:.3g}'
                      for v in (row.p_value, row.p_analytic))
            ax.set_title(f'{row.condition}, ρ = {row.rho:.2f}\np = {p} (perm.), {p_t} '
                         '(analytic)', fontsize=9)
            ax.set_xlabel('CKA (final block)', fontsize=8)
            ax.set_ylabel('ECE inflation', fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, alpha=0.3)
        for ax in list(axes.flat)[len(rows_):]:
            ax.set_visible(False)
        handles = [Line2D([], [], color=c, marker=m, linestyle='', markeredgecolor='black',
                          markeredgewidth=0.3, label=wrap_to_width(name, 2.0, 7))
                   for name, (c, m) in zip(correlation.models, styles)]
        fig.legend(handles=handles, loc='outside right upper', fontsize=7, frameon=False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def plot_synthetic_vs_real(result: 'SyntheticVsReal', path: str) -> str:
    """``synthetic_vs_real.png``: heatmap of Spearman ρ, corruption drops (rows, and
    Avg = ΔTP) against real shift drops (columns), the value written in each cell."""
    plt = agg_pyplot()
    from .synthetic_real import predictor_title
    predictors, shifts = list(result.predictors), list(result.shifts)
    matrix = np.array([[result.spearman[p, s].statistic for s in shifts]
                       for p in predictors], dtype=float)
    fig, ax = plt.subplots(figsize=(2.2 + 1.3 * len(shifts), 1.4 + 0.32 * len(predictors)),
                           layout=FIGURE_LAYOUT)
    try:
        image = ax.imshow(np.ma.masked_invalid(matrix), cmap='RdBu_r', vmin=-1, vmax=1,
                          aspect='auto')
        for i in range(len(predictors)):
            for j in range(len(shifts)):
                v = matrix[i, j]
                ax.text(j, i, '–' if not math.isfinite(v) else f'{v:+.2f}', ha='center',
                        va='center', fontsize=8,
                        color='white' if math.isfinite(v) and abs(v) > 0.6 else 'black')
        ax.set_xticks(range(len(shifts)))
        ax.set_xticklabels([wrap_to_width(s, 1.2, 8) for s in shifts], fontsize=8)
        ax.set_yticks(range(len(predictors)))
        ax.set_yticklabels([predictor_title(p) for p in predictors], fontsize=8)
        ax.axhline(len(predictors) - 1.5, color='black', linewidth=0.8)
        ax.set_xlabel('real shift (drop ID − OOD)', fontsize=9)
        ax.set_title(wrap_to_width(f'Spearman ρ across {len(result.models)} models: '
                                   'corruption drop vs real drop', 1.0 + 1.3 * len(shifts), 9),
                     fontsize=9)
        fig.colorbar(image, ax=ax, shrink=0.8).ax.tick_params(labelsize=7)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def plot_shift_drop_vs_delta_tp(result: 'SyntheticVsReal', path: str,
                                max_columns: int = 3) -> str:
    """``shift_drop_vs_delta_tp.png``: one panel per real shift: each model's ΔTP
    against its drop on the shift, the least-squares line, slope, R² and p."""
    plt = agg_pyplot()
    from matplotlib.lines import Line2D
    shifts = list(result.shifts)
    delta = result.predictors[AVG]
    styles = model_styles(len(result.models))
    columns, rows = _grid(len(shifts), max_columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.6 * columns + 2.2, 3.3 * rows),
                             squeeze=False, layout=FIGURE_LAYOUT)
    try:
        for ax, shift in zip(axes.flat, shifts):
            drop = result.shifts[shift]
            for i, (colour, marker) in enumerate(styles):
                ax.scatter([delta[i]], [drop[i]], color=colour, marker=marker, s=26,
                           edgecolors='black', linewidths=0.3, zorder=3)
            fit = result.regressions[shift]
            title = wrap_to_width(f'{shift} ({result.shift_types[shift]})', 3.2, 9)
            if math.isfinite(fit.slope):
                grid = np.linspace(delta.min(), delta.max(), 20)
                ax.plot(grid, fit.slope * grid + fit.intercept, color='tab:blue')
                title += f'\nslope {fit.slope:.2f}, R² {fit.r_squared:.2f}, ' \
                         f'p {fit.p_value:.2g}'
            ax.set_title(title, fontsize=9)
            ax.set_xlabel(f'ΔTP ({result.metric} points)', fontsize=8)
            ax.set_ylabel('real drop ID − OOD', fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, alpha=0.3)
        for ax in list(axes.flat)[len(shifts):]:
            ax.set_visible(False)
        handles = [Line2D([], [], color='tab:blue', label='least squares')]
        handles += [Line2D([], [], color=c, marker=m, linestyle='', markeredgecolor='black',
                           markeredgewidth=0.3, label=wrap_to_width(name, 2.0, 7))
                    for name, (c, m) in zip(result.models, styles)]
        fig.legend(handles=handles, loc='outside right upper', fontsize=7, frameon=False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def write_group_plots(out_dir: str, corruptions, groups: Optional['GroupAnalysis'] = None,
                      cka: Optional['CkaEceCorrelation'] = None,
                      synthetic_real: Optional['SyntheticVsReal'] = None) -> Dict[str, str]:
    """Write the figures of the analyses given into ``out_dir``: ``{file name: path}``
    (the ECE ratio only with ``calib/ECE``, the CKA figure only with conditions)."""
    path = lambda name: osp.join(out_dir, name)  # noqa: E731
    files = {}
    if groups is not None:
        files['group_relative_drop.png'] = plot_group_relative_drop(
            groups, corruptions, path('group_relative_drop.png'))
        if groups.ratio_severity is not None:
            files['group_ece_ratio.png'] = plot_group_ece_ratio(groups,
                                                                path('group_ece_ratio.png'))
            if groups.cells is not None:
                name = 'group_ece_ratio_by_corruption.png'
                files[name] = plot_group_ece_ratio_by_corruption(groups, path(name))
    if cka is not None and cka.rows:
        files['cka_vs_ece_inflation.png'] = plot_cka_vs_ece_inflation(
            cka, path('cka_vs_ece_inflation.png'))
    if synthetic_real is not None:
        files['synthetic_vs_real.png'] = plot_synthetic_vs_real(
            synthetic_real, path('synthetic_vs_real.png'))
        files['shift_drop_vs_delta_tp.png'] = plot_shift_drop_vs_delta_tp(
            synthetic_real, path('shift_drop_vs_delta_tp.png'))
    return files
