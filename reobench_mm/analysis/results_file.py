"""Reading a ``results.json``: the one typed reader every consumer uses.

A ``results.json`` (written by :func:`~reobench_mm.analysis.report.write_report`) holds
``{"format", "numbers", "provenance"}`` and, where the conditions kept per-image
statistics, ``"digests"`` (below) and ``"image_stats"``: condition key -> the statistics file (relative to the
results file) and its SHA-256, read by :meth:`ResultsFile.image_stats` (with the random
corruptions evaluated with several corruption seeds, also ``"seed_image_stats"``: those of
the further seeds, by condition tag, with their condition key and seed).
:func:`read_results` checks it and returns a
:class:`ResultsFile`: the :class:`~reobench_mm.analysis.results.RobustnessSummary`
re-aggregated from the stored conditions (with the severities and training pool the file
states), checked against the summary numbers the file holds, and the provenance. The numbers that cannot be recomputed from
the stored conditions alone — the bootstrap intervals, the corruption seeds' spread and
the blocks of the other kinds of condition (the shift sets', the attacks') — are checked
against the SHA-256 digests the writer stores beside them (:func:`numbers_digests`): a
block edited by hand is refused, naming it. Tables,
comparisons, the data-budget and recipe drivers and the tools read results through it,
never as raw nested dicts.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from reobench_corruptions.condition import Condition
from ..evaluation.functional.condition_stats import ImageStats, read_stats_file
from ..evaluation.functional.seed_average import average_over_seeds
from ..fileio import nan_to_null, read_json
from .result_blocks import RESULT_BLOCKS, result_block_names
from .results import ConditionResult, RobustnessSummary, aggregate, normalize_results

__all__ = ['RESULTS_FORMAT', 'ResultsFile', 'read_results', 'numbers_digests', 'digested_fields']

RESULTS_FORMAT = 'reobench_mm.robustness_results/1'
#: The ``numbers`` fields a results file must hold.
_REQUIRED = ('protocol', 'clean', 'avg', 'delta_tp', 'per_corruption', 'included',
             'conditions')
#: Summary numbers checked against the re-aggregation (a file edited by hand is refused).
_CHECKED = ('clean', 'avg', 'delta_tp', 'mpc', 'rpc')


def digested_fields() -> Tuple[str, ...]:
    """The fields of ``numbers`` kept as written (not recomputed on reading), each
    checked against its digest: the intervals, the corruption seeds, every result
    block."""
    return ('intervals', 'corruption_seeds') + result_block_names()


def _digest(value: Any) -> str:
    text = json.dumps(nan_to_null(value), sort_keys=True, separators=(',', ':'),
                      ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def numbers_digests(numbers: Mapping[str, Any]) -> Dict[str, str]:
    """``{field: SHA-256}`` of the :func:`digested_fields` ``numbers`` holds (of their
    compact JSON with sorted keys): written as ``results.json``'s ``digests``."""
    return {name: _digest(numbers[name]) for name in digested_fields()
            if numbers.get(name) is not None}


def _edited_fields(numbers: Mapping[str, Any], stored: Any) -> list:
    """The digested fields of ``numbers`` whose digest is missing or differs."""
    stored = stored if isinstance(stored, Mapping) else {}
    return [name for name, digest in numbers_digests(numbers).items()
            if stored.get(name) != digest]


@dataclass(frozen=True)
class ResultsFile:
    """One ``results.json``, read and checked.

    Attributes:
        path: the file.
        summary: the robustness summary of its conditions (the numbers the file holds,
            recomputed from its conditions and checked equal).
        provenance: what the file says of the model (``model``, ``backbone``, config,
            checkpoint, versions, ``extra``).
    """
    path: str
    summary: RobustnessSummary
    provenance: Dict[str, Any] = field(default_factory=dict)
    image_files: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    seed_image_files: Dict[str, Dict[str, Any]] = field(default_factory=dict)

    def _read_stats(self, entry: Mapping[str, Any], what: str) -> ImageStats:
        folder = osp.dirname(osp.abspath(self.path))
        try:
            return read_stats_file(osp.join(folder, str(entry.get('file'))),
                                   entry.get('sha256'))
        except ValueError as error:
            raise ValueError(f'{self.path} names per-image statistics of {what} that '
                             f'cannot be used: {error}') from None

    def image_stats(self) -> Optional[Dict[Condition, ImageStats]]:
        """``condition -> per-image statistics`` of every condition, or None when some
        condition has none (results written before they were kept). A condition
        evaluated with several corruption seeds gets the mean over its seeds
        (:func:`~reobench_mm.evaluation.functional.seed_average.average_over_seeds`), as
        its cell is.

        Raises:
            ValueError: a statistics file the results name is missing, altered or not
                such a file (named).
        """
        if any(c.key not in self.image_files for c in self.conditions):
            return None
        seeds = (self.summary.corruption_seeds or {}).get('conditions') or {}
        further: Dict[str, Dict[int, Mapping[str, Any]]] = {}
        for entry in self.seed_image_files.values():
            if isinstance(entry, Mapping):
                further.setdefault(str(entry.get('condition')), {})[entry.get('seed')] = entry
        out = {}
        for condition in self.conditions:
            stats = [self._read_stats(self.image_files[condition.key], condition.key)]
            for seed in [int(s) for s in seeds.get(condition.key, {}).get('seeds', {})][1:]:
                entry = further.get(condition.key, {}).get(seed)
                if entry is None:
                    return None
                stats.append(self._read_stats(entry, f'{condition.key} (seed {seed})'))
            out[condition] = average_over_seeds(stats)
        return out

    @property
    def model(self) -> str:
        """The model's name: the provenance's ``model``, else the file's folder name."""
        return str(self.provenance.get('model')
                   or osp.basename(osp.dirname(osp.abspath(self.path))))

    @property
    def backbone(self) -> Optional[str]:
        return self.provenance.get('backbone')

    @property
    def task(self) -> Optional[str]:
        return self.summary.task

    @property
    def metric(self) -> str:
        return self.summary.metric

    @property
    def protocol(self) -> str:
        return self.summary.protocol

    @property
    def severities(self) -> Tuple[int, ...]:
        """The severities the run evaluated."""
        return self.summary.severities

    @property
    def conditions(self) -> Dict[Condition, ConditionResult]:
        """``condition -> result``, clean first, then table order."""
        return self.summary.conditions


