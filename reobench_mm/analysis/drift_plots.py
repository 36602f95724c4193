"""The drift–confidence figure of the representation-drift tool: per condition, each
image's representation drift against its mean confidence, coloured by its accuracy
(:func:`plot_drift_confidence`). Uses the helpers of
:mod:`~reobench_mm.analysis.plotting` (the Agg backend, atomic saving, the layout engine,
wrapping).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from ..evaluation.functional.drift_confidence import OVERCONFIDENCE_THRESHOLD
from .plotting import FIGURE_LAYOUT, agg_pyplot, atomic_savefig, wrap_to_width

__all__ = ['plot_drift_confidence']

#: Panels per row.
_COLUMNS = 3


def _rho_text(label: str, stats: Mapping[str, Any]) -> str:
    if stats.get('rho') is None:
        # the note's reason, short: 'drift is constant', '2 samples'
        reason = (stats.get('note') or '').split(':')[0].split(' over ')[0]
        return f'ρ({label}) undefined ({reason})' if reason else f'ρ({label}) undefined'
    p = stats.get('p_value')
    return f'ρ({label}) = {stats["rho"]:+.2f} (p {"n/a" if p is None else f"{p:.2g}"})'


def _coupled_conditions(document: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    conditions = [c for c in document.get('conditions', []) if c.get('drift_confidence')]
    if not conditions:
        raise ValueError('the document has no drift_confidence results (written by '
                         'representation_drift with drift_confidence enabled, format '
                         'reobench_mm.representation_drift/3 or later); nothing to plot')
    return conditions


def plot_drift_confidence(document: Dict[str, Any], path: str) -> str:
    """``drift_confidence.png``: one panel per condition, one point per image: its drift
    ``‖x_corr − x_clean‖₂`` (x) against its mean confidence (y), coloured by its
    accuracy (one colour scale, 0–1, for every panel). Each panel marks the median drift
    and the 0.9 confidence of the overconfident-drift fraction, and its title gives
    Spearman ρ of drift with confidence and with accuracy (p-values), the fraction and
    the number of images. Images without valid pixels are left out.

    Raises:
        ValueError: a document without drift–confidence results.
    """
    conditions = _coupled_conditions(document)
    plt = agg_pyplot()
    columns = min(len(conditions), _COLUMNS)
    rows = -(-len(conditions) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns + 1.6, 3.9 * rows),
                             squeeze=False, sharey=True, layout=FIGURE_LAYOUT)
    try:
        cmap = plt.get_cmap('viridis')
        scatter = None
        for ax in axes.flat[len(conditions):]:
            ax.set_visible(False)
        for panel, (ax, condition) in enumerate(zip(axes.flat, conditions)):
            coupling = condition['drift_confidence']
            images = coupling['per_image']
            keep = [i for i, n in enumerate(images['num_pixels']) if n > 0]
            drift = np.array([images['drift'][i] for i in keep], dtype=float)
            confidence = np.array([images['confidence'][i] for i in keep], dtype=float)
            accuracy = np.array([images['accuracy'][i] for i in keep], dtype=float)
            scatter = ax.scatter(drift, confidence, c=accuracy, cmap=cmap, vmin=0.0, vmax=1.0,
                                 s=28, edgecolors='black', linewidths=0.4, zorder=3)
            median: Optional[float] = coupling.get('median_drift')
            if median is not None:
                ax.axvline(median, color='dimgrey', linestyle='--', linewidth=1.0,
                           label='median drift (split of the overconfident-drift fraction)')
            ax.axhline(OVERCONFIDENCE_THRESHOLD, color='firebrick', linestyle=':',
                       linewidth=1.2,
                       label=f'confidence {OVERCONFIDENCE_THRESHOLD} (its per-pixel threshold)')
            fraction = coupling.get('overconfident_drift_fraction')
            title = (f'{condition["condition"]} (n = {coupling["num_samples"]})\n'
                     f'{_rho_text("drift, conf.", coupling["spearman_drift_confidence"])}\n'
                     f'{_rho_text("drift, acc.", coupling["spearman_drift_accuracy"])}\n'
                     'overconfident drift '
                     f'{"n/a" if fraction is None else f"{fraction:.3f}"}')
            ax.set_title(wrap_to_width(title, 3.9, 9), fontsize=9)
            ax.set_xlabel(wrap_to_width(f'drift ‖x_corr − x_clean‖₂ ({coupling["layer"]})',
                                        3.9, 9), fontsize=9)
            ax.set_ylim(0.0, 1.03)
            ax.tick_params(labelsize=8)
            ax.grid(True, alpha=0.3)
            if panel % columns == 0:
                ax.set_ylabel('mean confidence (max softmax)', fontsize=9)
        colorbar = fig.colorbar(scatter, ax=axes.ravel().tolist(),
                                shrink=0.85 if rows == 1 else 0.5, pad=0.02)
        colorbar.set_label('accuracy (fraction of pixels correct)', fontsize=9)
        colorbar.ax.tick_params(labelsize=8)
        handles = [h for h in axes.flat[0].get_lines()]
        fig.legend(handles=handles, loc='outside lower center', ncols=len(handles),
                   fontsize=8, frameon=False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)
