"""The README's commands: idempotent install, demo data tool and the demo itself."""
import os
import json
import os.path as osp
import subprocess
import sys

import pytest

from helpers import PROJECT_ROOT, tool_result
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


@pytest.mark.slow
def test_install_rejects_a_broken_interpreter(tmp_path):
    env = dict(os.environ, PYTHON=str(tmp_path / 'no-python'))
    result = subprocess.run(['bash', 'tools/install.sh'], cwd=PROJECT_ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert 'not a working Python interpreter' in result.stderr


def test_make_demo_data_tool(tmp_path):
    out = tmp_path / 'demo'
    args = ['--out', out, '--num-train', '1', '--num-test', '1', '--num-potsdam-test', '2',
            '--size', '64']
    first, second = (tool_result('make_demo_data.py', args) for _ in range(2))
    assert first.returncode == 0 and second.returncode == 0, (first, second)
    first, second = first.stdout + first.stderr, second.stdout + second.stderr
    assert 'potsdam: 1 train, 2 val' in first and 'dior: 1 trainval, 1 test' in first
    digest = [line for line in first.splitlines() if 'digest' in line]
    assert digest and digest[0] in second


@pytest.mark.long
@pytest.mark.slow
def test_demo_trains_sweeps_and_reuses(tmp_path):
    args = [sys.executable, 'tools/demo.py', '--data-root', str(tmp_path / 'data'),
            '--work-dir', str(tmp_path / 'work'), '--iters', '4', '--det-iters', '2',
            '--corruptions', 'gaussian_noise', '--severities', '5']
    first = _run(args)
    assert 'segmentation: training the tiny model for 4 iterations' in first
    assert 'detection: training the tiny model for 2 iterations' in first
    # off a terminal the progress bars print plain lines
    assert 'train: 4/4 (100%)' in first and first.count('\r') == 0, 'progress lines'
    # + the shifted set; for detection also the DOTA-style mapped one
    for task, count in (('segmentation', 3), ('detection', 4)):
        assert f'[demo] {task}: robustness sweep over {count} conditions' in first
        assert f'[demo] {task}: {count} conditions evaluated, 0 reused' in first
    tables = _tables(first)
    assert set(tables) == {'segmentation', 'detection'}
    for task, metric, folder, shifted in (('segmentation', 'mIoU', 'seg', ['potsdam_shifted']),
                                          ('detection', 'mAP', 'det',
                                           ['dior_shifted', 'dior_shifted_dota-classes'])):
        lines = tables[task]
        assert lines[0].split() == ['Clean', 'Gaussian', 'Noise', 'Avg', 'ΔTP']
        assert lines[1].split()[0] == metric and lines[2].split()[0] == 'ECE'
        report = tmp_path / 'work' / folder / 'robustness' / 'report.md'
        assert lines[-1].strip() == f'report: {report}' and report.is_file()
        with open(report.parent / 'results.json') as f:
            numbers = json.load(f)['numbers']
        assert [c['condition'] for c in numbers['conditions']] == ['clean', 'gaussian_noise@5']
        rows = numbers['shifts']['sets']
        assert [r['name'] for r in rows] == shifted and len(lines) == 4 + len(rows)
        for row, line in zip(rows, lines[3:]):
            assert line.strip().startswith(f'ID -> OOD {row["name"]} (')
            assert f"{row['id']:.2f} -> {row['ood']:.2f}" in line
        assert numbers['per_class'] is not None and 'calib/ECE' in numbers['extra']
        assert lines[1].split()[1] == f"{numbers['clean']:.2f}"
    # the mapped set holds 3 of the 4 demo classes (vehicle ignored): its row gives the
    # like-for-like ID and drop over those, recomputed from the clean statistics
    mapped = numbers['shifts']['sets'][1]
    assert mapped['compared_classes'] == ['airplane', 'ship', 'storagetank']
    assert (f"on its 3 classes {mapped['id_shared']:.2f} -> {mapped['ood_shared']:.2f}, "
            f"drop {mapped['drop_shared']:.2f}") in tables['detection'][4]
    assert (tmp_path / 'work' / 'seg' / 'robustness' / 'temperature.json').is_file()

    # the second run in this process: what it checks is the reuse, not the process
    result = tool_result('demo.py', args[2:])
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    second = result.stdout + result.stderr
    assert 'data: reusing' in second and 'segmentation: reusing' in second
    assert 'detection: reusing' in second
    assert '[demo] segmentation: 0 conditions evaluated, 3 reused' in second
    assert _tables(second) == tables


def _tables(output):
    """task -> the lines of its printed table (header, metric, ECE, the ID -> OOD rows,
    report path)."""
    lines = output.splitlines()
    tables = {}
    for index, line in enumerate(lines):
        if line in ('  segmentation:', '  detection:'):
            end = next(i for i in range(index + 1, len(lines))
                       if lines[i].strip().startswith('report: '))
            tables[line.strip(' :')] = lines[index + 1:end + 1]
    return tables


def test_demo_rejects_unknown_corruptions():
    result = tool_result('demo.py', ['--corruptions', 'fog'])
    assert result.returncode == 2 and 'unknown corruption' in result.stderr
    assert 'gaussian_noise' in result.stderr  # the valid names are listed


@pytest.mark.slow
def test_corruption_speed_benchmark_runs():
    output = _run([sys.executable, 'benchmarks/corruption_speed.py', '--sizes', '64',
                   '--repeats', '1', '--reference-size', '16'], timeout=300)
    assert 'all together' in output and 'cloud' in output and 'faster' in output


def test_the_demo_evaluates_enough_images_for_a_paired_test_to_fire():
    """The demo's segmentation run evaluates the test images left after the temperature's
    held-out ones: enough for the exact paired permutation test's smallest p, times the
    Benjamini–Hochberg factor of a comparison of the paper table's 15 numbers (clean, 12
    corruptions, Avg, ΔTP), to fall below 0.05 (with 6 images it could not: 2/64 × 15)."""
    import importlib.util

    from reobench_mm.analysis.paired import smallest_p_value
    from reobench_mm.datasets.synthetic import DEMO_POTSDAM_TEST
    spec = importlib.util.spec_from_file_location('demo_tool',
                                                  osp.join(PROJECT_ROOT, 'tools', 'demo.py'))
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    evaluated = DEMO_POTSDAM_TEST - demo.DEMO_TEMPERATURE_SPLIT
    assert evaluated == 10
    floor = smallest_p_value(evaluated, exact=True, permutations=1999)
    assert floor == pytest.approx(2 / 1024)
    assert floor * 15 < 0.05
    assert smallest_p_value(6, exact=True, permutations=1999) * 15 > 0.05
