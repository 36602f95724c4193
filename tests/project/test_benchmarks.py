"""Every script under ``benchmarks/`` runs, with its smallest settings (the figures
themselves are measured by running the scripts with their defaults, not here)."""
import glob
import os.path as osp
import subprocess
import sys

import pytest

from helpers import PROJECT_ROOT

SCRIPTS = sorted(osp.basename(p) for p in glob.glob(osp.join(PROJECT_ROOT, 'benchmarks', '*.py')))


def _arguments(script, demo_data, tmp_path):
    """The smallest settings of each script."""
    return {
        'attack_step_cost.py': ['--repeats', '1', '--images', '1', '--data-root', demo_data],
        'corruption_speed.py': ['--repeats', '1', '--sizes', '64', '--reference-size', '16'],
        'fan_out_speed.py': ['--data-root', osp.join(demo_data, 'potsdam'), '--corruptions',
                             'cloud', '--severities', '1', '--repeats', '1',
                             '--train-iters', '1', '--fan-out', '2'],
        'torch_corruption_speed.py': ['--repeats', '1', '--size', '64', '--batch', '2'],
        'gpu_device_check.py': ['--device', 'cpu', '--sizes', '48', '--batch', '2',
                                '--repeats', '1', '--numpy-images', '1', '--out',
                                str(tmp_path / 'figures.json')],
        'bootstrap_intervals.py': ['--smallest'],
        'image_stats_overhead.py': ['--data-root', osp.join(demo_data, 'potsdam'),
                                    '--corruptions', 'cloud', '--severities', '1',
                                    '--repeats', '1', '--train-iters', '1'],
        'import_time.py': ['--runs', '1'],
        # (the memory target is for large images: small ones are dominated by fixed costs)
        'large_image_memory.py': ['--size', '1024', '--repeats', '1', '--protocols',
                                  'reobench', '--corruptions', 'rotate', 'translate'],
        'sweep_overhead.py': ['--data-root', osp.join(demo_data, 'potsdam'), '--corruptions',
                              'cloud', '--severities', '1', '--repeats', '1',
                              '--train-iters', '1'],
    }[script]


def test_every_benchmark_is_covered():
    assert SCRIPTS == ['attack_step_cost.py', 'bootstrap_intervals.py', 'corruption_speed.py',
                       'fan_out_speed.py', 'gpu_device_check.py', 'image_stats_overhead.py',
                       'import_time.py',
                       'large_image_memory.py', 'sweep_overhead.py',
                       'torch_corruption_speed.py']


@pytest.mark.slow
@pytest.mark.parametrize('script', SCRIPTS)
def test_benchmark_runs(script, demo_data, tmp_path):
    result = subprocess.run([sys.executable, osp.join('benchmarks', script),
                             *_arguments(script, demo_data, tmp_path)],
                            capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=1200)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    assert 'Traceback' not in result.stderr
    assert result.stdout.strip()
