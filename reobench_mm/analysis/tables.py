"""Tables of robustness results: the number formatter and the Markdown-table writer every
report of the package uses, the paper layout (REOBench Tables 2 and 3) and the
several-model comparison table of ``tools/analysis_tools/robustness_table.py``.

The paper layout is ``Clean``, one column per corruption (:func:`column_title`), ``Avg``
and ``ΔTP``; one row of it (:class:`PaperRow`) is rendered by :meth:`PaperRow.cells` for
the report's table (:func:`~reobench_mm.analysis.report.render_report_md`), the aligned
text of :func:`paper_table_lines` and the comparison table (:func:`comparison_markdown`).
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..evaluation.keys import ECE, ECE_KEY
from ..fileio import atomic_write_text
from .results import RobustnessSummary, engine_to_paper_name

__all__ = [
    'csv_cell', 'csv_text',
    'MISSING', 'fmt_number', 'fmt_estimate', 'markdown_table', 'column_title', 'paper_header', 'PaperRow',
    'paper_table_lines', 'ComparisonTable', 'comparison_markdown', 'comparison_csv_text',
    'write_comparison'
]

#: What a table shows for a missing or undefined value.
MISSING = '–'


def fmt_number(value: Optional[float], digits: int = 2, signed: bool = False) -> str:
    """``value`` with ``digits`` decimals (``+`` before positive numbers too when
    ``signed``); :data:`MISSING` for None, NaN and infinities."""
    if value is None or not math.isfinite(value):
        return MISSING
    return f'{value:+.{digits}f}' if signed else f'{value:.{digits}f}'


def fmt_estimate(value: Optional[float], interval: Optional[Sequence[float]] = None,
                 scale: float = 1.0, digits: int = 2) -> str:
    """``value × scale`` with ``digits`` decimals, then its interval ``[low, high]``
    (scaled alike) when one is given; ``'n/a'`` for None, NaN and infinities (the
    sections of shift sets and attacks)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return 'n/a'
    text = f'{value * scale:.{digits}f}'
    if interval:
        text += f' [{interval[0] * scale:.{digits}f}, {interval[1] * scale:.{digits}f}]'
    return text


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]],
                   align_left: Optional[int] = 1) -> List[str]:
    """The lines of a Markdown table of text cells: the first ``align_left`` columns
    aligned left, the others right (``None``: no alignment marks, the renderer's
    default)."""
    if align_left is None:
        marks = ['---'] * len(header)
    else:
        marks = [':---' if i < align_left else '---:' for i in range(len(header))]
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '|'.join(marks) + '|']
    return lines + ['| ' + ' | '.join(row) + ' |' for row in rows]


def column_title(name: str) -> str:
    """Display title of a corruption column (``'salt_pepper_noise'`` -> ``'Salt Pepper
    Noise'``)."""
    return name.replace('_', ' ').title()


# ----------------------------------------------------------------------------------
# The paper layout
# ----------------------------------------------------------------------------------
def paper_header(columns: Sequence[str], last: str = 'ΔTP') -> List[str]:
    """The titles of the paper layout: ``Clean``, one per corruption of ``columns``,
    ``Avg`` and ``last`` (``ΔTP``; a calibration row ends with ``Avg − Clean``)."""
    return ['Clean'] + [column_title(c) for c in columns] + ['Avg', last]


@dataclass(frozen=True)
class PaperRow:
    """The numbers of one row of the paper layout.

    Attributes:
        clean: the clean value.
        per_corruption: corruption -> its mean over the severities (corruptions absent
            from it are shown as missing).
        avg: the mean over the corruptions.
        last: the last column: ``ΔTP`` (clean − Avg) for the task metric, ``Avg − Clean``
            for a calibration error.
    """
    clean: Optional[float]
    per_corruption: Mapping[str, Optional[float]]
    avg: Optional[float]
    last: Optional[float]

    def values(self, columns: Sequence[str]) -> List[Optional[float]]:
        """The numbers in the order of :func:`paper_header` for ``columns``."""
        return [self.clean] + [self.per_corruption.get(c) for c in columns] + \
            [self.avg, self.last]

    def cells(self, columns: Sequence[str], digits: int = 2,
              bold: Sequence[bool] = ()) -> List[str]:
        """The row as text cells (:func:`fmt_number`), ``**bold**`` where ``bold`` (one
        flag per cell, from the first; missing flags are False) says so."""
        flags = list(bold) + [False] * (len(columns) + 3 - len(bold))
        return [f'**{text}**' if flag else text for text, flag in
                zip((fmt_number(v, digits) for v in self.values(columns)), flags)]


