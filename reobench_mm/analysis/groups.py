"""Groups of models in a cross-model comparison: group means and Mann–Whitney U tests of
every reported number, the ECE ratio of the strongest severity to clean, the relative
drop per corruption by group, and the Spearman correlation across models of
representation drift (CKA) against this package's ECE inflation with a permutation test.

The group view is that of two studies. The calibration study of geospatial foundation
models tags each encoder with its domain of pretraining (Earth observation against
natural images) and compares the groups with Mann–Whitney U tests (§IV-C); its Fig. 5
gives ``ECE at severity 5 / clean ECE`` per corruption. The ratio here is this package's
summary: the ECE at the strongest severity averaged over the corruptions, over the clean
ECE. REOBench (Fig. 4) shows the relative drop per corruption by model family and size.
A *grouping* maps every model name to a group label
(``{'domain': {'SatMAE': 'EO', 'ViT-IN1k': 'ImageNet'}, 'size': {...}}``); several
groupings are analysed side by side.

The numbers compared (:func:`group_numbers`; one value per model, from the
:class:`~reobench_mm.analysis.model_set.ModelSet`, the numbers of the Models table):
clean metric, each corruption's mean over its severities, Avg, ΔTP, the relative drop
``ΔTP / Clean`` (a fraction), each corruption's relative drop ``(Clean − mean) / Clean``
and, when every model reports ``calib/ECE``, its clean value, its Avg and the ratio
``ECE@S / clean ECE`` with ``S`` the strongest severity of the comparison (5 for a
full sweep) and ``ECE@S`` the mean over the corruptions evaluated at ``S``.

The CKA correlation (after the calibration study's Spearman correlations, Table III,
and Fig. 16) reads the ``representation_drift.json`` of each model (written by
``reobench_mm.robustness.drift``): the CKA of the final hooked block per condition. Per
condition evaluated in every drift file and in the results, Spearman's ρ across models
of that CKA against the ECE inflation ``ECE(condition) − ECE(clean)`` (this package's
measure, a difference; the study does not define it), with a permutation test
(:func:`spearman_permutation_test`).
"""
from __future__ import annotations

import itertools
import math
import os.path as osp
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
from scipy import stats

from ..evaluation.keys import ECE_KEY
from ..fileio import read_json
from .group_cells import GroupCells, group_cells, group_cells_markdown
from .model_set import ModelSet
from .results import AVG
from .tables import column_title, fmt_number, markdown_table

__all__ = ['DEFAULT_DRAWS', 'Groupings', 'parse_group_spec', 'read_groups_file',
           'check_groupings', 'group_numbers', 'PairTest', 'Grouping', 'GroupAnalysis',
           'analyze_groups', 'spearman_permutation_test', 'DriftFile', 'read_drift_file',
           'match_drift_files', 'CkaRow', 'CkaEceCorrelation', 'cka_ece_correlation',
           'groups_csv_rows', 'cka_csv_rows']

#: Permutation draws of the CKA test when none are given (the study's 10⁵).
DEFAULT_DRAWS = 100_000
#: ``{grouping name: {model name: group label}}``.
Groupings = Mapping[str, Mapping[str, str]]
#: Permuted rows drawn at once (bounds the memory; the draws do not depend on it).
_CHUNK = 10_000
#: A permuted |ρ| within this of the observed one counts as reaching it: rank
#: correlations take discrete values, and two ways of summing the same value may differ
#: in the last bits.
_TIE_TOLERANCE = 1e-12
#: The drift document's format family (its writer, ``robustness/drift.py``, sits above
#: this layer; the version is checked by the fields read).
_DRIFT_FORMAT_PREFIX = 'reobench_mm.representation_drift/'


