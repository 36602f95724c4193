"""Plain against corruption-aware training, scored on corruptions held out from training.

    python tools/analysis_tools/robust_recipe.py PLAIN_CFG ROBUST_CFG [--seeds 0 1 2]
        [--corruptions NAME|GROUP ...] [--severities 1 2 3 4 5]
        [--protocol reobench|geofm_calibration] [--seed 0] [--iters N]
        [--work-dir DIR] [--no-calibration] [--no-resume] [--cfg-options KEY=VALUE ...]

Trains both configs once per seed (the robust one's training pipeline holds
RandomCorruption, e.g. a ``*_robust.py`` config), evaluates each run clean and under
every corruption × severity, and compares them on the corruptions outside the robust
recipe's training pool: clean metric, Avg and ΔTP on the held-out corruptions (and on
the seen ones, for reference), clean and held-out ECE, mean ± standard deviation over
the seeds. Writes ``recipe_comparison.json`` and ``.md`` into --work-dir and prints the
table. A rerun reuses the finished trainings and sweeps.
"""
import argparse
import sys
from typing import List, Optional

from mmengine.config import DictAction

from reobench_mm.corruptions import PROTOCOLS
from reobench_mm.robustness.recipe import compare_recipes, recipe_markdown


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(
        description='train a plain and a corruption-aware config with several seeds; '
        'compare them on corruptions held out from training')
    parser.add_argument('plain', metavar='PLAIN_CFG', help='the plain training config')
    parser.add_argument('robust', metavar='ROBUST_CFG',
                        help='the corruption-aware config (RandomCorruption in training)')
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2], metavar='S',
                        help='training seeds (default: %(default)s)')
    parser.add_argument('--corruptions', nargs='+', default=['all'], metavar='NAME',
                        help='corruption names or groups to evaluate (default: all); those '
                        "in the robust recipe's pool are reported as seen")
    parser.add_argument('--severities', nargs='+', type=int, default=[1, 2, 3, 4, 5],
                        metavar='K', help='severities 1..5 (default: %(default)s)')
    parser.add_argument('--protocol', choices=PROTOCOLS, default='reobench',
                        help='corruption protocol (default: %(default)s)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the evaluation corruptions (default: %(default)s)')
    parser.add_argument('--iters', type=int,
                        help='training iterations per run (default: the config schedule)')
    parser.add_argument('--work-dir', default='work_dirs/recipe',
                        help='output folder (default: %(default)s)')
    parser.add_argument('--no-calibration', action='store_true',
                        help='do not evaluate calibration (calib/ECE)')
    parser.add_argument('--no-resume', action='store_true',
                        help='train and evaluate every run again')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings of both configs, KEY=VALUE')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    result = compare_recipes(args.plain, args.robust, work_dir=args.work_dir,
                             seeds=args.seeds, corruptions=args.corruptions,
                             severities=args.severities, protocol=args.protocol,
                             corruption_seed=args.seed, iters=args.iters,
                             cfg_options=args.cfg_options,
                             calibration=not args.no_calibration, resume=not args.no_resume)
    sys.stdout.write(recipe_markdown(result))
    print('\nWritten:')
    for path in result['files'].values():
        print(f'  {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
