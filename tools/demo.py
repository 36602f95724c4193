"""The main job on the embedded synthetic data (``make demo``).

Generate the demo data (skipped when present and identical), train the tiny UperNet on
the synthetic Potsdam tiles and the tiny Oriented R-CNN on the synthetic DIOR-R scenes
(each reused when its checkpoint exists), then run the robustness sweep for each: clean
and every corruption × severity (default: the 12 REOBench corruptions × 5 severities),
with per-class scores and calibration (for segmentation also with a temperature fitted
on the clean pixels of 2 held-out test images, which are then not evaluated) and one real
shift: a shifted test set of each task (near-infrared/red/green at twice the ground
sampling distance for the tiles, an arid palette at twice the distance for the scenes)
evaluated as a condition of the same sweep, and for detection the shifted scenes once
more through a DOTA-style class map (vehicle ignored), with its like-for-like drop.
Prints the paper-layout table and the ID -> OOD rows of each task and the path of its
``report.md``. A rerun reuses the models and the finished conditions.

    python tools/demo.py [--data-root data/demo] [--work-dir work_dirs/demo]
                         [--iters N] [--det-iters N] [--corruptions NAME|GROUP ...]
                         [--severities K ...] [--seed 0] [--no-calibration] [--retrain]
"""
import argparse
import copy
import json
import os.path as osp
import sys
import time
import warnings
from typing import NamedTuple

from mmengine.config import Config
from mmengine.runner import Runner

from reobench_mm.analysis.result_blocks import block_console_lines
from reobench_mm.analysis.results_file import read_results
from reobench_mm.analysis.tables import paper_table_lines
from reobench_mm.datasets.synthetic import (DEMO_POTSDAM_TEST, SYNTHETIC_DATA_VERSION,
                                            make_demo_data, tree_digest)
from reobench_mm.datasets.synthetic_shift import (SHIFTED_DATA_VERSION, SHIFTED_SETS,
                                                  write_shifted_demo_data)
from reobench_mm.engine import release_dataloader_workers, rescale_iter_schedule
from reobench_mm.evaluation.keys import ROTATED_DETECTION, SEGMENTATION, get_task
from reobench_mm.robustness.plan import select_corruptions, select_severities
from reobench_mm.errors import SweepError
from reobench_mm.robustness.sweep import FingerprintMismatchError, RobustnessSweep

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SEG_CONFIG = osp.join(ROOT, 'configs', 'demo',
                      'upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py')
DET_CONFIG = osp.join(ROOT, 'configs', 'demo',
                      'oriented-rcnn-le90_r18-tiny_fpn_1xb2-600i_demo-dior-256x256.py')


def parse_args() -> argparse.Namespace:
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(description='reobench_mm demo on synthetic data')
    parser.add_argument('--data-root', default='data/demo')
    parser.add_argument('--work-dir', default='work_dirs/demo')
    parser.add_argument('--iters', type=int, default=None,
                        help="segmentation training iterations (default: the config's, 600)")
    parser.add_argument('--det-iters', type=int, default=300,
                        help='detection training iterations (default 300)')
    parser.add_argument('--corruptions', nargs='+', default=['all'], metavar='NAME',
                        help='corruption names or groups of the sweep (default: all 12)')
    parser.add_argument('--severities', nargs='+', type=int, default=[1, 2, 3, 4, 5],
                        metavar='K', help='severities of the sweep (default 1-5)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--no-calibration', action='store_true',
                        help='no calibration metrics and no temperature scaling')
    parser.add_argument('--retrain', action='store_true',
                        help='train again (and evaluate again) even if a checkpoint exists')
    args = parser.parse_args()
    for option in ('iters', 'det_iters'):
        value = getattr(args, option)
        if value is not None and value < 1:
            parser.error(f"--{option.replace('_', '-')} must be >= 1, got {value}")
    try:
        args.corruptions = select_corruptions(args.corruptions)
        args.severities = select_severities(args.severities)
    except SweepError as err:
        parser.error(str(err))
    return args


