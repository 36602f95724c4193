"""Several robustness results in one table, like REOBench Tables 2 and 3.

    python tools/analysis_tools/robustness_table.py A/results.json B/results.json ... \
        [--names NAME ...] [--common-conditions] [--out table.md] [--csv table.csv] \
        [--paper-names]

Rows: model, backbone, Clean, one column per corruption, Avg and ΔTP; the best value of
each column is bold (lowest for ΔTP). The files are read by the loader of
tools/analysis_tools/robustness_compare.py, under the same rules and with the same
numbers: files of different conditions are refused unless --common-conditions restricts
every model to the conditions all files have; rows are named by --names, else by the
results' provenance (else the file's folder), files of one provenance name by their
folders. What was restricted or derived is listed under the table and as warnings.
Without --out the Markdown goes to stdout.
"""
import argparse
import sys
import warnings
from typing import List, Optional


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(description='robustness table of several models')
    parser.add_argument('results', nargs='+', help='results.json files')
    parser.add_argument('--names', nargs='+', help='row names, one per file')
    parser.add_argument('--common-conditions', action='store_true',
                        help='when the files hold different conditions, restrict every '
                        'model to those all files have (default: refuse)')
    parser.add_argument('--out', help='Markdown output file (default: stdout)')
    parser.add_argument('--csv', help='CSV output file')
    parser.add_argument('--paper-names', action='store_true',
                        help='CSV column names as in the published tables (salt_pepper)')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    from reobench_mm.analysis.model_set import build_comparison
    from reobench_mm.analysis.tables import comparison_markdown, write_comparison
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # the table's own warnings are printed below
        table = build_comparison(args.results, args.names,
                                 common_conditions=args.common_conditions)
    for msg in table.warnings:
        print(f'warning: {msg}', file=sys.stderr)
    write_comparison(table, args.out, args.csv, paper_names=args.paper_names)
    if not args.out:
        sys.stdout.write(comparison_markdown(table))
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
