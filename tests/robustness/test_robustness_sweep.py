"""The robustness sweep: tools/robustness_test.py, tools/robustness_merge.py and the
library behind them (reobench_mm.robustness)."""
import hashlib
import importlib.util
import json
import os
import os.path as osp

import pytest
import torch

import reobench_mm  # noqa: F401
from reobench_cli import run_tool
from helpers import (DET_DEMO_CONFIG, PROJECT_ROOT, SEG_DEMO_CONFIG, call_tool_command,
                      free_port, run_tools_together)
from reobench_mm.robustness.plan import (parse_shard, select_corruptions, select_severities,
                                         shard_conditions, sweep_conditions)
from reobench_mm.errors import SweepError
from reobench_mm.robustness.sweep import CheckpointMismatchError, RobustnessSweep, run_sweep
from reobench_corruptions import list_corruptions
from sweep_helpers import sweep_options as _options
from sweep_helpers import untrained_checkpoint as _untrained_checkpoint

TEST_TOOL = osp.join(PROJECT_ROOT, 'tools', 'test.py')
SWEEP_TOOL = osp.join(PROJECT_ROOT, 'tools', 'robustness_test.py')
MERGE_TOOL = osp.join(PROJECT_ROOT, 'tools', 'robustness_merge.py')
SUBSET = ['--corruptions', 'gaussian_noise', 'rotate', '--severities', '1', '5']
REPORT_FILES = {'results.json', 'results.csv', 'report.md', 'severity_curves.png',
                'drop_by_corruption.png'}


