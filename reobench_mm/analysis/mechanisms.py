"""Mechanism tests of the calibration study: do the encoders of one domain of pretraining
keep their representation, and their confidence in check, better than the other's?

The calibration study of geospatial foundation models compares Earth-observation (EO)
and natural-image encoders under corruption (§IV-C) with two-sided Mann–Whitney U tests
of one number per encoder between the two domains:

- **B1**, head-layer CKA: the clean-vs-corrupted linear CKA of the final hooked block
  (the deepest compared layer, the one next to the head) — here each model's mean over
  the corrupted conditions;
- **B2**, the drift–confidence coupling: Spearman ρ over the test images of each image's
  representation drift with its confidence (``spearman_drift_confidence`` of the drift
  file) — each model's mean over the conditions;
- **B3**, the overconfident fraction: the fraction of predictions on strongly drifted
  images that are confident (> 0.9) and wrong (``overconfident_drift_fraction``) — each
  model's mean over the conditions.

Beside them: CKA against severity by domain (the study's Fig. 7: per severity the mean
over the corruptions, then the group mean and its spread), the clean participation
ratio by domain (its Fig. 17, with the same test), the split-half noise floors of CKA
and of the cosine per model, and, with the models' results, Spearman ρ across models of
CKA against ECE inflation (its Spearman correlations, Table III;
:func:`~reobench_mm.analysis.groups.cka_ece_correlation`, with the permutation and the
analytic p-value).

Everything is read from the ``representation_drift.json`` of each model (written by
``tools/analysis_tools/representation_drift.py``); the outputs are written by
:mod:`~reobench_mm.analysis.mechanism_report`.
"""
from __future__ import annotations

import math
import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

from ..fileio import read_json
from .groups import (DEFAULT_DRAWS, CkaEceCorrelation, Groupings, check_groupings,
                     cka_ece_correlation, read_drift_file)
from .model_set import ModelSet

__all__ = ['MECHANISM_FORMAT', 'DEFAULT_COLUMN', 'MIN_GROUP_MODELS', 'EXACT_MAX_SIZE',
           'TESTED', 'DriftCell', 'ModelDrift', 'read_model_drift', 'mann_whitney_method',
           'mann_whitney', 'MechanismTest', 'MechanismTests', 'mechanism_tests']

MECHANISM_FORMAT = 'reobench_mm.mechanism_tests/1'
#: The grouping (column) compared when none is named.
DEFAULT_COLUMN = 'domain'
#: The fewest models a group may have.
MIN_GROUP_MODELS = 2
#: ``'exact'`` Mann–Whitney p-values when the smaller group has at most this many models
#: and no value is tied (``scipy.stats.mannwhitneyu``'s own ``method='auto'`` rule).
EXACT_MAX_SIZE = 8
#: The numbers tested between the two groups: key -> (title, definition).
TESTED = {
    'head_cka': ('B1 head-layer CKA', 'linear CKA of the final hooked block, clean against '
                 'corrupted, mean over the conditions'),
    'drift_confidence_rho': ('B2 drift–confidence coupling', 'Spearman rho over the test '
                             'images of drift with confidence, mean over the conditions'),
    'overconfident_fraction': ('B3 overconfident fraction', 'fraction of predictions of '
                               'images drifting more than the median that are confident '
                               '(> 0.9) and wrong, mean over the conditions'),
    'pr_clean': ('Participation ratio, clean (Fig. 17)', 'participation ratio of the final '
                 'hooked block\'s clean representation'),
}
#: Numbers reported per model without a test: key -> title.
REPORTED = {'head_cosine': 'cosine (final block)', 'cka_floor': 'CKA floor',
            'cosine_floor': 'cosine floor'}


# ----------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------
@dataclass
class DriftCell:
    """One condition of a drift file, at its final hooked block (None: not recorded or
    undefined)."""
    condition: str
    corruption: str
    severity: int
    cka: Optional[float]
    cka_floor: Optional[float]
    cosine: Optional[float]
    cosine_floor: Optional[float]
    pr_clean: Optional[float]
    rho_confidence: Optional[float]
    overconfident: Optional[float]


