"""The files of the mechanism tests (:mod:`~reobench_mm.analysis.mechanisms`):
``mechanism_tests.json`` (:meth:`~reobench_mm.analysis.mechanisms.MechanismTests.to_dict`),
``mechanism_tests.csv`` (:func:`mechanism_csv_rows`), ``mechanism_tests.md``
(:func:`mechanism_markdown`) and the two figures of
:mod:`~reobench_mm.analysis.mechanism_plots`, each written atomically
(:func:`write_mechanism_tests`).
"""
from __future__ import annotations

import json
import math
import os
import os.path as osp
from typing import Any, Dict, List, Tuple

from ..fileio import atomic_write_text
from .groups import groups_markdown
from .mechanism_plots import CKA_PLOT, PR_PLOT, plot_cka_by_severity, plot_participation_ratio
from .mechanisms import EXACT_MAX_SIZE, REPORTED, TESTED, MechanismTests
from .tables import csv_text, fmt_number, markdown_table

__all__ = ['MECHANISM_FILES', 'mechanism_csv_rows', 'mechanism_markdown',
           'write_mechanism_tests']

#: The files :func:`write_mechanism_tests` writes (the figures unless ``plots=False``).
MECHANISM_FILES = ('mechanism_tests.json', 'mechanism_tests.csv', 'mechanism_tests.md',
                   CKA_PLOT, PR_PLOT)
_CSV_HEADER = ['kind', 'statistic', 'model', 'group', 'other_group', 'condition', 'severity',
               'n', 'other_n', 'value', 'other_value', 'spread', 'u', 'p_value', 'p_analytic',
               'method']


def _row(**cells: Any) -> List[Any]:
    unknown = set(cells) - set(_CSV_HEADER)
    if unknown:
        raise KeyError(f'not a column of mechanism_tests.csv: {sorted(unknown)}')
    return [cells.get(name) for name in _CSV_HEADER]


def mechanism_csv_rows(result: MechanismTests) -> Tuple[List[str], List[List[Any]]]:
    """``mechanism_tests.csv``, one table of rows of four kinds: ``test`` (per tested
    number: ``value``/``other_value`` the group means, ``u`` of ``group``, ``p_value``,
    ``method``), ``model`` (per model and number of :data:`~reobench_mm.analysis.
    mechanisms.TESTED` and :data:`~reobench_mm.analysis.mechanisms.REPORTED`: its
    value), ``severity`` (CKA against severity per group: ``value`` the mean,
    ``spread`` the standard deviation over the models, ``n``) and, with results,
    ``spearman`` (per condition ρ of CKA against ECE inflation, ``p_value`` the
    permutation p, ``p_analytic`` scipy's)."""
    rows = [_row(kind='test', statistic=t.statistic, group=t.first, other_group=t.second,
                 n=t.n_first, other_n=t.n_second, value=t.mean_first,
                 other_value=t.mean_second, u=t.u, p_value=t.p_value, method=t.method)
            for t in result.tests]
    group_of = {m: label for label, members in result.members.items() for m in members}
    for key in list(TESTED) + list(REPORTED):
        rows += [_row(kind='model', statistic=key, model=m, group=group_of[m],
                      value=result.values[key][i]) for i, m in enumerate(result.models)]
    for label in result.labels:
        mean, spread = result.curve_by_group(label)
        rows += [_row(kind='severity', statistic='head_cka', group=label, severity=s,
                      n=len(result.members[label]), value=mean[j], spread=spread[j])
                 for j, s in enumerate(result.curve_severities)]
    if result.cka_ece is not None:
        rows += [_row(kind='spearman', statistic='cka_vs_ece_inflation', condition=r.condition,
                      n=len(result.cka_ece.models), value=r.rho, p_value=r.p_value,
                      p_analytic=r.p_analytic) for r in result.cka_ece.rows]
    return list(_CSV_HEADER), rows


def _p(value: float) -> str:
    return '–' if not math.isfinite(value) else f'{value:.3g}'


