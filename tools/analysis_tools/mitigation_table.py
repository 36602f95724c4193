"""What temperature scaling, a deep ensemble and selective prediction change, as deltas
(the calibration study's Table V).

    python tools/analysis_tools/mitigation_table.py RESULTS \
        [--ensemble ENSEMBLE_RESULTS --members MEMBER_RESULTS ... [--names NAME ...]] \
        [--common-conditions] [--out-dir DIR] [--no-plot]

RESULTS is a segmentation sweep's results.json with calibration (--calibration; with
--temperature-scaling it gives the temperature-scaling table: calib_ts − calib). With
--ensemble and --members (the ensemble's results.json and its members'), the ensemble is
compared with the mean of its members and with its best member (the highest clean mIoU);
the files must hold the same conditions unless --common-conditions restricts them to those
all have; --names names the ensemble and its members (else their provenance names, told
apart by their folders). Rows: Clean, each severity (mean over corruptions), Avg
(REOBench's). Writes mitigation.md, mitigation.csv, mitigation.json and (without
--no-plot) signed_ece.png into --out-dir, prints the Markdown and the paths.
"""
import argparse
import os.path as osp
import sys
import warnings
from typing import List, Optional


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description='mitigation deltas: temperature scaling, ensemble vs members, '
        'selective prediction')
    parser.add_argument('results', help='results.json of a segmentation sweep with '
                        'calibration (and temperature scaling)')
    parser.add_argument('--ensemble', metavar='RESULTS',
                        help="the ensemble's results.json (needs --members)")
    parser.add_argument('--members', nargs='+', metavar='RESULTS',
                        help="the ensemble members' results.json (at least 2)")
    parser.add_argument('--names', nargs='+',
                        help='names of the ensemble and its members, one per file, the '
                        "ensemble's first (default: their provenance, else their folders)")
    parser.add_argument('--common-conditions', action='store_true',
                        help='when the ensemble and member files hold different '
                        'conditions, compare over those all have (default: refuse)')
    parser.add_argument('--out-dir', default='work_dirs/mitigation',
                        help='output folder (default: %(default)s)')
    parser.add_argument('--no-plot', action='store_true', help='skip signed_ece.png')
    return parser


def parse_args(parser: argparse.ArgumentParser,
               argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse and check the arguments (argparse errors for bad input)."""
    args = parser.parse_args(argv)
    if (args.ensemble is None) != (args.members is None):
        parser.error('--ensemble and --members go together: give the ensemble\'s results '
                     'and its members\'')
    if args.members is not None and len(args.members) < 2:
        parser.error(f'--members needs at least 2 results files (an ensemble has k >= 2 '
                     f'members), got {len(args.members)}')
    for flag, given in (('--common-conditions', args.common_conditions),
                        ('--names', args.names is not None)):
        if given and args.ensemble is None:
            parser.error(f'{flag} applies to the ensemble comparison: it needs --ensemble '
                         'and --members')
    if args.names is not None and args.members is not None and \
            len(args.names) != 1 + len(args.members):
        parser.error(f'--names has {len(args.names)} names for {1 + len(args.members)} '
                     'files (the ensemble and its members); give one name per file')
    for path in [args.results] + ([args.ensemble] if args.ensemble else []) + \
            (args.members or []):
        if not osp.isfile(path):
            parser.error(f'no such results file: {path}')
    return args


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    from reobench_mm.analysis.mitigation import (mitigation_markdown, mitigation_report,
                                                 write_mitigation)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        report = mitigation_report(args.results, args.ensemble, args.members, args.names,
                                   common_conditions=args.common_conditions)
    for message in dict.fromkeys([str(w.message) for w in caught] + report.notes):
        print(f'warning: {message}', file=sys.stderr)
    files = write_mitigation(report, args.out_dir, plot=not args.no_plot)
    sys.stdout.write(mitigation_markdown(report))
    from reobench_cli import print_written
    print_written(files.values())
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
