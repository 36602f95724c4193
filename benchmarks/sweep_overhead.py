"""Overhead of the robustness sweep over plain evaluations, on the demo segmentation model.

    python benchmarks/sweep_overhead.py [--checkpoint PATH] [--data-root DIR]
        [--corruptions NAME ...] [--severities K ...] [--repeats 3] [--train-iters 5]

Without ``--checkpoint`` a tiny UperNet is trained for a few iterations first. In one
run it times

- a plain clean evaluation: the test loop over the clean test set with the model
  already built (median of ``--repeats`` runs before the sweep and ``--repeats`` after
  it, in a separately built runner, so that a change of machine load during the run
  biases neither side);
- a complete sweep over N conditions (clean + corruptions × severities) from scratch:
  runner and model construction, checkpoint loading, decoding the test images once
  (the sweep's decode cache), every condition, the condition files and the report;

and prints ``wall(sweep) / (N × clean evaluation)``; target <= 1.10. The time the
corruptions themselves take is part of the sweep (printed per condition).
"""
import argparse
import os.path as osp
import statistics
import subprocess
import sys
import tempfile
import time

PROJECT_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
CONFIG = osp.join(PROJECT_ROOT, 'configs', 'demo',
                  'upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py')
TARGET = 1.10


def demo_sweep_parser(description):
    """The options of the benchmarks that sweep the demo segmentation model."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('--checkpoint', help='checkpoint of the demo config '
                        '(default: train one for --train-iters)')
    parser.add_argument('--data-root', default=osp.join(PROJECT_ROOT, 'data', 'demo',
                                                        'potsdam'),
                        help='demo Potsdam data (tools/make_demo_data.py)')
    parser.add_argument('--corruptions', nargs='+', default=['all'],
                        help='names or groups (default: all 12, the full sweep)')
    parser.add_argument('--severities', nargs='+', type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--train-iters', type=int, default=5)
    return parser


def demo_checkpoint(args, tmp):
    """``--checkpoint``, or one trained for ``--train-iters`` under ``tmp``; exits when the
    demo data are missing."""
    if not osp.isdir(args.data_root):
        sys.exit(f'no demo data at {args.data_root}; run tools/make_demo_data.py first')
    return args.checkpoint or train(args.data_root, osp.join(tmp, 'train'), args.train_iters)


def loader_options(data_root, split='test'):
    return {'log_level': 'WARNING', f'{split}_dataloader.dataset.data_root': data_root,
            f'{split}_dataloader.num_workers': 0,
            f'{split}_dataloader.persistent_workers': False}


def train(data_root, work_dir, iters):
    options = dict(loader_options(data_root, 'train'), **{
        'train_cfg.max_iters': iters, 'train_dataloader.batch_size': 2, 'val_cfg': None,
        'val_dataloader': None, 'val_evaluator': None})
    subprocess.run([sys.executable, osp.join(PROJECT_ROOT, 'tools', 'train.py'), CONFIG,
                    '--work-dir', work_dir, '--cfg-options',
                    *[f'{k}={v}' for k, v in options.items()]], check=True,
                   stdout=subprocess.DEVNULL)
    return osp.join(work_dir, f'iter_{iters}.pth')


def main():
    args = demo_sweep_parser('sweep overhead over plain evaluations').parse_args()
    from reobench_corruptions.condition import CLEAN
    from reobench_mm.robustness.sweep import RobustnessSweep
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = demo_checkpoint(args, tmp)

        def make_sweep(name, **options):
            return RobustnessSweep(CONFIG, checkpoint, corruptions=args.corruptions,
                                   severities=args.severities, work_dir=osp.join(tmp, name),
                                   cfg_options=loader_options(args.data_root), plots=True,
                                   **options)

        # a plain evaluation decodes its images: no decode cache in the baseline
        baseline = make_sweep('baseline', decode_cache_bytes=0)
        baseline.build()
        clean = [baseline.evaluate(CLEAN)[1] for _ in range(args.repeats)]

        sweep = make_sweep('sweep')
        count = len(sweep.conditions)
        start = time.perf_counter()
        outcome = sweep.run()
        wall = time.perf_counter() - start

        clean += [baseline.evaluate(CLEAN)[1] for _ in range(args.repeats)]
        clean_s = statistics.median(clean)
        print(f'\ndemo test set: {len(sweep.runner.test_loop.dataloader.dataset)} images')
        print(f'plain clean evaluation: median {clean_s:.3f} s of {len(clean)} '
              f'({", ".join(f"{s:.3f}" for s in clean)}; half before, half after the sweep)')
        print('per condition (s, ratio to clean):')
        for key, seconds in outcome.seconds.items():
            print(f'  {key:28s} {seconds:7.3f}  {seconds / clean_s:5.2f}')
        start = time.perf_counter()
        sweep.write_report()
        report_s = time.perf_counter() - start
        conditions_s = sum(outcome.seconds.values())
        ratio = wall / (count * clean_s)
        print(f'sweep over N={count} conditions: wall {wall:.2f} s (conditions '
              f'{conditions_s:.2f} s, report {report_s:.2f} s, runner/model build, checkpoint '
              f'and condition files {wall - conditions_s - report_s:.2f} s)')
        print(f'conditions only / (N x clean) = {conditions_s / (count * clean_s):.3f}')
        print(f'wall(sweep) / (N x clean) = {ratio:.3f}  (target <= {TARGET:.2f}: '
              f'{"met" if ratio <= TARGET else "not met"})')


if __name__ == '__main__':
    main()