def mechanism_markdown(result: MechanismTests) -> str:
    """``mechanism_tests.md``: the tests, the per-model numbers, CKA against severity
    and (with results) CKA against ECE inflation."""
    first, second = result.labels
    size = {label: len(result.members[label]) for label in result.labels}
    lines = ['# Mechanism tests', '',
             f'Column `{result.column}`: ' + '; '.join(
                 f'{label} (n={size[label]}): {", ".join(result.members[label])}'
                 for label in result.labels) + '.',
             f'Representation `{result.representation}`, participation ratio '
             f'`{result.pr_convention}`, protocol `{result.protocol}`, severities tested: '
             + ('all' if result.severities is None else
                ', '.join(map(str, result.severities))) + '.', '']
    lines += [f'- {n}' for n in result.notes] + ([''] if result.notes else [])
    lines += ['## Tests between the groups', '',
              f'Mann–Whitney U (scipy.stats.mannwhitneyu, two-sided), U of {first}; exact '
              f'when the smaller group has at most {EXACT_MAX_SIZE} models and no value is '
              'tied, else asymptotic. Raw p-values.', '']
    rows = [[t.title, fmt_number(t.mean_first, 4), fmt_number(t.mean_second, 4),
             fmt_number(t.u, 1), _p(t.p_value), t.method or '–',
             str(len(t.conditions)) if t.conditions else '–'] for t in result.tests]
    lines += markdown_table(['Number', f'{first} mean (n={size[first]})',
                             f'{second} mean (n={size[second]})', f'U ({first})', 'p',
                             'method', 'conditions'], rows) + ['']
    lines += ['## Per model', '',
              f'Final hooked block of each model; means over the conditions of each test. '
              'The floors: CKA and mean cosine between two random halves of the clean '
              'test images (split-half noise floors).', '']
    keys = ['head_cka', 'cka_floor', 'head_cosine', 'cosine_floor', 'pr_clean',
            'drift_confidence_rho', 'overconfident_fraction']
    titles = {**{k: t for k, (t, _) in TESTED.items()}, **REPORTED}
    group_of = {m: label for label, members in result.members.items() for m in members}
    rows = [[m, group_of[m], result.blocks[m]] + [
        fmt_number(result.values[k][i], 3) for k in keys]
        for i, m in enumerate(result.models)]
    lines += markdown_table(['Model', result.column, 'Block'] + [titles[k] for k in keys],
                            rows, 3) + ['']
    lines += ['## CKA against severity', '',
              'Per model the mean over the corruptions at each severity, then the group '
              'mean ± the standard deviation over its models.', '']
    rows = []
    for j, s in enumerate(result.curve_severities):
        row = ['clean' if s == 0 else str(s)]
        for label in result.labels:
            mean, spread = result.curve_by_group(label)
            row.append(f'{fmt_number(mean[j], 3)} ± {fmt_number(spread[j], 3)}')
        rows.append(row)
    lines += markdown_table(['Severity'] + [f'{label} (n={size[label]})'
                                            for label in result.labels], rows) + ['']
    if result.cka_ece is not None:
        lines += groups_markdown(None, result.cka_ece)
    return '\n'.join(lines).rstrip('\n') + '\n'


def write_mechanism_tests(result: MechanismTests, out_dir: str,
                          plots: bool = True) -> Dict[str, str]:
    """Write :data:`MECHANISM_FILES` into ``out_dir`` (each atomically; the figures
    unless ``plots=False``); returns ``{file name: path}``."""
    os.makedirs(out_dir, exist_ok=True)
    path = lambda name: osp.join(out_dir, name)  # noqa: E731
    document = json.dumps(result.to_dict(), indent=2, allow_nan=False, ensure_ascii=False)
    files = {
        'mechanism_tests.json': atomic_write_text(path('mechanism_tests.json'),
                                                  document + '\n'),
        'mechanism_tests.csv': atomic_write_text(path('mechanism_tests.csv'),
                                                 csv_text(*mechanism_csv_rows(result))),
        'mechanism_tests.md': atomic_write_text(path('mechanism_tests.md'),
                                                mechanism_markdown(result)),
    }
    if plots:
        files[CKA_PLOT] = plot_cka_by_severity(result, path(CKA_PLOT))
        files[PR_PLOT] = plot_participation_ratio(result, path(PR_PLOT))
    return files
