"""The figures of the mechanism tests (:mod:`~reobench_mm.analysis.mechanisms`): CKA of
the final hooked block against severity by group (the calibration study's Fig. 7) and
the clean participation ratio by group (its Fig. 17). They use the helpers of
:mod:`~reobench_mm.analysis.plotting`.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .model_plots import model_styles
from .plotting import FIGURE_LAYOUT, agg_pyplot, atomic_savefig, wrap_to_width

if TYPE_CHECKING:  # annotations only
    from .mechanisms import MechanismTests

__all__ = ['CKA_PLOT', 'PR_PLOT', 'plot_cka_by_severity', 'plot_participation_ratio']

#: File names of the two figures.
CKA_PLOT = 'cka_vs_severity_by_group.png'
PR_PLOT = 'participation_ratio_by_group.png'


def _p_text(test) -> str:
    if test.method is None or not math.isfinite(test.p_value):
        return 'not tested'
    return f'U = {test.u:g}, p = {test.p_value:.3g} ({test.method})'


def plot_cka_by_severity(result: 'MechanismTests', path: str) -> str:
    """``cka_vs_severity_by_group.png``: per group the mean over its models of the final
    block's CKA at each severity (each model's CKA at a severity is its mean over the
    corruptions) with a band of ± one standard deviation over the models, each model's
    curve as a thin line, and the group mean of the models' CKA floors dashed."""
    plt = agg_pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    fig, ax = plt.subplots(figsize=(6.4, 5.2), layout=FIGURE_LAYOUT)
    try:
        x = np.asarray(result.curve_severities, dtype=float)
        styles = model_styles(len(result.labels))
        handles = []
        floors = False
        for k, label in enumerate(result.labels):
            colour, marker = styles[k]
            rows = result.rows_of(label)
            mean, spread = result.curve_by_group(label)
            for row in rows:
                ax.plot(x, result.curve[row], color=colour, linewidth=0.7, alpha=0.35)
            ax.fill_between(x, mean - spread, mean + spread, color=colour, alpha=0.18,
                            linewidth=0)
            ax.plot(x, mean, color=colour, marker=marker, linewidth=2.0, zorder=3)
            floor = result.values['cka_floor'][rows]
            if np.isfinite(floor).any():
                floors = True
                ax.axhline(np.nanmean(floor), color=colour, linestyle='--', linewidth=1.0)
            handles.append(Line2D([], [], color=colour, marker=marker, linewidth=2.0,
                                  label=wrap_to_width(f'{label} (n={len(rows)}): group mean',
                                                      2.9, 8)))
        handles += [Patch(color='grey', alpha=0.25, label='± 1 s.d. over the models'),
                    Line2D([], [], color='grey', linewidth=0.7, alpha=0.6, label='one model')]
        if floors:
            handles.append(Line2D([], [], color='grey', linestyle='--', linewidth=1.0,
                                  label='group mean of the split-half CKA floor'))
        ax.set_xticks(x)
        ax.set_xticklabels(['clean' if s == 0 else str(s) for s in result.curve_severities])
        ax.set_xlabel('severity (each model: mean over the corruptions)', fontsize=9)
        ax.set_ylabel('CKA, clean vs corrupted (final block)', fontsize=9)
        test = result.test('head_cka')
        ax.set_title(wrap_to_width(f'CKA against severity by {result.column}\n'
                                   f'B1 over the tested conditions: {_p_text(test)}', 5.8,
                                   10), fontsize=10)
        ax.tick_params(labelsize=8)
        ax.grid(True, alpha=0.3)
        fig.legend(handles=handles, loc='outside lower center', ncols=2, fontsize=8,
                   frameon=False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def plot_participation_ratio(result: 'MechanismTests', path: str) -> str:
    """``participation_ratio_by_group.png``: per group a bar of the mean clean
    participation ratio of the final block and each model's as a point; the
    Mann–Whitney test in the title."""
    plt = agg_pyplot()
    count = len(result.labels)
    fig, ax = plt.subplots(figsize=(2.2 + 2.0 * count, 4.0), layout=FIGURE_LAYOUT)
    try:
        styles = model_styles(count)
        values = result.values['pr_clean']
        for k, label in enumerate(result.labels):
            rows = result.rows_of(label)
            ax.bar([k], [np.mean(values[rows])], 0.6, color=styles[k][0], alpha=0.55)
            offsets = np.linspace(-0.18, 0.18, len(rows))
            ax.scatter(k + offsets, values[rows], color='black', s=16, zorder=3)
        ax.set_xticks(range(count))
        ax.set_xticklabels([wrap_to_width(f'{label}\n(n={len(result.members[label])})',
                                          1.6, 9) for label in result.labels], fontsize=9)
        ax.set_xlim(-0.6, count - 0.4)
        ax.set_ylabel(f'participation ratio, clean ({result.pr_convention})', fontsize=9)
        test = result.test('pr_clean')
        ax.set_title(wrap_to_width(f'Clean participation ratio by {result.column}\n'
                                   f'{_p_text(test)}', 1.6 + 2.0 * count, 10), fontsize=10)
        ax.tick_params(axis='y', labelsize=8)
        ax.grid(True, axis='y', alpha=0.3)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)
