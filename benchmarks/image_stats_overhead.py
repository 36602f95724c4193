"""What keeping per-image statistics costs a sweep, on the demo segmentation model.

    python benchmarks/image_stats_overhead.py [--checkpoint PATH] [--data-root DIR]
        [--corruptions NAME ...] [--severities K ...] [--repeats 3] [--train-iters 5]

In one run, alternating, ``--repeats`` complete sweeps (with calibration, from scratch,
each into a new work dir) as they run by default, and as many with the recording turned
off (the loop's per-image statistics replaced by none: no statistics files, no recompute
check, no intervals, no worst cases and no thumbnails) as the baseline. Prints the median
wall times and their ratio; target <= 1.05. Also prints the statistics' bytes per image
and the time of the report's intervals and worst cases.
"""
import os
import os.path as osp
import statistics
import sys
import tempfile
import time
from unittest import mock

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from sweep_overhead import (CONFIG, demo_checkpoint, demo_sweep_parser,  # noqa: E402
                            loader_options)

TARGET = 1.05


def main():
    args = demo_sweep_parser('cost of the per-image statistics').parse_args()
    from reobench_mm.robustness import condition_evaluation
    from reobench_mm.robustness.sweep import RobustnessSweep
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = demo_checkpoint(args, tmp)

        def sweep(name):
            run = RobustnessSweep(CONFIG, checkpoint, corruptions=args.corruptions,
                                  severities=args.severities, work_dir=osp.join(tmp, name),
                                  cfg_options=loader_options(args.data_root), plots=True,
                                  calibration=True)
            start = time.perf_counter()
            outcome = run.run()
            return time.perf_counter() - start, outcome

        times = {'with': [], 'without': []}
        outcome = None
        for repeat in range(args.repeats):
            with mock.patch.object(condition_evaluation, 'condition_image_stats',
                                   lambda e: None):
                times['without'].append(sweep(f'without{repeat}')[0])
            seconds, outcome = sweep(f'with{repeat}')
            times['with'].append(seconds)
        folder = osp.join(outcome.work_dir, 'conditions')
        files = [osp.join(folder, n) for n in os.listdir(folder) if n.endswith('.npz')]
        from reobench_mm.analysis.results_file import read_results
        results = read_results(osp.join(outcome.work_dir, 'results.json'))
        images = results.summary.intervals['images']
        stats = results.image_stats()
        start = time.perf_counter()
        from reobench_mm.analysis.intervals import summary_intervals
        from reobench_mm.analysis.worst_cases import worst_cases
        summary_intervals(results.summary, stats)
        worst_cases(stats, results.summary.corruptions, results.summary.severities)
        analysis_s = time.perf_counter() - start
        with_s, without_s = (statistics.median(times[k]) for k in ('with', 'without'))
        ratio = with_s / without_s
        size = sum(osp.getsize(f) for f in files)
        print(f'demo sweep: {len(outcome.conditions)} conditions, {images} images, with '
              'calibration')
        for key in ('without', 'with'):
            print(f'  {key:7s} per-image statistics: median {statistics.median(times[key]):.2f} '
                  f's of {", ".join(f"{s:.2f}" for s in times[key])}')
        print(f'statistics files: {len(files)}, {size} bytes in all, '
              f'{size / len(files) / images:.0f} bytes per image and condition')
        print(f'intervals (1000 resamples) and worst cases from the files: {analysis_s:.2f} s')
        pairs = statistics.median(w / wo for w, wo in zip(times['with'], times['without']))
        print(f'median of the {args.repeats} paired ratios (each with-run over the '
              f'without-run before it): {pairs:.3f}')
        print(f'wall(with) / wall(without) = {ratio:.3f}  (target <= {TARGET:.2f}: '
              f'{"met" if ratio <= TARGET else "not met"})')


if __name__ == '__main__':
    main()
