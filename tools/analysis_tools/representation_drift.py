"""Representation drift: how far a backbone's features move under corruptions.

    python tools/analysis_tools/representation_drift.py CONFIG CHECKPOINT
        --corruptions NAME [NAME ...] [--protocol reobench] [--severities 1 3 5] [--seed 0]
        [--representation sample|token] [--pr-convention raw|centred] [--num-blocks 4]
        [--max-images N] [--tokens-per-image 256] [--images-per-minibatch 8]
        [--layers MODULE ...] [--work-dir DIR] [--cfg-options KEY=VALUE ...]
        [--drift-confidence | --no-drift-confidence]

Writes ``representation_drift.json`` (per block and condition: linear CKA, its split-half
noise floor, cosine, participation ratio of clean and corrupted features) and
``representation_drift.png`` (CKA against severity, one panel per block) to WORK_DIR
(default ``work_dirs/representation_drift/<config stem>``). By default each image is one
row (its tokens mean-pooled); ``--representation token`` compares spatial tokens. For a
segmentor it also runs the model's predictions and writes the drift–confidence coupling
(per condition: Spearman ρ of each image's final-layer drift with its confidence and with
its accuracy, the overconfident-drift fraction) into the JSON and ``drift_confidence.png``
(``--no-drift-confidence`` leaves it out). See
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
    parser.add_argument('--drift-confidence', dest='drift_confidence', action='store_true',
                        default=None,
                        help='drift–confidence coupling from the model\'s predictions '
                        '(default: on for segmentors, off for other models; '
                        '--drift-confidence refuses a model that is not a segmentor)')
    parser.add_argument('--no-drift-confidence', dest='drift_confidence',
                        action='store_false', help='leave the drift–confidence coupling out')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, KEY=VALUE (lists: key="[a,b]")')
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    from reobench_mm.robustness.drift import (COUPLING_PLOT_FILE, PLOT_FILE, RESULT_FILE,
                                              default_drift_work_dir, representation_drift)
    document = representation_drift(
        args.config, args.checkpoint, corruptions=args.corruptions,
        severities=args.severities, seed=args.seed, num_blocks=args.num_blocks,
        tokens_per_image=args.tokens_per_image, max_images=args.max_images,
        cfg_options=args.cfg_options, work_dir=args.work_dir, layers=args.layers,
        images_per_minibatch=args.images_per_minibatch, representation=args.representation,
        pr_convention=args.pr_convention, protocol=args.protocol,
        drift_confidence=args.drift_confidence)
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
    written = [RESULT_FILE, PLOT_FILE]
    coupling = document['settings']['drift_confidence']
    if coupling['enabled']:
        print_coupling(document)
        written.append(COUPLING_PLOT_FILE)
    elif coupling['not_computed']:
        print(f'drift–confidence coupling not computed: {coupling["not_computed"]}')
    print(f'linear CKA (clean vs corrupted, {args.representation} representation, protocol '
          f'{args.protocol}); written {", ".join(written)} to {work_dir}')


def print_coupling(document: dict) -> None:
    """The drift–confidence table: per condition Spearman ρ (p) of drift with confidence
    and with accuracy, the overconfident-drift fraction and the number of images."""
    def rho(stats):
        if stats['rho'] is None:
            return 'undefined'.rjust(20)
        p = 'n/a' if stats['p_value'] is None else f'{stats["p_value"]:.2g}'
        return f'{stats["rho"]:+.3f} (p {p})'.rjust(20)

    layer = document['settings']['drift_confidence']['layer']
    print(f'drift–confidence coupling (per image: L2 drift of the pooled {layer} '
          'representation; confidence and accuracy on its token grid)')
    print('condition'.ljust(24) + 'rho(drift,conf)'.rjust(20) + 'rho(drift,acc)'.rjust(20)
          + 'overconf. drift'.rjust(17) + 'n'.rjust(5))
    for condition in document['conditions']:
        values = condition['drift_confidence']
        fraction = values['overconfident_drift_fraction']
        print(condition['condition'].ljust(24) + rho(values['spearman_drift_confidence'])
              + rho(values['spearman_drift_accuracy'])
              + ('n/a' if fraction is None else f'{fraction:.4f}').rjust(17)
              + str(values['num_samples']).rjust(5))


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