def _load_tool(path):
    spec = importlib.util.spec_from_file_location(f'tool_{osp.basename(path)[:-3]}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result_files(work_dir):
    """Condition files, report files and leftover temporary files under ``work_dir``."""
    found = []
    for root, _, files in os.walk(work_dir):
        for name in files:
            if root.endswith('conditions') or name in REPORT_FILES or name.endswith('.tmp') \
                    or name.startswith('shard_'):
                found.append(osp.relpath(osp.join(root, name), work_dir))
    return sorted(found)


def _sweep_command(checkpoint, data_root, work_dir, *arguments, log_level='WARNING'):
    return [SWEEP_TOOL, SEG_DEMO_CONFIG, checkpoint, *SUBSET, '--work-dir', work_dir,
            *arguments, '--cfg-options', *_options(data_root, log_level)[1]]


# ----------------------------------------------------------------------------- selection

def test_selection_and_shards():
    assert select_corruptions(None) == list_corruptions('reobench')
    assert len(select_corruptions(None)) == 12
    assert select_corruptions(['cloud', 'sensor', 'cloud'])[0] == 'cloud'
    assert set(select_corruptions(['geometric'])) == {'rotate', 'scale', 'translate'}
    assert select_severities(None) == [1, 2, 3, 4, 5]
    assert select_severities([5, 1, 5]) == [1, 5]
    conditions = sweep_conditions(['haze', 'rotate'], [1, 5])
    assert conditions == [('clean', 0), ('haze', 1), ('haze', 5), ('rotate', 1), ('rotate', 5)]
    assert parse_shard('1/3') == (1, 3) and parse_shard(None) is None
    shards = [shard_conditions(conditions, (i, 2)) for i in range(2)]
    assert shards[0][0] == ('clean', 0)
    assert sorted(shards[0] + shards[1]) == sorted(conditions)
    assert not set(shards[0]) & set(shards[1])


def test_bad_inputs_give_clear_errors_and_no_files(tmp_path, monkeypatch, capsys):
    checkpoint = tmp_path / 'model.pth'
    torch.save({'state_dict': {}}, str(checkpoint))
    work_dir = tmp_path / 'work'

    def sweep(**kwargs):
        kwargs.setdefault('work_dir', str(work_dir))
        return RobustnessSweep(SEG_DEMO_CONFIG, str(checkpoint), **kwargs)

    with pytest.raises(SweepError, match=r"unknown corruption name\(s\) \['fog'\].*valid:"):
        sweep(corruptions=['cloud', 'fog'])
    with pytest.raises(SweepError, match='empty selection: no corruption'):
        sweep(corruptions=[])
    with pytest.raises(SweepError, match='empty selection: no severity'):
        sweep(severities=[])
    with pytest.raises(SweepError, match=r'severity must be an integer in 1\.\.5'):
        sweep(severities=[0, 6])
    with pytest.raises(SweepError, match='unknown protocol'):
        sweep(protocol='imagenet_c')
    with pytest.raises(SweepError, match="a shard is 'i/n'"):
        sweep(shard='2-of-3')
    with pytest.raises(SweepError, match='0 <= i < n'):
        sweep(shard='3/3')
    with pytest.raises(FileNotFoundError, match='checkpoint'):
        RobustnessSweep(SEG_DEMO_CONFIG, str(tmp_path / 'missing.pth'))
    # a work dir below a regular file cannot be created, even by root
    blocker = tmp_path / 'a_file'
    blocker.write_text('')
    with pytest.raises(SweepError, match='is not writable'):
        sweep(work_dir=str(blocker / 'work'))
    if os.geteuid() != 0:
        locked = tmp_path / 'locked'
        locked.mkdir(mode=0o500)
        with pytest.raises(SweepError, match='is not writable'):
            sweep(work_dir=str(locked / 'work'))
    assert not work_dir.exists()

    # the command line: exit status 2 and the valid names
    tool = _load_tool(SWEEP_TOOL)
    with pytest.raises(SystemExit) as exit_info:
        tool.main([SEG_DEMO_CONFIG, str(checkpoint), '--corruptions', 'fog', '--work-dir',
                   str(work_dir)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "unknown corruption name(s) ['fog']" in error
    assert all(name in error for name in list_corruptions('reobench'))
    assert not work_dir.exists()


def test_checkpoint_that_does_not_fit_fails_before_any_result(demo_data, tmp_path):
    checkpoint = tmp_path / 'other_model.pth'
    torch.save({'state_dict': {'backbone.stem.weight': torch.zeros(3)}, 'meta': {}},
               str(checkpoint))
    work_dir = str(tmp_path / 'work')
    options, _ = _options(osp.join(demo_data, 'potsdam'))
    with pytest.raises(CheckpointMismatchError,
                       match='does not fit the model.*unexpected key.*missing keys'):
        run_sweep(SEG_DEMO_CONFIG, str(checkpoint), corruptions=['haze'], severities=[1],
                  work_dir=work_dir, cfg_options=options)
    assert _result_files(work_dir) == []


def test_condition_files_of_other_inputs_are_not_reused(demo_data, tmp_path):
    checkpoint = _untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    work_dir = str(tmp_path / 'work')
    options, _ = _options(osp.join(demo_data, 'potsdam'))
    sweep = RobustnessSweep(SEG_DEMO_CONFIG, checkpoint, corruptions=['haze'],
                            severities=[1], work_dir=work_dir, cfg_options=options)
    stale = dict(format='reobench_mm.sweep_condition/1', condition='clean',
                 fingerprint=dict(sweep.fingerprint, checkpoint_sha256='0' * 64))
    with open(sweep.condition_file(('clean', 0)), 'w') as handle:
        json.dump(stale, handle)
    with pytest.raises(SweepError, match='written for other inputs.*--force'):
        sweep.run()
    assert not osp.exists(osp.join(work_dir, 'results.json'))


# ----------------------------------------------------------------------------- end to end

@pytest.fixture(scope='module')
def seg_model(seg_model):
    """The cached 30-iteration demo UperNet, as (checkpoint, data root)."""
    return seg_model.checkpoint, seg_model.data_root


@pytest.fixture(scope='module')
def full_sweep(seg_model, tmp_path_factory):
    """An uninterrupted sweep (2 corruptions × severities 1, 5) and a plain clean test."""
    checkpoint, data_root = seg_model
    root = str(tmp_path_factory.mktemp('sweep_full'))
    outputs = run_tools_together(
        _sweep_command(checkpoint, data_root, f'{root}/sweep', log_level='INFO'),
        meanwhile=lambda: call_tool_command(
            [TEST_TOOL, SEG_DEMO_CONFIG, checkpoint, '--work-dir', f'{root}/plain',
             '--cfg-options', *_options(data_root)[1]]))
    return f'{root}/sweep', f'{root}/plain', outputs[0]


@pytest.mark.slow
def test_sweep_writes_the_report_and_matches_a_plain_test(full_sweep, seg_model):
    work_dir, plain_dir, output = full_sweep
    checkpoint, _ = seg_model
    files = set(os.listdir(work_dir))
    assert REPORT_FILES <= files, files
    tags = ['clean', 'gaussian_noise_s1', 'gaussian_noise_s5', 'rotate_s1', 'rotate_s5']
    assert sorted(os.listdir(osp.join(work_dir, 'conditions'))) == \
        sorted([f'{t}.json' for t in tags] + [f'{t}.images.npz' for t in tags])
    for tag in tags:  # one log line per condition, with the metric
        assert f'] {tag}: mIoU ' in output, output[-3000:]

    with open(osp.join(work_dir, 'results.json')) as handle:
        doc = json.load(handle)
    numbers, provenance = doc['numbers'], doc['provenance']
    assert numbers['task'] == 'segmentation' and numbers['metric'] == 'mIoU'
    assert numbers['included']['corruptions'] == ['gaussian_noise', 'rotate']
    assert numbers['included']['severities'] == [1, 5]
    assert len(numbers['conditions']) == 5
    with open(checkpoint, 'rb') as handle:
        assert provenance['checkpoint_sha256'] == hashlib.sha256(handle.read()).hexdigest()
    with open(SEG_DEMO_CONFIG, 'rb') as handle:
        assert provenance['config_sha256'] == hashlib.sha256(handle.read()).hexdigest()
    assert provenance['seed'] == 0 and provenance['protocol'] == 'reobench'
    assert provenance['versions']['mmengine']

    # the clean number is the one of a plain tools/test.py run of the same checkpoint
    with open(osp.join(plain_dir, 'metrics_clean.json')) as handle:
        plain = json.load(handle)['metrics']
    with open(osp.join(work_dir, 'conditions', 'clean.json')) as handle:
        clean = json.load(handle)
    # the sweep's IoUMetric also returns the per-class IoU it computes
    assert {k: v for k, v in clean['metrics'].items() if not k.startswith('IoU.')} == plain
    assert numbers['clean'] == plain['mIoU']
    classes = ['impervious_surface', 'building', 'low_vegetation', 'tree', 'car', 'clutter']
    assert numbers['per_class']['classes'] == classes
    per_class = numbers['conditions'][0]['per_class']
    present = [v for v in per_class.values() if v is not None]
    assert sum(present) / len(present) == pytest.approx(numbers['clean'], abs=0.005)  # rounded
    assert set(numbers['per_class']['per_corruption']) == {'gaussian_noise', 'rotate'}
    noisy = numbers['per_corruption']['gaussian_noise']['severities']['5']
    print(f"\nmIoU clean {numbers['clean']:.2f}, gaussian_noise s5 {noisy:.2f}, "
          f"rotate s5 {numbers['per_corruption']['rotate']['severities']['5']:.2f}")


class _Interrupt(Exception):
    pass


@pytest.mark.slow
def test_interrupted_sweep_resumes_to_identical_results(full_sweep, seg_model, tmp_path):
    reference_dir = full_sweep[0]
    checkpoint, data_root = seg_model
    work_dir = str(tmp_path / 'resumed')
    options, _ = _options(data_root)
    kwargs = dict(corruptions=['gaussian_noise', 'rotate'], severities=[1, 5],
                  work_dir=work_dir, cfg_options=options)
    done = []

    def stop_after_two(condition, record):
        done.append(condition)
        if len(done) == 2:
            raise _Interrupt  # as if killed while the third condition ran

    with pytest.raises(_Interrupt):
        run_sweep(SEG_DEMO_CONFIG, checkpoint, on_condition=stop_after_two, **kwargs)
    assert _result_files(work_dir) == ['conditions/clean.images.npz', 'conditions/clean.json',
                                       'conditions/gaussian_noise_s1.images.npz',
                                       'conditions/gaussian_noise_s1.json']
    outcome = run_sweep(SEG_DEMO_CONFIG, checkpoint, **kwargs)
    assert outcome.skipped == [('clean', 0), ('gaussian_noise', 1)]
    assert outcome.evaluated == [('gaussian_noise', 5), ('rotate', 1), ('rotate', 5)]
    with open(osp.join(work_dir, 'results.json'), 'rb') as a, \
            open(osp.join(reference_dir, 'results.json'), 'rb') as b:
        assert a.read() == b.read(), 'resumed and uninterrupted results differ'
    with open(osp.join(work_dir, 'results.csv'), 'rb') as a, \
            open(osp.join(reference_dir, 'results.csv'), 'rb') as b:
        assert a.read() == b.read()

    # a finished sweep is not evaluated again (the model is built, no image is read) ...
    sweep = RobustnessSweep(SEG_DEMO_CONFIG, checkpoint, **kwargs)
    outcome = sweep.run()
    assert outcome.evaluated == [] and len(outcome.skipped) == 5
    assert outcome.metrics['robust/avg'] == pytest.approx(
        json.load(open(osp.join(reference_dir, 'results.json')))['numbers']['avg'])
    # ... unless forced; dataloader workers (persistent in the config) see each condition
    workers = dict(options, **{'test_dataloader.num_workers': 2,
                               'test_dataloader.persistent_workers': True})
    outcome = run_sweep(SEG_DEMO_CONFIG, checkpoint, force=True, corruptions=['rotate'],
                        severities=[5], work_dir=work_dir, cfg_options=workers)
    assert outcome.evaluated == [('clean', 0), ('rotate', 5)]
    for tag in ('clean', 'rotate_s5'):
        records = []
        for folder in (work_dir, reference_dir):
            with open(osp.join(folder, 'conditions', f'{tag}.json')) as handle:
                records.append(json.load(handle)['metrics'])
        assert records[0] == records[1], tag


@pytest.mark.slow
def test_two_shards_merged_equal_one_full_run(full_sweep, seg_model, tmp_path, capsys):
    reference_dir = full_sweep[0]
    checkpoint, data_root = seg_model
    shard_dirs = [str(tmp_path / f'shard{i}') for i in range(2)]
    options, _ = _options(data_root)
    for i, shard_dir in enumerate(shard_dirs):
        outcome = run_sweep(SEG_DEMO_CONFIG, checkpoint, corruptions=['gaussian_noise', 'rotate'],
                            severities=[1, 5], work_dir=shard_dir, cfg_options=options,
                            shard=f'{i}/2')
        assert outcome.report_files == {} and outcome.manifest
    assert [len(os.listdir(osp.join(d, 'conditions'))) for d in shard_dirs] == [6, 4]
    for i, shard_dir in enumerate(shard_dirs):
        assert not osp.exists(osp.join(shard_dir, 'results.json'))
        with open(osp.join(shard_dir, f'shard_{i}-of-2.json')) as handle:
            manifest = json.load(handle)
        assert manifest['shard'] == [i, 2] and manifest['num_conditions'] == 5
        assert ('clean' in manifest['conditions']) == (i == 0)
    merge = _load_tool(MERGE_TOOL)
    # one shard alone is not a sweep
    assert run_tool(merge.main, [shard_dirs[1], '--out', str(tmp_path / 'partial')]) == 2
    assert 'shards [0] of 2 have no manifest' in capsys.readouterr().err
    assert not osp.exists(tmp_path / 'partial' / 'results.json')

    out = str(tmp_path / 'merged')
    assert run_tool(merge.main, [*shard_dirs, '--out', out]) == 0
    assert REPORT_FILES <= set(os.listdir(out))
    for name in ('results.json', 'results.csv', 'report.md', 'worst_cases.json'):
        with open(osp.join(out, name), 'rb') as a, \
                open(osp.join(reference_dir, name), 'rb') as b:
            expected = b.read()
            if name == 'report.md':  # the merge has no model to draw the thumbnails with
                expected = expected.replace(b'![worst cases](worst_cases.png)\n\n', b'')
            assert a.read() == expected, f'merged {name} differs from the full run'
    assert not osp.exists(osp.join(out, 'worst_cases.png'))


@pytest.mark.slow
def test_rotated_detection_sweep(demo_data, tmp_path):
    """The task is inferred from the config: DOTAMetric's mAP, task 'detection'; per-class
    AP and the detection calibration error are recorded."""
    data_root = osp.join(demo_data, 'dior')
    checkpoint = _untrained_checkpoint(DET_DEMO_CONFIG, str(tmp_path / 'init.pth'))
    work_dir = str(tmp_path / 'sweep')
    with pytest.raises(SweepError, match='temperature scaling is for segmentation'):
        RobustnessSweep(DET_DEMO_CONFIG, checkpoint, work_dir=work_dir,
                        temperature_scaling=True)
    assert not osp.exists(work_dir)
    outcome = run_sweep(DET_DEMO_CONFIG, checkpoint, corruptions=['haze'], severities=[3],
                        work_dir=work_dir, plots=False, calibration=True,
                        cfg_options=_options(data_root)[0])
    assert outcome.evaluated == [('clean', 0), ('haze', 3)]
    with open(osp.join(work_dir, 'results.json')) as handle:
        numbers = json.load(handle)['numbers']
    assert numbers['task'] == 'detection' and numbers['metric'] == 'mAP'
    assert [c['condition'] for c in numbers['conditions']] == ['clean', 'haze@3']
    with open(osp.join(work_dir, 'conditions', 'haze_s3.json')) as handle:
        record = json.load(handle)
    classes = ['airplane', 'ship', 'storagetank', 'vehicle']
    assert set(record['metrics']) == {'dota/mAP', 'dota/AP50'} | \
        {f'dota/AP.{c}' for c in classes} | \
        {f'calib/{k}' for k in ('ECE', 'MCE', 'gap', 'cwECE', 'num_detections')}
    assert record['task'] == 'rotated_detection'
    reliability = record['calibration']['calib']['reliability']
    assert sum(reliability['count']) == record['metrics']['calib/num_detections']
    assert numbers['per_class']['classes'] == classes
    assert 'calib/ECE' in numbers['extra']
    assert not osp.exists(osp.join(work_dir, 'severity_curves.png'))
    # the per-image statistics give the recorded mAP, per-class AP and D-ECE
    from reobench_mm.evaluation.functional.condition_stats import ImageStats
    from reobench_mm.evaluation.metrics.rotated_map import float32_shortest
    with open(osp.join(work_dir, 'conditions', record['images']['file']), 'rb') as handle:
        stats = ImageStats.from_bytes(handle.read())
    assert stats.task.kind == 'rotated_detection' and stats.num_images == 3
    assert float32_shortest(stats.task.recorded_value()) == record['metrics']['dota/mAP']
    aps, gts = stats.task.class_ap()
    for index, name in enumerate(classes):
        recorded = record['metrics'][f'dota/AP.{name}']
        if gts[0, index] > 0:
            assert float(aps[0, index]) == pytest.approx(recorded, abs=1e-7)
    assert stats.calibration['calib'].values()['ECE'][0] == pytest.approx(
        record['metrics']['calib/ECE'], abs=1e-9)


@pytest.mark.slow
def test_calibration_and_temperature_scaling_in_the_sweep(full_sweep, seg_model, tmp_path):
    """Calibration in every condition, a temperature fitted on clean pixels, the report's
    calibration table and plots; the predictions (mIoU) are those of the plain sweep."""
    reference_dir = full_sweep[0]
    checkpoint, data_root = seg_model
    options = dict(_options(data_root)[0], **{
        'val_dataloader.dataset.data_root': data_root, 'val_dataloader.num_workers': 0,
        'val_dataloader.persistent_workers': False})
    work_dir = str(tmp_path / 'calibrated')
    # the demo's val_dataloader is its test set: refused unless accepted on purpose
    with pytest.raises(SweepError, match='fitted on evaluated images.*temperature_split'):
        run_sweep(SEG_DEMO_CONFIG, checkpoint, corruptions=['gaussian_noise'],
                  severities=[1, 5], work_dir=work_dir, cfg_options=options,
                  temperature_scaling=True)
    assert not osp.exists(work_dir)
    outcome = run_sweep(SEG_DEMO_CONFIG, checkpoint, corruptions=['gaussian_noise'],
                        severities=[1, 5], work_dir=work_dir, cfg_options=options,
                        temperature_scaling=True, temperature_on_test=True)
    assert outcome.evaluated == [('clean', 0), ('gaussian_noise', 1), ('gaussian_noise', 5)]
    files = set(os.listdir(work_dir))
    assert {'ece_vs_severity.png', 'reliability_diagrams.png', 'reliability_diagrams_ts.png',
            'risk_coverage.png', 'temperature.json'} <= files, files

    with open(osp.join(work_dir, 'temperature.json')) as handle:
        fitted = json.load(handle)
    assert fitted['source'].startswith('val_dataloader (may share the evaluated images')
    assert fitted['num_pixels'] > 0 and fitted['num_images'] == 3
    # the fitted temperature lowers the NLL of the clean pixels it was fitted on
    assert fitted['temperature'] != pytest.approx(1.0, abs=1e-3)
    assert fitted['nll_after'] < fitted['nll_before']

    with open(osp.join(work_dir, 'results.json')) as handle:
        doc = json.load(handle)
    with open(osp.join(reference_dir, 'results.json')) as handle:
        reference = json.load(handle)['numbers']
    numbers = doc['numbers']
    assert doc['provenance']['extra']['temperature']['temperature'] == fitted['temperature']
    by_condition = {c['condition']: c for c in reference['conditions']}
    for row in numbers['conditions']:
        assert row['value'] == by_condition[row['condition']]['value']  # same predictions
        extra = row['extra']
        for key in ('ECE', 'gap', 'NLL', 'Brier', 'cwECE', 'AURC', 'eAURC', 'acc@90cov'):
            assert f'calib/{key}' in extra and f'calib_ts/{key}' in extra
        assert 0.0 <= extra['calib/ECE'] <= 1.0
    clean = numbers['conditions'][0]['extra']
    # the val pixels are the clean test pixels here, sampled: the NLL of all of them drops too
    assert clean['calib_ts/NLL'] < clean['calib/NLL']
    with open(osp.join(work_dir, 'conditions', 'gaussian_noise_s5.json')) as handle:
        record = json.load(handle)
    details = record['calibration']
    assert set(details) == {'calib', 'calib_ts'}
    assert details['calib_ts']['temperature'] == fitted['temperature']
    assert details['calib']['temperature'] == 1.0
    assert 'stats' not in details['calib']  # the accumulators are not kept
    assert sum(details['calib']['reliability']['count']) == details['calib']['num_pixels']
    with open(osp.join(work_dir, 'report.md')) as handle:
        report = handle.read()
    assert '## Calibration under corruption' in report and '`calib_ts/ECE`' in report
    assert '![reliability_diagrams](reliability_diagrams.png)' in report
    assert f"T = {fitted['temperature']:.3f}" in report

    # resumed: the fitted temperature is read back, not fitted again
    sweep = RobustnessSweep(SEG_DEMO_CONFIG, checkpoint, corruptions=['gaussian_noise'],
                            severities=[1, 5], work_dir=work_dir, cfg_options=options,
                            temperature_scaling=True, temperature_on_test=True)
    assert sweep.run().evaluated == []


@pytest.mark.slow
def test_two_processes_give_the_numbers_of_one(full_sweep, seg_model, tmp_path):
    """torchrun with 2 processes (gloo on a CPU-only machine): MMEngine's sampler splits
    the 3 test images over the ranks (padding one), the metrics gather and trim them,
    and every number equals the single-process sweep."""
    reference_dir = full_sweep[0]
    checkpoint, data_root = seg_model
    work_dir = str(tmp_path / 'two_processes')
    command = ['-m', 'torch.distributed.run', '--nproc_per_node', '2', '--master_addr',
               '127.0.0.1', '--master_port', str(free_port()),
               *_sweep_command(checkpoint, data_root, work_dir, '--launcher', 'pytorch')]
    output = run_tools_together(command)[0]
    assert '5 conditions evaluated, 0 skipped' in output, output[-3000:]
    documents = []
    for folder in (work_dir, reference_dir):
        with open(osp.join(folder, 'results.json')) as handle:
            documents.append(json.load(handle)['numbers'])
    assert documents[0] == documents[1]
    assert documents[0]['per_class'] is not None


@pytest.mark.slow
def test_decoding_once_for_all_conditions_changes_no_number(full_sweep, seg_model, tmp_path):
    """The decode cache (default) against decoding per condition, in process and with
    forked workers that inherit the filled cache."""
    reference_dir = full_sweep[0]
    checkpoint, data_root = seg_model
    options, _ = _options(data_root)
    workers = dict(options, **{'test_dataloader.num_workers': 2})
    for name, cache_bytes, cfg_options in (('uncached', 0, options),
                                           ('cached_workers', 2 * 1024**3, workers)):
        sweep = RobustnessSweep(SEG_DEMO_CONFIG, checkpoint, corruptions=['rotate'],
                                severities=[5], work_dir=str(tmp_path / name),
                                cfg_options=cfg_options, decode_cache_bytes=cache_bytes)
        sweep.run()
        if cache_bytes:
            (cache, ) = sweep.decode_caches
            assert len(cache.store) == 3 and cache.misses == 3  # filled once, up front
            assert [type(s).__name__ for s in cache.steps] == ['LoadImageFromFile',
                                                               'LoadAnnotations']
        else:
            assert sweep.decode_caches == []
        for tag in ('clean', 'rotate_s5'):
            records = []
            for folder in (str(tmp_path / name), reference_dir):
                with open(osp.join(folder, 'conditions', f'{tag}.json')) as handle:
                    records.append(json.load(handle)['metrics'])
            assert records[0] == records[1], (name, tag)
    with pytest.raises(SweepError, match='decode_cache_bytes'):
        RobustnessSweep(SEG_DEMO_CONFIG, checkpoint, decode_cache_bytes=-1,
                        work_dir=str(tmp_path / 'bad'))
