"""Sweeps of a subset of the demo conditions, on the suite's copy of the demo data, against
the numbers and reports recorded before the robustness code was restructured
(``tests/data/reference_sweeps.json``): a change meant to leave behaviour unchanged must
leave every number of ``results.json``, every condition's metrics, the fitted temperature
and ``report.md`` (up to its provenance, which names paths and code digests) as they were.

Both models are the demo configs' freshly initialised ones (seeded): the same weights on
every machine. (A model trained in the test was not: training amplifies the last-bit
differences of the CPU's vector kernels, and machines of another processor gave a clean
mIoU 0.4 apart.) The forward passes still differ in the last bits between processors,
so numbers are compared to a relative 1e-6 (the risk-coverage areas, which order pixels
by confidence, to 1e-4) and the report, whose printed digits such differences do not
reach, exactly. Regenerate the file only when a change is meant to
change the numbers (and say why in the commit message)::

    PYTHONPATH=tests .venv/bin/python tests/robustness/test_reference_sweeps.py --write
"""
import argparse
import json
import math
import os
import os.path as osp
import sys
import tempfile

import numpy as np
import pytest

from helpers import DET_DEMO_CONFIG, PROJECT_ROOT, SEG_DEMO_CONFIG
from sweep_helpers import sweep_options, untrained_checkpoint

REFERENCE = osp.join(PROJECT_ROOT, 'tests', 'data', 'reference_sweeps.json')
#: task -> (config, the demo dataset, options of the sweep): a pixel,
#: a noise and two geometric corruptions with calibration and a held-out temperature for
#: segmentation; a blur and a translation with calibration for detection. Each also has
#: the other kinds of condition: a shift set (with a corruption on top for segmentation,
#: see SHIFTS) and an attack (PGD of 2 steps for segmentation, FGSM for detection).
RUNS = {
    'segmentation': (SEG_DEMO_CONFIG, 'potsdam', dict(
        corruptions=['cloud', 'gaussian_noise', 'rotate', 'scale'], severities=[2, 5],
        calibration=True, temperature_scaling=True, temperature_split=1,
        attacks=dict(pgd=dict(eps=[2], steps=2)))),
    'detection': (DET_DEMO_CONFIG, 'dior', dict(corruptions=['gaussian_blur', 'translate'],
                                                   severities=[3], calibration=True,
                                                   attacks=dict(fgsm=dict(eps=[2])))),
}
#: task -> (name, shift type, the demo's shifted set, its dataset config less data_root,
#: corruptions on top): the shift set of each task's sweep
SHIFTS = {
    'segmentation': ('potsdam_shifted', 'sensor', dict(
        type='PotsdamDataset', data_prefix=dict(img_path='img_dir/val',
                                                seg_map_path='ann_dir/val')), ['haze']),
    'detection': ('dior_shifted', 'scale', None, []),
}


def _shifts(task, data_root):
    """The ``shifts`` option of ``task``'s sweep on the demo data at ``data_root``."""
    from mmengine.config import Config
    name, shift_type, dataset, on_top = SHIFTS[task]
    if dataset is None:  # the config's own test set (its four demo classes)
        dataset = Config.fromfile(RUNS[task][0]).test_dataloader.dataset.to_dict()
        dataset.pop('pipeline')
    entry = dict(shift_type=shift_type, dataset=dict(dataset, data_root=osp.join(data_root,
                                                                                  name)))
    if on_top:
        entry.update(corruptions=on_top, severities=[3])
    return {name: entry}


#: what an attack condition measures of the machine (its run time and memory), in
#: ``results.json`` and in the columns of the report's attack table
MACHINE_FIELDS = ('seconds', 'seconds_per_image', 'peak_memory_bytes')
MACHINE_COLUMNS = ('Seconds', 's / image', 'Peak memory')


def _report_body(path):
    """``report.md`` without its provenance section, the machine's columns emptied."""
    with open(path, encoding='utf-8') as handle:
        text = handle.read()
    lines, blank = [], []
    for line in text.split('\n## Provenance\n')[0].split('\n'):
        cells = line.split('|')
        if not line.startswith('|'):
            blank = []
        elif any(c.strip() in MACHINE_COLUMNS for c in cells):
            blank = [i for i, c in enumerate(cells) if c.strip() in MACHINE_COLUMNS]
        elif blank and not set(line) <= set('|-: '):
            line = '|'.join('' if i in blank else c for i, c in enumerate(cells))
        lines.append(line)
    return '\n'.join(lines)


def _machine_free(numbers):
    """``numbers`` without what the attacks measured of the machine."""
    if isinstance(numbers, dict):
        return {k: _machine_free(v) for k, v in numbers.items() if k not in MACHINE_FIELDS}
    if isinstance(numbers, list):
        return [_machine_free(v) for v in numbers]
    return numbers


