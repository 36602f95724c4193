"""Reports of a robustness sweep: ``results.json``, ``results.csv``, ``report.md`` and
the plots (drawn by :mod:`reobench_mm.analysis.plotting`).

One call writes everything for one model::

    from reobench_mm.analysis import make_provenance, write_report
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
temporary file in the same folder, then ``os.replace``). It is read back by
:func:`~reobench_mm.analysis.results_file.read_results`.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from reobench_corruptions import list_corruptions
from ..evaluation.keys import (CALIBRATION_METRICS, CALIBRATION_PREFIX, CALIBRATION_PREFIXES,
                               ECE, SCALED_CALIBRATION_PREFIX, SEGMENTATION, get_task,
                               metric_key, results_task)
from ..fileio import atomic_write_text, file_sha256, nan_to_null
from ..version import package_versions
from .plotting import (plot_drop_by_corruption, plot_ece_vs_severity,
                       plot_reliability_by_condition, plot_risk_coverage, plot_severity_curves)
from .corruption_seeds import fold_seeds, seed_lines
from .interval_report import interval_lines
from .intervals import available_intervals, summary_intervals
from .results import RobustnessSummary, aggregate, check_condition, corruption_order
from .results_file import RESULTS_FORMAT, numbers_digests
from .result_blocks import RESULT_BLOCKS, check_blocks
from .tables import MISSING, PaperRow, fmt_number, markdown_table, paper_header
from .worst_cases import (WORST_CASES_CSV, WORST_CASES_FILE, WORST_CASES_PLOT,
                          plot_worst_cases, worst_case_lines, worst_cases,
                          worst_cases_csv_text)

__all__ = [
    'RESULTS_FORMAT', 'RESULT_FILES', 'PLOT_FILES', 'ECE_PLOT_FILE', 'make_provenance',
    'results_document', 'write_results_json', 'results_csv_text', 'write_results_csv',
    'render_report_md', 'calibration_keys', 'Report', 'write_report'
]

RESULT_FILES = ('results.json', 'results.csv', 'report.md')
PLOT_FILES = ('severity_curves.png', 'drop_by_corruption.png')
ECE_PLOT_FILE = 'ece_vs_severity.png'


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
                     provenance: Optional[Mapping[str, Any]] = None,
                     image_files: Optional[Mapping[str, Mapping[str, Any]]] = None,
                     seed_image_files: Optional[Mapping[str, Mapping[str, Any]]] = None
                     ) -> Dict[str, Any]:
    """``{'format', 'numbers', 'provenance'}`` as written to ``results.json``, the
    ``digests`` of the numbers kept as written
    (:func:`~reobench_mm.analysis.results_file.numbers_digests`), and ``image_stats`` (condition key -> ``{'file', 'sha256'}``) and ``seed_image_stats``
    (the further corruption seeds': condition tag -> ``{'condition', 'seed', 'file',
    'sha256'}``) when given."""
    numbers = summary.to_dict()
    doc = {'format': RESULTS_FORMAT, 'numbers': numbers,
           'provenance': nan_to_null(dict(provenance or {}))}
    digests = numbers_digests(numbers)
    if digests:
        doc['digests'] = digests
    if image_files:
        doc['image_stats'] = {k: dict(image_files[k]) for k in sorted(image_files)}
    if seed_image_files:
        doc['seed_image_stats'] = {k: dict(seed_image_files[k])
                                   for k in sorted(seed_image_files)}
    return doc


def write_results_json(path: str, summary: RobustnessSummary,
                       provenance: Optional[Mapping[str, Any]] = None,
                       image_files: Optional[Mapping[str, Mapping[str, Any]]] = None,
                       seed_image_files: Optional[Mapping[str, Mapping[str, Any]]] = None
                       ) -> str:
    """Write ``results.json`` (strict JSON, 2-space indent, trailing newline)."""
    text = json.dumps(results_document(summary, provenance, image_files, seed_image_files),
                      indent=2, allow_nan=False, ensure_ascii=False)
    return atomic_write_text(path, text + '\n')


def results_csv_text(summary: RobustnessSummary) -> str:
    """``results.csv``: one row per condition (clean first, then table order):
    condition, corruption, severity, category, the metric, with bootstrap intervals its
    bounds (``<metric>_ci_low``, ``<metric>_ci_high``), the extra metrics, then per-class
    values (``<IoU|AP>.<class>``)."""
    extra_keys = sorted({k for r in summary.conditions.values() for k in r.extra})
    classes: List[str] = []
    for result in summary.conditions.values():
        for name in result.per_class or {}:
            if name not in classes:
                classes.append(name)
    per_class_prefix = _per_class_name(summary)
    intervals = available_intervals(summary)
    bounds = [f'{summary.metric}_ci_low', f'{summary.metric}_ci_high'] if intervals else []
    header = (['condition', 'corruption', 'severity', 'category', summary.metric] + bounds +
              extra_keys + [f'{per_class_prefix}.{c}' for c in classes])
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    writer.writerow(header)

    def cell(value: Optional[float]) -> str:
        return '' if value is None or not math.isfinite(value) else repr(float(value))

    for condition, result in summary.conditions.items():
        per_class = result.per_class or {}
        interval = (intervals['conditions'].get(condition.key) or [None, None]) \
            if intervals else []
        writer.writerow([condition.key, condition.corruption, condition.severity,
                         '' if condition.is_clean else summary.category(condition.corruption),
                         cell(result.value)] + [cell(v) for v in interval] +
                        [cell(result.extra.get(k)) for k in extra_keys] +
                        [cell(per_class.get(c)) for c in classes])
    return buffer.getvalue()


def _per_class_name(summary: RobustnessSummary) -> str:
    """``'IoU'`` or ``'AP'``: the per-class key prefix of the summary's task (that of
    segmentation when the task is not known)."""
    task = results_task(summary.task) if summary.task else get_task(SEGMENTATION)
    return task.per_class_name


def write_results_csv(path: str, summary: RobustnessSummary) -> str:
    return atomic_write_text(path, results_csv_text(summary))


# ----------------------------------------------------------------------------------
# report.md
# ----------------------------------------------------------------------------------
def _table_columns(summary: RobustnessSummary) -> List[str]:
    """The corruption columns of the paper-layout table: REOBench's 12 in Table 2
    order for that protocol (absent ones shown as '–'), else the included ones."""
    if summary.protocol == 'reobench':
        return corruption_order(list_corruptions('reobench'), 'reobench')
    return list(summary.corruptions)


def render_report_md(summary: RobustnessSummary,
                     provenance: Optional[Mapping[str, Any]] = None,
                     plots: Sequence[str] = PLOT_FILES,
                     worst_case_section: Sequence[str] = ()) -> str:
    """The Markdown report: the paper-layout table (Clean, corruption columns, Avg,
    ΔTP), mPC/rPC per category, the per-severity table, coverage, per-class scores
    (when present), plots and provenance."""
    prov = dict(provenance or {})
    model = prov.get('model') or 'model'
    backbone = prov.get('backbone') or MISSING
    metric = summary.metric
    lines = [f'# Robustness report: {model}' + (f' ({backbone})' if backbone != MISSING else ''),
             '',
             f'Task: {summary.task or MISSING}; metric: {metric} (0–100); corruption protocol: '
             f'{summary.protocol}.' + _images_text(prov), '']

    columns = _table_columns(summary)
    lines += [f'## {metric} under corruption (REOBench Table 2 layout)', '']
    names = ['Model'] + (['Backbone'] if backbone != MISSING else [])
    header = names + paper_header(columns)
    for i, name in enumerate(columns):  # seen in training: marked as in the tables below
        if name in summary.seen_in_training:
            header[len(names) + 1 + i] += ' †'
    row = [model] + ([backbone] if backbone != MISSING else []) + PaperRow(
        summary.clean, summary.per_corruption, summary.avg, summary.delta_tp).cells(columns)
    lines += markdown_table(header, [row], align_left=len(names))
    lines += ['', f'Each corruption column is the mean over its severities; Avg is the mean '
              f'over the {len(summary.corruptions)} included corruptions; ΔTP = Clean − Avg.'
              + (' †: seen in training (see below).' if summary.seen_in_training else ''),
              '']

    lines += ['## mPC, rPC and categories', '']
    rows = [['all', str(len(summary.corruptions)), fmt_number(summary.avg),
             fmt_number(summary.delta_tp), fmt_number(summary.mpc),
             fmt_number(100 * summary.rpc)]]
    for category, scores in summary.per_category.items():
        rows.append([category, str(len(scores.corruptions)), fmt_number(scores.avg),
                     fmt_number(scores.delta_tp), fmt_number(scores.mpc),
                     fmt_number(100 * scores.rpc)])
    if summary.held_out is not None:
        held = summary.held_out
        rows.append(['held out from training', str(len(held.corruptions)),
                     fmt_number(held.avg), fmt_number(held.delta_tp), fmt_number(held.mpc),
                     fmt_number(100 * held.rpc)])
    lines += markdown_table(['Corruptions', 'Count', 'Avg', 'ΔTP', 'mPC', 'rPC (%)'], rows)
    lines += ['', 'mPC is the mean over every included (corruption, severity); '
              'rPC = mPC / Clean.', '']
    if summary.seen_in_training:
        seen = [n for n in summary.corruptions if n in summary.seen_in_training]
        lines += ['## Corruptions seen in training', '',
                  f'The training pipeline of this model corrupted images with: '
                  f'{", ".join(summary.seen_in_training)}. Scores over those corruptions '
                  'measure how well the model learnt them, not robustness to unseen '
                  'shifts; they are marked † below.', '']
        if summary.held_out is None:
            lines += ['**Every evaluated corruption was seen in training: there is no '
                      'held-out score.**', '']
        else:
            lines += [f'Held out (not seen in training, {len(summary.held_out.corruptions)}): '
                      f'{", ".join(summary.held_out.corruptions)}; Avg '
                      f'{fmt_number(summary.held_out.avg)}, ΔTP '
                      f'{fmt_number(summary.held_out.delta_tp)}. Seen and evaluated: '
                      f'{", ".join(seen) or "none"}.', '']

    lines += interval_lines(summary)
    for block in RESULT_BLOCKS:
        if block.name in summary.blocks:
            lines += block.report_lines(summary.blocks[block.name], plots)
    lines += seed_lines(summary)
    lines += ['## Per severity', '']
    severities = list(summary.severities)
    rows = []
    for name in summary.corruptions:
        values = summary.per_severity[name]
        mark = ' †' if name in summary.seen_in_training else ''
        rows.append([name + mark, summary.category(name)]
                    + [fmt_number(values.get(s)) for s in severities]
                    + [fmt_number(summary.per_corruption[name]),
                       fmt_number(summary.clean - summary.per_corruption[name])])
    lines += markdown_table(['Corruption', 'Category'] + [str(s) for s in severities] +
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
    from_files = ((provenance or {}).get('extra') or {}).get('read_from_files')
    if from_files:
        lines.append(f'- Read from files (corrupted test sets on disk, not synthesised): '
                     f'{", ".join(from_files)}; every other corrupted condition was '
                     'synthesised on the fly')
    elif from_files is not None:
        lines.append('- Every corrupted condition was synthesised on the fly')
    lines.append('')

    if summary.per_class:
        pc = summary.per_class
        lines += [f'## Per-class {_per_class_name(summary)}', '']
        rows = [[c, fmt_number(pc['clean'][c]), fmt_number(pc['avg'][c]),
                 fmt_number(pc['delta_tp'][c])] for c in pc['classes']]
        lines += markdown_table(['Class', 'Clean', 'Avg', 'ΔTP'], rows)
        lines += ['']

    calibration = calibration_keys(summary)
    if calibration:
        lines += ['## Calibration under corruption', '']
        header = ['Metric'] + paper_header(columns, last='Avg − Clean')
        rows = []
        for key in calibration:
            values = summary.extra[key]
            rows.append([f'`{key}`'] + PaperRow(
                values['clean'], values['per_corruption'], values['avg'],
                values['avg'] - values['clean']).cells(columns, 4))
        lines += markdown_table(header, rows)
        lines += ['', 'Fractions, not percentages. `ECE`: expected calibration error (15 '
                  'equal-width confidence bins; for detection the detection calibration '
                  'error over score bins, matches at IoU 0.5); `aECE`: the same over 15 '
                  'equal-mass bins; `MCE`: the largest bin |accuracy − confidence|; '
                  '`gap`: mean confidence − '
                  'accuracy (> 0: overconfident); `NLL`, `Brier` (summed over classes); '
                  '`cwECE`: classwise ECE; `AURC`/`eAURC`: area under the risk–coverage '
                  'curve and its excess over an oracle ranking; `acc@90cov`: accuracy of '
                  f'the 90 % most confident pixels. `{SCALED_CALIBRATION_PREFIX}/`: with the '
                  'temperature fitted on clean pixels' +
                  (f' (T = {_temperature_text(prov)})' if _temperature_text(prov) else '') +
                  '.', '']

    other = {k: v for k, v in summary.extra.items() if k not in calibration}
    if other:
        lines += ['## Other metrics', '']
        rows = [[k, fmt_number(v['clean'], 4), fmt_number(v['avg'], 4)]
                for k, v in other.items()]
        lines += markdown_table(['Metric', 'Clean', 'Avg over corruptions'], rows)
        lines += ['']

    lines += list(worst_case_section)
    if plots:
        lines += ['## Plots', '']
        lines += [f'![{osp.splitext(p)[0]}]({p})' for p in plots]
        lines += ['']

    if prov:
        lines += ['## Provenance', '']
        lines += markdown_table(['Field', 'Value'], provenance_rows(prov), align_left=2)
        lines += ['', 'The fingerprint of every input (the hashes that decide whether a '
                  'condition record is reused) is in `results.json` and in each record.', '']
    return '\n'.join(lines)


def _images_text(provenance: Mapping[str, Any]) -> str:
    """The headline's sentence on the images: how many each condition evaluated, and
    those held out for the temperature fit."""
    extra = provenance.get('extra') or {}
    count = extra.get('evaluated_images')
    if not isinstance(count, int):
        return ''
    text = f' Each condition evaluated {count} test image{"s" if count != 1 else ""}'
    record = extra.get('temperature')
    if isinstance(record, Mapping) and str(record.get('source', '')).startswith('held-out'):
        held = record.get('images') or []
        text += (f'; {len(held)} more {"were" if len(held) != 1 else "was"} held out to fit '
                 f'the temperature and not evaluated '
                 f'({", ".join(osp.basename(str(h)) for h in held)})')
    return text + '.'


def _short(value: Any) -> str:
    """A provenance value in one readable cell: lists joined, mappings as ``k=v``."""
    if isinstance(value, Mapping):
        return ', '.join(f'{k}={_short(v)}' for k, v in value.items()) or 'none'
    if isinstance(value, (list, tuple)):
        return ', '.join(map(_short, value)) or 'none'
    return str(value)


def provenance_rows(provenance: Mapping[str, Any]) -> List[List[str]]:
    """The report's provenance table: one row per field, the fields of ``extra`` as rows
    of their own, package versions on one line, the temperature as its value and source;
    the input fingerprint is left to ``results.json`` (its hashes are not for reading)."""
    rows = []

    def add(key: str, value: Any) -> None:
        rows.append([key, MISSING if value is None else f'`{_short(value)}`'])

    for key, value in provenance.items():
        if key == 'versions' and isinstance(value, Mapping):
            add(key, ', '.join(f'{k} {v}' for k, v in value.items() if v is not None))
        elif key == 'extra' and isinstance(value, Mapping):
            for name, inner in value.items():
                if name == 'fingerprint':
                    continue
                if name == 'temperature':
                    inner = _temperature_text(provenance)
                add(name, inner)
        else:
            add(key, value)
    return rows


def calibration_keys(summary: RobustnessSummary) -> List[str]:
    """The calibration metrics among ``summary.extra`` (``calib/ECE``, ...,
    ``calib_ts/ECE``, ...), in table order."""
    return [metric_key(prefix, name) for prefix in CALIBRATION_PREFIXES
            for name in CALIBRATION_METRICS if metric_key(prefix, name) in summary.extra]


def _temperature_text(provenance: Mapping[str, Any]) -> Optional[str]:
    """The fitted temperature the sweep records in ``provenance['extra']``."""
    record = (provenance.get('extra') or {}).get('temperature')
    if not isinstance(record, Mapping) or record.get('temperature') is None:
        return None
    source = record.get('source', 'clean data')
    count = record.get('num_images')
    if isinstance(count, int) and 'images' not in source:
        source += f' ({count} images)'
    value = float(record['temperature'])
    # three decimals for a usable temperature; a degenerate one (an untrained model's
    # 3e8) in six significant digits, which the last bits of the fit do not reach
    text = f'{value:.3f}' if abs(value) < 1e4 else f'{value:.6g}'
    return f'{text}, from {source}'


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
                 calibration_details: Optional[Mapping[Any, Mapping[str, Any]]] = None,
                 seen_in_training: Optional[Sequence[str]] = None,
                 image_stats: Optional[Mapping[Any, Any]] = None,
                 intervals: Optional[Mapping[str, Any]] = None,
                 image_files: Optional[Mapping[Any, Tuple[str, str]]] = None,
                 worst_case_panels: Optional[Callable[[dict], list]] = None,
                 seed_results: Optional[Mapping[Any, Any]] = None,
                 corruption_seed: int = 0,
                 seed_image_stats: Optional[Mapping[Any, Any]] = None,
                 seed_image_files: Optional[Mapping[Any, Tuple[str, str]]] = None,
                 blocks: Optional[Mapping[str, Any]] = None) -> Report:
    """Aggregate ``results`` (see :func:`aggregate`) and write ``results.json``,
    ``results.csv``, ``report.md`` and (with ``plots``) ``severity_curves.png`` and
    ``drop_by_corruption.png`` into ``out_dir``. A ready
    :class:`RobustnessSummary` is accepted too.

    With calibration metrics in the results (``calib/ECE``, ...) the report gains a
    calibration table and ``ece_vs_severity.png``; with ``calibration_details``
    (``{condition: {prefix: details with 'reliability'}}``, as the sweep records them)
    also ``reliability_diagrams.png`` (and ``reliability_diagrams_ts.png`` for the
    temperature-scaled metrics) and, for segmentation, ``risk_coverage.png``: clean vs
    the strongest severity of each corruption. ``seen_in_training`` (corruptions the
    model's training pipeline applied) adds the held-out scores and marks the seen
    corruptions (see :func:`aggregate`). ``image_stats`` (``{condition: ImageStats or
    None}``) adds bootstrap intervals (:func:`~reobench_mm.analysis.intervals.summary_intervals`
    with the ``intervals`` settings ``resamples``, ``level``, ``seed``) to every file;
    ``image_files`` (``{condition: (path of its statistics file, its SHA-256)}``) names
    them in ``results.json`` (relative to ``out_dir``, with their SHA-256) for the paired
    comparison of models (:mod:`~reobench_mm.analysis.paired`). With statistics for every
    condition the worst cases are written too (``worst_cases.json``, ``worst_cases.csv``,
    a report section; :mod:`~reobench_mm.analysis.worst_cases`) and, with plots and
    ``worst_case_panels`` (which returns the thumbnails of the worst cases it is given),
    ``worst_cases.png``.

    ``seed_results`` (``{Condition with its seed: result}``) are the results of the
    random corruptions at further corruption seeds than ``corruption_seed`` (that of
    ``results``): their cells become the means over the seeds
    (:func:`~reobench_mm.analysis.corruption_seeds.fold_seeds`), the report gains a
    section on the seeds, and with ``seed_image_stats`` (keyed the same) the intervals
    resample the seeds too; ``seed_image_files`` names their statistics files in
    ``results.json``. The worst cases and the calibration details are those of the
    first seed. ``blocks`` (``{name: block}``, names of
    :data:`~reobench_mm.analysis.result_blocks.RESULT_BLOCKS`: ``'shifts'``, the block of
    :func:`~reobench_mm.analysis.shift_table.shift_block`; ``'attacks'``, that of
    :func:`~reobench_mm.analysis.attack_table.attack_block`) adds each block's numbers,
    report section and (with plots) its plot (``attack_curves.png``)."""
    if isinstance(results, RobustnessSummary):
        if seed_results:
            raise ValueError('seed_results are folded into the results before they are '
                             'aggregated: give the results, not a summary')
        summary = results
    else:
        folded, seeds = fold_seeds(results, seed_results or {}, corruption_seed, protocol,
                                   task)
        summary = aggregate(folded, protocol=protocol, task=task, metric=metric,
                            expected_severities=expected_severities,
                            seen_in_training=seen_in_training)
        summary.corruption_seeds = seeds
    if blocks:
        summary.blocks = check_blocks(dict(summary.blocks, **blocks))
    stats, stats_ok = {}, False
    if image_stats is not None:
        stats = {check_condition(c, summary.protocol): v for c, v in image_stats.items()}
        summary.intervals = summary_intervals(summary, stats, **dict(intervals or {}),
                                              seed_stats=seed_image_stats)
        stats_ok = all(stats.get(c) is not None for c in summary.conditions)
        stats = {c: stats[c] for c in summary.conditions} if stats_ok else {}
    os.makedirs(out_dir, exist_ok=True)
    report = Report(summary)
    path = lambda name: osp.join(out_dir, name)  # noqa: E731
    files = None
    if image_files:
        files = {check_condition(c, summary.protocol).key:
                 {'file': osp.relpath(osp.abspath(f), osp.abspath(out_dir)), 'sha256': sha}
                 for c, (f, sha) in image_files.items()}
    seed_files = None
    if seed_image_files:
        seed_files = {c.tag: {'condition': c.key, 'seed': c.seed,
                              'file': osp.relpath(osp.abspath(f), osp.abspath(out_dir)),
                              'sha256': sha} for c, (f, sha) in seed_image_files.items()}
    report.files['results.json'] = write_results_json(path('results.json'), summary,
                                                      provenance, files, seed_files)
    report.files['results.csv'] = write_results_csv(path('results.csv'), summary)
    if plots:
        report.files['severity_curves.png'] = plot_severity_curves(
            summary, path('severity_curves.png'))
        report.files['drop_by_corruption.png'] = plot_drop_by_corruption(
            summary, path('drop_by_corruption.png'))
        if any(metric_key(p, ECE) in summary.extra for p in CALIBRATION_PREFIXES):
            report.files[ECE_PLOT_FILE] = plot_ece_vs_severity(summary, path(ECE_PLOT_FILE))
        if calibration_details:
            available = set.intersection(*(set(d) for d in calibration_details.values()))
            for prefix in CALIBRATION_PREFIXES:
                if prefix in available:
                    name = 'reliability_diagrams' + (
                        '' if prefix == CALIBRATION_PREFIX else '_ts') + '.png'
                    report.files[name] = plot_reliability_by_condition(
                        summary, calibration_details, path(name), prefix)
            if CALIBRATION_PREFIX in available and all(
                    'risk_coverage' in d[CALIBRATION_PREFIX]
                    for d in calibration_details.values()):
                report.files['risk_coverage.png'] = plot_risk_coverage(
                    summary, calibration_details, path('risk_coverage.png'))
        for block in RESULT_BLOCKS:
            if block.plot is not None and block.name in summary.blocks:
                drawn = block.plot(summary.blocks[block.name], path(block.plot_file))
                if drawn is not None:
                    report.files[block.plot_file] = drawn
    worst = []
    if stats_ok:
        worst = _write_worst_cases(report, stats, summary, path,
                                   worst_case_panels if plots else None)
    plot_files = [name for name in report.files if name.endswith('.png')
                  and name != WORST_CASES_PLOT]
    report.files['report.md'] = atomic_write_text(
        path('report.md'), render_report_md(summary, provenance, plot_files, worst))
    return report


def _write_worst_cases(report: Report, stats: Mapping[Any, Any], summary: RobustnessSummary,
                       path: Callable[[str], str],
                       panels: Optional[Callable[[dict], list]]) -> List[str]:
    """Write the worst-case files; the report section's lines."""
    cases = worst_cases(stats, summary.corruptions, summary.severities, summary.protocol)
    report.files[WORST_CASES_FILE] = atomic_write_text(
        path(WORST_CASES_FILE), json.dumps(nan_to_null(cases), indent=1, allow_nan=False,
                                           ensure_ascii=False) + '\n')
    report.files[WORST_CASES_CSV] = atomic_write_text(path(WORST_CASES_CSV),
                                                      worst_cases_csv_text(cases))
    plot = None
    if panels is not None:
        drawn = panels(cases)
        if drawn:
            report.files[WORST_CASES_PLOT] = plot_worst_cases(drawn, path(WORST_CASES_PLOT))
            plot = WORST_CASES_PLOT
    return worst_case_lines(cases, summary.metric, plot)
