"""Data-budget sweep: robustness and calibration vs the amount of training data, over
several training seeds.

    python tools/analysis_tools/data_budget.py CFG [CFG ...] [--fractions 0.01 0.1 0.25 0.5 0.75]
        [--seeds 0 1 2] [--corruptions NAME|GROUP ...] [--severities 3]
        [--protocol reobench|geofm_calibration] [--seed 0] [--iters N] [--work-dir DIR]
        [--no-calibration] [--no-resume] [--cfg-options KEY=VALUE ...]

Each config (model) is trained on nested fractions of its training set once per seed of
--seeds (the seed draws the subsets and seeds the training), then evaluated clean and
under every corruption × severity (--seed: the corruptions' draws, as in the robustness
tools). Writes ``data_budget.json``, ``.csv``, ``_seeds.csv``, ``.md`` and ``.png`` into
--work-dir and prints the Markdown report: per model and fraction the mean over the seeds
± the sample standard deviation, and ΔTP's range over the seeds. A rerun skips the runs
already finished (--no-resume starts over); added seeds or fractions run alone.
"""
import argparse
import sys
from typing import List, Optional

from mmengine.config import DictAction

from reobench_mm.corruptions import PROTOCOLS
from reobench_mm.robustness.data_budget import (DEFAULT_FRACTIONS, DEFAULT_SEEDS,
                                                data_budget_markdown, run_data_budget)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(
        description='train on fractions of the training set with several seeds; evaluate '
        'robustness and calibration of each')
    parser.add_argument('configs', nargs='+', metavar='CFG',
                        help='training configs, one per model (distinct file names)')
    parser.add_argument('--fractions', nargs='+', type=float, default=list(DEFAULT_FRACTIONS),
                        help='shares of the training set in (0, 1] (default: %(default)s)')
    parser.add_argument('--seeds', nargs='+', type=int, default=list(DEFAULT_SEEDS),
                        metavar='S', help='training seeds: each draws its own nested subsets '
                        'and seeds the training (default: %(default)s, the calibration '
                        "study's 3 for segmentation)")
    parser.add_argument('--corruptions', nargs='+', default=['cloud', 'gaussian_noise'],
                        metavar='NAME', help='corruption names or groups (default: '
                        '%(default)s)')
    parser.add_argument('--severities', nargs='+', type=int, default=[3], metavar='K',
                        help='severities 1..5 (default: %(default)s)')
    parser.add_argument('--protocol', choices=PROTOCOLS, default='reobench',
                        help='corruption protocol (default: %(default)s)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the corruption draws, the same for every run '
                        '(default: %(default)s)')
    parser.add_argument('--iters', type=int,
                        help='training iterations per run (default: the config schedule)')
    parser.add_argument('--work-dir', default='work_dirs/data_budget',
                        help='output folder (default: %(default)s)')
    parser.add_argument('--no-calibration', action='store_true',
                        help='do not evaluate calibration (calib/ECE)')
    parser.add_argument('--no-resume', action='store_true',
                        help='train and evaluate every run again')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, KEY=VALUE (lists: key="[a,b]")')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    result = run_data_budget(args.configs, fractions=args.fractions, seeds=args.seeds,
                             corruptions=args.corruptions, severities=args.severities,
                             protocol=args.protocol, corruption_seed=args.seed,
                             work_dir=args.work_dir, cfg_options=args.cfg_options,
                             iters=args.iters, calibration=not args.no_calibration,
                             resume=not args.no_resume)
    sys.stdout.write(data_budget_markdown(result))
    print('\nWritten:')
    for path in result['files'].values():
        print(f'  {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
