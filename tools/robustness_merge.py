"""Merge the shards of a robustness sweep and write the report.

    python tools/robustness_merge.py WORK_DIR [WORK_DIR ...] [--out DIR] [--no-plots]

Reads every ``shard_<i>-of-<n>.json`` manifest in the work dirs (written by
``tools/robustness_test.py --shard i/n``) and the condition files they list, checks
that they belong to one sweep and cover all shards, checks every condition file as a
resumed sweep does, and writes ``results.json``, ``results.csv``, ``report.md`` and plots
into ``--out`` (default: the first WORK_DIR); then prints the paper-layout table.

Exit status 2, with one line on stderr naming the file and what is wrong, for manifests
of different sweeps, missing shards, missing, malformed or edited condition files and
report files that cannot be written.
"""
import sys


def main(argv=None) -> int:
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(description='merge the shards of a robustness sweep')
    parser.add_argument('work_dirs', nargs='+', help='work dirs of the shards')
    parser.add_argument('--out', help='report folder (default: the first work dir)')
    parser.add_argument('--no-plots', action='store_true', help='no plots in the report')
    args = parser.parse_args(argv)
    from reobench_mm.analysis.tables import paper_table_lines
    from reobench_mm.robustness.shards import merge_sweeps
    report = merge_sweeps(args.work_dirs, args.out or args.work_dirs[0],
                          plots=not args.no_plots)  # refusals: one line (run_tool)
    for name, path in sorted(report.files.items()):
        print(f'{name}: {path}')
    print('\n'.join(paper_table_lines(report.summary, caption=True)))
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
