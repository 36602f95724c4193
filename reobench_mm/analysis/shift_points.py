"""Shift points: one model on one ID -> OOD pair, and reading them from results files.

A :class:`ShiftPoint` holds a model's metric (0-100) in distribution (ID) and out of
distribution (OOD) on one dataset pair, tagged with the pair's shift type and optionally
the model's group, the metric's name and the protocol. :func:`load_shift_points` reads
them from a CSV naming the results files (see its docstring);
:mod:`~reobench_mm.analysis.shifts` analyses them.
"""
from __future__ import annotations

import csv
import math
import os.path as osp
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from .results_file import read_results

__all__ = ['ShiftPoint', 'load_shift_points', 'read_csv_rows', 'POINT_COLUMNS', 'POOLED']

#: The columns of the CSV that :func:`load_shift_points` reads (``group`` may be empty).
POINT_COLUMNS = ('model', 'group', 'dataset', 'shift_type', 'id_results', 'ood_results')
#: The metric :func:`load_shift_points` returns when pooled points have several metrics.
POOLED = 'pooled'


@dataclass(frozen=True)
class ShiftPoint:
    """One model on one ID -> OOD pair (values 0-100), optionally with its metric's name
    and its protocol (None: unnamed)."""
    model: str
    dataset: str
    shift_type: str
    id_value: float
    ood_value: float
    group: Optional[str] = None
    metric: Optional[str] = None
    protocol: Optional[str] = None

    def __post_init__(self) -> None:
        for name in ('model', 'dataset', 'shift_type'):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f'a shift point needs a non-empty {name}, got {value!r}')
        for name in ('group', 'metric', 'protocol'):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f'a {name} is a non-empty name or None, got {value!r}')
        for name in ('id_value', 'ood_value'):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or not 0.0 <= value <= 100.0:
                raise ValueError(f'{self.model} on {self.dataset}: {name} must be a metric '
                                 f'in 0..100, got {value!r}')
            object.__setattr__(self, name, float(value))

    @property
    def loss(self) -> float:
        """``ID - OOD`` (metric points)."""
        return self.id_value - self.ood_value

    @property
    def relative_loss(self) -> float:
        """``(ID - OOD) / ID`` (a fraction; NaN when ID is 0)."""
        return self.loss / self.id_value if self.id_value > 0 else math.nan

    @property
    def label(self) -> str:
        return f'{self.model} ({self.dataset})'


def _shift_value(results: Any, name: str, where: str) -> float:
    """The OOD value of shift set ``name`` (as it is) in a results file's shifts block."""
    block = results.summary.blocks.get('shifts', {})
    for row in block.get('sets') or []:
        if row.get('name') == name and row.get('condition') == 'clean':
            return float(row['ood'])
    known = sorted({r.get('name') for r in block.get('sets') or []})
    raise ValueError(f'{where}: {results.path} has no shift set {name!r} (its shift sets: '
                     f'{known or "none"})')


def read_csv_rows(path: str) -> List[Dict[str, str]]:
    """The rows of a CSV file with a header line (UTF-8, with or without the byte-order
    mark spreadsheet programs write), each a ``{column: value}`` dict.

    Raises:
        ValueError: the file cannot be read, is not UTF-8 text, has no rows, or a row
            with fewer or more fields than the header (each naming the file and line).
    """
    try:
        with open(path, newline='', encoding='utf-8-sig') as handle:
            reader = csv.DictReader(handle)
            numbered = [(reader.line_num, row) for row in reader]
            header = reader.fieldnames or []
    except UnicodeDecodeError as error:
        raise ValueError(f'{path} is not UTF-8 text (byte 0x{error.object[error.start]:02x} '
                         f'at offset {error.start}): save it as UTF-8 (CSV UTF-8 in a '
                         'spreadsheet program)') from None
    except OSError as error:
        raise ValueError(f'{path} cannot be read: {error.strerror or error}') from None
    if not numbered:
        raise ValueError(f'{path} has no rows')
    for number, row in numbered:
        extra = row.get(None)  # type: ignore[call-overload]
        short = [c for c in header if row.get(c) is None]
        if extra or short:
            given = len(header) + len(extra or ()) - len(short)
            raise ValueError(f'{path} line {number} has {given} field(s), the header '
                             f'{len(header)} ({", ".join(header)})')
    return [row for _, row in numbered]


def load_shift_points(path: str, pool_metrics: bool = False
                      ) -> Tuple[List[ShiftPoint], str]:
    """The points of a CSV with the columns :data:`POINT_COLUMNS` (result paths relative
    to the CSV's folder), and the metric: each side's value is the clean metric of its
    results file, and each point keeps that metric's name. With an optional ``shift``
    column naming a shift set of the ID results (a run that evaluated the OOD set as a
    condition), the OOD value is that set's and ``ood_results`` may be empty. An optional
    ``protocol`` column names each row's protocol (``frozen``, ``full``...; empty cells:
    no protocol).

    Every row must be of one task and metric unless ``pool_metrics``; then rows of other
    metrics are read too (a row's ID and OOD still one task and metric), and the metric
    returned is the points' one metric name or, with several, :data:`POOLED`.

    Raises:
        ValueError: a missing column, an unreadable results file, ID and OOD results of
            other tasks or metrics (or, without ``pool_metrics``, rows of another task or
            metric than the first row), or of other checkpoints, or a shift set the
            results do not have (named, with the row).
    """
    folder = osp.dirname(osp.abspath(path))
    rows = read_csv_rows(path)
    lacking = [c for c in POINT_COLUMNS if c not in rows[0]]
    if lacking:
        raise ValueError(f'{path} lacks the column(s) {lacking}; columns: {list(POINT_COLUMNS)}')
    points: List[ShiftPoint] = []
    first: Optional[Tuple[Tuple[str, str], int]] = None  # the first row's (task, metric)
    for number, row in enumerate(rows, 2):
        where = f'{path} line {number} ({row["model"]} on {row["dataset"]})'
        shift = (row.get('shift') or '').strip()
        if shift:
            results = read_results(osp.join(folder, row['id_results']))
            kind = (results.task, results.metric)
            values = (results.summary.clean, _shift_value(results, shift, where))
        else:
            files = [read_results(osp.join(folder, row[k]))
                     for k in ('id_results', 'ood_results')]
            kinds = {(f.task, f.metric) for f in files}
            if len(kinds) > 1:
                raise ValueError(f'{where}: its ID and OOD results are of other tasks or '
                                 f'metrics ({sorted(kinds)}); a row pairs one task and metric')
            digests = {f.provenance.get('checkpoint_sha256') for f in files} - {None}
            if len(digests) > 1:
                raise ValueError(f'{where}: the ID and OOD results come from different '
                                 'checkpoints (their checkpoint SHA-256 differ)')
            kind = next(iter(kinds))
            values = (files[0].summary.clean, files[1].summary.clean)
        if first is None:
            first = (kind, number)
        elif kind != first[0] and not pool_metrics:
            raise ValueError(f'{where}: results of another task or metric ({kind[0]} '
                             f'{kind[1]}; line {first[1]}: {first[0][0]} {first[0][1]}); '
                             '--pool-metrics (pool_metrics=True) pools the metrics within '
                             'each shift type')
        points.append(ShiftPoint(row['model'], row['dataset'], row['shift_type'], *values,
                                 row['group'] or None, metric=kind[1],
                                 protocol=(row.get('protocol') or '').strip() or None))
    metrics = list(dict.fromkeys(p.metric for p in points))
    return points, metrics[0] if len(metrics) == 1 else POOLED
