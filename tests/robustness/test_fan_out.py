"""One pass over the test set for many conditions (``fan_out``): the same records as
condition by condition (metrics, calibration details, per-image statistics) for both
tasks, with workers, geometric corruptions and calibration; a killed run resumes by
condition group to the same records; the option's checks and the sweep tool's flag."""
import json
import os
import os.path as osp
from typing import NamedTuple

import pytest
from filelock import FileLock
from mmengine.runner import Runner

import reobench_mm  # noqa: F401
from reobench_mm.errors import SweepError
from reobench_mm.robustness import condition_evaluation as evaluation_module

from helpers import DET_DEMO_CONFIG, SEG_DEMO_CONFIG, load_tool
from reobench_cli import run_tool
from sweep_helpers import (assert_same_up_to_batching, condition_records, robustness_cfg,
                           untrained_checkpoint)

CORRUPTIONS = ['haze', 'rotate', 'gaussian_noise', 'cloud']


def _comparable(records):
    """What must not change: the metrics, the calibration details and the per-image
    statistics' digest of each record."""
    return {k: (r['metrics'], r.get('calibration'), (r['images'] or {}).get('sha256'))
            for k, r in records.items()}


def _run(config, data_root, work_dir, checkpoint, workers=0, **options):
    cfg = robustness_cfg(config, data_root, work_dir, checkpoint, workers=workers,
                         corruptions=CORRUPTIONS, severities=[1, 3], bootstrap=50, **options)
    runner = Runner.from_cfg(cfg)
    runner.test()
    return runner.test_loop.outcome


class PerConditionRun(NamedTuple):
    checkpoint: str
    folder: str


@pytest.fixture(scope='session')
def det_per_condition(demo_data, run_root) -> PerConditionRun:
    """The freshly initialised demo Oriented R-CNN and its per-condition run (the
    reference of both detection tests), written once per run for every worker; read
    only."""
    root = osp.join(run_root, 'fan_out_det')
    os.makedirs(root, exist_ok=True)
    with FileLock(root + '.lock'):
        if not osp.isfile(osp.join(root, 'done')):
            checkpoint = untrained_checkpoint(DET_DEMO_CONFIG, osp.join(root, 'det.pth'))
            _run(DET_DEMO_CONFIG, osp.join(demo_data, 'dior'), osp.join(root, 'one'),
                 checkpoint)
            with open(osp.join(root, 'done'), 'w', encoding='utf-8') as handle:
                handle.write('ok\n')
    return PerConditionRun(osp.join(root, 'det.pth'), osp.join(root, 'one'))


@pytest.mark.slow  # 7 s or more: left out of make test-fast
@pytest.mark.parametrize('workers', [0, 2])
def test_fan_out_writes_the_records_of_the_per_condition_loop(demo_data, untrained_seg_checkpoint,
                                                              tmp_path, workers):
    root = osp.join(demo_data, 'potsdam')
    _run(SEG_DEMO_CONFIG, root, str(tmp_path / 'one'), untrained_seg_checkpoint, workers,
         calibration=True)
    outcome = _run(SEG_DEMO_CONFIG, root, str(tmp_path / 'fan'), untrained_seg_checkpoint, workers,
                   calibration=True, fan_out=4)
    assert len(outcome.evaluated) == 9
    one, fan = condition_records(str(tmp_path / 'one')), condition_records(str(tmp_path / 'fan'))
    assert sorted(one) == sorted(fan)
    assert _comparable(one) == _comparable(fan)
    numbers = [json.load(open(tmp_path / f / 'results.json'))['numbers']
               for f in ('one', 'fan')]
    assert numbers[0] == numbers[1]


@pytest.mark.slow  # 7 s or more: left out of make test-fast
def test_fan_out_for_rotated_detection(demo_data, det_per_condition, tmp_path):
    root = osp.join(demo_data, 'dior')
    _run(DET_DEMO_CONFIG, root, str(tmp_path / 'fan'), det_per_condition.checkpoint,
         fan_out=9)
    assert _comparable(condition_records(det_per_condition.folder)) == \
        _comparable(condition_records(str(tmp_path / 'fan')))


@pytest.mark.slow  # 7 s or more: left out of make test-fast
@pytest.mark.parametrize('config, folder', [(SEG_DEMO_CONFIG, 'potsdam'),
                                            (DET_DEMO_CONFIG, 'dior')])