# ----------------------------------------------------------------------------------
# Groupings: given, read, checked
# ----------------------------------------------------------------------------------
def parse_group_spec(text: str) -> Tuple[str, Dict[str, str]]:
    """``'domain:A=EO,B=EO,C=ImageNet'`` -> ``('domain', {'A': 'EO', ...})``.

    Raises:
        ValueError: not ``NAME:MODEL=LABEL,...``, an empty part or a model twice.
    """
    name, sep, body = str(text).partition(':')
    if not sep or not name.strip() or not body.strip():
        raise ValueError(f'a grouping is NAME:MODEL=LABEL,MODEL=LABEL,... (e.g. '
                         f'domain:SatMAE=EO,ViT=ImageNet), got {text!r}')
    mapping: Dict[str, str] = {}
    for item in body.split(','):
        model, eq, label = item.partition('=')
        if not eq or not model.strip() or not label.strip():
            raise ValueError(f'grouping {name.strip()!r}: {item!r} is not MODEL=LABEL')
        if model.strip() in mapping:
            raise ValueError(f'grouping {name.strip()!r} names model {model.strip()!r} '
                             'twice')
        mapping[model.strip()] = label.strip()
    return name.strip(), mapping


def read_groups_file(path: str) -> Dict[str, Dict[str, str]]:
    """A JSON file ``{grouping: {model: label}}``.

    Raises:
        ValueError: unreadable, not JSON, or not of that shape (said where).
    """
    doc, problem = read_json(path)
    if problem is not None:
        raise ValueError(f'{path} {problem}')
    if not isinstance(doc, dict) or not doc:
        raise ValueError(f'{path}: a groups file is a JSON object {{grouping: {{model: '
                         'label}}}}, e.g. {"domain": {"SatMAE": "EO", "ViT": "ImageNet"}}')
    out: Dict[str, Dict[str, str]] = {}
    for name, mapping in doc.items():
        if not isinstance(mapping, dict) or not mapping or not all(
                isinstance(v, str) for v in mapping.values()):
            raise ValueError(f'{path}: grouping {name!r} must map model names to group '
                             f'labels (strings), got {mapping!r}')
        out[str(name)] = {str(k): v for k, v in mapping.items()}
    return out


def check_groupings(groupings: Groupings, models: Sequence[str]) -> Dict[str, Dict[str, str]]:
    """Each grouping must give every model of ``models`` a non-empty label and name no
    other model.

    Raises:
        ValueError: an empty grouping name or label, an unknown model name (with the
            valid ones) or a model without a label (named).
    """
    if not isinstance(groupings, Mapping) or not groupings:
        raise ValueError('groups must be {grouping name: {model name: group label}}, got '
                         f'{groupings!r}')
    out: Dict[str, Dict[str, str]] = {}
    for name, mapping in groupings.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f'a grouping needs a non-empty name, got {name!r}')
        if not isinstance(mapping, Mapping):
            raise ValueError(f'grouping {name!r} must map model names to labels, got '
                             f'{mapping!r}')
        unknown = [m for m in mapping if m not in models]
        if unknown:
            raise ValueError(f'grouping {name!r} names unknown model(s) {unknown}; the '
                             f'models are {list(models)}')
        missing = [m for m in models if m not in mapping]
        if missing:
            raise ValueError(f'grouping {name!r} gives no group to model(s) {missing}; '
                             'every model needs a label in every grouping')
        bad = [m for m, v in mapping.items() if not isinstance(v, str) or not v.strip()]
        if bad:
            raise ValueError(f'grouping {name!r}: empty or non-text label for {bad}')
        out[name] = {m: str(mapping[m]).strip() for m in models}
    return out


# ----------------------------------------------------------------------------------
# The numbers and their group statistics
# ----------------------------------------------------------------------------------
def _ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.where(bottom != 0, top / bottom, math.nan)


