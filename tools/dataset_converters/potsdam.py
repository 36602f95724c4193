"""Cut the official ISPRS Potsdam release into 512x512 patches for MMSegmentation.

    python tools/dataset_converters/potsdam.py SRC [-o data/potsdam] [--eroded]
        [--modality {rgb,irrg}] [--num-classes {6,5}] [--patch-size 512] [--nproc 8]
        [--overwrite]

SRC holds 2_Ortho_RGB.zip (or 3_Ortho_IRRG.zip) and 5_Labels_all.zip (or, with
--eroded, 5_Labels_all_noBoundary.zip), as zips or extracted folders. Writes
img_dir/{train,val} and ann_dir/{train,val} (24 train / 14 test tiles, 144 patches each).
See reobench_mm.datasets.converters.potsdam.
"""
import argparse
import os.path as osp
import sys


def parse_args() -> argparse.Namespace:
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('src', help='folder with the official zips or extracted folders')
    parser.add_argument('-o', '--out-dir', default=osp.join('data', 'potsdam'),
                        help='output root (default: data/potsdam)')
    parser.add_argument('--eroded', action='store_true',
                        help='use the eroded labels (5_Labels_all_noBoundary) instead of the '
                        'full ones (5_Labels_all, used for non-eroded evaluation)')
    parser.add_argument('--modality', choices=('rgb', 'irrg'), default='rgb',
                        help='image product: 2_Ortho_RGB or 3_Ortho_IRRG')
    parser.add_argument('--num-classes', type=int, choices=(6, 5), default=6,
                        help='5 writes clutter as ignore (0), as in the RVSA recipe')
    parser.add_argument('--patch-size', type=int, default=512)
    parser.add_argument('--tile-size', type=int, default=6000,
                        help='expected tile side; 0 accepts any size')
    parser.add_argument('--nproc', type=int, default=1, help='worker processes')
    parser.add_argument('--overwrite', action='store_true',
                        help='rewrite existing patches (by default a rerun completes an '
                        'interrupted one)')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    from reobench_mm.datasets.converters.potsdam import convert_potsdam
    summary = convert_potsdam(args.src, args.out_dir, eroded=args.eroded,
                              modality=args.modality, num_classes=args.num_classes,
                              patch_size=args.patch_size, tile_size=args.tile_size or None,
                              nproc=args.nproc, overwrite=args.overwrite)
    for split, count in summary['patches'].items():
        print(f'{split}: {len(summary["tiles"][split])} tiles, {count} patches')
    print(f'{summary["written"]} patch pairs written to {args.out_dir}')
    if summary['unknown_pixels']:
        print('pixels of non-class colours (written as ignore): '
              + ', '.join(f'{t}: {n}' for t, n in sorted(summary['unknown_pixels'].items())))
    if summary['missing']:
        print(f'incomplete: {len(summary["missing"])} tile(s) missing (listed above); add '
              'them and run the same command again', file=sys.stderr)
        sys.exit(1)


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
