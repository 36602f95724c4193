"""The figures that compare models: Kendall τ against severity, the effective-robustness
fits of a cross-model comparison, the rank scatter (rank by the task metric against rank
by a calibration number), and OOD against ID per shift type. They use the
helpers of :mod:`~reobench_mm.analysis.plotting` (the Agg backend, atomic saving, the
layout engine, wrapping).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .plotting import FIGURE_LAYOUT, agg_pyplot, atomic_savefig, wrap_to_width
from .results import AVG, SHIFT
from .tables import column_title

if TYPE_CHECKING:  # annotations only: these modules import scipy, the plugin line must not
    from .effective_robustness import EffectiveRobustnessFit
    from .model_set import ModelSet
    from .rank_stability import RankStability
    from .shifts import ShiftAnalysis

__all__ = ['model_styles', 'plot_kendall_tau_vs_severity', 'plot_effective_robustness',
           'plot_rank_scatter', 'plot_ood_vs_id', 'RANK_SCATTER_MEASURES']

#: The calibration numbers the rank scatter sets against the task metric, when present.
RANK_SCATTER_MEASURES = ('calib/ECE', 'calib/eAURC')
#: Models labelled by name beside their points up to this many (beyond: by their number
#: in the legend, which short labels keep apart).
_NAMED_MODELS = 8
_NAMED_LENGTH = 12


def plot_kendall_tau_vs_severity(rank: RankStability, model_set: ModelSet, path: str) -> str:
    """``kendall_tau_vs_severity.png``: τ against severity, one panel per measure,
    one faint line per corruption and the mean over corruptions in bold."""
    plt = agg_pyplot()
    ms = model_set
    fig, axes = plt.subplots(1, len(rank.measures), figsize=(4.8 * len(rank.measures) + 2, 4),
                             squeeze=False, sharey=True, layout=FIGURE_LAYOUT)
    try:
        cmap = plt.get_cmap('tab10')
        for ax, (measure, st) in zip(axes[0], rank.measures.items()):
            for i, corruption in enumerate(ms.corruptions):
                rows = [r for r in st.conditions if r.corruption == corruption]
                ax.plot([r.severity for r in rows], [r.tau for r in rows], marker='o',
                        markersize=3, linewidth=1, alpha=0.4, color=cmap(i % 10),
                        linestyle='-' if i < 10 else '--', label=corruption)
            means = [(s, v) for s, v in st.mean_tau_per_severity.items() if v is not None]
            ax.plot([s for s, _ in means], [v for _, v in means], color='black',
                    linewidth=2.5, marker='o', label='mean')
            ax.axhline(1.0, color='grey', linestyle=':', linewidth=0.8)
            ax.set_ylim(-1.05, 1.05)
            ax.set_xticks(ms.severities)
            ax.set_xlabel('severity')
            ax.set_title(wrap_to_width(f'Rank stability: {measure} ({len(ms.models)} models)',
                                       4.4, 11), fontsize=11)
            ax.grid(True, alpha=0.3)
        axes[0][0].set_ylabel('Kendall τ-b vs clean ranking')
        axes[0][-1].legend(loc='center left', bbox_to_anchor=(1.01, 0.5), fontsize=7,
                           frameon=False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def model_styles(count: int) -> List[Tuple[Any, str]]:
    """``(colour, marker)`` per model: distinct for up to 120 models (20 colours x 6
    markers), then repeating."""
    from matplotlib import colormaps
    colours = colormaps['tab10'].colors if count <= 10 else colormaps['tab20'].colors
    markers = 'osD^vP'
    return [(colours[i % len(colours)], markers[(i // len(colours)) % len(markers)])
            for i in range(count)]


def plot_effective_robustness(fits: Mapping[str, EffectiveRobustnessFit], model_set: ModelSet,
                              path: str, max_columns: int = 4) -> str:
    """``effective_robustness.png``: one panel per fit (a grid): models as points (ID
    vs OOD; one colour and marker per model, named in the legend), the fitted line,
    its bootstrap band and ``y = x``."""
    plt = agg_pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    fits = list(fits.values())
    metric = model_set.metric
    models = list(model_set.models)
    styles = dict(zip(models, model_styles(len(models))))
    n_columns = min(max_columns, len(fits))
    n_rows = int(math.ceil(len(fits) / n_columns))
    n_entries = len(models) + 3
    # the legend goes into an empty cell of the grid when there is one and it fits
    legend_in_grid = n_rows * n_columns > len(fits) and n_entries <= 20
    fig, axes = plt.subplots(n_rows, n_columns,
                             figsize=(3.6 * n_columns + (0 if legend_in_grid else 2.5),
                                      3.4 * n_rows), squeeze=False, layout=FIGURE_LAYOUT)
    try:
        for ax, fit in zip(axes.flat, fits):
            if fit.band_low is not None:
                ax.fill_between(fit.grid, fit.band_low, fit.band_high, color='tab:blue',
                                alpha=0.2, linewidth=0)
            ax.plot(fit.grid, fit.line, color='tab:blue', linewidth=1.5)
            for model, x, y in zip(fit.models, fit.id_values, fit.ood_values):
                colour, marker = styles.get(model, ('tab:red', 'o'))
                ax.scatter([x], [y], color=colour, marker=marker, s=22, zorder=3,
                           edgecolors='black', linewidths=0.3)
            low = min(fit.id_values.min(), fit.ood_values.min())
            high = max(fit.id_values.max(), fit.ood_values.max())
            ax.plot([low, high], [low, high], color='grey', linestyle=':', linewidth=0.8)
            title = {AVG: 'Avg over corruptions', SHIFT: 'shifted dataset'}.get(
                fit.name, column_title(fit.name))
            ax.set_title(wrap_to_width(title, 3.2, 9) +
                         f'\na = {fit.slope:.2f}, b = {fit.intercept:.2f}', fontsize=9)
            ax.set_xlabel(f'ID: clean {metric}', fontsize=9)
            ax.set_ylabel(f'OOD {metric}', fontsize=9)
            ax.tick_params(labelsize=8)
            ax.grid(True, alpha=0.3)
        for ax in list(axes.flat)[len(fits):]:
            ax.set_visible(False)
        first = fits[0]
        handles = [Line2D([], [], color='tab:blue', linewidth=1.5, label=f'fit ({first.space})')]
        if any(fit.band_low is not None for fit in fits):
            handles.append(Patch(color='tab:blue', alpha=0.2,
                                 label=f'{100 * first.confidence:g}% bootstrap band'))
        handles.append(Line2D([], [], color='grey', linestyle=':', linewidth=0.8,
                              label='y = x'))
        handles += [Line2D([], [], color=styles[m][0], marker=styles[m][1], linestyle='',
                           markeredgecolor='black', markeredgewidth=0.3,
                           label=wrap_to_width(m, 2.2, 7)) for m in models]
        if legend_in_grid:
            spare = axes.flat[len(fits)]
            spare.set_visible(True)
            spare.axis('off')
            spare.legend(handles=handles, loc='center', fontsize=7, frameon=False)
        else:
            columns = 1 + (len(handles) - 1) // 40  # a long model list flows into columns
            fig.legend(handles=handles, loc='outside right upper', fontsize=7, frameon=False,
                       ncols=columns)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def _condition_title(condition: str) -> str:
    if condition == AVG:
        return 'Avg over corruptions'
    name, _, rest = condition.partition('@')
    if name == 'sev':
        return f'mean over corruptions, severity {rest}'
    if rest == 'mean':
        return f'{column_title(name)} (mean)'
    return column_title(name) + (f' @ {rest}' if rest else '')


def plot_rank_scatter(model_set: ModelSet, path: str,
                      conditions: Sequence[str] = ('clean', AVG),
                      measures: Optional[Sequence[str]] = None) -> str:
    """``rank_scatter.png``: one panel per condition (row) and calibration number
    (column; default those of :data:`RANK_SCATTER_MEASURES` the models have): each
    model's rank by the task metric (x) against its rank by the calibration number (y)
    under that condition, 1 = best (highest metric, lowest error), the models labelled
    (by name up to 8 models, else by their number in the legend), ``y = x`` (the same
    order) and Kendall τ-b of the two rankings in the title.

    Raises:
        ValueError: no calibration number to rank by, or an unknown condition.
    """
    from .rank_stability import model_ranks, rank_tau  # scipy: not at import time
    ms = model_set
    measures = [m for m in (measures or RANK_SCATTER_MEASURES) if m in ms.values]
    if not measures:
        raise ValueError(f'no calibration number to set against {ms.metric} (the rank '
                         f'scatter uses {list(RANK_SCATTER_MEASURES)}; the models have '
                         f'{ms.all_measures})')
    plt = agg_pyplot()
    from matplotlib.lines import Line2D
    models = list(ms.models)
    styles = model_styles(len(models))
    n = len(models)
    # names beside the points only while they are few and short; else numbers (legend)
    named = n <= _NAMED_MODELS and max(len(m) for m in models) <= _NAMED_LENGTH
    fig, axes = plt.subplots(len(conditions), len(measures),
                             figsize=(3.9 * len(measures) + 2.4, 3.7 * len(conditions)),
                             squeeze=False, layout=FIGURE_LAYOUT)
    try:
        for row, condition in zip(axes, conditions):
            x = model_ranks(ms, ms.metric, condition)
            for ax, measure in zip(row, measures):
                y = model_ranks(ms, measure, condition)
                tau = rank_tau(ms, (ms.metric, condition), (measure, condition)).tau
                ax.plot([0.5, n + 0.5], [0.5, n + 0.5], color='grey', linestyle=':',
                        linewidth=0.8, zorder=1)
                for i, (colour, marker) in enumerate(styles):
                    ax.scatter([x[i]], [y[i]], color=colour, marker=marker, s=36, zorder=3,
                               edgecolors='black', linewidths=0.3)
                    label = wrap_to_width(models[i], 1.2, 7) if named \
                        else str(i + 1)
                    ax.annotate(label, (x[i], y[i]), xytext=(4, 3),
                                textcoords='offset points', fontsize=7, zorder=4)
                ticks = list(range(1, n + 1)) if n <= 15 else None
                for axis in (ax.xaxis, ax.yaxis):
                    if ticks:
                        axis.set_ticks(ticks)
                ax.set_xlim(0.5, n + 0.5 + 0.12 * n)  # room for the labels on the right
                ax.set_ylim(0.5, n + 0.5 + 0.06 * n)
                tau_text = 'τ undefined' if not math.isfinite(tau) else f'τ = {tau:.2f}'
                ax.set_title(wrap_to_width(f"{_condition_title(condition)}: {measure}", 3.4, 9) +
                             f'\n{tau_text}', fontsize=9)
                ax.set_xlabel(f'rank by {ms.metric} (1 = best)', fontsize=8)
                ax.set_ylabel(f'rank by {measure} (1 = best)', fontsize=8)
                ax.tick_params(labelsize=7)
                ax.grid(True, alpha=0.3)
        handles = [Line2D([], [], color='grey', linestyle=':', linewidth=0.8,
                          label='y = x (same order)')]
        handles += [Line2D([], [], color=c, marker=m, linestyle='', markeredgecolor='black',
                           markeredgewidth=0.3, label=wrap_to_width(
                               name if named else f'{i + 1}: {name}', 2.2, 7))
                    for i, (name, (c, m)) in enumerate(zip(models, styles))]
        fig.legend(handles=handles, loc='outside right upper', fontsize=7, frameon=False,
                   ncols=1 + (len(handles) - 1) // 40)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def plot_ood_vs_id(analysis: 'ShiftAnalysis', path: str, metric: str = 'metric',
                   max_columns: int = 3) -> str:
    """``ood_vs_id.png``: one panel per shift type: every (model, dataset pair) point, a
    colour per group (per model without groups) and a marker per dataset pair; the
    linear fit with its bootstrap band, the logit fit (dashed) and ``y = x``."""
    plt = agg_pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    points = analysis.points
    types = analysis.shift_types
    by_group = any(p.group for p in points)
    keys = list(dict.fromkeys((p.group or '–') if by_group else p.model for p in points))
    colours = {k: c for k, (c, _) in zip(keys, model_styles(len(keys)))}
    datasets = list(dict.fromkeys(p.dataset for p in points))
    markers = {d: 'osD^vP<>'[i % 8] for i, d in enumerate(datasets)}
    n_columns = min(max_columns, len(types))
    n_rows = int(math.ceil(len(types) / n_columns))
    fig, axes = plt.subplots(n_rows, n_columns, figsize=(4.2 * n_columns + 2.6, 3.8 * n_rows),
                             squeeze=False, layout=FIGURE_LAYOUT)
    try:
        for ax, shift_type in zip(axes.flat, types):
            members = [p for p in points if p.shift_type == shift_type]
            linear = analysis.fits['linear'].get(shift_type)
            logit = analysis.fits['logit'].get(shift_type)
            if linear is not None:
                if linear.band_low is not None:  # a metric lies in 0..100
                    ax.fill_between(linear.grid, np.clip(linear.band_low, 0, 100),
                                    np.clip(linear.band_high, 0, 100), color='tab:blue',
                                    alpha=0.2, linewidth=0)
                ax.plot(linear.grid, linear.line, color='tab:blue', linewidth=1.5)
            if logit is not None:
                ax.plot(logit.grid, logit.line, color='tab:purple', linewidth=1.2,
                        linestyle='--')
            for p in members:
                key = (p.group or '–') if by_group else p.model
                ax.scatter([p.id_value], [p.ood_value], color=colours[key],
                           marker=markers[p.dataset], s=30, zorder=3, edgecolors='black',
                           linewidths=0.3)
            values = [v for p in members for v in (p.id_value, p.ood_value)]
            low, high = min(values), max(values)
            ax.plot([low, high], [low, high], color='grey', linestyle=':', linewidth=0.8)
            # the points' range: a band of few models can reach far beyond it
            pad = 0.08 * max(high - low, 1.0)
            ax.set_xlim(low - pad, high + pad)
            ax.set_ylim(low - pad, high + pad)
            title = f'{shift_type} ({len(members)} points)'
            if linear is not None:
                title += f'\na = {linear.slope:.2f}, b = {linear.intercept:.2f}'
            ax.set_title(title, fontsize=9)
            ax.set_xlabel(f'ID {metric}', fontsize=9)
            ax.set_ylabel(f'OOD {metric}', fontsize=9)
            ax.tick_params(labelsize=8)
            ax.grid(True, alpha=0.3)
        for ax in list(axes.flat)[len(types):]:
            ax.set_visible(False)
        handles = [Line2D([], [], color='tab:blue', linewidth=1.5, label='fit (linear)'),
                   Patch(color='tab:blue', alpha=0.2, label='bootstrap band over models'),
                   Line2D([], [], color='tab:purple', linewidth=1.2, linestyle='--',
                          label='fit (logit)'),
                   Line2D([], [], color='grey', linestyle=':', linewidth=0.8, label='y = x')]
        handles += [Line2D([], [], color=colours[k], marker='o', linestyle='',
                           markeredgecolor='black', markeredgewidth=0.3,
                           label=wrap_to_width(str(k), 2.2, 7)) for k in keys]
        handles += [Line2D([], [], color='white', marker=markers[d], linestyle='',
                           markeredgecolor='black', label=wrap_to_width(d, 2.2, 7))
                    for d in datasets]
        fig.legend(handles=handles, loc='outside right upper', fontsize=7, frameon=False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)
