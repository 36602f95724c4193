"""Per-band statistics of multispectral rasters, for a config's normalisation.

    python tools/analysis_tools/band_statistics.py RASTER|FOLDER ... [--bands B02 B03 ...]
        [--band-names sentinel2 | --band-names NAME ...] [--nodata 0] [--percentiles 2 98]
        [--max-samples-per-file N] [--seed 0] [--out band_statistics.json]

Reads the rasters (a folder: its .tif and .tiff files) as LoadMultiBandImageFromFile does
(the same band selection and nodata rules; --bands takes 1-based indices and names) and
writes each band's valid-pixel count, mean, population std, range and percentiles as
JSON, then prints them and the ``data_preprocessor=dict(mean=[...], std=[...])`` line for
a config. Integer rasters of up to 16 bits give exact numbers; for float rasters the
percentiles are exact while every file has at most --max-samples-per-file pixels (the
JSON says which: exact_percentiles). Library:
reobench_mm.datasets.band_statistics.band_statistics.
"""
import argparse
import os
import os.path as osp
import sys
from typing import List, Optional

# --help imports none of the package (its import loads torch and the toolboxes): the
# statistics module is imported once the arguments are parsed

RASTER_SUFFIXES = ('.tif', '.tiff')


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description='per-band mean, std and percentiles of multispectral rasters')
    parser.add_argument('rasters', nargs='+',
                        help='raster files, or folders whose .tif/.tiff files are read')
    parser.add_argument('--bands', nargs='+',
                        help='bands to describe, in this order: 1-based indices or names '
                        '(default: every band, in file order)')
    parser.add_argument('--band-names', nargs='+',
                        help="the names of every band of the files, in file order; "
                        "'sentinel2' for B01 ... B12 with B8A (default: the files' band "
                        'descriptions)')
    parser.add_argument('--nodata', type=float,
                        help="the nodata value, overriding the files' own ('nan' for NaN; "
                        "default: the files' nodata value or mask)")
    parser.add_argument('--percentiles', nargs='*', type=float, default=[2.0, 98.0],
                        help='percentiles to find, each in [0, 100] (default: 2 98)')
    parser.add_argument('--max-samples-per-file', type=int, default=1 << 22,
                        help='float rasters: pixels per file kept for the percentiles; '
                        'larger files are sampled (default %(default)s)')
    parser.add_argument('--seed', type=int, default=0, help='seed of that sample')
    parser.add_argument('--out', default='work_dirs/band_statistics.json',
                        help='JSON output file (default: %(default)s)')
    return parser


def raster_files(parser: argparse.ArgumentParser, given: List[str]) -> List[str]:
    """The files named, folders replaced by their raster files (sorted)."""
    files = []
    for path in given:
        if osp.isdir(path):
            found = sorted(osp.join(path, name) for name in os.listdir(path)
                           if name.lower().endswith(RASTER_SUFFIXES))
            if not found:
                parser.error(f'folder {path} holds no {"/".join(RASTER_SUFFIXES)} files')
            files.extend(found)
        elif osp.isfile(path):
            files.append(path)
        else:
            parser.error(f'{path} does not exist')
    return files


def parse_args(parser: argparse.ArgumentParser,
               argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse and check the arguments (argparse errors for bad input)."""
    args = parser.parse_args(argv)
    args.files = raster_files(parser, args.rasters)
    if any(not 0 <= q <= 100 for q in args.percentiles):
        parser.error(f'--percentiles must lie in [0, 100], got {args.percentiles}')
    if args.max_samples_per_file < 1:
        parser.error(f'--max-samples-per-file must be >= 1, got {args.max_samples_per_file}')
    if args.seed < 0:
        parser.error(f'--seed must be >= 0, got {args.seed}')
    if args.bands is not None:
        args.bands = [int(b) if b.isdigit() else b for b in args.bands]
    return args


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    from reobench_mm.datasets.band_statistics import band_statistics
    from reobench_mm.fileio import dump_json_atomic
    from reobench_mm.transforms.raster_loading import SENTINEL2_BANDS
    names = list(SENTINEL2_BANDS) if args.band_names == ['sentinel2'] else args.band_names
    result = band_statistics(args.files, bands=args.bands, band_names=names,
                             nodata=args.nodata, percentiles=args.percentiles,
                             max_samples_per_file=args.max_samples_per_file, seed=args.seed)
    if osp.dirname(args.out):
        os.makedirs(osp.dirname(args.out), exist_ok=True)
    dump_json_atomic(result.as_dict(), args.out)
    print(f'{len(result.files)} files, {result.dtype}; percentiles from '
          f'{result.percentile_method}')
    for band in result.bands:
        shown = ', '.join(f'p{q:g} {v:.6g}' for q, v in band.percentiles.items())
        print(f'band {band.index} ({band.name or "unnamed"}): {band.count} pixels, mean '
              f'{band.mean:.6g}, std {band.std:.6g}, range {band.minimum:g}..'
              f'{band.maximum:g}{"; " + shown if shown else ""}')
    print(f'\n{result.data_preprocessor()}\n\nWritten: {args.out}')
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
