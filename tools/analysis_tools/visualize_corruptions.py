"""Preview every corruption x severity on one image.

    python tools/analysis_tools/visualize_corruptions.py IMAGE [--ann FILE] [--protocol reobench]
        [--corruptions NAMES ...] [--seed 0] [--view crop|whole]
        [--crop-size 128 | --crop-size W H] [--crop-origin X Y] [--tile-size 160]
        [--ann-alpha 0.2] [--out grid.png]

Rows are corruptions (names and groups accepted), columns clean + severities 1..5. Each
corruption is applied to the whole image. By default (``--view crop``) every tile is a
crop of the result at real size, one image pixel to one grid pixel (``--crop-size``,
default 128, clipped to the image; ``--crop-origin``, the top-left pixel, default
centred), so that noise, blur and compression artefacts show as they are.
``--view whole`` shows the whole image instead, downscaled to tiles of ``--tile-size``
pixels (default 160).

``--ann`` overlays labels: a Potsdam label map (.png, converter ids; class colours at
``--ann-alpha`` over the image, class boundaries at full colour), a DIOR-R XML (.xml,
robndbox corners) or a DOTA text file (.txt, x1 y1 ... x4 y4 class difficult; both as red
outlines). Geometric corruptions move the labels with the pixels. The format follows the
suffix of ``--out``: PNG is lossless, a ``.jpg`` is written at quality 95 without chroma
subsampling, so that single-pixel noise survives.
"""
import argparse
import os.path as osp
import sys
import xml.etree.ElementTree as ET

import cv2
import numpy as np

from reobench_corruptions import resolve_corruptions
from reobench_corruptions.preview import (DEFAULT_CROP_SIZE, DEFAULT_OVERLAY_ALPHA,
                                          DEFAULT_TILE_SIZE, VIEWS, corruption_grid,
                                          tile_view)

CORNER_KEYS = ('left_top', 'right_top', 'right_bottom', 'left_bottom')
# a .jpg grid keeps single-pixel colour detail: quality 95, no chroma subsampling
JPEG_PARAMS = [cv2.IMWRITE_JPEG_QUALITY, 95, cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
               cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444]


def read_polygons(path: str) -> np.ndarray:
    """Box corners ``(N, 8)`` from a DIOR-R XML or a DOTA text file."""
    if path.endswith('.xml'):
        rows = []
        for obj in ET.parse(path).getroot().findall('object'):
            box = obj.find('robndbox')
            if box is not None:
                rows.append([float(box.find(f'{a}_{k}').text) for k in CORNER_KEYS
                             for a in 'xy'])
        return np.array(rows, np.float64).reshape(-1, 8)
    with open(path, encoding='utf-8') as handle:
        rows = [line.split()[:8] for line in handle if len(line.split()) >= 9]
    return np.array(rows, np.float64).reshape(-1, 8)


def parse_args() -> argparse.Namespace:
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(description='grid of corruptions x severities')
    parser.add_argument('image')
    parser.add_argument('--ann', help='Potsdam label .png, DIOR-R .xml or DOTA .txt')
    parser.add_argument('--protocol', default='reobench',
                        choices=['reobench', 'geofm_calibration'])
    parser.add_argument('--corruptions', nargs='+', default=['all'],
                        help='names or groups (all, environmental, sensor, geometric, '
                        'appearance)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--view', choices=VIEWS, default='crop',
                        help='crop: a crop of each tile at real size (default); whole: '
                        'the whole image, downscaled')
    parser.add_argument('--crop-size', type=int, nargs='+', metavar='N',
                        help='--view crop: side of the crop, or WIDTH HEIGHT, in image '
                        f'pixels (default {DEFAULT_CROP_SIZE}; clipped to the image)')
    parser.add_argument('--crop-origin', type=int, nargs=2, metavar=('X', 'Y'),
                        help='--view crop: top-left pixel of the crop (default: centred)')
    parser.add_argument('--tile-size', type=int,
                        help='--view whole: longer side of a tile in grid pixels '
                        f'(default {DEFAULT_TILE_SIZE})')
    parser.add_argument('--ann-alpha', type=float, default=DEFAULT_OVERLAY_ALPHA,
                        help='weight of the label-map colours over the image, 0..1 '
                        f'(default {DEFAULT_OVERLAY_ALPHA}; 0: class boundaries only)')
    parser.add_argument('--out', default='corruption_grid.png')
    return parser.parse_args()


