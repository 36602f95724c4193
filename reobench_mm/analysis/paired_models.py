"""Paired tests across the models of a comparison (:class:`~reobench_mm.analysis.model_set.ModelSet`).

From the per-image statistics each model's ``results.json`` names
(:meth:`~reobench_mm.analysis.results_file.ResultsFile.image_stats`):

- every other model against the reference (the first model): the paired difference of
  Clean, every condition, every corruption mean, Avg, ΔTP, mPC and rPC with its
  bootstrap interval and permutation p-value (:func:`~reobench_mm.analysis.paired.paired_numbers`),
  and whether it is significant after the Benjamini-Hochberg correction over every test
  of that table (false discovery rate ``alpha``);
- Kendall's τ-b between the clean ranking of the models and their ranking under each
  condition, corruption mean and Avg, with a bootstrap interval over the shared image
  resamples;
- every pair of models whose order under a condition (or corruption mean, or Avg) is the
  opposite of its clean order, with the flip's p-value
  (:func:`~reobench_mm.analysis.paired.flip_p_value`) and whether it is significant after
  the Benjamini-Hochberg correction over all flips.

Models evaluated on different images (or conditions) are refused, the difference named.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from reobench_corruptions.condition import Condition
from ..evaluation.functional.bootstrap import (DEFAULT_LEVEL, DEFAULT_RESAMPLES,
                                               resample_counts)
from .intervals import check_same_images, interval_of
from .model_set import ModelSet
from .result_blocks import RESULT_BLOCKS
from .tables import column_title, fmt_number, markdown_table
from .paired import (DEFAULT_PERMUTATIONS, PairedNumbers, benjamini_hochberg, flip_p_value,
                     kendall_tau_b_rows, model_numbers, paired_numbers, smallest_p_value)

__all__ = ['PairedModels', 'paired_models', 'DEFAULT_ALPHA', 'numbers_of_table',
           'blocks_not_paired',
           'paired_markdown', 'paired_csv_rows', 'flips_csv_rows', 'model_image_stats']

#: False discovery rate of the significance marks.
DEFAULT_ALPHA = 0.05


def numbers_of_table(model_set: ModelSet) -> List[str]:
    """The numbers the paired tables test: ``clean``, every condition key, every
    ``<corruption>@mean``, ``avg``, ``delta_tp``, ``mpc``, ``rpc``."""
    return (['clean'] + [c.key for c in model_set.conditions if not c.is_clean]
            + [f'{n}@mean' for n in model_set.corruptions]
            + ['avg', 'delta_tp', 'mpc', 'rpc'])


def blocks_not_paired(model_set: ModelSet) -> Optional[str]:
    """The note of a comparison whose results files hold result blocks (shift sets,
    attacks, ...: :data:`~reobench_mm.analysis.result_blocks.RESULT_BLOCKS`): the paired
    tests cover the corruption table, not those blocks (None without any)."""
    names = [b.name for b in RESULT_BLOCKS
             if any(f.summary.blocks.get(b.name) for f in model_set.files)]
    if not names:
        return None
    return (f'paired tests: the corruption table only; the {", ".join(names)} '
            f'block{"s" if len(names) > 1 else ""} of the results files '
            f'{"are" if len(names) > 1 else "is"} not paired (compare '
            f'{"their" if len(names) > 1 else "its"} numbers in each report)')


@dataclass
class PairedModels:
    """Everything :func:`paired_models` computes.

    Attributes:
        reference: the model the others are compared with.
        versus: other model -> its :class:`PairedNumbers` against the reference (A = the
            other model, B = the reference).
        adjusted: other model -> number -> Benjamini-Hochberg adjusted p-value (over
            every test of the table).
        tau: number -> ``{'tau', 'interval'}``: Kendall τ-b between the clean ranking and
            the ranking by that number (conditions, corruption means, ``avg``).
        flips: the rank flips: ``{'models': [a, b], 'number', 'clean_difference',
            'difference', 'p_value', 'p_adjusted', 'significant'}``.
        images, resamples, permutations, level, alpha, seed: the settings.
    """
    reference: str
    versus: Dict[str, PairedNumbers]
    adjusted: Dict[str, Dict[str, float]]
    tau: Dict[str, Dict[str, Any]]
    flips: List[Dict[str, Any]] = field(default_factory=list)
    images: int = 0
    resamples: int = DEFAULT_RESAMPLES
    permutations: int = DEFAULT_PERMUTATIONS
    level: float = DEFAULT_LEVEL
    alpha: float = DEFAULT_ALPHA
    seed: int = 0
    exact: bool = False

    def to_dict(self) -> Dict[str, Any]:
        """JSON-able (NaN as None)."""
        def number(v):
            return float(v) if v is not None and math.isfinite(v) else None
        versus = {}
        for model, paired in self.versus.items():
            versus[model] = {
                name: {'difference': number(paired.difference[name]),
                       'interval': paired.interval[name],
                       'p_value': number(paired.p_value[name]['two-sided']),
                       'p_adjusted': number(self.adjusted[model][name]),
                       'significant': bool(self.adjusted[model][name] <= self.alpha)}
                for name in self.adjusted[model]}
        return {'reference': self.reference, 'images': self.images,
                'resamples': self.resamples, 'permutations': self.permutations,
                'exact': self.exact, 'level': self.level, 'alpha': self.alpha,
                'seed': self.seed,
                'test': 'paired permutation test (swapping the two models\' results per '
                        'image), two-sided; Benjamini-Hochberg over each table',
                'versus_reference': versus,
                'kendall_tau': {k: {'tau': number(v['tau']), 'interval': v['interval']}
                                for k, v in self.tau.items()},
                'rank_flips': [dict(f, clean_difference=number(f['clean_difference']),
                                    difference=number(f['difference']),
                                    p_value=number(f['p_value']),
                                    p_adjusted=number(f['p_adjusted']))
                               for f in self.flips]}


def _draw_seeds(results: Any, condition: Condition) -> List[Any]:
    """The corruption seeds ``condition`` was evaluated with in ``results``."""
    entry = ((results.summary.corruption_seeds or {}).get('conditions') or {}).get(
        condition.key)
    if entry is not None:
        return [int(s) for s in entry['seeds']]
    return [results.provenance.get('seed')]


def check_same_draws(model_set: ModelSet) -> None:
    """Refuse models whose corrupted images differ: a condition evaluated with other
    corruption seeds (a paired test needs the same draws of every corruption).

    Raises:
        ValueError: the first such condition and the two models named.
    """
    first_model, first = model_set.models[0], model_set.files[0]
    for model, results in zip(model_set.models[1:], model_set.files[1:]):
        for condition in model_set.conditions:
            if condition.is_clean:
                continue
            a, b = _draw_seeds(first, condition), _draw_seeds(results, condition)
            if a != b:
                raise ValueError(f'{first_model} and {model} evaluated {condition.key} with '
                                 f'other corruption seeds ({a} and {b}): their corrupted '
                                 'images differ, so they cannot be compared image by image')


def model_image_stats(model_set: ModelSet, consequence: str
                      ) -> Tuple[Optional[List[dict]], Optional[str]]:
    """Each model's per-image statistics (restricted to the compared conditions), or
    ``(None, why)`` naming the first model without them and ``consequence`` (what the
    caller does without them)."""
    out = []
    for model, results in zip(model_set.models, model_set.files):
        stats = results.image_stats()
        if stats is None:
            return None, (f'{model} ({results.path}) has no per-image statistics (written '
                          f'before they were kept): {consequence}')
        out.append({c: stats[c] for c in model_set.conditions})
    return out, None


def paired_models(model_set: ModelSet, *, resamples: int = DEFAULT_RESAMPLES,
                  level: float = DEFAULT_LEVEL, seed: int = 0,
                  permutations: int = DEFAULT_PERMUTATIONS, alpha: float = DEFAULT_ALPHA
                  ) -> Tuple[Optional[PairedModels], Optional[str]]:
    """The paired tests of ``model_set`` (see the module docstring), or ``(None, why)``
    when a model has no per-image statistics.

    Raises:
        ValueError: models evaluated on different images (named).
    """
    check_same_draws(model_set)
    stats, why = model_image_stats(model_set, 'no paired tests')
    if stats is None:
        return None, why
    models = model_set.models
    image_ids = check_same_images({(m, c.key): s[c] for m, s in zip(models, stats)
                                   for c in model_set.conditions}, 'model')
    names = numbers_of_table(model_set)
    corruptions, protocol = model_set.corruptions, model_set.protocol
    # each model's numbers once, on the resamples every comparison shares
    weights = resample_counts(len(image_ids), resamples, seed)
    numbers = [model_numbers(s, corruptions, protocol, weights) for s in stats]
    pairs: Dict[Tuple[int, int], PairedNumbers] = {
        (i, j): paired_numbers(stats[i], stats[j], corruptions, protocol,
                               resamples=resamples, level=level, seed=seed,
                               permutations=permutations, permutation_seed=seed,
                               numbers=(numbers[i], numbers[j]))
        for i, j in itertools.combinations(range(len(models)), 2)}
    # model i - reference (model 0)
    compared = {models[i]: _flipped(pairs[(0, i)]) for i in range(1, len(models))}
    raw = [compared[m].p_value[n]['two-sided'] for m in compared for n in names]
    adjusted_rows = benjamini_hochberg(raw).reshape(len(compared), len(names))
    adjusted = {m: dict(zip(names, map(float, row)))
                for m, row in zip(compared, adjusted_rows)}
    # Kendall tau between the clean ranking and each number's, with intervals from the
    # models' replicates on the shared resamples
    def ranking(name: str, part: str) -> np.ndarray:
        return np.stack([getattr(n, part)[name] for n in numbers], axis=1)

    tau = {name: {'tau': float(kendall_tau_b_rows(ranking('clean', 'observed'),
                                                  ranking(name, 'observed'))[0]),
                  'interval': interval_of(kendall_tau_b_rows(ranking('clean', 'bootstrap'),
                                                             ranking(name, 'bootstrap')),
                                          level)}
           for name in names if name not in ('clean', 'delta_tp', 'mpc', 'rpc')}
    first = next(iter(pairs.values()))
    result = PairedModels(models[0], compared, adjusted, tau,
                          _rank_flips(models, pairs, tau, alpha), images=len(image_ids),
                          resamples=resamples, permutations=first.permutations,
                          level=level, alpha=alpha, seed=seed, exact=first.exact)
    return result, None


def _flipped(paired: PairedNumbers) -> PairedNumbers:
    """``paired`` (A − B) as B − A: differences and intervals negated, one-sided
    p-values exchanged."""
    return PairedNumbers(
        difference={k: -v for k, v in paired.difference.items()},
        interval={k: None if v is None else [-v[1], -v[0]]
                  for k, v in paired.interval.items()},
        p_value={k: {'less': v['greater'], 'greater': v['less'],
                     'two-sided': v['two-sided']} for k, v in paired.p_value.items()},
        values_a=paired.values_b, values_b=paired.values_a,
        replicates={k: -v for k, v in paired.replicates.items()},
        exact=paired.exact, images=paired.images, permutations=paired.permutations)


def _rank_flips(models: List[str], pairs: Dict[Tuple[int, int], PairedNumbers],
                tau: Dict[str, Any], alpha: float) -> List[Dict[str, Any]]:
    flips = []
    for (i, j), paired in pairs.items():
        clean = paired.difference['clean']
        if clean == 0 or not math.isfinite(clean):
            continue
        for name in tau:
            difference = paired.difference[name]
            if difference == 0 or not math.isfinite(difference) or \
                    np.sign(difference) == np.sign(clean):
                continue
            flips.append({'models': [models[i], models[j]], 'number': name,
                          'clean_difference': clean, 'difference': difference,
                          'p_value': flip_p_value(paired.p_value['clean'],
                                                  paired.p_value[name], clean)})
    adjusted = benjamini_hochberg([f['p_value'] for f in flips])
    for flip, p in zip(flips, adjusted):
        flip['p_adjusted'] = float(p)
        flip['significant'] = bool(p <= alpha)
    return flips


def _cell(paired: PairedNumbers, adjusted: Dict[str, float], name: str, alpha: float) -> str:
    interval = paired.interval[name]
    text = fmt_number(paired.difference[name], 2, signed=True)
    if interval:
        text += f' [{fmt_number(interval[0], 2, True)}, {fmt_number(interval[1], 2, True)}]'
    p = adjusted[name]
    return text + (' *' if math.isfinite(p) and p <= alpha else '')


def _reach_lines(result: PairedModels, columns: Sequence[str]) -> List[str]:
    """What the test can and cannot say with this many images, and where the intervals
    and the test disagree (and why), under the table."""
    tests = sum(1 for adjusted in result.adjusted.values()
                for p in adjusted.values() if math.isfinite(p))
    floor = smallest_p_value(result.images, result.exact, result.permutations)
    lines = []
    if floor * tests > result.alpha and tests:
        needed = next(n for n in range(1, 64)
                      if smallest_p_value(n, True, 2 ** n) * tests <= result.alpha)
        lines.append(
            f'With {result.images} images the paired test cannot give p below '
            f'{floor:.3g}; after the correction over the {tests} numbers a difference alone '
            f'needs p ≤ {result.alpha / tests:.3g}, so '
            + ('no difference can be marked' if floor > result.alpha else
               f'a difference is marked only where many are as extreme (at best '
               f'{min(1.0, floor * tests):.3g} alone)')
            + f'. {needed} images or more lift that limit.')
    agree = disagree_interval = disagree_test = 0
    for model, paired in result.versus.items():
        for name in columns:
            interval = paired.interval.get(name)
            p = result.adjusted[model].get(name, math.nan)
            if not interval or not math.isfinite(p):
                continue
            excludes = interval[0] > 0 or interval[1] < 0
            marked = p <= result.alpha
            agree += excludes == marked
            disagree_interval += excludes and not marked
            disagree_test += marked and not excludes
    if disagree_interval:
        lines.append(
            f'{disagree_interval} interval(s) exclude zero without a mark: the percentile '
            'bootstrap interval describes how the difference varies over resampled '
            f'images and is too narrow with few images (here {result.images}); the test asks '
            'whether the difference could be chance when the two models are exchangeable '
            'on every image, corrected for testing many numbers. Read such a difference '
            'as not shown.')
    if disagree_test:
        lines.append(f'{disagree_test} marked difference(s) have an interval containing '
                     'zero: the test is exact under its hypothesis, the interval approximate.')
    return lines + [''] if lines else []


def paired_markdown(result: PairedModels, model_set: ModelSet) -> List[str]:
    """The report's section on the paired tests."""
    level = f'{100 * result.level:g} %'
    metric = model_set.metric
    lines = [f'## Paired differences against {result.reference}', '',
             f'Each model minus {result.reference} on the same {result.images} images, '
             f'{metric} points, with the {level} bootstrap interval of the difference '
             f'({result.resamples} image resamples shared by both models). `*`: '
             f'significant at a false discovery rate of {result.alpha:g} '
             '(Benjamini-Hochberg over every number of this table) in a two-sided paired '
             'permutation test (' + ('every swap enumerated' if result.exact else
                                     f'{result.permutations} random swaps') +
             ' of the two models\' results per image). Every cell is in '
             '`paired_differences.csv`.', '']
    columns = ['clean', 'avg', 'delta_tp'] + [f'{n}@mean' for n in model_set.corruptions]
    header = ['Model', 'Clean', 'Avg', 'ΔTP'] + [column_title(n)
                                                  for n in model_set.corruptions]
    rows = [[model] + [_cell(paired, result.adjusted[model], c, result.alpha)
                       for c in columns] for model, paired in result.versus.items()]
    lines += markdown_table(header, rows) + ['']
    lines += _reach_lines(result, columns)
    lines += ['### Kendall τ with intervals', '',
              f'τ-b between the clean ranking and the ranking under each corruption mean '
              f'and Avg, with its {level} bootstrap interval over the images.', '']
    rows = [[column_title(k[:-5]) if k.endswith('@mean') else 'Avg',
             fmt_number(v['tau'], 3),
             '–' if not v['interval'] else
             f'[{fmt_number(v["interval"][0], 3)}, {fmt_number(v["interval"][1], 3)}]']
            for k, v in result.tau.items() if k.endswith('@mean') or k == 'avg']
    lines += markdown_table(['Ranking by', 'τ', level], rows) + ['']
    significant = [f for f in result.flips if f['significant']]
    lines += ['### Rank flips', '',
              f'{len(result.flips)} pairs of models change order between clean and a '
              f'condition, corruption mean or Avg; {len(significant)} of them significantly '
              '(the flip\'s p-value is the larger of the two one-sided paired tests, so it '
              'is small only when both orders are; Benjamini-Hochberg over all flips). '
              'Every flip is in `rank_flips.csv`.', '']
    shown = sorted(result.flips, key=lambda f: f['p_value'])[:15]
    if shown:
        rows = [[f'{f["models"][0]} vs {f["models"][1]}', f['number'],
                 fmt_number(f['clean_difference'], 2, True), fmt_number(f['difference'], 2, True),
                 fmt_number(f['p_value'], 4), fmt_number(f['p_adjusted'], 4)
                 + (' *' if f['significant'] else '')] for f in shown]
        lines += markdown_table(['Models (A vs B)', 'Under', 'A − B clean', 'A − B there',
                                 'p', 'p (BH)'], rows) + ['']
    return lines


def paired_csv_rows(result: PairedModels) -> Tuple[List[str], List[list]]:
    """``paired_differences.csv``: one row per model x number."""
    header = ['model', 'reference', 'number', 'difference', 'ci_low', 'ci_high', 'p_value',
              'p_adjusted', 'significant']
    rows = []
    for model, paired in result.versus.items():
        for name, p in result.adjusted[model].items():
            interval = paired.interval[name] or [None, None]
            rows.append([model, result.reference, name, paired.difference[name], *interval,
                         paired.p_value[name]['two-sided'], p, int(p <= result.alpha)])
    return header, rows


def flips_csv_rows(result: PairedModels) -> Tuple[List[str], List[list]]:
    """``rank_flips.csv``: one row per flip."""
    header = ['model_a', 'model_b', 'number', 'clean_difference', 'difference', 'p_value',
              'p_adjusted', 'significant']
    return header, [[f['models'][0], f['models'][1], f['number'], f['clean_difference'],
                     f['difference'], f['p_value'], f['p_adjusted'], int(f['significant'])]
                    for f in result.flips]
