"""Reports of a robustness sweep: ``results.json``, ``results.csv``, ``report.md``,
plots, and the several-model table of ``tools/robustness_table.py``.

One call writes everything for one model::

    from reobench_mm.evaluation import make_provenance, write_report
    prov = make_provenance(model='SatMAE', backbone='ViT-L', task='segmentation',
                           config='configs/...py', checkpoint='satmae.pth', seed=0)
    report = write_report('work_dirs/robustness/satmae', results, task='segmentation',
                          provenance=prov)
    report.summary.delta_tp, report.files['results.json']

``results.json`` holds ``{"format", "numbers", "provenance"}``: ``numbers`` is
:meth:`RobustnessSummary.to_dict` and depends on the results only (same inputs ->
byte-identical file); ``provenance`` holds what it is given (model, config hash,
checkpoint SHA-256, seed, protocol, package versions) and a time only when asked
(``make_provenance(record_time=True)``). Every file is written atomically (a
temporary file in the same folder, then ``os.replace``).
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import os.path as osp
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..fileio import atomic_write_bytes, atomic_write_text, file_sha256
from ..version import VERSION_PACKAGES, package_versions
from .robustness import (CLEAN, CLEAN_CONDITION, REOBENCH_TABLE_ORDER, Condition,
                         ConditionResult, RobustnessSummary, _jsonable, aggregate,
                         corruption_order, engine_to_paper_name, normalize_results,
                         results_from_jsonable, robustness_scores)

__all__ = [
    'RESULTS_FORMAT', 'RESULT_FILES', 'PLOT_FILES', 'VERSION_PACKAGES', 'column_title',
    'atomic_write_text', 'atomic_write_bytes', 'atomic_savefig', 'agg_pyplot', 'FIGURE_LAYOUT',
    'wrap_to_width', 'file_sha256',
    'package_versions', 'make_provenance', 'results_document', 'write_results_json',
    'results_csv_text', 'write_results_csv', 'render_report_md', 'plot_severity_curves',
    'plot_drop_by_corruption', 'plot_ece_vs_severity', 'plot_reliability_by_condition',
    'plot_risk_coverage', 'calibration_keys', 'CALIBRATION_METRICS', 'CALIBRATION_PREFIXES',
    'paper_table_lines', 'Report', 'write_report', 'load_results_json',
    'load_condition_results', 'summary_from_results_json', 'ComparisonTable',
    'build_comparison', 'comparison_markdown', 'comparison_csv_text', 'write_comparison'
]

RESULTS_FORMAT = 'reobench_mm.robustness_results/1'
RESULT_FILES = ('results.json', 'results.csv', 'report.md')
PLOT_FILES = ('severity_curves.png', 'drop_by_corruption.png')
#: Calibration metrics (``SegCalibrationMetric`` / ``RotatedDetectionCalibrationMetric``
#: names), table order, and the prefixes the sweep gives them.
CALIBRATION_METRICS = ('ECE', 'gap', 'NLL', 'Brier', 'cwECE', 'AURC', 'eAURC', 'acc@90cov')
CALIBRATION_PREFIXES = {'calib': 'as evaluated', 'calib_ts': 'temperature-scaled'}
ECE_PLOT_FILE = 'ece_vs_severity.png'

#: Version keys of :func:`package_versions` -> distribution names tried in order.

_CATEGORY_COLOURS = {'environmental': '#4c9be8', 'sensor': '#e8894c', 'geometric': '#5cb85c'}


def column_title(name: str) -> str:
    """Display title of a corruption column (``'salt_pepper_noise'`` -> ``'Salt Pepper
    Noise'``)."""
    return name.replace('_', ' ').title()


def _fmt(value: Optional[float], digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return '–'
    return f'{value:.{digits}f}'


# ----------------------------------------------------------------------------------
# Atomic writes
# ----------------------------------------------------------------------------------
def atomic_savefig(fig, path: str, dpi: int = 120) -> str:
    """Save a matplotlib figure as PNG atomically (no software/time metadata), with
    the permissions of a plain file write (see :func:`reobench_mm.fileio.atomic_open`)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', dpi=dpi, bbox_inches='tight',
                metadata={'Software': None})
    return atomic_write_bytes(path, buffer.getvalue())


# ----------------------------------------------------------------------------------
# Provenance
# ----------------------------------------------------------------------------------
def make_provenance(*, model: Optional[str] = None, backbone: Optional[str] = None,
                    task: Optional[str] = None, config: Optional[str] = None,
                    config_text: Optional[str] = None, checkpoint: Optional[str] = None,
                    checkpoint_sha256: Optional[str] = None, hash_checkpoint: bool = True,
                    seed: Optional[int] = None, protocol: str = 'reobench',
                    versions: Optional[Mapping[str, Optional[str]]] = None,
                    extra: Optional[Mapping[str, Any]] = None,
                    record_time: bool = False) -> Dict[str, Any]:
    """The provenance block of ``results.json``.

    Args:
        model, backbone: names for the tables (e.g. ``'SatMAE'``, ``'ViT-L'``).
        task: ``'segmentation'`` / ``'detection'``.
        config: path of the config file.
        config_text: the config as evaluated (e.g. ``cfg.pretty_text``, with
            overrides); its SHA-256 is recorded. Without it the config file's bytes
            are hashed when ``config`` exists.
        checkpoint: path of the checkpoint.
        checkpoint_sha256: its SHA-256; computed from ``checkpoint`` when omitted,
            the file exists and ``hash_checkpoint`` is True.
        seed: corruption seed of the sweep.
        protocol: corruption protocol.
        versions: package versions (default :func:`package_versions`).
        extra: any other JSON-able fields (e.g. the command line).
        record_time: add ``created_at`` (UTC, ISO 8601). Off by default so that the
            whole ``results.json`` is byte-identical for the same inputs.
    """
    config_sha256 = None
    if config_text is not None:
        config_sha256 = hashlib.sha256(config_text.encode('utf-8')).hexdigest()
    elif config is not None and osp.isfile(config):
        config_sha256 = file_sha256(config)
    if checkpoint_sha256 is None and hash_checkpoint and checkpoint is not None \
            and osp.isfile(checkpoint):
        checkpoint_sha256 = file_sha256(checkpoint)
    prov: Dict[str, Any] = {
        'model': model,
        'backbone': backbone,
        'task': task,
        'config': config,
        'config_sha256': config_sha256,
        'checkpoint': checkpoint,
        'checkpoint_sha256': checkpoint_sha256,
        'seed': seed,
        'protocol': protocol,
        'versions': dict(package_versions() if versions is None else versions),
    }
    if extra:
        prov['extra'] = dict(extra)
    if record_time:
        import datetime
        prov['created_at'] = datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec='seconds')
    return prov


# ----------------------------------------------------------------------------------
# results.json / results.csv
# ----------------------------------------------------------------------------------
def results_document(summary: RobustnessSummary,
                     provenance: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """``{'format', 'numbers', 'provenance'}`` as written to ``results.json``."""
    return {'format': RESULTS_FORMAT, 'numbers': summary.to_dict(),
            'provenance': _jsonable(dict(provenance or {}))}


def write_results_json(path: str, summary: RobustnessSummary,
                       provenance: Optional[Mapping[str, Any]] = None) -> str:
    """Write ``results.json`` (strict JSON, 2-space indent, trailing newline)."""
    text = json.dumps(results_document(summary, provenance), indent=2, allow_nan=False,
                      ensure_ascii=False)
    return atomic_write_text(path, text + '\n')


def results_csv_text(summary: RobustnessSummary) -> str:
    """``results.csv``: one row per condition (clean first, then table order):
    condition, corruption, severity, category, the metric, the extra metrics, then
    per-class values (``<IoU|AP>.<class>``)."""
    extra_keys = sorted({k for r in summary.conditions.values() for k in r.extra})
    classes: List[str] = []
    for result in summary.conditions.values():
        for name in result.per_class or {}:
            if name not in classes:
                classes.append(name)
    per_class_prefix = 'AP' if summary.task == 'detection' else 'IoU'
    header = (['condition', 'corruption', 'severity', 'category', summary.metric] +
              extra_keys + [f'{per_class_prefix}.{c}' for c in classes])
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    writer.writerow(header)

    def cell(value: Optional[float]) -> str:
        return '' if value is None or not math.isfinite(value) else repr(float(value))

    for (name, severity), result in summary.conditions.items():
        per_class = result.per_class or {}
        writer.writerow([CLEAN if name == CLEAN else f'{name}@{severity}', name, severity,
                         '' if name == CLEAN else summary.category(name), cell(result.value)] +
                        [cell(result.extra.get(k)) for k in extra_keys] +
                        [cell(per_class.get(c)) for c in classes])
    return buffer.getvalue()


def write_results_csv(path: str, summary: RobustnessSummary) -> str:
    return atomic_write_text(path, results_csv_text(summary))


# ----------------------------------------------------------------------------------
# report.md
# ----------------------------------------------------------------------------------
def _table_columns(summary: RobustnessSummary) -> List[str]:
    """The corruption columns of the paper-layout table: REOBench's 12 in Table 2
    order for that protocol (absent ones shown as '–'), else the included ones."""
    if summary.protocol == 'reobench':
        return list(REOBENCH_TABLE_ORDER)
    return list(summary.corruptions)


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]],
              align_left: int = 1) -> List[str]:
    lines = ['| ' + ' | '.join(header) + ' |',
             '|' + '|'.join(':---' if i < align_left else '---:' for i in range(len(header)))
             + '|']
    lines += ['| ' + ' | '.join(row) + ' |' for row in rows]
    return lines


def render_report_md(summary: RobustnessSummary,
                     provenance: Optional[Mapping[str, Any]] = None,
                     plots: Sequence[str] = PLOT_FILES) -> str:
    """The Markdown report: the paper-layout table (Clean, corruption columns, Avg,
    ΔTP), mPC/rPC per category, the per-severity table, coverage, per-class scores
    (when present), plots and provenance."""
    prov = dict(provenance or {})
    model = prov.get('model') or 'model'
    backbone = prov.get('backbone') or '–'
    metric = summary.metric
    lines = [f'# Robustness report: {model}' + (f' ({backbone})' if backbone != '–' else ''),
             '',
             f'Task: {summary.task or "–"}; metric: {metric} (0–100); corruption protocol: '
             f'{summary.protocol}.', '']

    columns = _table_columns(summary)
    lines += [f'## {metric} under corruption (REOBench Table 2 layout)', '']
    header = ['Model', 'Backbone', 'Clean'] + [column_title(c) for c in columns] + \
        ['Avg', 'ΔTP']
    row = [model, backbone, _fmt(summary.clean)] + \
        [_fmt(summary.per_corruption.get(c)) for c in columns] + \
        [_fmt(summary.avg), _fmt(summary.delta_tp)]
    lines += _md_table(header, [row], align_left=2)
    lines += ['', f'Each corruption column is the mean over its severities; Avg is the mean '
              f'over the {len(summary.corruptions)} included corruptions; ΔTP = Clean − Avg.',
              '']

    lines += ['## mPC, rPC and categories', '']
    rows = [['all', str(len(summary.corruptions)), _fmt(summary.avg), _fmt(summary.delta_tp),
             _fmt(summary.mpc), _fmt(100 * summary.rpc)]]
    for category, scores in summary.per_category.items():
        rows.append([category, str(len(scores.corruptions)), _fmt(scores.avg),
                     _fmt(scores.delta_tp), _fmt(scores.mpc), _fmt(100 * scores.rpc)])
    lines += _md_table(['Corruptions', 'Count', 'Avg', 'ΔTP', 'mPC', 'rPC (%)'], rows)
    lines += ['', 'mPC is the mean over every included (corruption, severity); '
              'rPC = mPC / Clean.', '']

    lines += ['## Per severity', '']
    severities = list(summary.severities)
    rows = []
    for name in summary.corruptions:
        values = summary.per_severity[name]
        rows.append([name, summary.category(name)] + [_fmt(values.get(s)) for s in severities]
                    + [_fmt(summary.per_corruption[name]),
                       _fmt(summary.clean - summary.per_corruption[name])])
    lines += _md_table(['Corruption', 'Category'] + [str(s) for s in severities] +
                       ['Mean', 'Drop'], rows, align_left=2)
    lines += ['']

    lines += ['## Coverage', '',
              f'- Included corruptions ({len(summary.corruptions)}): '
              f'{", ".join(summary.corruptions)}',
              f'- Severities: {", ".join(str(s) for s in severities)}']
    if summary.missing_severities:
        missing = '; '.join(f'{n}: {", ".join(str(s) for s in v)}'
                            for n, v in summary.missing_severities.items())
        lines.append(f'- **Missing severities** (those corruptions are averaged over the '
                     f'severities they have): {missing}')
    else:
        lines.append('- Missing severities: none')
    if summary.not_evaluated:
        lines.append(f'- Not evaluated: {", ".join(summary.not_evaluated)}')
    lines.append('')

    if summary.per_class:
        pc = summary.per_class
        name = 'AP' if summary.task == 'detection' else 'IoU'
        lines += [f'## Per-class {name}', '']
        rows = [[c, _fmt(pc['clean'][c]), _fmt(pc['avg'][c]), _fmt(pc['delta_tp'][c])]
                for c in pc['classes']]
        lines += _md_table(['Class', 'Clean', 'Avg', 'ΔTP'], rows)
        lines += ['']

    calibration = calibration_keys(summary)
    if calibration:
        lines += ['## Calibration under corruption', '']
        header = ['Metric', 'Clean'] + [column_title(c) for c in columns] + ['Avg', 'Avg − Clean']
        rows = []
        for key in calibration:
            values = summary.extra[key]
            rows.append([f'`{key}`', _fmt(values['clean'], 4)] +
                        [_fmt(values['per_corruption'].get(c), 4) for c in columns] +
                        [_fmt(values['avg'], 4), _fmt(values['avg'] - values['clean'], 4)])
        lines += _md_table(header, rows)
        lines += ['', 'Fractions, not percentages. `ECE`: expected calibration error (15 '
                  'equal-width confidence bins; for detection the detection calibration '
                  'error over score bins, matches at IoU 0.5); `gap`: mean confidence − '
                  'accuracy (> 0: overconfident); `NLL`, `Brier` (summed over classes); '
                  '`cwECE`: classwise ECE; `AURC`/`eAURC`: area under the risk–coverage '
                  'curve and its excess over an oracle ranking; `acc@90cov`: accuracy of '
                  'the 90 % most confident pixels. `calib_ts/`: with the temperature '
                  'fitted on clean validation pixels' +
                  (f' (T = {_temperature_text(prov)})' if _temperature_text(prov) else '') +
                  '.', '']

    other = {k: v for k, v in summary.extra.items() if k not in calibration}
    if other:
        lines += ['## Other metrics', '']
        rows = [[k, _fmt(v['clean'], 4), _fmt(v['avg'], 4)] for k, v in other.items()]
        lines += _md_table(['Metric', 'Clean', 'Avg over corruptions'], rows)
        lines += ['']

    if plots:
        lines += ['## Plots', '']
        lines += [f'![{osp.splitext(p)[0]}]({p})' for p in plots]
        lines += ['']

    if prov:
        lines += ['## Provenance', '']
        rows = []
        for key, value in prov.items():
            if key == 'versions' and isinstance(value, Mapping):
                value = ', '.join(f'{k} {v}' for k, v in value.items() if v is not None)
            rows.append([key, '–' if value is None else f'`{value}`'])
        lines += _md_table(['Field', 'Value'], rows, align_left=2)
        lines += ['']
    return '\n'.join(lines)


def calibration_keys(summary: RobustnessSummary) -> List[str]:
    """The calibration metrics among ``summary.extra`` (``calib/ECE``, ...,
    ``calib_ts/ECE``, ...), in table order."""
    return [f'{prefix}/{name}' for prefix in CALIBRATION_PREFIXES
            for name in CALIBRATION_METRICS if f'{prefix}/{name}' in summary.extra]


def paper_table_lines(results: Union[RobustnessSummary, Mapping[str, Any]],
                      caption: bool = False) -> List[str]:
    """The paper-layout table of one model as aligned text lines: a header (``Clean``,
    one column per corruption, ``Avg``, ``ΔTP``), the task metric's row (``mIoU`` /
    ``mAP``, mean over severities, 2 decimals) and, with calibration metrics, an ``ECE``
    row (clean, per corruption, Avg, then Avg - Clean; 3 decimals). Missing values show
    as ``–``.

    Args:
        results: a :class:`RobustnessSummary`, or the ``numbers`` of a ``results.json``
            (:meth:`RobustnessSummary.to_dict`).
        caption: start with a line saying what the numbers are (the severities averaged,
            the definition of ΔTP and of the ECE row's last column).
    """
    numbers = results.to_dict() if isinstance(results, RobustnessSummary) else results
    names = list(numbers['per_corruption'])
    header = ['Clean'] + [column_title(n) for n in names] + ['Avg', 'ΔTP']
    rows = [(numbers['metric'], 2,
             [numbers['clean']] + [numbers['per_corruption'][n]['mean'] for n in names] +
             [numbers['avg'], numbers['delta_tp']])]
    ece = (numbers.get('extra') or {}).get('calib/ECE')
    if ece:
        gap = None if ece['avg'] is None or ece['clean'] is None else ece['avg'] - ece['clean']
        rows.append(('ECE', 3, [ece['clean']] +
                     [ece['per_corruption'].get(n) for n in names] + [ece['avg'], gap]))
    widths = [max(len(h), 6) for h in header]
    label = max(len(name) for name, _, _ in rows)
    lines = []
    if caption:
        severities = ', '.join(map(str, numbers['included']['severities']))
        lines.append(f'paper-layout table ({numbers["metric"]} mean over severities '
                     f'{severities}; ΔTP = Clean - Avg'
                     + ('; ECE row: clean, per corruption, Avg, Avg - Clean' if ece else '')
                     + '):')
    lines += [' ' * label + '  ' + '  '.join(h.rjust(w) for h, w in zip(header, widths))]
    for name, digits, values in rows:
        lines.append(name.ljust(label) + '  ' + '  '.join(
            _fmt(v, digits).rjust(w) for v, w in zip(values, widths)))
    return lines


def _temperature_text(provenance: Mapping[str, Any]) -> Optional[str]:
    """The fitted temperature the sweep records in ``provenance['extra']``."""
    record = (provenance.get('extra') or {}).get('temperature')
    if not isinstance(record, Mapping) or record.get('temperature') is None:
        return None
    return f'{record["temperature"]:.3f}, from {record.get("source", "clean data")}'


# ----------------------------------------------------------------------------------
# Plots
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


def plot_severity_curves(summary: RobustnessSummary, path: str) -> str:
    """``severity_curves.png``: the metric against severity, one line per
    corruption, the clean metric as a dashed line."""
    plt = agg_pyplot()
    fig, ax = plt.subplots(figsize=(8, 5), layout=FIGURE_LAYOUT)
    try:
        cmap = plt.get_cmap('tab20')
        markers = 'osD^v<>ph*Xd'
        for i, name in enumerate(summary.corruptions):
            points = summary.per_severity[name]
            ax.plot(list(points), list(points.values()), marker=markers[i % len(markers)],
                    color=cmap(i % 20), label=name, linewidth=1.5, markersize=5)
        ax.axhline(summary.clean, color='black', linestyle='--', linewidth=1.2,
                   label=f'clean ({summary.clean:.2f})')
        ax.set_xticks(list(summary.severities))
        ax.set_xlabel('severity')
        ax.set_ylabel(summary.metric)
        ax.set_title(f'{summary.metric} against corruption severity')
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
    try:
        names = [n for _, n in drops]
        values = [d for d, _ in drops]
        colours = [_CATEGORY_COLOURS.get(summary.category(n), 'grey') for n in names]
        ax.barh(range(len(names)), values, color=colours)
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names)
        ax.invert_yaxis()
        delta = ax.axvline(summary.delta_tp, color='black', linestyle='--', linewidth=1.0,
                           label=f'ΔTP = {summary.delta_tp:.2f}')
        ax.axvline(0.0, color='black', linewidth=0.6)
        ax.set_xlabel(f'clean − corrupted {summary.metric} (mean over severities)')
        ax.set_title('Drop by corruption')
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
    prefixes = [p for p in CALIBRATION_PREFIXES if f'{p}/ECE' in summary.extra]
    if not prefixes:
        raise ValueError('the summary has no calibration metrics (calib/ECE)')
    plt = agg_pyplot()
    fig, axes = plt.subplots(1, len(prefixes), figsize=(5.5 * len(prefixes) + 2, 4.5),
                             squeeze=False, sharey=True, layout=FIGURE_LAYOUT)
    try:
        cmap = plt.get_cmap('tab20')
        for ax, prefix in zip(axes[0], prefixes):
            key = f'{prefix}/ECE'
            clean = summary.conditions[CLEAN_CONDITION].extra[key]
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
    severity of each corruption, for the calibration metric of ``prefix``."""
    rows = [('clean', details[CLEAN_CONDITION][prefix])]
    for name in summary.corruptions:
        strongest = max(s for (n, s) in details if n == name)
        rows.append((f'{name} @ {strongest}', details[(name, strongest)][prefix]))
    return rows


def plot_reliability_by_condition(summary: RobustnessSummary,
                                  details: Mapping[Any, Mapping[str, Any]], path: str,
                                  prefix: str = 'calib') -> str:
    """Reliability diagrams of the clean condition and of the strongest evaluated
    severity of each corruption, from the calibration details of each condition
    (``{condition: {prefix: details}}`` as the sweep records them)."""
    from .calibration import plot_reliability_diagrams
    return plot_reliability_diagrams(
        dict(_clean_and_strongest(summary, details, prefix)), path,
        title=f'Reliability: clean vs the strongest severity ({prefix}, '
        f'{CALIBRATION_PREFIXES.get(prefix, prefix)})')


def plot_risk_coverage(summary: RobustnessSummary, details: Mapping[Any, Mapping[str, Any]],
                       path: str, prefix: str = 'calib') -> str:
    """``risk_coverage.png``: selective risk against coverage (pixels accepted by
    decreasing confidence) for the clean condition and the strongest evaluated severity
    of each corruption, AURC in the legend."""
    plt = agg_pyplot()
    fig, ax = plt.subplots(figsize=(8, 5), layout=FIGURE_LAYOUT)
    try:
        cmap = plt.get_cmap('tab20')
        rows = _clean_and_strongest(summary, details, prefix)
        colours = ['black'] + [cmap(i % 20) for i in range(len(rows) - 1)]
        for (label, data), colour in zip(rows, colours):
            curve = data['risk_coverage']
            aurc = (data.get('metrics') or {}).get('AURC')
            text = f'{label} (AURC {aurc:.4f})' if aurc is not None else label
            ax.plot(curve['coverage'], curve['risk'], color=colour, linewidth=1.4,
                    label=text, linestyle='--' if label == 'clean' else '-')
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


# ----------------------------------------------------------------------------------
# One model
# ----------------------------------------------------------------------------------
@dataclass
class Report:
    """What :func:`write_report` produced: the summary and ``{file name: path}``."""
    summary: RobustnessSummary
    files: Dict[str, str] = field(default_factory=dict)


def write_report(out_dir: str, results: Union[Mapping[Any, Any], RobustnessSummary], *,
                 protocol: str = 'reobench', task: Optional[str] = None,
                 metric: Optional[str] = None,
                 expected_severities: Optional[Sequence[int]] = None,
                 provenance: Optional[Mapping[str, Any]] = None,
                 plots: bool = True,
                 calibration_details: Optional[Mapping[Any, Mapping[str, Any]]] = None
                 ) -> Report:
    """Aggregate ``results`` (see :func:`aggregate`) and write ``results.json``,
    ``results.csv``, ``report.md`` and (with ``plots``) ``severity_curves.png`` and
    ``drop_by_corruption.png`` into ``out_dir``. A ready
    :class:`RobustnessSummary` is accepted too.

    With calibration metrics in the results (``calib/ECE``, ...) the report gains a
    calibration table and ``ece_vs_severity.png``; with ``calibration_details``
    (``{condition: {prefix: details with 'reliability'}}``, as the sweep records them)
    also ``reliability_diagrams.png`` (and ``reliability_diagrams_ts.png`` for the
    temperature-scaled metrics) and, for segmentation, ``risk_coverage.png``: clean vs
    the strongest severity of each corruption."""
    if isinstance(results, RobustnessSummary):
        summary = results
    else:
        summary = aggregate(results, protocol=protocol, task=task, metric=metric,
                            expected_severities=expected_severities)
    os.makedirs(out_dir, exist_ok=True)
    report = Report(summary)
    path = lambda name: osp.join(out_dir, name)  # noqa: E731
    report.files['results.json'] = write_results_json(path('results.json'), summary,
                                                      provenance)
    report.files['results.csv'] = write_results_csv(path('results.csv'), summary)
    if plots:
        report.files['severity_curves.png'] = plot_severity_curves(
            summary, path('severity_curves.png'))
        report.files['drop_by_corruption.png'] = plot_drop_by_corruption(
            summary, path('drop_by_corruption.png'))
        if any(f'{p}/ECE' in summary.extra for p in CALIBRATION_PREFIXES):
            report.files[ECE_PLOT_FILE] = plot_ece_vs_severity(summary, path(ECE_PLOT_FILE))
        if calibration_details:
            available = set.intersection(*(set(d) for d in calibration_details.values()))
            for prefix in CALIBRATION_PREFIXES:
                if prefix in available:
                    name = 'reliability_diagrams' + ('' if prefix == 'calib' else '_ts') + '.png'
                    report.files[name] = plot_reliability_by_condition(
                        summary, calibration_details, path(name), prefix)
            if 'calib' in available and all('risk_coverage' in d['calib']
                                            for d in calibration_details.values()):
                report.files['risk_coverage.png'] = plot_risk_coverage(
                    summary, calibration_details, path('risk_coverage.png'))
    plot_files = [name for name in report.files if name.endswith('.png')]
    report.files['report.md'] = atomic_write_text(
        path('report.md'), render_report_md(summary, provenance, plot_files))
    return report


def load_results_json(path: str) -> Dict[str, Any]:
    """Read a ``results.json`` written by :func:`write_results_json` (checked)."""
    with open(path, encoding='utf-8') as handle:
        doc = json.load(handle)
    if not isinstance(doc, dict) or doc.get('format') != RESULTS_FORMAT:
        raise ValueError(f'{path} is not a robustness results file (expected "format": '
                         f'{RESULTS_FORMAT!r})')
    for key in ('clean', 'per_corruption', 'protocol', 'conditions'):
        if key not in doc.get('numbers', {}):
            raise ValueError(f'{path}: "numbers" lacks {key!r}')
    return doc


def load_condition_results(path: str, protocol: Optional[str] = None
                           ) -> Dict[Condition, ConditionResult]:
    """The ``condition -> result`` map of a ``results.json`` or of a shard file
    (``{'clean': {...}, 'cloud@3': {...}}``, see :func:`results_to_jsonable`)."""
    with open(path, encoding='utf-8') as handle:
        data = json.load(handle)
    if isinstance(data, dict) and data.get('format') == RESULTS_FORMAT:
        numbers = data['numbers']
        protocol = protocol or numbers['protocol']
        return normalize_results({row['condition']: {k: row[k] for k in
                                                     ('value', 'per_class', 'extra')}
                                  for row in numbers['conditions']}, protocol)
    if not isinstance(data, dict):
        raise ValueError(f'{path}: expected a JSON object of condition results')
    return results_from_jsonable(data, protocol or 'reobench')


def summary_from_results_json(path: str) -> RobustnessSummary:
    """Re-aggregate the conditions stored in a ``results.json``."""
    numbers = load_results_json(path)['numbers']
    return aggregate(load_condition_results(path), protocol=numbers['protocol'],
                     task=numbers.get('task'), metric=numbers.get('metric'),
                     expected_severities=numbers['included']['severities'])


# ----------------------------------------------------------------------------------
# Several models
# ----------------------------------------------------------------------------------
@dataclass
class ComparisonTable:
    """Rows of several models over the corruption columns common to all.

    ``rows`` hold ``model``, ``backbone``, ``clean``, one value per column, ``avg``
    and ``delta_tp`` (``avg``/``delta_tp`` recomputed over ``columns``).
    """
    metric: str
    protocol: str
    columns: List[str]
    rows: List[Dict[str, Any]]
    warnings: List[str] = field(default_factory=list)


def build_comparison(paths: Sequence[str], names: Optional[Sequence[Optional[str]]] = None
                     ) -> ComparisonTable:
    """Read several ``results.json`` files into a :class:`ComparisonTable`.

    The model name is the provenance's ``model`` (else the file's parent folder
    name), the backbone the provenance's ``backbone``. Columns are the corruptions
    present in every file; the others are reported in ``warnings`` (also issued as
    Python warnings), as are files with missing severities and files averaging over
    different severity sets.
    """
    if not paths:
        raise ValueError('no results files given')
    if names is not None and len(names) != len(paths):
        raise ValueError(f'{len(names)} names for {len(paths)} files')
    docs = [load_results_json(p) for p in paths]
    protocols = {d['numbers']['protocol'] for d in docs}
    if len(protocols) > 1:
        raise ValueError(f'the files use different protocols: {sorted(protocols)}')
    protocol = protocols.pop()
    metrics = {d['numbers'].get('metric') for d in docs}
    if len(metrics) > 1:
        raise ValueError(f'the files report different metrics: {sorted(map(str, metrics))}')
    metric = metrics.pop() or 'metric'
    msgs: List[str] = []
    common = set.intersection(*(set(d['numbers']['per_corruption']) for d in docs))
    if not common:
        raise ValueError('the files have no corruption in common')
    columns = corruption_order(common, protocol)
    severity_sets = {tuple(d['numbers']['included']['severities']) for d in docs}
    if len(severity_sets) > 1:
        msgs.append('the files average over different severities (' + '; '.join(
            f'{p}: {", ".join(map(str, d["numbers"]["included"]["severities"]))}'
            for p, d in zip(paths, docs)) + '): their columns are not directly comparable')
    rows = []
    for i, (path, doc) in enumerate(zip(paths, docs)):
        numbers, prov = doc['numbers'], doc.get('provenance') or {}
        name = (names[i] if names is not None and names[i] else None) or prov.get('model') \
            or osp.basename(osp.dirname(osp.abspath(path)))
        dropped = [c for c in numbers['per_corruption'] if c not in common]
        if dropped:
            msgs.append(f'{path}: corruptions left out (not in every file): '
                        f'{", ".join(dropped)}; its Avg/ΔTP are recomputed over the '
                        f'{len(columns)} common corruptions')
        incomplete = {c: v for c, v in numbers['included']['missing_severities'].items()
                      if c in common}
        if incomplete:
            msgs.append(f'{path}: missing severities ' + '; '.join(
                f'{c}: {", ".join(map(str, v))}' for c, v in incomplete.items()))
        means = {c: numbers['per_corruption'][c]['mean'] for c in columns}
        scores = robustness_scores(numbers['clean'], means, protocol)['overall']
        row = {'model': name, 'backbone': prov.get('backbone'), 'clean': numbers['clean']}
        row.update(means)
        row.update(avg=scores.avg, delta_tp=scores.delta_tp)
        rows.append(row)
    for msg in msgs:
        warnings.warn(msg, stacklevel=2)
    return ComparisonTable(metric, protocol, columns, rows, msgs)


def _best(table: ComparisonTable, key: str, digits: int) -> Optional[float]:
    values = [round(r[key], digits) for r in table.rows if r[key] is not None]
    if len(values) < 2:
        return None
    return min(values) if key == 'delta_tp' else max(values)


def comparison_markdown(table: ComparisonTable, digits: int = 2) -> str:
    """Markdown table like REOBench Tables 2/3, the best value per column in bold
    (highest; lowest for ΔTP; ties all bold)."""
    keys = ['clean'] + table.columns + ['avg', 'delta_tp']
    best = {k: _best(table, k, digits) for k in keys}
    header = ['Model', 'Backbone', 'Clean'] + [column_title(c) for c in table.columns] + \
        ['Avg', 'ΔTP']
    rows = []
    for row in table.rows:
        cells = [str(row['model']), row['backbone'] or '–']
        for k in keys:
            text = _fmt(row[k], digits)
            if best[k] is not None and round(row[k], digits) == best[k]:
                text = f'**{text}**'
            cells.append(text)
        rows.append(cells)
    return '\n'.join(_md_table(header, rows, align_left=2)) + '\n'


def comparison_csv_text(table: ComparisonTable, digits: Optional[int] = 2,
                        paper_names: bool = False) -> str:
    """CSV with columns ``model, backbone, clean, <corruptions>, avg, delta_tp``
    (the layout of the reference table; ``paper_names`` writes the published column
    names, e.g. ``salt_pepper``)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    names = [engine_to_paper_name(c) if paper_names else c for c in table.columns]
    writer.writerow(['model', 'backbone', 'clean'] + names + ['avg', 'delta_tp'])
    for row in table.rows:
        values = [row[k] for k in ['clean'] + table.columns + ['avg', 'delta_tp']]
        writer.writerow([row['model'], row['backbone'] or ''] +
                        [repr(v) if digits is None else f'{v:.{digits}f}' for v in values])
    return buffer.getvalue()


def write_comparison(table: ComparisonTable, markdown_path: Optional[str] = None,
                     csv_path: Optional[str] = None, paper_names: bool = False
                     ) -> Tuple[Optional[str], Optional[str]]:
    """Write the comparison as Markdown and/or CSV (atomically)."""
    if markdown_path:
        atomic_write_text(markdown_path, comparison_markdown(table))
    if csv_path:
        atomic_write_text(csv_path, comparison_csv_text(table, paper_names=paper_names))
    return markdown_path, csv_path
