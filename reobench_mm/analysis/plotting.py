"""Every figure of the package, drawn with matplotlib on the Agg backend and saved as PNG
atomically (:func:`atomic_savefig`).

- one model's report (:func:`~reobench_mm.analysis.report.write_report`): the metric
  against severity, the drop by corruption, ECE against severity, reliability diagrams
  (:func:`plot_reliability_diagrams`) and risk-coverage curves;
- several models: :mod:`~reobench_mm.analysis.model_plots` (Kendall τ against severity,
  the effective-robustness fits, OOD against ID per shift type), with these helpers;
- the data-budget report (:mod:`~reobench_mm.analysis.data_budget`) and the
  representation drift (:mod:`~reobench_mm.robustness.drift`).

Every figure uses the layout engine :data:`FIGURE_LAYOUT`, so that titles, labels and
legends outside the axes do not overlap; long names are wrapped with
:func:`wrap_to_width`. matplotlib is imported on first use (:func:`agg_pyplot`).
"""
from __future__ import annotations

import io
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from reobench_corruptions.condition import Condition
from ..evaluation.keys import CALIBRATION_PREFIX, CALIBRATION_PREFIXES, ECE, ECE_KEY, metric_key
from ..fileio import atomic_write_bytes
from .intervals import available_intervals
from .results import RobustnessSummary, check_condition


__all__ = [
    'FIGURE_LAYOUT', 'agg_pyplot', 'atomic_savefig', 'wrap_to_width', 'plot_severity_curves',
    'plot_drop_by_corruption', 'plot_ece_vs_severity', 'plot_reliability_by_condition',
    'plot_risk_coverage', 'plot_reliability_diagrams', 'plot_data_budget',
    'plot_representation_drift'
]

_CATEGORY_COLOURS = {'environmental': '#4c9be8', 'sensor': '#e8894c', 'geometric': '#5cb85c'}


# ----------------------------------------------------------------------------------
# Figures and files
# ----------------------------------------------------------------------------------
def agg_pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (imported on first use,
    so that importing reobench_mm does not import matplotlib)."""
    import matplotlib
    matplotlib.use('Agg', force=True)
    import matplotlib.pyplot as plt
    return plt


#: Layout engine of every figure the package draws: it sizes the margins so that
#: titles, labels, tick labels and legends outside the axes do not overlap.
FIGURE_LAYOUT = 'constrained'


def wrap_to_width(text: str, inches: float, fontsize: float = 10.0) -> str:
    """``text`` broken into lines that fit ``inches`` at ``fontsize`` points (an
    average glyph is taken as 0.6 em wide; words longer than a line are broken too).
    For titles built from names of any length."""
    import textwrap
    columns = max(12, int(inches * 72 / (0.6 * fontsize)))
    return '\n'.join(textwrap.fill(line, columns, break_on_hyphens=False)
                     for line in text.split('\n'))


def atomic_savefig(fig, path: str, dpi: int = 120) -> str:
    """Save a matplotlib figure as PNG atomically (no software/time metadata), with
    the permissions of a plain file write (see :func:`reobench_mm.fileio.atomic_open`)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', dpi=dpi, bbox_inches='tight',
                metadata={'Software': None})
    return atomic_write_bytes(path, buffer.getvalue())


# ----------------------------------------------------------------------------------
# One model
# ----------------------------------------------------------------------------------
def _interval_title(intervals: Optional[dict], what: str) -> str:
    if intervals is None:
        return ''
    seeds = intervals.get('corruption_seeds')
    draws = f' and {len(seeds["seeds"])} seeds of the random corruptions' if seeds else ''
    return f'\n({what}: {100 * intervals["level"]:g} % bootstrap intervals over ' \
        f'{intervals["images"]} images{draws})'


