"""Representation drift: how far a backbone's features move under corruptions.

    python tools/analysis_tools/representation_drift.py CONFIG CHECKPOINT
        --corruptions NAME [NAME ...] [--protocol reobench] [--severities 1 3 5] [--seed 0]
        [--representation sample|token] [--pr-convention raw|centred] [--num-blocks 4]
        [--max-images N] [--tokens-per-image 256] [--images-per-minibatch 8]
        [--layers MODULE ...] [--work-dir DIR] [--cfg-options KEY=VALUE ...]

Writes ``representation_drift.json`` (per block and condition: linear CKA, its split-half
noise floor, cosine, participation ratio of clean and corrupted features) and
``representation_drift.png`` (CKA against severity, one panel per block) to WORK_DIR
(default ``work_dirs/representation_drift/<config stem>``). By default each image is one
row (its tokens mean-pooled); ``--representation token`` compares spatial tokens. See
:func:`reobench_mm.robustness.drift.representation_drift`.
"""
import argparse
import sys


def parse_args(argv=None) -> argparse.Namespace:
    from mmengine.config import DictAction

    from reobench_corruptions import PROTOCOLS
    from reobench_mm.evaluation.functional.representation import PR_CONVENTIONS
    from reobench_mm.robustness.drift import REPRESENTATIONS

    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description="Compare a backbone's features on clean and corrupted test images")
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file (loaded strictly)')
    parser.add_argument('--corruptions', nargs='+', required=True, metavar='NAME',
                        help="corruption names of --protocol ('clean' adds the "
                        'clean-vs-clean reference)')
    parser.add_argument('--protocol', default='reobench', choices=list(PROTOCOLS),
                        help='corruption protocol (default: reobench)')
    parser.add_argument('--severities', nargs='+', type=int, default=[1, 3, 5], metavar='K',
                        help='severities 0..5 (default: 1 3 5)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the corruption draws, the token positions and the '
                        'split-half floor')
    parser.add_argument('--representation', default='sample', choices=list(REPRESENTATIONS),
                        help='sample (default): one row per image, its tokens mean-pooled; '
                        'token: spatial tokens paired by position')
    parser.add_argument('--pr-convention', default='raw', choices=list(PR_CONVENTIONS),
                        help='participation ratio of the raw activation matrix (raw, '
                        'default) or of the feature covariance (centred)')
    parser.add_argument('--num-blocks', type=int, default=4,
                        help='evenly spaced backbone blocks/stages to compare')
    parser.add_argument('--max-images', type=int, help='use only the first N test images')
    parser.add_argument('--tokens-per-image', type=int,
                        help='token representation only: tokens kept per image and block '
                        '(default 256)')
    parser.add_argument('--images-per-minibatch', type=int,
                        help='token representation only: images whose tokens form one CKA '
                        'minibatch (default 8)')
    parser.add_argument('--layers', nargs='+', metavar='MODULE',
                        help='explicit module names (e.g. backbone.layer3) instead of the '
                        'automatic choice')
    parser.add_argument('--work-dir', help='output folder (default: '
                        'work_dirs/representation_drift/<config stem>)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, KEY=VALUE (lists: key="[a,b]")')
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    from reobench_mm.robustness.drift import (PLOT_FILE, RESULT_FILE, default_drift_work_dir,
                                              representation_drift)
    document = representation_drift(
        args.config, args.checkpoint, corruptions=args.corruptions,
        severities=args.severities, seed=args.seed, num_blocks=args.num_blocks,
        tokens_per_image=args.tokens_per_image, max_images=args.max_images,
        cfg_options=args.cfg_options, work_dir=args.work_dir, layers=args.layers,
        images_per_minibatch=args.images_per_minibatch, representation=args.representation,
        pr_convention=args.pr_convention, protocol=args.protocol)
    blocks = [block['name'] for block in document['blocks']]

    def row(label, values):
        print(label.ljust(24) + ''.join(f'{"n/a" if v is None else f"{v:.4f}":>20}'
                                        for v in values))

    print('condition'.ljust(24) + ''.join(f'{name[-18:]:>20}' for name in blocks))
    for condition in document['conditions']:
        row(condition['condition'], [condition['blocks'][name]['cka'] for name in blocks])
    first = document['conditions'][0]['blocks']
    row('split-half floor', [first[name]['cka_floor'] for name in blocks])
    work_dir = args.work_dir or default_drift_work_dir(args.config)
    print(f'linear CKA (clean vs corrupted, {args.representation} representation, protocol '
          f'{args.protocol}); written {RESULT_FILE} and {PLOT_FILE} to {work_dir}')


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
