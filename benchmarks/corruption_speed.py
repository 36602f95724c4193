"""Per-corruption speed on one core: median ms per image at 512x512 and 800x800 RGB.

    python benchmarks/corruption_speed.py [--repeats 7] [--sizes 512 800]
        [--protocol reobench] [--reference-size 64]

Targets (REOBench protocol, 512x512, one core): every corruption <= 10 ms, all 12
together <= 40 ms. Printed beside each median is the ratio to the target.

Where a straightforward reference exists, its speed is measured in the same run:
the fractal Perlin noise behind ``cloud``/``cloud_shadow`` against the textbook
per-pixel algorithm (timed on a small image and scaled by pixel count, since it
takes seconds at 512x512), printed as a speed-up factor.
"""
import argparse
import os
import time

os.environ.setdefault('OMP_NUM_THREADS', '1')

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from reobench_corruptions import corrupt, list_corruptions  # noqa: E402
from reobench_corruptions.noise import fractal_perlin, perlin_per_pixel  # noqa: E402

TARGET_MS, TARGET_TOTAL_MS = 10.0, 40.0


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return float(np.median(times))


def image(size: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    noise = cv2.GaussianBlur(rng.random((size, size, 3)).astype(np.float32), (0, 0), 3)
    return np.clip(noise * 255 * 3 - 200, 0, 255).astype(np.uint8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=7)
    parser.add_argument('--sizes', type=int, nargs='+', default=[512, 800])
    parser.add_argument('--protocol', default='reobench',
                        choices=['reobench', 'geofm_calibration'])
    parser.add_argument('--reference-size', type=int, default=64,
                        help='side of the image the per-pixel Perlin reference is timed on')
    args = parser.parse_args()
    cv2.setNumThreads(1)

    names = list_corruptions(args.protocol)
    results = {size: {} for size in args.sizes}
    for size in args.sizes:
        img = image(size)
        for name in names:
            results[size][name] = median_ms(
                lambda: corrupt(img, name, 3, protocol=args.protocol, key='bench'),
                args.repeats)

    header = f'{"corruption":24s}' + ''.join(f'{f"{s}x{s} ms":>14s}' for s in args.sizes)
    header += f'{"vs 10 ms":>10s}' if 512 in args.sizes else ''
    print(header)
    for name in names:
        row = f'{name:24s}' + ''.join(f'{results[s][name]:14.1f}' for s in args.sizes)
        if 512 in args.sizes:
            row += f'{results[512][name] / TARGET_MS:9.2f}x'
        print(row)
    totals = {s: sum(results[s].values()) for s in args.sizes}
    row = f'{"all together":24s}' + ''.join(f'{totals[s]:14.1f}' for s in args.sizes)
    if 512 in args.sizes:
        row += f'{totals[512] / TARGET_TOTAL_MS:9.2f}x (target {TARGET_TOTAL_MS:.0f} ms)'
    print(row)

    side = args.reference_size
    rng_seed = 0
    reference = median_ms(lambda: [perlin_per_pixel(side, side, 200 / 2**o,
                                                    np.random.default_rng(rng_seed))
                                   for o in range(6)], 3)
    ours = median_ms(lambda: fractal_perlin(side, side, 200, np.random.default_rng(rng_seed)),
                     args.repeats)
    for size in args.sizes:
        scale = (size * size) / (side * side)
        ours_full = median_ms(
            lambda: fractal_perlin(size, size, 200, np.random.default_rng(rng_seed)),
            args.repeats)
        print(f'fractal Perlin {size}x{size}: {ours_full:.1f} ms; per-pixel reference '
              f'~{reference * scale / 1000:.1f} s (timed at {side}x{side}, scaled by '
              f'pixels) -> {reference * scale / ours_full:.0f}x faster')
    print(f'(at {side}x{side}: ours {ours:.2f} ms, reference {reference:.0f} ms)')


if __name__ == '__main__':
    main()
