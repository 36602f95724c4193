"""Representation drift: how far a backbone's features move under corruptions.

    python tools/analysis_tools/representation_drift.py CONFIG CHECKPOINT
        --corruptions NAME [NAME ...] [--severities 1 3 5] [--seed 0] [--num-blocks 4]
        [--tokens-per-image 256] [--max-images N] [--layers MODULE ...] [--work-dir DIR]
        [--cfg-options KEY=VALUE ...]

Writes ``representation_drift.json`` (per block and condition: linear CKA, token-wise
cosine, participation ratio of clean and corrupted features) and
``representation_drift.png`` (CKA against severity, one panel per block) to WORK_DIR
(default ``work_dirs/representation_drift/<config stem>``). See
:func:`reobench_mm.robustness.drift.representation_drift`.
"""
import argparse


def parse_args(argv=None) -> argparse.Namespace:
    from mmengine.config import DictAction

    parser = argparse.ArgumentParser(
        description="Compare a backbone's features on clean and corrupted test images")
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file (loaded strictly)')
    parser.add_argument('--corruptions', nargs='+', required=True, metavar='NAME',
                        help="corruption names ('clean' adds the clean-vs-clean reference)")
    parser.add_argument('--severities', nargs='+', type=int, default=[1, 3, 5], metavar='K',
                        help='severities 0..5 (default: 1 3 5)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the corruption draws and of the token positions')
    parser.add_argument('--num-blocks', type=int, default=4,
                        help='evenly spaced backbone blocks/stages to compare')
    parser.add_argument('--tokens-per-image', type=int, default=256,
                        help='tokens kept per image and block')
    parser.add_argument('--max-images', type=int, help='use only the first N test images')
    parser.add_argument('--images-per-minibatch', type=int, default=8,
                        help='images whose tokens form one CKA minibatch')
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
        images_per_minibatch=args.images_per_minibatch)
    blocks = [block['name'] for block in document['blocks']]
    print('condition'.ljust(24) + ''.join(f'{name[-18:]:>20}' for name in blocks))
    for condition in document['conditions']:
        values = [condition['blocks'][name]['cka'] for name in blocks]
        print(condition['condition'].ljust(24)
              + ''.join(f'{"n/a" if v is None else f"{v:.4f}":>20}' for v in values))
    work_dir = args.work_dir or default_drift_work_dir(args.config)
    print(f'linear CKA (clean vs corrupted); written {RESULT_FILE} and {PLOT_FILE} to '
          f'{work_dir}')


if __name__ == '__main__':
    main()
