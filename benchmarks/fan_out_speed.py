"""One pass for every condition (``fan_out``) against one condition after another, on the
demo segmentation model.

    python benchmarks/fan_out_speed.py [--checkpoint PATH] [--data-root DIR]
        [--corruptions NAME ...] [--severities K ...] [--repeats 3] [--train-iters 5]
        [--workers 0] [--fan-out 61] [--fan-out-batch M]

In one run it times, with the same checkpoint and test images:

- a plain clean evaluation (the test loop over the clean test set, the model built; the
  median of ``--repeats`` runs before and ``--repeats`` after the sweeps);
- the complete sweep over N conditions (clean + corruptions × severities) condition by
  condition, and the same sweep with ``fan_out`` (``--fan-out`` conditions per pass,
  default all); the two alternate ``--repeats`` times and the medians are compared;
- with ``--fan-out-batch M`` (> 1) also the fan-out sweep with M conditions' batches
  joined in each forward;

and prints the walls, their ratios, and each against N clean evaluations. It also checks
that the fan-out sweep wrote the same numbers for every condition, and prints the
largest difference of the joined sweep's numbers (float rounding of batched kernels).
"""
import json
import os.path as osp
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from sweep_overhead import (CONFIG, demo_checkpoint, demo_sweep_parser,  # noqa: E402
                            loader_options)


def _records(folder):
    out = {}
    conditions = osp.join(folder, 'conditions')
    for name in sorted(n for n in __import__('os').listdir(conditions) if n.endswith('.json')):
        with open(osp.join(conditions, name)) as handle:
            record = json.load(handle)
        out[record['condition']] = record['metrics']
    return out


def main():
    parser = demo_sweep_parser('fan-out sweep against the per-condition sweep')
    parser.add_argument('--workers', type=int, default=0, help='test dataloader workers')
    parser.add_argument('--fan-out', type=int, default=61,
                        help='conditions per pass of the fan-out sweep')
    parser.add_argument('--fan-out-batch', type=int, default=1,
                        help='also time the fan-out sweep with this many conditions per '
                        'forward (1: not)')
    args = parser.parse_args()
    from reobench_corruptions.condition import CLEAN
    from reobench_mm.robustness.sweep import RobustnessSweep
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = demo_checkpoint(args, tmp)
        options = dict(loader_options(args.data_root), **{
            'test_dataloader.num_workers': args.workers})

        def make_sweep(name, **extra):
            return RobustnessSweep(CONFIG, checkpoint, corruptions=args.corruptions,
                                   severities=args.severities, work_dir=osp.join(tmp, name),
                                   cfg_options=options, plots=False, bootstrap=0, **extra)

        baseline = make_sweep('baseline', decode_cache_bytes=0)
        baseline.build()
        clean = [baseline.evaluate(CLEAN)[1] for _ in range(args.repeats)]
        variants = [('per condition', {}), ('fan-out', {'fan_out': args.fan_out})]
        if args.fan_out_batch > 1:
            variants.append(('fan-out joined', {'fan_out': args.fan_out,
                                                'fan_out_batch': args.fan_out_batch}))
        walls = {name: [] for name, _ in variants}
        count = 0
        for repeat in range(args.repeats):
            for name, extra in variants:
                folder = osp.join(tmp, name.replace(' ', '_'))
                shutil.rmtree(folder, ignore_errors=True)
                sweep = make_sweep(osp.basename(folder), **extra)
                count = len(sweep.conditions)
                start = time.perf_counter()
                sweep.run()
                walls[name].append(time.perf_counter() - start)
        clean += [baseline.evaluate(CLEAN)[1] for _ in range(args.repeats)]
        same = _records(osp.join(tmp, 'per_condition')) == _records(osp.join(tmp, 'fan-out'))
        clean_s = statistics.median(clean)
        print(f'demo test set: {len(baseline.runner.test_loop.dataloader.dataset)} images, '
              f'N = {count} conditions, {args.workers} workers, fan_out = {args.fan_out}')
        print(f'plain clean evaluation: median {clean_s:.3f} s of {len(clean)}')
        medians = {name: statistics.median(values) for name, values in walls.items()}
        for name, wall in medians.items():
            print(f'{name:14s} sweep: median wall {wall:7.2f} s of {len(walls[name])} '
                  f'({", ".join(f"{w:.2f}" for w in walls[name])}); / (N x clean) = '
                  f'{wall / (count * clean_s):.3f}')
        print(f'fan-out / per condition = {medians["fan-out"] / medians["per condition"]:.3f}')
        print(f'the same numbers in every condition record: {"yes" if same else "NO"}')
        if args.fan_out_batch > 1:
            print(f'fan-out joined ({args.fan_out_batch} conditions per forward) / per '
                  f'condition = {medians["fan-out joined"] / medians["per condition"]:.3f}; '
                  f'/ fan-out = {medians["fan-out joined"] / medians["fan-out"]:.3f}')
            one = _records(osp.join(tmp, 'per_condition'))
            joined = _records(osp.join(tmp, 'fan-out_joined'))
            largest, condition, metric = max((abs(one[c][k] - joined[c][k]), c, k)
                                             for c in one for k in one[c])
            print(f'joined: largest difference of a metric from the per-condition sweep '
                  f'{largest:.3g} ({metric} of {condition}; '
                  f'{one[condition][metric]!r} against {joined[condition][metric]!r})')
            task = [(c, k) for c in one for k in one[c]
                    if not k.startswith('calib') and one[c][k] != joined[c][k]]
            print(f'joined: task metrics that differ: {len(task)} of '
                  f'{sum(not k.startswith("calib") for c in one for k in one[c])}'
                  + (f' ({task[:4]})' if task else ''))
        return 0 if same else 1


if __name__ == '__main__':
    sys.exit(main())
