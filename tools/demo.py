"""The main job on the embedded synthetic data (``make demo``).

At this stage of the project: generate the demo data (skipped when present and
identical), train the tiny UperNet on the synthetic Potsdam tiles (reused when its
checkpoint exists), evaluate it on the clean test tiles and print the mIoU.

    python tools/demo.py [--data-root data/demo] [--work-dir work_dirs/demo]
                         [--iters N] [--seed 0] [--retrain]
"""
import argparse
import json
import os
import os.path as osp
import sys
import time

from mmengine.config import Config
from mmengine.runner import Runner

from reobench_mm.datasets.synthetic import (SYNTHETIC_DATA_VERSION, make_demo_data,
                                            tree_digest)
from reobench_mm.engine import rescale_iter_schedule

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SEG_CONFIG = osp.join(ROOT, 'configs', 'demo',
                      'upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py')


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='reobench_mm demo on synthetic data')
    parser.add_argument('--data-root', default='data/demo')
    parser.add_argument('--work-dir', default='work_dirs/demo')
    parser.add_argument('--iters', type=int, default=None,
                        help="training iterations (default: the config's, 600)")
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--retrain', action='store_true',
                        help='train again even if a checkpoint exists')
    args = parser.parse_args()
    if args.iters is not None and args.iters < 1:
        parser.error(f'--iters must be >= 1, got {args.iters}')
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


def main() -> None:
    args = parse_args()
    data_changed = ensure_demo_data(args.data_root, args.seed)

    cfg = Config.fromfile(SEG_CONFIG)
    cfg.work_dir = osp.join(args.work_dir, 'seg')
    cfg.randomness = dict(seed=args.seed, deterministic=False)
    cfg.log_level = 'WARNING'
    cfg.merge_from_dict({
        'train_dataloader.dataset.data_root': osp.join(args.data_root, 'potsdam'),
        'val_dataloader.dataset.data_root': osp.join(args.data_root, 'potsdam'),
        'test_dataloader.dataset.data_root': osp.join(args.data_root, 'potsdam'),
    })
    iters = args.iters or cfg.train_cfg.max_iters
    rescale_iter_schedule(cfg, iters)
    checkpoint = osp.join(cfg.work_dir, f'iter_{iters}.pth')

    if args.retrain or data_changed or not osp.isfile(checkpoint):
        print(f'[demo] segmentation: training tiny UperNet for {iters} iterations '
              f'(config {osp.relpath(SEG_CONFIG, ROOT)})')
        start = time.time()
        Runner.from_cfg(cfg).train()
        print(f'[demo] segmentation: trained in {time.time() - start:.0f}s -> {checkpoint}')
    else:
        print(f'[demo] segmentation: reusing {checkpoint} (--retrain to train again)')

    cfg.load_from = checkpoint
    print('[demo] segmentation: evaluating on the clean test tiles')
    metrics = Runner.from_cfg(cfg).test()
    print(f'[demo] segmentation, clean: mIoU {metrics["mIoU"]:.2f}  aAcc {metrics["aAcc"]:.2f}  '
          f'mAcc {metrics["mAcc"]:.2f}')
    sys.stdout.flush()
    os.makedirs(args.work_dir, exist_ok=True)
    with open(osp.join(args.work_dir, 'seg_clean_metrics.json'), 'w') as f:
        json.dump({k: float(v) for k, v in metrics.items()}, f, indent=2)


if __name__ == '__main__':
    main()
