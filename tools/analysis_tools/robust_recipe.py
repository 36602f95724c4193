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

from reobench_mm.robustness.data_budget import TOOL_OPTIONS, add_training_arguments
from reobench_mm.robustness.options import add_option_arguments, options_from_args
from reobench_mm.robustness.recipe import RECIPE_DEFAULTS, compare_recipes, recipe_markdown


def build_parser() -> argparse.ArgumentParser:
    """The command-line options (the robustness ones made from ``RobustnessOptions``)."""
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description='train a plain and a corruption-aware config with several seeds; '
        'compare them on corruptions held out from training')
    parser.add_argument('plain', metavar='PLAIN_CFG', help='the plain training config')
    parser.add_argument('robust', metavar='ROBUST_CFG',
                        help='the corruption-aware config (RandomCorruption in training)')
    add_training_arguments(parser, [0, 1, 2], 'work_dirs/recipe')
    add_option_arguments(parser.add_argument_group(
        "evaluation of each run (corruptions in the robust recipe's pool are reported as "
        'seen)'), TOOL_OPTIONS, RECIPE_DEFAULTS)
    return parser


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The command-line options."""
    return build_parser().parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    result = compare_recipes(args.plain, args.robust, work_dir=args.work_dir,
                             seeds=args.seeds, options=options_from_args(args, TOOL_OPTIONS),
                             iters=args.iters, cfg_options=args.cfg_options,
                             resume=not args.no_resume)
    sys.stdout.write(recipe_markdown(result))
    from reobench_cli import print_written
    print_written(result['files'].values())
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