@dataclass
class ModelDrift:
    """The part of one model's ``representation_drift.json`` the tests read."""
    model: str
    path: str
    block: str
    representation: str
    protocol: str
    pr_convention: str
    cells: Dict[str, DriftCell]


def _optional(value: Any) -> Optional[float]:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def read_model_drift(path: str, model: str) -> ModelDrift:
    """Read ``path`` (checked as :func:`~reobench_mm.analysis.groups.read_drift_file`
    checks it) into a :class:`ModelDrift` of ``model``: per condition the final block's
    CKA, CKA floor, cosine, cosine floor (absent in files written before it was
    recorded), clean participation ratio and, where the drift–confidence coupling was
    computed, ρ(drift, confidence) and the overconfident fraction.

    Raises:
        ValueError: unreadable, of another format, or lacking the fields read.
    """
    base = read_drift_file(path)
    doc, _ = read_json(path)
    cells: Dict[str, DriftCell] = {}
    try:
        for row in doc['conditions']:
            block = row['blocks'][base.block]
            coupling = row.get('drift_confidence') or {}
            rho = (coupling.get('spearman_drift_confidence') or {}).get('rho')
            cells[str(row['condition'])] = DriftCell(
                str(row['condition']), str(row['corruption']), int(row['severity']),
                _optional(block.get('cka')), _optional(block.get('cka_floor')),
                _optional(block.get('cosine')), _optional(block.get('cosine_floor')),
                _optional(block.get('pr_clean')), _optional(rho),
                _optional(coupling.get('overconfident_drift_fraction')))
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValueError(f'{path}: its conditions cannot be read ({error!r})') from None
    return ModelDrift(model, path, base.block, base.representation, base.protocol,
                      str(doc['settings'].get('pr_convention', 'raw')), cells)


# ----------------------------------------------------------------------------------
# Mann–Whitney U
# ----------------------------------------------------------------------------------
def mann_whitney_method(first: Sequence[float], second: Sequence[float]) -> str:
    """``'exact'`` when the smaller group has at most :data:`EXACT_MAX_SIZE` values and
    no value occurs twice among both groups, else ``'asymptotic'`` (normal approximation
    with tie and continuity corrections): the choice ``scipy.stats.mannwhitneyu`` makes
    with ``method='auto'``, made here so that it can be reported."""
    both = np.concatenate([np.asarray(first, float), np.asarray(second, float)])
    ties = np.unique(both).size < both.size
    small = min(len(first), len(second)) <= EXACT_MAX_SIZE
    return 'exact' if small and not ties else 'asymptotic'


def mann_whitney(first: Sequence[float], second: Sequence[float]
                 ) -> Tuple[float, float, str]:
    """Two-sided ``scipy.stats.mannwhitneyu`` with the method of
    :func:`mann_whitney_method`: ``(U of first, p, method)``."""
    method = mann_whitney_method(first, second)
    result = stats.mannwhitneyu(first, second, alternative='two-sided', method=method)
    return float(result.statistic), float(result.pvalue), method


# ----------------------------------------------------------------------------------
# The tests
# ----------------------------------------------------------------------------------
@dataclass
class MechanismTest:
    """One number compared between the two groups: the group means, U of ``first``,
    the two-sided p-value and the method (None and NaN when the number is undefined)."""
    statistic: str
    title: str
    first: str
    second: str
    n_first: int
    n_second: int
    mean_first: float
    mean_second: float
    u: float
    p_value: float
    method: Optional[str]
    conditions: List[str]