def view_options(args: argparse.Namespace) -> dict:
    """The view arguments of :func:`corruption_grid`; an option of the other view is
    refused."""
    if not 0.0 <= args.ann_alpha <= 1.0:
        raise ValueError(f'--ann-alpha must be in [0, 1] (0: class boundaries only), got '
                         f'{args.ann_alpha}')
    if args.view == 'crop':
        if args.tile_size is not None:
            raise ValueError('--tile-size sets the tiles of --view whole; the real-size '
                             'crop of --view crop is sized by --crop-size')
        if args.crop_size is not None and len(args.crop_size) > 2:
            raise ValueError(f'--crop-size takes one number (a square) or WIDTH HEIGHT, got '
                             f'{len(args.crop_size)} numbers')
        size = None if args.crop_size is None else (
            args.crop_size[0] if len(args.crop_size) == 1 else tuple(args.crop_size))
        return dict(view='crop', crop_size=size, crop_origin=args.crop_origin)
    if args.crop_size is not None or args.crop_origin is not None:
        raise ValueError('--crop-size and --crop-origin set the crop of --view crop; '
                         '--view whole is sized by --tile-size')
    return dict(view='whole', tile_size=args.tile_size)


def main() -> None:
    args = parse_args()
    from reobench_mm.fileio import atomic_write_bytes
    options = view_options(args)
    if not osp.isfile(args.image):  # before OpenCV, which would print a warning of its own
        raise OSError(f'cannot read image {args.image} (no such file)')
    image = cv2.imread(args.image, cv2.IMREAD_COLOR)
    if image is None:
        raise OSError(f'cannot read image {args.image} (missing, or not an image OpenCV reads)')
    image = image[..., ::-1].copy()
    label_map = polygons = None
    if args.ann:
        if not osp.isfile(args.ann):
            raise FileNotFoundError(f'annotation file {args.ann} does not exist')
        if args.ann.endswith('.png'):
            label_map = cv2.imread(args.ann, cv2.IMREAD_UNCHANGED)
            if label_map is None or label_map.shape != image.shape[:2]:
                raise ValueError(f'{args.ann} is not a label map of the image size')
        elif args.ann.endswith(('.xml', '.txt')):
            polygons = read_polygons(args.ann)
        else:
            raise ValueError('--ann must be a .png label map, a DIOR-R .xml or a DOTA .txt')
    names = resolve_corruptions(args.corruptions, args.protocol)
    shown = tile_view(image.shape, **options)  # checked before the corruptions run
    grid = corruption_grid(image, args.protocol, names, seed=args.seed,
                           key=osp.basename(args.image), label_map=label_map,
                           polygons=polygons, overlay_alpha=args.ann_alpha, **options)
    suffix = osp.splitext(args.out)[1] or '.png'
    encoded, data = cv2.imencode(suffix, np.ascontiguousarray(grid[..., ::-1]),
                                 JPEG_PARAMS if suffix.lower() in ('.jpg', '.jpeg') else [])
    if not encoded:
        raise ValueError(f'cannot encode the grid as {suffix} for {args.out}')
    atomic_write_bytes(args.out, data.tobytes())
    print(f'wrote {args.out} ({len(names)} corruptions x clean + 5 severities; '
          f'{shown.describe()[1]}; {grid.shape[1]}x{grid.shape[0]} pixels)')


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
