"""Learning-rate sweep (EarthShift's protocol): choose the rate on the clean test set, then
train several seeds at it and evaluate their robustness.

    python tools/analysis_tools/lr_sweep.py CONFIG [--lrs LR ...] [--lr LR]
        [--selection-seed 0] [--frozen] [--seeds 0 1 2 3 4] [--corruptions NAME|GROUP ...]
        [--severities 3] [--protocol reobench|geofm_calibration] [--seed 0] [--iters N]
        [--work-dir DIR] [--no-calibration] [--no-resume] [--cfg-options KEY=VALUE ...]

Trains CONFIG once per rate of --lrs (default: the package's 18, 1, 2 and 5 × 10^k for
k = -6..-1) with --selection-seed and chooses the rate with the highest clean metric on
the config's test set (never a run that diverged; ties: the smaller rate). Then trains the
chosen rate with every seed of --seeds (the selection seed's run is reused) and evaluates
each run under every corruption × severity and on the shift sets of the config's
test_cfg. --lr skips the selection (a rate chosen for another pair of the same shift
type). Writes ``lr_sweep.json`` and ``.md`` into --work-dir and prints the report. A rerun
reuses the finished trainings and evaluations (--no-resume starts over).
"""
import argparse
import sys
from typing import List, Optional

from reobench_mm.robustness.data_budget import (DATA_BUDGET_DEFAULTS, TOOL_OPTIONS,
                                                add_training_arguments)
from reobench_mm.robustness.lr_sweep import (DEFAULT_LRS, DEFAULT_SEEDS, lr_sweep_markdown,
                                             run_lr_sweep)
from reobench_mm.robustness.options import add_option_arguments, options_from_args


def build_parser() -> argparse.ArgumentParser:
    """The command-line options (the robustness ones made from ``RobustnessOptions``)."""
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description='choose a config\'s learning rate on its clean test set, then train '
        'several seeds at it and evaluate their robustness')
    parser.add_argument('config', metavar='CONFIG', help='the training config (it sets '
                        'optim_wrapper.optimizer.lr)')
    rates = parser.add_mutually_exclusive_group()
    rates.add_argument('--lrs', nargs='+', type=float, default=list(DEFAULT_LRS),
                       metavar='LR', help='the learning rates swept (default: 1, 2 and 5 '
                       'x 10^k for k = -6..-1, 18 rates)')
    rates.add_argument('--lr', type=float, default=None, metavar='LR',
                       help='a rate chosen before (for another pair of the same shift '
                       'type): no selection')
    parser.add_argument('--selection-seed', type=int, default=0, metavar='S',
                        help='training seed of the selection runs (default: %(default)s)')
    parser.add_argument('--frozen', action='store_true',
                        help="sweep the config's frozen twin (every encoder stage frozen, "
                        'written into --work-dir)')
    add_training_arguments(parser, list(DEFAULT_SEEDS), 'work_dirs/lr_sweep')
    add_option_arguments(parser.add_argument_group('evaluation of each final run'), TOOL_OPTIONS,
                         DATA_BUDGET_DEFAULTS)
    return parser


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The command-line options."""
    return build_parser().parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    result = run_lr_sweep(args.config, lrs=args.lrs, seeds=args.seeds, lr=args.lr,
                          selection_seed=args.selection_seed, frozen=args.frozen,
                          options=options_from_args(args, TOOL_OPTIONS), work_dir=args.work_dir,
                          iters=args.iters, cfg_options=args.cfg_options,
                          resume=not args.no_resume)
    sys.stdout.write(lr_sweep_markdown(result))
    from reobench_cli import print_written
    print_written(result['files'].values())
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
