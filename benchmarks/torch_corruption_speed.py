"""The torch engine against the numpy engine: ms per image for each covered corruption.

    python benchmarks/torch_corruption_speed.py [--repeats 5] [--size 512] [--batch 8]
        [--severity 3] [--corruptions NAME ...]

Both engines run on the same batch of RGB uint8 images in the same run: the numpy engine
(``reobench_corruptions.corrupt``) image by image, the torch engine
(``reobench_corruptions.torch_engine.corrupt_torch``) on the ``B×3×H×W`` batch, on one CPU
core each (OpenCV, OpenMP and torch limited to one thread), and on CUDA when a GPU is
present (timed with synchronisation, after a warm-up call). Printed: the median over
``--repeats`` of the time per image, and the ratio numpy / torch (above 1: torch is
faster). Names are those of ``torch_corruptions`` of both protocols (``motion_blur``
runs for each: the calibration protocol's as ``geofm_calibration/motion_blur``).
"""
import argparse
import os
import time

os.environ.setdefault('OMP_NUM_THREADS', '1')

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from reobench_corruptions import corrupt  # noqa: E402
from reobench_corruptions.torch_engine import corrupt_torch, torch_corruptions  # noqa: E402

PROTOCOLS = ('reobench', 'geofm_calibration')


def median_ms(fn, repeats: int, synchronise: bool = False) -> float:
    """Median wall time of ``fn`` in ms over ``repeats`` runs, after one warm-up."""
    fn()
    if synchronise:
        torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if synchronise:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1000)
    return float(np.median(times))


def images(batch: int, size: int) -> np.ndarray:
    """``batch`` smooth random RGB uint8 images (``B×H×W×3``)."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(batch):
        noise = cv2.GaussianBlur(rng.random((size, size, 3)).astype(np.float32), (0, 0), 3)
        out.append(np.clip(noise * 255 * 3 - 200, 0, 255).astype(np.uint8))
    return np.stack(out)


def covered() -> list:
    """``(protocol, name, label)`` of every corruption the torch engine covers."""
    out = []
    for protocol in PROTOCOLS:
        for name in torch_corruptions(protocol):
            label = name if protocol == 'reobench' else f'{protocol}/{name}'
            out.append((protocol, name, label))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--size', type=int, default=512, help='image side in pixels')
    parser.add_argument('--batch', type=int, default=8, help='images per batch')
    parser.add_argument('--severity', type=int, default=3)
    parser.add_argument('--corruptions', nargs='+', default=None,
                        help='names or protocol/name labels (default: every covered one)')
    args = parser.parse_args()
    cv2.setNumThreads(1)
    torch.set_num_threads(1)

    runs = covered()
    if args.corruptions:
        labels = {label for _, _, label in runs} | {name for _, name, _ in runs}
        unknown = sorted(set(args.corruptions) - labels)
        if unknown:
            parser.error(f'not covered by the torch engine: {unknown}; valid: '
                         f'{sorted(label for _, _, label in runs)}')
        runs = [r for r in runs if r[1] in args.corruptions or r[2] in args.corruptions]

    batch = images(args.batch, args.size)
    keys = [f'bench{i}' for i in range(args.batch)]
    on_cpu = torch.from_numpy(batch.transpose(0, 3, 1, 2).copy())
    cuda = torch.cuda.is_available()
    on_gpu = on_cpu.cuda() if cuda else None

    header = f'{"corruption":42s}{"numpy ms":>10s}{"torch CPU ms":>14s}{"ratio":>8s}'
    if cuda:
        header += f'{"torch CUDA ms":>15s}{"ratio":>8s}'
    print(f'{args.batch} images of {args.size}x{args.size}x3 uint8, severity '
          f'{args.severity}, median of {args.repeats}, ms per image, one CPU core')
    print(header)
    for protocol, name, label in runs:
        reference = median_ms(lambda: [corrupt(image, name, args.severity, key=key,
                                               protocol=protocol)
                                       for image, key in zip(batch, keys)],
                              args.repeats) / args.batch
        ours = median_ms(lambda: corrupt_torch(on_cpu, name, args.severity, keys=keys,
                                               protocol=protocol),
                         args.repeats) / args.batch
        row = f'{label:42s}{reference:10.2f}{ours:14.2f}{reference / ours:7.2f}x'
        if cuda:
            gpu = median_ms(lambda: corrupt_torch(on_gpu, name, args.severity, keys=keys,
                                                  protocol=protocol),
                            args.repeats, synchronise=True) / args.batch
            row += f'{gpu:15.3f}{reference / gpu:7.1f}x'
        print(row)
    if not cuda:
        print('(no CUDA device: GPU figures not measured)')


if __name__ == '__main__':
    main()
