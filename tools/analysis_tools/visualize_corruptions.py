"""Preview every corruption x severity on one image.

    python tools/analysis_tools/visualize_corruptions.py IMAGE [--ann FILE] [--protocol reobench]
        [--corruptions NAMES ...] [--seed 0] [--tile-size 160] [--out grid.png]

``--ann`` overlays labels: a Potsdam label map (.png, converter ids), a DIOR-R XML
(.xml, robndbox corners) or a DOTA text file (.txt, x1 y1 ... x4 y4 class difficult).
Rows are corruptions (names and groups accepted), columns clean + severities 1..5.
"""
import argparse
import os.path as osp
import sys
import xml.etree.ElementTree as ET

import cv2
import numpy as np

from reobench_mm.corruptions import resolve_corruptions
from reobench_mm.corruptions.preview import corruption_grid
from reobench_mm.fileio import atomic_write_bytes

CORNER_KEYS = ('left_top', 'right_top', 'right_bottom', 'left_bottom')


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
    from reobench_mm.utils.cli import ToolArgumentParser

    parser = ToolArgumentParser(description='grid of corruptions x severities')
    parser.add_argument('image')
    parser.add_argument('--ann', help='Potsdam label .png, DIOR-R .xml or DOTA .txt')
    parser.add_argument('--protocol', default='reobench',
                        choices=['reobench', 'geofm_calibration'])
    parser.add_argument('--corruptions', nargs='+', default=['all'],
                        help='names or groups (all, environmental, sensor, geometric, '
                        'appearance)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--tile-size', type=int, default=160)
    parser.add_argument('--out', default='corruption_grid.png')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
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
    grid = corruption_grid(image, args.protocol, names, seed=args.seed,
                           key=osp.basename(args.image), tile_size=args.tile_size,
                           label_map=label_map, polygons=polygons)
    suffix = osp.splitext(args.out)[1] or '.png'
    encoded, data = cv2.imencode(suffix, np.ascontiguousarray(grid[..., ::-1]))
    if not encoded:
        raise ValueError(f'cannot encode the grid as {suffix} for {args.out}')
    atomic_write_bytes(args.out, data.tobytes())
    print(f'wrote {args.out} ({len(names)} corruptions x clean + 5 severities)')


if __name__ == '__main__':
    from reobench_mm.utils.cli import run_tool
    sys.exit(run_tool(main))