def plot_severity_curves(summary: RobustnessSummary, path: str) -> str:
    """``severity_curves.png``: the metric against severity, one line per
    corruption, the clean metric as a dashed line; with bootstrap intervals, a band
    around each line and around the clean line."""
    plt = agg_pyplot()
    fig, ax = plt.subplots(figsize=(8, 5), layout=FIGURE_LAYOUT)
    intervals = available_intervals(summary)
    try:
        cmap = plt.get_cmap('tab20')
        markers = 'osD^v<>ph*Xd'
        for i, name in enumerate(summary.corruptions):
            points = summary.per_severity[name]
            ax.plot(list(points), list(points.values()), marker=markers[i % len(markers)],
                    color=cmap(i % 20), label=name, linewidth=1.5, markersize=5)
            if intervals is not None:
                bands = intervals['per_corruption'][name]['severities']
                kept = [s for s in points if bands.get(str(s))]
                if kept:
                    ax.fill_between(kept, [bands[str(s)][0] for s in kept],
                                    [bands[str(s)][1] for s in kept], color=cmap(i % 20),
                                    alpha=0.12, linewidth=0)
        ax.axhline(summary.clean, color='black', linestyle='--', linewidth=1.2,
                   label=f'clean ({summary.clean:.2f})')
        if intervals is not None and intervals.get('clean'):
            ax.axhspan(*intervals['clean'], color='black', alpha=0.08, linewidth=0)
        ax.set_xticks(list(summary.severities))
        ax.set_xlabel('severity')
        ax.set_ylabel(summary.metric)
        ax.set_title(f'{summary.metric} against corruption severity'
                     + _interval_title(intervals, 'bands'))
        ax.grid(True, alpha=0.3)
        ax.legend(loc='center left', bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def plot_drop_by_corruption(summary: RobustnessSummary, path: str) -> str:
    """``drop_by_corruption.png``: bars of clean − per-corruption mean, largest drop
    on top, coloured by category, ΔTP as a dashed line."""
    plt = agg_pyplot()
    drops = sorted(((summary.clean - summary.per_corruption[n], n)
                    for n in summary.corruptions), key=lambda t: (-t[0], t[1]))
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(drops) + 1.8), layout=FIGURE_LAYOUT)
    intervals = available_intervals(summary)
    try:
        names = [n for _, n in drops]
        values = [d for d, _ in drops]
        colours = [_CATEGORY_COLOURS.get(summary.category(n), 'grey') for n in names]
        errors = None
        if intervals is not None:
            bounds = [intervals['per_corruption'][n]['drop'] or [v, v]
                      for n, v in zip(names, values)]
            errors = [[max(v - lo, 0.0) for v, (lo, _) in zip(values, bounds)],
                      [max(hi - v, 0.0) for v, (_, hi) in zip(values, bounds)]]
        ax.barh(range(len(names)), values, color=colours, xerr=errors,
                error_kw=dict(ecolor='black', elinewidth=0.8, capsize=2))
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names)
        ax.invert_yaxis()
        delta = ax.axvline(summary.delta_tp, color='black', linestyle='--', linewidth=1.0,
                           label=f'ΔTP = {summary.delta_tp:.2f}')
        ax.axvline(0.0, color='black', linewidth=0.6)
        ax.set_xlabel(f'clean − corrupted {summary.metric} (mean over severities)')
        ax.set_title('Drop by corruption' + _interval_title(intervals, 'bars'))
        from matplotlib.patches import Patch
        present = [c for c in _CATEGORY_COLOURS
                   if any(summary.category(n) == c for n in names)]
        ax.legend(handles=[Patch(color=_CATEGORY_COLOURS[c], label=c) for c in present] +
                  [delta], loc='center left', bbox_to_anchor=(1.01, 0.5), fontsize=8,
                  frameon=False)
        ax.grid(True, axis='x', alpha=0.3)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def plot_ece_vs_severity(summary: RobustnessSummary, path: str) -> str:
    """``ece_vs_severity.png``: ECE against severity (0 = clean) per corruption, one
    panel per calibration prefix present (as evaluated, temperature-scaled)."""
    prefixes = [p for p in CALIBRATION_PREFIXES if metric_key(p, ECE) in summary.extra]
    if not prefixes:
        raise ValueError(f'the summary has no calibration metrics ({ECE_KEY})')
    plt = agg_pyplot()
    fig, axes = plt.subplots(1, len(prefixes), figsize=(5.5 * len(prefixes) + 2, 4.5),
                             squeeze=False, sharey=True, layout=FIGURE_LAYOUT)
    try:
        cmap = plt.get_cmap('tab20')
        for ax, prefix in zip(axes[0], prefixes):
            key = metric_key(prefix, ECE)
            clean = summary.conditions[Condition(protocol=summary.protocol)].extra[key]
            for i, name in enumerate(summary.corruptions):
                points = sorted((s, r.extra[key]) for (n, s), r in summary.conditions.items()
                                if n == name)
                ax.plot([0] + [s for s, _ in points], [clean] + [v for _, v in points],
                        marker='o', markersize=4, linewidth=1.4, color=cmap(i % 20),
                        label=name)
            ax.axhline(clean, color='black', linestyle='--', linewidth=1.0, label='clean')
            ax.set_xticks([0] + list(summary.severities))
            ax.set_xlabel('severity (0 = clean)')
            ax.set_title(f'{key}: {CALIBRATION_PREFIXES[prefix]}')
            ax.grid(True, alpha=0.3)
        axes[0][0].set_ylabel('ECE')
        axes[0][-1].legend(loc='center left', bbox_to_anchor=(1.01, 0.5), fontsize=8,
                           frameon=False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def _clean_and_strongest(summary: RobustnessSummary,
                         details: Mapping[Any, Mapping[str, Any]],
                         prefix: str) -> List[Tuple[str, Mapping[str, Any]]]:
    """``[(label, details)]`` of the clean condition and of the strongest evaluated
    severity of each corruption, for the calibration metric of ``prefix`` (``details``
    keyed by conditions as :func:`~reobench_mm.analysis.results.check_condition` reads
    them)."""
    details = {check_condition(c, summary.protocol): d for c, d in details.items()}
    rows = [('clean', details[Condition(protocol=summary.protocol)][prefix])]
    for name in summary.corruptions:
        strongest = max(c.severity for c in details if c.corruption == name)
        rows.append((f'{name} @ {strongest}',
                     details[Condition(name, strongest, protocol=summary.protocol)][prefix]))
    return rows


def plot_reliability_by_condition(summary: RobustnessSummary,
                                  details: Mapping[Any, Mapping[str, Any]], path: str,
                                  prefix: str = CALIBRATION_PREFIX) -> str:
    """Reliability diagrams of the clean condition and of the strongest evaluated
    severity of each corruption, from the calibration details of each condition
    (``{condition: {prefix: details}}`` as the sweep records them)."""
    return plot_reliability_diagrams(
        dict(_clean_and_strongest(summary, details, prefix)), path,
        title=f'Reliability: clean vs the strongest severity ({prefix}, '
        f'{CALIBRATION_PREFIXES.get(prefix, prefix)})')


def plot_risk_coverage(summary: RobustnessSummary, details: Mapping[Any, Mapping[str, Any]],
                       path: str, prefix: str = CALIBRATION_PREFIX) -> str:
    """``risk_coverage.png``: selective risk against coverage (pixels accepted by
    decreasing confidence) for the clean condition and the strongest evaluated severity
    of each corruption, AURC in the legend."""
    plt = agg_pyplot()
    fig, ax = plt.subplots(figsize=(8, 5), layout=FIGURE_LAYOUT)
    try:
        cmap = plt.get_cmap('tab20')
        rows = _clean_and_strongest(summary, details, prefix)
        colours = ['black'] + [cmap(i % 20) for i in range(len(rows) - 1)]
        for index, ((label, data), colour) in enumerate(zip(rows, colours)):
            curve = data['risk_coverage']
            aurc = (data.get('metrics') or {}).get('AURC')
            text = f'{label} (AURC {aurc:.4f})' if aurc is not None else label
            ax.plot(curve['coverage'], curve['risk'], color=colour, linewidth=1.4,
                    label=text, linestyle='--' if index == 0 else '-')  # clean first
        ax.set_xlim(0, 1)
        ax.set_ylim(bottom=0)
        ax.set_xlabel('coverage (most confident pixels first)')
        ax.set_ylabel('selective risk (error rate)')
        ax.set_title(f'Risk–coverage: clean vs the strongest severity ({prefix})',
                     fontsize=11)
        ax.grid(True, alpha=0.3)
        ax.legend(loc='center left', bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


#: Legend label of each element of a reliability diagram, in legend order.
RELIABILITY_LABELS = {
    'accuracy': 'accuracy of the bin\n(bar height)',
    'under': 'part of the bar above the mean\nconfidence (underconfident)',
    'over': 'mean confidence above the\naccuracy (overconfident)',
    'diagonal': 'perfect calibration\n(accuracy = confidence)',
}


def _reliability_panel(ax, left: np.ndarray, width: np.ndarray, accuracy: np.ndarray,
                       confidence: np.ndarray) -> List[Any]:
    """Draw one reliability diagram on ``ax``; returns the artists drawn, each labelled
    from :data:`RELIABILITY_LABELS`. Each bin with pixels is one bar of its accuracy:
    solid up to the lower of accuracy and mean confidence, then the gap up to the higher
    one, hatched: blue inside the bar where the accuracy is higher (underconfident), red
    above it where the mean confidence is higher (overconfident). No two areas overlap,
    so every colour on the panel is one legend entry."""
    labels, drawn = RELIABILITY_LABELS, []
    under, over = accuracy > confidence, confidence > accuracy
    for mask, bottom, top, style in (
            (np.ones(len(left), bool), 0.0, np.minimum(accuracy, confidence),
             dict(color='#4c9be8', edgecolor='#1f4e79', linewidth=0.6,
                  label=labels['accuracy'])),
            (under, confidence, accuracy, dict(color='#a9cdf3', hatch='\\\\',
                                               edgecolor='#1f4e79', linewidth=0.6,
                                               label=labels['under'])),
            (over, accuracy, confidence, dict(color='#f7c4be', hatch='//', edgecolor='#b03020',
                                              linewidth=0.0, label=labels['over']))):
        if mask.any():
            bottom = np.broadcast_to(bottom, mask.shape)[mask]
            drawn.append(ax.bar(left[mask], np.asarray(top)[mask] - bottom, bottom=bottom,
                                width=width[mask], align='edge', **style))
    drawn += ax.plot([0, 1], [0, 1], color='black', linestyle='--', linewidth=1.0,
                     label=labels['diagonal'])
    ax.set_axisbelow(True)  # the grid under the bars
    return drawn


def plot_reliability_diagrams(panels: Mapping[str, dict], path: str, title: str = '') -> str:
    """Draw one reliability diagram per entry of ``panels`` (a grid of up to four per
    row, the ECE in each panel's title, one legend for all) and save a PNG atomically.

    Each bin with pixels is a bar of its accuracy; the gap to the bin's mean confidence
    is hatched, blue inside the bar (accuracy above confidence) or red above it
    (confidence above accuracy); the dashed diagonal is perfect calibration. The legend
    names every element drawn (:data:`RELIABILITY_LABELS`).

    Args:
        panels (Mapping[str, dict]): Panel title -> the ``last_details`` of
            :class:`~reobench_mm.evaluation.metrics.SegCalibrationMetric` (or its
            ``'reliability'`` entry, or
            :meth:`~reobench_mm.evaluation.functional.PixelCalibrationStats.reliability_diagram`).
        path (str): Output ``.png`` path.
        title (str): Figure title.

    Returns:
        str: ``path``.
    """
    if not panels:
        raise ValueError('panels is empty: give at least one reliability diagram')
    plt = agg_pyplot()
    columns = min(len(panels), 4)
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns + 0.6, 3.4 * rows + 0.9),
                             squeeze=False, sharex=True, sharey=True, layout=FIGURE_LAYOUT)
    # room between the suptitle and the two-line panel titles (fixed-aspect panels
    # leave the default padding a pixel short)
    fig.get_layout_engine().set(h_pad=0.08)
    try:
        spare = list(axes.ravel()[len(panels):])
        for ax in spare:
            ax.set_visible(False)
        handles: Dict[str, Any] = {}  # legend label -> the first artist drawn with it
        for index, (ax, (name, panel)) in enumerate(zip(axes.ravel(), panels.items())):
            data = panel.get('reliability', panel)
            missing = {'bin_edges', 'accuracy', 'mean_confidence'} - set(data)
            if missing:
                raise ValueError(f'panel {name!r} is not reliability-diagram data '
                                 f'(missing {sorted(missing)})')
            edges = np.asarray(data['bin_edges'], dtype=float)
            accuracy = np.array([np.nan if v is None else v for v in data['accuracy']], float)
            confidence = np.array([np.nan if v is None else v
                                   for v in data['mean_confidence']], float)
            filled = ~np.isnan(accuracy) & ~np.isnan(confidence)
            ece = data.get('ECE')
            ece_text = f'ECE = {ece:.4f}' if ece is not None else 'ECE = n/a'
            for artist in _reliability_panel(ax, edges[:-1][filled], np.diff(edges)[filled],
                                             accuracy[filled], confidence[filled]):
                handles.setdefault(artist.get_label(), artist)
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_aspect('equal')
            ax.set_xticks([0, 0.25, 0.5, 0.75, 1])
            ax.set_xticklabels(['0', '', '0.5', '', '1'])
            ax.set_yticks([0, 0.25, 0.5, 0.75, 1])
            ax.set_yticklabels(['0', '', '0.5', '', '1'])
            ax.tick_params(labelsize=8)
            # shared axes: labels on the left column and on the lowest panel of each column
            if index % columns == 0:
                ax.set_ylabel('accuracy', fontsize=9)
            if index + columns >= len(panels):
                ax.set_xlabel('confidence', fontsize=9)
                ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_title(wrap_to_width(f'{name}\n{ece_text}', 2.9, 9), fontsize=9)
            ax.grid(True, alpha=0.3)
        in_order = [handles[t] for t in RELIABILITY_LABELS.values() if t in handles]
        if spare:  # the legend in the first empty cell of the grid
            spare[0].set_visible(True)
            spare[0].axis('off')
            spare[0].legend(handles=in_order, loc='center', fontsize=8, frameon=False)
        else:
            fig.legend(handles=in_order, loc='outside lower center',
                       ncols=len(handles) if columns >= 4 else min(2, columns), fontsize=8,
                       frameon=False)
        if title:
            fig.suptitle(wrap_to_width(title, fig.get_figwidth() - 0.2, 11), fontsize=11)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


