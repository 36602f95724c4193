"""Robustness to real distribution shifts across models (the EarthShift analysis).

    python tools/analysis_tools/shift_analysis.py PAIRS.csv [--out-dir DIR] \
        [--bootstrap 1000] [--seed 0] [--confidence 0.95] [--pool-metrics] [--no-plots]

PAIRS.csv has one row per model and dataset pair, with the columns model, group (may be
empty), dataset (e.g. potsdam->vaihingen), shift_type (geographic, temporal, scale,
sensor, source or your own) and id_results, ood_results: the results.json of the model
on the in-distribution and on the shifted test set (paths relative to the CSV; each
side's clean metric is used). An optional protocol column (frozen, full...) fits each
protocol apart; --pool-metrics accepts rows of different metrics (mIoU, mAP...) and fits
one line per shift type over all of them. Writes shift_analysis.json, shift_analysis.csv,
shift_analysis.md, shift_ranking.csv and (without --no-plots) ood_vs_id.png (one per
protocol) into --out-dir: per point the OOD loss, the relative loss and the effective
robustness against the line fitted per shift type over every model and dataset pair
(linear and logit, bootstrap over models), the means per group and the models ranked
across shift types.
"""
import argparse
import os.path as osp
import sys
from typing import List, Optional

# --help imports none of the package (its import loads torch and the toolboxes): the
# analysis modules are imported once the arguments are parsed


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description='OOD loss and effective robustness per shift type across models')
    parser.add_argument('pairs', help='CSV: model, group, dataset, shift_type, id_results, '
                        'ood_results (optional: protocol, shift)')
    parser.add_argument('--out-dir', default='work_dirs/shift_analysis',
                        help='output folder (default: %(default)s)')
    parser.add_argument('--bootstrap', type=int, default=1000,
                        help='bootstrap resamples of the models (0: none; default '
                        '%(default)s)')
    parser.add_argument('--seed', type=int, default=0, help='bootstrap seed')
    parser.add_argument('--confidence', type=float, default=0.95,
                        help='level of the bands and intervals (default %(default)s)')
    parser.add_argument('--pool-metrics', action='store_true',
                        help='accept rows of different metrics and fit one line per shift '
                        'type over all of them (as EarthShift does)')
    parser.add_argument('--no-plots', action='store_true', help='skip ood_vs_id.png')
    return parser


def parse_args(parser: argparse.ArgumentParser,
               argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse and check the arguments (argparse errors for bad input)."""
    args = parser.parse_args(argv)
    if not osp.isfile(args.pairs):
        parser.error(f'no such file: {args.pairs}')
    if args.bootstrap < 0:
        parser.error(f'--bootstrap must be >= 0, got {args.bootstrap}')
    if not 0 < args.confidence < 1:
        parser.error(f'--confidence must be in (0, 1), got {args.confidence}')
    return args


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    from reobench_mm.analysis.shift_report import write_shift_analysis
    from reobench_mm.analysis.shifts import analyze_shifts, load_shift_points
    points, metric = load_shift_points(args.pairs, pool_metrics=args.pool_metrics)
    analysis = analyze_shifts(points, n_bootstrap=args.bootstrap, seed=args.seed,
                              confidence=args.confidence, pool_metrics=args.pool_metrics)
    files = write_shift_analysis(analysis, args.out_dir, metric, plots=not args.no_plots)
    with open(files['shift_analysis.md']) as handle:
        sys.stdout.write(handle.read())
    from reobench_cli import print_written
    print_written(files.values())
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