def ensure_demo_data(root: str, seed: int) -> bool:
    """Generate the demo data unless ``root`` already holds exactly it.

    Returns:
        True if the data was (re)generated.
    """
    stamp = osp.join(root, 'digest.json')
    wanted = {'seed': seed, 'version': SYNTHETIC_DATA_VERSION,
              'shifted_version': SHIFTED_DATA_VERSION, 'potsdam_test': DEMO_POTSDAM_TEST}
    if osp.isfile(stamp):
        with open(stamp) as f:
            recorded = json.load(f)
        digest = recorded.pop('digest', None)
        if recorded == wanted and digest == _digest(root):
            print(f'[demo] data: reusing {root} (seed {seed})')
            return False
    start = time.time()
    print(f'[demo] data: generating synthetic Potsdam and DIOR-R scenes in {root} ...')
    counts = make_demo_data(root, seed=seed)
    counts.update(write_shifted_demo_data(root, seed=seed))
    with open(stamp, 'w') as f:
        json.dump(dict(wanted, digest=_digest(root)), f)
    print(f'[demo] data: {counts} in {time.time() - start:.1f}s')
    return True


def _digest(root: str) -> str:
    return '|'.join(tree_digest(osp.join(root, name))
                    for name in ('potsdam', 'dior', *SHIFTED_SETS))


class DemoTask(NamedTuple):
    task: str  # SEGMENTATION or ROTATED_DETECTION
    config: str
    data_subdir: str  # under --data-root
    work_subdir: str  # under --work-dir
    shift_subdir: str  # the shifted test set, under --data-root
    shift_type: str

    @property
    def name(self) -> str:
        """The task as the reports write it (``'segmentation'``, ``'detection'``)."""
        return get_task(self.task).results_name


#: Test images held out (seeded, stratified) for the segmentation temperature.
DEMO_TEMPERATURE_SPLIT = 2

TASKS = (
    DemoTask(SEGMENTATION, SEG_CONFIG, 'potsdam', 'seg', 'potsdam_shifted', 'sensor'),
    DemoTask(ROTATED_DETECTION, DET_CONFIG, 'dior', 'det', 'dior_shifted', 'scale'),
)


#: The detection demo's mapped shift set: the shifted DIOR-R set read as a DOTA-labelled
#: source would be (a DOTA -> DIOR-R pair on the demo data).
DOTA_STYLE_SET = 'dior_shifted_dota-classes'


def dota_style_shift(dataset: dict) -> dict:
    """The shifted DIOR-R set as DOTA's label set sees it (``source`` shift): the DIOR-R
    classes DOTA has, one to one (the shipped ``dior_r_to_dota`` map of
    ``configs/_base_/shifts/dior-r_dota.py``); DIOR-R's vehicle (DOTA splits it into small
    and large) and the classes DOTA lacks ignored (of the demo's four classes: vehicle).
    The model's ID number over all classes then is not comparable, and the demo prints
    the like-for-like one beside it."""
    base = Config.fromfile(osp.join(ROOT, 'configs', '_base_', 'shifts', 'dior-r_dota.py'))
    classes = (dataset.get('metainfo') or {}).get('classes') or base.dior_r_classes
    mapping = {c: (c if base.dior_r_to_dota[c] is not None else None) for c in classes}
    return dict(shift_type='source', dataset=dict(
        type='ClassMappedDataset', mapping=mapping, dataset=copy.deepcopy(dataset)))


def train_or_reuse(task: DemoTask, args: argparse.Namespace, data_changed: bool):
    """Train the tiny model of ``task`` unless its checkpoint exists; returns
    ``(checkpoint, trained now)``."""
    cfg = Config.fromfile(task.config)
    cfg.work_dir = osp.join(args.work_dir, task.work_subdir)
    cfg.randomness = dict(seed=args.seed, deterministic=False)
    cfg.log_level = 'WARNING'
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = osp.join(args.data_root, task.data_subdir)
    iters = (args.iters if task.task == SEGMENTATION else args.det_iters) \
        or cfg.train_cfg.max_iters
    rescale_iter_schedule(cfg, iters)
    checkpoint = osp.join(cfg.work_dir, f'iter_{iters}.pth')
    if args.retrain or data_changed or not osp.isfile(checkpoint):
        print(f'[demo] {task.name}: training the tiny model for {iters} iterations '
              f'(config {osp.relpath(task.config, ROOT)})')
        start = time.time()
        runner = Runner.from_cfg(copy.deepcopy(cfg))
        try:
            runner.train()
        finally:  # at once: the garbage collector would wait 5 s for each worker
            release_dataloader_workers(runner)
        print(f'[demo] {task.name}: trained in {time.time() - start:.0f}s -> {checkpoint}')
        return checkpoint, True
    print(f'[demo] {task.name}: reusing {checkpoint} (--retrain to train again)')
    return checkpoint, False


