"""Cross-model robustness analysis: rank stability and effective robustness.

    python tools/analysis_tools/robustness_compare.py A/results.json B/results.json C/results.json \
        [--names A B C] [--common-conditions] \
        [--shift-results A2/results.json B2/results.json ...] \
        [--shift-names ...] [--out-dir DIR] [--bootstrap 1000] [--seed 0] \
        [--space linear|logit] [--no-plots] [--no-paired] [--permutations 1999] [--alpha 0.05] \
        [--rank-reference mIoU:clean --rank-target calib/ECE:avg calib/NLL:sev@5] \
        [--severity-pairs 3:5] [--scatter-conditions clean avg] \
        [--average-dataset A3/results.json B3/results.json C3/results.json] [--dataset-labels P V] \
        [--groups groups.json] [--group domain:A=EO,B=EO,C=ImageNet ...] \
        [--drift A/representation_drift.json B/... C/...] [--drift-permutations 100000]

Writes cross_model.json, cross_model.md, model_conditions.csv, rank_stability.csv,
effective_robustness.csv, rank_statistics.csv (Kendall τ between any two rankings of the
models; with --average-dataset also rank_statistics_datasets.csv, the mean τ over the
datasets), (without --no-plots) kendall_tau_vs_severity.png, effective_robustness.png and
rank_scatter.png and, when every results file names its per-image statistics,
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
With --groups/--group: group means and Mann-Whitney U tests (groups.csv,
group_relative_drop.png, group_ece_ratio.png), group means per condition and the ECE
ratio per corruption and severity (group_cells.csv, group_ece_ratio_by_corruption.png);
with --drift: Spearman rho of CKA against ECE inflation with a permutation test and the
analytic p-value (cka_ece_inflation.csv, cka_vs_ece_inflation.png);
with shift sets in every results file or --shift-results: corruption drops against real
shift drops (synthetic_vs_real.csv, synthetic_vs_real.png, shift_drop_vs_delta_tp.png).
"""
import argparse
import os.path as osp
import sys
import warnings
from typing import Any, List, Optional

# --help imports none of the package (its import loads torch and the toolboxes): the
# analysis modules are imported once the arguments are parsed; the help texts that name
# their constants are checked against them (tests/tools/test_cli_errors.py)


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
    parser.add_argument('--space', default='linear',
                        help="space of the line fit, 'linear' or 'logit' (default: "
                        '%(default)s)')
    parser.add_argument('--no-plots', action='store_true', help='skip the PNG plots')
    parser.add_argument('--no-paired', action='store_true',
                        help='skip the paired tests on the per-image statistics')
    parser.add_argument('--permutations', type=int, default=1999,
                        help='random swaps of the paired permutation test (default '
                        '%(default)s; all swaps when there are fewer)')
    parser.add_argument('--alpha', type=float, default=0.05,
                        help='false discovery rate of the significance marks '
                        '(Benjamini-Hochberg; default %(default)s)')
    add_rank_arguments(parser)
    add_group_arguments(parser)
    return parser