# ----------------------------------------------------------------------------------
# Data budget and representation drift
# ----------------------------------------------------------------------------------
def plot_data_budget(doc: Mapping[str, Any], path: str) -> str:
    """Metric (and ECE when present) vs fraction, log x axis; one colour per model,
    solid clean, dashed corrupted average; one legend beside the panels."""
    plt = agg_pyplot()
    from matplotlib.lines import Line2D
    panels = [('clean', 'corrupted_avg', doc['metric'])]
    if any(row['ece_clean'] is not None for row in doc['rows']):  # the report has ECE
        panels.append(('ece_clean', 'ece_corrupted_avg', 'ECE'))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels) + 2.4, 4),
                             squeeze=False, layout=FIGURE_LAYOUT)
    fractions = sorted({r['fraction'] for r in doc['rows']})
    try:
        for ax, (clean_key, corrupted_key, label) in zip(axes[0], panels):
            for index, model in enumerate(doc['models']):
                rows = sorted((r for r in doc['rows'] if r['model'] == model),
                              key=lambda r: r['fraction'])
                x = [r['fraction'] for r in rows]
                for key, style in ((clean_key, '-o'), (corrupted_key, '--s')):
                    y = [np.nan if r[key] is None else r[key] for r in rows]
                    ax.plot(x, y, style, color=f'C{index % 10}', markersize=4)
            ax.set_xscale('log')
            ax.set_xticks(fractions)
            ax.set_xticklabels(_fraction_labels(fractions))
            ax.minorticks_off()
            ax.set_xlabel('training fraction (log scale)')
            ax.set_ylabel(label)
            ax.set_title(f'{label} vs training data')
            ax.grid(alpha=0.3)
        handles = [Line2D([], [], color=f'C{i % 10}', linewidth=2,
                          label=wrap_to_width(str(model), 2.2, 8))
                   for i, model in enumerate(doc['models'])]
        handles += [Line2D([], [], color='black', linestyle='-', marker='o', markersize=4,
                           label='clean'),
                    Line2D([], [], color='black', linestyle='--', marker='s', markersize=4,
                           label='corrupted avg')]
        fig.legend(handles=handles, loc='outside right center', fontsize=8, frameon=False,
                   handlelength=3)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def _fraction_labels(fractions: Sequence[float], min_ratio: float = 1.5) -> List[str]:
    """Tick labels of the sorted ``fractions`` on a log axis: from the largest down, a
    fraction within ``min_ratio`` (a factor) of the last labelled one gets an empty label,
    so that labels do not run into each other."""
    labels, last = [''] * len(fractions), None
    for index in range(len(fractions) - 1, -1, -1):
        if last is None or fractions[index] * min_ratio <= last:
            labels[index], last = f'{fractions[index]:g}', fractions[index]
    return labels


