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

from reobench_mm.analysis.data_budget import data_budget_markdown
from reobench_mm.robustness.data_budget import (DATA_BUDGET_DEFAULTS, DEFAULT_FRACTIONS,
                                                DEFAULT_SEEDS, TOOL_OPTIONS,
                                                add_training_arguments, run_data_budget)
from reobench_mm.robustness.options import add_option_arguments, options_from_args


def build_parser() -> argparse.ArgumentParser:
    """The command-line options (the robustness ones made from ``RobustnessOptions``)."""
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description='train on fractions of the training set with several seeds; evaluate '
        'robustness and calibration of each')
    parser.add_argument('configs', nargs='+', metavar='CFG',
                        help='training configs, one per model (distinct file names)')
    parser.add_argument('--fractions', nargs='+', type=float, default=list(DEFAULT_FRACTIONS),
                        help='shares of the training set in (0, 1] (default: %(default)s)')
    add_training_arguments(parser, list(DEFAULT_SEEDS), 'work_dirs/data_budget')
    add_option_arguments(parser.add_argument_group('evaluation of each run'), TOOL_OPTIONS,
                         DATA_BUDGET_DEFAULTS)
    return parser


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The command-line options."""
    return build_parser().parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    result = run_data_budget(args.configs, fractions=args.fractions, seeds=args.seeds,
                             options=options_from_args(args, TOOL_OPTIONS),
                             work_dir=args.work_dir, cfg_options=args.cfg_options,
                             iters=args.iters, resume=not args.no_resume)
    sys.stdout.write(data_budget_markdown(result))
    from reobench_cli import print_written
    print_written(result['files'].values())
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