def group_numbers(model_set: ModelSet) -> Dict[str, Tuple[str, np.ndarray]]:
    """``{key: (title, one value per model)}`` of the numbers compared between groups
    (module docstring), in table order: ``clean``, ``<corruption>@mean``, ``avg``,
    ``delta_tp``, ``relative_drop``, ``<corruption>@relative_drop``, and with
    ``calib/ECE``: ``calib/ECE@clean``, ``calib/ECE@avg``, ``calib/ECE@<S>/clean``."""
    ms = model_set
    metric, clean, delta = ms.metric, ms.clean(), ms.delta_tp()
    out: Dict[str, Tuple[str, np.ndarray]] = {'clean': (f'Clean {metric}', clean)}
    means = {c: ms.corruption_mean(c) for c in ms.corruptions}
    out.update({f'{c}@mean': (column_title(c), v) for c, v in means.items()})
    out[AVG] = (f'Avg {metric}', ms.corruption_mean(AVG))
    out['delta_tp'] = ('ΔTP', delta)
    out['relative_drop'] = ('Relative drop ΔTP / Clean', _ratio(delta, clean))
    out.update({f'{c}@relative_drop': (f'{column_title(c)} relative drop',
                                       _ratio(clean - v, clean)) for c, v in means.items()})
    if ECE_KEY in ms.values:
        severity = max(ms.severities)
        clean_ece = ms.clean(ECE_KEY)
        strongest = [j for j, c in enumerate(ms.conditions) if not c.is_clean
                     and c.severity == severity]
        at_strongest = ms.values[ECE_KEY][:, strongest].mean(axis=1)
        out[f'{ECE_KEY}@clean'] = (f'Clean {ECE_KEY}', clean_ece)
        out[f'{ECE_KEY}@avg'] = (f'Avg {ECE_KEY}', ms.corruption_mean(AVG, ECE_KEY))
        out[f'{ECE_KEY}@{severity}/clean'] = (f'{ECE_KEY} severity {severity} / clean',
                                              _ratio(at_strongest, clean_ece))
    return out


@dataclass
class PairTest:
    """Mann–Whitney U (``scipy.stats.mannwhitneyu``, two-sided, ``method='auto'``:
    exact for small groups without ties) of one number between two groups: ``u`` is
    the statistic of ``first``."""
    number: str
    first: str
    second: str
    u: float
    p_value: float


@dataclass
class Grouping:
    """One grouping's statistics.

    Attributes:
        name: the grouping's name; labels: its groups (first appearance in model order);
        members: label -> its models; means: number -> label -> mean over its models;
        tests: every pair of groups x every number (none with a single group).
    """
    name: str
    labels: List[str]
    members: Dict[str, List[str]]
    means: Dict[str, Dict[str, float]]
    tests: List[PairTest]

    def test(self, number: str, first: str, second: str) -> PairTest:
        """The test of ``number`` between ``first`` and ``second``."""
        for t in self.tests:
            if (t.number, t.first, t.second) == (number, first, second):
                return t
        raise KeyError(f'no test of {number!r} between {first!r} and {second!r}')


@dataclass
class GroupAnalysis:
    """Every grouping's statistics (:func:`analyze_groups`)."""
    models: List[str]
    numbers: Dict[str, str]  # key -> title
    values: Dict[str, np.ndarray]  # key -> one value per model
    groupings: Dict[str, Grouping]
    ratio_severity: Optional[int]
    notes: List[str] = field(default_factory=list)
    #: group means per condition and the ECE ratio per corruption and severity
    cells: Optional[GroupCells] = None

    def to_dict(self) -> Dict[str, Any]:
        number = _json_number
        return {
            'numbers': self.numbers, 'ratio_severity': self.ratio_severity,
            'values': {k: {m: number(v[i]) for i, m in enumerate(self.models)}
                       for k, v in self.values.items()},
            'groupings': {g.name: {
                'labels': g.labels, 'members': g.members,
                'n': {label: len(g.members[label]) for label in g.labels},
                'means': {k: {label: number(v) for label, v in by.items()}
                          for k, by in g.means.items()},
                'mann_whitney': [{'number': t.number, 'first': t.first,
                                  'second': t.second, 'u': number(t.u),
                                  'p_value': number(t.p_value)} for t in g.tests]}
                for g in self.groupings.values()},
            'notes': self.notes,
            'cells': None if self.cells is None else self.cells.to_dict()}


def _json_number(value: Any) -> Optional[float]:
    value = float(value)
    return value if math.isfinite(value) else None


