"""Mechanism tests between two groups of models (the calibration study's §IV-C B1–B3).

    python tools/analysis_tools/mechanism_tests.py A/representation_drift.json \
        B/representation_drift.json C/... D/... \
        (--group domain:A=EO,B=EO,C=natural,D=natural | --groups groups.json) \
        [--column domain] [--names A B C D] [--severities 5] \
        [--results A/results.json B/... C/... D/...] [--common-conditions] \
        [--permutations 100000] [--seed 0] [--out-dir DIR] [--no-plots]

Reads one representation_drift.json per model (plain paths named by --names or by their
folders, or MODEL=PATH entries) and compares the two groups of the column (default
``domain``) with two-sided Mann-Whitney U tests: B1 the final block's CKA, B2 the
drift-confidence coupling, B3 the overconfident fraction, and the clean participation
ratio. Writes mechanism_tests.json, mechanism_tests.csv, mechanism_tests.md and (without
--no-plots) cka_vs_severity_by_group.png and participation_ratio_by_group.png into
--out-dir, and prints the Markdown. With --results (one results.json per model, in the
same order) also Spearman rho of CKA against ECE inflation per condition, with the
permutation and the analytic p-value. See reobench_mm.analysis.mechanisms.
"""
import argparse
import os.path as osp
import sys
import warnings
from typing import List, Optional

# --help imports none of the package (its import loads torch and the toolboxes)


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description='Mann-Whitney tests of representation drift between two groups of '
        'models (B1 CKA, B2 drift-confidence coupling, B3 overconfident fraction)')
    parser.add_argument('drift', nargs='+', metavar='[MODEL=]DRIFT.json',
                        help='representation_drift.json of every model (plain paths, or '
                        'each named MODEL=PATH)')
    parser.add_argument('--names', nargs='+', help='model names, one per plain drift path '
                        '(default: each file\'s folder name)')
    parser.add_argument('--group', nargs='+', action='extend', default=[],
                        metavar='NAME:MODEL=LABEL,...',
                        help='a grouping, e.g. domain:SatMAE=EO,ScaleMAE=EO,ViT=natural')
    parser.add_argument('--groups', nargs='+', default=[], metavar='GROUPS.json',
                        help='JSON files {grouping: {model: label}}')
    parser.add_argument('--column', default='domain',
                        help='the grouping compared; it must have two groups of at least '
                        '2 models (default: %(default)s)')
    parser.add_argument('--severities', nargs='+', type=int, metavar='K',
                        help='test only the conditions of these severities (default: all)')
    parser.add_argument('--results', nargs='+', metavar='RESULTS',
                        help='results.json of every model, in the order of the drift '
                        'files: adds Spearman rho of CKA against ECE inflation')
    parser.add_argument('--common-conditions', action='store_true',
                        help='with --results of different conditions, keep those all have')
    parser.add_argument('--permutations', type=int, default=None,
                        help='permutations of the Spearman test (default 100000)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the permutations')
    parser.add_argument('--out-dir', default='work_dirs/mechanism_tests',
                        help='output folder (default: %(default)s)')
    parser.add_argument('--no-plots', action='store_true', help='skip the PNG figures')
    return parser


def _drift_paths(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict:
    """``{model: path}`` of the drift arguments (argparse errors for bad input)."""
    named = ['=' in d for d in args.drift]
    if any(named) and not all(named):
        parser.error('the drift files are either plain paths or MODEL=PATH entries, not '
                     'both')
    if all(named):
        if args.names is not None:
            parser.error('--names goes with plain drift paths, not MODEL=PATH entries')
        pairs = [d.split('=', 1) for d in args.drift]
    else:
        names = args.names
        if names is None:
            names = [osp.basename(osp.dirname(osp.abspath(p))) for p in args.drift]
            if len(set(names)) != len(names):
                parser.error(f'the drift files\' folders do not name the models apart '
                             f'({names}); give --names or MODEL=PATH entries')
        elif len(names) != len(args.drift):
            parser.error(f'--names has {len(names)} names for {len(args.drift)} drift files')
        pairs = list(zip(names, args.drift))
    models = [m for m, _ in pairs]
    if len(set(models)) != len(models):
        parser.error(f'a model is named twice: {models}')
    for _, path in pairs:
        if not osp.isfile(path):
            parser.error(f'no such drift file: {path}')
    return dict(pairs)


def parse_args(parser: argparse.ArgumentParser,
               argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse and check the arguments (argparse errors for bad input)."""
    args = parser.parse_args(argv)
    args.drift_paths = _drift_paths(parser, args)
    from reobench_mm.analysis.groups import (DEFAULT_DRAWS, parse_group_spec,
                                             read_groups_file)
    groupings = {}
    try:
        specs = [(name, mapping) for path in args.groups
                 for name, mapping in read_groups_file(path).items()]
        specs += [parse_group_spec(text) for text in args.group]
    except ValueError as error:
        parser.error(str(error))
    for name, mapping in specs:
        if name in groupings:
            parser.error(f'grouping {name!r} is given twice')
        groupings[name] = mapping
    if not groupings:
        parser.error(f'give the groups: --group {args.column}:MODEL=LABEL,... or --groups '
                     'FILE')
    args.groupings = groupings
    if args.results is not None:
        if len(args.results) != len(args.drift_paths):
            parser.error(f'--results has {len(args.results)} files for '
                         f'{len(args.drift_paths)} drift files; give one per model, in the '
                         'same order')
        for path in args.results:
            if not osp.isfile(path):
                parser.error(f'no such results file: {path}')
    if args.severities is not None and any(not 1 <= s <= 5 for s in args.severities):
        parser.error(f'--severities are 1..5, got {args.severities}')
    if args.permutations is None:
        args.permutations = DEFAULT_DRAWS
    if args.permutations < 1:
        parser.error(f'--permutations must be >= 1, got {args.permutations}')
    return args


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    from reobench_mm.analysis.mechanism_report import mechanism_markdown, write_mechanism_tests
    from reobench_mm.analysis.mechanisms import mechanism_tests
    from reobench_mm.analysis.model_set import load_model_set
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        model_set = None if args.results is None else load_model_set(
            args.results, list(args.drift_paths), common_conditions=args.common_conditions)
        result = mechanism_tests(args.drift_paths, args.groupings, column=args.column,
                                 severities=args.severities, model_set=model_set,
                                 draws=args.permutations, seed=args.seed)
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f'warning: {message}', file=sys.stderr)
    files = write_mechanism_tests(result, args.out_dir, plots=not args.no_plots)
    sys.stdout.write(mechanism_markdown(result))
    from reobench_cli import print_written
    print_written(files.values())
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