def paper_table_lines(summary: RobustnessSummary, caption: bool = False) -> List[str]:
    """The paper-layout table of one model as aligned text lines: a header (``Clean``,
    one column per corruption, ``Avg``, ``ΔTP``), the task metric's row (``mIoU`` /
    ``mAP``, mean over severities, 2 decimals) and, with calibration metrics, an ``ECE``
    row (clean, per corruption, Avg, then Avg - Clean; 3 decimals). Missing values show
    as ``–``.

    Args:
        summary: the model's summary (of a ``results.json``: its
            :func:`~reobench_mm.analysis.results_file.read_results` ``summary``).
        caption: start with a line saying what the numbers are (the severities averaged,
            the definition of ΔTP and of the ECE row's last column).
    """
    numbers = summary.to_dict()  # NaN as None, which the cells show as missing
    names = list(numbers['per_corruption'])
    header = paper_header(names)
    rows: List[Tuple[str, int, PaperRow]] = [(numbers['metric'], 2, PaperRow(
        numbers['clean'], {n: numbers['per_corruption'][n]['mean'] for n in names},
        numbers['avg'], numbers['delta_tp']))]
    ece = (numbers.get('extra') or {}).get(ECE_KEY)
    if ece:
        gap = None if ece['avg'] is None or ece['clean'] is None else ece['avg'] - ece['clean']
        rows.append((ECE, 3, PaperRow(ece['clean'], ece['per_corruption'], ece['avg'], gap)))
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
    for name, digits, row in rows:
        lines.append(name.ljust(label) + '  ' + '  '.join(
            text.rjust(w) for text, w in zip(row.cells(names, digits), widths)))
    return lines


# ----------------------------------------------------------------------------------
# Several models
# ----------------------------------------------------------------------------------
@dataclass
class ComparisonTable:
    """Rows of several models over the same corruption columns.

    ``rows`` hold ``model``, ``backbone``, ``clean``, one value per column, ``avg``
    and ``delta_tp``; ``warnings`` the remarks on how they were formed (names derived,
    conditions left out), shown under the Markdown table. Built from a
    :class:`~reobench_mm.analysis.model_set.ModelSet` by
    :func:`~reobench_mm.analysis.model_set.comparison_table` (the numbers of the
    cross-model comparison of the same files).
    """
    metric: str
    protocol: str
    columns: List[str]
    rows: List[Dict[str, Any]]
    warnings: List[str] = field(default_factory=list)

    def paper_row(self, row: Mapping[str, Any]) -> PaperRow:
        """One of :attr:`rows` in the paper layout."""
        return PaperRow(row['clean'], {c: row[c] for c in self.columns}, row['avg'],
                        row['delta_tp'])


def _best(table: ComparisonTable, key: str, digits: int) -> Optional[float]:
    values = [round(r[key], digits) for r in table.rows if r[key] is not None]
    if len(values) < 2:
        return None
    return min(values) if key == 'delta_tp' else max(values)


def comparison_markdown(table: ComparisonTable, digits: int = 2) -> str:
    """Markdown table like REOBench Tables 2/3, the best value per column in bold
    (highest; lowest for ΔTP; ties all bold), the note of what the bold means
    (:data:`BOLD_NOTE`), then the table's warnings as a list."""
    keys = ['clean'] + table.columns + ['avg', 'delta_tp']
    best = {k: _best(table, k, digits) for k in keys}
    header = ['Model', 'Backbone'] + paper_header(table.columns)
    rows = []
    for row in table.rows:
        bold = [best[k] is not None and round(row[k], digits) == best[k] for k in keys]
        rows.append([str(row['model']), row['backbone'] or MISSING] +
                    table.paper_row(row).cells(table.columns, digits, bold))
    lines = markdown_table(header, rows, align_left=2)
    lines += ['', BOLD_NOTE]
    if table.warnings:
        lines += [''] + [f'- {message}' for message in table.warnings]
    return '\n'.join(lines) + '\n'


#: Under a table of several models: what the bold does not say.
BOLD_NOTE = ('Bold: the best value of each column as written, not a significant '
             'difference (with a few test images a few hundredths are noise); '
             '`tools/analysis_tools/robustness_compare.py` tests the differences on the '
             'same images.')


def csv_cell(value: Any) -> str:
    """One CSV cell: '' for None and non-finite numbers, floats (numpy's too) as
    ``repr`` (every digit), anything else as ``str``."""
    if value is None:
        return ''
    if isinstance(value, float) or hasattr(value, 'dtype'):
        number = float(value)
        return repr(number) if math.isfinite(number) else ''
    return str(value)


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A CSV file's text: ``header``, then ``rows`` cell by cell (:func:`csv_cell`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    writer.writerow(header)
    writer.writerows([[csv_cell(v) for v in row] for row in rows])
    return buffer.getvalue()


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
        values = table.paper_row(row).values(table.columns)
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