def analyze_groups(model_set: ModelSet, groupings: Groupings) -> GroupAnalysis:
    """Group means and pairwise Mann–Whitney U tests of every number of
    :func:`group_numbers`, per grouping (checked by :func:`check_groupings`)."""
    checked = check_groupings(groupings, model_set.models)
    numbers = group_numbers(model_set)
    models = list(model_set.models)
    notes: List[str] = []
    strongest = max(model_set.severities) if ECE_KEY in model_set.values else None
    if strongest not in (None, 5):
        notes.append(f'the strongest severity compared is {strongest}, so the ECE ratio is '
                     f'{ECE_KEY} at that severity / clean (the calibration study uses 5)')
    out: Dict[str, Grouping] = {}
    for name, mapping in checked.items():
        labels = list(dict.fromkeys(mapping[m] for m in models))
        members = {label: [m for m in models if mapping[m] == label] for label in labels}
        index = {label: [models.index(m) for m in members[label]] for label in labels}
        means = {key: {label: float(np.mean(values[index[label]])) for label in labels}
                 for key, (_, values) in numbers.items()}
        tests = []
        if len(labels) < 2:
            notes.append(f'grouping {name!r} has one group ({labels[0]}): means only, no '
                         'tests')
        for first, second in itertools.combinations(labels, 2):
            for key, (_, values) in numbers.items():
                a, b = values[index[first]], values[index[second]]
                if not (np.isfinite(a).all() and np.isfinite(b).all()):
                    u = p = math.nan
                else:
                    result = stats.mannwhitneyu(a, b, alternative='two-sided')
                    u, p = float(result.statistic), float(result.pvalue)
                tests.append(PairTest(key, first, second, u, p))
        out[name] = Grouping(name, labels, members, means, tests)
    return GroupAnalysis(models, {k: t for k, (t, _) in numbers.items()},
                         {k: v for k, (_, v) in numbers.items()}, out, strongest, notes,
                         group_cells(model_set, checked))


