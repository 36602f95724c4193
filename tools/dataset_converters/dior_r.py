"""Convert DIOR-R (DIOR images + oriented XML) to DOTA-style annotations for MMRotate.

    python tools/dataset_converters/dior_r.py SRC [-o data/dior_r]
        [--splits trainval test] [--images {symlink,copy,none}] [--nproc 8]

SRC is the extracted release: JPEGImages-trainval/, JPEGImages-test/,
Annotations/Oriented Bounding Boxes/*.xml and ImageSets/Main/{trainval,test}.txt.
Writes {split}/annfiles/*.txt, {split}/images/ and {split}.txt; read them with
dataset type 'DIORRDataset'. See reobench_mm.datasets.converters.dior_r.
"""
import argparse
import os.path as osp
import sys


def parse_args() -> argparse.Namespace:
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('src', help='extracted DIOR / DIOR-R release')
    parser.add_argument('-o', '--out-dir', default=osp.join('data', 'dior_r'),
                        help='output root (default: data/dior_r)')
    parser.add_argument('--splits', nargs='+', default=['trainval', 'test'],
                        help='split lists of ImageSets/Main to convert')
    parser.add_argument('--images', choices=('symlink', 'copy', 'none'), default='symlink',
                        help='how images reach {split}/images (none: use the source folders)')
    parser.add_argument('--nproc', type=int, default=1, help='worker processes')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    from reobench_mm.datasets.converters.dior_r import convert_dior_r
    summary = convert_dior_r(args.src, args.out_dir, splits=args.splits, images=args.images,
                             nproc=args.nproc)
    for split in args.splits:
        print(f'{split}: {summary["images"][split]} images, {summary["objects"][split]} '
              'objects')
    if summary['skipped_objects']:
        print(f'objects of unknown classes left out: {summary["skipped_objects"]}')
    if summary['missing']:
        count = sum(len(ids) for ids in summary['missing'].values())
        print(f'incomplete: {count} image(s) left out for lack of files (listed above)',
              file=sys.stderr)
        sys.exit(1)


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
