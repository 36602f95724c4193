"""Robustness sweep: evaluate a checkpoint clean and under every corruption × severity.

    python tools/robustness_test.py CONFIG CHECKPOINT [--corruptions NAME|GROUP ...]
        [--severities K ...] [--protocol reobench|geofm_calibration] [--seed S]
        [--border reflect|constant] [--work-dir DIR] [--cfg-options KEY=VALUE ...]
        [--launcher none|pytorch|slurm|mpi] [--force] [--shard i/n] [--no-plots]
        [--calibration] [--temperature-scaling [--temperature-split N
        [--temperature-split-seed S] | --temperature-on-test]]
        [--seen-corruptions [NAME ...]] [--held-out-only] [--decode-cache-bytes BYTES]
        [--partial-checkpoint]

The model is built and the checkpoint loaded (strictly) once; the corruption of the
test pipeline is switched for each condition. Each finished condition is written to
``WORK_DIR/conditions/<tag>.json``; a rerun skips those (``--force`` evaluates them
again). At the end: ``results.json``, ``results.csv``, ``report.md`` and plots in
WORK_DIR (default ``work_dirs/robustness/<config stem>``). With ``--shard i/n`` only
every n-th condition from i runs and a manifest ``shard_<i>-of-<n>.json`` is written;
``tools/robustness_merge.py`` merges the shards and writes the report. The paper-layout
table (the metric, and with ``--calibration`` the ECE, per corruption, then Avg and ΔTP)
is printed at the end.

Exit status 0 on success, 2 for bad inputs and refused runs (a checkpoint that cannot be
used or does not fit, a work dir in use by another sweep or holding results of other
inputs) and for files that cannot be written (one line on stderr names the file and the
reason; the finished conditions are kept, so a rerun resumes).
"""
import argparse
import os
import sys

# The OpenMMLab imports live in the functions: MMRotate's DOTAMetric evaluates in a
# 'spawn' process pool whose workers re-import this file.


def build_parser() -> argparse.ArgumentParser:
    """The command-line options (the robustness ones made from ``RobustnessOptions``)."""
    from mmengine.config import DictAction

    from reobench_mm.robustness.options import SWEEP_OPTIONS, add_option_arguments

    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description='Evaluate a segmentor or rotated detector clean and under corruptions')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='output folder (default: '
                        'work_dirs/robustness/<config stem>)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, KEY=VALUE (lists: key="[a,b]")')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'],
                        default='none', help='job launcher')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    add_option_arguments(parser.add_argument_group('robustness options'), SWEEP_OPTIONS)
    return parser


def parse_args(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args, parser


def main(argv=None) -> int:
    args, parser = parse_args(argv)
    from reobench_mm.engine.checkpoint import CheckpointError
    from reobench_mm.errors import SweepError
    from reobench_mm.robustness.options import SWEEP_OPTIONS, options_from_args
    from reobench_cli import error_line
    from reobench_mm.robustness.sweep import RobustnessSweep
    try:
        sweep = RobustnessSweep(args.config, args.checkpoint, work_dir=args.work_dir,
                                cfg_options=args.cfg_options, launcher=args.launcher,
                                **options_from_args(args, SWEEP_OPTIONS))
    except (OSError, KeyError, ValueError) as error:
        parser.error(error.args[0] if isinstance(error, KeyError) else str(error))
    try:
        outcome = sweep.run()
    except (SweepError, CheckpointError, OSError) as error:
        print(error_line(error), file=sys.stderr)
        return 2
    from mmengine.dist import is_main_process
    if is_main_process():
        print(f'{len(outcome.evaluated)} conditions evaluated, {len(outcome.skipped)} '
              f'skipped, {outcome.wall_seconds:.1f} s')
        for name, path in sorted(outcome.report_files.items()):
            print(f'{name}: {path}')
        if outcome.manifest:
            print(f'shard manifest: {outcome.manifest}')
        if 'results.json' in outcome.report_files:
            from reobench_mm.analysis.result_blocks import block_console_lines
            from reobench_mm.analysis.results_file import read_results
            from reobench_mm.analysis.tables import paper_table_lines
            summary = read_results(outcome.report_files['results.json']).summary
            print('\n'.join(paper_table_lines(summary, caption=True)
                            + block_console_lines(summary.blocks)))
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