# ----------------------------------------------------------------------------------
# Spearman with a permutation test
# ----------------------------------------------------------------------------------
def spearman_permutation_test(x: Sequence[float], y: Sequence[float], draws: int = DEFAULT_DRAWS,
                              seed: Optional[int] = 0,
                              analytic: bool = False) -> Tuple[float, ...]:
    """Spearman's ρ of ``x`` and ``y`` and its two-sided permutation p-value.

    ρ is the Pearson correlation of the average ranks (``scipy.stats.rankdata``), which
    is ``scipy.stats.spearmanr`` with or without ties. The null distribution permutes
    the ranks of ``y`` against those of ``x``: the draws are
    ``numpy.random.default_rng(seed).permuted(numpy.tile(rank_y, (draws, 1)), axis=1)``
    (the same as ``draws`` successive ``rng.permutation(rank_y)`` of that generator; drawn
    in blocks of 10,000 rows, which gives the same rows). Written here rather than with
    ``scipy.stats.permutation_test`` because the ranks are computed once and every
    permuted ρ is one matrix product (the centred ranks' norms do not change under a
    permutation).

    ``p = (1 + #{draws with |ρ_perm| ≥ |ρ| − 1e-12}) / (1 + draws)``: the observed
    arrangement counted as one of the draws, so p is never 0; the 1e-12 counts
    floating-point ties as reaching ``|ρ|`` (rank correlations take discrete values).
    With ``analytic=True`` the analytic p-value of ``scipy.stats.spearmanr`` (its
    t-distribution approximation, rough for few models) comes third.

    Returns:
        ``(ρ, p)``, or ``(ρ, p, p_analytic)`` with ``analytic``; all NaN when ``x`` or
        ``y`` is constant or shorter than 3.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f'x and y must be two vectors of the same length, got shapes '
                         f'{x.shape} and {y.shape}')
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise ValueError(f'draws must be an integer >= 1, got {draws!r}')
    undefined = (math.nan,) * (3 if analytic else 2)
    if x.size < 3 or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return undefined
    rank_x, rank_y = stats.rankdata(x), stats.rankdata(y)
    centred = rank_x - rank_x.mean()
    scale = math.sqrt(float(centred @ centred) *
                      float(((rank_y - rank_y.mean()) ** 2).sum()))
    if scale == 0:
        return undefined
    rho = float(rank_y @ centred) / scale
    rng = np.random.default_rng(seed)
    reached = 0
    for start in range(0, draws, _CHUNK):
        rows = min(_CHUNK, draws - start)
        permuted = rng.permuted(np.tile(rank_y, (rows, 1)), axis=1)
        null = (permuted @ centred) / scale
        reached += int(np.count_nonzero(np.abs(null) >= abs(rho) - _TIE_TOLERANCE))
    p = (1 + reached) / (1 + draws)
    return (rho, p, float(stats.spearmanr(x, y).pvalue)) if analytic else (rho, p)


# ----------------------------------------------------------------------------------
# Representation drift against ECE inflation
# ----------------------------------------------------------------------------------
@dataclass
class DriftFile:
    """The part of a ``representation_drift.json`` read here: the final hooked block
    and its CKA per condition key (``'haze@3'``)."""
    path: str
    block: str
    cka: Dict[str, Optional[float]]
    protocol: str
    representation: str
    checkpoint_sha256: Optional[str]


def read_drift_file(path: str) -> DriftFile:
    """Read a ``representation_drift.json`` (module docstring).

    Raises:
        ValueError: unreadable, of another format, or lacking the fields read.
    """
    doc, problem = read_json(path)
    if problem is not None:
        raise ValueError(f'{path} {problem}')
    if not isinstance(doc, dict) or not str(doc.get('format', '')).startswith(
            _DRIFT_FORMAT_PREFIX):
        raise ValueError(f'{path} is not a representation drift file (written by '
                         'tools/analysis_tools/representation_drift.py)')
    try:
        block = str(doc['blocks'][-1]['name'])
        settings = doc['settings']
        cka = {}
        for row in doc['conditions']:
            value = row['blocks'][block]['cka']
            cka[str(row['condition'])] = None if value is None else float(value)
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise ValueError(f'{path}: its blocks and conditions cannot be read '
                         f'({error!r})') from None
    return DriftFile(path, block, cka, str(settings.get('protocol', 'reobench')),
                     str(settings.get('representation', 'sample')),
                     (doc.get('provenance') or {}).get('checkpoint_sha256'))


def match_drift_files(model_set: ModelSet,
                      drift_paths: Union[Sequence[str], Mapping[str, str]]
                      ) -> Dict[str, DriftFile]:
    """``{model: DriftFile}``: ``drift_paths`` is one file per model in the order of the
    models, or ``{model name: file}`` naming every model.

    Raises:
        ValueError: not one file per model, unknown or missing names, mixed
            representations or protocols, or a drift file of another checkpoint than the
            model's results (both record its SHA-256 and they differ).
    """
    models = model_set.models
    if isinstance(drift_paths, Mapping):
        unknown = [m for m in drift_paths if m not in models]
        missing = [m for m in models if m not in drift_paths]
        if unknown or missing:
            raise ValueError(f'drift files are named by model; unknown names {unknown}, '
                             f'models without a file {missing}; the models are {models}')
        paths = {m: str(drift_paths[m]) for m in models}
    else:
        if len(drift_paths) != len(models):
            raise ValueError(f'{len(drift_paths)} drift files for {len(models)} models; '
                             'give one per model in the order of the results, or name '
                             'them (MODEL=PATH)')
        paths = dict(zip(models, map(str, drift_paths)))
    files = {m: read_drift_file(p) for m, p in paths.items()}
    for what in ('representation', 'protocol'):
        seen = {getattr(f, what) for f in files.values()}
        if len(seen) > 1:
            raise ValueError(f'the drift files mix {what}s {sorted(seen)}; compare one')
    if next(iter(files.values())).protocol != model_set.protocol:
        raise ValueError(f'the drift files use protocol {files[models[0]].protocol!r}, the '
                         f'results {model_set.protocol!r}')
    for model, file in zip(models, model_set.files):
        mine, theirs = files[model].checkpoint_sha256, file.provenance.get(
            'checkpoint_sha256')
        if mine and theirs and mine != theirs:
            raise ValueError(f'{files[model].path} is of another checkpoint than '
                             f'{file.path} (model {model}): their checkpoint SHA-256 differ')
    return files


@dataclass
class CkaRow:
    """One condition: each model's CKA and ECE inflation, ρ, its permutation p and
    ``scipy.stats.spearmanr``'s analytic p."""
    condition: str
    cka: np.ndarray
    inflation: np.ndarray
    rho: float
    p_value: float
    p_analytic: float = math.nan


