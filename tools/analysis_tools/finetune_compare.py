"""Frozen encoder against full fine-tuning, over several training seeds.

    python tools/analysis_tools/finetune_compare.py CONFIG [--frozen-config FROZEN_CFG]
        [--seeds 0 1 2] [--corruptions NAME|GROUP ...] [--severities 1 2 3 4 5]
        [--protocol reobench|geofm_calibration] [--seed 0] [--iters N]
        [--work-dir DIR] [--no-calibration] [--no-resume] [--cfg-options KEY=VALUE ...]

Trains CONFIG as it is (full fine-tuning) and with its whole encoder frozen (its frozen
twin, written into --work-dir unless --frozen-config names one) once per seed, evaluates
each run clean, under every corruption × severity and on the shift sets of the config's
test_cfg, and compares them: clean metric, Avg, ΔTP, clean ECE, each shift set's OOD
metric and relative drop, mean ± standard deviation over the seeds, and frozen − full.
Writes ``finetune_comparison.json`` and ``.md`` into --work-dir and prints the table. A
rerun reuses the finished trainings and sweeps.
"""
import argparse
import sys
from typing import List, Optional

from reobench_mm.robustness.data_budget import (DATA_BUDGET_DEFAULTS, TOOL_OPTIONS,
                                                add_training_arguments)
from reobench_mm.robustness.finetuning import compare_finetuning, finetune_markdown
from reobench_mm.robustness.options import add_option_arguments, options_from_args


def build_parser() -> argparse.ArgumentParser:
    """The command-line options (the robustness ones made from ``RobustnessOptions``)."""
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description='train a config fully fine-tuned and with its encoder frozen, with '
        'several seeds; compare their robustness')
    parser.add_argument('config', metavar='CONFIG', help='the training config (full '
                        'fine-tuning)')
    parser.add_argument('--frozen-config', metavar='FROZEN_CFG', default=None,
                        help='its frozen twin (default: written into --work-dir with every '
                        'encoder stage frozen)')
    add_training_arguments(parser, [0, 1, 2], 'work_dirs/finetuning')
    add_option_arguments(parser.add_argument_group('evaluation of each run'), TOOL_OPTIONS,
                         DATA_BUDGET_DEFAULTS)
    return parser


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The command-line options."""
    return build_parser().parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    result = compare_finetuning(args.config, args.frozen_config, work_dir=args.work_dir,
                                seeds=args.seeds, options=options_from_args(args, TOOL_OPTIONS),
                                iters=args.iters, cfg_options=args.cfg_options,
                                resume=not args.no_resume)
    sys.stdout.write(finetune_markdown(result))
    from reobench_cli import print_written
    print_written(result['files'].values())
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