def parse_args(parser: argparse.ArgumentParser,
               argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse and check the arguments (argparse errors for bad input)."""
    args = parser.parse_args(argv)
    from reobench_mm.analysis.effective_robustness import FIT_SPACES
    from reobench_mm.analysis.groups import DEFAULT_DRAWS
    if args.space not in FIT_SPACES:
        parser.error(f'--space must be one of {", ".join(FIT_SPACES)}, got {args.space!r}')
    if args.drift_permutations is None:
        args.drift_permutations = DEFAULT_DRAWS
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
    args.rank_options = rank_options(parser, args)
    group_options(parser, args)
    return args


def add_rank_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the rank statistics."""
    group = parser.add_argument_group(
        'rank statistics', 'Kendall tau between two rankings of the models, rank 1 = best '
        '(highest metric, lowest calibration error); MEASURE:CONDITION with CONDITION '
        'clean, <corruption>@<severity>, <corruption>@mean, sev@<k> or avg')
    group.add_argument('--rank-reference', nargs='+', default=[], metavar='MEASURE:CONDITION',
                       help='reference rankings (e.g. mIoU:clean), each set against every '
                       '--rank-target')
    group.add_argument('--rank-target', nargs='+', default=[], metavar='MEASURE:CONDITION',
                       help='target rankings (e.g. calib/ECE:avg calib/NLL:sev@5)')
    group.add_argument('--severity-pairs', nargs='+', metavar='K:M',
                       help='the severity pairs of the sev@K -> sev@M rows (default: every '
                       'pair, e.g. 3:5)')
    group.add_argument('--scatter-conditions', nargs='+', default=['clean', 'avg'],
                       metavar='CONDITION', help='the conditions (rows) of rank_scatter.png '
                       '(default: %(default)s)')
    group.add_argument('--average-dataset', action='append', nargs='+', default=[],
                       metavar='RESULTS', help='results.json of the same models on another '
                       'dataset (one file per model, named as the compared files, with the '
                       'same --names in the same order); repeat per dataset: the mean tau '
                       'per row over all datasets')
    group.add_argument('--dataset-labels', nargs='+', metavar='LABEL',
                       help='one label per dataset, the compared one first')


def rank_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Any:
    """The ``RankOptions`` of the parsed arguments (argparse errors for bad input)."""
    from reobench_mm.analysis.rank_report import RankOptions
    from reobench_mm.analysis.rank_stability import parse_measure_condition, parse_severity_pair
    try:
        references = [parse_measure_condition(t) for t in args.rank_reference]
        targets = [parse_measure_condition(t) for t in args.rank_target]
        pairs = None if args.severity_pairs is None else \
            [parse_severity_pair(t) for t in args.severity_pairs]
    except ValueError as error:
        parser.error(str(error))
    if bool(references) != bool(targets):
        parser.error('--rank-reference and --rank-target go together (each reference is '
                     'ranked against each target)')
    for paths in args.average_dataset:
        for path in paths:
            if not osp.isfile(path):
                parser.error(f'no such results file: {path}')
        if len(paths) != len(args.results):
            parser.error(f'--average-dataset has {len(paths)} files for {len(args.results)} '
                         'models; give one file per model')
    if args.dataset_labels is not None:
        if not args.average_dataset:
            parser.error('--dataset-labels needs --average-dataset')
        if len(args.dataset_labels) != len(args.average_dataset) + 1:
            parser.error(f'--dataset-labels has {len(args.dataset_labels)} labels for '
                         f'{len(args.average_dataset) + 1} datasets (the compared one first)')
    return RankOptions(references=references, targets=targets, severity_pairs=pairs,
                       scatter_conditions=args.scatter_conditions,
                       datasets=args.average_dataset, dataset_labels=args.dataset_labels)


def add_group_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the groups of models and of the CKA correlation."""
    group = parser.add_argument_group(
        'groups of models', 'group means and Mann-Whitney U tests of every number per '
        'grouping (each model needs a label in each grouping); CKA against ECE inflation')
    group.add_argument('--groups', nargs='+', metavar='GROUPS.json', default=[],
                       help='JSON files {grouping: {model: label}}')
    group.add_argument('--group', nargs='+', action='extend', metavar='NAME:MODEL=LABEL,...',
                       default=[], help='a grouping on the command line, e.g. '
                       'domain:SatMAE=EO,ScaleMAE=EO,ViT=ImageNet')
    group.add_argument('--drift', nargs='+', metavar='[MODEL=]DRIFT.json',
                       help='representation_drift.json of every model: in the order of '
                       'the results files, or each named MODEL=PATH')
    group.add_argument('--drift-permutations', type=int, default=None,
                       help='permutations of the CKA correlation test (default 100000)')


def group_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Read and merge the groupings (``args.groupings``: None without any) and the drift
    files (``args.drift_paths``: a list by order, a dict by name, or None); argparse
    errors for bad input. Model names are checked by the comparison."""
    from reobench_mm.analysis.groups import parse_group_spec, read_groups_file
    groupings = {}
    try:
        for path in args.groups:
            for name, mapping in read_groups_file(path).items():
                if name in groupings:
                    parser.error(f'grouping {name!r} is given twice')
                groupings[name] = mapping
        for text in args.group:
            name, mapping = parse_group_spec(text)
            if name in groupings:
                parser.error(f'grouping {name!r} is given twice')
            groupings[name] = mapping
    except ValueError as error:
        parser.error(str(error))
    args.groupings = groupings or None
    args.drift_paths = None
    if args.drift:
        named = ['=' in d for d in args.drift]
        if any(named) and not all(named):
            parser.error('--drift takes either plain paths (in the order of the results) '
                         'or MODEL=PATH entries, not both')
        paths = [d.partition('=')[2] if all(named) else d for d in args.drift]
        for path in paths:
            if not osp.isfile(path):
                parser.error(f'no such drift file: {path}')
        args.drift_paths = dict(d.split('=', 1) for d in args.drift) if all(named) \
            else paths
    if args.drift_permutations < 1:
        parser.error(f'--drift-permutations must be >= 1, got {args.drift_permutations}')


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    from reobench_mm.analysis.compare import (compare_models, cross_model_markdown,
                                              write_cross_model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        comparison = compare_models(args.results, names=args.names,
                                    shift_paths=args.shift_results,
                                    shift_names=args.shift_names, space=args.space,
                                    n_bootstrap=args.bootstrap, seed=args.seed,
                                    common_conditions=args.common_conditions,
                                    paired=not args.no_paired,
                                    permutations=args.permutations, alpha=args.alpha,
                                    rank_options=args.rank_options,
                                    groups=args.groupings, drift_paths=args.drift_paths,
                                    drift_draws=args.drift_permutations)
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f'warning: {message}', file=sys.stderr)
    files = write_cross_model(comparison, args.out_dir, plots=not args.no_plots)
    sys.stdout.write(cross_model_markdown(comparison))
    from reobench_cli import print_written
    print_written(files.values())
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
