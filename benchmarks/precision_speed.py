"""Forward time of the test step in bf16 against fp32, on the demo models, on this CPU.

    python benchmarks/precision_speed.py [--data-root DIR] [--repeats 7] [--images 3]

For the demo UperNet (Potsdam tiles), freshly initialised with a fixed seed, in one run
and on the same images, it times the model's
``test_step`` per image in fp32 and under ``torch.autocast`` in bf16 — the context of
``RobustnessTestLoop(precision='bf16')``
(:func:`reobench_mm.engine.precision.forward_precision`) — alternating the two so that a
change of machine load biases neither, and prints the median ``bf16 / fp32`` time per
task with whether this CPU has bf16 instructions (``avx512_bf16`` or ``amx_bf16`` in
``/proc/cpuinfo``): without them autocast emulates bf16 and is slower, with them it can
be faster. There is no target: the number says what to expect on this machine. (Rotated
detectors run in fp32 only: :func:`reobench_mm.engine.precision.check_precision`.)
"""
import os.path as osp
import statistics
import sys
import time

PROJECT_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, osp.join(PROJECT_ROOT, 'benchmarks'))
from attack_step_cost import _runner_parts, parse_demo_arguments  # noqa: E402  (same models)


def bf16_instructions() -> str:
    """The bf16 instruction sets ``/proc/cpuinfo`` names (empty: none, or unknown)."""
    try:
        with open('/proc/cpuinfo') as handle:
            flags = next((line for line in handle if line.startswith('flags')), '')
    except OSError:
        return ''
    return ' '.join(f for f in ('avx512_bf16', 'amx_bf16') if f in flags.split())


def measure(task, data_root, repeats, images):
    """``(fp32 seconds, bf16 seconds)`` per image, medians over ``repeats`` rounds."""
    import torch

    from reobench_mm.engine.precision import forward_precision
    model, batches = _runner_parts(task, data_root)
    batches = batches[:images]

    def run(precision):
        start = time.perf_counter()
        with torch.no_grad(), forward_precision(precision, model):
            for batch in batches:
                model.test_step(batch)
        return (time.perf_counter() - start) / len(batches)

    run('fp32'), run('bf16')  # warm-up
    fp32, bf16 = [], []
    for _ in range(repeats):
        fp32.append(run('fp32'))
        bf16.append(run('bf16'))
    return statistics.median(fp32), statistics.median(bf16)


def main():
    # rotated detectors run in fp32 only (check_precision): the segmentation model alone
    args = parse_demo_arguments(__doc__.splitlines()[0], tasks=('segmentation', ))
    import torch
    found = bf16_instructions()
    print(f'test step in bf16 (torch.autocast) against fp32 (median of {args.repeats}, '
          f'{args.images} images, {torch.get_num_threads()} threads, CPU; bf16 '
          f'instructions: {found or "none"})')
    for task in args.tasks:
        fp32, bf16 = measure(task, args.data_root, args.repeats, args.images)
        print(f'{task:18s} fp32 {fp32 * 1e3:8.1f} ms/image   bf16 {bf16 * 1e3:8.1f} ms/image'
              f'   bf16/fp32 {bf16 / fp32:5.2f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
