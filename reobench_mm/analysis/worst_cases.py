"""The worst cases of a sweep, image by image, from the per-image statistics.

Each image gets its own score in every condition
(:meth:`~reobench_mm.evaluation.functional.image_stats.SegmentationImageStats.per_image_values`:
its mIoU over the classes in its label or prediction; for detection its mAP over the
classes with ground truth in it). From those:

- per condition, the images with the largest drop from their clean score;
- per image and severity, the worst corruption and its score, and the **worst-case
  score**: the image's minimum over the corruptions at that severity (the per-image
  minimum that robustness suites reporting worst-case performance average); its mean
  over the images is the worst-case mean of that severity.

:func:`worst_cases` returns the JSON block ``worst_cases.json`` holds;
:func:`worst_cases_csv_text` the per-image table; :func:`plot_worst_cases` draws the
thumbnails (corrupted input, prediction, label) of the worst few.
"""
from __future__ import annotations

import csv
import io
import math
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from reobench_corruptions.condition import Condition
from ..evaluation.functional.condition_stats import ImageStats
from .intervals import check_same_images

__all__ = ['worst_cases', 'worst_cases_csv_text', 'worst_case_lines', 'plot_worst_cases',
           'WORST_CASES_FILE', 'WORST_CASES_CSV', 'WORST_CASES_PLOT']

WORST_CASES_FILE = 'worst_cases.json'
WORST_CASES_CSV = 'worst_cases.csv'
WORST_CASES_PLOT = 'worst_cases.png'


def _number(value: float) -> Optional[float]:
    return float(value) if math.isfinite(value) else None


def worst_cases(stats: Mapping[Condition, ImageStats], corruptions: Sequence[str],
                severities: Sequence[int], protocol: str = 'reobench', top: int = 5
                ) -> Dict[str, Any]:
    """Per-image scores, the largest drops per condition and the worst corruption per
    image and severity (see the module docstring); ``top`` images per list.

    Raises:
        ValueError: conditions evaluated on different images.
    """
    image_ids = check_same_images(stats)
    scores = {c: np.asarray(s.task.per_image_values(), dtype=np.float64)
              for c, s in stats.items()}
    clean = scores[Condition(protocol=protocol)]
    by_condition = {}
    for condition, values in scores.items():
        if condition.is_clean:
            continue
        drop = clean - values
        order = [i for i in np.argsort(-np.nan_to_num(drop, nan=-np.inf), kind='stable')
                 if math.isfinite(drop[i])][:top]
        by_condition[condition.key] = [
            {'image': image_ids[i], 'index': int(i), 'clean': _number(clean[i]),
             'value': _number(values[i]), 'drop': _number(drop[i])} for i in order]
    per_severity = {}
    per_image: List[Dict[str, Any]] = [
        {'image': image_ids[i], 'clean': _number(clean[i]), 'severities': {}}
        for i in range(len(image_ids))]
    for severity in severities:
        names = [n for n in corruptions if any(c.corruption == n and c.severity == severity
                                               for c in scores)]
        if not names:
            continue
        table = np.stack([scores[next(c for c in scores if c.corruption == n
                                      and c.severity == severity)] for n in names])
        filled = np.where(np.isnan(table), np.inf, table)
        worst_index = np.argmin(filled, axis=0)
        worst = filled[worst_index, np.arange(table.shape[1])]
        worst = np.where(np.isinf(worst), np.nan, worst)
        for i, entry in enumerate(per_image):
            entry['severities'][str(severity)] = {
                'worst_corruption': names[worst_index[i]] if math.isfinite(worst[i])
                else None, 'worst_value': _number(worst[i])}
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', RuntimeWarning)
            mean = float(np.nanmean(worst)) if np.isfinite(worst).any() else math.nan
        order = [i for i in np.argsort(np.nan_to_num(worst, nan=np.inf), kind='stable')
                 if math.isfinite(worst[i])][:top]
        per_severity[str(severity)] = {
            'worst_case_mean': _number(mean), 'corruptions': names,
            'worst_images': [{'image': image_ids[i], 'index': int(i),
                              'corruption': names[worst_index[i]],
                              'value': _number(worst[i]), 'clean': _number(clean[i])}
                             for i in order]}
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        clean_mean = float(np.nanmean(clean)) if np.isfinite(clean).any() else math.nan
    return {'images': len(image_ids), 'top': top, 'clean_mean': _number(clean_mean),
            'score': 'per-image ' + ('mIoU over the classes in its label or prediction'
                                     if next(iter(stats.values())).task.kind ==
                                     'segmentation' else
                                     'mAP over the classes with ground truth in it'),
            'largest_drops': by_condition, 'per_severity': per_severity,
            'per_image': per_image}