def test_joined_condition_batches_give_the_numbers(demo_data, tmp_path, config, folder,
                                                   request):
    """``fan_out_batch=3``: three conditions' batches in one forward (9 conditions: three
    forwards per batch of images) give the per-condition records up to the float rounding
    of batched kernels."""
    root, seg = osp.join(demo_data, folder), folder == 'potsdam'
    if seg:
        checkpoint, one = untrained_checkpoint(config, str(tmp_path / 'model.pth')), \
            str(tmp_path / 'one')
        _run(config, root, one, checkpoint, calibration=True)
    else:  # the detection tests' shared per-condition run
        checkpoint, one = request.getfixturevalue('det_per_condition')
    forwards = []
    runner_cfg = robustness_cfg(config, root, str(tmp_path / 'joined'), checkpoint,
                                corruptions=CORRUPTIONS, severities=[1, 3], bootstrap=50,
                                calibration=seg, fan_out=9, fan_out_batch=3)
    runner = Runner.from_cfg(runner_cfg)
    runner.test_loop  # built: count the forwards and their sizes
    evaluation = runner.test_loop.evaluation
    real = evaluation.forward
    evaluation.forward = lambda batch: forwards.append(len(batch['inputs'])) or real(batch)
    runner.test()
    images = len(runner.test_loop.dataloader.dataset)
    assert sorted(forwards, reverse=True)[:3 * images] == [3] * (3 * images)
    assert_same_up_to_batching(condition_records(one), one,
                               condition_records(str(tmp_path / 'joined')),
                               str(tmp_path / 'joined'))


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_sharded_fan_out_runs_merge_to_the_per_condition_numbers(demo_data, untrained_seg_checkpoint,
                                                                 tmp_path):
    """Two shards, each with fan-out, merged: the records and ``results.json`` numbers of
    the unsharded per-condition run."""
    from reobench_mm.robustness.shards import merge_sweeps
    root = osp.join(demo_data, 'potsdam')
    _run(SEG_DEMO_CONFIG, root, str(tmp_path / 'one'), untrained_seg_checkpoint)
    folders = [str(tmp_path / f'shard{i}') for i in range(2)]
    for i, folder in enumerate(folders):
        _run(SEG_DEMO_CONFIG, root, folder, untrained_seg_checkpoint, fan_out=3, shard=f'{i}/2')
    merged = merge_sweeps(folders, str(tmp_path / 'merged'), plots=False)
    records = {}
    for folder in folders:
        records.update(condition_records(folder))
    assert _comparable(records) == _comparable(condition_records(str(tmp_path / 'one')))
    numbers = [json.load(open(path))['numbers'] for path in
               (merged.files['results.json'], str(tmp_path / 'one' / 'results.json'))]
    assert numbers[0] == numbers[1]
    # the records do not depend on fan-out: a fan-out run reuses the per-condition ones
    again = _run(SEG_DEMO_CONFIG, root, str(tmp_path / 'one'), untrained_seg_checkpoint, fan_out=3,
                 fan_out_batch=2)
    assert again.evaluated == [] and len(again.skipped) == 9


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_a_killed_fan_out_run_resumes_by_condition_group(demo_data, untrained_seg_checkpoint, tmp_path,
                                                         monkeypatch):
    root = osp.join(demo_data, 'potsdam')
    _run(SEG_DEMO_CONFIG, root, str(tmp_path / 'ref'), untrained_seg_checkpoint)
    passes = []
    real = evaluation_module.run_pass

    def dies_in_the_second_pass(conditions, *args, **kwargs):
        passes.append([c.key for c in conditions])
        if len(passes) == 2:
            raise KeyboardInterrupt('killed')
        return real(conditions, *args, **kwargs)

    monkeypatch.setattr(evaluation_module, 'run_pass', dies_in_the_second_pass)
    work_dir = str(tmp_path / 'fan')
    with pytest.raises(KeyboardInterrupt):
        _run(SEG_DEMO_CONFIG, root, work_dir, untrained_seg_checkpoint, fan_out=4)
    assert passes[0] == ['clean', 'haze@1', 'haze@3', 'rotate@1']
    assert sorted(condition_records(work_dir)) == sorted(passes[0])  # the first group was written
    monkeypatch.setattr(evaluation_module, 'run_pass', real)
    outcome = _run(SEG_DEMO_CONFIG, root, work_dir, untrained_seg_checkpoint, fan_out=4)
    assert sorted(c.key for c in outcome.evaluated) == sorted(
        set(condition_records(str(tmp_path / 'ref'))) - set(passes[0]))
    assert _comparable(condition_records(work_dir)) == _comparable(condition_records(str(tmp_path / 'ref')))


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_the_option_is_checked_and_the_sweep_tool_takes_it(demo_data, untrained_seg_checkpoint,
                                                           tmp_path):
    with pytest.raises(SweepError, match='fan_out must be a number of conditions'):
        _run(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), str(tmp_path / 'bad'),
             untrained_seg_checkpoint, fan_out=-1)
    with pytest.raises(SweepError, match='fan_out_batch must be a number of conditions'):
        _run(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), str(tmp_path / 'bad'),
             untrained_seg_checkpoint, fan_out=4, fan_out_batch=0)
    with pytest.raises(SweepError, match='set fan_out to 2 or more too'):
        _run(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), str(tmp_path / 'bad'),
             untrained_seg_checkpoint, fan_out_batch=2)
    tool = load_tool('robustness_test.py')
    common = ['--corruptions', 'haze', '--severities', '1', '2', '--no-plots',
              '--cfg-options', f'test_dataloader.dataset.data_root='
              f'{osp.join(demo_data, "potsdam")}', 'test_dataloader.num_workers=0',
              'log_level=WARNING']
    for name, extra in (('one', []), ('fan', ['--fan-out', '3', '--fan-out-batch', '2'])):
        assert run_tool(tool.main, [SEG_DEMO_CONFIG, untrained_seg_checkpoint, '--work-dir',
                                    str(tmp_path / name), *extra, *common]) == 0
    assert _comparable(condition_records(str(tmp_path / 'one'))) == \
        _comparable(condition_records(str(tmp_path / 'fan')))
