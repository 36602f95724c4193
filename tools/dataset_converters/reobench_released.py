"""Convert the moved labels of REOBench's released corrupted test sets and write a sweep
config that reads every condition from the files.

    python tools/dataset_converters/reobench_released.py {dior,potsdam} SRC
        [-o data/reobench_released/TASK] [--config CONFIG] [--label-format {dota,xml}]
        [--num-classes {5,6}] [--alias FOLDER=CORRUPTION ...]

SRC is the extracted DIOR_corrupted/ or Potsdam_corrupted/ folder (or the folder holding
it). Writes the converted labels of rotate, scale and translate under OUT and
OUT/corruption_files.py; with --config also OUT/<config stem>_released.py, which
tools/robustness_test.py runs. See reobench_mm.datasets.converters.reobench_released.
"""
import argparse
import os.path as osp
import sys


def parse_args() -> argparse.Namespace:
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('task', choices=('dior', 'potsdam'), help='which released set')
    parser.add_argument('src', help='extracted DIOR_corrupted/ or Potsdam_corrupted/ folder')
    parser.add_argument('-o', '--out-dir', default=None,
                        help='output root (default: data/reobench_released/TASK)')
    parser.add_argument('--config', default=None,
                        help='the model config to sweep: its test dataset decides the label '
                        'format and classes, and OUT/<stem>_released.py is written')
    parser.add_argument('--label-format', choices=('dota', 'xml'), default=None,
                        help='DIOR: DOTA text for DIORRDataset or DIOR-R XML for '
                        "DIORRXMLDataset and MMRotate's DIORDataset (default: what --config "
                        'reads, else dota)')
    parser.add_argument('--num-classes', type=int, choices=(5, 6), default=None,
                        help='Potsdam: 5 (clutter ignored, the released setting) or 6 '
                        '(default: what --config reads, else 5)')
    parser.add_argument('--alias', nargs='+', default=[], metavar='FOLDER=CORRUPTION',
                        help='further released folder names for corruptions')
    return parser.parse_args()


def _aliases(items):
    from reobench_corruptions import get_corruption
    aliases = {}
    for item in items:
        folder, sep, corruption = item.partition('=')
        if not sep or not folder or not corruption:
            raise ValueError(f'--alias takes FOLDER=CORRUPTION, got {item!r}')
        get_corruption(corruption, 'reobench')  # KeyError naming the valid ones
        aliases[folder] = corruption
    return aliases


def _settings(args):
    """label_format and num_classes: given, else the config's, else the defaults."""
    from reobench_mm.datasets.converters.reobench_released import config_label_settings
    found = config_label_settings(args.config, args.task) if args.config else {}
    chosen = dict(label_format=args.label_format, num_classes=args.num_classes)
    for key, value in found.items():
        if chosen[key] is not None and chosen[key] != value:
            flag = '--' + key.replace('_', '-')
            raise ValueError(f'{flag} {chosen[key]} does not fit {args.config}, whose test '
                             f'dataset reads {value}')
        chosen[key] = value
    return dict(label_format=chosen['label_format'] or 'dota',
                num_classes=chosen['num_classes'] or 5)


def main() -> None:
    args = parse_args()
    from reobench_mm.datasets.converters.reobench_released import (
        convert_reobench_release, write_released_sweep_config)
    if args.config and not osp.isfile(args.config):
        raise FileNotFoundError(f'config {args.config} does not exist')
    out_dir = args.out_dir or osp.join('data', 'reobench_released', args.task)
    summary = convert_reobench_release(args.src, out_dir, args.task, aliases=_aliases(args.alias),
                                       **_settings(args))
    for key, record in summary['conditions'].items():
        labels = f', {record["labels"]} label files' if 'labels' in record else ''
        print(f'{key} ({record["folder"]}): {record["images"]} images{labels}')
        if record.get('skipped_objects'):
            print(f'  objects of unknown classes left out: {record["skipped_objects"]}')
        if record.get('labels_without_image'):
            print(f'  label files without an image, left out: '
                  f'{len(record["labels_without_image"])}')
    print('read from files: ' + (', '.join(summary['complete']) or 'none'))
    files = summary['files']
    if args.config:
        files.append(write_released_sweep_config(args.config, summary['corruption_files'],
                                                 out_dir))
        print(f'sweep: .venv/bin/python tools/robustness_test.py {files[-1]} CHECKPOINT')
    print('wrote ' + ', '.join(files))
    if summary['unknown']:
        print(f'folders of no known corruption left out: {summary["unknown"]} '
              '(--alias FOLDER=CORRUPTION names one)', file=sys.stderr)
    if summary['incomplete']:
        for corruption, lacks in summary['incomplete'].items():
            print(f'incomplete, synthesised instead: {corruption}: {"; ".join(lacks)}',
                  file=sys.stderr)
        sys.exit(1)


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
