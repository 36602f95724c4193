"""Time of the plugin line, ``import reobench_mm``, in fresh processes.

    python benchmarks/import_time.py [--runs 5] [--baseline DIR]

Each run is a new interpreter that imports the package and exits; the median of
``--runs`` runs is printed, with the modules of the package it loaded and whether the
experiment drivers were among them. With ``--baseline DIR`` (another checkout of the
project, e.g. an earlier commit exported with ``git archive``) the same is measured for
that checkout's package, runs interleaved, and the ratio of the medians is printed.
"""
import argparse
import json
import os
import os.path as osp
import statistics
import subprocess
import sys
import time

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DRIVERS = ('reobench_mm.robustness.sweep', 'reobench_mm.robustness.data_budget',
           'reobench_mm.robustness.recipe', 'reobench_mm.robustness.drift')
CODE = ('import json, sys, time\n'
        'start = time.perf_counter()\n'
        'import reobench_mm\n'
        'seconds = time.perf_counter() - start\n'
        "print(json.dumps(dict(seconds=seconds, modules=sorted(m for m in sys.modules "
        "if m.startswith('reobench_mm')), scipy='scipy' in sys.modules)))")


def measure(root: str) -> dict:
    """One fresh interpreter importing the package found at ``root``."""
    env = dict(os.environ, PYTHONPATH=root)
    out = subprocess.run([sys.executable, '-c', CODE], env=env, cwd=root, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=5, help='runs per checkout (default 5)')
    parser.add_argument('--baseline', help='another checkout to compare with')
    args = parser.parse_args(argv)
    roots = {'this checkout': ROOT}
    if args.baseline:
        roots['baseline'] = osp.abspath(args.baseline)
    seconds = {name: [] for name in roots}
    last = {}
    for _ in range(args.runs):
        for name, root in roots.items():  # interleaved: drift hits both alike
            last[name] = measure(root)
            seconds[name].append(last[name]['seconds'])
        time.sleep(0.1)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, root in roots.items():
        drivers = [m for m in DRIVERS if m in last[name]['modules']]
        print(f'{name} ({root}): median {medians[name]:.2f} s over {args.runs} runs '
              f'(min {min(seconds[name]):.2f}, max {max(seconds[name]):.2f}); '
              f'{len(last[name]["modules"])} reobench_mm modules; drivers imported: '
              f'{", ".join(d.rsplit(".", 1)[-1] for d in drivers) or "none"}; '
              f'scipy imported: {last[name]["scipy"]}')
    if args.baseline:
        print(f'ratio this checkout / baseline: {medians["this checkout"] / medians["baseline"]:.2f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
