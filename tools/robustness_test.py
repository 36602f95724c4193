"""Robustness sweep: evaluate a checkpoint clean and under every corruption × severity.

    python tools/robustness_test.py CONFIG CHECKPOINT [--corruptions NAME|GROUP ...]
        [--severities K ...] [--protocol reobench|geofm_calibration] [--seed S]
        [--border reflect|constant] [--work-dir DIR] [--cfg-options KEY=VALUE ...]
        [--launcher none|pytorch|slurm|mpi] [--force] [--shard i/n] [--no-plots]
        [--calibration] [--temperature-scaling [--temperature-split N
        [--temperature-split-seed S] | --temperature-on-test]]
        [--seen-corruptions [NAME ...]] [--held-out-only]

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


def parse_args(argv=None):
    from mmengine.config import DictAction

    from reobench_mm.corruptions import PROTOCOLS
    from reobench_mm.corruptions.geometric import BORDER_MODES

    parser = argparse.ArgumentParser(
        description='Evaluate a segmentor or rotated detector clean and under corruptions')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--corruptions', nargs='+', metavar='NAME',
                        help='corruption names or groups (all, environmental, sensor, '
                        "geometric, appearance); default: all of the protocol's")
    parser.add_argument('--severities', nargs='+', type=int, metavar='K',
                        help='severities 1..5 (default: all five)')
    parser.add_argument('--protocol', choices=PROTOCOLS, default='reobench',
                        help='corruption protocol')
    parser.add_argument('--seed', type=int, default=0, help='seed of the corruption draws')
    parser.add_argument('--border', choices=list(BORDER_MODES), default='reflect',
                        help='border of rotate/translate')
    parser.add_argument('--work-dir', help='output folder (default: '
                        'work_dirs/robustness/<config stem>)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, KEY=VALUE (lists: key="[a,b]")')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'],
                        default='none', help='job launcher')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    parser.add_argument('--force', action='store_true',
                        help='evaluate again the conditions already finished')
    parser.add_argument('--shard', metavar='i/n',
                        help='evaluate only every n-th condition from i (clean is in 0); '
                        'merge with tools/robustness_merge.py')
    parser.add_argument('--no-plots', action='store_true', help='no plots in the report')
    parser.add_argument('--calibration', action='store_true',
                        help='also report calibration (ECE, signed gap, NLL, Brier, classwise '
                        'ECE, AURC, eAURC, accuracy at 90%% coverage; detection: D-ECE) in '
                        'every condition, with reliability diagrams and ECE vs severity')
    parser.add_argument('--temperature-scaling', action='store_true',
                        help='(segmentation; implies --calibration) fit one temperature on '
                        'clean pixels of images that are not evaluated (--temperature-split, '
                        'or a val_dataloader of other images) and report every condition '
                        'calibrated with it too (calib_ts/...)')
    parser.add_argument('--temperature-split', type=int, metavar='N',
                        help='hold out N test images (seeded, stratified) for the '
                        'temperature and evaluate the rest (the calibration study: 400)')
    parser.add_argument('--temperature-split-seed', type=int, default=0, metavar='S',
                        help='seed of the held-out split (default 0)')
    parser.add_argument('--temperature-on-test', action='store_true',
                        help='allow fitting the temperature on evaluated images '
                        '(optimistic; recorded in the report)')
    parser.add_argument('--seen-corruptions', nargs='*', metavar='NAME',
                        help="corruptions the model saw in training (default: read from the "
                        "config's RandomCorruption steps; give none for none): marked in the "
                        'report, which adds held-out scores over the others')
    parser.add_argument('--held-out-only', action='store_true',
                        help='refuse to evaluate corruptions seen in training')
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args, parser


def error_line(error: BaseException) -> str:
    """The one line printed for a refused or failed run."""
    if isinstance(error, OSError) and error.strerror:
        where = f'{error.filename}: ' if error.filename else ''
        return f'error: {where}{error.strerror}'
    return f'error: {" ".join(str(error).split())}'


def main(argv=None) -> int:
    args, parser = parse_args(argv)
    from reobench_mm.engine.checkpoint import CheckpointError
    from reobench_mm.robustness.store import SweepError
    from reobench_mm.robustness.sweep import RobustnessSweep
    try:
        sweep = RobustnessSweep(
            args.config, args.checkpoint, corruptions=args.corruptions,
            severities=args.severities, protocol=args.protocol, seed=args.seed,
            border=args.border, work_dir=args.work_dir, cfg_options=args.cfg_options,
            launcher=args.launcher, force=args.force, shard=args.shard,
            plots=not args.no_plots, calibration=args.calibration,
            temperature_scaling=args.temperature_scaling,
            temperature_split=args.temperature_split,
            temperature_split_seed=args.temperature_split_seed,
            temperature_on_test=args.temperature_on_test,
            seen_corruptions='auto' if args.seen_corruptions is None
            else args.seen_corruptions or None,
            held_out_only=args.held_out_only)
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
            from reobench_mm.analysis.report import load_results_json
            from reobench_mm.analysis.tables import paper_table_lines
            numbers = load_results_json(outcome.report_files['results.json'])['numbers']
            print('\n'.join(paper_table_lines(numbers, caption=True)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
