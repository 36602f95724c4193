"""The figure of the mitigation report (:mod:`~reobench_mm.analysis.mitigation`): the
signed calibration error against severity.

``signed_ece.png`` (:func:`plot_signed_ece`): ``<prefix>/gap`` = mean confidence −
accuracy (for equal-width bins Σ_b n_b/N (conf_b − acc_b)) of each corruption against its
severity, the clean value at severity 0, a zero line (perfect calibration on average);
> 0 is overconfident, < 0 underconfident. One panel per calibration prefix present (as
evaluated, with the clean-fitted temperature), sharing the y axis so that the two can be
compared at a glance.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping

from ..evaluation.keys import CALIBRATION_PREFIXES
from .plotting import FIGURE_LAYOUT, agg_pyplot, atomic_savefig, wrap_to_width

__all__ = ['plot_signed_ece']


def plot_signed_ece(curves: Mapping[str, Mapping[str, Any]], path: str,
                    title: str = '') -> str:
    """Draw ``signed_ece.png``.

    Args:
        curves: :func:`~reobench_mm.analysis.mitigation.signed_ece` of a summary
            (``{prefix: {'key', 'clean', 'per_corruption': {corruption: {severity: v}}}}``).
        path: the PNG to write (atomically).
        title: the model's name, the first line of the figure's title.

    Raises:
        ValueError: no prefix with values.
    """
    if not curves:
        raise ValueError('no signed calibration error (calib/gap) to plot')
    plt = agg_pyplot()
    panels = list(curves)
    width = 5.0 * len(panels) + 2.2
    fig, axes = plt.subplots(1, len(panels), figsize=(width, 4.6), squeeze=False,
                             sharey=True, layout=FIGURE_LAYOUT)
    try:
        cmap = plt.get_cmap('tab20')
        markers = 'osD^v<>ph*Xd'
        severities: Dict[int, None] = {}
        for ax, prefix in zip(axes[0], panels):
            data = curves[prefix]
            for i, (name, points) in enumerate(data['per_corruption'].items()):
                xs = [0] + sorted(points)
                severities.update(dict.fromkeys(points))
                ax.plot(xs, [data['clean']] + [points[s] for s in xs[1:]],
                        marker=markers[i % len(markers)], markersize=4, linewidth=1.4,
                        color=cmap(i % 20), label=name)
            ax.axhline(0.0, color='black', linewidth=1.0, label='0 (calibrated on average)')
            ax.set_title(f'{data["key"]}: {CALIBRATION_PREFIXES.get(prefix, prefix)}',
                         fontsize=10)
            ax.set_xlabel('severity (0 = clean)')
            ax.grid(True, alpha=0.3)
        for ax in axes[0]:
            ax.set_xticks([0] + sorted(severities))
        axes[0][0].set_ylabel('mean confidence − accuracy')
        axes[0][-1].legend(loc='center left', bbox_to_anchor=(1.01, 0.5), fontsize=8,
                           frameon=False)
        head = f'{title}\n' if title else ''
        fig.suptitle(wrap_to_width(f'{head}signed calibration error (> 0 overconfident, '
                                   '< 0 underconfident)', width, 11), fontsize=11)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)
