"""Peak extra memory and time of every corruption on one large image.

    python benchmarks/large_image_memory.py [--size 8000] [--bands 3] [--dtype uint8]
        [--severity 3] [--repeats 3] [--protocols reobench geofm_calibration]
        [--corruptions NAME ...] [--json results.json]

Each case (every corruption of the chosen protocols, plus the baseline
``image.astype(np.float32)``) runs in a fresh Python process, one after another:
the process builds the image (default 8000×8000×3 ``uint8``, 183 MiB), then runs
the corruption once while recording

- the peak growth of the resident set over the resident set just before the call
  (``VmHWM - VmRSS`` from ``/proc/self/status``, the peak reset through
  ``/proc/self/clear_refs``; everything: numpy, OpenCV, scipy buffers), and
- the peak of the memory numpy and Python allocate (``tracemalloc``),

and then times ``--repeats`` more calls (median). Both include the result itself,
which is as large as the image for every corruption.

Printed beside each number is its ratio to a baseline of the same run: the image's
size in bytes for memory, the median time of ``image.astype(np.float32)`` for time.

Target: the peak extra memory of every corruption is at most 3× the image's bytes
(``TARGET_MEMORY_RATIO``); each row says PASS or FAIL, and the exit status is 1 if any
fails. Time has no target here (``benchmarks/corruption_speed.py`` has the speed
targets at 512×512); the time ratio shows the cost of a corruption on a large image
relative to one pass that converts it to float32.

The engine is imported without the plugin's OpenMMLab registration (the
``reobench_mm`` package's ``__init__`` is skipped), so a case process holds only
numpy, OpenCV and scipy; ``--package-root`` measures another checkout of the
package the same way.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional

TARGET_MEMORY_RATIO = 3.0
BASELINE = 'astype_float32'
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------------------------------- case process
def _import_engine(package_root: str):
    """``reobench_corruptions`` from ``package_root`` without running the plugin's
    ``__init__`` (no torch/OpenMMLab import: a small, steady resident set)."""
    import importlib
    import types
    package = types.ModuleType('reobench_mm')
    package.__path__ = [os.path.join(package_root, 'reobench_mm')]
    sys.modules['reobench_mm'] = package
    return importlib.import_module('reobench_corruptions')


def _memory_kib() -> Dict[str, int]:
    values = {}
    with open('/proc/self/status') as status:
        for line in status:
            key = line.split(':')[0]
            if key in ('VmRSS', 'VmHWM'):
                values[key] = int(line.split()[1])
    return values


def _reset_peak() -> bool:
    """Reset the peak resident set to the current one (Linux >= 4.0)."""
    try:
        with open('/proc/self/clear_refs', 'w') as handle:
            handle.write('5')
        return True
    except OSError:
        return False


def make_image(size: int, width: int, bands: int, dtype_name: str):
    """A smooth, textured image built without full-size temporaries (a small random
    image resized to full size, plus a per-row ramp so that values vary)."""
    import cv2
    import numpy as np
    rng = np.random.default_rng(0)
    full = {'uint8': 255, 'uint16': 65535, 'float32': 1.0, 'float64': 1.0}[dtype_name]
    dtype = np.dtype(dtype_name)
    small = rng.random((max(2, size // 16), max(2, width // 16), bands)) * 0.8 + 0.1
    small = (small * full).astype(dtype)
    image = np.empty((size, width, bands), dtype)
    for band in range(bands):  # OpenCV resizes up to 4 channels per call
        image[..., band] = cv2.resize(np.ascontiguousarray(small[..., band]), (width, size),
                                      interpolation=cv2.INTER_LINEAR)
    return image


def run_case(args) -> dict:
    """Measure one case in this process; returns the record printed as JSON."""
    import gc
    import tracemalloc

    import cv2
    import numpy as np
    cv2.setNumThreads(args.threads)
    engine = _import_engine(args.package_root)
    image = make_image(args.size, args.width or args.size, args.bands, args.dtype)

    if args.case == BASELINE:
        def call():
            return image.astype(np.float32)
    else:
        protocol, name = args.case.split('/')

        def call():
            return engine.corrupt(image, name, args.severity, protocol=protocol, seed=0,
                                  key='large')

    gc.collect()
    before = _memory_kib()['VmRSS']
    reset = _reset_peak()
    tracemalloc.start()
    start = time.perf_counter()
    result = call()
    first = time.perf_counter() - start
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    peak = _memory_kib()['VmHWM']
    del result
    gc.collect()
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
        del result
    return dict(case=args.case, image_bytes=int(image.nbytes),
                peak_extra_bytes=(peak - before) * 1024 if reset else None,
                traced_peak_bytes=int(traced_peak), first_s=first,
                median_s=float(np.median(times)) if times else first)


# ---------------------------------------------------------------------------- the driver
def _cases(args) -> List[str]:
    engine = _import_engine(args.package_root)
    cases = []
    for protocol in args.protocols:
        for name in engine.list_corruptions(protocol):
            if not args.corruptions or name in args.corruptions:
                cases.append(f'{protocol}/{name}')
    return cases


def _run_in_subprocess(case: str, args) -> Optional[dict]:
    command = [sys.executable, os.path.abspath(__file__), '--case', case,
               '--size', str(args.size), '--bands', str(args.bands), '--dtype', args.dtype,
               '--severity', str(args.severity), '--repeats', str(args.repeats),
               '--threads', str(args.threads), '--package-root', args.package_root]
    if args.width:
        command += ['--width', str(args.width)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(f'{case}: the case process failed:\n{done.stderr[-3000:]}', file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def _mib(value: Optional[int]) -> str:
    return '     n/a' if value is None else f'{value / 2**20:8.0f}'


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--size', type=int, default=8000, help='image height (and width)')
    parser.add_argument('--width', type=int, default=None, help='image width (default: size)')
    parser.add_argument('--bands', type=int, default=3)
    parser.add_argument('--dtype', default='uint8',
                        choices=['uint8', 'uint16', 'float32', 'float64'])
    parser.add_argument('--severity', type=int, default=3)
    parser.add_argument('--repeats', type=int, default=3,
                        help='timed calls after the measured one (median)')
    parser.add_argument('--protocols', nargs='+', default=['reobench', 'geofm_calibration'],
                        choices=['reobench', 'geofm_calibration'])
    parser.add_argument('--corruptions', nargs='*', default=None,
                        help='only these corruption names (default: all)')
    parser.add_argument('--threads', type=int, default=1, help="OpenCV's thread count")
    parser.add_argument('--package-root', default=PROJECT_ROOT,
                        help='the checkout whose reobench_mm is measured')
    parser.add_argument('--json', default=None, help='also write the records here')
    parser.add_argument('--case', default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.package_root = os.path.abspath(args.package_root)

    if args.case is not None:  # a case process
        print(json.dumps(run_case(args)))
        return 0

    baseline = _run_in_subprocess(BASELINE, args)
    if baseline is None:
        return 2
    image_bytes, base_s = baseline['image_bytes'], baseline['median_s']
    width = args.width or args.size
    print(f'image {args.size}x{width}x{args.bands} {args.dtype}: {image_bytes / 2**20:.0f} MiB; '
          f'severity {args.severity}; {args.repeats} timed calls per case; target: peak '
          f'extra memory <= {TARGET_MEMORY_RATIO:g}x the image bytes')
    print(f'baseline image.astype(np.float32): median {base_s:.3f} s, peak extra '
          f'{_mib(baseline["peak_extra_bytes"]).strip()} MiB')
    header = (f'{"protocol/corruption":42s}{"peak MiB":>9s}{"x image":>9s}{"traced MiB":>11s}'
              f'{"median s":>10s}{"x astype":>10s}  result')
    print(header)
    records, failed = [baseline], 0
    for case in _cases(args):
        record = _run_in_subprocess(case, args)
        if record is None:
            failed += 1
            print(f'{case:42s}{"error":>9s}  FAIL')
            continue
        records.append(record)
        peak = record['peak_extra_bytes']
        measured = peak if peak is not None else record['traced_peak_bytes']
        ratio = measured / image_bytes
        verdict = 'PASS' if ratio <= TARGET_MEMORY_RATIO else 'FAIL'
        failed += verdict == 'FAIL'
        print(f'{case:42s}{_mib(peak):>9s}{ratio:8.2f}x{_mib(record["traced_peak_bytes"]):>11s}'
              f'{record["median_s"]:10.2f}{record["median_s"] / base_s:9.1f}x  {verdict}',
              flush=True)
    print(f'{len(records) - 1} corruptions measured, {failed} failed the memory target')
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump(dict(target_memory_ratio=TARGET_MEMORY_RATIO, records=records), handle,
                      indent=1)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