def _close(stored: Any, computed: float) -> bool:
    """A stored summary number (``null`` for NaN) equals the recomputed one."""
    stored = math.nan if stored is None else float(stored)
    if math.isnan(stored) or math.isnan(computed):
        return math.isnan(stored) and math.isnan(computed)
    return math.isclose(stored, computed, rel_tol=1e-12, abs_tol=1e-12)


def read_results(path: str) -> ResultsFile:
    """Read and check a ``results.json``.

    Raises:
        ValueError: the file cannot be read, is not JSON, is not a results file of this
            format, lacks a field, holds a condition that is not valid, or its summary
            numbers do not match its conditions (each message starts with the path).
    """
    path = os.fspath(path)
    doc, problem = read_json(path)
    if problem is not None:
        raise ValueError(f'{path} {problem}')
    if not isinstance(doc, dict) or doc.get('format') != RESULTS_FORMAT:
        raise ValueError(f'{path} is not a robustness results file (expected "format": '
                         f'{RESULTS_FORMAT!r})')
    numbers = doc.get('numbers')
    if not isinstance(numbers, dict):
        raise ValueError(f'{path}: "numbers" is not an object')
    lacking = [k for k in _REQUIRED if k not in numbers]
    if lacking:
        raise ValueError(f'{path}: "numbers" lacks {", ".join(map(repr, lacking))}')
    try:
        rows = {}
        for number, row in enumerate(numbers['conditions'], 1):
            name = row.get('condition') if isinstance(row, dict) else None
            if not isinstance(name, str):
                raise ValueError(f'row {number} of "conditions" names no condition (its '
                                 f'"condition" is {name!r})')
            rows[row['condition']] = {k: row.get(k) for k in ('value', 'per_class', 'extra')}
        conditions = normalize_results(rows, numbers['protocol'])
        summary = aggregate(conditions, protocol=numbers['protocol'],
                            task=numbers.get('task'), metric=numbers.get('metric'),
                            expected_severities=numbers['included']['severities'],
                            seen_in_training=(numbers.get('training') or {}).get(
                                'seen_corruptions'))
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f'{path}: its conditions cannot be read ({error})') from None
    differing = [k for k in _CHECKED if k in numbers
                 and not _close(numbers[k], getattr(summary, k))]
    if differing:
        raise ValueError(f'{path}: its {", ".join(differing)} do not match its conditions '
                         '(edited by hand?); write the report again from the condition '
                         'records')
    edited = _edited_fields(numbers, doc.get('digests'))
    if edited:
        raise ValueError(f'{path}: its {", ".join(edited)} do not match the digests written '
                         'with them (edited by hand?); write the report again from the '
                         'condition records (run the same test again: every record is '
                         'reused)')
    if isinstance(numbers.get('intervals'), dict):
        summary.intervals = numbers['intervals']
    if isinstance(numbers.get('corruption_seeds'), dict):
        summary.corruption_seeds = numbers['corruption_seeds']
    summary.blocks = {b.name: numbers[b.name] for b in RESULT_BLOCKS
                      if isinstance(numbers.get(b.name), dict)}
    provenance = doc.get('provenance')
    files, seed_files = doc.get('image_stats'), doc.get('seed_image_stats')
    return ResultsFile(path, summary, dict(provenance) if isinstance(provenance, Mapping)
                       else {}, dict(files) if isinstance(files, Mapping) else {},
                       dict(seed_files) if isinstance(seed_files, Mapping) else {})