def run_reference_sweep(task, data_root, work_dir):
    """The sweep of ``task`` on ``data_root``: what the reference records of it."""
    from reobench_mm.robustness.sweep import RobustnessSweep
    config, dataset, options = RUNS[task]
    os.makedirs(work_dir, exist_ok=True)
    checkpoint = untrained_checkpoint(config, osp.join(work_dir, 'model.pth'))
    sweep = RobustnessSweep(config, checkpoint, work_dir=osp.join(work_dir, 'sweep'),
                            cfg_options=sweep_options(osp.join(data_root, dataset))[0],
                            shifts=_shifts(task, data_root), **options)
    outcome = sweep.run()
    folder = outcome.work_dir
    with open(osp.join(folder, 'results.json'), encoding='utf-8') as handle:
        numbers = json.load(handle)['numbers']
    conditions = {}
    for condition in outcome.conditions:
        with open(sweep.condition_file(condition), encoding='utf-8') as handle:
            conditions[condition.key] = json.load(handle)['metrics']
    temperature = None
    if osp.isfile(osp.join(folder, 'temperature.json')):
        with open(osp.join(folder, 'temperature.json'), encoding='utf-8') as handle:
            temperature = json.load(handle)['temperature']
    return dict(numbers=_machine_free(numbers), conditions=conditions, temperature=temperature,
                report=_report_body(osp.join(folder, 'report.md')))


def _close(got, expected, where='') -> list:
    """Where ``got`` differs from ``expected``: numbers beyond a relative 1e-6 (NaN equal
    to NaN), anything else not equal."""
    if isinstance(expected, dict) and isinstance(got, dict):
        if set(got) != set(expected):
            return [f'{where}: keys {sorted(set(got) ^ set(expected))}']
        return [d for k in expected for d in _close(got[k], expected[k], f'{where}/{k}')]
    if isinstance(expected, list) and isinstance(got, list):
        if len(got) != len(expected):
            return [f'{where}: {len(got)} items, expected {len(expected)}']
        return [d for i, (a, b) in enumerate(zip(got, expected))
                for d in _close(a, b, f'{where}[{i}]')]
    numbers = (int, float)
    if isinstance(expected, numbers) and isinstance(got, numbers) \
            and not isinstance(expected, bool) and not isinstance(got, bool):
        if expected != expected and got != got:
            return []
        # the risk-coverage areas order the pixels by confidence: the forward's last-bit
        # differences between processors reorder near ties (3e-6 relative measured between
        # two processors), so they are compared to 1e-4
        rel_tol = 1e-4 if 'AURC' in where else 1e-6
        return [] if math.isclose(got, expected, rel_tol=rel_tol, abs_tol=1e-9) else \
            [f'{where}: {got!r}, expected {expected!r}']
    return [] if got == expected else [f'{where}: {got!r}, expected {expected!r}']


@pytest.mark.slow
@pytest.mark.parametrize('task', list(RUNS))
def test_sweep_matches_the_reference(task, demo_data, tmp_path):
    if not osp.isfile(REFERENCE):
        pytest.fail(f'{REFERENCE} is missing: it is part of the repository')
    with open(REFERENCE, encoding='utf-8') as handle:
        reference = json.load(handle)[task]
    got = run_reference_sweep(task, demo_data, str(tmp_path))
    for part in ('conditions', 'temperature', 'numbers'):
        differences = _close(got[part], reference[part], part)
        assert not differences, differences[:10]
    assert got['report'] == reference['report']
    # a float32 metric is written as its own shortest decimal (58.1), not with the digits
    # double precision adds to it (58.099998474121094); float64 metrics stay as they are
    # (the calibration metrics are float64: a degenerate one can equal a float32 by chance)
    for metrics in got['conditions'].values():
        for key, value in metrics.items():
            if key.startswith('calib'):
                continue
            if isinstance(value, float) and value == value and float(np.float32(value)) == value:
                assert repr(value) == str(np.float32(value)), (key, value)


def main(argv=None):
    parser = argparse.ArgumentParser(description='write the reference sweeps')
    parser.add_argument('--write', action='store_true', help=f'write {REFERENCE}')
    args = parser.parse_args(argv)
    from reobench_mm.datasets.synthetic import make_demo_data
    from reobench_mm.datasets.synthetic_shift import write_shifted_demo_data
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        data_root = osp.join(tmp, 'demo_data')
        make_demo_data(data_root, seed=0, num_train=6, num_test=3, size=256,
                       num_potsdam_test=3)  # as conftest
        write_shifted_demo_data(data_root, seed=0, num_test=3, size=256)
        for task in RUNS:
            out[task] = run_reference_sweep(task, data_root, osp.join(tmp, task))
            print(task, out[task]['numbers']['clean'], out[task]['numbers']['avg'])
    if args.write:
        with open(REFERENCE, 'w', encoding='utf-8') as handle:
            json.dump(out, handle, indent=1, sort_keys=True)
            handle.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