@dataclass
class CkaEceCorrelation:
    """:func:`cka_ece_correlation`: per condition a :class:`CkaRow`."""
    models: List[str]
    blocks: Dict[str, str]
    paths: Dict[str, str]
    representation: str
    rows: List[CkaRow]
    draws: int
    seed: Optional[int]
    notes: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {'models': self.models, 'blocks': self.blocks, 'paths': self.paths,
                'representation': self.representation, 'draws': self.draws,
                'seed': self.seed, 'inflation': f'{ECE_KEY}(condition) - {ECE_KEY}(clean)',
                'p_value': '(1 + #{|rho_perm| >= |rho|}) / (1 + draws), two-sided',
                'p_analytic': 'scipy.stats.spearmanr p-value (t approximation), two-sided',
                'conditions': [{
                    'condition': r.condition, 'rho': _json_number(r.rho),
                    'p_value': _json_number(r.p_value),
                    'p_analytic': _json_number(r.p_analytic),
                    'cka': {m: _json_number(v) for m, v in zip(self.models, r.cka)},
                    'ece_inflation': {m: _json_number(v)
                                      for m, v in zip(self.models, r.inflation)}}
                    for r in self.rows], 'notes': self.notes}


def cka_ece_correlation(model_set: ModelSet,
                        drift_paths: Union[Sequence[str], Mapping[str, str]],
                        draws: int = DEFAULT_DRAWS, seed: Optional[int] = 0
                        ) -> CkaEceCorrelation:
    """Per corrupted condition in every drift file and in ``model_set``: Spearman's ρ
    across models of the final hooked block's CKA against ``ECE(condition) −
    ECE(clean)``, with :func:`spearman_permutation_test` (``draws``, ``seed``; every
    condition gets the same permutations). Conditions where some model's CKA is not a
    number are left out with a note.

    Raises:
        ValueError: as :func:`match_drift_files`; no ``calib/ECE`` in the results; no
            condition in common.
    """
    if ECE_KEY not in model_set.values:
        raise ValueError(f'the CKA correlation needs {ECE_KEY} of every model in every '
                         'condition (evaluate with --calibration)')
    files = match_drift_files(model_set, drift_paths)
    models = list(model_set.models)
    keys = {c.key: j for j, c in enumerate(model_set.conditions) if not c.is_clean}
    common = [k for k in keys if all(k in f.cka for f in files.values())]
    notes = []
    if not common:
        raise ValueError('no corrupted condition is in every drift file and in the '
                         f'results; drift conditions: {sorted(files[models[0]].cka)}, '
                         f'results: {sorted(keys)}')
    left = sorted({k for f in files.values() for k in f.cka if k != 'clean'} - set(common))
    if left:
        notes.append(f'drift conditions not in every drift file and the results, left '
                     f'out: {", ".join(left)}')
    ece = model_set.values[ECE_KEY]
    clean = model_set.clean(ECE_KEY)
    rows = []
    for key in common:
        cka = np.array([np.nan if files[m].cka[key] is None else files[m].cka[key]
                        for m in models], dtype=float)
        if not np.isfinite(cka).all():
            notes.append(f'{key}: CKA is not a number for some model; left out')
            continue
        inflation = ece[:, keys[key]] - clean
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            rho, p, p_analytic = spearman_permutation_test(cka, inflation, draws, seed, True)
        rows.append(CkaRow(key, cka, inflation, rho, p, p_analytic))
    if len(models) < 3:
        notes.append('fewer than 3 models: the CKA correlation is undefined')
    return CkaEceCorrelation(models, {m: f.block for m, f in files.items()},
                             {m: osp.abspath(f.path) for m, f in files.items()},
                             files[models[0]].representation, rows, draws, seed, notes)


# ----------------------------------------------------------------------------------
# CSV rows and Markdown
# ----------------------------------------------------------------------------------
def groups_csv_rows(analysis: GroupAnalysis) -> Tuple[List[str], List[List[Any]]]:
    """``groups.csv``: one ``mean`` row per grouping x number x group (``n``, ``value``:
    the mean) and one ``mann_whitney`` row per grouping x number x pair of groups
    (``value``: U of ``group``, ``p_value``)."""
    header = ['grouping', 'number', 'kind', 'group', 'other_group', 'n', 'other_n',
              'value', 'p_value']
    rows: List[List[Any]] = []
    for g in analysis.groupings.values():
        for key in analysis.numbers:
            rows += [[g.name, key, 'mean', label, None, len(g.members[label]), None,
                      g.means[key][label], None] for label in g.labels]
            rows += [[g.name, key, 'mann_whitney', t.first, t.second,
                      len(g.members[t.first]), len(g.members[t.second]), t.u, t.p_value]
                     for t in g.tests if t.number == key]
    return header, rows


