"""The README's commands: idempotent install, demo data tool and the demo itself."""
import os
import json
import os.path as osp
import subprocess
import sys

import pytest

from conftest import PROJECT_ROOT


def _run(args, timeout=600, env=None):
    result = subprocess.run(args, cwd=PROJECT_ROOT, capture_output=True, text=True,
                            timeout=timeout, env=env)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    return result.stdout + result.stderr


@pytest.mark.slow
def test_install_is_idempotent():
    """A second install into the environment running the tests changes nothing."""
    env = dict(os.environ, PYTHON=sys.executable)
    prefix = sys.prefix
    stamp = osp.join(prefix, '.reobench_mm-install.stamp')
    if not osp.isfile(stamp):
        pytest.skip(f'this environment ({prefix}) was not installed by tools/install.sh')
    output = _run(['bash', 'tools/install.sh'], timeout=120, env=env)
    assert 'up to date' in output


def test_install_rejects_a_broken_interpreter(tmp_path):
    env = dict(os.environ, PYTHON=str(tmp_path / 'no-python'))
    result = subprocess.run(['bash', 'tools/install.sh'], cwd=PROJECT_ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert 'not a working Python interpreter' in result.stderr


def test_make_demo_data_tool(tmp_path):
    out = tmp_path / 'demo'
    args = [sys.executable, 'tools/make_demo_data.py', '--out', str(out), '--num-train', '1',
            '--num-test', '1', '--size', '64']
    first = _run(args)
    second = _run(args)
    assert 'potsdam: 1 train, 1 val' in first and 'dior: 1 trainval, 1 test' in first
    digest = [line for line in first.splitlines() if 'digest' in line]
    assert digest and digest[0] in second


@pytest.mark.slow
def test_demo_trains_evaluates_and_reuses(tmp_path):
    args = [sys.executable, 'tools/demo.py', '--data-root', str(tmp_path / 'data'),
            '--work-dir', str(tmp_path / 'work'), '--iters', '4', '--det-iters', '2',
            '--corruption', 'gaussian_noise', '--severity', '5']
    first = _run(args)
    assert 'segmentation: training the tiny model for 4 iterations' in first
    assert 'detection: training the tiny model for 2 iterations' in first
    assert '>>>' in first, 'a progress bar is drawn'
    for line in ('segmentation, clean: mIoU', 'segmentation, gaussian_noise_s5: mIoU',
                 'detection, clean: mAP', 'detection, gaussian_noise_s5: mAP'):
        assert f'[demo] {line}' in first
    second = _run(args)
    assert 'data: reusing' in second and 'segmentation: reusing' in second
    assert 'detection: reusing' in second
    with open(tmp_path / 'work' / 'segmentation_metrics.json') as f:
        metrics = json.load(f)
    assert set(metrics) == {'clean', 'gaussian_noise_s5'}
    # the same seed gives the same corrupted evaluation when the model is reused
    assert _summary(first)['segmentation'] == _summary(second)['segmentation']


def _summary(output):
    lines = [line for line in output.splitlines() if line.startswith('  segmentation')
             or line.startswith('  detection')]
    return {line.split()[0]: line for line in lines}


def test_demo_rejects_unknown_corruptions():
    result = subprocess.run([sys.executable, 'tools/demo.py', '--corruption', 'fog'],
                            capture_output=True, text=True)
    assert result.returncode == 2 and 'valid' in result.stderr


def test_corruption_speed_benchmark_runs():
    output = _run([sys.executable, 'benchmarks/corruption_speed.py', '--sizes', '64',
                   '--repeats', '1', '--reference-size', '16'], timeout=300)
    assert 'all together' in output and 'cloud' in output and 'faster' in output