def worst_cases_csv_text(cases: Mapping[str, Any]) -> str:
    """``worst_cases.csv``: one row per image: ``image, clean`` and per severity the
    worst corruption and its score."""
    severities = list(cases['per_severity'])
    header = ['image', 'clean'] + [f'{k}_s{s}' for s in severities
                                   for k in ('worst_corruption', 'worst_value')]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    writer.writerow(header)
    for entry in cases['per_image']:
        row = [entry['image'], '' if entry['clean'] is None else repr(entry['clean'])]
        for s in severities:
            cell = entry['severities'].get(s, {})
            row += [cell.get('worst_corruption') or '',
                    '' if cell.get('worst_value') is None else repr(cell['worst_value'])]
        writer.writerow(row)
    return buffer.getvalue()


def worst_case_lines(cases: Mapping[str, Any], metric: str, plot: Optional[str] = None
                     ) -> List[str]:
    """The report's section on the worst cases."""
    from .tables import fmt_number, markdown_table
    lines = ['## Worst cases', '',
             f'Scores are each image\'s own {cases["score"]}; their mean (first row: clean) '
             'is not the dataset metric, which pools the images. Worst-case score: an '
             'image\'s minimum over the corruptions at one severity; its mean over the '
             f'{cases["images"]} images is the worst-case mean. Every image is in '
             f'`{WORST_CASES_CSV}`, every list in `{WORST_CASES_FILE}`.', '']
    rows = [['clean', fmt_number(cases['clean_mean']), '–']]
    for severity, block in cases['per_severity'].items():
        worst = block['worst_images'][0] if block['worst_images'] else None
        rows.append([severity, fmt_number(block['worst_case_mean']),
                     '–' if worst is None else
                     f'{worst["image"]} ({worst["corruption"]}, '
                     f'{fmt_number(worst["value"])})'])
    lines += markdown_table(['Severity', f'Mean per-image {metric} (worst over corruptions)',
                             'Worst image'], rows)
    lines += ['']
    drops = sorted(((d['drop'], key, d) for key, items in cases['largest_drops'].items()
                    for d in items[:1] if d['drop'] is not None), key=lambda t: -t[0])
    if drops:
        rows = [[key, d['image'], fmt_number(d['clean']), fmt_number(d['value']),
                 fmt_number(d['drop'])] for _, key, d in drops[:10]]
        lines += ['Largest drops from clean (the worst image of each condition, the ten '
                  'largest):', '']
        lines += markdown_table(['Condition', 'Image', 'Clean', 'There', 'Drop'], rows)
        lines += ['']
    if plot:
        lines += [f'![worst cases]({plot})', '']
    return lines


def plot_worst_cases(panels: Sequence[Mapping[str, Any]], path: str) -> str:
    """``worst_cases.png``: one row per case with three thumbnails: the corrupted input,
    the prediction and the label (RGB ``uint8`` arrays, ``panels[i]['input']``,
    ``['prediction']``, ``['label']``), titled by ``panels[i]['title']``."""
    from .plotting import FIGURE_LAYOUT, agg_pyplot, atomic_savefig
    plt = agg_pyplot()
    rows = len(panels)
    fig, axes = plt.subplots(rows, 3, figsize=(7.5, 2.6 * rows), layout=FIGURE_LAYOUT,
                             squeeze=False)
    try:
        for row, panel in zip(axes, panels):
            for ax, key, name in zip(row, ('input', 'prediction', 'label'),
                                     ('corrupted input', 'prediction', 'label')):
                ax.imshow(panel[key], interpolation='nearest')
                ax.set_xticks([])
                ax.set_yticks([])
                ax.set_title(name, fontsize=8)
            row[0].set_ylabel(panel['title'], fontsize=7)
        return atomic_savefig(fig, path, dpi=100)  # photographs: 100 dpi keeps it quick
    finally:
        plt.close(fig)
