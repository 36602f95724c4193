"""Several robustness results in one table, like REOBench Tables 2 and 3.

    python tools/analysis_tools/robustness_table.py A/results.json B/results.json ... \
        [--names NAME ...] [--out table.md] [--csv table.csv] [--paper-names]

Rows: model (the results' provenance, else the file's parent folder), backbone,
Clean, one column per corruption present in every file (the others are left out
with a warning), Avg and ΔTP recomputed over those columns. The best value of each
column is bold (lowest for ΔTP). Without --out the Markdown goes to stdout.
"""
import argparse
import sys
import warnings
from typing import List, Optional

from reobench_mm.analysis.model_set import build_comparison
from reobench_mm.analysis.tables import comparison_markdown, write_comparison


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    from reobench_mm.utils.cli import ToolArgumentParser

    parser = ToolArgumentParser(description='robustness table of several models')
    parser.add_argument('results', nargs='+', help='results.json files')
    parser.add_argument('--names', nargs='+', help='row names, one per file')
    parser.add_argument('--out', help='Markdown output file (default: stdout)')
    parser.add_argument('--csv', help='CSV output file')
    parser.add_argument('--paper-names', action='store_true',
                        help='CSV column names as in the published tables (salt_pepper)')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            table = build_comparison(args.results, args.names)
    except (OSError, ValueError) as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    for msg in table.warnings:
        print(f'warning: {msg}', file=sys.stderr)
    write_comparison(table, args.out, args.csv, paper_names=args.paper_names)
    if not args.out:
        sys.stdout.write(comparison_markdown(table))
    return 0


if __name__ == '__main__':
    from reobench_mm.utils.cli import run_tool
    sys.exit(run_tool(main))