def cka_csv_rows(correlation: CkaEceCorrelation) -> Tuple[List[str], List[List[Any]]]:
    """``cka_ece_inflation.csv``: one row per condition x model (CKA, ECE inflation)
    with the condition's ρ, permutation p-value and analytic p-value."""
    rows = [[r.condition, m, correlation.blocks[m], float(r.cka[i]),
             float(r.inflation[i]), r.rho, r.p_value, r.p_analytic, correlation.draws]
            for r in correlation.rows for i, m in enumerate(correlation.models)]
    return ['condition', 'model', 'block', 'cka', 'ece_inflation', 'rho', 'p_value',
            'p_analytic', 'draws'], rows


def _fmt(value: float, key: str) -> str:
    if value is None or not math.isfinite(value):
        return '–'
    if key.endswith('relative_drop'):
        return f'{100 * value:.1f} %'
    return f'{value:.4f}' if key in (f'{ECE_KEY}@clean', f'{ECE_KEY}@avg') else f'{value:.2f}'


def groups_markdown(analysis: Optional[GroupAnalysis],
                    correlation: Optional[CkaEceCorrelation] = None) -> List[str]:
    """The Markdown sections on groups and on the CKA correlation (each when given)."""
    lines = [] if analysis is None else _group_lines(analysis) + group_cells_markdown(
        analysis.cells)
    if correlation is not None:
        lines += _cka_lines(correlation)
    return lines


def _group_lines(analysis: GroupAnalysis) -> List[str]:
    lines = ['## Groups of models', '',
             'Group means (n models) of every number; Mann–Whitney U (two-sided, '
             'scipy.stats.mannwhitneyu; U of the first group) between each pair of groups, '
             'raw p-values (not adjusted for the many tests). Relative drops in percent of '
             'the clean metric.', '']
    lines += [f'- {n}' for n in analysis.notes]
    if analysis.notes:
        lines.append('')
    for g in analysis.groupings.values():
        pairs = list(itertools.combinations(g.labels, 2))
        header = ['Number'] + [f'{label} (n={len(g.members[label])})' for label in g.labels]
        header += [f'U {a} vs {b}' for a, b in pairs] + [f'p {a} vs {b}' for a, b in pairs]
        for part, keep in (('', lambda k: not k.endswith('@relative_drop')),
                           (' — relative drop per corruption (REOBench Fig. 4)',
                            lambda k: k.endswith('@relative_drop'))):
            rows = []
            for key, title in analysis.numbers.items():
                if not keep(key):
                    continue
                tests = [g.test(key, a, b) for a, b in pairs]
                rows.append([title] + [_fmt(g.means[key][label], key) for label in g.labels]
                            + [fmt_number(t.u, 1) for t in tests] +
                            ['–' if not math.isfinite(t.p_value) else f'{t.p_value:.3g}'
                             for t in tests])
            lines += [f'### Grouping: {g.name}{part}', ''] + markdown_table(header, rows) + ['']
    return lines


def _cka_lines(correlation: CkaEceCorrelation) -> List[str]:
    lines = ['## Representation drift against ECE inflation', '',
             f'Spearman ρ across the {len(correlation.models)} models of the CKA of '
             f'their final hooked block ({correlation.representation} representation) '
             f'against the ECE inflation {ECE_KEY}(condition) − {ECE_KEY}(clean); '
             f'two-sided permutation p-value, {correlation.draws} permutations (seed '
             f'{correlation.seed}), p = (1 + #{{|ρ_perm| ≥ |ρ|}}) / (1 + draws); beside it '
             'the analytic p of scipy.stats.spearmanr (t approximation).', '']
    lines += [f'- {n}' for n in correlation.notes] + ([''] if correlation.notes else [])
    rows = [[r.condition, fmt_number(r.rho, 3)] + [
        '–' if not math.isfinite(p) else f'{p:.3g}' for p in (r.p_value, r.p_analytic)]
        for r in correlation.rows]
    return lines + markdown_table(['Condition', 'Spearman ρ', 'p (permutation)',
                                   'p (analytic)'], rows) + ['']