def run_task(task: DemoTask, args: argparse.Namespace, data_changed: bool) -> str:
    """Train (or reuse) the model of one task and sweep it; returns the results.json."""
    checkpoint, trained = train_or_reuse(task, args, data_changed)
    data_root = osp.join(args.data_root, task.data_subdir)
    options = {'log_level': 'WARNING', 'test_dataloader.dataset.data_root': data_root,
               'val_dataloader.dataset.data_root': data_root}
    calibration = not args.no_calibration
    # the demo's test set is its validation set: the temperature comes from a held-out
    # split of it, which is then not evaluated
    scaled = calibration and task.task == SEGMENTATION

    # the shifted set: the test dataset of the config at another data root (its pipeline
    # is the test pipeline)
    shift_set = Config.fromfile(task.config).test_dataloader.dataset.to_dict()
    shift_set.pop('pipeline')
    shift_set['data_root'] = osp.join(args.data_root, task.shift_subdir)
    shifts = {task.shift_subdir: dict(shift_type=task.shift_type, dataset=shift_set)}
    if task.task == ROTATED_DETECTION:
        shifts[DOTA_STYLE_SET] = dota_style_shift(shift_set)

    def make_sweep(force: bool) -> RobustnessSweep:
        return RobustnessSweep(
            task.config, checkpoint, corruptions=args.corruptions, severities=args.severities,
            seed=args.seed, work_dir=osp.join(args.work_dir, task.work_subdir, 'robustness'),
            cfg_options=options, force=force, calibration=calibration,
            temperature_scaling=scaled,
            temperature_split=DEMO_TEMPERATURE_SPLIT if scaled else None, shifts=shifts)

    sweep = make_sweep(force=trained)
    count = len(sweep.conditions)
    print(f'[demo] {task.name}: robustness sweep over {count} conditions (clean + '
          f'{len(args.corruptions)} corruptions x {len(args.severities)} severities + '
          f'the shifted test set{"s" if len(shifts) > 1 else ""} {", ".join(shifts)})')
    sys.stdout.flush()
    try:
        outcome = sweep.run()
    except FingerprintMismatchError as error:  # e.g. the code or the data changed
        print(f'[demo] {task.name}: the finished conditions were computed from other inputs '
              f'(the {", ".join(error.parts)} changed); evaluating them again')
        outcome = make_sweep(force=True).run()
    print(f'[demo] {task.name}: {len(outcome.evaluated)} conditions evaluated, '
          f'{len(outcome.skipped)} reused, {outcome.wall_seconds:.0f}s')
    return outcome.report_files['results.json']


def main() -> None:
    args = parse_args()
    # two warnings MMDetection/MMRotate print for every test batch of a rotated detector
    for message in ('The `clip` function does nothing in `RotatedBoxes`',
                    'Creating a tensor from a list of numpy.ndarrays is extremely slow'):
        warnings.filterwarnings('ignore', message=message)
    start = time.time()
    data_changed = ensure_demo_data(args.data_root, args.seed)
    reports = {}
    for task in TASKS:
        reports[task.name] = run_task(task, args, data_changed)
    print(f'[demo] done in {time.time() - start:.0f}s. Paper-layout tables (mean over '
          f'severities {", ".join(map(str, args.severities))}; ΔTP = Clean - Avg; '
          'ECE row: clean, per corruption, Avg, Avg - Clean):')
    for name, results_json in reports.items():
        print(f'\n  {name}:')
        summary = read_results(results_json).summary
        for line in paper_table_lines(summary):
            print('    ' + line)
        for line in block_console_lines(summary.blocks):
            print('    ' + line)
        print(f"    report: {osp.join(osp.dirname(results_json), 'report.md')}")


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