@dataclass
class MechanismTests:
    """Everything :func:`mechanism_tests` computes.

    Attributes:
        column: the grouping compared; labels: its two groups (first as U's);
        members: label -> its models; models: every model (drift-file order);
        blocks, paths: per model its final hooked block and drift file;
        representation, pr_convention, protocol: shared by the drift files;
        severities: the severities of the tested conditions (None: all);
        values: number (:data:`TESTED` and :data:`REPORTED`) -> one value per model;
        conditions: tested number -> the conditions its means are over;
        tests: one per number of :data:`TESTED`;
        curve_severities, curve: CKA against severity (models × severities; severity 0
            is the clean condition when every file has it);
        cka_ece: Spearman ρ of CKA against ECE inflation (None without results);
        notes: what was left out and why.
    """
    column: str
    labels: List[str]
    members: Dict[str, List[str]]
    models: List[str]
    blocks: Dict[str, str]
    paths: Dict[str, str]
    representation: str
    pr_convention: str
    protocol: str
    severities: Optional[List[int]]
    values: Dict[str, np.ndarray]
    conditions: Dict[str, List[str]]
    tests: List[MechanismTest]
    curve_severities: List[int]
    curve: np.ndarray
    cka_ece: Optional[CkaEceCorrelation] = None
    notes: List[str] = field(default_factory=list)

    def rows_of(self, label: str) -> List[int]:
        """The indices of ``label``'s models."""
        return [self.models.index(m) for m in self.members[label]]

    def curve_by_group(self, label: str) -> Tuple[np.ndarray, np.ndarray]:
        """``(mean, standard deviation)`` over ``label``'s models of the CKA at each of
        :attr:`curve_severities` (sample standard deviation, ``ddof=1``)."""
        values = self.curve[self.rows_of(label)]
        return values.mean(axis=0), values.std(axis=0, ddof=1)

    def test(self, statistic: str) -> MechanismTest:
        """The test of ``statistic``."""
        for t in self.tests:
            if t.statistic == statistic:
                return t
        raise KeyError(f'no test of {statistic!r}; tested: {list(TESTED)}')

    def to_dict(self) -> Dict[str, Any]:
        """The JSON document (``mechanism_tests.json``; undefined numbers None)."""
        def number(value: Any) -> Optional[float]:
            return _optional(value)
        curves = {}
        for label in self.labels:
            mean, spread = self.curve_by_group(label)
            curves[label] = {'mean': [number(v) for v in mean],
                             'std': [number(v) for v in spread]}
        return {
            'format': MECHANISM_FORMAT, 'column': self.column, 'labels': self.labels,
            'members': self.members, 'blocks': self.blocks,
            'paths': {m: osp.abspath(p) for m, p in self.paths.items()},
            'representation': self.representation, 'pr_convention': self.pr_convention,
            'protocol': self.protocol, 'severities': self.severities,
            'definitions': {k: d for k, (_, d) in TESTED.items()},
            'mann_whitney': 'scipy.stats.mannwhitneyu, two-sided, U of the first group; '
                            f"'exact' when the smaller group has <= {EXACT_MAX_SIZE} models "
                            "and no ties, else 'asymptotic'",
            'values': {k: {m: number(v[i]) for i, m in enumerate(self.models)}
                       for k, v in self.values.items()},
            'tests': [{'statistic': t.statistic, 'title': t.title, 'first': t.first,
                       'second': t.second, 'n_first': t.n_first, 'n_second': t.n_second,
                       'mean_first': number(t.mean_first),
                       'mean_second': number(t.mean_second), 'u': number(t.u),
                       'p_value': number(t.p_value), 'method': t.method,
                       'conditions': t.conditions} for t in self.tests],
            'cka_by_severity': {
                'severities': self.curve_severities,
                'models': {m: [number(v) for v in self.curve[i]]
                           for i, m in enumerate(self.models)},
                'groups': curves,
                'spread': 'sample standard deviation over the group\'s models (ddof=1)'},
            'cka_ece_inflation': None if self.cka_ece is None else self.cka_ece.to_dict(),
            'notes': self.notes}


