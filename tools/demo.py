"""The main job on the embedded synthetic data (``make demo``).

Generate the demo data (skipped when present and identical), train the tiny UperNet on
the synthetic Potsdam tiles and the tiny Oriented R-CNN on the synthetic DIOR-R scenes
(each reused when its checkpoint exists), evaluate each on the clean test images and
under one corruption, and print both metrics.

    python tools/demo.py [--data-root data/demo] [--work-dir work_dirs/demo]
                         [--iters N] [--det-iters N] [--corruption cloud] [--severity 3]
                         [--seed 0] [--retrain]
"""
import argparse
import copy
import json
import os.path as osp
import sys
import time
from typing import NamedTuple

from mmengine.config import Config
from mmengine.runner import Runner

from reobench_mm.apis import (check_corruption_args, corruption_tag, dump_json_atomic,
                              insert_corruption)
from reobench_mm.datasets.synthetic import (SYNTHETIC_DATA_VERSION, make_demo_data,
                                            tree_digest)
from reobench_mm.engine import rescale_iter_schedule

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SEG_CONFIG = osp.join(ROOT, 'configs', 'demo',
                      'upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py')
DET_CONFIG = osp.join(ROOT, 'configs', 'demo',
                      'oriented-rcnn-le90_r18-tiny_fpn_1xb2-600i_demo-dior-256x256.py')


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='reobench_mm demo on synthetic data')
    parser.add_argument('--data-root', default='data/demo')
    parser.add_argument('--work-dir', default='work_dirs/demo')
    parser.add_argument('--iters', type=int, default=None,
                        help="segmentation training iterations (default: the config's, 600)")
    parser.add_argument('--det-iters', type=int, default=300,
                        help='detection training iterations (default 300)')
    parser.add_argument('--corruption', default='cloud',
                        help='the corruption evaluated besides clean (default cloud)')
    parser.add_argument('--severity', type=int, default=3, help='its severity (default 3)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--retrain', action='store_true',
                        help='train again even if a checkpoint exists')
    args = parser.parse_args()
    for option in ('iters', 'det_iters'):
        value = getattr(args, option)
        if value is not None and value < 1:
            parser.error(f"--{option.replace('_', '-')} must be >= 1, got {value}")
    try:
        check_corruption_args(args.corruption, args.severity, args.seed)
    except (KeyError, ValueError) as err:
        parser.error(str(err).strip('"'))
    return args


def ensure_demo_data(root: str, seed: int) -> bool:
    """Generate the demo data unless ``root`` already holds exactly it.

    Returns:
        True if the data was (re)generated.
    """
    stamp = osp.join(root, 'digest.json')
    wanted = {'seed': seed, 'version': SYNTHETIC_DATA_VERSION}
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
    with open(stamp, 'w') as f:
        json.dump(dict(wanted, digest=_digest(root)), f)
    print(f'[demo] data: {counts} in {time.time() - start:.1f}s')
    return True


def _digest(root: str) -> str:
    return '|'.join(tree_digest(osp.join(root, name)) for name in ('potsdam', 'dior'))


class DemoTask(NamedTuple):
    name: str
    config: str
    data_subdir: str  # under --data-root
    work_subdir: str  # under --work-dir
    metric: str  # key in the evaluator's output
    label: str  # printed name of the metric
    scale: float  # evaluator value -> printed percentage


TASKS = (
    DemoTask('segmentation', SEG_CONFIG, 'potsdam', 'seg', 'mIoU', 'mIoU', 1.0),
    DemoTask('detection', DET_CONFIG, 'dior', 'det', 'dota/mAP', 'mAP', 100.0),
)


def run_task(task: DemoTask, args: argparse.Namespace, data_changed: bool) -> dict:
    """Train (or reuse) the tiny model of one task, then evaluate it clean and under
    ``args.corruption`` at ``args.severity``; returns both metric dicts."""
    name = task.name
    cfg = Config.fromfile(task.config)
    cfg.work_dir = osp.join(args.work_dir, task.work_subdir)
    cfg.randomness = dict(seed=args.seed, deterministic=False)
    cfg.log_level = 'WARNING'
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = osp.join(args.data_root, task.data_subdir)
    iters = (args.iters if name == 'segmentation' else args.det_iters) \
        or cfg.train_cfg.max_iters
    rescale_iter_schedule(cfg, iters)
    checkpoint = osp.join(cfg.work_dir, f'iter_{iters}.pth')
    if args.retrain or data_changed or not osp.isfile(checkpoint):
        print(f'[demo] {name}: training the tiny model for {iters} iterations '
              f'(config {osp.relpath(task.config, ROOT)})')
        start = time.time()
        Runner.from_cfg(copy.deepcopy(cfg)).train()
        print(f'[demo] {name}: trained in {time.time() - start:.0f}s -> {checkpoint}')
    else:
        print(f'[demo] {name}: reusing {checkpoint} (--retrain to train again)')
    cfg.load_from = checkpoint
    results = {}
    for corruption, severity in (('clean', 0), (args.corruption, args.severity)):
        test_cfg = insert_corruption(copy.deepcopy(cfg), corruption, severity, seed=args.seed)
        tag = corruption_tag(corruption, severity, args.seed)
        start = time.time()
        metrics = Runner.from_cfg(test_cfg).test()
        results[tag] = {k: float(v) for k, v in metrics.items()}
        value = metrics[task.metric] * task.scale
        print(f'[demo] {name}, {tag}: {task.label} {value:.2f} ({time.time() - start:.0f}s)')
        sys.stdout.flush()
    dump_json_atomic(results, osp.join(args.work_dir, f'{name}_metrics.json'))
    return results


def main() -> None:
    args = parse_args()
    start = time.time()
    data_changed = ensure_demo_data(args.data_root, args.seed)
    summary = {}
    for task in TASKS:
        results = run_task(task, args, data_changed)
        summary[task] = [(tag, values[task.metric] * task.scale)
                         for tag, values in results.items()]
    print(f'[demo] summary ({time.time() - start:.0f}s in all):')
    for task, rows in summary.items():
        print(f'  {task.name:12s} '
              + '   '.join(f'{tag}: {task.label} {value:.2f}' for tag, value in rows))
    print(f'[demo] metrics written to {args.work_dir}/{{segmentation,detection}}_metrics.json')


if __name__ == '__main__':
    main()
