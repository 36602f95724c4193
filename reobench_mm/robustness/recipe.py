"""Plain against corruption-aware training, on corruptions held out from training.

:func:`compare_recipes` trains a plain config and its corruption-aware twin (a
``*_robust.py`` config whose training pipeline holds ``RandomCorruption``) with the same
seeds, evaluates both under every selected corruption × severity (with
:func:`~reobench_mm.robustness.data_budget.run_data_budget` at the full training set, so
runs resume and are reused), and compares them where the comparison is honest: on the
corruptions the robust recipe did **not** see in training. Its pool is read from the robust
config; both models are scored against the same held-out set.

Numbers per run (:func:`recipe_row`, from each sweep's ``results.json``): the clean
metric; ``Avg`` and ``ΔTP = clean − Avg`` over the held-out corruptions (REOBench's
formulas restricted to them) and over the seen ones; the clean ECE and the ECE averaged
over the held-out corruptions as ``Avg`` is. Per recipe, the mean over seeds with the
sample standard deviation, minimum and maximum
(:func:`~reobench_mm.analysis.data_budget.seed_band`); the
difference robust − plain of the seed means. Layout::

    <work_dir>/<config stem>/fraction_1/seed_<s>/...   (the data-budget layout)
    <work_dir>/recipe_comparison.{json,md}
"""
from __future__ import annotations

import os.path as osp
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union


from ..analysis.data_budget import seed_band
from ..analysis.results import RobustnessSummary
from ..analysis.results_file import read_results
from ..analysis.tables import fmt_number, markdown_table
from ..evaluation.keys import ECE_KEY
from ..fileio import atomic_write_text, dump_json_atomic, finite_or_none
from .data_budget import budget_options, run_data_budget, run_key
from ..utils.config import read_config
from .held_out import seen_in_training
from .options import RobustnessOptions

__all__ = ['compare_recipes', 'recipe_row', 'recipe_markdown', 'RECIPE_KEYS',
           'RECIPE_FORMAT', 'RECIPE_DEFAULTS']

RECIPE_FORMAT = 'reobench_mm.recipe_comparison/1'
#: The evaluation of both recipes by default: every corruption at every severity, with
#: calibration.
RECIPE_DEFAULTS = dict(corruptions=('all', ), severities=(1, 2, 3, 4, 5), calibration=True)
#: The numbers of a run and of a recipe (seed means and bands), table order.
RECIPE_KEYS = ('clean', 'held_out_avg', 'held_out_delta_tp', 'seen_avg', 'seen_delta_tp',
               'ece_clean', 'ece_held_out_avg')
_LABELS = {'clean': 'Clean', 'held_out_avg': 'Avg (held out)',
           'held_out_delta_tp': 'ΔTP (held out)', 'seen_avg': 'Avg (seen)',
           'seen_delta_tp': 'ΔTP (seen)', 'ece_clean': 'ECE clean',
           'ece_held_out_avg': 'ECE (held out)'}


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values))


def recipe_row(model: str, seed: int, summary: RobustnessSummary,
               pool: Sequence[str]) -> Dict[str, Any]:
    """One run's numbers against the training pool ``pool`` (the robust recipe's).

    Raises:
        ValueError: no evaluated corruption outside ``pool``.
    """
    held = [n for n in summary.corruptions if n not in pool]
    seen = [n for n in summary.corruptions if n in pool]
    if not held:
        raise ValueError(f'every evaluated corruption ({", ".join(summary.corruptions)}) is '
                         'in the training pool: there is no held-out score')
    held_avg = _mean([summary.per_corruption[n] for n in held])
    seen_avg = _mean([summary.per_corruption[n] for n in seen]) if seen else None
    ece = summary.extra.get(ECE_KEY)
    return dict(
        model=model, seed=int(seed), metric=summary.metric, held_out=held, seen=seen,
        clean=float(summary.clean), held_out_avg=held_avg,
        held_out_delta_tp=float(summary.clean) - held_avg, seen_avg=seen_avg,
        seen_delta_tp=None if seen_avg is None else float(summary.clean) - seen_avg,
        ece_clean=None if ece is None else finite_or_none(ece['clean']),
        ece_held_out_avg=None if ece is None else finite_or_none(
            _mean([ece['per_corruption'][n] for n in held])),
        per_corruption={n: float(summary.per_corruption[n]) for n in summary.corruptions})


def _band_text(band: Optional[Mapping[str, Any]], digits: int) -> str:
    if band is None:
        return '–'
    text = fmt_number(band['mean'], digits)
    if band.get('std') is not None:
        text += f' ± {fmt_number(band["std"], digits)}'
    return text