def _select_column(groupings: Groupings, column: str, models: Sequence[str]
                   ) -> Tuple[List[str], Dict[str, List[str]]]:
    """The two groups of ``column`` (labels in order of first appearance among the
    models) and their members, checked."""
    if column not in groupings:
        raise ValueError(f'no grouping column {column!r}; the columns given are '
                         f'{sorted(groupings)}')
    mapping = check_groupings({column: groupings[column]}, models)[column]
    labels = list(dict.fromkeys(mapping[m] for m in models))
    members = {label: [m for m in models if mapping[m] == label] for label in labels}
    if len(labels) != 2:
        raise ValueError(f'column {column!r} has {len(labels)} group(s) {labels}; the '
                         'mechanism tests compare exactly two (e.g. EO and natural)')
    for label, group in members.items():
        if len(group) < MIN_GROUP_MODELS:
            raise ValueError(f'group {label!r} of column {column!r} has {len(group)} '
                             f'model(s) {group}; each group needs at least '
                             f'{MIN_GROUP_MODELS}')
    return labels, members


def _shared(files: Mapping[str, ModelDrift], what: str) -> str:
    seen = sorted({getattr(f, what) for f in files.values()})
    if len(seen) > 1:
        raise ValueError(f'the drift files mix {what}s {seen}; compare files of one '
                         f'{what}')
    return seen[0]


def _conditions(files: Mapping[str, ModelDrift], severities: Optional[Sequence[int]],
                notes: List[str]) -> List[str]:
    """The corrupted conditions of every file (first file's order), restricted to
    ``severities``."""
    first = next(iter(files.values()))
    corrupted = [k for k, c in first.cells.items() if c.severity > 0]
    common = [k for k in corrupted if all(k in f.cells for f in files.values())]
    others = sorted({k for f in files.values() for k, c in f.cells.items()
                     if c.severity > 0} - set(common))
    if others:
        notes.append(f'conditions not in every drift file, left out: {", ".join(others)}')
    if severities is not None:
        common = [k for k in common if first.cells[k].severity in severities]
    if not common:
        raise ValueError('no corrupted condition is in every drift file'
                         + ('' if severities is None else f' at severities {list(severities)}'))
    return common


def _model_means(files: Mapping[str, ModelDrift], models: Sequence[str],
                 conditions: Sequence[str], get: Callable[[DriftCell], Optional[float]],
                 title: str, notes: List[str]) -> Tuple[np.ndarray, List[str]]:
    """Per model, the mean of ``get`` over the conditions where every model has it."""
    used = [k for k in conditions if all(get(files[m].cells[k]) is not None for m in models)]
    left = [k for k in conditions if k not in used]
    if left and used:
        notes.append(f'{title}: not defined for every model in {", ".join(left)}; those '
                     'conditions are left out of it')
    if not used:
        notes.append(f'{title}: not defined for every model in any condition (the '
                     'drift–confidence coupling is written for segmentors, drift files '
                     'format /3 on); not tested')
        return np.full(len(models), math.nan), []
    return np.array([np.mean([get(files[m].cells[k]) for k in used]) for m in models]), used


def _per_model(files: Mapping[str, ModelDrift], models: Sequence[str],
               get: Callable[[DriftCell], Optional[float]]) -> np.ndarray:
    """Per model, the mean of ``get`` over every condition of its file that has it (a
    number that does not change between conditions: a floor, the clean PR)."""
    out = []
    for m in models:
        found = [get(c) for c in files[m].cells.values() if get(c) is not None]
        out.append(np.mean(found) if found else math.nan)
    return np.array(out, dtype=float)


def _severity_curve(files: Mapping[str, ModelDrift], models: Sequence[str],
                    conditions: Sequence[str]) -> Tuple[List[int], np.ndarray]:
    """CKA per model and severity: the mean over the corruptions whose CKA every model
    has at that severity; severity 0 the clean condition when every file has it."""
    first = files[models[0]]
    severities = sorted({first.cells[k].severity for k in conditions})
    if all('clean' in f.cells and f.cells['clean'].cka is not None for f in files.values()):
        severities = [0] + severities
    curve = np.full((len(models), len(severities)), math.nan)
    for j, severity in enumerate(severities):
        keys = ['clean'] if severity == 0 else [
            k for k in conditions if first.cells[k].severity == severity
            and all(files[m].cells[k].cka is not None for m in models)]
        if keys:
            curve[:, j] = [np.mean([files[m].cells[k].cka for k in keys]) for m in models]
    return severities, curve