def _drift_floor(document: Mapping[str, Any], block: str) -> List[float]:
    """The distinct finite split-half floors (``cka_floor``) the conditions report for
    ``block``, sorted (one value when, as the drift driver computes it from the clean
    images alone, every condition reports the same)."""
    values = {float(c['blocks'][block]['cka_floor']) for c in document['conditions']
              if block in c['blocks'] and c['blocks'][block].get('cka_floor') is not None}
    return sorted(v for v in values if math.isfinite(v))


#: Legend labels of the reference lines of the representation-drift plot.
DRIFT_LABELS = {
    'identity': 'CKA = 1 (no drift)',
    'floor': 'split-half noise floor\n(CKA of two halves of the\nclean images)',
    'floor_range': 'split-half noise floor, range\nover the conditions',
}


def plot_representation_drift(document: Dict[str, Any], path: str) -> str:
    """CKA against severity, one line per corruption, one panel per block (four panels a
    row), the corruptions and the reference lines named in one legend beside the panels.

    Each panel draws CKA = 1 (identical representations) and, where the conditions hold
    it, the block's split-half noise floor (``cka_floor``: the CKA between two random
    halves of the clean images, the level of no per-image correspondence left), its value
    in the panel's title; a floor that differs between conditions is drawn as the band
    of its values."""
    plt = agg_pyplot()
    blocks = [b['name'] for b in document['blocks']]
    corruptions = list(dict.fromkeys(c['corruption'] for c in document['conditions']))
    columns = min(len(blocks), 4)
    rows = -(-len(blocks) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.4 * columns + 2.2, 3.3 * rows),
                             squeeze=False, sharey=True, layout=FIGURE_LAYOUT)
    try:
        cmap = plt.get_cmap('tab20')
        markers = 'osD^v<>ph*Xd'
        severities = sorted({c['severity'] for c in document['conditions']})
        for ax in axes.flat[len(blocks):]:
            ax.set_visible(False)
        references: Dict[str, Any] = {}  # legend label -> the first artist drawn with it
        for panel, (ax, block) in enumerate(zip(axes.flat, blocks)):
            for i, name in enumerate(corruptions):
                points = sorted((c['severity'], c['blocks'][block]['cka'])
                                for c in document['conditions'] if c['corruption'] == name)
                xs = [s for s, _ in points]
                ys = [np.nan if v is None else v for _, v in points]
                ax.plot(xs, ys, marker=markers[i % len(markers)], color=cmap(i % 20),
                        label=name, linewidth=1.4, markersize=5)
            line = ax.axhline(1.0, color='black', linestyle='--', linewidth=0.8,
                              label=DRIFT_LABELS['identity'])
            references.setdefault(DRIFT_LABELS['identity'], line)
            floor = _drift_floor(document, block)
            title = wrap_to_width(block, 3.0, 9)
            if len(floor) == 1:
                line = ax.axhline(floor[0], color='dimgrey', linestyle=':', linewidth=1.6,
                                  label=DRIFT_LABELS['floor'])
                references.setdefault(DRIFT_LABELS['floor'], line)
                title += f'\nnoise floor {floor[0]:.3f}'
            elif floor:
                band = ax.axhspan(floor[0], floor[-1], color='grey', alpha=0.25,
                                  linewidth=0, label=DRIFT_LABELS['floor_range'])
                references.setdefault(DRIFT_LABELS['floor_range'], band)
                title += f'\nnoise floor {floor[0]:.3f} to {floor[-1]:.3f}'
            ax.set_title(title, fontsize=9)
            ax.set_xlabel('severity', fontsize=9)
            ax.set_xticks(severities)
            ax.tick_params(labelsize=8)
            ax.grid(True, alpha=0.3)
            if panel % columns == 0:
                ax.set_ylabel('linear CKA (clean vs corrupted)', fontsize=9)
        handles = [h for h in axes.flat[0].get_lines() if h.get_label() in corruptions]
        handles += [references[label] for label in DRIFT_LABELS.values() if label in references]
        fig.legend(handles=handles, loc='outside right center', fontsize=8, frameon=False)
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)