def recipe_markdown(doc: Mapping[str, Any]) -> str:
    """The comparison table of :func:`compare_recipes`'s document."""
    lines = ['# Plain against corruption-aware training', '',
             f'Task: {doc["task"]}; metric: {doc["metric"]}; seeds: '
             f'{", ".join(str(s) for s in doc["seeds"])} (mean ± sample standard deviation '
             'over the seeds).', '',
             f'- Seen in training by the robust recipe: {", ".join(doc["pool"])}',
             f'- Held out (scored for both recipes): {", ".join(doc["held_out"])}',
             f'- Severities: {", ".join(str(s) for s in doc["severities"])}', '']
    header = ['Recipe', 'Config'] + [_LABELS[k] for k in RECIPE_KEYS]
    rows = []
    for recipe in ('plain', 'robust'):
        entry = doc['recipes'][recipe]
        digits = {k: 4 if k.startswith('ece') else 2 for k in RECIPE_KEYS}
        rows.append([recipe, f'`{entry["model"]}`']
                    + [_band_text(entry['band'][k], digits[k]) for k in RECIPE_KEYS])
    diff = doc['difference']
    rows.append(['robust − plain', ''] + [
        '–' if diff[k] is None else fmt_number(diff[k], 4 if k.startswith('ece') else 2)
        for k in RECIPE_KEYS])
    lines += markdown_table(header, rows, align_left=2)
    lines += ['', 'Avg is the mean over the corruptions (each the mean over its severities); '
              'ΔTP = Clean − Avg; the ECE is averaged over the held-out corruptions the same '
              'way. "Seen" numbers are in-distribution for the robust recipe and do not '
              'measure robustness.', '', '## Held-out corruptions, per recipe', '']
    names = doc['held_out']
    rows = [[recipe] + [_band_text(doc['recipes'][recipe]['per_corruption'][n], 2)
                        for n in names] for recipe in ('plain', 'robust')]
    lines += markdown_table(['Recipe'] + names, rows, align_left=1)
    lines.append('')
    return '\n'.join(lines)


def compare_recipes(plain_config: str, robust_config: str, *,
                    work_dir: str = 'work_dirs/recipe', seeds: Sequence[int] = (0, 1, 2),
                    options: Union[None, RobustnessOptions, Mapping[str, Any]] = None,
                    iters: Optional[int] = None, cfg_options: Optional[dict] = None,
                    resume: bool = True) -> Dict[str, Any]:
    """Train and evaluate both recipes and write ``recipe_comparison.{json,md}``.

    Args:
        plain_config, robust_config: the two training configs (the robust one with
            ``RandomCorruption`` in its training pipeline).
        options: the evaluation, as for
            :func:`~reobench_mm.robustness.data_budget.run_data_budget` (default
            :data:`RECIPE_DEFAULTS`; the training pool is the robust config's, whatever
            ``seen_corruptions`` says).
        work_dir, seeds, iters, cfg_options, resume: as
            :func:`~reobench_mm.robustness.data_budget.run_data_budget` (one fraction,
            the whole training set).

    Returns:
        dict: the ``recipe_comparison.json`` document plus ``files``.

    Raises:
        ValueError: the robust config has no ``RandomCorruption`` pool of ``protocol``,
            the plain config has one, or no selected corruption is outside the pool.
    """
    options = budget_options(options, RECIPE_DEFAULTS, owner='compare_recipes')
    protocol = options.protocol
    pool = seen_in_training(read_config(robust_config), protocol, 'auto')
    if not pool:
        raise ValueError(f'{robust_config} has no RandomCorruption step of protocol '
                         f'{protocol!r} in its training pipeline: nothing was held out')
    if seen_in_training(read_config(plain_config), protocol, 'auto'):
        raise ValueError(f'{plain_config} corrupts its own training images; the plain recipe '
                         'must not')
    selected = list(options.corruptions)
    held = [n for n in selected if n not in pool]
    if not held:
        raise ValueError(f'every selected corruption ({", ".join(selected)}) is in the robust '
                         f'recipe\'s training pool ({", ".join(pool)}): nothing is held out')
    budget = run_data_budget([plain_config, robust_config], fractions=[1.0], seeds=seeds,
                             options=options.replace(seen_corruptions=tuple(pool)),
                             work_dir=work_dir, cfg_options=cfg_options, iters=iters,
                             resume=resume, plot=False)
    recipes: Dict[str, Any] = {}
    for recipe, model in zip(('plain', 'robust'), budget['models']):
        runs: List[dict] = []
        for seed in budget['seeds']:
            path = budget['results'][run_key(model, 1.0, seed)]
            runs.append(recipe_row(model, seed, read_results(path).summary, pool))
        recipes[recipe] = dict(
            model=model, runs=runs,
            band={k: seed_band([r[k] for r in runs]) for k in RECIPE_KEYS},
            per_corruption={n: seed_band([r['per_corruption'][n] for r in runs])
                            for n in runs[0]['per_corruption']})
    difference = {}
    for key in RECIPE_KEYS:
        bands = [recipes[r]['band'][key] for r in ('plain', 'robust')]
        difference[key] = None if None in bands else bands[1]['mean'] - bands[0]['mean']
    doc = dict(format=RECIPE_FORMAT, task=budget['task'], metric=budget['metric'],
               seeds=budget['seeds'], protocol=protocol, severities=budget['severities'],
               corruptions=selected, pool=list(pool), held_out=held,
               iters=iters, recipes=recipes, difference=difference)
    files = dict(json=osp.join(work_dir, 'recipe_comparison.json'),
                 md=osp.join(work_dir, 'recipe_comparison.md'))
    dump_json_atomic(doc, files['json'])
    atomic_write_text(files['md'], recipe_markdown(doc))
    return dict(doc, files=files)