def mechanism_tests(drift_paths: Mapping[str, str], groupings: Groupings,
                    column: str = DEFAULT_COLUMN, severities: Optional[Sequence[int]] = None,
                    model_set: Optional[ModelSet] = None, draws: int = DEFAULT_DRAWS,
                    seed: Optional[int] = 0) -> MechanismTests:
    """The mechanism tests (module docstring) of the models of ``drift_paths``.

    Args:
        drift_paths: ``{model: representation_drift.json}``, in the models' order.
        groupings: ``{column: {model: label}}``; ``column`` must give every model one of
            exactly two labels, each of at least :data:`MIN_GROUP_MODELS` models. The
            first label among the models is the first group (U is its statistic).
        column: the grouping compared (default ``'domain'``).
        severities: test only the conditions of these severities (default: every
            corrupted condition of every file). The CKA-against-severity curve always
            has every severity.
        model_set: the same models' results (their names as ``drift_paths``'): adds the
            CKA correlation with ECE inflation of
            :func:`~reobench_mm.analysis.groups.cka_ece_correlation` (``draws``,
            ``seed``).

    Raises:
        ValueError: a model of the grouping without a drift file or a model without a
            label, an unknown column, not two groups, a group of one model, drift files
            of different representations, participation-ratio conventions or
            protocols, no common corrupted condition; the errors of
            :func:`~reobench_mm.analysis.groups.cka_ece_correlation`.
    """
    models = list(drift_paths)
    labels, members = _select_column(groupings, column, models)
    files = {m: read_model_drift(drift_paths[m], m) for m in models}
    representation, convention, protocol = (_shared(files, w) for w in (
        'representation', 'pr_convention', 'protocol'))
    notes: List[str] = []
    conditions = _conditions(files, severities, notes)
    getters: Dict[str, Callable[[DriftCell], Optional[float]]] = {
        'head_cka': lambda c: c.cka, 'drift_confidence_rho': lambda c: c.rho_confidence,
        'overconfident_fraction': lambda c: c.overconfident}
    values: Dict[str, np.ndarray] = {}
    used: Dict[str, List[str]] = {}
    for key, get in getters.items():
        values[key], used[key] = _model_means(files, models, conditions, get,
                                              TESTED[key][0], notes)
    values['pr_clean'] = _per_model(files, models, lambda c: c.pr_clean)
    used['pr_clean'] = []
    values['head_cosine'], _ = _model_means(files, models, used['head_cka'],
                                            lambda c: c.cosine, 'cosine', [])
    values['cka_floor'] = _per_model(files, models, lambda c: c.cka_floor)
    values['cosine_floor'] = _per_model(files, models, lambda c: c.cosine_floor)
    if np.isnan(values['cosine_floor']).any():
        notes.append('some drift files have no cosine_floor (written before it was '
                     'recorded): rerun representation_drift for it')
    first, second = labels
    rows = {label: [models.index(m) for m in members[label]] for label in labels}
    tests = []
    for key, (title, _) in TESTED.items():
        a, b = values[key][rows[first]], values[key][rows[second]]
        u = p = math.nan
        method = None
        if np.isfinite(a).all() and np.isfinite(b).all():
            u, p, method = mann_whitney(a, b)
        tests.append(MechanismTest(key, title, first, second, len(a), len(b),
                                   float(np.mean(a)), float(np.mean(b)), u, p, method,
                                   used[key]))
    curve_severities, curve = _severity_curve(files, models, _conditions(files, None, []))
    correlation = None
    if model_set is not None:
        if sorted(model_set.models) != sorted(models):
            raise ValueError(f'the results are of models {model_set.models}, the drift '
                             f'files of {models}')
        correlation = cka_ece_correlation(model_set, dict(drift_paths), draws, seed)
    return MechanismTests(column, labels, members, models,
                          {m: f.block for m, f in files.items()}, dict(drift_paths),
                          representation, convention, protocol,
                          None if severities is None else sorted(set(severities)), values,
                          used, tests, curve_severities, curve, correlation, notes)
