"""Cross-model robustness analysis: rank stability and effective robustness.

    python tools/analysis_tools/robustness_compare.py A/results.json B/results.json C/results.json \
        [--names A B C] [--common-conditions] \
        [--shift-results A2/results.json B2/results.json ...] \
        [--shift-names ...] [--out-dir DIR] [--bootstrap 1000] [--seed 0] \
        [--space linear|logit] [--no-plots] [--no-paired] [--permutations 1999] [--alpha 0.05]

Writes cross_model.json, cross_model.md, model_conditions.csv, rank_stability.csv,
effective_robustness.csv, (without --no-plots) kendall_tau_vs_severity.png and
effective_robustness.png and, when every results file names its per-image statistics,
the paired tests (differences to the first model with intervals and p-values, Kendall τ
with intervals, rank flips with p-values: paired_differences.csv, rank_flips.csv) into
--out-dir, prints the Markdown tables and the paths. Models evaluated on different
images are then refused.
The files are read by the loader of tools/analysis_tools/robustness_table.py, under the
same rules and with the same numbers: files of different conditions are refused unless
--common-conditions restricts every model to the conditions all files have; models are
named by --names, else by their results' provenance (else the file's folder), files of
one provenance name by their folders. Shift results are paired with the models by name
(their names must be unique).
"""
import argparse
import os.path as osp
import sys
import warnings
from typing import List, Optional

from reobench_mm.analysis.compare import compare_models, cross_model_markdown, write_cross_model
from reobench_mm.analysis.effective_robustness import FIT_SPACES


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description='rank stability and effective robustness across several models')
    parser.add_argument('results', nargs='+', help='results.json files, one per model')
    parser.add_argument('--names', nargs='+', help='model names, one per results file')
    parser.add_argument('--common-conditions', action='store_true',
                        help='when the files hold different conditions, restrict every '
                        'model to those all files have (default: refuse)')
    parser.add_argument('--shift-results', nargs='+', metavar='RESULTS',
                        help='results.json of the same models on a shifted dataset '
                        '(paired by model name; their clean metric is the OOD axis of '
                        'the "shift" fit)')
    parser.add_argument('--shift-names', nargs='+',
                        help='model names, one per --shift-results file')
    parser.add_argument('--out-dir', default='work_dirs/robustness_compare',
                        help='output folder (default: %(default)s)')
    parser.add_argument('--bootstrap', type=int, default=1000,
                        help='bootstrap resamples of the models (0: none; default '
                        '%(default)s)')
    parser.add_argument('--seed', type=int, default=0, help='bootstrap seed')
    parser.add_argument('--space', choices=FIT_SPACES, default='linear',
                        help='space of the line fit (default: %(default)s)')
    parser.add_argument('--no-plots', action='store_true', help='skip the PNG plots')
    parser.add_argument('--no-paired', action='store_true',
                        help='skip the paired tests on the per-image statistics')
    parser.add_argument('--permutations', type=int, default=1999,
                        help='random swaps of the paired permutation test (default '
                        '%(default)s; all swaps when there are fewer)')
    parser.add_argument('--alpha', type=float, default=0.05,
                        help='false discovery rate of the significance marks '
                        '(Benjamini-Hochberg; default %(default)s)')
    return parser


def parse_args(parser: argparse.ArgumentParser,
               argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse and check the arguments (argparse errors for bad input)."""
    args = parser.parse_args(argv)
    if len(args.results) < 2:
        parser.error('at least 2 results files are needed to compare models')
    for path in args.results + (args.shift_results or []):
        if not osp.isfile(path):
            parser.error(f'no such results file: {path}')
    if args.names is not None and len(args.names) != len(args.results):
        parser.error(f'--names has {len(args.names)} names for {len(args.results)} results '
                     'files; give one name per file')
    if args.shift_names is not None:
        if not args.shift_results:
            parser.error('--shift-names needs --shift-results')
        if len(args.shift_names) != len(args.shift_results):
            parser.error(f'--shift-names has {len(args.shift_names)} names for '
                         f'{len(args.shift_results)} --shift-results files')
    if args.bootstrap < 0:
        parser.error(f'--bootstrap must be >= 0, got {args.bootstrap}')
    if args.permutations < 1:
        parser.error(f'--permutations must be >= 1, got {args.permutations}')
    if not 0 < args.alpha < 1:
        parser.error(f'--alpha must be in (0, 1), got {args.alpha}')
    return args


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        comparison = compare_models(args.results, names=args.names,
                                    shift_paths=args.shift_results,
                                    shift_names=args.shift_names, space=args.space,
                                    n_bootstrap=args.bootstrap, seed=args.seed,
                                    common_conditions=args.common_conditions,
                                    paired=not args.no_paired,
                                    permutations=args.permutations, alpha=args.alpha)
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f'warning: {message}', file=sys.stderr)
    files = write_cross_model(comparison, args.out_dir, plots=not args.no_plots)
    sys.stdout.write(cross_model_markdown(comparison))
    print('\nWritten:')
    for path in files.values():
        print(f'  {path}')
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
