"""Every script under ``benchmarks/`` runs, with its smallest settings (the figures
themselves are measured by running the scripts with their defaults, not here)."""
import glob
import importlib.util
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
        'precision_speed.py': ['--repeats', '1', '--images', '1', '--data-root', demo_data,
                               '--tasks', 'segmentation'],
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
                       'import_time.py', 'large_image_memory.py', 'precision_speed.py',
                       'sweep_overhead.py', 'torch_corruption_speed.py']


# Scripts run in a process of their own because that is what they measure; the others run
# in the test's process (an interpreter start saved each: the scripts' work is the same).
OWN_PROCESS = {
    'import_time.py': 'it times the imports of fresh interpreters',
    'large_image_memory.py': "it measures each case's peak memory in a process of its own",
}
# Scripts that train a demo model unless given one: they get the suite's cached model.
TAKES_CHECKPOINT = ('fan_out_speed.py', 'image_stats_overhead.py', 'sweep_overhead.py')


def _run_in_process(script: str, argv: list) -> object:
    """``benchmarks/<script>`` as its ``__main__`` block runs it, in this process (with the
    script's folder first on ``sys.path``, as Python puts it for a script)."""
    path = osp.join(PROJECT_ROOT, 'benchmarks', script)
    spec = importlib.util.spec_from_file_location(
        f'benchmark_{osp.splitext(script)[0]}', path)
    module = importlib.util.module_from_spec(spec)
    saved = sys.argv, list(sys.path)
    sys.argv = [path, *argv]
    sys.path.insert(0, osp.dirname(path))
    try:
        spec.loader.exec_module(module)
        return module.main()
    finally:
        sys.argv, sys.path[:] = saved


@pytest.mark.slow
@pytest.mark.parametrize('script', SCRIPTS)
def test_benchmark_runs(script, demo_data, tmp_path, request, capsys):
    argv = _arguments(script, demo_data, tmp_path)
    if script in TAKES_CHECKPOINT:
        argv += ['--checkpoint', request.getfixturevalue('seg_model').checkpoint]
    if script in OWN_PROCESS:
        result = subprocess.run([sys.executable, osp.join('benchmarks', script), *argv],
                                capture_output=True, text=True, cwd=PROJECT_ROOT,
                                timeout=1200)
        assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
        assert 'Traceback' not in result.stderr
        assert result.stdout.strip()
        return
    assert _run_in_process(script, argv) in (None, 0)
    assert capsys.readouterr().out.strip()
